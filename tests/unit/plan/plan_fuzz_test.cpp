// A plan with random bytes changed is an error, never a crash: verification and binding must
// catch every inconsistency before a kernel runs. Also checks that a valid plan passes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "driver/Compile.h"
#include "exec/executor.h"
#include "zoo/ModelBuilder.h"

namespace dtc {
namespace {

std::vector<uint8_t> compileMlp() {
  zoo::MlpOptions options;
  options.input = 6;
  options.hidden = {5};
  options.classes = 3;
  auto model = ModelFile::fromBytes(zoo::buildMlp(options), "mlp.dtm");
  EXPECT_TRUE(static_cast<bool>(model));
  mlir::MLIRContext ctx;
  CompileOptions compile;
  compile.batchSize = 4;
  compile.optimizer = "adamw";
  std::vector<uint8_t> plan;
  EXPECT_TRUE(mlir::succeeded(compileModel(ctx, *model, compile, plan)));
  return plan;
}

// Loads, binds and (when small enough to be quick) runs every function of a plan.
Status exercise(std::vector<uint8_t> bytes) {
  DTC_ASSIGN_OR_RETURN(Plan plan, Plan::fromBytes(std::move(bytes), "fuzzed.dtp"));
  if (plan.root().state_bytes() + plan.maxArenaBytes() > (16u << 20)) return Status::Ok();
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::create(plan, 1));
  DTC_RETURN_IF_ERROR(ex->initializeState());
  for (const plan::Function* f : *plan.root().functions()) {
    // Zeros are valid data for any model (class 0 everywhere); the arena holds leftovers.
    for (const plan::Binding* b : *f->arguments())
      if (b->role() == plan::Role::data) {
        TensorView t = ex->view(f->name()->str(), b->value());
        std::memset(t.data, 0, t.numElements() * dtypeSize(t.dtype));
      }
    Status s = ex->run(f->name()->str());
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

TEST(PlanFuzz, ValidPlanRuns) {
  Status s = exercise(compileMlp());
  EXPECT_TRUE(s.ok()) << "code " << s.exitCode() << ": " << s.message();
}

TEST(PlanFuzz, CorruptedPlansAreRejectedOrRunSafely) {
  const std::vector<uint8_t> original = compileMlp();
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bytes = original;
    int flips = 1 + rng() % 6;
    for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    if (trial % 10 == 0) bytes.resize(rng() % bytes.size());
    Status s = exercise(std::move(bytes));
    if (!s.ok()) {
      ++rejected;
      EXPECT_FALSE(s.message().empty());
      EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    }
  }
  // Most corruptions are caught; some (a changed float, a name) leave a plan that still runs.
  std::printf("%d of 3000 corrupted plans rejected\n", rejected);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace dtc
