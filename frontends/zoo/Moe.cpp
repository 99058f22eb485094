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

void routerLossTerms(ModelBuilder& b, const MoeOptions& o, const std::string& moe,
                     std::vector<std::string>& terms) {
  for (auto [term, weight] :
       {std::pair{moe + ".aux_loss", o.auxWeight}, std::pair{moe + ".z_loss", o.zWeight}}) {
    if (weight == 0) continue;
    b.node(term + ".weighted", "Scale", {term}, {term + ".weighted"},
           {Attr::real("factor", weight)});
    terms.push_back(term + ".weighted");
  }
}

void trainingLoss(ModelBuilder& b, const std::vector<std::string>& terms) {
  if (terms.empty()) {
    b.node("loss", "SoftmaxCrossEntropy", {"logits", "targets"}, {"loss"});
    return;
  }
  b.node("cross_entropy", "SoftmaxCrossEntropy", {"logits", "targets"}, {"cross_entropy"});
  // The partial sums' names have no all-digit component: they are no layer's nodes.
  std::string total = "cross_entropy";
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string sum = i + 1 == terms.size() ? "loss" : "loss_terms_" + std::to_string(i + 1);
    b.node(sum, "Add", {total, terms[i]}, {sum});
    total = sum;
  }
}

}  // namespace dtc::zoo
