// Reading a rank's state into host memory without the host copy (a checkpoint's snapshot): a
// range, and rows of a matrix packed together, from the CPU's state and from a device's (the
// staged CPU backend, whose state is reached only through downloads); reads past the tensor
// are refused.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "ops/kernel_registry.h"
#include "plan_generated.h"
#include "planfile/plan_format.h"

namespace dtc {
namespace {

// One state tensor "w" of shape {6, 5}, f32, and a function that leaves it alone (y = relu(x)).
std::vector<uint8_t> buildPlan() {
  namespace fb = flatbuffers;
  fb::FlatBufferBuilder b;
  const std::vector<int64_t> shape{6, 5}, four{4};
  std::vector<fb::Offset<plan::StateTensor>> state = {plan::CreateStateTensorDirect(
      b, "w", plan::DType::f32, &shape, 0, plan::Role::param, true, plan::InitKind::zeros)};
  std::vector<fb::Offset<plan::Value>> values = {
      plan::CreateValueDirect(b, "x", plan::DType::f32, &four, plan::Region::arena, 0),
      plan::CreateValueDirect(b, "y", plan::DType::f32, &four, plan::Region::arena, 64)};
  const std::vector<uint32_t> in{0}, out{1};
  std::vector<fb::Offset<plan::Attr>> none;
  std::vector<fb::Offset<plan::Step>> steps = {
      plan::CreateStepDirect(b, &in, &out, &none, "relu", Kernel::relu)};
  std::vector<fb::Offset<plan::Binding>> arguments = {
      plan::CreateBindingDirect(b, 0, plan::Role::data, "x", 0)};
  std::vector<fb::Offset<plan::Binding>> results = {
      plan::CreateBindingDirect(b, 1, plan::Role::output, "y", -1)};
  std::vector<fb::Offset<plan::Function>> functions = {
      plan::CreateFunctionDirect(b, "train_step", &values, &steps, &arguments, &results, 128)};
  std::vector<uint8_t> constants;
  auto root = plan::CreatePlanDirect(b, kPlanVersion, "read_state_test", 4, &state, 6 * 5 * 4,
                                     &functions, "", "", "none", &constants);
  plan::FinishPlanBuffer(b, root);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

class ReadStateTest : public ::testing::TestWithParam<bool> {};

TEST_P(ReadStateTest, ReadsRangesAndRowsOfTheCurrentState) {
  StatusOr<Plan> plan = Plan::fromBytes(buildPlan(), "read_state.dtp");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto ex = Executor::create(*plan, 1, nullptr,
                             GetParam() ? createStagedCpuBackend() : createCpuBackend());
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  TensorView w = (*ex)->state("w");
  ASSERT_NE(w.data, nullptr);
  std::iota(w.f32(), w.f32() + 30, 0.0f);  // element (r, c) holds 5r + c
  ASSERT_TRUE((*ex)->pushState().ok());

  std::vector<float> range(7, -1);
  ASSERT_TRUE((*ex)->readState("w", 3 * 4, 7 * 4, range.data()).ok());
  EXPECT_EQ(range, (std::vector<float>{3, 4, 5, 6, 7, 8, 9}));

  // Columns 1..2 of rows 2..5: four rows of two, a row (20 bytes) apart.
  std::vector<float> block(8, -1);
  ASSERT_TRUE((*ex)->readStateRows("w", (2 * 5 + 1) * 4, 2 * 4, 5 * 4, 4, block.data()).ok());
  EXPECT_EQ(block, (std::vector<float>{11, 12, 16, 17, 21, 22, 26, 27}));

  // The last column, to the tensor's last byte; then one row too many, and a row past the end.
  std::vector<float> last(6, -1);
  ASSERT_TRUE((*ex)->readStateRows("w", 4 * 4, 4, 5 * 4, 6, last.data()).ok());
  EXPECT_EQ(last, (std::vector<float>{4, 9, 14, 19, 24, 29}));
  std::vector<float> spare(8, -1);
  EXPECT_FALSE((*ex)->readStateRows("w", 4 * 4, 4, 5 * 4, 7, spare.data()).ok());
  EXPECT_FALSE((*ex)->readState("w", 29 * 4, 8, spare.data()).ok());
  EXPECT_FALSE((*ex)->readStateRows("w", 0, 8, 4, 2, spare.data()).ok());  // rows overlap
  EXPECT_FALSE((*ex)->readState("v", 0, 4, spare.data()).ok());
  EXPECT_EQ(spare, std::vector<float>(8, -1));
}

INSTANTIATE_TEST_SUITE_P(CpuAndStaged, ReadStateTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Staged" : "Cpu";
                         });

}  // namespace
}  // namespace dtc
