// Host memory this process may still take, for the memory planners (model/memory_plan.h,
// tools/attention_tool.cu).
#pragma once
#include <unistd.h>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

// Host memory this process may still take: MemAvailable, lowered by a cgroup (v2 or v1) limit.
inline double host_bytes_available() {
    double avail = -1;
    std::ifstream mi("/proc/meminfo");
    std::string key;
    double kb;
    std::string unit;
    while (mi >> key >> kb) {
        std::getline(mi, unit);
        if (key == "MemAvailable:") {
            avail = kb * 1024;
            break;
        }
    }
    if (avail < 0) avail = (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    auto read_num = [](const char* path, double* v) {
        std::ifstream f(path);
        std::string s;
        if (!(f >> s) || s == "max") return false;
        char* end = nullptr;
        *v = std::strtod(s.c_str(), &end);
        return end && *end == 0;
    };
    double limit, used;
    if (read_num("/sys/fs/cgroup/memory.max", &limit) && read_num("/sys/fs/cgroup/memory.current", &used))
        avail = std::min(avail, std::max(0.0, limit - used));
    else if (read_num("/sys/fs/cgroup/memory/memory.limit_in_bytes", &limit) &&
             read_num("/sys/fs/cgroup/memory/memory.usage_in_bytes", &used) && limit < 1e18)
        avail = std::min(avail, std::max(0.0, limit - used));
    return avail;
}

