// The executor's side of Backend::beginFunction/endFunction (how the CUDA backend replaces a
// function's steps with one graph): each function's steps are bound between the two calls, an
// untimed run takes what endFunction returned, a timed run the plan's steps one by one.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "ops/kernel_registry.h"
#include "plan_generated.h"
#include "planfile/plan_format.h"

namespace dtc {
namespace {

// One function, "train_step": y = relu(x), z = relu(y), x a data input and z an output.
std::vector<uint8_t> buildPlan() {
  namespace fb = flatbuffers;
  fb::FlatBufferBuilder b;
  const std::vector<int64_t> four{4};
  std::vector<fb::Offset<plan::Value>> values = {
      plan::CreateValueDirect(b, "x", plan::DType::f32, &four, plan::Region::arena, 0),
      plan::CreateValueDirect(b, "y", plan::DType::f32, &four, plan::Region::arena, 64),
      plan::CreateValueDirect(b, "z", plan::DType::f32, &four, plan::Region::arena, 128)};
  auto step = [&](std::vector<uint32_t> ins, std::vector<uint32_t> outs) {
    std::vector<fb::Offset<plan::Attr>> none;
    return plan::CreateStepDirect(b, &ins, &outs, &none, "relu", Kernel::relu);
  };
  std::vector<fb::Offset<plan::Step>> steps = {step({0}, {1}), step({1}, {2})};
  std::vector<fb::Offset<plan::Binding>> arguments = {
      plan::CreateBindingDirect(b, 0, plan::Role::data, "x", 0)};
  std::vector<fb::Offset<plan::Binding>> results = {
      plan::CreateBindingDirect(b, 2, plan::Role::output, "z", -1)};
  std::vector<fb::Offset<plan::Function>> functions = {
      plan::CreateFunctionDirect(b, "train_step", &values, &steps, &arguments, &results, 192)};
  std::vector<fb::Offset<plan::StateTensor>> state;
  std::vector<uint8_t> constants;
  auto root = plan::CreatePlanDirect(b, kPlanVersion, "backend_hooks_test", 4, &state, 0,
                                     &functions, "", "", "none", &constants);
  plan::FinishPlanBuffer(b, root);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

// A backend (the CPU's, or its staged form) that records the hooks and replaces each function's
// steps with one step that counts its runs, as the CUDA backend's graph does.
class HookBackend : public Backend {
 public:
  struct Log {
    std::vector<std::string> begun;
    std::vector<size_t> ended;  // how many steps each endFunction received
    int bindsOutside = 0;       // bind() calls not between the hooks
    int replacementRuns = 0;
  };
  HookBackend(std::unique_ptr<Backend> inner, Log& log) : inner_(std::move(inner)), log_(log) {}
  std::string name() const override { return "hooks over " + inner_->name(); }
  const DeviceKind& kind() const override { return inner_->kind(); }
  bool hostMemory() const override { return inner_->hostMemory(); }
  StatusOr<uint8_t*> allocate(uint64_t bytes) override { return inner_->allocate(bytes); }
  void release(uint8_t* memory, uint64_t bytes) override { inner_->release(memory, bytes); }
  Status upload(uint8_t* to, const void* from, uint64_t bytes) override {
    return inner_->upload(to, from, bytes);
  }
  Status download(void* to, const uint8_t* from, uint64_t bytes) override {
    return inner_->download(to, from, bytes);
  }
  Status copy(uint8_t* to, const uint8_t* from, uint64_t bytes) override {
    return inner_->copy(to, from, bytes);
  }
  StatusOr<BoundStep> bind(const StepContext& step) override {
    if (!inFunction_) ++log_.bindsOutside;
    return inner_->bind(step);
  }
  Status synchronize() override { return inner_->synchronize(); }
  void beginFunction(const std::string& function) override {
    inFunction_ = true;
    log_.begun.push_back(function);
  }
  std::vector<BoundStep> endFunction(std::vector<BoundStep> steps) override {
    inFunction_ = false;
    log_.ended.push_back(steps.size());
    Log* log = &log_;
    return {[log, steps]() -> Status {
      ++log->replacementRuns;
      for (const BoundStep& s : steps) DTC_RETURN_IF_ERROR(s());
      return Status::Ok();
    }};
  }

 private:
  std::unique_ptr<Backend> inner_;
  Log& log_;
  bool inFunction_ = false;
};

class BackendHooksTest : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<Backend> inner() const {
    return GetParam() ? createStagedCpuBackend() : createCpuBackend();
  }
};

// Fills x, runs train_step and checks z = relu(x).
void runAndCheck(Executor& ex, float sign) {
  const float x[4] = {-2 * sign, -1 * sign, 1 * sign, 2 * sign};
  TensorView in = ex.view("train_step", 0);
  ASSERT_NE(in.data, nullptr);
  std::memcpy(in.data, x, sizeof x);
  Status ran = ex.run("train_step");
  ASSERT_TRUE(ran.ok()) << ran.message();
  TensorView out = ex.view("train_step", 2);
  ASSERT_NE(out.data, nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out.f32()[i], x[i] > 0 ? x[i] : 0.0f) << i;
}

TEST_P(BackendHooksTest, BindsBetweenTheHooksAndRunsTheReplacement) {
  HookBackend::Log log;
  StatusOr<Plan> plan = Plan::fromBytes(buildPlan(), "hooks.dtp");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto ex = Executor::create(*plan, 1, nullptr, std::make_unique<HookBackend>(inner(), log));
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_EQ(log.begun, std::vector<std::string>{"train_step"});
  EXPECT_EQ(log.ended, std::vector<size_t>{2});
  EXPECT_EQ(log.bindsOutside, 0);
  runAndCheck(**ex, 1);
  runAndCheck(**ex, -1);
  EXPECT_EQ(log.replacementRuns, 2);
  EXPECT_TRUE((*ex)->timings().empty());
}

TEST_P(BackendHooksTest, TimedRunsTakeThePlanStepsOneByOne) {
  HookBackend::Log log;
  StatusOr<Plan> plan = Plan::fromBytes(buildPlan(), "hooks.dtp");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto ex = Executor::create(*plan, 1, nullptr, std::make_unique<HookBackend>(inner(), log));
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  (*ex)->setTiming(true);
  runAndCheck(**ex, 1);
  EXPECT_EQ(log.replacementRuns, 0);
  const std::vector<StepTiming>& t = (*ex)->timings();
  ASSERT_EQ(t.size(), 2u);
  for (uint32_t k = 0; k < 2; ++k) {
    EXPECT_EQ(t[k].function, 0u);
    EXPECT_EQ(t[k].step, k);
    EXPECT_LE(t[k].startUs, t[k].endUs);
  }
  // Timing off again: back to the replacement.
  (*ex)->setTiming(false);
  runAndCheck(**ex, -1);
  EXPECT_EQ(log.replacementRuns, 1);
  EXPECT_EQ((*ex)->timings().size(), 2u);
}

// The default hooks (the CPU backends' own) change nothing.
TEST_P(BackendHooksTest, DefaultHooksRunThePlanSteps) {
  StatusOr<Plan> plan = Plan::fromBytes(buildPlan(), "hooks.dtp");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto ex = Executor::create(*plan, 1, nullptr, inner());
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  runAndCheck(**ex, 1);
  (*ex)->setTiming(true);
  runAndCheck(**ex, -1);
  EXPECT_EQ((*ex)->timings().size(), 2u);
}

// Backends come from one table by --device name, and each says what kind of device it is, so
// that no caller tests a name.
TEST(BackendFactories, MakeEachKnownBackendAndNameTheOthers) {
  for (const char* device : {"", "cpu", "cpu-staged"}) {
    StatusOr<std::unique_ptr<Backend>> b = createBackend(device, 0);
    ASSERT_TRUE(b.ok()) << device << ": " << b.status().message();
    EXPECT_STREQ((*b)->kind().name, "cpu") << device;
    EXPECT_FALSE((*b)->kind().gpu) << device;
  }
  EXPECT_EQ(createBackend("tpu", 0).status().message(),
            "unknown --device 'tpu' (expected cpu, cuda or cpu-staged)");
  std::vector<std::string> names;
  for (const BackendFactory& f : backendFactories()) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"cpu", "cuda", "cpu-staged"}));
}

TEST(DeviceKinds, EachRowIsComplete) {
  EXPECT_EQ(deviceKindNames(), "cpu or cuda");
  for (const DeviceKind& k : deviceKinds()) {
    EXPECT_EQ(findDeviceKind(k.name), &k);
    EXPECT_NE(k.stepScratchBytes, nullptr) << k.name;
    EXPECT_NE(std::string(k.defaultProfile), "") << k.name;
  }
  EXPECT_TRUE(findDeviceKind("cuda")->gpu);
  EXPECT_TRUE(findDeviceKind("cuda")->overlapsCollectives);
  EXPECT_FALSE(findDeviceKind("cpu")->blasWorkspace);
  EXPECT_EQ(findDeviceKind("cpu-staged"), nullptr);  // a backend of kind cpu, not a kind
}

INSTANTIATE_TEST_SUITE_P(CpuAndStaged, BackendHooksTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Staged" : "Cpu";
                         });

}  // namespace
}  // namespace dtc
