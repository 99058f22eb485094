// A small convenience layer over the FlatBuffers builder for writing model graphs in C++: the
// zoo's models and the ONNX translator write model files with it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model_generated.h"

namespace dtc {

// A node attribute: exactly one of the value kinds.
struct NodeAttr {
  static NodeAttr integer(std::string name, int64_t v) {
    return {std::move(name), model::AttrKind::int_, v, 0, "", {}};
  }
  static NodeAttr real(std::string name, double v) {
    return {std::move(name), model::AttrKind::float_, 0, v, "", {}};
  }
  static NodeAttr text(std::string name, std::string v) {
    return {std::move(name), model::AttrKind::string, 0, 0, std::move(v), {}};
  }
  static NodeAttr ints(std::string name, std::vector<int64_t> v) {
    return {std::move(name), model::AttrKind::ints, 0, 0, "", std::move(v)};
  }
  std::string name;
  model::AttrKind kind;
  int64_t i;
  double f;
  std::string s;
  std::vector<int64_t> list;
};

// A tensor a Hugging Face checkpoint holds part of a parameter as (model.fbs's ExternalTensor).
struct ExternalPart {
  std::string name;
  int64_t index = -1;  // the slice at this index of the first dimension; -1: the whole tensor
  bool transposed = false;
};

class ModelBuilder {
 public:
  // `producer`: what the file says wrote it.
  explicit ModelBuilder(std::string name, std::string producer = "dtc zoo")
      : name_(std::move(name)), producer_(std::move(producer)) {}

  void input(const std::string& name, model::DType dtype, std::vector<int64_t> shape);
  // A parameter filled at load time by U[low, high) with `seed` (keyed by name, see plan.fbs).
  void uniformParameter(const std::string& name, std::vector<int64_t> shape, double low,
                        double high, uint64_t seed);
  // `aliases`: the tensor's other names (a tied weight's other module paths).
  void normalParameter(const std::string& name, std::vector<int64_t> shape, double mean, double std,
                       uint64_t seed, const std::vector<std::string>& aliases = {});
  void constantParameter(const std::string& name, std::vector<int64_t> shape, double value,
                         bool trainable = true);
  // A float32 initializer with its values (`raw`: little-endian bytes, 4 per element);
  // non-trainable ones are buffers (BatchNorm's running statistics), or `constant`s the model
  // fixes (a folded mask: not one of the module's tensors).
  void valuesParameter(const std::string& name, std::vector<int64_t> shape,
                       const std::vector<uint8_t>& raw, bool trainable = true,
                       bool constant = false);
  void node(const std::string& name, const std::string& opType, std::vector<std::string> inputs,
            std::vector<std::string> outputs, const std::vector<NodeAttr>& attributes = {});
  void setOutputs(std::vector<std::string> outputs, const std::string& loss,
                  const std::string& predictions = "", const std::string& targets = "");
  // The tensors a Hugging Face checkpoint holds parameter `name` as (given before finish()).
  void setExternal(const std::string& name, std::vector<ExternalPart> parts) {
    external_[name] = std::move(parts);
  }
  // The model as transformers' config.json describes it (JSON text), and its
  // generation_config.json (optional).
  void setHfConfig(std::string json) { hfConfig_ = std::move(json); }
  void setHfGenerationConfig(std::string json) { hfGenerationConfig_ = std::move(json); }

  // The finished, identifier-tagged model file contents.
  std::vector<uint8_t> finish();

 private:
  // An initializer, whose table is written at finish() (when its external form is known);
  // values go into the buffer at once.
  struct Initializer {
    std::string name;
    std::vector<int64_t> shape;
    model::InitKind kind = model::InitKind::zeros;
    double a = 0, b = 0;
    uint64_t seed = 0;
    bool trainable = true, constant = false;
    std::vector<std::string> aliases;
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> values;  // null: `kind` fills it
  };
  void parameter(const std::string& name, std::vector<int64_t> shape, model::InitKind kind,
                 double a, double b, uint64_t seed, bool trainable = true,
                 const std::vector<std::string>& aliases = {});

  flatbuffers::FlatBufferBuilder fbb_;
  std::string name_, producer_;
  std::vector<flatbuffers::Offset<model::TensorInfo>> inputs_;
  std::vector<Initializer> initializers_;
  std::map<std::string, std::vector<ExternalPart>> external_;
  std::vector<flatbuffers::Offset<model::Node>> nodes_;
  std::vector<std::string> outputs_;
  std::string loss_, predictions_, targets_, hfConfig_, hfGenerationConfig_;
};

}  // namespace dtc
