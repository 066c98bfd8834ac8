// The check helpers every C++ test (tests/*.cpp, tests/gpu/*.cu) shares:
//   check(ok, name[, detail])   prints "PASS name" or "FAIL name" (": detail" after it when given)
//                               and counts it; returns ok
//   strf(fmt, ...)              printf into a std::string (core/error.h), for check lines with numbers
//   check_report()              prints "N passed, M failed" (the line tests/run_all.sh sums) and
//                               returns the exit status: 0 when nothing failed, else 1
//   expect_fatal(name, body, want)       passes when body throws FatalError (core/error.h) with a
//                                        one-line message holding every string of want
//   expect_fatal_exit(name, body, want)  the same through a whole program: body runs in a forked
//                                        child inside guarded_main, which must exit 1 after one
//                                        stderr line "error: ..." holding every string of want
#pragma once
#include <sys/wait.h>
#include <unistd.h>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

inline int g_passed = 0, g_failed = 0;

inline bool check(bool ok, const std::string& name, const std::string& detail = "") {
    std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stdout);
    (ok ? g_passed : g_failed)++;
    return ok;
}

inline int check_report() {
    std::printf("%d passed, %d failed\n", g_passed, g_failed);
    std::fflush(stdout);
    return g_failed ? 1 : 0;
}

inline bool contains_all(const std::string& text, const std::vector<std::string>& want) {
    for (const std::string& w : want)
        if (text.find(w) == std::string::npos) return false;
    return true;
}

inline bool expect_fatal(const std::string& name, const std::function<void()>& body, const std::vector<std::string>& want) {
    try {
        body();
    } catch (const FatalError& e) {
        const std::string msg = e.what();
        return check(msg.find('\n') == std::string::npos && contains_all(msg, want), name, msg);
    }
    return check(false, name, "accepted (no error)");
}

inline bool expect_fatal_exit(const std::string& name, const std::function<void()>& body,
                              const std::vector<std::string>& want) {
    std::fflush(stdout);
    int fds[2];
    if (pipe(fds) != 0) return check(false, name + " (pipe)");
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        if (!std::freopen("/dev/null", "w", stdout)) _exit(99);
        _exit(guarded_main([&] { body(); return 0; }));  // 0 when body returned: fatal was not called
    }
    close(fds[1]);
    std::string err;
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, size_t(n));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 1 && err.rfind("error: ", 0) == 0 && err.back() == '\n' &&
                    err.find('\n') == err.size() - 1 && contains_all(err, want);
    if (!ok) std::printf("  got exit %d, stderr: %s", WIFEXITED(status) ? WEXITSTATUS(status) : -1, err.c_str());
    return check(ok, name);
}
