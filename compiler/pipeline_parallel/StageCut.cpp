// dtc-pipeline-stages: cut @forward into pipeline chunks (see Passes.td).
#include <limits>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "FunctionAttrs.h"
#include "Locations.h"
#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "pipeline_parallel/CostModel.h"
#include "pipeline_parallel/Pipeline.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_PIPELINESTAGES
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// A run of consecutive ops from one model node.
struct Node {
  std::string name;
  SmallVector<Operation*> ops;
  double seconds = 0;  // estimated forward + backward time
  bool hasParams = false;
};

struct PipelineStagesPass : impl::PipelineStagesBase<PipelineStagesPass> {
  using PipelineStagesBase::PipelineStagesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(fn::kForward);
    if (!forward) {
      module.emitError("dtc-pipeline-stages: the module has no @forward function");
      return signalPassFailure();
    }
    pipeline::PipelineConfig config;
    config.stages = stages;
    config.virtualStages = virtualStages;
    config.microBatches = microBatches;
    config.schedule = schedule;
    // zb-v is at least one V: two chunks per device.
    if (config.schedule == "zb-v" && config.virtualStages == 1) config.virtualStages = 2;
    if (failed(check(module, config))) return signalPassFailure();

    SmallVector<Node> nodes = nodesOf(forward);
    FailureOr<SmallVector<int64_t>> firstNode = cuts.empty()
                                                    ? balancedCuts(forward, nodes, config.chunks())
                                                    : userCuts(forward, nodes, config.chunks());
    if (failed(firstNode)) return signalPassFailure();

    // Every op gets its chunk; a parameter the chunk of its first user.
    Builder b(module.getContext());
    int64_t chunk = 0;
    for (auto [i, node] : llvm::enumerate(nodes)) {
      while (chunk + 1 < config.chunks() && (*firstNode)[chunk + 1] <= static_cast<int64_t>(i))
        ++chunk;
      for (Operation* op : node.ops) op->setAttr(dist::kStageAttr, b.getI64IntegerAttr(chunk));
    }
    FunctionAttrEdits edits(forward);
    for (BlockArgument arg : forward.getArguments()) {
      if (!forward.getArgAttr(arg.getArgNumber(), attr::kParam)) continue;
      int64_t first = 0;
      Operation* user = nullptr;
      for (Operation* u : arg.getUsers())
        if (!user || u->isBeforeInBlock(user)) user = u;
      if (user) first = cast<IntegerAttr>(user->getAttr(dist::kStageAttr)).getInt();
      edits.setArgAttr(arg.getArgNumber(), dist::kStageAttr, b.getI64IntegerAttr(first));
    }
    edits.apply();
    pipeline::setPipeline(module, config);
  }

  LogicalResult check(ModuleOp module, const pipeline::PipelineConfig& c) {
    if (c.stages < 1)
      return module.emitError("pipeline stages must be at least 1, got ") << c.stages;
    if (c.microBatches < 1)
      return module.emitError("micro-batches must be at least 1, got ") << c.microBatches;
    if (!llvm::is_contained({"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"}, c.schedule))
      return module.emitError("unknown pipeline schedule '")
             << c.schedule << "' (expected gpipe, 1f1b, interleaved, zb-h1 or zb-v)";
    if (c.virtualStages < 1)
      return module.emitError("virtual stages must be at least 1, got ") << c.virtualStages;
    if (c.schedule == "interleaved" && c.virtualStages < 2)
      return module.emitError("the interleaved schedule needs --virtual-stages 2 or more");
    if (c.schedule == "zb-v" && c.virtualStages % 2 != 0)
      return module.emitError("the zb-v schedule runs model chunks down and up the devices in ")
             << "V's, an even number per device; got --virtual-stages " << c.virtualStages;
    if (c.schedule != "interleaved" && c.schedule != "zb-v" && c.virtualStages > 1)
      return module.emitError("--virtual-stages needs --schedule interleaved or zb-v");
    if (c.schedule == "interleaved" && c.microBatches % c.stages != 0)
      return module.emitError("the interleaved schedule needs micro-batches (")
             << c.microBatches << ") to be a multiple of the pipeline stages (" << c.stages << ")";
    return success();
  }

  SmallVector<Node> nodesOf(func::FuncOp func) {
    SmallVector<Node> nodes;
    for (Operation& op : func.getBody().front().without_terminator()) {
      std::string name = locationName(op.getLoc());
      if (nodes.empty() || nodes.back().name != name) nodes.push_back({name, {}, 0, false});
      Node& node = nodes.back();
      node.ops.push_back(&op);
      // Backward costs about twice the forward (two products per forward product).
      node.seconds += 3 * pipeline::opSeconds(&op);
      for (Value v : op.getOperands())
        if (auto arg = dyn_cast<BlockArgument>(v))
          if (func.getArgAttr(arg.getArgNumber(), attr::kTrainable)) node.hasParams = true;
    }
    return nodes;
  }

  // Node i+1 can start a chunk when exactly one tensor produced by nodes 0..i is used later.
  SmallVector<bool> layerBoundaries(ArrayRef<Node> nodes) {
    llvm::DenseMap<Operation*, int64_t> nodeOf;
    for (auto [i, node] : llvm::enumerate(nodes))
      for (Operation* op : node.ops) nodeOf[op] = i;
    const int64_t n = nodes.size();
    // crossing[i]: tensors produced at or before node i and used after it.
    SmallVector<int64_t> crossing(n, 0);
    for (auto [i, node] : llvm::enumerate(nodes))
      for (Operation* op : node.ops)
        for (Value r : op->getResults()) {
          int64_t last = i;
          for (Operation* user : r.getUsers())
            last = std::max(last, nodeOf.count(user) ? nodeOf.lookup(user) : n);
          for (int64_t k = i; k < last && k < n; ++k) ++crossing[k];
        }
    SmallVector<bool> boundary(n, false);  // boundary[i]: a chunk may start at node i
    for (int64_t i = 1; i < n; ++i) boundary[i] = crossing[i - 1] == 1;
    return boundary;
  }

  // Layers: runs of nodes between boundaries, each with the parameters it touches. Chunks are
  // runs of layers; every chunk must hold a layer with parameters.
  FailureOr<SmallVector<int64_t>> balancedCuts(func::FuncOp func, ArrayRef<Node> nodes,
                                               int64_t chunks) {
    SmallVector<bool> boundary = layerBoundaries(nodes);
    struct Layer {
      int64_t firstNode;
      double seconds = 0;
      bool hasParams = false;
    };
    SmallVector<Layer> layers;
    for (auto [i, node] : llvm::enumerate(nodes)) {
      if (layers.empty() || boundary[i]) layers.push_back({static_cast<int64_t>(i)});
      layers.back().seconds += node.seconds;
      layers.back().hasParams |= node.hasParams;
    }
    int64_t withParams = llvm::count_if(layers, [](const Layer& l) { return l.hasParams; });
    if (chunks > withParams)
      return func.emitError("cannot cut the model into ")
             << chunks << " pipeline stages: it has " << withParams
             << " layers with parameters between which it can be cut";
    if (chunks == 1) return SmallVector<int64_t>{0};

    // Minimise the slowest chunk: best[k][j] over the first j layers in k chunks.
    const int64_t n = layers.size();
    const double inf = std::numeric_limits<double>::infinity();
    SmallVector<double> prefix(n + 1, 0);
    SmallVector<int64_t> params(n + 1, 0);
    for (int64_t i = 0; i < n; ++i) {
      prefix[i + 1] = prefix[i] + layers[i].seconds;
      params[i + 1] = params[i] + layers[i].hasParams;
    }
    std::vector<std::vector<double>> best(chunks + 1, std::vector<double>(n + 1, inf));
    std::vector<std::vector<int64_t>> from(chunks + 1, std::vector<int64_t>(n + 1, -1));
    best[0][0] = 0;
    for (int64_t k = 1; k <= chunks; ++k)
      for (int64_t j = 1; j <= n; ++j)
        for (int64_t i = k - 1; i < j; ++i) {
          if (best[k - 1][i] == inf || params[j] == params[i]) continue;
          double cost = std::max(best[k - 1][i], prefix[j] - prefix[i]);
          if (cost < best[k][j]) best[k][j] = cost, from[k][j] = i;
        }
    SmallVector<int64_t> first(chunks, 0);
    for (int64_t k = chunks, j = n; k > 0; --k) {
      int64_t i = from[k][j];
      first[k - 1] = layers[i].firstNode;
      j = i;
    }
    return first;
  }

  FailureOr<SmallVector<int64_t>> userCuts(func::FuncOp func, ArrayRef<Node> nodes,
                                           int64_t chunks) {
    SmallVector<StringRef> names;
    llvm::SplitString(cuts, names, ",");
    if (static_cast<int64_t>(names.size()) != chunks - 1)
      return func.emitError("--stage-cuts names ")
             << names.size() << " nodes; " << chunks << " pipeline stages need " << chunks - 1;
    SmallVector<int64_t> first{0};
    for (StringRef name : names) {
      auto it = llvm::find_if(nodes, [&](const Node& n) { return n.name == name.trim(); });
      if (it == nodes.end())
        return func.emitError("--stage-cuts: the model has no node named '") << name.trim() << "'";
      int64_t at = it - nodes.begin();
      if (at <= first.back())
        return func.emitError("--stage-cuts: node '")
               << name.trim() << "' does not come after the previous cut";
      first.push_back(at);
    }
    return first;
  }
};

}  // namespace
}  // namespace dtc
