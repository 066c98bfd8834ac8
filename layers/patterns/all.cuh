// The GPU schedule (<stem>.cuh) of every pattern of layers/patterns/list.h, one line each, in
// the list's order.
#pragma once
#include "layers/patterns/all.h"
#include "layers/patterns/dense.cuh"
#include "layers/patterns/dilated.cuh"
#include "layers/patterns/block_sparse.cuh"
#include "layers/patterns/fixed.cuh"
