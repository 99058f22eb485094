// Pipeline plans on one process: what the verifier rejects, and what each stage's executor
// prepares, holds and sizes (a stand-in world plays rank 0 or 1 of two; nothing is sent).
#include <gtest/gtest.h>

#include "exec/executor.h"
#include "pipeline_plan.h"

namespace dtc {
namespace {

using testing::buildPipelinePlan;
using testing::PipelinePlanOptions;

// Rank `rank` of a two-process job whose communication is never used.
class StandIn : public comm::Communicator {
 public:
  explicit StandIn(int rank) : rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  Status allReduceSum(float*, int64_t) override { return unused(); }
  Status allReduceMax(float*, int64_t) override { return unused(); }
  Status allGather(const float*, int64_t, float*) override { return unused(); }
  Status reduceScatterSum(const float*, int64_t, float*) override { return unused(); }
  Status allToAll(const float*, int64_t, float*) override { return unused(); }
  Status broadcast(float*, int64_t, int) override { return unused(); }
  Status send(const void*, int64_t, int, int) override { return unused(); }
  Status recv(void*, int64_t, int, int) override { return unused(); }
  Status shift(const void*, void*, int64_t, int, int) override { return unused(); }
  Status completeSends() override { return Status::Ok(); }
  [[noreturn]] void abortJob(int code) override { std::_Exit(code); }
  StatusOr<std::unique_ptr<Communicator>> split(int, int key) override {
    ++splits;
    return std::unique_ptr<Communicator>(new StandIn(key));
  }
  static inline int splits = 0;

 private:
  static Status unused() { return Status::Internal("no communication in this test"); }
  int rank_;
};

StatusOr<Plan> load(const PipelinePlanOptions& o = {}) {
  return Plan::fromBytes(buildPipelinePlan(o), "pipe.dtp");
}

TEST(PipelinePlan, StagesAndLookups) {
  auto plan = load();
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->stages(), 2);
  const plan::Function* f0 = plan->function("train_step", 0);
  const plan::Function* f1 = plan->function("train_step", 1);
  ASSERT_TRUE(f0 && f1);
  EXPECT_EQ(f0->stage(), 0);
  EXPECT_EQ(f1->stage(), 1);
  EXPECT_EQ(plan->function("eval", 0), nullptr);
  EXPECT_EQ(plan->stateTensor("step", 1)->stage(), 1);
  EXPECT_EQ(plan->stateTensor("w", 1), nullptr);
  EXPECT_LT(plan->maxArenaBytes(0), plan->maxArenaBytes(1));
  EXPECT_EQ(plan->maxArenaBytes(), plan->maxArenaBytes(1));
}

TEST(PipelinePlan, ExecutorPreparesItsStageOnly) {
  auto plan = load();
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    StandIn::splits = 0;
    auto mesh = comm::DeviceMesh::create(std::make_unique<StandIn>(rank), {"pp"}, {2});
    ASSERT_TRUE(mesh.ok()) << mesh.status().message();
    auto ex = Executor::create(*plan, 1, mesh->get(), createCpuBackend());
    ASSERT_TRUE(ex.ok()) << ex.status().message();
    // Both ranks create the group of every stage's steps up front, and only that one.
    EXPECT_EQ(StandIn::splits, 1);
    Executor& e = **ex;
    EXPECT_EQ(e.stage(), rank);
    ASSERT_NE(e.function("train_step"), nullptr);
    EXPECT_EQ(e.function("train_step")->stage(), rank);
    EXPECT_EQ(e.function("eval"), nullptr);
    EXPECT_EQ(e.arenaBytes(), plan->maxArenaBytes(rank));
    ASSERT_TRUE(e.initializeState().ok());
    TensorView w = e.state("w"), v = e.state("v"), step = e.state("step");
    ASSERT_NE(step.data, nullptr);
    EXPECT_EQ(*step.f32(), 0.0f);
    if (rank == 0) {
      ASSERT_NE(w.data, nullptr);
      EXPECT_EQ(v.data, nullptr);
      EXPECT_EQ(w.f32()[0], 1.0f);
      EXPECT_EQ(w.f32()[1], 1.0f);
    } else {
      EXPECT_EQ(w.data, nullptr);
      ASSERT_NE(v.data, nullptr);
      for (int i = 0; i < 4; ++i) EXPECT_EQ(v.f32()[i], i / 2.0f);
    }
    // The state region of its own tensors: "step" ends it on both stages.
    EXPECT_EQ(e.stateBytes(), 64u + 4u);
  }
}

TEST(PipelinePlan, NeedsItsMesh) {
  auto plan = load();
  ASSERT_TRUE(plan.ok());
  auto ex = Executor::create(*plan, 1, nullptr, createCpuBackend());
  ASSERT_FALSE(ex.ok());
  EXPECT_NE(ex.status().message().find("pipeline"), std::string::npos) << ex.status().message();
}

void expectInvalid(const PipelinePlanOptions& o, const std::string& what) {
  auto plan = load(o);
  ASSERT_FALSE(plan.ok()) << "expected: " << what;
  const std::string m = plan.status().message();
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(m.find("pipe.dtp is invalid: "), std::string::npos) << m;
  EXPECT_NE(m.find(what), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(PipelinePlan, VerifierRejectsMalformedStages) {
  PipelinePlanOptions o;
  o.pipelineAxis = 1;
  expectInvalid(o, "its pipeline axis 1 is not an axis of the mesh");
  o = {};
  o.pipelineAxis = -2;
  expectInvalid(o, "its pipeline axis -2 is not an axis of the mesh");
  o = {};
  o.mesh.clear();
  expectInvalid(o, "its pipeline axis 0 is not an axis of the mesh");
  o = {};
  o.pipelineAxis = -1;
  expectInvalid(o, "function 'train_step' has stage 0 in a plan without a pipeline");
  o = {};
  o.stages[1] = 2;
  expectInvalid(o, "function 'train_step' has stage 2, outside the pipeline's 2 stages");
  o = {};
  o.stages[1] = 0;
  expectInvalid(o, "function 'train_step' appears twice in stage 0");
  o = {};
  o.stages[0] = -1;
  expectInvalid(o, "function 'train_step' appears twice");
  o = {};
  o.stateStages[3] = 0;
  expectInvalid(o, "state tensor 'step' appears twice in stage 0");
  o = {};
  o.stateStages[3] = -1;
  expectInvalid(o, "state tensor 'step' appears twice");
  o = {};
  o.stateStages[0] = -3;
  expectInvalid(o, "state tensor 'w' has stage -3");
  o = {};
  o.stateBytesSlack = 62;  // the region ends before step's last bytes
  expectInvalid(o, "state tensor 'step' lies outside the state region");
}

TEST(PipelinePlan, MeshOfTwoAxes) {
  // pp as the second axis of dp=1 x pp=2: a rank's stage is its coordinate along it.
  PipelinePlanOptions o;
  o.mesh = {{"dp", 1}, {"pp", 2}};
  o.pipelineAxis = 1;
  auto plan = load(o);
  // The steps name axis 0 (dp, of size 1) as their group: valid, if useless.
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto mesh = comm::DeviceMesh::create(std::make_unique<StandIn>(1), {"dp", "pp"}, {1, 2});
  ASSERT_TRUE(mesh.ok());
  auto ex = Executor::create(*plan, 1, mesh->get(), createCpuBackend());
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_EQ((*ex)->stage(), 1);
  EXPECT_EQ((*ex)->function("train_step")->stage(), 1);
}

}  // namespace
}  // namespace dtc
