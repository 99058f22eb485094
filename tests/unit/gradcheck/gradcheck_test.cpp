// Finite-difference checks of every differentiable graph op's gradient rule, through the whole
// stack: the autodiff pass builds @grad, the plan is written and executed by the CPU runtime,
// and central differences of the executed forward function are the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "Passes.h"
#include "driver/Compile.h"
#include "exec/executor.h"
#include "lowering/PlanWriter.h"

namespace dtc {
namespace {

// One op under test: `body` computes %out from the arguments; the loss is sum(%out * %r) with
// a fixed random %r, so every output element contributes with its own weight.
struct Case {
  std::string name;
  std::string args;           // e.g. "%a: tensor<3x4xf32> {graph.param = \"a\", graph.trainable}"
  std::string body;           // MLIR ops defining %out
  std::string outType;        // e.g. "tensor<3x5xf32>"
  int rank;                   // rank of %out
  float minMagnitude = 0.0f;  // keep inputs away from kinks (ReLU at 0)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string moduleText(const Case& c) {
  std::string axes;
  for (int i = 0; i < c.rank; ++i) axes += (i ? ", " : "") + std::to_string(i);
  // Batch inputs (the labels of cross-entropy) have 4 rows.
  return "module attributes {graph.batch_size = 4 : i64} {\nfunc.func @forward(" + c.args +
         ", %r: " + c.outType +
         " {graph.param = \"r\"}) -> (tensor<f32> {graph.output = \"loss\"}) {\n" + c.body +
         "\n  %w = graph.mul %out, %r : " + c.outType + ", " + c.outType +
         "\n  %loss = graph.reduce_sum %w {axes = array<i64" + (c.rank ? ": " + axes : "") +
         ">} : " + c.outType + " -> tensor<f32>\n  return %loss : tensor<f32>\n}\n}\n";
}

class GradCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradCheck, MatchesCentralDifferences) {
  const Case& c = GetParam();
  mlir::MLIRContext ctx;
  registerDialects(ctx);
  std::string text = moduleText(c);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module) << text;
  mlir::PassManager pm(&ctx);
  pm.addPass(createAutodiff());
  OptimizerOptions keep;
  keep.keepGrad = true;  // this test runs @grad itself
  pm.addPass(createOptimizer(keep));
  pm.addPass(createLowerToKernels());
  pm.addPass(createPlanMemory());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(mlir::succeeded(writePlan(*module, nullptr, bytes)));
  auto plan = Plan::fromBytes(std::move(bytes), c.name);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto ex = Executor::create(*plan, 1, nullptr, createCpuBackend());
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  Executor& e = **ex;

  // Random values for every parameter (inputs and %r alike).
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const plan::StateTensor* s : *plan->root().state()) {
    TensorView t = e.state(s->name()->str());
    for (int64_t i = 0; i < t.numElements(); ++i) {
      float v = dist(rng);
      if (std::fabs(v) < c.minMagnitude) v = v < 0 ? -c.minMagnitude : c.minMagnitude;
      t.f32()[i] = v;
    }
  }
  const plan::Function& gradFn = *plan->function("grad");
  // Data inputs (class labels) live in the arena, which other values reuse: refill them
  // before every run.
  auto loss = [&](const plan::Function& f, const char* name) {
    for (const plan::Binding* b : *f.arguments())
      if (b->role() == plan::Role::data) {
        TensorView labels = e.view(name, b->value());
        for (int64_t i = 0; i < labels.numElements(); ++i) labels.i64()[i] = (i * 5) % 6;
      }
    EXPECT_TRUE(e.run(name).ok());
    return double(*e.view(name, f.results()->Get(0)->value()).f32());
  };
  loss(gradFn, "grad");
  // Every gradient is copied out before the first finite difference: later runs reuse the
  // arena that holds them.
  std::vector<std::vector<float>> analytics;
  for (uint32_t r = 1; r < gradFn.results()->size(); ++r) {
    TensorView g = e.view("grad", gradFn.results()->Get(r)->value());
    analytics.emplace_back(g.f32(), g.f32() + g.numElements());
  }
  int checked = 0;
  for (uint32_t r = 1; r < gradFn.results()->size(); ++r) {
    const plan::Binding& b = *gradFn.results()->Get(r);
    const std::vector<float>& analytic = analytics[r - 1];
    TensorView param = e.state(b.name()->str());
    double scale = 1e-3;
    for (float a : analytic) scale = std::max(scale, double(std::fabs(a)));
    int64_t n = param.numElements(), stride = std::max<int64_t>(1, n / 16);
    for (int64_t i = 0; i < n; i += stride) {
      const float eps = 1e-2f, saved = param.f32()[i];
      // The loss of @grad is the training-mode forward (batch statistics for BatchNorm).
      param.f32()[i] = saved + eps;
      double up = loss(gradFn, "grad");
      param.f32()[i] = saved - eps;
      double down = loss(gradFn, "grad");
      param.f32()[i] = saved;
      double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(analytic[i], numeric, 2e-3 * scale)
          << c.name << ": d loss / d " << b.name()->str() << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

const char* kP = " {graph.param = \"";
std::string arg(const std::string& name, const std::string& type) {
  return "%" + name + ": " + type + kP + name + "\", graph.trainable}";
}

INSTANTIATE_TEST_SUITE_P(
    Ops, GradCheck,
    ::testing::Values(
        Case{"matmul", arg("a", "tensor<3x4xf32>") + ", " + arg("b", "tensor<4x5xf32>"),
             "%out = graph.matmul %a, %b : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>",
             "tensor<3x5xf32>", 2},
        Case{"linear_rank3", arg("a", "tensor<2x3x4xf32>") + ", " + arg("b", "tensor<5x4xf32>"),
             "%out = graph.linear %a, %b : tensor<2x3x4xf32>, tensor<5x4xf32> -> tensor<2x3x5xf32>",
             "tensor<2x3x5xf32>", 3},
        Case{"matmul_tt", arg("a", "tensor<4x3xf32>") + ", " + arg("b", "tensor<5x4xf32>"),
             "%out = graph.matmul %a, %b {transpose_lhs = true, transpose_rhs = true} : "
             "tensor<4x3xf32>, tensor<5x4xf32> -> tensor<3x5xf32>",
             "tensor<3x5xf32>", 2},
        Case{"matmul_t_lhs", arg("a", "tensor<4x3xf32>") + ", " + arg("b", "tensor<4x5xf32>"),
             "%out = graph.matmul %a, %b {transpose_lhs = true} : tensor<4x3xf32>, "
             "tensor<4x5xf32> -> tensor<3x5xf32>",
             "tensor<3x5xf32>", 2},
        Case{"add_broadcast", arg("a", "tensor<2x3x4xf32>") + ", " + arg("b", "tensor<3x1xf32>"),
             "%out = graph.add %a, %b : tensor<2x3x4xf32>, tensor<3x1xf32>", "tensor<2x3x4xf32>",
             3},
        Case{"sub_broadcast", arg("a", "tensor<4xf32>") + ", " + arg("b", "tensor<3x4xf32>"),
             "%out = graph.sub %a, %b : tensor<4xf32>, tensor<3x4xf32>", "tensor<3x4xf32>", 2},
        Case{"mul_broadcast", arg("a", "tensor<3x4xf32>") + ", " + arg("b", "tensor<1x4xf32>"),
             "%out = graph.mul %a, %b : tensor<3x4xf32>, tensor<1x4xf32>", "tensor<3x4xf32>", 2},
        Case{"reduce_sum_middle", arg("a", "tensor<2x3x4xf32>"),
             "%out = graph.reduce_sum %a {axes = array<i64: 1>} : tensor<2x3x4xf32> -> "
             "tensor<2x4xf32>",
             "tensor<2x4xf32>", 2},
        Case{"reduce_sum_keepdims", arg("a", "tensor<2x3x4xf32>"),
             "%out = graph.reduce_sum %a {axes = array<i64: 0, 2>, keepdims = true} : "
             "tensor<2x3x4xf32> -> tensor<1x3x1xf32>",
             "tensor<1x3x1xf32>", 3},
        Case{"broadcast", arg("a", "tensor<3x1xf32>"),
             "%out = graph.broadcast %a : tensor<3x1xf32> -> tensor<2x3x4xf32>",
             "tensor<2x3x4xf32>", 3},
        Case{"reshape", arg("a", "tensor<2x6xf32>"),
             "%out = graph.reshape %a : tensor<2x6xf32> -> tensor<3x4xf32>", "tensor<3x4xf32>", 2},
        Case{"relu", arg("a", "tensor<4x5xf32>"), "%out = graph.relu %a : tensor<4x5xf32>",
             "tensor<4x5xf32>", 2, 0.05f},
        Case{"tanh", arg("a", "tensor<4x5xf32>"), "%out = graph.tanh %a : tensor<4x5xf32>",
             "tensor<4x5xf32>", 2},
        Case{"sigmoid", arg("a", "tensor<4x5xf32>"), "%out = graph.sigmoid %a : tensor<4x5xf32>",
             "tensor<4x5xf32>", 2},
        Case{"silu", arg("a", "tensor<4x5xf32>"), "%out = graph.silu %a : tensor<4x5xf32>",
             "tensor<4x5xf32>", 2},
        Case{"softplus", arg("a", "tensor<4x5xf32>"), "%out = graph.softplus %a : tensor<4x5xf32>",
             "tensor<4x5xf32>", 2},
        Case{"gelu", arg("a", "tensor<4x5xf32>"), "%out = graph.gelu %a : tensor<4x5xf32>",
             "tensor<4x5xf32>", 2},
        Case{"gelu_tanh", arg("a", "tensor<4x5xf32>"),
             "%out = graph.gelu %a {approximate_tanh = true} : tensor<4x5xf32>", "tensor<4x5xf32>",
             2},
        Case{"mse", arg("a", "tensor<3x4xf32>") + ", " + arg("b", "tensor<3x4xf32>"),
             "%m = graph.mse %a, %b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<f32>\n"
             "  %out = graph.reshape %m : tensor<f32> -> tensor<1xf32>",
             "tensor<1xf32>", 1},
        Case{"softmax_cross_entropy",
             arg("a", "tensor<4x6xf32>") + ", %y: tensor<4xi64> {graph.data = \"y\"}",
             "%m = graph.softmax_cross_entropy %a, %y : tensor<4x6xf32>, tensor<4xi64>\n"
             "  %out = graph.reshape %m : tensor<f32> -> tensor<1xf32>",
             "tensor<1xf32>", 1},
        // Transformer ops.
        Case{"batch_matmul", arg("a", "tensor<2x3x4xf32>") + ", " + arg("b", "tensor<2x4x5xf32>"),
             "%out = graph.batch_matmul %a, %b : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> "
             "tensor<2x3x5xf32>",
             "tensor<2x3x5xf32>", 3},
        Case{"batch_matmul_t_rhs",
             arg("a", "tensor<2x2x3x4xf32>") + ", " + arg("b", "tensor<2x2x5x4xf32>"),
             "%out = graph.batch_matmul %a, %b {transpose_rhs = true} : tensor<2x2x3x4xf32>, "
             "tensor<2x2x5x4xf32> -> tensor<2x2x3x5xf32>",
             "tensor<2x2x3x5xf32>", 4},
        Case{"batch_matmul_t_lhs",
             arg("a", "tensor<2x4x3xf32>") + ", " + arg("b", "tensor<2x4x5xf32>"),
             "%out = graph.batch_matmul %a, %b {transpose_lhs = true} : tensor<2x4x3xf32>, "
             "tensor<2x4x5xf32> -> tensor<2x3x5xf32>",
             "tensor<2x3x5xf32>", 3},
        Case{"transpose", arg("a", "tensor<2x3x4x5xf32>"),
             "%out = graph.transpose %a {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x4x5xf32> -> "
             "tensor<2x4x3x5xf32>",
             "tensor<2x4x3x5xf32>", 4},
        Case{"split_one_piece_unused", arg("a", "tensor<2x9xf32>"),
             "%p:3 = graph.split %a {axis = 1 : i64, parts = 3 : i64} : tensor<2x9xf32> -> "
             "tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>\n"
             "  %out = graph.mul %p#0, %p#2 : tensor<2x3xf32>, tensor<2x3xf32>",
             "tensor<2x3xf32>", 2},
        Case{"concat", arg("a", "tensor<2x3xf32>") + ", " + arg("b", "tensor<2x3xf32>"),
             "%out = graph.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x3xf32> -> "
             "tensor<4x3xf32>",
             "tensor<4x3xf32>", 2},
        Case{"causal_softmax", arg("a", "tensor<2x4x4xf32>"),
             "%out = graph.causal_softmax %a {scale = 0.7 : f32} : tensor<2x4x4xf32>",
             "tensor<2x4x4xf32>", 3},
        Case{"softmax", arg("a", "tensor<3x5xf32>"),
             "%out = graph.softmax %a {scale = 0.7 : f32} : tensor<3x5xf32>", "tensor<3x5xf32>", 2},
        Case{"exp", arg("a", "tensor<3x5xf32>"), "%out = graph.exp %a : tensor<3x5xf32>",
             "tensor<3x5xf32>", 2},
        Case{"erf", arg("a", "tensor<3x5xf32>"), "%out = graph.erf %a : tensor<3x5xf32>",
             "tensor<3x5xf32>", 2},
        Case{"pow", arg("a", "tensor<3x5xf32>"),
             "%out = graph.pow %a {exponent = 3.0 : f32} : tensor<3x5xf32>", "tensor<3x5xf32>", 2},
        Case{"scale", arg("a", "tensor<3x5xf32>"),
             "%out = graph.scale %a {factor = -0.3 : f32} : tensor<3x5xf32>", "tensor<3x5xf32>", 2},
        Case{"layer_norm",
             arg("a", "tensor<3x6xf32>") + ", " + arg("g", "tensor<6xf32>") + ", " +
                 arg("beta", "tensor<6xf32>"),
             "%out, %mean, %rstd = graph.layer_norm %a, %g, %beta {eps = 1.0e-5 : f32} : "
             "(tensor<3x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<3x6xf32>, tensor<3xf32>, "
             "tensor<3xf32>)",
             "tensor<3x6xf32>", 2},
        Case{"rms_norm", arg("a", "tensor<3x6xf32>") + ", " + arg("g", "tensor<6xf32>"),
             "%out, %rstd = graph.rms_norm %a, %g {eps = 1.0e-5 : f32} : "
             "(tensor<3x6xf32>, tensor<6xf32>) -> (tensor<3x6xf32>, tensor<3xf32>)",
             "tensor<3x6xf32>", 2},
        Case{"swiglu", arg("a", "tensor<3x5xf32>") + ", " + arg("b", "tensor<3x5xf32>"),
             "%out = graph.swiglu %a, %b : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>",
             "tensor<3x5xf32>", 2},
        Case{"rotary",
             arg("x", "tensor<2x4x6xf32>") +
                 ", %c: tensor<1x4x6xf32> {graph.param = \"c\"}, %s: tensor<1x4x6xf32> "
                 "{graph.param = \"s\"}",
             "%out = graph.rotary %x, %c, %s : tensor<2x4x6xf32>, tensor<1x4x6xf32>, "
             "tensor<1x4x6xf32> -> tensor<2x4x6xf32>",
             "tensor<2x4x6xf32>", 3},
        Case{"embedding", arg("t", "tensor<6x3xf32>") + ", %y: tensor<4xi64> {graph.data = \"y\"}",
             "%out = graph.embedding %t, %y : tensor<6x3xf32>, tensor<4xi64> -> tensor<4x3xf32>",
             "tensor<4x3xf32>", 2},
        // Convolutional ops.
        Case{"conv2d_pad_stride",
             arg("x", "tensor<2x3x6x5xf32>") + ", " + arg("k", "tensor<4x3x3x3xf32>"),
             "%out = graph.conv2d %x, %k {padding = array<i64: 1, 1>, stride = array<i64: 2, 1>} : "
             "tensor<2x3x6x5xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x3x5xf32>",
             "tensor<2x4x3x5xf32>", 4},
        Case{"conv2d_wide_stride",
             arg("x", "tensor<1x2x5x7xf32>") + ", " + arg("k", "tensor<3x2x3x4xf32>"),
             "%out = graph.conv2d %x, %k {padding = array<i64: 0, 2>, stride = array<i64: 1, 3>} : "
             "tensor<1x2x5x7xf32>, tensor<3x2x3x4xf32> -> tensor<1x3x3x3xf32>",
             "tensor<1x3x3x3xf32>", 4},
        Case{"max_pool2d", arg("x", "tensor<2x3x4x6xf32>"),
             "%out = graph.max_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>} : "
             "tensor<2x3x4x6xf32> -> tensor<2x3x2x3xf32>",
             "tensor<2x3x2x3xf32>", 4},
        Case{"batch_norm_train",
             arg("x", "tensor<4x3x2x2xf32>") + ", " + arg("g", "tensor<3xf32>") + ", " +
                 arg("beta", "tensor<3xf32>") +
                 ", %rm: tensor<3xf32> {graph.param = \"rm\"}, %rv: tensor<3xf32> {graph.param = "
                 "\"rv\"}",
             "%out, %m, %s, %nm, %nv = graph.batch_norm_train %x, %g, %beta, %rm, %rv {eps = "
             "1.0e-5 : f32, "
             "momentum = 0.1 : f32} : (tensor<4x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, "
             "tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, "
             "tensor<3xf32>, tensor<3xf32>)",
             "tensor<4x3x2x2xf32>", 4}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace dtc
