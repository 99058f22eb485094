#include "flatbuffers/ModelBuilder.h"

#include "flatbuffers/model_version.h"

namespace dtc {

void ModelBuilder::input(const std::string& name, model::DType dtype, std::vector<int64_t> shape) {
  inputs_.push_back(model::CreateTensorInfoDirect(fbb_, name.c_str(), dtype, &shape));
}

void ModelBuilder::parameter(const std::string& name, std::vector<int64_t> shape,
                             model::InitKind kind, double a, double b, uint64_t seed,
                             bool trainable, const std::vector<std::string>& aliases) {
  auto info = model::CreateTensorInfoDirect(fbb_, name.c_str(), model::DType::f32, &shape);
  auto rule = model::CreateInitRule(fbb_, kind, a, b, seed);
  initializers_.push_back(
      model::CreateInitializer(fbb_, info, trainable, 0, 0, rule,
                               aliases.empty() ? 0 : fbb_.CreateVectorOfStrings(aliases)));
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
  auto info = model::CreateTensorInfoDirect(fbb_, name.c_str(), model::DType::f32, &shape);
  fbb_.ForceVectorAlignment(raw.size(), 1, 16);  // the schema's force_align
  auto data = fbb_.CreateVector(raw);
  initializers_.push_back(
      model::CreateInitializer(fbb_, info, trainable, data, 0, 0, 0, constant && !trainable));
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
  auto graph =
      model::CreateGraph(fbb_, fbb_.CreateString(name_), fbb_.CreateVector(inputs_),
                         fbb_.CreateVectorOfStrings(outputs_), fbb_.CreateVector(initializers_),
                         fbb_.CreateVector(nodes_), fbb_.CreateString(loss_),
                         fbb_.CreateString(predictions_), fbb_.CreateString(targets_));
  auto hf = hfConfig_.empty() ? 0 : fbb_.CreateString(hfConfig_);
  auto m = model::CreateModel(fbb_, kModelVersion, fbb_.CreateString(producer_), graph, hf);
  model::FinishModelBuffer(fbb_, m);
  return {fbb_.GetBufferPointer(), fbb_.GetBufferPointer() + fbb_.GetSize()};
}

}  // namespace dtc
