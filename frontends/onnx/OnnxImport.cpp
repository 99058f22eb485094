// dtc import: an ONNX export written as a dtc model file that any batch compiles. The
// translation folds shapes with a batch; translating at two batches shows which folded numbers
// are the batch's: a Reshape dimension that scales with it becomes -1, and anything else that
// depends on it is an error naming the node.
#include "onnx/OnnxImport.h"

#include "model/ModelBuilder.h"
#include "model/ModelFile.h"

namespace dtc::onnx_import {
namespace {

llvm::Error error(const std::string& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::vector<int64_t> ints(const flatbuffers::Vector<int64_t>* v) {
  return v ? std::vector<int64_t>(v->begin(), v->end()) : std::vector<int64_t>();
}

std::vector<std::string> strings(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  std::vector<std::string> out;
  if (v)
    for (const auto* s : *v) out.push_back(s->str());
  return out;
}

NodeAttr copyAttr(const model::Attribute& a) {
  NodeAttr out{a.name()->str(), a.kind(), a.i(), a.f(), a.s() ? a.s()->str() : "", ints(a.ints())};
  return out;
}

bool sameAttr(const model::Attribute& a, const model::Attribute& b) {
  return a.name()->str() == b.name()->str() && a.kind() == b.kind() && a.i() == b.i() &&
         a.f() == b.f() && (a.s() ? a.s()->str() : "") == (b.s() ? b.s()->str() : "") &&
         ints(a.ints()) == ints(b.ints());
}

// A Reshape target shape that holds at both batches, with the batch-scaled dimension as -1.
llvm::Expected<std::vector<int64_t>> batchFreeShape(const std::vector<int64_t>& at1,
                                                    const std::vector<int64_t>& at2, int64_t b1,
                                                    int64_t b2, const std::string& node) {
  std::vector<int64_t> shape = at1;
  int scaled = 0;
  for (size_t d = 0; d < at1.size(); ++d) {
    if (at1[d] == at2[d]) continue;
    if (at1[d] % b1 != 0 || at2[d] % b2 != 0 || at1[d] / b1 != at2[d] / b2 || ++scaled > 1)
      return error("node '" + node +
                   "' reshapes to a shape that depends on the batch in a way "
                   "-1 cannot express; compile the ONNX file itself with --batch");
    shape[d] = -1;
  }
  return shape;
}

}  // namespace

llvm::Expected<std::vector<uint8_t>> importOnnx(const OnnxModel& model, TranslateOptions options) {
  const int64_t b1 = options.batch > 0 ? options.batch : 2, b2 = b1 + 1;
  options.batch = b1;
  llvm::Expected<std::vector<uint8_t>> first = translateOnnx(model, options);
  if (!first) return first.takeError();
  options.batch = b2;
  llvm::Expected<std::vector<uint8_t>> second = translateOnnx(model, options);
  if (!second) {
    // An export with a fixed batch: the model holds at that batch only.
    llvm::consumeError(second.takeError());
    return first;
  }
  llvm::Expected<ModelFile> one = ModelFile::fromBytes(std::move(*first), model.name());
  llvm::Expected<ModelFile> two = ModelFile::fromBytes(std::move(*second), model.name());
  if (!one) return one.takeError();
  if (!two) return two.takeError();
  const model::Graph &g1 = *one->model().graph(), &g2 = *two->model().graph();
  const auto* nodes1 = g1.nodes();
  const auto* nodes2 = g2.nodes();
  if (!nodes1 || !nodes2 || nodes1->size() != nodes2->size())
    return error(model.name() + ": its graph changes with the batch; compile it with --batch");

  ModelBuilder b(g1.name() ? g1.name()->str() : "", "dtc import (ONNX)");
  if (g1.inputs())
    for (const model::TensorInfo* in : *g1.inputs())
      b.input(in->name()->str(), in->dtype(), ints(in->shape()));
  if (g1.initializers())
    for (uint32_t i = 0; i < g1.initializers()->size(); ++i) {
      const model::Initializer* init = g1.initializers()->Get(i);
      const model::Initializer* other = g2.initializers()->Get(i);
      if (ints(init->info()->shape()) != ints(other->info()->shape()))
        return error(model.name() + ": constant '" + init->info()->name()->str() +
                     "' has a shape that depends on the batch; compile it with --batch");
      std::vector<uint8_t> raw;
      if (init->raw_data()) raw.assign(init->raw_data()->begin(), init->raw_data()->end());
      b.valuesParameter(init->info()->name()->str(), ints(init->info()->shape()), raw,
                        init->trainable(), init->constant());
    }
  for (uint32_t i = 0; i < nodes1->size(); ++i) {
    const model::Node &n1 = *nodes1->Get(i), &n2 = *nodes2->Get(i);
    const std::string name = n1.name() ? n1.name()->str() : "";
    const uint32_t attrs1 = n1.attributes() ? n1.attributes()->size() : 0;
    const uint32_t attrs2 = n2.attributes() ? n2.attributes()->size() : 0;
    if (n1.op_type()->str() != n2.op_type()->str() || attrs1 != attrs2)
      return error(model.name() + ": node '" + name + "' changes with the batch");
    std::vector<NodeAttr> attributes;
    for (uint32_t k = 0; k < attrs1; ++k) {
      const model::Attribute &a1 = *n1.attributes()->Get(k), &a2 = *n2.attributes()->Get(k);
      if (sameAttr(a1, a2)) {
        attributes.push_back(copyAttr(a1));
        continue;
      }
      if (n1.op_type()->str() != "Reshape" || a1.name()->str() != "shape")
        return error(model.name() + ": node '" + name + "' has attribute '" + a1.name()->str() +
                     "' that depends on the batch; compile the ONNX file itself with --batch");
      llvm::Expected<std::vector<int64_t>> shape =
          batchFreeShape(ints(a1.ints()), ints(a2.ints()), b1, b2, name);
      if (!shape) return error(model.name() + ": " + llvm::toString(shape.takeError()));
      NodeAttr fixed = copyAttr(a1);
      fixed.list = *shape;
      attributes.push_back(fixed);
    }
    b.node(name, n1.op_type()->str(), strings(n1.inputs()), strings(n1.outputs()), attributes);
  }
  b.setOutputs(strings(g1.outputs()), g1.loss() ? g1.loss()->str() : "",
               g1.predictions() ? g1.predictions()->str() : "",
               g1.targets() ? g1.targets()->str() : "");
  return b.finish();
}

llvm::Error parsePaddingIdx(const std::vector<std::string>& specs, TranslateOptions& options) {
  for (const std::string& spec : specs) {
    if (spec == "none") {
      options.inferPaddingIdx = false;
      continue;
    }
    auto [name, row] = llvm::StringRef(spec).rsplit('=');
    int64_t index = -1;
    if (name.empty() || row.getAsInteger(10, index) || index < 0)
      return llvm::createStringError(
          "--padding-idx wants TABLE=ROW (an embedding table's name and the row nn.Embedding's "
          "padding_idx names) or none, got '" +
          spec + "'");
    options.paddingIdx[name.str()] = index;
  }
  return llvm::Error::success();
}

}  // namespace dtc::onnx_import
