// The translation's driver: data inputs with the batch fixed, the loss, which initializers are
// parameters, the walk that folds constants and infers shapes, then emission in node order.
#include "onnx/Translator.h"

#include "llvm/Support/GlobPattern.h"

#include <algorithm>
#include <set>

namespace dtc::onnx_import {
namespace {

llvm::Error error(const std::string& message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

const std::vector<int> kNoUsers;

}  // namespace

Translator::Translator(const OnnxModel& model, const TranslateOptions& options)
    : model_(model), options_(options), builder_(model.graph().name(), "dtc import (ONNX)") {
  const onnx::GraphProto& g = model.graph();
  for (const onnx::NodeProto& n : g.node()) nodes_.push_back(&n);
  dynamic_.assign(nodes_.size(), false);
  groupOf_.assign(nodes_.size(), -1);
  regionOf_.assign(nodes_.size(), -1);
  for (int i = 0; i < nodeCount(); ++i) {
    for (const std::string& out : nodes_[i]->output())
      if (!out.empty()) producers_[out] = i;
    for (const std::string& in : nodes_[i]->input())
      if (!in.empty()) users_[in].push_back(i);
  }
  for (const onnx::TensorProto& t : g.initializer()) initializers_[t.name()] = &t;
  for (const onnx::ValueInfoProto& o : g.output()) {
    outputs_[o.name()] = true;
    outputOrder_.push_back(o.name());
  }
}

std::string Translator::nodeName(int i) const {
  const std::string& name = nodes_[i]->name();
  return name.empty() ? nodes_[i]->op_type() + "_" + std::to_string(i) : name;
}

const Value* Translator::value(const std::string& name) const {
  if (name.empty()) return nullptr;
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

const Value* Translator::input(int node, int index) const {
  const auto& in = nodes_[node]->input();
  return index < in.size() ? value(in[index]) : nullptr;
}

const Constant* Translator::constant(int node, int index) const {
  const Value* v = input(node, index);
  return v && v->kind == ValueKind::kConst ? &*v->constant : nullptr;
}

int Translator::producer(const std::string& name) const {
  auto it = producers_.find(name);
  return it == producers_.end() ? -1 : it->second;
}

const std::vector<int>& Translator::users(const std::string& name) const {
  auto it = users_.find(name);
  return it == users_.end() ? kNoUsers : it->second;
}

void Translator::define(const std::string& name, int32_t type, Shape shape) {
  Value v;
  v.kind = ValueKind::kComputed;
  v.type = type;
  v.shape = std::move(shape);
  v.name = name;
  values_[name] = std::move(v);
}

void Translator::alias(const std::string& name, const std::string& of) {
  const Value* source = value(of);
  if (!source) return;
  Value v = *source;
  values_[name] = std::move(v);
}

void Translator::emit(int node, const std::string& opType, std::vector<std::string> inputs,
                      std::vector<std::string> outputs, const std::vector<NodeAttr>& attributes) {
  builder_.node(nodeName(node), opType, std::move(inputs), std::move(outputs), attributes);
}

std::string Translator::fresh(const std::string& base) {
  return base + "::dtc" + std::to_string(freshCount_++);
}

std::string Translator::frozenConstant(int node, const Constant& c) {
  const std::string name = fresh(nodeName(node) + "::constant");
  builder_.valuesParameter(name, c.shape, c.float32Bytes(), /*trainable=*/false, /*constant=*/true);
  return name;
}

void Translator::addRegion(Region region) {
  const int index = static_cast<int>(regions_.size());
  for (int m : region.members) regionOf_[m] = index;
  addGroup({region.root, region.members, region.emit});
  regions_.push_back(std::move(region));
}

void Translator::addGroup(Group group) {
  const int index = static_cast<int>(groups_.size());
  for (int m : group.members) groupOf_[m] = index;
  groups_.push_back(std::move(group));
}

llvm::Error Translator::nodeError(int i, const std::string& message) const {
  return error(model_.name() + ": node '" + nodeName(i) + "' (" + nodes_[i]->op_type() +
               "): " + message);
}

llvm::Error Translator::unsupported(int i, const std::string& why) {
  unsupported_ += std::string(unsupportedCount_ ? ", " : "") + "'" + nodeName(i) + "' (" +
                  nodes_[i]->op_type() + ", opset " + std::to_string(model_.opset()) +
                  (why.empty() ? "" : ": " + why) + ")";
  ++unsupportedCount_;
  return llvm::Error::success();
}

llvm::Error Translator::readInputs() {
  if (options_.batch <= 0) return error(model_.name() + ": translating ONNX needs the batch");
  for (const onnx::ValueInfoProto& in : model_.graph().input()) {
    if (initializers_.count(in.name())) continue;  // older exports list initializers as inputs
    const std::string where = model_.name() + ": input '" + in.name() + "'";
    if (!in.type().has_tensor_type()) return error(where + " is not a tensor");
    const auto& tensor = in.type().tensor_type();
    const int32_t type = tensor.elem_type();
    if (type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::INT64)
      return error(where + " is " + elementTypeName(type) +
                   "; data inputs are float32, or int64 class labels and token ids");
    const auto& dims = tensor.shape().dim();
    if (dims.empty()) return error(where + " is a scalar; data inputs have a batch dimension");
    Shape shape;
    for (int d = 0; d < dims.size(); ++d) {
      const bool known = dims[d].has_dim_value();
      if (d == 0) {
        if (known && dims[d].dim_value() != options_.batch)
          return error(where + " has a fixed batch of " + std::to_string(dims[d].dim_value()) +
                       " (exported without dynamic_axes), not " + std::to_string(options_.batch) +
                       ": compile with that batch, or export with dynamic_axes={'" + in.name() +
                       "': {0: 'batch'}}");
        shape.push_back(options_.batch);
      } else if (!known) {
        return error(where + " has a dynamic dimension " + std::to_string(d) +
                     (dims[d].dim_param().empty() ? "" : " ('" + dims[d].dim_param() + "')") +
                     " that the batch cannot fix; export it with a fixed size");
      } else {
        if (dims[d].dim_value() < 1)
          return error(where + " has dimension " + std::to_string(d) + " of size " +
                       std::to_string(dims[d].dim_value()) + "; dtc's tensors have positive sizes");
        shape.push_back(dims[d].dim_value());
      }
    }
    int64_t elements = 1;
    for (int64_t d : shape)
      if (__builtin_mul_overflow(elements, d, &elements) || elements > (int64_t{1} << 40))
        return error(where + " has more than 2^40 elements");
    Value v;
    v.kind = ValueKind::kData;
    v.type = type;
    v.shape = shape;
    v.name = in.name();
    values_[in.name()] = v;
    shape[0] = -1;
    builder_.input(in.name(),
                   type == onnx::TensorProto::FLOAT ? model::DType::f32 : model::DType::i64, shape);
  }
  return llvm::Error::success();
}

llvm::Error Translator::chooseLoss() {
  const std::string& loss = options_.loss;
  if (loss == "cross-entropy" || loss == "mse") {
    if (options_.target.empty())
      return error("--loss " + loss + " needs --target NAME, the data input it adds");
    if (outputOrder_.size() != 1)
      return error(model_.name() + ": --loss " + loss + " scores the model's output, and it has " +
                   std::to_string(outputOrder_.size()));
    if (producers_.count(options_.target) || initializers_.count(options_.target) ||
        values_.count(options_.target))
      return error("--target '" + options_.target + "' is already a name in the model");
    lossValue_ = outputOrder_[0];
    return llvm::Error::success();
  }
  if (!options_.target.empty())
    return error("--target goes with --loss cross-entropy or --loss mse");
  if (!loss.empty()) {
    if (!producers_.count(loss))
      return error(model_.name() + ": --loss '" + loss + "' is not a value the model computes");
    lossValue_ = loss;
    return llvm::Error::success();
  }
  std::vector<std::string> scalars;
  for (const onnx::ValueInfoProto& o : model_.graph().output()) {
    const auto& t = o.type().tensor_type();
    if (t.elem_type() == onnx::TensorProto::FLOAT && t.has_shape() && t.shape().dim_size() == 0)
      scalars.push_back(o.name());
  }
  if (scalars.size() == 1) {
    lossValue_ = scalars[0];
    return llvm::Error::success();
  }
  if (scalars.empty())
    return error(model_.name() +
                 ": no scalar float output to minimise: give --loss NAME, or "
                 "--loss cross-entropy|mse --target INPUT for a forward-only "
                 "export");
  std::string names;
  for (const std::string& s : scalars) names += (names.empty() ? "" : ", ") + s;
  return error(model_.name() + ": several scalar outputs (" + names + "); name one with --loss");
}

void Translator::markDifferentiable() {
  differentiable_[lossValue_] = true;
  for (int i = nodeCount(); i-- > 0;) {
    const onnx::NodeProto& n = *nodes_[i];
    bool reached = false;
    for (const std::string& out : n.output()) reached = reached || differentiable_.count(out);
    if (!reached) continue;
    for (int k = 0; k < n.input_size(); ++k)
      if (!n.input(k).empty() && differentiableInput(n.op_type(), k))
        differentiable_[n.input(k)] = true;
  }
  for (const onnx::NodeProto* n : nodes_)
    if (n->op_type() == "BatchNormalization")
      for (int k : {3, 4})
        if (k < n->input_size()) buffers_[n->input(k)] = true;
}

// torch.onnx.export's default is evaluation mode: BatchNorm folded into the convolutions before
// it (the folded tensors named "onnx::Conv_21"), or run on its running statistics, and dropout
// gone. Training that graph would silently train another model.
llvm::Error Translator::checkTrainingExport() {
  const std::string howTo =
      "export it for training: torch.onnx.export(model, args, path, "
      "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)";
  for (int i = 0; i < nodeCount(); ++i) {
    const onnx::NodeProto& n = *nodes_[i];
    if (n.op_type() != "BatchNormalization") continue;
    bool training = n.output_size() > 1;  // before opset 14: the running statistics' outputs
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "training_mode") training = a.i() != 0;
    if (!training)
      return error(model_.name() + ": BatchNormalization '" + nodeName(i) +
                   "' normalises with its running statistics, as in evaluation mode: " + howTo);
  }
  if (options_.acceptEvalExport) return llvm::Error::success();
  std::vector<std::string> folded;
  for (const onnx::TensorProto& t : model_.graph().initializer())
    if (llvm::StringRef(t.name()).starts_with("onnx::") && isFloatType(t.data_type()) &&
        differentiable_.count(t.name()) && !buffers_.count(t.name()))
      folded.push_back(t.name());
  if (folded.empty()) return llvm::Error::success();
  std::string names = "'" + folded[0] + "'";
  if (folded.size() > 1) names += " and " + std::to_string(folded.size() - 1) + " more";
  return error(model_.name() + ": the export was made in evaluation mode (PyTorch's default): " +
               names + " are tensors it folded (BatchNorm into convolutions), not the " +
               "module's parameters; " + howTo + ", or give --eval-export to train it as exported");
}

namespace {

// The one row of a [rows, width] float32 table that is all zeros (-1: none, or more than one):
// what nn.Embedding makes of its padding_idx, and training never moves.
int64_t onlyZeroRow(const std::vector<uint8_t>& bytes, int64_t rows, int64_t width) {
  if (rows < 2 || width < 1) return -1;
  const float* values = reinterpret_cast<const float*>(bytes.data());
  int64_t found = -1;
  for (int64_t r = 0; r < rows; ++r) {
    bool zero = true;
    for (int64_t c = 0; c < width && zero; ++c) zero = values[r * width + c] == 0.0f;
    if (!zero) continue;
    if (found >= 0) return -1;
    found = r;
  }
  return found;
}

}  // namespace

llvm::Error Translator::readInitializers() {
  // The user's buffers: each glob must name an initializer the loss depends on.
  std::vector<llvm::GlobPattern> userBuffers;
  for (const std::string& text : options_.buffers) {
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(text);
    if (!glob) return error("--buffer '" + text + "': " + llvm::toString(glob.takeError()));
    bool used = false;
    for (const onnx::TensorProto& t : model_.graph().initializer())
      used |=
          glob->match(t.name()) && isFloatType(t.data_type()) && differentiable_.count(t.name());
    if (!used)
      return error(model_.name() + ": --buffer '" + text +
                   "' names no float initializer the loss depends on");
    userBuffers.push_back(std::move(*glob));
  }
  // --padding-idx: each names a 2-D float table and a row of it.
  for (const auto& [name, row] : options_.paddingIdx) {
    const onnx::TensorProto* table = nullptr;
    for (const onnx::TensorProto& t : model_.graph().initializer())
      if (t.name() == name) table = &t;
    if (!table || !isFloatType(table->data_type()) || table->dims_size() != 2)
      return error(model_.name() + ": --padding-idx " + name +
                   ": no 2-D float initializer (an embedding table) has that name");
    if (row < 0 || row >= table->dims(0))
      return error(model_.name() + ": --padding-idx " + name + "=" + std::to_string(row) +
                   ": the table has " + std::to_string(table->dims(0)) + " rows");
  }
  for (const onnx::TensorProto& t : model_.graph().initializer())
    for (const llvm::GlobPattern& glob : userBuffers)
      if (glob.match(t.name()) && differentiable_.count(t.name())) buffers_[t.name()] = true;
  for (const onnx::TensorProto& t : model_.graph().initializer()) {
    llvm::Expected<TensorData> data = model_.values(t);
    if (!data) return error(model_.name() + ": " + llvm::toString(data.takeError()));
    const bool trainable = differentiable_.count(t.name()) && !buffers_.count(t.name());
    if (isFloatType(t.data_type()) && (trainable || buffers_.count(t.name()))) {
      for (int64_t d : data->dims)
        if (d < 1)
          return error(model_.name() + ": parameter '" + t.name() + "' has shape " +
                       shapeText(data->dims) + "; dtc's tensors have positive sizes");
      Value v;
      v.kind = ValueKind::kParam;
      v.type = onnx::TensorProto::FLOAT;
      v.shape = data->dims;
      v.name = t.name();
      values_[t.name()] = v;
      // Parameters are float32 (master weights); other float types are widened.
      std::vector<uint8_t> bytes = t.data_type() == onnx::TensorProto::FLOAT
                                       ? std::move(data->bytes)
                                       : Constant::fromData(*data).float32Bytes();
      if (trainable && data->dims.size() == 2)
        if (const int64_t row = onlyZeroRow(bytes, data->dims[0], data->dims[1]); row >= 0)
          zeroRow_[t.name()] = row;
      builder_.valuesParameter(t.name(), data->dims, bytes, trainable);
      continue;
    }
    std::string problem;
    if (tooLarge(data->dims, problem))
      return error(model_.name() + ": initializer '" + t.name() + "', a constant: " + problem);
    Value v;
    v.kind = ValueKind::kConst;
    v.type = t.data_type();
    v.shape = data->dims;
    v.constant = Constant::fromData(*data);
    values_[t.name()] = std::move(v);
  }
  return llvm::Error::success();
}

void Translator::defineConstant(const std::string& name, Constant c) {
  Value v;
  v.kind = ValueKind::kConst;
  v.type = c.type;
  v.shape = c.shape;
  v.constant = std::move(c);
  values_[name] = std::move(v);
}

llvm::Expected<Constant> Translator::constantOf(const onnx::NodeProto& n) const {
  std::optional<Constant> c;
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "value") {
      llvm::Expected<TensorData> data = model_.values(a.t());
      if (!data) return data.takeError();
      c = Constant::fromData(*data);
    } else if (a.name() == "value_float") {
      c = Constant::ofReals(onnx::TensorProto::FLOAT, {}, {a.f()});
    } else if (a.name() == "value_floats") {
      c = Constant::ofReals(onnx::TensorProto::FLOAT, {a.floats_size()},
                            std::vector<double>(a.floats().begin(), a.floats().end()));
    } else if (a.name() == "value_int") {
      c = Constant::ofInts(onnx::TensorProto::INT64, {}, {a.i()});
    } else if (a.name() == "value_ints") {
      c = Constant::ofInts(onnx::TensorProto::INT64, {a.ints_size()},
                           std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    }
  }
  if (!c)
    return error("a Constant without a value dtc reads (value, value_float(s), value_int(s))");
  return std::move(*c);
}

llvm::Error Translator::constantNode(int i) {
  const onnx::NodeProto& n = *nodes_[i];
  if (n.output_size() != 1) return nodeError(i, "a Constant has one output");
  llvm::Expected<Constant> c = constantOf(n);
  if (!c) return nodeError(i, llvm::toString(c.takeError()));
  Value v;
  v.kind = ValueKind::kConst;
  v.type = c->type;
  v.shape = c->shape;
  v.constant = std::move(*c);
  values_[n.output(0)] = std::move(v);
  return llvm::Error::success();
}

llvm::Error Translator::walk() {
  for (int i = 0; i < nodeCount(); ++i) {
    const onnx::NodeProto& n = *nodes_[i];
    const std::string& op = n.op_type();
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      return nodeError(i, "its domain '" + n.domain() + "' is not one dtc reads");
    if (unsupportedCount_ > 0) {  // only listing what else is unsupported, not translating
      if (op != "Constant" && op != "Shape" && op != "Size" && !findOpRule(op) && !foldable(op))
        (void)unsupported(i, "");
      continue;
    }
    if (op == "Constant") {
      if (llvm::Error e = constantNode(i)) return e;
      continue;
    }
    // A region's members: what they compute from constants is folded; the rest is the
    // region's, whose output its root defines.
    if (const int r = regionOf_[i]; r >= 0) {
      bool known = foldable(op) || op == "Shape" || op == "Size";
      for (const std::string& name : n.input()) {
        const Value* v = value(name);
        known = known && (name.empty() ||
                          (v && (v->kind == ValueKind::kConst || op == "Shape" || op == "Size")));
      }
      if (!known || regions_[r].root == i) {
        if (regions_[r].root == i) {
          dynamic_[i] = true;
          if (llvm::Error e = regions_[r].infer()) return e;
        }
        continue;
      }
    }
    std::vector<const Value*> in;
    for (const std::string& name : n.input()) {
      if (name.empty()) {
        in.push_back(nullptr);
        continue;
      }
      const Value* v = value(name);
      if (!v) return nodeError(i, "reads '" + name + "', which nothing before it defines");
      in.push_back(v);
    }
    if ((op == "Shape" || op == "Size") && !in.empty() && in[0]) {
      const Shape& shape = in[0]->shape;
      const int64_t rank = static_cast<int64_t>(shape.size());
      int64_t start = intAttribute(n, "start", 0), end = intAttribute(n, "end", rank);
      start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
      end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
      Constant c = op == "Size"
                       ? Constant::ofInts(onnx::TensorProto::INT64, {},
                                          {static_cast<int64_t>(elementsOf(shape))})
                       : Constant::ofInts(
                             onnx::TensorProto::INT64, {std::max<int64_t>(0, end - start)},
                             Shape(shape.begin() + start, shape.begin() + std::max(start, end)));
      Value v;
      v.kind = ValueKind::kConst;
      v.type = c.type;
      v.shape = c.shape;
      v.constant = std::move(c);
      values_[n.output(0)] = std::move(v);
      continue;
    }
    const bool allKnown = std::all_of(
        in.begin(), in.end(), [](const Value* v) { return !v || v->kind == ValueKind::kConst; });
    if (allKnown && op == "Loop") {  // run at compile time, its body on constants
      llvm::Expected<std::optional<std::vector<Constant>>> out = foldLoop(i, in);
      if (!out) return out.takeError();
      if (*out) {
        for (size_t k = 0; k < (*out)->size() && k < static_cast<size_t>(n.output_size()); ++k)
          defineConstant(n.output(static_cast<int>(k)), std::move((**out)[k]));
        continue;
      }
    }
    if (allKnown) {
      std::vector<const Constant*> constants;
      for (const Value* v : in) constants.push_back(v ? &*v->constant : nullptr);
      std::string problem;
      std::optional<std::vector<Constant>> out = evaluate(n, constants, problem);
      if (!problem.empty()) return nodeError(i, problem);
      if (out) {
        for (size_t k = 0; k < out->size() && k < static_cast<size_t>(n.output_size()); ++k)
          defineConstant(n.output(static_cast<int>(k)), std::move((*out)[k]));
        continue;
      }
    }
    const OpRule* rule = findOpRule(op);
    if (!rule) {
      (void)unsupported(i, "");
      continue;
    }
    if (n.input_size() < rule->minInputs || n.input_size() > rule->maxInputs)
      return nodeError(
          i, "takes " + std::to_string(rule->minInputs) +
                 (rule->maxInputs > rule->minInputs ? " to " + std::to_string(rule->maxInputs)
                                                    : std::string()) +
                 " inputs, has " + std::to_string(n.input_size()));
    for (int k = 0; k < rule->minInputs; ++k)
      if (n.input(k).empty()) return nodeError(i, "input " + std::to_string(k) + " is missing");
    if (n.output_size() == 0 || n.output(0).empty()) return nodeError(i, "has no output");
    dynamic_[i] = true;
    if (llvm::Error e = rule->infer(*this, i)) return e;
    for (const std::string& out : n.output())
      if (const Value* v = value(out); v && producer(out) == i) {
        int64_t elements = 1;
        for (int64_t d : v->shape)
          if (d < 1 || __builtin_mul_overflow(elements, d, &elements) ||
              elements > (int64_t{1} << 40))
            return nodeError(i,
                             "its output '" + out + "' would have shape " + shapeText(v->shape) +
                                 "; dtc's tensors have positive sizes and at most 2^40 elements");
      }
  }
  return unsupportedError();
}

llvm::Error Translator::unsupportedError() const {
  if (unsupportedCount_ == 0) return llvm::Error::success();
  return error(model_.name() + ": " + std::to_string(unsupportedCount_) +
               " node(s) dtc cannot train: " + unsupported_);
}

llvm::Error Translator::emitAll() {
  for (int i = 0; i < nodeCount(); ++i) {
    if (!dynamic_[i]) continue;
    if (const int g = groupOf_[i]; g >= 0) {
      if (groups_[g].root == i)
        if (llvm::Error e = groups_[g].emit()) return e;
      continue;
    }
    if (llvm::Error e = findOpRule(nodes_[i]->op_type())->emit(*this, i)) return e;
  }
  return unsupportedError();
}

llvm::Error Translator::finishLoss(std::vector<std::string>& outputs, std::string& loss,
                                   std::string& predictions, std::string& targets) {
  const Value* v = value(lossValue_);
  if (!v)
    return error(model_.name() + ": '" + lossValue_ +
                 "' is an output dtc does not compute (an optional output of its node)");
  if (v->kind == ValueKind::kConst)
    return error(model_.name() + ": '" + lossValue_ +
                 "' does not depend on the data or the parameters; nothing to train");
  for (const std::string& o : outputOrder_) {
    const Value* out = value(o);
    if (!out || out->kind == ValueKind::kConst) continue;
    // An output that passes a value through (Identity, Dropout) keeps its own name: a copy.
    if (out->name != o && out->shape.empty())
      builder_.node(o, "Scale", {out->name}, {o}, {NodeAttr::real("factor", 1.0)});
    else if (out->name != o)
      builder_.node(o, "Reshape", {out->name}, {o}, {NodeAttr::ints("shape", out->shape)});
    outputs.push_back(o);
  }
  if (options_.loss == "mse" || options_.loss == "cross-entropy") {
    const bool mse = options_.loss == "mse";
    if (!mse && v->shape.size() < 2)
      return error(model_.name() + ": --loss cross-entropy scores [N, classes] logits; '" +
                   lossValue_ + "' is " + shapeText(v->shape));
    Shape target = mse ? v->shape : Shape(v->shape.begin(), v->shape.end() - 1);
    target[0] = -1;
    builder_.input(options_.target, mse ? model::DType::f32 : model::DType::i64, target);
    loss = fresh(options_.loss);
    builder_.node(options_.loss, mse ? "MSELoss" : "SoftmaxCrossEntropy",
                  {v->name, options_.target}, {loss});
    if (!mse) {  // evaluation scores the logits against the labels (accuracy)
      predictions = lossValue_;
      targets = options_.target;
    }
    return llvm::Error::success();
  }
  if (!v->shape.empty() || v->type != onnx::TensorProto::FLOAT)
    return error(model_.name() + ": the loss '" + lossValue_ + "' must be a float32 scalar, not " +
                 elementTypeName(v->type) + " " + shapeText(v->shape));
  loss = isGraphOutput(lossValue_) ? lossValue_ : v->name;
  // A cross-entropy the export computes on logits it also returns: evaluation scores them.
  const int node = producer(lossValue_);
  if (node >= 0 && nodes_[node]->op_type() == "SoftmaxCrossEntropyLoss" &&
      nodes_[node]->input_size() >= 2 && isGraphOutput(nodes_[node]->input(0))) {
    const Value* labels = value(nodes_[node]->input(1));
    if (labels && labels->kind == ValueKind::kData) {
      predictions = nodes_[node]->input(0);
      targets = nodes_[node]->input(1);
    }
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<uint8_t>> Translator::run() {
  if (llvm::Error e = readInputs()) return e;
  if (llvm::Error e = chooseLoss()) return e;
  markDifferentiable();
  if (llvm::Error e = checkTrainingExport()) return e;
  if (llvm::Error e = readInitializers()) return e;
  findMoeRegions(*this);
  if (llvm::Error e = walk()) return e;
  findPatterns(*this);
  if (llvm::Error e = emitAll()) return e;
  std::vector<std::string> outputs;
  std::string loss, predictions, targets;
  if (llvm::Error e = finishLoss(outputs, loss, predictions, targets)) return e;
  builder_.setOutputs(outputs, loss, predictions, targets);
  return builder_.finish();
}

llvm::Expected<std::vector<uint8_t>> translateOnnx(const OnnxModel& model,
                                                   const TranslateOptions& options,
                                                   std::vector<std::string>* notes) {
  Translator t(model, options);
  llvm::Expected<std::vector<uint8_t>> bytes = t.run();
  if (bytes && notes) *notes = t.notes();
  return bytes;
}

}  // namespace dtc::onnx_import
