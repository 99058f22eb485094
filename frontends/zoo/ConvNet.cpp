#include <cmath>

#include "zoo/Zoo.h"

namespace dtc::zoo {

std::vector<uint8_t> buildConvNet(const ConvNetOptions& o) {
  ModelBuilder b("convnet");
  b.input("input", model::DType::f32, {-1, 784});
  b.input("target", model::DType::i64, {-1});
  b.node("image", "Reshape", {"input"}, {"image"}, {Attr::ints("shape", {-1, 1, 28, 28})});
  std::string x = "image";
  int64_t in = 1;
  for (int64_t block = 1; block <= 2; ++block) {
    const int64_t out = 16 * block;
    const std::string p = "layer" + std::to_string(block);
    // nn.Conv2d.reset_parameters: weight and bias both U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    const double bound = 1.0 / std::sqrt(static_cast<double>(in * 5 * 5));
    b.uniformParameter(p + ".0.weight", {out, in, 5, 5}, -bound, bound, o.seed);
    b.uniformParameter(p + ".0.bias", {out}, -bound, bound, o.seed);
    b.constantParameter(p + ".1.weight", {out}, 1.0);
    b.constantParameter(p + ".1.bias", {out}, 0.0);
    b.constantParameter(p + ".1.running_mean", {out}, 0.0, /*trainable=*/false);
    b.constantParameter(p + ".1.running_var", {out}, 1.0, /*trainable=*/false);
    b.node(p + ".0", "Conv", {x, p + ".0.weight", p + ".0.bias"}, {p + ".conv"},
           {Attr::ints("stride", {1, 1}), Attr::ints("padding", {2, 2})});
    b.node(
        p + ".1", "BatchNormalization",
        {p + ".conv", p + ".1.weight", p + ".1.bias", p + ".1.running_mean", p + ".1.running_var"},
        {p + ".bn"}, {Attr::real("eps", 1e-5), Attr::real("momentum", 0.1)});
    b.node(p + ".2", "Relu", {p + ".bn"}, {p + ".relu"});
    b.node(p + ".3", "MaxPool", {p + ".relu"}, {p + ".pool"},
           {Attr::ints("kernel", {2, 2}), Attr::ints("stride", {2, 2})});
    x = p + ".pool";
    in = out;
  }
  b.node("flatten", "Flatten", {x}, {"features"});
  const double bound = 1.0 / std::sqrt(7.0 * 7.0 * 32.0);
  b.uniformParameter("fc.weight", {o.classes, 7 * 7 * 32}, -bound, bound, o.seed);
  b.uniformParameter("fc.bias", {o.classes}, -bound, bound, o.seed);
  b.node("fc", "Linear", {"features", "fc.weight", "fc.bias"}, {"logits"});
  b.node("loss", "SoftmaxCrossEntropy", {"logits", "target"}, {"loss"});
  b.setOutputs({"loss", "logits"}, "loss", "logits", "target");
  return b.finish();
}

}  // namespace dtc::zoo
