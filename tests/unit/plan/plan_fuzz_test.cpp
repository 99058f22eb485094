// A plan with random bytes changed is an error, never a crash: verification and binding must
// catch every inconsistency before a kernel runs. Also checks that a valid plan passes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "driver/Compile.h"
#include "exec/executor.h"
#include "zoo/Zoo.h"

namespace dtc {
namespace {

// `partitioned`: on a one-device dp=1 x tp=1 mesh with a tensor-parallel split, so the plan
// holds a mesh, shardings (chunked ones too) and collectives while one process can run it.
std::vector<uint8_t> compileMlp(bool partitioned = false) {
  zoo::MlpOptions options;
  options.input = 6;
  options.hidden = {5};
  options.classes = 3;
  auto model = ModelFile::fromBytes(zoo::buildMlp(options), "mlp.dtm");
  EXPECT_TRUE(static_cast<bool>(model));
  mlir::MLIRContext ctx;
  CompileOptions compile;
  compile.batchSize = 4;
  compile.recipe.optimizer = "adamw";
  if (partitioned) {
    compile.parallel.mesh = "dp=1,tp=1";
    compile.parallel.dataParallel = 1;
    compile.memory.zeroStage = 1;
    compile.parallel.shard = "fc0.weight=tp,-;fc0.bias=5xtp;fc1.weight=-,tp";
  }
  std::vector<uint8_t> plan;
  EXPECT_TRUE(mlir::succeeded(compileModel(ctx, *model, compile, plan)));
  return plan;
}

// Loads, binds and (when small enough to be quick) runs every function of a plan.
Status exercise(std::vector<uint8_t> bytes) {
  DTC_ASSIGN_OR_RETURN(Plan plan, Plan::fromBytes(std::move(bytes), "fuzzed.dtp"));
  if (plan.root().state_bytes() + plan.maxArenaBytes() > (16u << 20)) return Status::Ok();
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  if (plan.root().mesh())
    for (const plan::MeshAxis* axis : *plan.root().mesh()) {
      names.push_back(axis->name()->str());
      sizes.push_back(axis->size());
    }
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<comm::DeviceMesh> mesh,
                       comm::DeviceMesh::create(comm::createSingleProcess(), names, sizes));
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex,
                       Executor::create(plan, 1, mesh.get(), createCpuBackend()));
  DTC_RETURN_IF_ERROR(ex->initializeState());
  for (const plan::Function* f : *plan.root().functions()) {
    if (ex->function(f->name()->str()) != f) continue;  // another pipeline stage's
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

TEST(PlanFuzz, ValidPartitionedPlanRuns) {
  Status s = exercise(compileMlp(true));
  EXPECT_TRUE(s.ok()) << "code " << s.exitCode() << ": " << s.message();
}

class PlanFuzz : public ::testing::TestWithParam<bool> {};

TEST_P(PlanFuzz, CorruptedPlansAreRejectedOrRunSafely) {
  const std::vector<uint8_t> original = compileMlp(GetParam());
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

INSTANTIATE_TEST_SUITE_P(Plans, PlanFuzz, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "partitioned" : "single_device";
                         });

}  // namespace
}  // namespace dtc
