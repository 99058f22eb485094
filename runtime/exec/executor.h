// Runs a verified plan's functions on a backend (the CPU's, or a device's). All memory is
// allocated once: the state region (parameters, optimizer state) and one arena shared by the
// functions in turn.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "exec/backend.h"
#include "exec/step.h"
#include "planfile/plan.h"
#include "support/thread_pool.h"

namespace dtc {

// One kernel call as it ran: which step of which function, and when (microseconds of the
// system-wide monotonic clock, comparable between processes on one machine).
struct StepTiming {
  uint32_t function = 0;  // index into Plan.functions
  uint32_t step = 0;
  uint32_t call = 0;  // which run of the function (0: the first)
  double startUs = 0, endUs = 0;
};

// One whole run of a function as it ran (its steps, waits, copies and uploads).
struct FunctionTiming {
  uint32_t function = 0;  // index into Plan.functions
  uint32_t call = 0;
  double startUs = 0, endUs = 0;
};

class Executor {
 public:
  // `mesh` (not owned; outlives the executor) runs the plan's collectives; null is one device.
  // `backend` runs the steps (createCpuBackend(), or createBackend by name). `functions`: the names
  // to bind (every function of the plan when empty). Binding reserves memory per step (a device's
  // scratch, the CPU's widened copies), so a trainer binds only what it runs (not `grad`).
  static StatusOr<std::unique_ptr<Executor>> create(const Plan& plan, int threads,
                                                    comm::DeviceMesh* mesh,
                                                    std::unique_ptr<Backend> backend,
                                                    const std::set<std::string>& functions = {});
  ~Executor();

  // Fills parameters from their init rules or stored values and zeroes optimizer state.
  Status initializeState();
  // Runs the steps of `function`, then waits for the sends it started (freeing their buffers).
  Status run(const std::string& function);
  // Recording of every step's timing (off by default: it costs two clock reads per step). Timed
  // runs take the plan's steps one by one, never a backend's replacement for the sequence (a
  // CUDA graph), so each timing is one real step's; on a device backend each step is waited
  // for, so its time is the device's (plus one synchronisation).
  void setTiming(bool on) { timing_ = on; }
  bool timing() const { return timing_; }
  const std::vector<StepTiming>& timings() const { return timings_; }
  void clearTimings() { timings_.clear(); }
  const std::vector<FunctionTiming>& functionTimings() const { return functionTimings_; }

  const Plan& plan() const { return plan_; }
  // The memory this rank holds for the plan: the state region and arena the plan sizes, and what
  // steps had to allocate beyond them (0 when the plan holds every byte its steps use: the CPU;
  // a device backend's own scratch otherwise).
  struct Memory {
    uint64_t state = 0, arena = 0, unplanned = 0;
    uint64_t total() const { return state + arena + unplanned; }
  };
  Memory memory() const {
    return {stateAllocated_, arenaAllocated_, unplannedBytes_ + backend_->unplannedBytes()};
  }
  // This rank's pipeline stage (its mesh coordinate along Plan.pipeline_axis), or -1 for a plan
  // without a pipeline: the rank then runs every function and holds all state.
  int stage() const { return stage_; }
  bool hasFunction(const std::string& name) const { return functions_.count(name) != 0; }
  // The function this rank runs under `name` (its stage's), or nullptr.
  const plan::Function* function(const std::string& name) const;
  // Value `index` of `function` (this rank's) as the host sees it. On the CPU backend that is
  // the value itself. On a device backend only the function's data inputs (uploaded when it
  // runs) and its loss and outputs (downloaded after) have host copies; other values' views
  // have no data.
  TensorView view(const std::string& function, uint32_t index) const;
  // A state tensor of this rank's stage by name (parameter or optimizer state), or an empty
  // view. On a device backend, a host copy current as of the last pullState().
  TensorView state(const std::string& name) const;
  // A float32 scalar of the state ("loss_scale") as the backend holds it now.
  StatusOr<float> readScalarState(const std::string& name) const;
  // After every step of a function run, scan its outputs: the first inf or NaN is a NonFinite
  // error naming the step's model node (slow: a debugging aid).
  void setCheckNumerics(bool on) { checkNumerics_ = on; }
  // Brings the state to the host (device backends; nothing to do on the CPU).
  Status pullState();
  // Sends the host copy of the state to the device after the host wrote it (a loaded
  // checkpoint; nothing to do on the CPU). `state()` views are writable for that purpose.
  Status pushState();
  // Copies `bytes` bytes of state tensor `name` of this rank's stage, from byte `offset` of it, to
  // host memory `to`: on a device backend from the device (current as of the last step, unlike
  // state()'s host copy), on the CPU from the state itself.
  Status readState(const std::string& name, uint64_t offset, uint64_t bytes, void* to) const {
    return readStateRows(name, offset, bytes, bytes, 1, to);
  }
  // The same for `rows` runs of `rowBytes` each, `pitch` bytes apart from byte `offset`, packed
  // at `to` (a column block of a matrix, read without the rest of it).
  Status readStateRows(const std::string& name, uint64_t offset, uint64_t rowBytes, uint64_t pitch,
                       uint64_t rows, void* to) const;
  // A reader of the state that lets training go on (a checkpoint's snapshot copied beside the
  // next step): on a backend with host memory, `finish` is called once, before anything next
  // writes this rank's state (a step with an output in it, the copy-back of updated state,
  // pushState), and must leave the reader done with the state. Replaces a reader not yet
  // finished; nullptr withdraws it.
  void deferStateRead(std::function<Status()> finish) { stateReader_ = std::move(finish); }
  // Backend::pinHost and unpinHost, for host memory this rank's state is often read into.
  Status pinHostMemory(void* memory, uint64_t bytes) { return backend_->pinHost(memory, bytes); }
  void unpinHostMemory(void* memory) { backend_->unpinHost(memory); }
  const Backend& backend() const { return *backend_; }
  ThreadPool& pool() { return pool_; }
  comm::DeviceMesh* mesh() { return mesh_; }
  // This rank's memory: its stage's state region and the arena of its functions.
  uint64_t stateBytes() const { return stateBytes_; }
  uint64_t arenaBytes() const { return arenaBytes_; }

 private:
  Executor(const Plan& plan, int threads, comm::DeviceMesh* mesh, std::unique_ptr<Backend> backend);
  Status prepare(const plan::Function& function);
  // Where value `index` of `function` lives in the backend's memory.
  TensorView deviceView(const std::string& function, uint32_t index) const;
  uint8_t* hostState() const { return backend_->hostMemory() ? state_ : hostState_.get(); }
  // Calls the deferred state reader, if any (deferStateRead).
  Status finishStateRead();

  struct PreparedFunction {
    const plan::Function* function = nullptr;
    uint32_t index = 0;            // in Plan.functions
    std::vector<BoundStep> steps;  // one per plan step (what timing runs and indexes)
    std::vector<BoundStep> run;    // what runs otherwise: the backend's endFunction of `steps`
    // The first of `steps` with an output in the state (steps.size(): none).
    size_t firstStateWrite = 0;
    // On a mesh: each step's model node and op, which the watchdog's reports name.
    std::deque<std::string> labels;
    // Updated state computed outside its own storage: copied back after the steps.
    std::vector<std::pair<TensorView, TensorView>> writeBacks;  // (from, to)
    // Device backends: host copies of the values the trainer fills (uploaded before the
    // steps) and reads (downloaded after), by value index.
    std::map<uint32_t, std::unique_ptr<uint8_t[]>> hostCopies;
    std::vector<uint32_t> uploads, downloads;
  };
  // The first non-finite value among the outputs of step `k` of `function`, as an error.
  Status checkOutputs(const std::string& function, const PreparedFunction& prepared,
                      size_t k) const;
  // firstNonFinite() of value `index` of `function` (downloaded into `host` on a device).
  StatusOr<int64_t> firstNonFiniteOf(const std::string& function, const PreparedFunction& prepared,
                                     uint32_t index, std::vector<uint8_t>& host) const;
  // The first non-finite value among the function's data inputs, as an error.
  Status checkData(const std::string& function, const PreparedFunction& prepared) const;

  const Plan& plan_;
  ThreadPool pool_;
  comm::DeviceMesh* mesh_ = nullptr;
  std::unique_ptr<Backend> backend_;
  uint8_t* state_ = nullptr;  // the backend's memory
  uint8_t* arena_ = nullptr;
  std::unique_ptr<uint8_t[]> hostState_;  // device backends: the state region's host copy
  uint64_t stateBytes_ = 0, arenaBytes_ = 0;
  bool checkNumerics_ = false;
  uint64_t stateAllocated_ = 0, arenaAllocated_ = 0;
  std::function<Status()> stateReader_;
  uint64_t unplannedBytes_ = 0;  // what binders allocated beyond the plan (StepContext)
  int stage_ = -1;
  std::map<std::string, PreparedFunction> functions_;
  bool timing_ = false;
  std::vector<StepTiming> timings_;
  std::vector<FunctionTiming> functionTimings_;
  std::map<uint32_t, uint32_t> calls_;  // runs so far, by function index (timed runs)
};

}  // namespace dtc
