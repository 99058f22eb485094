// Static memory planning: a persistent state region and one liveness-reused arena per function.
#include "Passes.h"

#include <map>
#include <set>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "lowering/MemoryLayout.h"
#include "ops/cuda_scratch.h"
#include "ops/device_kind.h"
#include "ops/in_place.h"
#include "ops/kernel_registry.h"
#include "ops/step_scratch.h"
#include "pipeline_parallel/Pipeline.h"
#include "plan/IR/KernelQueries.h"

namespace dtc {
#define GEN_PASS_DEF_PLANMEMORY
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// Best-fit placement of blocks in an arena whose size grows to the peak demand.
class ArenaAllocator {
 public:
  // Best fit: the smallest gap between live blocks that holds `bytes` (the lowest such gap of
  // that size), else the end. O(log n) per call: a model's depth makes n large.
  int64_t allocate(int64_t bytes) {
    int64_t offset = end_;
    auto gap = gaps_.lower_bound({bytes, INT64_MIN});
    if (gap != gaps_.end()) {
      auto [size, at] = *gap;
      gaps_.erase(gap);
      offset = at;
      if (size > bytes) gaps_.insert({size - bytes, at + bytes});
    } else {
      end_ += bytes;
    }
    live_.emplace(offset, bytes);
    peak_ = std::max(peak_, offset + bytes);
    return offset;
  }

  // The block's space joins the gaps on either side (or the free end).
  void release(int64_t offset) {
    auto it = live_.find(offset);
    if (it == live_.end()) return;
    const int64_t blockEnd = offset + it->second;
    const int64_t before = it == live_.begin() ? 0 : std::prev(it)->first + std::prev(it)->second;
    auto next = live_.erase(it);
    if (offset > before) gaps_.erase({offset - before, before});
    if (next == live_.end()) {
      end_ = before;
      return;
    }
    if (next->first > blockEnd) gaps_.erase({next->first - blockEnd, blockEnd});
    gaps_.insert({next->first - before, before});
  }
  int64_t peak() const { return peak_; }

 private:
  std::map<int64_t, int64_t> live_;             // offset -> size
  std::set<std::pair<int64_t, int64_t>> gaps_;  // (size, offset) between live blocks
  int64_t end_ = 0;                             // the end of the last live block
  int64_t peak_ = 0;
};

DType dtypeOf(Type element) {
  if (element.isBF16()) return DType::kBF16;
  if (element.isF16()) return DType::kF16;
  if (element.isInteger(64)) return DType::kI64;
  if (element.isInteger(32)) return DType::kI32;
  if (isa<Float8E4M3FNType>(element)) return DType::kF8E4M3;
  if (isa<Float8E5M2Type>(element)) return DType::kF8E5M2;
  return DType::kF32;
}

// `op` as the runtime's scratch sizing sees a step (ops/step_scratch.h): its kernel, operand
// types and parameters.
ScratchStep scratchStepOf(Operation* op) {
  ScratchStep step;
  step.kernel = kernelOf(op);
  auto describe = [](Type type, std::vector<ScratchOperand>& into) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor) return;
    into.push_back({dtypeOf(tensor.getElementType()),
                    std::vector<int64_t>(tensor.getShape().begin(), tensor.getShape().end())});
  };
  for (Type t : op->getOperandTypes()) describe(t, step.inputs);
  for (Type t : op->getResultTypes()) describe(t, step.outputs);
  step.intAttr = [op](const char* name) { return intParam(op, name); };
  step.intsAttr = [op](const char* name) { return intsParam(op, name); };
  return step;
}

// The arena bytes `op`'s kernel uses besides its operands on `device`.
int64_t scratchBytes(Operation* op, StringRef device) {
  const ScratchStep step = scratchStepOf(op);
  const DeviceKind* kind = findDeviceKind(device);
  const uint64_t bytes = (kind ? kind : findDeviceKind("cpu"))->stepScratchBytes(step);
  return static_cast<int64_t>(bytes);
}

StringAttr stateNameOf(func::FuncOp func, unsigned arg) {
  if (auto name = func.getArgAttrOfType<StringAttr>(arg, attr::kParam)) return name;
  return func.getArgAttrOfType<StringAttr>(arg, attr::kState);
}

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(module.getContext());

    // The state region: every parameter and optimizer-state tensor, in first-seen order. A
    // pipeline stage's programs (dist.stage) have a region of their own, holding only the
    // tensors they use; the plan's state size is the largest region.
    std::map<int64_t, llvm::StringMap<int64_t>> offsets;
    std::map<int64_t, SmallVector<NamedAttribute>> layouts;
    std::map<int64_t, int64_t> regionBytes;
    for (auto func : module.getOps<func::FuncOp>()) {
      int64_t stage = pipeline::stageOf(func);
      for (BlockArgument arg : func.getArguments())
        if (StringAttr name = stateNameOf(func, arg.getArgNumber()))
          if (!offsets[stage].count(name)) {
            int64_t& bytes = regionBytes[stage];
            offsets[stage][name] = bytes;
            layouts[stage].push_back(b.getNamedAttr(name, b.getI64IntegerAttr(bytes)));
            bytes += alignedBytes(cast<RankedTensorType>(arg.getType()));
          }
    }
    int64_t stateBytes = 0;
    for (auto& [stage, bytes] : regionBytes) stateBytes = std::max(stateBytes, bytes);
    module->setAttr(attr::kStateBytes, b.getI64IntegerAttr(stateBytes));
    // CUDA plans with a GEMM give cuBLAS and cuBLASLt their workspace in the arena.
    int64_t workspaceBytes = 0;
    auto deviceAttr = module->getAttrOfType<StringAttr>(attr::kDevice);
    const DeviceKind* kind = deviceAttr ? findDeviceKind(deviceAttr.getValue()) : nullptr;
    if (kind && kind->blasWorkspace)
      module.walk([&](Operation* op) {
        if (const KernelInfo* kernel = kernelOf(op); kernel && usesBlasWorkspace(*kernel))
          workspaceBytes = static_cast<int64_t>(cuda::kernels::kBlasWorkspaceBytes);
      });
    if (workspaceBytes > 0)
      module->setAttr(attr::kWorkspaceBytes, b.getI64IntegerAttr(workspaceBytes));
    for (auto func : module.getOps<func::FuncOp>()) {
      int64_t stage = pipeline::stageOf(func);
      DictionaryAttr layout = b.getDictionaryAttr(layouts[stage]);
      if (stage < 0)
        module->setAttr(attr::kStateLayout, layout);
      else
        func->setAttr(attr::kStateLayout, layout);
      planFunction(func, offsets[stage], workspaceBytes);
    }
  }

  void planFunction(func::FuncOp func, const llvm::StringMap<int64_t>& stateOffset,
                    int64_t workspaceBytes) {
    Builder b(func.getContext());
    auto deviceAttr = getOperation()->getAttrOfType<StringAttr>(attr::kDevice);
    const StringRef device = deviceAttr ? deviceAttr.getValue() : StringRef("cpu");
    Block& body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    llvm::DenseMap<Operation*, int64_t> position;
    int64_t n = 0;
    for (Operation& op : body) position[&op] = n++;

    // A reshape of an arena value is a view: it shares its operand's storage, which then lives
    // until the last use of either. `storage` maps each value to the value owning its bytes.
    llvm::DenseMap<Value, Value> storage;
    // (A chain: an output written over its input owns nothing, nor do views of it.)
    auto ownerOf = [&](Value v) {
      for (auto it = storage.find(v); it != storage.end(); it = storage.find(v)) v = it->second;
      return v;
    };
    for (Operation& op : body)
      if (kernelNameOf(&op) == "reshape") {
        Value x = op.getOperand(0);
        if (!isa<BlockArgument>(ownerOf(x)) ||
            !stateNameOf(func, cast<BlockArgument>(ownerOf(x)).getArgNumber()))
          storage[op.getResult(0)] = ownerOf(x);
      }
    llvm::DenseMap<Value, int64_t> lastUseOfStorage;
    auto noteUses = [&](Value v) {
      int64_t last = -1;
      for (Operation* user : v.getUsers()) last = std::max(last, position[user]);
      int64_t& slot = lastUseOfStorage[ownerOf(v)];
      slot = std::max(slot, last);
    };
    for (BlockArgument arg : func.getArguments()) noteUses(arg);
    for (Operation& op : body)
      for (Value r : op.getResults()) noteUses(r);
    auto lastUse = [&](Value v) {
      int64_t last = -1;
      for (Operation* user : v.getUsers()) last = std::max(last, position[user]);
      return last;
    };

    // Results that write back into a state tensor: the name it updates.
    llvm::DenseMap<Value, StringAttr> updatesState;
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (auto name = func.getResultAttrOfType<StringAttr>(i, attr::kUpdates))
        updatesState[v] = name;

    ArenaAllocator arena;
    // A CUDA plan's GEMM workspace (cuBLAS's and cuBLASLt's) opens every function's arena and is
    // never freed: the bytes a GEMM step's libraries use beside it, planned like the rest.
    if (workspaceBytes > 0) arena.allocate(workspaceBytes);
    struct Place {
      int64_t region, offset;
    };
    llvm::DenseMap<Value, Place> places;
    // Whether `result` may take `input`'s arena bytes at step `here`: nothing reads them after
    // it, they are no argument's, and they hold the result.
    auto takesOver = [&](Value input, Value result, int64_t here) {
      Value owner = ownerOf(input);
      auto it = places.find(owner);
      return !isa<BlockArgument>(owner) && it != places.end() &&
             it->second.region == kArenaRegion && lastUseOfStorage.lookup(owner) <= here &&
             alignedBytes(cast<RankedTensorType>(owner.getType())) >=
                 alignedBytes(cast<RankedTensorType>(result.getType()));
    };
    SmallVector<int64_t> argOffsets, argRegions;
    for (BlockArgument arg : func.getArguments()) {
      Place p;
      if (StringAttr name = stateNameOf(func, arg.getArgNumber()))
        p = {kStateRegion, stateOffset.lookup(name)};
      else
        p = {kArenaRegion, arena.allocate(alignedBytes(cast<RankedTensorType>(arg.getType())))};
      places[arg] = p;
      argOffsets.push_back(p.offset);
      argRegions.push_back(p.region);
    }
    // Storage is released once, after the last use of every value that shares it.
    auto releaseIfDead = [&](Value v, int64_t here) {
      Value owner = ownerOf(v);
      auto it = places.find(owner);
      if (it == places.end() || it->second.region != kArenaRegion) return;
      if (lastUseOfStorage.lookup(owner) <= here) {
        arena.release(it->second.offset);
        places.erase(it);
      }
    };
    // Arguments nobody reads are free from the start.
    for (BlockArgument arg : func.getArguments())
      if (arg.use_empty()) releaseIfDead(arg, -1);

    for (Operation& op : body.without_terminator()) {
      int64_t here = position[&op];
      SmallVector<int64_t> offsets, regions;
      const KernelInfo* kernel = kernelOf(&op);
      for (Value result : op.getResults()) {
        Place p{kArenaRegion, -1};
        const int overwrites =
            kernel ? overwritableInput(kernel->kernel, cast<OpResult>(result).getResultNumber())
                   : -1;
        if (Value owner = ownerOf(result); owner != result) {
          p = places.lookup(owner);  // a view of its operand's bytes
        } else if (overwrites >= 0 && overwrites < static_cast<int>(op.getNumOperands()) &&
                   takesOver(op.getOperand(overwrites), result, here)) {
          // Written over an input nothing reads after this step (ops/in_place.h): the result
          // holds the input's bytes from here on.
          Value input = ownerOf(op.getOperand(overwrites));
          p = places.lookup(input);
          const int64_t resultLast = lastUseOfStorage.lookup(result);  // its views' uses too
          storage[result] = input;
          int64_t& last = lastUseOfStorage[input];
          last = std::max(last, resultLast);
        } else if (auto name = updatesState.lookup(result)) {
          // An update may overwrite the state tensor it replaces when this op is the old
          // value's last reader: the element-wise update kernels allow out == in.
          for (Value operand : op.getOperands())
            if (auto arg = dyn_cast<BlockArgument>(operand))
              if (stateNameOf(func, arg.getArgNumber()) == name && lastUse(arg) == here)
                p = {kStateRegion, stateOffset.lookup(name)};
        }
        if (p.offset < 0)
          p.offset = arena.allocate(alignedBytes(cast<RankedTensorType>(result.getType())));
        if (ownerOf(result) == result) places[result] = p;
        offsets.push_back(p.offset);
        regions.push_back(p.region);
      }
      op.setAttr(attr::kOffsets, b.getDenseI64ArrayAttr(offsets));
      op.setAttr(attr::kRegions, b.getDenseI64ArrayAttr(regions));
      // The kernel's scratch, beside its live operands and results, free again after it ran.
      if (int64_t scratch = scratchBytes(&op, device)) {
        int64_t at = arena.allocate(scratch);
        op.setAttr(attr::kScratch, b.getDenseI64ArrayAttr({at, scratch}));
        arena.release(at);
      }
      // Space is reused only after the op ran: kernels may not read and write one buffer.
      for (Value operand : op.getOperands()) releaseIfDead(operand, here);
      for (Value result : op.getResults()) releaseIfDead(result, here);
    }
    func->setAttr(attr::kArgOffsets, b.getDenseI64ArrayAttr(argOffsets));
    func->setAttr(attr::kArgRegions, b.getDenseI64ArrayAttr(argRegions));
    func->setAttr(attr::kArenaBytes, b.getI64IntegerAttr(arena.peak()));
  }
};

}  // namespace
}  // namespace dtc
