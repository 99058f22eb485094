#include "training/RecomputeModes.h"

#include "llvm/ADT/StringExtras.h"

#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"

using namespace mlir;

namespace dtc {

FailureOr<RecomputeModes> RecomputeModes::parse(ModuleOp module, StringRef text) {
  RecomputeModes r;
  for (StringRef m : llvm::split(text, ',')) r.modes_.push_back(m.str());
  for (const std::string& m : r.modes_)
    if (m != "none" && m != "full" && m != "selective")
      return module.emitError("--recompute must be none, full or selective, got '") << m << "'";
  r.pipeline_ = pipeline::getPipeline(module);
  if (r.modes_.size() > 1 &&
      (!r.pipeline_ || static_cast<int64_t>(r.modes_.size()) != r.pipeline_->stages))
    return module.emitError("--recompute with ")
           << r.modes_.size() << " settings needs as many pipeline stages, the plan has "
           << (r.pipeline_ ? r.pipeline_->stages : 1);
  return r;
}

const std::string& RecomputeModes::of(Operation* op) const {
  const int64_t stage = pipeline::stageOf(op);
  return modes_.size() == 1 || stage < 0 ? modes_.front() : modes_[pipeline_->deviceOf(stage)];
}

bool RecomputeModes::allNone() const {
  return llvm::all_of(modes_, [](const std::string& m) { return m == "none"; });
}

DenseSet<Operation*> backwardOps(Block& body) {
  DenseSet<Operation*> backward;
  for (Operation& op : body.without_terminator()) {
    bool fromSeed = op.hasAttr(attr::kLossSeed) || op.hasAttr(attr::kRecomputed) ||
                    llvm::any_of(op.getOperands(), [&](Value v) {
                      Operation* def = v.getDefiningOp();
                      return def && backward.count(def);
                    });
    if (fromSeed) backward.insert(&op);
  }
  return backward;
}

}  // namespace dtc
