// Shared helpers for every layer: the one-line errors (core/error.h) and OpenMP glue.
// Every CPU op is a template over the scalar type T (float for training, double for the
// finite-difference gradient checks), so the reference math is written once.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include "core/error.h"

#if defined(_OPENMP)
#include <omp.h>
#define OMP_PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#define OMP_PARALLEL_FOR_COLLAPSE2 _Pragma("omp parallel for collapse(2) schedule(static)")
#else
#define OMP_PARALLEL_FOR
#define OMP_PARALLEL_FOR_COLLAPSE2
#endif
