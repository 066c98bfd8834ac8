// Dense attention has no parameters of its own (whether it is causal is every pattern's);
// its members of AttnPattern, AttnPatternArgs and PatternFlags are empty.
#pragma once

struct DenseParams {};
using DenseArgs = DenseParams;
inline DenseArgs to_args(const DenseParams& p) { return p; }
struct DenseFlags {};
// What its flash-kernel launch carries beyond the shapes (PatternLaunchArgs): nothing.
struct DenseLaunchArgs {};
