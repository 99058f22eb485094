// Plan::fromBytes on arbitrary bytes: an error with a one-line message, or a plan on which
// everything a reader does without running it (the summaries of `dtc inspect`, the arena and
// stage queries, lookups by name, the collectives' costs) is defined.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "planfile/communication.h"
#include "planfile/function_names.h"
#include "planfile/plan.h"
#include "planfile/summary.h"

#include "fuzz_support.h"

namespace {

void exerciseFunction(const dtc::Plan& plan, const dtc::plan::Function& f) {
  const std::string name = f.name()->str();
  require(plan.function(name) != nullptr);
  require(plan.function(name, f.stage()) != nullptr);
  for (const dtc::plan::Value* v : *f.values()) {
    // Verified: at most 2^40 elements of at most 8 bytes.
    require(dtc::valueBytes(*v) <= (uint64_t(1) << 43));
    require(dtc::shapeString(v->shape()).size() >= 2);
  }
  for (const auto* bindings : {f.arguments(), f.results()})
    for (const dtc::plan::Binding* b : *bindings) {
      // Verified: every binding names a value of its function.
      const dtc::plan::Value* v = f.values()->Get(b->value());
      require(dtc::numElements(v->shape()) >= 0);
      if (b->role() == dtc::plan::Role::param || b->role() == dtc::plan::Role::optim_state)
        (void)plan.stateTensor(b->name()->str(), f.stage());
    }
  for (const dtc::plan::Step* s : *f.steps())
    for (const auto* ids : {s->inputs(), s->outputs()})
      for (uint32_t id : *ids) require(id < f.values()->size());
  (void)dtc::collectivesOf(plan, f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dtc::StatusOr<dtc::Plan> loaded =
      dtc::Plan::fromBytes(std::vector<uint8_t>(data, data + size), "fuzz.dtp");
  if (!loaded.ok()) {
    requireOneLine(loaded.status().message());
    return 0;
  }
  ++dtcFuzzAccepted;
  const dtc::Plan& plan = loaded.value();
  const int64_t stages = plan.stages();
  for (int stage = -1; stage < stages; ++stage) (void)plan.maxArenaBytes(stage);
  for (const dtc::plan::Function* f : *plan.root().functions()) exerciseFunction(plan, *f);
  for (const dtc::plan::StateTensor* s : *plan.root().state())
    require(plan.stateTensor(s->name()->str(), s->stage()) != nullptr);
  (void)plan.function(dtc::fn::kTrainStep);
  (void)plan.function("eval", 0);
  (void)dtc::meshText(plan);
  (void)dtc::meshSizes(plan);
  require(dtc::meshDevices(plan) >= 1);
  require(!dtc::summarizePlanText(plan).empty());
  require(!dtc::summarizePlanJson(plan).empty());
  return 0;
}
