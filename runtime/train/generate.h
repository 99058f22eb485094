// Greedy text generation with a language-model plan's eval function (byte-level vocabularies).
#pragma once

#include <string>

#include "exec/executor.h"

namespace dtc {

// Continues `prompt` by `count` tokens, each the argmax of the logits at the last position;
// the context slides once it is longer than the model's T. Tokens are bytes, so the model's
// vocabulary must be at least 256. Returns the continuation (without the prompt).
StatusOr<std::string> generateGreedy(Executor& ex, const std::string& prompt, int64_t count);

}  // namespace dtc
