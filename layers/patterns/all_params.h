// The parameter header (<stem>_params.h) of every pattern of layers/patterns/list.h, one line each, in
// the list's order.
#pragma once
#include "layers/patterns/dense_params.h"
#include "layers/patterns/dilated_params.h"
#include "layers/patterns/block_sparse_params.h"
#include "layers/patterns/fixed_params.h"
