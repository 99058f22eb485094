// The zoo's causal self-attention, shared by its transformers.
#pragma once

#include <cstdint>
#include <string>

#include "model/ModelBuilder.h"

namespace dtc::zoo {

struct AttentionOptions {
  double scale = 0;    // the scores' factor (0: 1/sqrt(D))
  double dropout = 0;  // on the attention probabilities, in training
};

// Attention over q, k and v already split into heads ([B, heads, T, D]): the scores, the causal
// softmax at `scale`, dropout of the probabilities where asked, the context, and the heads
// merged back into `out` [B, T, heads·D]. Nodes and intermediate values are named under
// `prefix` (prefix.scores, prefix.softmax, ...).
void causalAttention(ModelBuilder& b, const std::string& prefix, const std::string& q,
                     const std::string& k, const std::string& v, int64_t t, int64_t heads,
                     int64_t d, const std::string& out, const AttentionOptions& options = {});

}  // namespace dtc::zoo
