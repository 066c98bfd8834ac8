// What the training and inference benchmarks share on the host: comma-separated size lists from
// their flags, and the markdown table written to --out (for notes/ and the README).
#pragma once
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>
#include "layers/common.h"

inline std::vector<int> int_list(const std::string& s) {
    std::vector<int> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
    return out;
}

inline void write_table(const std::string& path, const std::string& table) {
    if (path.empty()) return;
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) fatal("cannot write %s", path.c_str());
    std::fputs(table.c_str(), f);
    std::fclose(f);
}
