// The kernel registry (ops/kernels.def) against what is generated from it: the plan schema's
// enum, both dispatch tables' coverage, the contract hook; and the pointwise kernels the CPU
// backend instantiates from their math, against double-precision references and finite
// differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "exec/kernel_contract.h"
#include "exec/step.h"
#include "ops/kernel_registry.h"
#include "plan_generated.h"

namespace dtc {
namespace {

TEST(KernelRegistry, NamesCodesAndSchemaAgree) {
  std::set<std::string> names;
  uint16_t previous = 0;
  for (const KernelInfo* k : allKernels()) {
    const auto code = static_cast<uint16_t>(k->kernel);
    EXPECT_GT(code, previous) << k->name;  // code order, each code once
    previous = code;
    EXPECT_TRUE(names.insert(k->name).second) << "two kernels named " << k->name;
    EXPECT_STREQ(plan::EnumNameKernel(k->kernel), k->name);  // the schema's enum is the registry's
    ASSERT_EQ(findKernel(k->name), k);
    ASSERT_EQ(kernelInfo(k->kernel), k);
    std::set<std::string> attrs;
    for (const KernelAttr& a : k->attrs)
      EXPECT_TRUE(attrs.insert(a.name).second) << k->name << "." << a.name;
    // A kernel priced as another names one that exists and is priced as itself.
    if (k->pricedAs) {
      const KernelInfo* measured = findKernel(k->pricedAs);
      ASSERT_NE(measured, nullptr) << k->name << " is priced as unknown " << k->pricedAs;
      EXPECT_EQ(measured->pricedAs, nullptr) << k->name << " is priced as " << k->pricedAs;
    }
  }
  EXPECT_STREQ(findKernel("rms_norm")->pricedAs, "layer_norm");
  EXPECT_EQ(findKernel("layer_norm")->pricedAs, nullptr);
  EXPECT_EQ(kernelInfo(Kernel::none), nullptr);
  EXPECT_EQ(kernelInfo(static_cast<Kernel>(60000)), nullptr);
  EXPECT_EQ(kernelName(static_cast<Kernel>(60000)), "kernel 60000");
  EXPECT_EQ(findKernel("no_such_kernel"), nullptr);
  EXPECT_EQ(kernelCodeLimit(), previous + 1);
}

// One step as its own FlatBuffer, the way a plan holds it.
std::vector<uint8_t> stepBuffer(Kernel kernel, size_t inputs, size_t outputs) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<uint32_t> ins, outs;
  for (size_t i = 0; i < inputs; ++i) ins.push_back(static_cast<uint32_t>(i));
  for (size_t i = 0; i < outputs; ++i) outs.push_back(static_cast<uint32_t>(inputs + i));
  std::vector<flatbuffers::Offset<plan::Attr>> attrs;
  b.Finish(plan::CreateStepDirect(b, &ins, &outs, &attrs, "node", kernel));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

TensorView view(std::vector<float>& data, std::vector<int64_t> shape) {
  TensorView t;
  t.data = reinterpret_cast<uint8_t*>(data.data());
  t.shape = std::move(shape);
  return t;
}

// Runs one CPU step on `inputs` (each of `shape`) into one output.
std::vector<float> runCpu(Kernel kernel, std::vector<std::vector<float>> inputs, ThreadPool& pool) {
  const std::vector<int64_t> shape{static_cast<int64_t>(inputs[0].size())};
  std::vector<uint8_t> buffer = stepBuffer(kernel, inputs.size(), 1);
  const auto* step = flatbuffers::GetRoot<plan::Step>(buffer.data());
  std::vector<float> out(inputs[0].size(), -1.0f);
  StepContext ctx{*step, {}, {view(out, shape)}, pool};
  for (auto& in : inputs) ctx.inputs.push_back(view(in, shape));
  EXPECT_TRUE(checkKernelContract(ctx).ok());
  StatusOr<BoundStep> bound = bindCpuStep(ctx);
  EXPECT_TRUE(bound.ok()) << bound.status().message();
  if (bound.ok()) {
    EXPECT_TRUE(bound.value()().ok());
  }
  return out;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
double softplus(double x) { return std::log1p(std::exp(x)); }

struct PointwiseCase {
  Kernel forward, gradient;
  std::function<double(double)> reference;
  bool gradientTakesOutput;  // `at` is y (sigmoid) rather than x (silu)
};

TEST(PointwiseKernels, MatchReferencesAndFiniteDifferences) {
  ThreadPool pool(2);
  const std::vector<PointwiseCase> cases = {
      {Kernel::sigmoid, Kernel::sigmoid_grad, sigmoid, true},
      {Kernel::silu, Kernel::silu_grad, silu, false},
      {Kernel::softplus, Kernel::softplus_grad, softplus, false}};
  // Enough elements to split over the pool; saturated tails (|x| large) included.
  std::vector<float> x, dy;
  for (int i = 0; i < 10000; ++i) {
    x.push_back(-30.0f + 60.0f * static_cast<float>(i) / 9999.0f);
    dy.push_back(0.5f + 0.25f * std::sin(static_cast<float>(i)));
  }
  for (const PointwiseCase& c : cases) {
    const std::string name = kernelName(c.forward);
    std::vector<float> y = runCpu(c.forward, {x}, pool);
    std::vector<float> dx = runCpu(c.gradient, {dy, c.gradientTakesOutput ? y : x}, pool);
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = c.reference(x[i]);
      EXPECT_NEAR(y[i], want, 1e-6 * std::max(1.0, std::fabs(want))) << name << " at x = " << x[i];
      const double h = 1e-4;
      const double slope = (c.reference(x[i] + h) - c.reference(x[i] - h)) / (2 * h);
      EXPECT_NEAR(dx[i], dy[i] * slope, 1e-5 * std::max(1.0, std::fabs(dy[i] * slope)))
          << name << " gradient at x = " << x[i];
    }
  }
}

// The contract hook refuses what the kernels' contracts refuse, with the same message as the
// backends' binders, before any backend sees the step.
TEST(KernelContract, RefusesMismatchedShapes) {
  ThreadPool pool(1);
  std::vector<float> a(6), b(4);
  std::vector<uint8_t> buffer = stepBuffer(Kernel::silu, 1, 1);
  const auto* step = flatbuffers::GetRoot<plan::Step>(buffer.data());
  StepContext ctx{*step, {view(a, {6})}, {view(b, {4})}, pool};
  Status contract = checkKernelContract(ctx);
  ASSERT_FALSE(contract.ok());
  EXPECT_EQ(contract.message(), "silu at node: shapes [6] and [4] differ");
  EXPECT_EQ(bindCpuStep(ctx).status().message(), contract.message());

  std::vector<uint8_t> unknown = stepBuffer(static_cast<Kernel>(60000), 1, 1);
  StepContext newer{
      *flatbuffers::GetRoot<plan::Step>(unknown.data()), {view(a, {6})}, {view(a, {6})}, pool};
  EXPECT_EQ(checkKernelContract(newer).message(),
            "kernel 60000 at node: unknown kernel (the plan needs a newer dtrun)");
}

}  // namespace
}  // namespace dtc
