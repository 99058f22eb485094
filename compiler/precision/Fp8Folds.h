// dtc-fold-casts' rewrites around FP8 quantization: a quantization moves above the all-gather
// of its input (the gather then moves FP8 codes), and amax and quantization take a narrowing
// cast to bf16 in, rounding as they load.
#pragma once

#include "mlir/IR/PatternMatch.h"

namespace dtc {

void populateFp8FoldPatterns(mlir::RewritePatternSet& patterns);

}  // namespace dtc
