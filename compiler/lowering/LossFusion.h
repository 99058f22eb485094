// The loss and its gradient in one step, as a pattern of the lowering onto kernels: where
// softmax_cross_entropy(logits, labels) and softmax_cross_entropy_grad(dloss, logits, labels) read
// the same logits, one `softmax_cross_entropy_with_grad`(logits, labels, dloss) -> (loss,
// dlogits) reads them once, as llm.c's fused classifier. Under mixed precision it reads the
// 16-bit logits the LM head's GEMM wrote (the widening cast before the loss goes) and writes the
// 16-bit gradient the head's backward GEMMs read (the narrowing cast after it goes): no f32 copy
// of [rows, vocabulary] is left, and memory planning lets dlogits take the logits' bytes
// (ops/in_place.h). Every value is the unfused steps' bit for bit (widening is exact, and the
// kernel rounds as the cast did).
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dtc {

void fuseCrossEntropy(mlir::func::FuncOp function);

}  // namespace dtc
