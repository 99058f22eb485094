#include "model/ModelImporter.h"

#include <functional>
#include <limits>
#include <optional>

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include "graph/IR/GraphOps.h"
#include "model/ModelImporterImpl.h"

using namespace mlir;

namespace dtc {
namespace detail {

LogicalResult ModelImporter::checkAttributes(const model::Node& node, const OpType& type,
                                             Location loc) {
  if (!node.attributes()) return success();
  for (const model::Attribute* a : *node.attributes()) {
    StringRef name = a->name() ? StringRef(a->name()->c_str(), a->name()->size()) : StringRef();
    if (llvm::is_contained(type.attributes, name)) continue;
    InFlightDiagnostic error = emitError(loc) << node.op_type()->string_view()
                                              << " has no attribute '" << name << "' (";
    if (type.attributes.empty()) return error << "it takes none)";
    error << "it takes " << llvm::join(type.attributes, ", ") << ")";
    return error;
  }
  return success();
}

Location ModelImporter::nodeLoc(const model::Node& node, size_t index) {
  std::string name = node.name() && node.name()->size()
                         ? node.name()->str()
                         : node.op_type()->str() + "#" + std::to_string(index);
  return NameLoc::get(StringAttr::get(&ctx_, name), FileLineColLoc::get(&ctx_, file_.name(), 0, 0));
}

LogicalResult ModelImporter::addArgument(const model::TensorInfo& info, Location loc, bool isData,
                                         bool trainable) {
  std::string name = info.name()->str();
  if (!argNames_.insert(name).second)
    return emitError(loc) << "tensor '" << name << "' is defined twice";
  SmallVector<int64_t> shape;
  int64_t batchDim = -1;
  if (info.shape())
    for (int64_t d : *info.shape()) {
      if (d == -1 && isData) {
        if (batchDim < 0) batchDim = static_cast<int64_t>(shape.size());
        if (options_.batchSize <= 0)
          return emitError(loc) << "input '" << name
                                << "' has a batch dimension; give a batch size (--batch N)";
        d = options_.batchSize;
      }
      if (d <= 0) return emitError(loc) << "tensor '" << name << "' has invalid dimension " << d;
      shape.push_back(d);
    }
  if (!elementCount(shape))
    return emitError(loc) << "tensor '" << name << "' " << graph::shapeString(shape)
                          << " has more than 2^40 elements";
  if (info.dtype() != model::DType::f32 && !(isData && info.dtype() == model::DType::i64))
    return emitError(loc) << "tensor '" << name << "' has dtype "
                          << model::EnumNameDType(info.dtype())
                          << "; supported: f32 (inputs also i64 labels)";
  argTypes_.push_back(toTensorType(builder_, info.dtype(), shape));
  NamedAttrList attrs;
  attrs.set(isData ? attr::kData : attr::kParam, builder_.getStringAttr(name));
  if (trainable) attrs.set(attr::kTrainable, builder_.getUnitAttr());
  if (batchDim >= 0) attrs.set(attr::kBatchDim, builder_.getI64IntegerAttr(batchDim));
  argAttrs_.push_back(attrs);
  return success();
}

FailureOr<SmallVector<Value>> ModelImporter::inputs(const model::Node& node, Location loc,
                                                    size_t min, size_t max, Operands operands) {
  size_t n = node.inputs() ? node.inputs()->size() : 0;
  if (n < min || n > max)
    return emitError(loc) << node.op_type()->str() << " takes " << min
                          << (min == max ? "" : " to " + std::to_string(max)) << " inputs, got "
                          << n;
  SmallVector<Value> values;
  for (const auto* name : *node.inputs()) {
    auto it = values_.find(name->str());
    if (it == values_.end())
      return emitError(loc) << "input '" << name->str()
                            << "' is not a graph input, initializer or earlier node output";
    // Shape inference of contractions fails (fatally, inside the op builder) on mixed types.
    if (operands == Operands::F32 &&
        !cast<RankedTensorType>(it->second.getType()).getElementType().isF32())
      return emitError(loc) << node.op_type()->str() << " input '" << name->str()
                            << "' must be float32";
    values.push_back(it->second);
  }
  return values;
}

LogicalResult ModelImporter::define(const model::Node& node, Location loc, ArrayRef<Value> values) {
  size_t n = node.outputs() ? node.outputs()->size() : 0;
  if (n != values.size())
    return emitError(loc) << node.op_type()->str() << " has " << values.size()
                          << " outputs, the node names " << n;
  for (auto [name, value] : llvm::zip(*node.outputs(), values)) {
    if (values_.count(name->str()))
      return emitError(loc) << "tensor '" << name->str() << "' is defined twice";
    // Shapes derived from valid inputs can still be too large ([N, 1] + [1, N]).
    if (!elementCount(shapeOf(value), kMaxDerivedElements))
      return emitError(loc) << node.op_type()->str() << " output '" << name->str() << "' "
                            << graph::shapeString(shapeOf(value)) << " has more than 2^52 elements";
    values_[name->str()] = value;
  }
  return success();
}

const model::Attribute* ModelImporter::attribute(const model::Node& node, StringRef name) {
  if (!node.attributes()) return nullptr;
  for (const auto* a : *node.attributes())
    if (StringRef(a->name()->c_str(), a->name()->size()) == name) return a;
  return nullptr;
}

int64_t ModelImporter::intAttr(const model::Node& node, StringRef name, int64_t fallback) {
  const model::Attribute* a = attribute(node, name);
  return a ? a->i() : fallback;
}

double ModelImporter::floatAttr(const model::Node& node, StringRef name, double fallback) {
  const model::Attribute* a = attribute(node, name);
  return a ? a->f() : fallback;
}

Value ModelImporter::reshape(Value x, ArrayRef<int64_t> shape, Location loc) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getShape() == shape) return x;
  return graph::ReshapeOp::create(builder_, loc,
                                  RankedTensorType::get(shape, type.getElementType()), x);
}

OwningOpRef<ModuleOp> ModelImporter::run() {
  const model::Graph& graph = *file_.model().graph();
  Location fileLoc = FileLineColLoc::get(&ctx_, file_.name(), 0, 0);
  auto fail = [&](const Twine& message) {
    emitError(fileLoc) << message;
    return OwningOpRef<ModuleOp>();
  };
  if (!graph.loss() || graph.loss()->size() == 0)
    return fail("the model names no loss tensor (graph.loss)");

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  if (graph.initializers())
    for (const auto* init : *graph.initializers())
      if (failed(addArgument(*init->info(), fileLoc, /*isData=*/false, init->trainable())))
        return nullptr;
  if (graph.inputs())
    for (const auto* input : *graph.inputs())
      if (failed(addArgument(*input, fileLoc, /*isData=*/true, false))) return nullptr;

  builder_.setInsertionPointToEnd(module->getBody());
  func_ =
      func::FuncOp::create(builder_, fileLoc, "forward", builder_.getFunctionType(argTypes_, {}));
  Block* body = func_.addEntryBlock();
  // All at once: setting them one by one rebuilds the whole list each time (quadratic in depth).
  SmallVector<DictionaryAttr> dictionaries;
  for (const NamedAttrList& attrs : argAttrs_) dictionaries.push_back(attrs.getDictionary(&ctx_));
  func_.setAllArgAttrs(dictionaries);
  for (auto [i, attrs] : llvm::enumerate(argAttrs_)) {
    StringRef name =
        cast<StringAttr>(attrs.get(attrs.get(attr::kParam) ? attr::kParam : attr::kData))
            .getValue();
    values_[name] = body->getArgument(i);
  }
  builder_.setInsertionPointToEnd(body);

  if (graph.nodes())
    for (auto [i, node] : llvm::enumerate(*graph.nodes())) {
      Location loc = nodeLoc(*node, i);
      auto it = handlers().find(node->op_type()->string_view());
      if (it == handlers().end())
        return emitError(loc) << "unsupported op type '" << node->op_type()->str() << "'", nullptr;
      if (failed(checkAttributes(*node, it->second, loc))) return nullptr;
      if (failed((this->*(it->second.import))(*node, loc))) return nullptr;
    }

  // Results: the loss first, then the other outputs in the model's order.
  SmallVector<std::string> outputs{graph.loss()->str()};
  if (graph.outputs())
    for (const auto* name : *graph.outputs())
      if (name->str() != outputs.front()) outputs.push_back(name->str());
  SmallVector<Value> results;
  for (const std::string& name : outputs) {
    auto it = values_.find(name);
    if (it == values_.end()) return fail("output '" + name + "' is not produced by the graph");
    results.push_back(it->second);
  }
  auto lossType = cast<RankedTensorType>(results.front().getType());
  if (lossType.getRank() != 0 || !lossType.getElementType().isF32())
    return fail("the loss '" + outputs.front() + "' must be a float32 scalar");
  for (auto& [value, name] : bufferUpdates_) results.push_back(value);
  func::ReturnOp::create(builder_, fileLoc, results);
  SmallVector<Type> resultTypes;
  for (Value v : results) resultTypes.push_back(v.getType());
  func_.setType(builder_.getFunctionType(argTypes_, resultTypes));
  for (auto [i, name] : llvm::enumerate(outputs))
    func_.setResultAttr(i, attr::kOutput, builder_.getStringAttr(name));
  for (auto [i, update] : llvm::enumerate(bufferUpdates_))
    func_.setResultAttr(outputs.size() + i, attr::kUpdates, builder_.getStringAttr(update.second));

  (*module)->setAttr(attr::kLoss, builder_.getStringAttr(outputs.front()));
  auto optionalName = [&](const flatbuffers::String* s, const char* key) -> LogicalResult {
    if (!s || s->size() == 0) return success();
    if (!values_.count(s->str()))
      return emitError(fileLoc) << key << " names unknown tensor '" << s->str() << "'";
    (*module)->setAttr(key, builder_.getStringAttr(s->str()));
    return success();
  };
  if (failed(optionalName(graph.predictions(), attr::kPredictions)) ||
      failed(optionalName(graph.targets(), attr::kTargets)))
    return nullptr;
  if (options_.batchSize > 0)
    (*module)->setAttr(attr::kBatchSize, builder_.getI64IntegerAttr(options_.batchSize));
  if (const flatbuffers::String* hf = file_.model().hf_config(); hf && hf->size())
    (*module)->setAttr(attr::kHfConfig, builder_.getStringAttr(hf->str()));
  if (const flatbuffers::String* generation = file_.model().hf_generation_config();
      generation && generation->size())
    (*module)->setAttr(attr::kHfGenerationConfig, builder_.getStringAttr(generation->str()));
  if (failed(verify(*module))) return nullptr;
  return module;
}

}  // namespace detail

using detail::ModelImporter;

std::vector<ImportableOp> importableOps() {
  std::vector<ImportableOp> ops;
  for (const auto& entry : ModelImporter::handlers()) {
    ImportableOp op{entry.getKey().str(), {}};
    for (StringRef attribute : entry.getValue().attributes)
      op.attributes.push_back(attribute.str());
    ops.push_back(std::move(op));
  }
  llvm::sort(ops, [](const ImportableOp& a, const ImportableOp& b) { return a.type < b.type; });
  return ops;
}

OwningOpRef<ModuleOp> importModel(MLIRContext& ctx, const ModelFile& file,
                                  const ImportOptions& options) {
  ctx.loadDialect<func::FuncDialect, graph::GraphDialect>();
  return ModelImporter(ctx, file, options).run();
}

}  // namespace dtc
