// A small convenience layer over the FlatBuffers builder for writing model graphs in C++.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model_generated.h"

namespace dtc::zoo {

class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name) : name_(std::move(name)) {}

  void input(const std::string& name, model::DType dtype, std::vector<int64_t> shape);
  // A parameter filled at load time by U[low, high) with `seed` (keyed by name, see plan.fbs).
  void uniformParameter(const std::string& name, std::vector<int64_t> shape, double low,
                        double high, uint64_t seed);
  void node(const std::string& name, const std::string& opType, std::vector<std::string> inputs,
            std::vector<std::string> outputs);
  void setOutputs(std::vector<std::string> outputs, const std::string& loss,
                  const std::string& predictions = "", const std::string& targets = "");

  // The finished, identifier-tagged model file contents.
  std::vector<uint8_t> finish();

 private:
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

}  // namespace dtc::zoo
