#include <cmath>

#include "zoo/Zoo.h"

namespace dtc::zoo {

std::vector<uint8_t> buildMlp(const MlpOptions& options) {
  ModelBuilder b("mlp");
  b.input("input", model::DType::f32, {-1, options.input});
  b.input("target", model::DType::i64, {-1});
  std::vector<int64_t> widths = options.hidden;
  widths.push_back(options.classes);
  std::string x = "input";
  int64_t fanIn = options.input;
  for (size_t i = 0; i < widths.size(); ++i) {
    std::string fc = "fc" + std::to_string(i);
    // nn.Linear.reset_parameters: kaiming_uniform_(a=sqrt(5)) on the weight and
    // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the bias both reduce to this bound.
    double bound = 1.0 / std::sqrt(static_cast<double>(fanIn));
    b.uniformParameter(fc + ".weight", {widths[i], fanIn}, -bound, bound, options.seed);
    b.uniformParameter(fc + ".bias", {widths[i]}, -bound, bound, options.seed);
    bool last = i + 1 == widths.size();
    std::string y = last ? "logits" : fc;
    b.node(fc, "Linear", {x, fc + ".weight", fc + ".bias"}, {y});
    if (!last) {
      std::string relu = "relu" + std::to_string(i);
      b.node(relu, "Relu", {y}, {relu});
      y = relu;
    }
    x = y;
    fanIn = widths[i];
  }
  b.node("loss", "SoftmaxCrossEntropy", {"logits", "target"}, {"loss"});
  b.setOutputs({"loss", "logits"}, "loss", "logits", "target");
  return b.finish();
}

}  // namespace dtc::zoo
