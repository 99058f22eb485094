#include "train/evaluate.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "comm/watchdog.h"

namespace dtc {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// The mesh axes that split data input `name`'s samples in the functions called `function`
// (whichever pipeline stage reads it; empty: not split).
std::vector<int> batchAxes(const Plan& plan, const std::string& function, const std::string& name) {
  for (const plan::Function* f : *plan.root().functions()) {
    if (f->name()->str() != function) continue;
    for (const plan::Binding* b : *f->arguments())
      if (b->role() == plan::Role::data && b->name()->str() == name && b->sharding() &&
          b->sharding()->size() && b->sharding()->Get(0)->axes())
        return {b->sharding()->Get(0)->axes()->begin(), b->sharding()->Get(0)->axes()->end()};
  }
  return {};
}

}  // namespace

uint32_t resultIndex(const plan::Function& f, plan::Role role, const std::string& name) {
  for (const plan::Binding* b : *f.results())
    if (b->role() == role && (name.empty() || b->name()->str() == name)) return b->value();
  return kNone;
}

StatusOr<uint32_t> lossOf(const Executor& ex, const plan::Function& f) {
  uint32_t index = resultIndex(f, plan::Role::loss);
  if (index == kNone && ex.stage() <= 0)
    return Status::InvalidInput(ex.plan().name() + ": " + f.name()->str() + " returns no loss");
  return index;
}

StatusOr<Evaluation> evaluate(Executor& ex, BatchSource& data, bool print, int64_t maxBatches,
                              const std::string& prefix) {
  const plan::Function& f = *ex.function("eval");  // openBatchSource found it
  int64_t batch = ex.plan().root().batch_size();
  DTC_ASSIGN_OR_RETURN(uint32_t lossIndex, lossOf(ex, f));
  std::string predictions = str(ex.plan().root().predictions());
  uint32_t logitsIndex =
      predictions.empty() ? kNone : resultIndex(f, plan::Role::output, predictions);
  const TensorView* labels = data.input(str(ex.plan().root().targets()));

  // Accuracy needs [batch, classes] logits and int64 labels; other models report loss only.
  bool accuracy = false;
  if (logitsIndex != kNone && labels && labels->dtype == DType::kI64) {
    TensorView logits = ex.view("eval", logitsIndex);
    accuracy = logits.dtype == DType::kF32 && logits.shape.size() == 2 &&
               logits.shape[0] == labels->shape[0];
  }
  int64_t batches = data.evalBatches(), correct = 0;
  const bool limited = maxBatches > 0 && maxBatches < batches;
  if (limited) batches = maxBatches;
  double lossSum = 0;
  for (int64_t b = 0; b < batches; ++b) {
    data.fillEval(b);
    DTC_RETURN_IF_ERROR(ex.run("eval"));
    if (lossIndex != kNone) lossSum += *ex.view("eval", lossIndex).f32();
    if (accuracy) {
      TensorView logits = ex.view("eval", logitsIndex);
      int64_t classes = logits.shape[1];
      for (int64_t i = 0; i < logits.shape[0]; ++i) {
        const float* row = logits.f32() + i * classes;
        int64_t best = std::max_element(row, row + classes) - row;
        correct += best == labels->i64()[i];
      }
    }
  }
  // Each device scored its own samples. Only the stage holding the logits scores: the group
  // exists already (Executor::create makes a pipeline's groups up front, on every rank).
  std::vector<int> axes = batchAxes(ex.plan(), "eval", str(ex.plan().root().targets()));
  if (accuracy && ex.mesh() && !axes.empty()) {
    DTC_ASSIGN_OR_RETURN(comm::Communicator * group, ex.mesh()->group(axes));
    float count = static_cast<float>(correct);
    DTC_RETURN_IF_ERROR(group->allReduceSum(&count, 1));
    correct = static_cast<int64_t>(count);
  }
  Evaluation result;
  result.batches = batches;
  result.loss = lossSum / std::max<int64_t>(batches, 1);
  if (!print) return result;
  int64_t seen = batches * batch;
  std::printf("%s: loss %.6f", prefix.c_str(), result.loss);
  if (accuracy)
    std::printf(" | accuracy %.2f%% (%lld/%lld)", 100.0 * correct / std::max<int64_t>(seen, 1),
                (long long)correct, (long long)seen);
  if (limited)
    std::printf(" | first %lld batches", (long long)batches);
  else if (seen < data.samples())
    std::printf(" | last %lld samples skipped (not a full batch)",
                (long long)(data.samples() - seen));
  std::printf("\n");
  std::fflush(stdout);
  return result;
}

Status Evaluator::at(int64_t step, bool periodic) {
  if (!data_ || step == last_) return Status::Ok();
  const std::string prefix =
      periodic ? "step " + std::to_string(step) + ": eval" : std::string("eval");
  comm::setPhase("evaluation after step " + std::to_string(step));
  DTC_ASSIGN_OR_RETURN(Evaluation e, evaluate(ex_, *data_, lead_, batches_, prefix));
  last_ = step;
  return log_.evaluation(step, e.loss);
}

}  // namespace dtc
