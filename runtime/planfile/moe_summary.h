// The mixture-of-experts layers of a plan's function, as `dtc inspect` reports them: each
// layer's experts, top-k and capacity, read from its dispatch step's operands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planfile/plan.h"

namespace dtc {

struct MoeLayer {
  std::string loc;  // the model node
  int64_t experts = 0, topK = 0, capacity = 0;
  int64_t groups = 0, tokens = 0, width = 0;  // per rank: sequences, tokens of each, channels
  uint64_t bufferBytes = 0;                   // the dispatch buffer [E, G, C, D] on one rank
};

// One entry per moe_dispatch step of `f` (each layer's forward), in step order.
std::vector<MoeLayer> moeLayersOf(const plan::Function& f);

}  // namespace dtc
