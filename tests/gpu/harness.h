// Runs one plan step on the CPU backend's kernels (the reference) and on a device backend, and
// compares their outputs. Steps are built by hand with the FlatBuffers API, as in
// tests/unit/exec/pipeline_plan.h; inputs are random (seeded by the case and the rank).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "exec/backend.h"
#include "support/dtype.h"
#include "support/half.h"

namespace dtc::gputest {

using Shape = std::vector<int64_t>;

struct Attr {
  std::string name;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::string s;
};
inline Attr intAttr(std::string name, int64_t v) { return {std::move(name), v, 0, {}, {}}; }
inline Attr floatAttr(std::string name, double v) { return {std::move(name), 0, v, {}, {}}; }
inline Attr intsAttr(std::string name, std::vector<int64_t> v) {
  return {std::move(name), 0, 0, std::move(v), {}};
}
inline Attr stringAttr(std::string name, std::string v) {
  return {std::move(name), 0, 0, {}, std::move(v)};
}

struct Input {
  DType dtype = DType::kF32;
  Shape shape;
  float lo = -1, hi = 1;       // float32: uniform in [lo, hi); bf16/f16: that, rounded
  int64_t idLo = 0, idHi = 0;  // int64: uniform in [idLo, idHi)
  std::vector<float> values;   // float32: these values instead, when given (bf16/f16: rounded)
  std::vector<uint16_t> words = {};   // bf16/f16: these bit patterns, when given
  std::vector<int64_t> indices = {};  // int64: these values instead, when given
};
inline Input f32(Shape s, float lo = -1, float hi = 1) {
  return {DType::kF32, std::move(s), lo, hi, 0, 0, {}};
}
inline Input ids(Shape s, int64_t hi, int64_t lo = 0) {
  return {DType::kI64, std::move(s), 0, 0, lo, hi, {}};
}
// int64 data as given (a routing plan: entries that must agree with each other).
inline Input givenIds(Shape s, std::vector<int64_t> v) {
  return {DType::kI64, std::move(s), 0, 0, 0, 0, {}, {}, std::move(v)};
}
inline Input zeros(DType t, Shape s) { return {t, std::move(s), 0, 0, 0, 0, {}}; }
inline Input given(Shape s, std::vector<float> v) {
  return {DType::kF32, std::move(s), 0, 0, 0, 0, std::move(v)};
}
// bfloat16 / float16 inputs: uniform values rounded to the type, or given bit patterns.
inline Input lowp(DType t, Shape s, float lo = -1, float hi = 1) {
  return {t, std::move(s), lo, hi, 0, 0, {}};
}
inline Input lowpBits(DType t, Shape s, std::vector<uint16_t> w) {
  return {t, std::move(s), 0, 0, 0, 0, {}, std::move(w)};
}
// FP8 inputs (float8_e4m3fn, float8_e5m2): random finite codes of the type.
inline Input fp8Codes(DType t, Shape s) { return {t, std::move(s), 0, 0, 0, 0, {}}; }
// x rounded to t (to nearest even, as both backends round), as a float again.
inline float roundTo(DType t, float x) {
  if (t == DType::kBF16) return bf16ToF32(f32ToBf16(x));
  if (t == DType::kF16) return f16ToF32(f32ToF16(x));
  return x;
}
// Given values as an input of type t (exact where they are already rounded to t).
inline Input givenAs(DType t, Shape s, std::vector<float> v) {
  Input in = given(std::move(s), std::move(v));
  in.dtype = t;
  return in;
}
// " bf16" / " f16" in labels ("" for f32), and the 16-bit cases' usual tolerance: one rounding
// of values that agree to f32's.
inline std::string typeLabel(DType t) {
  return t == DType::kBF16 ? " bf16" : t == DType::kF16 ? " f16" : "";
}
inline double lowTolerance(DType t) { return t == DType::kBF16 ? 1e-2 : 2e-3; }

struct Output {
  Shape shape;
  DType dtype = DType::kF32;
  int alias = -1;  // shares the storage of this input (in-place updates, as the planner does)
};
inline Output out(Shape s, int alias = -1) { return {std::move(s), DType::kF32, alias}; }
inline Output outI64(Shape s) { return {std::move(s), DType::kI64, -1}; }
inline Output outAs(DType t, Shape s, int alias = -1) { return {std::move(s), t, alias}; }

struct Case {
  std::string label;  // also the step's location
  std::string op;
  std::vector<Attr> attrs;
  std::vector<Input> inputs;
  std::vector<Output> outputs;
  double tolerance = 1e-5;  // max |cuda − cpu| / max |cpu| per output
  // Every output bit for bit, NaN payloads included (casts, loss scaling), instead.
  bool bitwise = false;
  // bfloat16/float16 outputs: at most this many units in the last place apart per element, as
  // well as within `tolerance` (-1: not checked, only reported).
  int maxUlps = 1;
  // A second run must give the same bits (false: a kernel whose sums' order may vary by design,
  // cuDNN's default attention backward).
  bool repeatable = true;
};

// The bytes of a Step table holding `c`'s op, attributes (sorted by name) and location.
std::vector<uint8_t> buildStep(const Case& c);

// The runtime switches are parsed once per copy of support/runtime_options (the test's and the
// plugin's): main sets how to parse both again, which ScopedEnv does after each change.
void setRuntimeOptionsReload(std::function<void()> reload);

// An environment variable a backend reads at bind time, set for the cases that follow (null:
// unset, the backend's default) and put back as the environment had it when this goes.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value);

 private:
  const char* name_;
  bool had_ = false;
  std::string was_;
};

class Harness {
 public:
  // `mesh` serves collectives (both backends use it, in the same order on every rank).
  Harness(Backend& device, comm::DeviceMesh* mesh, int rank, bool verbose);
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // Runs `c` on both backends and compares; prints one line; false on a mismatch or an error.
  bool run(const Case& c);
  // A malformed step: both backends must refuse it at bind time with the same message.
  bool expectSameBindError(const Case& c);
  // A bind that must fail on the device backend with a message containing `text`.
  bool expectBindError(const Case& c, const std::string& text);
  // A step that binds and runs, then fails at the next synchronisation with `text` (data the
  // kernels reject on the device). Use a fresh backend: its error flags stay raised.
  bool expectRunError(const Case& c, const std::string& text);
  // send then recv through the mesh on both backends: the received tensor equals the sent one.
  bool sendRecv(const Shape& shape, DType dtype);

  int failures() const { return failures_; }

 private:
  void report(bool ok, const std::string& label, const std::string& detail);
  Backend& device_;
  comm::DeviceMesh* mesh_;
  int rank_;
  bool verbose_;
  int failures_ = 0;
  uint64_t caseCounter_ = 0;
  uint8_t* workspace_ = nullptr;
};

}  // namespace dtc::gputest
