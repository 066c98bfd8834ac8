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

// printf into a std::string: messages built in pieces, and fatal()'s line.
inline std::string vstrf(const char* fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    std::string out(n > 0 ? (size_t)n + 1 : 1, '\0');
    if (n > 0) std::vsnprintf(&out[0], out.size(), fmt, again);
    va_end(again);
    out.resize(n > 0 ? (size_t)n : 0);
    return n < 0 ? std::string(fmt) : out;
}
inline std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string strf(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string out = vstrf(fmt, ap);
    va_end(ap);
    return out;
}

[[noreturn]] inline void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] inline void fatal(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string line = vstrf(fmt, ap);
    va_end(ap);
    throw FatalError(line);
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
