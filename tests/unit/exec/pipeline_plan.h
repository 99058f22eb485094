// A tiny two-stage pipeline plan built with the FlatBuffers API (no compiler needed), and knobs
// that make it malformed for the verifier's tests.
//
// Mesh pp=2 (pipeline axis 0). Every rank's "train_step" is its stage's:
//   stage 0: send x (float32 [n], tag 0) and ids (int64 [3], tag 1) to stage 1, then recv g
//            (tag 2) from it; returns g. Holds parameter "w" (ones [2]).
//   stage 1: send v (its parameter, [n], stored values i/2) to stage 0 (tag 2), recv ids (tag
//            1) before y (tag 0), z = relu(y); returns z and ids. Holds parameter "v".
// Both stages send before they receive, which only works with sends that never block (for
// n large enough that MPI does not buffer them itself), and receive in another order than the
// peer sent. Both stages keep an optimizer scalar "step" (listed once per stage).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ops/kernel_registry.h"
#include "plan_generated.h"
#include "planfile/plan_format.h"

namespace dtc::testing {

struct PipelinePlanOptions {
  int64_t n = 4;
  int pipelineAxis = 0;
  std::vector<std::pair<std::string, int64_t>> mesh = {{"pp", 2}};
  int stages[2] = {0, 1};             // of the two train_step functions
  int stateStages[4] = {0, 1, 0, 1};  // w, v, step (stage 0's), step (stage 1's)
  uint64_t stateBytesSlack = 0;       // subtracted from the state region (to break it)
};

inline uint64_t align64(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

inline std::vector<uint8_t> buildPipelinePlan(const PipelinePlanOptions& o = {}) {
  namespace fb = flatbuffers;
  fb::FlatBufferBuilder b;
  const std::vector<int64_t> vec{o.n}, three{3}, two{2}, one{1};
  const uint64_t floats = align64(o.n * 4), ids = align64(3 * 8);
  auto attrs = [&](int64_t shift, int64_t tag) {
    std::vector<int64_t> axes{0};
    return std::vector<fb::Offset<plan::Attr>>{plan::CreateAttrDirect(b, "axes", 0, 0, &axes),
                                               plan::CreateAttrDirect(b, "shift", shift),
                                               plan::CreateAttrDirect(b, "tag", tag)};
  };
  auto step = [&](const char* op, std::vector<uint32_t> ins, std::vector<uint32_t> outs,
                  std::vector<fb::Offset<plan::Attr>> a) {
    return plan::CreateStepDirect(b, &ins, &outs, &a, op, findKernel(op)->kernel);
  };
  auto binding = [&](uint32_t value, plan::Role role, const char* name) {
    return plan::CreateBindingDirect(b, value, role, name, role == plan::Role::data ? 0 : -1);
  };

  // Stage 0.
  std::vector<fb::Offset<plan::Value>> v0 = {
      plan::CreateValueDirect(b, "x", plan::DType::f32, &vec, plan::Region::arena, 0),
      plan::CreateValueDirect(b, "ids", plan::DType::i64, &three, plan::Region::arena, floats),
      plan::CreateValueDirect(b, "g", plan::DType::f32, &vec, plan::Region::arena, floats + ids),
      plan::CreateValueDirect(b, "w", plan::DType::f32, &two, plan::Region::state, 0)};
  std::vector<fb::Offset<plan::Step>> s0 = {step("send", {0}, {}, attrs(1, 0)),
                                            step("send", {1}, {}, attrs(1, 1)),
                                            step("recv", {}, {2}, attrs(-1, 2))};
  std::vector<fb::Offset<plan::Binding>> a0 = {binding(0, plan::Role::data, "x"),
                                               binding(3, plan::Role::param, "w")};
  std::vector<fb::Offset<plan::Binding>> r0 = {binding(2, plan::Role::output, "g")};
  auto f0 = plan::CreateFunctionDirect(b, "train_step", &v0, &s0, &a0, &r0, 2 * floats + ids,
                                       o.stages[0]);

  // Stage 1.
  std::vector<fb::Offset<plan::Value>> v1 = {
      plan::CreateValueDirect(b, "y", plan::DType::f32, &vec, plan::Region::arena, 0),
      plan::CreateValueDirect(b, "ids", plan::DType::i64, &three, plan::Region::arena, floats),
      plan::CreateValueDirect(b, "z", plan::DType::f32, &vec, plan::Region::arena, floats + ids),
      plan::CreateValueDirect(b, "v", plan::DType::f32, &vec, plan::Region::state, 0)};
  std::vector<fb::Offset<plan::Step>> s1 = {
      step("send", {3}, {}, attrs(-1, 2)), step("recv", {}, {1}, attrs(1, 1)),
      step("recv", {}, {0}, attrs(1, 0)), step("relu", {0}, {2}, {})};
  std::vector<fb::Offset<plan::Binding>> a1 = {binding(3, plan::Role::param, "v")};
  std::vector<fb::Offset<plan::Binding>> r1 = {binding(2, plan::Role::output, "z"),
                                               binding(1, plan::Role::output, "ids")};
  // A larger arena than stage 0's, so the per-stage arena size is visible.
  auto f1 = plan::CreateFunctionDirect(b, "train_step", &v1, &s1, &a1, &r1, 2 * floats + ids + 64,
                                       o.stages[1]);

  // State: offsets per stage (w and v both at 0); "step" after the larger of them.
  std::vector<uint8_t> constants(o.n * 4);
  for (int64_t i = 0; i < o.n; ++i) {
    float value = static_cast<float>(i) / 2;
    std::memcpy(constants.data() + i * 4, &value, 4);
  }
  const uint64_t stepOffset = floats;
  std::vector<fb::Offset<plan::StateTensor>> state = {
      plan::CreateStateTensorDirect(b, "w", plan::DType::f32, &two, 0, plan::Role::param, true,
                                    plan::InitKind::ones, 0, 0, 0, 0, 0, nullptr, nullptr,
                                    o.stateStages[0]),
      plan::CreateStateTensorDirect(b, "v", plan::DType::f32, &vec, 0, plan::Role::param, true,
                                    plan::InitKind::data, 0, 0, 0, 0, o.n * 4, nullptr, nullptr,
                                    o.stateStages[1]),
      plan::CreateStateTensorDirect(b, "step", plan::DType::f32, &one, stepOffset,
                                    plan::Role::optim_state, false, plan::InitKind::zeros, 0, 0, 0,
                                    0, 0, nullptr, nullptr, o.stateStages[2]),
      plan::CreateStateTensorDirect(b, "step", plan::DType::f32, &one, stepOffset,
                                    plan::Role::optim_state, false, plan::InitKind::zeros, 0, 0, 0,
                                    0, 0, nullptr, nullptr, o.stateStages[3])};
  std::vector<fb::Offset<plan::MeshAxis>> mesh;
  for (const auto& [name, size] : o.mesh)
    mesh.push_back(plan::CreateMeshAxisDirect(b, name.c_str(), size));
  std::vector<fb::Offset<plan::Function>> functions = {f0, f1};
  auto root = plan::CreatePlanDirect(
      b, kPlanVersion, "pipeline_plan.h", o.n, &state, stepOffset + 64 - o.stateBytesSlack,
      &functions, "", "", "none", &constants, &mesh, 1, o.pipelineAxis, "hand-built, 2 stages");
  plan::FinishPlanBuffer(b, root);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

}  // namespace dtc::testing
