// dtc-pipeline-schedule: one program per pipeline stage, in schedule order (see Passes.td).
#include <map>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "pipeline_parallel/CostModel.h"
#include "pipeline_parallel/Pipeline.h"
#include "pipeline_parallel/Simulate.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

constexpr int64_t kReplicated = -1;  // on every device that needs it (data, AdamW's step)
constexpr int64_t kUnknown = -2;
constexpr int64_t kMaxTag = 32767;  // MPI guarantees tags up to here

using pipeline::stageOf;

StringAttr stateName(func::FuncOp func, unsigned arg) {
  if (auto name = func.getArgAttrOfType<StringAttr>(arg, attr::kParam)) return name;
  return func.getArgAttrOfType<StringAttr>(arg, attr::kState);
}

// Splits one function into per-device programs.
class Splitter {
 public:
  Splitter(func::FuncOp func, const pipeline::PipelineConfig& config)
      : func_(func), config_(config), body_(func.getBody().front()) {}

  FailureOr<SmallVector<func::FuncOp>> run(bool training) {
    placeValues();
    assignTransfers();
    if (failed(checkTags())) return failure();
    if (training && config_.splitsBackward()) {
      markWeightGradients();
      priceChunkPasses();
    }
    if (training) orders_ = pipeline::trainSchedules(config_);
    SmallVector<func::FuncOp> programs;
    OpBuilder b(func_);
    b.setInsertionPointAfter(func_);
    for (int64_t d = 0; d < config_.stages; ++d) {
      FailureOr<func::FuncOp> program = build(b, d, training);
      if (failed(program)) return failure();
      b.setInsertionPointAfter(*program);
      programs.push_back(*program);
    }
    return programs;
  }

  // Chunk (virtual stage) of each value, kReplicated for values every device computes.
  const llvm::DenseMap<Value, int64_t>& homes() const { return home_; }

 private:
  int64_t deviceOf(Value v) const {
    int64_t h = home_.lookup(v);
    return h >= 0 ? config_.deviceOf(h) : kReplicated;
  }

  // An op without a stage goes where most of its operands' bytes live, so that the small ones
  // travel (a loss-scaling `select` of a stage-0 parameter runs on stage 0 and receives the
  // scalar decision; it must not pull the parameter over); on a tie, the latest chunk. Ops on
  // replicated values only are replicated.
  int64_t placeByBytes(Operation* op) {
    std::map<int64_t, int64_t> bytes;
    for (Value v : op->getOperands()) {
      int64_t h = home_.lookup(v);
      if (h < 0) continue;
      bytes[h] += static_cast<int64_t>(pipeline::valueBytes(v));
    }
    int64_t best = kReplicated, most = -1;
    for (auto& [h, b] : bytes)
      if (b >= most) best = h, most = b;
    return best;
  }

  // Ops with a stage keep it; others are placed by placeByBytes. Optimizer state follows the
  // op that reads it.
  void placeValues() {
    for (BlockArgument arg : func_.getArguments()) {
      auto stage = func_.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), dist::kStageAttr);
      home_[arg] = stage                                               ? stage.getInt()
                   : func_.getArgAttr(arg.getArgNumber(), attr::kData) ? kReplicated
                                                                       : kUnknown;
    }
    auto placeOps = [&] {
      for (Operation& op : body_.without_terminator()) {
        int64_t h = stageOf(&op);
        if (h < 0) h = placeByBytes(&op);
        for (Value r : op.getResults()) home_[r] = h;
      }
    };
    placeOps();
    for (BlockArgument arg : func_.getArguments()) {
      if (home_[arg] != kUnknown) continue;
      llvm::SmallSet<int64_t, 4> devices;
      int64_t first = kReplicated;
      for (Operation* user : arg.getUsers()) {
        if (isa<func::ReturnOp>(user)) continue;
        int64_t h = home_.lookup(user->getResult(0));
        if (user->getNumResults() == 0 || h < 0) continue;
        devices.insert(config_.deviceOf(h));
        first = first < 0 ? h : std::min(first, h);
      }
      home_[arg] = devices.size() == 1 ? first : kReplicated;
    }
    placeOps();
  }

  // Under a zero-bubble schedule, splits each chunk's backward ops into the input gradient (B:
  // what another chunk's backward reads, and everything it is computed from, through ops of
  // no stage too) and the rest, the weight gradients (W), which get dist.weight_grad. A
  // recomputed forward op lands where its first reader is: before B if B reads it, else in W.
  void markWeightGradients() {
    llvm::DenseSet<Operation*> inputGrad;
    for (Operation& op : llvm::reverse(body_.without_terminator())) {
      int64_t chunk = stageOf(&op);
      if (chunk < 0 && op.getNumResults() > 0) chunk = home_.lookup(op.getResult(0));
      bool needed = llvm::any_of(op.getUsers(), [&](Operation* user) {
        if (inputGrad.contains(user)) return true;
        int64_t at = stageOf(user);
        return at >= 0 && at != chunk && user->hasAttr(dist::kBackwardAttr);
      });
      if (needed) inputGrad.insert(&op);
    }
    UnitAttr mark = UnitAttr::get(func_.getContext());
    for (Operation& op : body_.without_terminator())
      if (stageOf(&op) >= 0 && op.hasAttr(dist::kBackwardAttr) && !inputGrad.contains(&op))
        op.setAttr(dist::kWeightGradAttr, mark);
  }

  // The seconds of each chunk's F, B and W for one micro-batch (the first's), on the cost
  // model's roofline: the times a zero-bubble order is list-scheduled on.
  void priceChunkPasses() {
    config_.passSeconds.assign(3 * config_.chunks(), 0.0);
    for (Operation& op : body_.without_terminator()) {
      const int64_t chunk = stageOf(&op);
      if (chunk < 0 || pipeline::microBatchOf(&op) != 0) continue;
      config_.passSeconds[3 * chunk + pipeline::passSlot(passOf(&op))] += pipeline::opSeconds(&op);
    }
  }

 public:
  const pipeline::PipelineConfig& config() const { return config_; }

 private:
  // Devices returning result i: an updated state tensor on the device holding it (every device
  // for replicated state), everything else (loss, outputs) on stage 0.
  SmallVector<int64_t> resultDevices(unsigned i) {
    if (stateArgs_.empty())  // once: a search per result would be quadratic in depth
      for (BlockArgument arg : func_.getArguments())
        if (StringAttr name = stateName(func_, arg.getArgNumber()))
          stateArgs_.try_emplace(name.getValue(), arg);
    if (auto name = func_.getResultAttrOfType<StringAttr>(i, attr::kUpdates))
      if (auto it = stateArgs_.find(name.getValue()); it != stateArgs_.end()) {
        if (home_.lookup(it->second) >= 0) return {deviceOf(it->second)};
        SmallVector<int64_t> all;
        for (int64_t d = 0; d < config_.stages; ++d) all.push_back(d);
        return all;
      }
    return {0};
  }

  // Every value used on a device other than its own is sent there once: tags count the
  // transfers of each ordered pair of devices, in program order.
  void assignTransfers() {
    auto ret = cast<func::ReturnOp>(body_.getTerminator());
    auto note = [&](Value v, int64_t to) {
      int64_t from = deviceOf(v);
      if (from < 0 || from == to) return;
      auto key = std::make_pair(v, to);
      if (tag_.count(key)) return;
      tag_[key] = pairCount_[{from, to}]++;
      targets_[v].push_back(to);
    };
    auto visit = [&](Value v) {
      for (OpOperand& use : v.getUses()) {
        Operation* user = use.getOwner();
        if (user == ret) {
          for (int64_t d : resultDevices(use.getOperandNumber())) note(v, d);
        } else if (user->getNumResults() > 0 && home_.lookup(user->getResult(0)) >= 0) {
          note(v, deviceOf(user->getResult(0)));
        } else if (user->getNumResults() == 0 && stageOf(user) >= 0) {
          note(v, config_.deviceOf(stageOf(user)));
        }
      }
    };
    for (BlockArgument arg : func_.getArguments()) visit(arg);
    for (Operation& op : body_.without_terminator())
      for (Value r : op.getResults()) visit(r);
  }

  LogicalResult checkTags() {
    for (auto& [pair, count] : pairCount_)
      if (count > kMaxTag + 1)
        return func_.emitError("the pipeline moves ")
               << count << " tensors from stage " << pair.first << " to stage " << pair.second
               << " per step; at most " << kMaxTag + 1
               << " fit MPI's tags (use fewer micro-batches)";
    return success();
  }

  // One device's program.
  class Program {
   public:
    Program(Splitter& s, OpBuilder& b, int64_t device, func::FuncOp func)
        : s_(s), b_(b), device_(device), func_(func), block_(&func.getBody().front()) {}

    // `v` as this device has it: its own value, a replicated one computed or read here, or a
    // received one.
    FailureOr<Value> get(Value v, Location loc) {
      if (Value mapped = map_.lookupOrNull(v)) return mapped;
      int64_t from = s_.deviceOf(v);
      if (from >= 0 && from != device_) return receive(v, loc);
      if (auto arg = dyn_cast<BlockArgument>(v)) return addArgument(arg);
      // Replicated values, and reductions or sums that run as soon as they can, are computed
      // when first needed.
      Operation* def = v.getDefiningOp();
      if (from == kReplicated || stageOf(def) < 0) {
        if (failed(emit(def))) return failure();
        return map_.lookup(v);
      }
      // An op of the unit being emitted, needed earlier than its turn (the critical ops of a
      // unit go first, and a reduction between two of them may pull a non-critical one).
      if (unit_.count(def)) {
        if (failed(emit(def))) return failure();
        return map_.lookup(v);
      }
      return def->emitError("pipeline schedule: value used before it is computed on stage ")
             << device_ << " (an op is not in the unit the schedule runs it in)";
    }

    Value addArgument(BlockArgument arg) {
      Value local = block_->addArgument(arg.getType(), arg.getLoc());
      argAttrs_.push_back(s_.func_.getArgAttrDict(arg.getArgNumber()));
      map_.map(arg, local);
      return local;
    }

    // Sends `v`'s local value to every device that needs it.
    void sendAway(Value v, Value local, Location loc) {
      auto it = s_.targets_.find(v);
      if (it == s_.targets_.end()) return;
      for (int64_t to : it->second) {
        auto send = dist::SendOp::create(b_, loc, local, axes(), b_.getI64IntegerAttr(to - device_),
                                         b_.getI64IntegerAttr(s_.tag_.lookup({v, to})));
        copyUnit(v, send);
      }
    }

    FailureOr<Value> receive(Value v, Location loc) {
      int64_t from = s_.deviceOf(v);
      auto recv =
          dist::RecvOp::create(b_, loc, v.getType(), axes(), b_.getI64IntegerAttr(device_ - from),
                               b_.getI64IntegerAttr(s_.tag_.lookup({v, device_})));
      copyUnit(v, recv);
      map_.map(v, recv.getResult());
      return recv.getResult();
    }

    LogicalResult emit(Operation* op) {
      if (emitted_.count(op)) return success();
      for (Value operand : op->getOperands())
        if (failed(get(operand, op->getLoc()))) return failure();
      Operation* clone = b_.clone(*op, map_);
      emitted_.insert(op);
      for (auto [r, local] : llvm::zip(op->getResults(), clone->getResults()))
        sendAway(r, local, op->getLoc());
      return success();
    }

    // Whether `op` could run now without waiting for another device.
    bool ready(Operation* op) {
      return llvm::all_of(op->getOperands(), [&](Value v) {
        if (map_.contains(v) || s_.deviceOf(v) == kReplicated) return true;
        if (s_.deviceOf(v) != device_) return false;
        return isa<BlockArgument>(v);
      });
    }

    ArrayAttr axes() { return b_.getStrArrayAttr({s_.config_.axis}); }

    void copyUnit(Value v, Operation* transfer) {
      if (Operation* def = v.getDefiningOp()) {
        pipeline::copyPlacement(def, transfer);
      } else if (int64_t h = s_.home_.lookup(v); h >= 0) {
        transfer->setAttr(dist::kStageAttr, b_.getI64IntegerAttr(h));
      }
    }

    Splitter& s_;
    OpBuilder& b_;
    int64_t device_;
    func::FuncOp func_;
    Block* block_;
    IRMapping map_;
    llvm::DenseSet<Operation*> emitted_;
    llvm::DenseSet<Operation*> unit_;  // ops of the unit being emitted
    SmallVector<DictionaryAttr> argAttrs_;
  };

  pipeline::Pass passOf(Operation* op) const {
    if (!op->hasAttr(dist::kBackwardAttr)) return pipeline::Pass::kForward;
    if (!config_.splitsBackward()) return pipeline::Pass::kBackward;
    return op->hasAttr(dist::kWeightGradAttr) ? pipeline::Pass::kWeightGrad
                                              : pipeline::Pass::kInputGrad;
  }

  FailureOr<func::FuncOp> build(OpBuilder& outer, int64_t device, bool training) {
    std::string name = (func_.getSymName() + "_stage" + std::to_string(device)).str();
    auto program = func::FuncOp::create(outer, func_.getLoc(), name, outer.getFunctionType({}, {}));
    program->setAttr(dist::kStageAttr, outer.getI64IntegerAttr(device));
    program->setAttr(dist::kFunctionAttr, outer.getStringAttr(func_.getSymName()));
    Block* block = program.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockBegin(block);
    Program p(*this, b, device, program);

    // Arguments held here and needed elsewhere (a tied embedding) go first. Stage 0 reads every
    // data input of an evaluation: it scores the outputs against the labels.
    for (BlockArgument arg : func_.getArguments()) {
      bool here = deviceOf(arg) == device;
      bool labels = !training && device == 0 && func_.getArgAttr(arg.getArgNumber(), attr::kData);
      if ((here && targets_.count(arg)) || labels) {
        Value local = p.addArgument(arg);
        if (here) p.sendAway(arg, local, arg.getLoc());
      }
    }

    // Ops by unit; ops without a stage attribute (reductions the partitioner inserted, sums
    // over micro-batches, optimizer updates) run as soon as their operands are here.
    std::map<std::tuple<int64_t, int64_t, pipeline::Pass>, SmallVector<Operation*>> units;
    SmallVector<Operation*> floating;
    for (Operation& op : body_.without_terminator()) {
      if (op.getNumResults() ? deviceOf(op.getResult(0)) != device
                             : (stageOf(&op) < 0 || config_.deviceOf(stageOf(&op)) != device))
        continue;
      if (stageOf(&op) < 0) {
        floating.push_back(&op);
        continue;
      }
      units[{stageOf(&op), pipeline::microBatchOf(&op), passOf(&op)}].push_back(&op);
    }
    auto drain = [&]() -> LogicalResult {
      for (bool progress = true; progress;) {
        progress = false;
        for (Operation* op : floating)
          if (!p.emitted_.count(op) && p.ready(op)) {
            if (failed(p.emit(op))) return failure();
            progress = true;
          }
      }
      return success();
    };
    if (failed(drain())) return failure();
    std::vector<pipeline::Unit> order;
    if (training) {
      order = orders_[device];
    } else {
      for (int64_t c : config_.chunksOf(device)) order.push_back({c, 0, pipeline::Pass::kForward});
    }
    for (const pipeline::Unit& u : order) {
      // What other stages wait for first (activations forward, their gradients backward:
      // weight gradients come after the input gradient is sent), then the rest of the unit,
      // then what became ready (sums over micro-batches, reductions, optimizer updates).
      SmallVector<Operation*>& ops = units[{u.chunk, u.microBatch, u.pass}];
      llvm::DenseSet<Operation*> critical;
      p.unit_ = llvm::DenseSet<Operation*>(ops.begin(), ops.end());
      for (Operation* op : llvm::reverse(ops)) {
        bool sent = llvm::any_of(op->getResults(), [&](Value r) { return targets_.count(r); });
        bool feeds = llvm::any_of(op->getUsers(), [&](Operation* u) { return critical.count(u); });
        if (sent || feeds) critical.insert(op);
      }
      for (bool first : {true, false})
        for (Operation* op : ops)
          if (critical.count(op) == first && failed(p.emit(op))) return failure();
      if (failed(drain())) return failure();
    }
    // What is left waits for other devices (or belongs to no unit of the schedule).
    for (Operation& op : body_.without_terminator()) {
      bool mine = op.getNumResults()
                      ? deviceOf(op.getResult(0)) == device
                      : stageOf(&op) >= 0 && config_.deviceOf(stageOf(&op)) == device;
      if (mine && failed(p.emit(&op))) return failure();
    }

    auto ret = cast<func::ReturnOp>(body_.getTerminator());
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (!llvm::is_contained(resultDevices(i), device)) continue;
      FailureOr<Value> local = p.get(v, ret.getLoc());
      if (failed(local)) return failure();
      results.push_back(*local);
      resultAttrs.push_back(func_.getResultAttrDict(i));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    SmallVector<Type> resultTypes;
    for (Value v : results) resultTypes.push_back(v.getType());
    program.setType(b.getFunctionType(block->getArgumentTypes(), resultTypes));
    program.setAllArgAttrs(p.argAttrs_);
    program.setAllResultAttrs(resultAttrs);
    return program;
  }

  func::FuncOp func_;
  pipeline::PipelineConfig config_;
  std::vector<std::vector<pipeline::Unit>> orders_;  // the training step's, by device
  Block& body_;
  llvm::DenseMap<Value, int64_t> home_;
  llvm::StringMap<BlockArgument> stateArgs_;  // state tensors' arguments by name
  llvm::DenseMap<std::pair<Value, int64_t>, int64_t> tag_;
  llvm::DenseMap<Value, SmallVector<int64_t>> targets_;
  std::map<std::pair<int64_t, int64_t>, int64_t> pairCount_;
};

struct PipelineSchedulePass : impl::PipelineScheduleBase<PipelineSchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<pipeline::PipelineConfig> config = pipeline::getPipeline(module);
    if (!config) {
      module.emitError(
          "dtc-pipeline-schedule: the module has no pipeline (run dtc-pipeline-stages)");
      return signalPassFailure();
    }
    if (auto grad = module.lookupSymbol<func::FuncOp>(fn::kGrad)) grad.erase();
    for (StringRef name : {fn::kTrainStep, "eval"}) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func) continue;
      Splitter splitter(func, *config);
      FailureOr<SmallVector<func::FuncOp>> programs = splitter.run(name == fn::kTrainStep);
      if (failed(programs)) return signalPassFailure();
      FailureOr<pipeline::Timeline> timeline = pipeline::simulate(*programs);
      if (failed(timeline)) return signalPassFailure();
      if (name == fn::kTrainStep) {
        // The passes' times the order was scheduled on, for whoever rebuilds it.
        *config = splitter.config();
        pipeline::setPipeline(module, *config);
        pipeline::recordStageStats(module, func, *config, *timeline);
      }
      func.erase();
    }
  }
};

}  // namespace
}  // namespace dtc
