// Text generation with a language-model plan's eval function, as nanoGPT's sample.py draws it:
// logits of the last position over the temperature, the top k kept, a draw from their softmax.
// Tokens are bytes (a vocabulary of 256), or a Hugging Face tokenizer's (tokenizer.json).
#pragma once

#include <string>

#include "exec/executor.h"
#include "text/tokenizer.h"

namespace dtc {

struct SamplingOptions {
  double temperature = 0.8;  // 0: greedy (the argmax)
  int64_t topK = 200;        // 0: the whole vocabulary
  uint64_t seed = 1337;
  // The prompt's and the continuation's tokens; none: bytes, which a vocabulary of 256 is (or
  // larger with `bytes`: the first 256 logits drawn from).
  const text::Tokenizer* tokenizer = nullptr;
  bool bytes = false;
};

// Continues `prompt` by `count` tokens drawn from the logits at the last position; the context
// slides once it is longer than the model's T. Returns the whole text: the prompt and its
// continuation (decoded together, as a tokenizer decodes a sequence).
StatusOr<std::string> generate(Executor& ex, const std::string& prompt, int64_t count,
                               const SamplingOptions& sampling);
// Whether generate() can run on this plan with these options (checked before training, not
// after): a language model's token input found, tokens it can read and write.
Status checkCanGenerate(Executor& ex, const SamplingOptions& sampling);

}  // namespace dtc
