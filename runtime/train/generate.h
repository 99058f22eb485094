// Text generation with a language-model plan's eval function (byte-level vocabularies), as
// nanoGPT's sample.py draws it: logits of the last position over the temperature, the top k
// kept, a draw from their softmax.
#pragma once

#include <string>

#include "exec/executor.h"

namespace dtc {

struct SamplingOptions {
  double temperature = 0.8;  // 0: greedy (the argmax)
  int64_t topK = 200;        // 0: the whole vocabulary
  uint64_t seed = 1337;
};

// Continues `prompt` by `count` tokens drawn from the logits at the last position; the context
// slides once it is longer than the model's T. Tokens are bytes, so the model's vocabulary must
// be at least 256 (only the first 256 logits are drawn from). Returns the continuation.
StatusOr<std::string> generate(Executor& ex, const std::string& prompt, int64_t count,
                               const SamplingOptions& sampling);
// Whether generate() can run on this plan (checked before training, not after).
Status checkCanGenerate(Executor& ex);

}  // namespace dtc
