// One-line errors for every program and library part (core/: no dependency on the rest).
#pragma once
#include <cstdarg>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <string>

// Errors the user can fix (a bad flag, file or config) end the program with one line
// "error: <message>" naming the file or flag at fault and what to do about it. fatal() throws
// FatalError; every program's main runs inside guarded_main(), which prints that line and
// returns 1. Throwing rather than exiting lets a caller (a test, a fuzzer) observe the error,
// and lets guarded_main turn every other escape (out of memory, a library's exception) into a
// one-line error too, so no input can end a program in an uncaught exception.
struct FatalError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fatal(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    const int n = std::vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < (int)sizeof small) throw FatalError(n < 0 ? std::string(fmt) : std::string(small));
    std::string big((size_t)n + 1, '\0');
    va_start(ap, fmt);
    std::vsnprintf(&big[0], big.size(), fmt, ap);
    va_end(ap);
    big.resize((size_t)n);
    throw FatalError(big);
}

inline void print_error_line(const char* message) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", message);
    std::fflush(stderr);
}

// int main(int argc, char** argv) { return guarded_main([&] { ...; return 0; }); }
template <class Body>
int guarded_main(Body&& body) noexcept {
    try {
        return body();
    } catch (const FatalError& e) {
        print_error_line(e.what());
    } catch (const std::bad_alloc&) {
        print_error_line("out of host memory: use smaller sizes (batch, sequence length, model) or free memory");
    } catch (const std::exception& e) {
        const std::string line = std::string("internal error (") + e.what() + "): please report this with the command that caused it";
        print_error_line(line.c_str());
    } catch (...) {
        print_error_line("internal error (unknown exception): please report this with the command that caused it");
    }
    return 1;
}
