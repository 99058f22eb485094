// Runs a verified plan's functions on the CPU backend. All memory is allocated once: the
// state region (parameters, optimizer state) and one arena shared by the functions in turn.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "plan/plan.h"
#include "support/thread_pool.h"

namespace dtc {

// A value's storage as a kernel sees it.
struct TensorView {
  uint8_t* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  float* f32() const { return reinterpret_cast<float*>(data); }
  int64_t* i64() const { return reinterpret_cast<int64_t*>(data); }
  int64_t numElements() const;
};

// One plan step bound to its buffers, ready to run.
using BoundStep = std::function<Status()>;

struct StepContext {
  const plan::Step& step;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  ThreadPool& pool;
  comm::DeviceMesh* mesh = nullptr;  // collectives: this device's mesh (null: one device)

  // Attribute accessors (attributes are optional in the format; absent means 0).
  int64_t intAttr(const char* name) const;
  double floatAttr(const char* name) const;
  std::vector<int64_t> intsAttr(const char* name) const;
  std::string stringAttr(const char* name) const;
  // "matmul at fc0: " — the prefix of every error about this step.
  std::string where() const;
};

// Validates a step's operands against its kernel's contract and binds it. Defined per kernel in
// cpu_kernel_table.cc.
StatusOr<BoundStep> bindCpuStep(const StepContext& ctx);

// One kernel call as it ran: which step of which function, and when (microseconds of the
// system-wide monotonic clock, comparable between processes on one machine).
struct StepTiming {
  uint32_t function = 0;  // index into Plan.functions
  uint32_t step = 0;
  double startUs = 0, endUs = 0;
};

class Executor {
 public:
  // `mesh` (not owned; outlives the executor) runs the plan's collectives; null is one device.
  static StatusOr<std::unique_ptr<Executor>> create(const Plan& plan, int threads,
                                                    comm::DeviceMesh* mesh = nullptr);
  ~Executor();

  // Fills parameters from their init rules or stored values and zeroes optimizer state.
  Status initializeState();
  // Runs the steps of `function`, then waits for the sends it started (freeing their buffers).
  Status run(const std::string& function);
  // Recording of every step's timing (off by default: it costs two clock reads per step).
  void setTiming(bool on) { timing_ = on; }
  const std::vector<StepTiming>& timings() const { return timings_; }

  const Plan& plan() const { return plan_; }
  // This rank's pipeline stage (its mesh coordinate along Plan.pipeline_axis), or -1 for a plan
  // without a pipeline: the rank then runs every function and holds all state.
  int stage() const { return stage_; }
  bool hasFunction(const std::string& name) const { return functions_.count(name) != 0; }
  // The function this rank runs under `name` (its stage's), or nullptr.
  const plan::Function* function(const std::string& name) const;
  // Where value `index` of `function` (this rank's) lives.
  TensorView view(const std::string& function, uint32_t index) const;
  // A state tensor of this rank's stage by name (parameter or optimizer state), or an empty view.
  TensorView state(const std::string& name) const;
  ThreadPool& pool() { return pool_; }
  comm::DeviceMesh* mesh() { return mesh_; }
  // This rank's memory: its stage's state region and the arena of its functions.
  uint64_t stateBytes() const { return stateBytes_; }
  uint64_t arenaBytes() const { return arenaBytes_; }

 private:
  Executor(const Plan& plan, int threads, comm::DeviceMesh* mesh);
  Status prepare(const plan::Function& function);

  struct PreparedFunction {
    const plan::Function* function = nullptr;
    uint32_t index = 0;  // in Plan.functions
    std::vector<BoundStep> steps;
    // Updated state computed outside its own storage: copied back after the steps.
    std::vector<std::pair<TensorView, TensorView>> writeBacks;  // (from, to)
  };

  const Plan& plan_;
  ThreadPool pool_;
  comm::DeviceMesh* mesh_ = nullptr;
  uint8_t* state_ = nullptr;
  uint8_t* arena_ = nullptr;
  uint64_t stateBytes_ = 0, arenaBytes_ = 0;
  int stage_ = -1;
  uint64_t stateMapped_ = 0, arenaMapped_ = 0;
  std::map<std::string, PreparedFunction> functions_;
  bool timing_ = false;
  std::vector<StepTiming> timings_;
};

}  // namespace dtc
