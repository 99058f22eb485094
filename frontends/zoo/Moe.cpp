// Pieces every zoo model with mixture-of-experts MLPs shares: the options' check and the
// training loss that adds each layer's router losses.
#include "zoo/Moe.h"

#include <sstream>

namespace dtc::zoo {

namespace {

std::string shortNumber(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

std::string validateMoe(const MoeOptions& m) {
  if (!m.enabled()) return "";
  if (m.topK < 1 || m.topK > m.experts)
    return "--top-k " + std::to_string(m.topK) + " must be in [1, " + std::to_string(m.experts) +
           "] (--experts)";
  if (!(m.capacityFactor > 0))
    return "--capacity-factor must be > 0, got " + shortNumber(m.capacityFactor);
  if (m.score != "softmax" && m.score != "sigmoid")
    return "--router-score must be softmax or sigmoid, got '" + m.score + "'";
  if (m.every < 1) return "--moe-every must be >= 1, got " + std::to_string(m.every);
  if (!(m.auxWeight >= 0) || !(m.zWeight >= 0))
    return "--aux-loss-weight and --z-loss-weight must be >= 0";
  return "";
}

void trainingLoss(ModelBuilder& b, const MoeOptions& o, const std::vector<std::string>& layers) {
  if (layers.empty()) {
    b.node("loss", "SoftmaxCrossEntropy", {"logits", "targets"}, {"loss"});
    return;
  }
  b.node("cross_entropy", "SoftmaxCrossEntropy", {"logits", "targets"}, {"cross_entropy"});
  std::vector<std::string> terms{"cross_entropy"};
  for (const std::string& m : layers)
    for (auto [term, weight] :
         {std::pair{m + ".aux_loss", o.auxWeight}, std::pair{m + ".z_loss", o.zWeight}}) {
      if (weight == 0) continue;
      b.node(term + ".weighted", "Scale", {term}, {term + ".weighted"},
             {Attr::real("factor", weight)});
      terms.push_back(term + ".weighted");
    }
  if (terms.size() == 1) b.node("loss", "Scale", {terms[0]}, {"loss"}, {Attr::real("factor", 1.0)});
  std::string total = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    const std::string sum = i + 1 == terms.size() ? "loss" : terms[i] + ".total";
    b.node(sum, "Add", {total, terms[i]}, {sum});
    total = sum;
  }
}

}  // namespace dtc::zoo
