// Shared helpers for every layer: one-line fatal errors and OpenMP glue.
// Every CPU op is a template over the scalar type T (float for training, double for the
// finite-difference gradient checks), so the reference math is written once.
#pragma once
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// Print one line "error: <message>" to stderr and exit non-zero. Messages name the file or
// flag at fault and what to do about it.
[[noreturn]] inline void fatal(const char* fmt, ...) {
    std::fflush(stdout);
    std::fputs("error: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::exit(1);
}

#if defined(_OPENMP)
#include <omp.h>
#define OMP_PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#define OMP_PARALLEL_FOR_COLLAPSE2 _Pragma("omp parallel for collapse(2) schedule(static)")
#else
#define OMP_PARALLEL_FOR
#define OMP_PARALLEL_FOR_COLLAPSE2
#endif
