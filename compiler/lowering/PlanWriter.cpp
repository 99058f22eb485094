#include "lowering/PlanWriter.h"

#include <cstring>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CRC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "Locations.h"
#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "lowering/MemoryLayout.h"
#include "ops/kernel_registry.h"
#include "pipeline_parallel/Pipeline.h"
#include "plan_generated.h"
#include "planfile/function_names.h"
#include "planfile/plan_format.h"

using namespace mlir;

namespace dtc {
namespace {

plan::DType planDType(Type t) {
  if (t.isInteger(64)) return plan::DType::i64;
  if (t.isInteger(32)) return plan::DType::i32;
  if (t.isF16()) return plan::DType::f16;
  if (t.isBF16()) return plan::DType::bf16;
  if (isa<Float8E4M3FNType>(t)) return plan::DType::f8e4m3;
  if (isa<Float8E5M2Type>(t)) return plan::DType::f8e5m2;
  return plan::DType::f32;
}

class PlanWriter {
 public:
  PlanWriter(ModuleOp module, const ModelFile* model, bool values)
      : module_(module), model_(model), values_(values) {}

  LogicalResult run(std::vector<uint8_t>& out);

 private:
  flatbuffers::Offset<plan::Function> writeFunction(func::FuncOp func);
  // Mesh axis indices per dimension; empty when `sharding` is null or there is no mesh.
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<plan::DimSharding>>> writeSharding(
      dist::ShardingAttr sharding, int64_t sequenceDim = -1, int64_t sequenceChunks = 0);
  std::vector<int64_t> axisIndices(ArrayAttr axes);
  // The op's attributes as its kernel declares them (ops/kernels.def), each in its declared
  // field; an attribute the kernel does not read is an error, not silently dropped.
  LogicalResult writeAttrs(plan::KernelOp call, const KernelInfo& kernel,
                           std::vector<flatbuffers::Offset<plan::Attr>>& out);
  LogicalResult writeState(std::vector<flatbuffers::Offset<plan::StateTensor>>& state);
  LogicalResult writeState(func::FuncOp trainStep, DictionaryAttr layout, int32_t stage,
                           std::vector<flatbuffers::Offset<plan::StateTensor>>& state);

  ModuleOp module_;
  const ModelFile* model_;
  bool values_;  // false: stored initial values left out (a plan compiled to be measured)
  flatbuffers::FlatBufferBuilder fbb_{1 << 20};
  std::vector<uint8_t> constants_;
};

std::vector<int64_t> PlanWriter::axisIndices(ArrayAttr axes) {
  auto mesh = module_->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
  std::vector<int64_t> out;
  for (Attribute a : axes) out.push_back(mesh.axisIndex(cast<StringAttr>(a).getValue()));
  return out;
}

// The call's parameters, verified against its kernel's declaration (plan.kernel's verifier),
// each in the field its kind is stored in.
LogicalResult PlanWriter::writeAttrs(plan::KernelOp call, const KernelInfo& kernel,
                                     std::vector<flatbuffers::Offset<plan::Attr>>& out) {
  for (NamedAttribute param : call.getParams()) {
    const KernelAttr* declared = kernel.attr(param.getName().str());
    Attribute value = param.getValue();
    if (!declared || !plan::holdsKernelAttr(declared->kind, value))
      return call.emitOpError("plan writer: parameter '")
             << param.getName().getValue() << "' is not one '" << kernel.name << "' reads";
    int64_t i = 0;
    double f = 0;
    std::vector<int64_t> ints;
    std::string s;
    switch (declared->kind) {
      case AttrKind::kInt:
        if (auto b = dyn_cast<BoolAttr>(value))
          i = b.getValue();
        else
          i = cast<IntegerAttr>(value).getInt();
        break;
      case AttrKind::kFloat: f = cast<FloatAttr>(value).getValueAsDouble(); break;
      case AttrKind::kInts: {
        ArrayRef<int64_t> values = cast<DenseI64ArrayAttr>(value).asArrayRef();
        ints.assign(values.begin(), values.end());
        break;
      }
      case AttrKind::kMeshAxes:  // mesh axis names, written as their indices
        ints = axisIndices(cast<ArrayAttr>(value));
        break;
      case AttrKind::kString: s = cast<StringAttr>(value).str(); break;
    }
    out.push_back(plan::CreateAttr(fbb_, fbb_.CreateString(param.getName().str()), i, f,
                                   ints.empty() ? 0 : fbb_.CreateVector(ints),
                                   s.empty() ? 0 : fbb_.CreateString(s)));
  }
  return success();
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<plan::DimSharding>>>
PlanWriter::writeSharding(dist::ShardingAttr sharding, int64_t sequenceDim,
                          int64_t sequenceChunks) {
  std::vector<flatbuffers::Offset<plan::DimSharding>> dims;
  if (sharding && module_->hasAttr(dist::kMeshAttr))
    for (auto [k, d] : llvm::enumerate(sharding.getDims())) {
      std::vector<int64_t> axes = axisIndices(cast<ArrayAttr>(d));
      std::vector<int32_t> narrow(axes.begin(), axes.end());
      dims.push_back(plan::CreateDimShardingDirect(
          fbb_, &narrow, sharding.dimBlocks(k),
          static_cast<int64_t>(k) == sequenceDim ? sequenceChunks : 0));
    }
  return fbb_.CreateVector(dims);
}

LogicalResult PlanWriter::writeState(std::vector<flatbuffers::Offset<plan::StateTensor>>& state) {
  // One state region, or with a pipeline one per stage: each stage's training program lists
  // the tensors its region holds.
  SmallVector<std::tuple<func::FuncOp, DictionaryAttr, int32_t>> regions;
  for (auto func : module_.getOps<func::FuncOp>())
    if (auto of = func->getAttrOfType<StringAttr>(dist::kFunctionAttr); of && of == fn::kTrainStep)
      regions.push_back({func, func->getAttrOfType<DictionaryAttr>(attr::kStateLayout),
                         static_cast<int32_t>(pipeline::stageOf(func))});
  if (regions.empty())
    regions.push_back({module_.lookupSymbol<func::FuncOp>(fn::kTrainStep),
                       module_->getAttrOfType<DictionaryAttr>(attr::kStateLayout), -1});
  for (auto [trainStep, layout, stage] : regions)
    if (failed(writeState(trainStep, layout, stage, state))) return failure();
  return success();
}

LogicalResult PlanWriter::writeState(func::FuncOp trainStep, DictionaryAttr layout, int32_t stage,
                                     std::vector<flatbuffers::Offset<plan::StateTensor>>& state) {
  if (!layout || !trainStep)
    return module_.emitError("plan writer: run dtc-optimizer and dtc-plan-memory first");
  llvm::StringMap<const model::Initializer*> inits;
  if (auto* list = model_ ? model_->model().graph()->initializers() : nullptr)
    for (const auto* init : *list) inits[init->info()->name()->str()] = init;
  llvm::StringSet<> aliasNames;

  for (BlockArgument arg : trainStep.getArguments()) {
    auto param = trainStep.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam);
    auto slot = trainStep.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kState);
    if (!param && !slot) continue;
    StringRef name = param ? param.getValue() : slot.getValue();
    auto local = cast<RankedTensorType>(arg.getType());
    auto offset = cast<IntegerAttr>(layout.get(name)).getInt();
    std::vector<int64_t> shape(local.getShape().begin(), local.getShape().end());
    // Initializers describe the whole tensor: sizes and values are checked against it.
    auto sharding =
        trainStep.getArgAttrOfType<dist::ShardingAttr>(arg.getArgNumber(), dist::kShardingAttr);
    std::vector<int64_t> globalShape = shape;
    if (auto mesh = module_->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr); mesh && sharding)
      for (size_t d = 0; d < globalShape.size(); ++d)
        globalShape[d] *= mesh.groupSize(sharding.dimAxes(d));
    auto type = RankedTensorType::get(globalShape, local.getElementType());
    plan::InitKind kind = plan::InitKind::zeros;
    double a = 0, bParam = 0;
    uint64_t seed = 0, dataOffset = 0, dataBytes = 0;
    bool trainable = trainStep.getArgAttr(arg.getArgNumber(), attr::kTrainable) != nullptr;
    auto decay = trainStep.getArgAttrOfType<FloatAttr>(arg.getArgNumber(), attr::kWeightDecay);
    std::vector<std::string> aliases;
    std::vector<flatbuffers::Offset<plan::ExternalTensor>> external;
    bool constant = false;
    if (param && model_) {
      const model::Initializer* init = inits.lookup(name);
      if (!init) return module_.emitError("plan writer: no initializer named '") << name << "'";
      constant = init->constant();
      if (init->aliases())
        for (const flatbuffers::String* alias : *init->aliases()) {
          if (inits.count(alias->string_view()) || !aliasNames.insert(alias->string_view()).second)
            return module_.emitError("initializer '")
                   << name << "': alias '" << alias->str() << "' names another tensor";
          aliases.push_back(alias->str());
        }
      if (init->external())
        for (const model::ExternalTensor* e : *init->external()) {
          if (inits.count(e->name()->string_view()) ||
              !aliasNames.insert(e->name()->string_view()).second)
            return module_.emitError("initializer '")
                   << name << "': external tensor '" << e->name()->str()
                   << "' names another tensor";
          external.push_back(plan::CreateExternalTensorDirect(fbb_, e->name()->c_str(), e->index(),
                                                              e->transposed()));
        }
      size_t bytes = type.getNumElements() * sizeof(float);
      const void* values = nullptr;
      if (init->raw_data() && init->raw_data()->size()) {
        if (init->raw_data()->size() != bytes)
          return module_.emitError("initializer '") << name << "' has " << init->raw_data()->size()
                                                    << " bytes of data, its shape needs " << bytes;
        values = init->raw_data()->data();
      } else if (init->float_data() && init->float_data()->size()) {
        if (init->float_data()->size() * sizeof(float) != bytes)
          return module_.emitError("initializer '")
                 << name << "' has " << init->float_data()->size() << " values, its shape needs "
                 << type.getNumElements();
        values = init->float_data()->data();
      }
      if (values && !values_) {
        kind = plan::InitKind::zeros;
      } else if (values) {
        kind = plan::InitKind::data;
        dataOffset = alignTo(constants_.size());
        dataBytes = bytes;
        constants_.resize(dataOffset + bytes);
        std::memcpy(constants_.data() + dataOffset, values, bytes);
      } else if (const model::InitRule* rule = init->init()) {
        kind = static_cast<plan::InitKind>(rule->kind());
        a = rule->a();
        bParam = rule->b();
        seed = rule->seed();
      } else {
        return module_.emitError("initializer '")
               << name << "' has neither values nor an init rule";
      }
    }
    // State that does not start at zero (a loss scale): its value as stored data.
    if (auto initial = trainStep.getArgAttrOfType<FloatAttr>(arg.getArgNumber(), attr::kInitial)) {
      if (type.getNumElements() != 1 || !type.getElementType().isF32())
        return trainStep.emitError("an initial value needs an f32 scalar state tensor");
      float value = static_cast<float>(initial.getValueAsDouble());
      kind = plan::InitKind::data;
      dataOffset = alignTo(constants_.size());
      dataBytes = sizeof value;
      constants_.resize(dataOffset + dataBytes);
      std::memcpy(constants_.data() + dataOffset, &value, sizeof value);
    }
    auto shardingVector = writeSharding(sharding);
    state.push_back(plan::CreateStateTensor(
        fbb_, fbb_.CreateString(name.str()), planDType(type.getElementType()),
        fbb_.CreateVector(shape), offset, param ? plan::Role::param : plan::Role::optim_state,
        trainable, kind, a, bParam, seed, dataOffset, dataBytes, fbb_.CreateVector(globalShape),
        shardingVector, stage, aliases.empty() ? 0 : fbb_.CreateVectorOfStrings(aliases),
        decay ? decay.getValueAsDouble() : 0.0, constant,
        external.empty() ? 0 : fbb_.CreateVector(external)));
  }
  return success();
}

flatbuffers::Offset<plan::Function> PlanWriter::writeFunction(func::FuncOp func) {
  llvm::DenseMap<Value, uint32_t> index;
  std::vector<flatbuffers::Offset<plan::Value>> values;
  auto addValue = [&](Value v, const std::string& name, int64_t region, int64_t offset) {
    auto type = cast<RankedTensorType>(v.getType());
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    index[v] = values.size();
    values.push_back(plan::CreateValueDirect(fbb_, name.c_str(), planDType(type.getElementType()),
                                             &shape, static_cast<plan::Region>(region),
                                             static_cast<uint64_t>(offset)));
  };
  auto argOffsets = func->getAttrOfType<DenseI64ArrayAttr>(attr::kArgOffsets).asArrayRef();
  auto argRegions = func->getAttrOfType<DenseI64ArrayAttr>(attr::kArgRegions).asArrayRef();
  std::vector<flatbuffers::Offset<plan::Binding>> arguments, results;
  for (BlockArgument arg : func.getArguments()) {
    unsigned i = arg.getArgNumber();
    plan::Role role = plan::Role::param;
    StringAttr name = func.getArgAttrOfType<StringAttr>(i, attr::kParam);
    if (!name)
      name = func.getArgAttrOfType<StringAttr>(i, attr::kState), role = plan::Role::optim_state;
    if (!name) name = func.getArgAttrOfType<StringAttr>(i, attr::kData), role = plan::Role::data;
    if (!name) name = func.getArgAttrOfType<StringAttr>(i, attr::kHyper), role = plan::Role::hyper;
    if (!name) {
      func.emitError("plan writer: argument ")
          << i << " is neither parameter, state, data nor hyper-parameter";
      return {};
    }
    addValue(arg, name.str(), argRegions[i], argOffsets[i]);
    int32_t batchDim = -1;
    if (role == plan::Role::data) {
      auto bd = func.getArgAttrOfType<IntegerAttr>(i, attr::kBatchDim);
      batchDim = bd ? static_cast<int32_t>(bd.getInt()) : 0;
    }
    auto chunks = func.getArgAttrOfType<IntegerAttr>(i, dist::kSequenceChunksAttr);
    auto sharding = writeSharding(func.getArgAttrOfType<dist::ShardingAttr>(i, dist::kShardingAttr),
                                  batchDim + 1, chunks ? chunks.getInt() : 0);
    auto micro = func.getArgAttrOfType<IntegerAttr>(i, attr::kMicroBatch);
    arguments.push_back(plan::CreateBinding(fbb_, index[arg], role, fbb_.CreateString(name.str()),
                                            batchDim, sharding,
                                            micro ? static_cast<int32_t>(micro.getInt()) : 0));
  }
  std::vector<flatbuffers::Offset<plan::Step>> steps;
  for (Operation& op : func.getBody().front().without_terminator()) {
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>(attr::kOffsets).asArrayRef();
    auto regions = op.getAttrOfType<DenseI64ArrayAttr>(attr::kRegions).asArrayRef();
    std::string loc = locationName(op.getLoc());
    auto call = dyn_cast<plan::KernelOp>(op);
    if (!call) {
      op.emitError("plan writer: '")
          << op.getName() << "' is not a kernel call (run dtc-lower-to-kernels)";
      return {};
    }
    const KernelInfo* kernel = findKernel(call.getKernel().str());
    for (auto [k, r] : llvm::enumerate(op.getResults()))
      addValue(r,
               (loc.empty() ? std::string(kernel->name) : loc + "/" + kernel->name) + ":" +
                   std::to_string(k),
               regions[k], offsets[k]);
    std::vector<uint32_t> ins, outs;
    for (Value v : op.getOperands()) ins.push_back(index.lookup(v));
    for (Value v : op.getResults()) outs.push_back(index[v]);
    std::vector<flatbuffers::Offset<plan::Attr>> attrs;
    if (failed(writeAttrs(call, *kernel, attrs))) return {};
    uint64_t scratchOffset = 0, scratchBytes = 0;
    if (auto scratch = op.getAttrOfType<DenseI64ArrayAttr>(attr::kScratch)) {
      scratchOffset = static_cast<uint64_t>(scratch[0]);
      scratchBytes = static_cast<uint64_t>(scratch[1]);
    }
    steps.push_back(plan::CreateStepDirect(fbb_, &ins, &outs, &attrs, loc.c_str(), kernel->kernel,
                                           scratchOffset, scratchBytes));
  }
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  auto lossName = module_->getAttrOfType<StringAttr>(attr::kLoss);
  llvm::StringSet<> paramNames;
  for (BlockArgument arg : func.getArguments())
    if (auto p = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam))
      paramNames.insert(p.getValue());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    plan::Role role = plan::Role::output;
    std::string name;
    if (auto out = func.getResultAttrOfType<StringAttr>(i, attr::kOutput)) {
      name = out.str();
      if (out == lossName) role = plan::Role::loss;
    } else if (auto upd = func.getResultAttrOfType<StringAttr>(i, attr::kUpdates)) {
      name = upd.str();
      role = paramNames.count(name) ? plan::Role::param : plan::Role::optim_state;
    } else if (auto g = func.getResultAttrOfType<StringAttr>(i, attr::kGradOf)) {
      name = g.str();
    } else if (auto m = func.getResultAttrOfType<StringAttr>(i, attr::kMetric)) {
      name = m.str();
      role = plan::Role::metric;
    }
    auto sharding =
        writeSharding(func.getResultAttrOfType<dist::ShardingAttr>(i, dist::kShardingAttr));
    results.push_back(
        plan::CreateBinding(fbb_, index.lookup(v), role, fbb_.CreateString(name), -1, sharding));
  }
  std::string fname = func.getSymName() == "forward" ? "eval" : func.getSymName().str();
  if (auto of = func->getAttrOfType<StringAttr>(dist::kFunctionAttr)) fname = of.str();
  auto arena = func->getAttrOfType<IntegerAttr>(attr::kArenaBytes).getInt();
  return plan::CreateFunctionDirect(fbb_, fname.c_str(), &values, &steps, &arguments, &results,
                                    static_cast<uint64_t>(arena),
                                    static_cast<int32_t>(pipeline::stageOf(func)));
}

LogicalResult PlanWriter::run(std::vector<uint8_t>& out) {
  std::vector<flatbuffers::Offset<plan::StateTensor>> state;
  if (failed(writeState(state))) return failure();
  std::vector<flatbuffers::Offset<plan::Function>> functions;
  for (auto func : module_.getOps<func::FuncOp>()) {
    if (!func->hasAttr(attr::kArenaBytes))
      return func.emitError("plan writer: function was not memory-planned");
    flatbuffers::Offset<plan::Function> written = writeFunction(func);
    if (written.IsNull()) return failure();
    functions.push_back(written);
  }
  auto str = [&](StringRef attrName) {
    auto s = module_->getAttrOfType<StringAttr>(attrName);
    return s ? s.str() : std::string();
  };
  auto batch = module_->getAttrOfType<IntegerAttr>(attr::kBatchSize);
  auto micro = module_->getAttrOfType<IntegerAttr>(attr::kMicroBatches);
  auto stateBytes = module_->getAttrOfType<IntegerAttr>(attr::kStateBytes).getInt();
  std::vector<flatbuffers::Offset<plan::MeshAxis>> meshAxes;
  if (auto mesh = module_->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr))
    for (size_t i = 0; i < mesh.rank(); ++i)
      meshAxes.push_back(plan::CreateMeshAxisDirect(
          fbb_, cast<StringAttr>(mesh.getNames()[i]).str().c_str(), mesh.getSizes()[i]));
  auto meshVector = fbb_.CreateVector(meshAxes);
  // Pipeline: the axis, the schedule and what the compiler predicts per stage.
  int32_t pipelineAxis = -1;
  std::string schedule;
  std::vector<flatbuffers::Offset<plan::PipelineStage>> stages;
  if (std::optional<pipeline::PipelineConfig> config = pipeline::getPipeline(module_)) {
    if (auto mesh = module_->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr))
      pipelineAxis = mesh.axisIndex(config->axis);
    schedule = config->summary();
    if (auto list = module_->getAttrOfType<ArrayAttr>(dist::kPipelineStagesAttr))
      for (Attribute a : list) {
        auto d = cast<DictionaryAttr>(a);
        auto i = [&](StringRef k) { return d.getAs<IntegerAttr>(k).getInt(); };
        auto f = [&](StringRef k) { return d.getAs<FloatAttr>(k).getValueAsDouble(); };
        stages.push_back(plan::CreatePipelineStage(
            fbb_, static_cast<int32_t>(i("in_flight")), i("activation_bytes"),
            i("peak_activation_bytes"), f("busy_us"), f("idle_us")));
      }
  }
  auto scheduleString = fbb_.CreateString(schedule);
  auto deviceString = fbb_.CreateString(str(attr::kDevice).empty() ? "cpu" : str(attr::kDevice));
  auto stagesVector = fbb_.CreateVector(stages);
  flatbuffers::Offset<plan::LrSchedule> lrSchedule;
  if (auto d = module_->getAttrOfType<DictionaryAttr>(attr::kLrSchedule)) {
    auto i = [&](StringRef k) { return d.getAs<IntegerAttr>(k).getInt(); };
    auto f = [&](StringRef k) { return d.getAs<FloatAttr>(k).getValueAsDouble(); };
    lrSchedule = plan::CreateLrSchedule(fbb_, fbb_.CreateString(d.getAs<StringAttr>("kind").str()),
                                        f("lr"), i("warmup_steps"), i("decay_steps"), f("min_lr"));
  }
  auto clip = module_->getAttrOfType<FloatAttr>(attr::kClipGradNorm);
  auto workspace = module_->getAttrOfType<IntegerAttr>(attr::kWorkspaceBytes);
  fbb_.ForceVectorAlignment(constants_.size(), 1,
                            32);  // the schema's force_align (FlatBuffers allows up to 32)
  auto constants = fbb_.CreateVector(constants_);
  const std::string hfConfig = str(attr::kHfConfig);
  auto hf = hfConfig.empty() ? 0 : fbb_.CreateString(hfConfig);
  const std::string hfGeneration = str(attr::kHfGenerationConfig);
  auto generation = hfGeneration.empty() ? 0 : fbb_.CreateString(hfGeneration);
  auto planOffset = plan::CreatePlan(
      fbb_, kPlanVersion, fbb_.CreateString("dtc"), batch ? batch.getInt() : 0,
      fbb_.CreateVector(state), static_cast<uint64_t>(stateBytes), fbb_.CreateVector(functions),
      fbb_.CreateString(str(attr::kPredictions)), fbb_.CreateString(str(attr::kTargets)),
      fbb_.CreateString(str(attr::kOptimizer)), constants, meshVector,
      micro ? static_cast<int32_t>(micro.getInt()) : 1, pipelineAxis, scheduleString, stagesVector,
      deviceString, lrSchedule, clip ? clip.getValueAsDouble() : 0.0, clip != nullptr,
      workspace ? static_cast<uint64_t>(workspace.getInt()) : 0, hf, generation);
  plan::FinishPlanBuffer(fbb_, planOffset);
  out.assign(fbb_.GetBufferPointer(), fbb_.GetBufferPointer() + fbb_.GetSize());
  // llvm::crc32 is zlib's CRC-32, which the runtime checks.
  appendPlanFooter(out, llvm::crc32(out));
  return success();
}

}  // namespace

LogicalResult writePlan(ModuleOp module, const ModelFile* model, std::vector<uint8_t>& out,
                        bool values) {
  return PlanWriter(module, model, values).run(out);
}

}  // namespace dtc
