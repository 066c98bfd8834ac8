// The module header (<stem>.h) of every pattern of layers/patterns/list.h, one line each, in
// the list's order.
#pragma once
#include "layers/patterns/pattern_params.h"
#include "layers/patterns/dense.h"
#include "layers/patterns/dilated.h"
#include "layers/patterns/block_sparse.h"
#include "layers/patterns/fixed.h"
