#include "model/ModelBuilder.h"

#include "model/model_version.h"

namespace dtc {

void ModelBuilder::input(const std::string& name, model::DType dtype, std::vector<int64_t> shape) {
  inputs_.push_back(model::CreateTensorInfoDirect(fbb_, name.c_str(), dtype, &shape));
}

void ModelBuilder::parameter(const std::string& name, std::vector<int64_t> shape,
                             model::InitKind kind, double a, double b, uint64_t seed,
                             bool trainable, const std::vector<std::string>& aliases) {
  Initializer init;
  init.name = name;
  init.shape = std::move(shape);
  init.kind = kind;
  init.a = a;
  init.b = b;
  init.seed = seed;
  init.trainable = trainable;
  init.aliases = aliases;
  initializers_.push_back(std::move(init));
}

void ModelBuilder::uniformParameter(const std::string& name, std::vector<int64_t> shape, double low,
                                    double high, uint64_t seed) {
  parameter(name, std::move(shape), model::InitKind::uniform, low, high, seed);
}

void ModelBuilder::normalParameter(const std::string& name, std::vector<int64_t> shape, double mean,
                                   double std, uint64_t seed,
                                   const std::vector<std::string>& aliases) {
  parameter(name, std::move(shape), model::InitKind::normal, mean, std, seed, true, aliases);
}

void ModelBuilder::constantParameter(const std::string& name, std::vector<int64_t> shape,
                                     double value, bool trainable) {
  if (value == 0.0 || value == 1.0)
    return parameter(name, std::move(shape),
                     value == 0.0 ? model::InitKind::zeros : model::InitKind::ones, 0, 0, 0,
                     trainable);
  parameter(name, std::move(shape), model::InitKind::uniform, value, value, 0, trainable);
}

void ModelBuilder::valuesParameter(const std::string& name, std::vector<int64_t> shape,
                                   const std::vector<uint8_t>& raw, bool trainable, bool constant) {
  Initializer init;
  init.name = name;
  init.shape = std::move(shape);
  init.trainable = trainable;
  init.constant = constant && !trainable;
  fbb_.ForceVectorAlignment(raw.size(), 1, 16);  // the schema's force_align
  init.values = fbb_.CreateVector(raw);
  initializers_.push_back(std::move(init));
}

void ModelBuilder::node(const std::string& name, const std::string& opType,
                        std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::vector<NodeAttr>& attributes) {
  std::vector<flatbuffers::Offset<model::Attribute>> attrs;
  for (const NodeAttr& a : attributes)
    attrs.push_back(model::CreateAttributeDirect(fbb_, a.name.c_str(), a.kind, a.i, a.f,
                                                 a.s.empty() ? nullptr : a.s.c_str(),
                                                 a.list.empty() ? nullptr : &a.list));
  auto in = fbb_.CreateVectorOfStrings(inputs);
  auto out = fbb_.CreateVectorOfStrings(outputs);
  nodes_.push_back(model::CreateNode(fbb_, fbb_.CreateString(name), fbb_.CreateString(opType), in,
                                     out, attrs.empty() ? 0 : fbb_.CreateVector(attrs)));
}

void ModelBuilder::setOutputs(std::vector<std::string> outputs, const std::string& loss,
                              const std::string& predictions, const std::string& targets) {
  outputs_ = std::move(outputs);
  loss_ = loss;
  predictions_ = predictions;
  targets_ = targets;
}

std::vector<uint8_t> ModelBuilder::finish() {
  std::vector<flatbuffers::Offset<model::Initializer>> initializers;
  for (const Initializer& init : initializers_) {
    auto info =
        model::CreateTensorInfoDirect(fbb_, init.name.c_str(), model::DType::f32, &init.shape);
    flatbuffers::Offset<model::InitRule> rule;
    if (init.values.IsNull())
      rule = model::CreateInitRule(fbb_, init.kind, init.a, init.b, init.seed);
    auto aliases = init.aliases.empty() ? 0 : fbb_.CreateVectorOfStrings(init.aliases);
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<model::ExternalTensor>>> external;
    if (auto it = external_.find(init.name); it != external_.end()) {
      std::vector<flatbuffers::Offset<model::ExternalTensor>> parts;
      for (const ExternalPart& p : it->second)
        parts.push_back(
            model::CreateExternalTensorDirect(fbb_, p.name.c_str(), p.index, p.transposed));
      external = fbb_.CreateVector(parts);
    }
    initializers.push_back(model::CreateInitializer(fbb_, info, init.trainable, init.values, 0,
                                                    rule, aliases, init.constant, external));
  }
  auto graph =
      model::CreateGraph(fbb_, fbb_.CreateString(name_), fbb_.CreateVector(inputs_),
                         fbb_.CreateVectorOfStrings(outputs_), fbb_.CreateVector(initializers),
                         fbb_.CreateVector(nodes_), fbb_.CreateString(loss_),
                         fbb_.CreateString(predictions_), fbb_.CreateString(targets_));
  auto hf = hfConfig_.empty() ? 0 : fbb_.CreateString(hfConfig_);
  auto generation = hfGenerationConfig_.empty() ? 0 : fbb_.CreateString(hfGenerationConfig_);
  auto m =
      model::CreateModel(fbb_, kModelVersion, fbb_.CreateString(producer_), graph, hf, generation);
  model::FinishModelBuffer(fbb_, m);
  return {fbb_.GetBufferPointer(), fbb_.GetBufferPointer() + fbb_.GetSize()};
}

}  // namespace dtc
