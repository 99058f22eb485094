#include "planfile/moe_summary.h"

namespace dtc {

std::vector<MoeLayer> moeLayersOf(const plan::Function& f) {
  std::vector<MoeLayer> out;
  if (!f.steps() || !f.values()) return out;
  auto shape = [&](uint32_t id) {
    std::vector<int64_t> s;
    if (id < f.values()->size() && f.values()->Get(id)->shape())
      for (int64_t d : *f.values()->Get(id)->shape()) s.push_back(d);
    return s;
  };
  for (const plan::Step* step : *f.steps()) {
    // (x [G, S, D], expert [G, S, K], slot) -> buffer [E, G, C, D]; the plan was verified.
    if (step->kernel() != plan::Kernel::moe_dispatch || !step->inputs() || !step->outputs() ||
        step->inputs()->size() != 3 || step->outputs()->size() != 1)
      continue;
    const std::vector<int64_t> x = shape(step->inputs()->Get(0));
    const std::vector<int64_t> choices = shape(step->inputs()->Get(1));
    const std::vector<int64_t> buffer = shape(step->outputs()->Get(0));
    if (x.size() != 3 || choices.size() != 3 || buffer.size() != 4) continue;
    MoeLayer layer;
    layer.loc = step->loc() ? step->loc()->str() : "";
    layer.experts = buffer[0];
    layer.topK = choices[2];
    layer.capacity = buffer[2];
    layer.groups = x[0];
    layer.tokens = x[1];
    layer.width = x[2];
    layer.bufferBytes = static_cast<uint64_t>(buffer[0] * buffer[1] * buffer[2] * buffer[3]) * 4;
    out.push_back(layer);
  }
  return out;
}

}  // namespace dtc
