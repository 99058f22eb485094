// A small convenience layer over the FlatBuffers builder for writing model graphs in C++.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model_generated.h"

namespace dtc::zoo {

// A node attribute: exactly one of the value kinds.
struct Attr {
  static Attr integer(std::string name, int64_t v) {
    return {std::move(name), model::AttrKind::int_, v, 0, "", {}};
  }
  static Attr real(std::string name, double v) {
    return {std::move(name), model::AttrKind::float_, 0, v, "", {}};
  }
  static Attr text(std::string name, std::string v) {
    return {std::move(name), model::AttrKind::string, 0, 0, std::move(v), {}};
  }
  static Attr ints(std::string name, std::vector<int64_t> v) {
    return {std::move(name), model::AttrKind::ints, 0, 0, "", std::move(v)};
  }
  std::string name;
  model::AttrKind kind;
  int64_t i;
  double f;
  std::string s;
  std::vector<int64_t> list;
};

class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name) : name_(std::move(name)) {}

  void input(const std::string& name, model::DType dtype, std::vector<int64_t> shape);
  // A parameter filled at load time by U[low, high) with `seed` (keyed by name, see plan.fbs).
  void uniformParameter(const std::string& name, std::vector<int64_t> shape, double low,
                        double high, uint64_t seed);
  // `aliases`: the tensor's other names (a tied weight's other module paths).
  void normalParameter(const std::string& name, std::vector<int64_t> shape, double mean, double std,
                       uint64_t seed, const std::vector<std::string>& aliases = {});
  void constantParameter(const std::string& name, std::vector<int64_t> shape, double value,
                         bool trainable = true);
  void node(const std::string& name, const std::string& opType, std::vector<std::string> inputs,
            std::vector<std::string> outputs, const std::vector<Attr>& attributes = {});
  void setOutputs(std::vector<std::string> outputs, const std::string& loss,
                  const std::string& predictions = "", const std::string& targets = "");

  // The finished, identifier-tagged model file contents.
  std::vector<uint8_t> finish();

 private:
  void parameter(const std::string& name, std::vector<int64_t> shape, model::InitKind kind,
                 double a, double b, uint64_t seed, bool trainable = true,
                 const std::vector<std::string>& aliases = {});

  flatbuffers::FlatBufferBuilder fbb_;
  std::string name_;
  std::vector<flatbuffers::Offset<model::TensorInfo>> inputs_;
  std::vector<flatbuffers::Offset<model::Initializer>> initializers_;
  std::vector<flatbuffers::Offset<model::Node>> nodes_;
  std::vector<std::string> outputs_;
  std::string loss_, predictions_, targets_;
};

struct MlpOptions {
  int64_t input = 784;
  std::vector<int64_t> hidden = {256, 128};
  int64_t classes = 10;
  uint64_t seed = 0;
};

// Linear -> ReLU -> ... -> Linear with cross-entropy loss; parameters named fc0.weight,
// fc0.bias, ... in PyTorch's [out, in] layout with nn.Linear's default initialisation.
std::vector<uint8_t> buildMlp(const MlpOptions& options);

struct GptOptions {
  int64_t vocab = 256;
  int64_t ctx = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t embd = 64;
  uint64_t seed = 0;
};

// Checks the options (heads must divide the embedding...): "" when valid, else the reason.
std::string validateGpt(const GptOptions& options);

struct ConvNetOptions {
  int64_t classes = 10;
  uint64_t seed = 0;
};

// The classic two-block MNIST ConvNet: [Conv2d(5, pad 2) -> BatchNorm2d -> ReLU -> MaxPool2d(2)]
// x 2 (16 then 32 channels) -> flatten -> Linear(7·7·32, classes), named as PyTorch's
// nn.Sequential (layer1.0.weight, layer1.1.running_mean, ..., fc.weight) with PyTorch's
// default initialisation. Input: `input` [N, 784] (28×28 images, reshaped inside).
std::vector<uint8_t> buildConvNet(const ConvNetOptions& options);

// GPT-2 as nanoGPT's model.py (biases on, no dropout, LM head tied to the token embedding),
// with its parameter names, layouts and initialisation; inputs idx and targets [B, T] (int64).
std::vector<uint8_t> buildGpt(const GptOptions& options);

}  // namespace dtc::zoo
