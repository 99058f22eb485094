// The capture lifecycle of cuda_graph.h. Why it is safe to replay: steps are bound once to fixed
// addresses (the state region, the arena, scratch reserved at bind time), they never allocate,
// read device values on the host or wait for it when they run (those that do mark the Device
// and stay eager), and cuBLAS has a workspace of its own (cuda_device.cc). So a graph of one
// run's kernels, copies and NCCL calls is every later run's.
#include "cuda_graph.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cuda_check.h"
#include "support/runtime_options.h"

namespace dtc::cuda {
namespace {

class Captured {
 public:
  Captured(Device& device, std::vector<BoundStep> steps, std::string function)
      : device_(device), steps_(std::move(steps)), function_(std::move(function)) {}
  ~Captured() {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
  }
  Captured(const Captured&) = delete;
  Captured& operator=(const Captured&) = delete;

  Status run() {
    switch (phase_) {
      case Phase::kWarmUp: {
        const uint64_t before = device_.hostSyncs();
        // A failed warm-up is warmed up again on the next call (if there is one).
        DTC_RETURN_IF_ERROR(eager());
        phase_ = device_.hostSyncs() == before ? Phase::kCapture : Phase::kEager;
        return Status::Ok();
      }
      case Phase::kCapture: return capture();
      case Phase::kGraph: return launch();
      case Phase::kEager: break;
    }
    return eager();
  }

 private:
  enum class Phase { kWarmUp, kCapture, kGraph, kEager };

  Status eager() const {
    for (const BoundStep& step : steps_) DTC_RETURN_IF_ERROR(step());
    return Status::Ok();
  }

  Status launch() const {
    return cudaStatus(cudaGraphLaunch(exec_, device_.stream()),
                      "launching the CUDA graph of function '" + function_ + "'");
  }

  // Nothing has run on the GPU while capturing, so after a failed capture the steps run eagerly
  // from the start, and an error of their own is returned as it would be without graphs.
  Status giveUp(const Status& why) {
    phase_ = Phase::kEager;
    std::string reason = why.message();
    for (char& c : reason)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "dtc: function '%s' runs without a CUDA graph (capture failed: %s)\n",
                 function_.c_str(), reason.c_str());
    return eager();
  }

  // What a replay launches, said once per captured function: its kernels (ours, cuBLAS's,
  // cuDNN's, NCCL's) and the other nodes (copies, memsets, events).
  void reportNodes(cudaGraph_t graph) const {
    size_t count = 0;
    if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    std::vector<cudaGraphNode_t> nodes(count);
    if (count > 0 && cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    size_t kernels = 0;
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type;
      if (cudaGraphNodeGetType(node, &type) == cudaSuccess && type == cudaGraphNodeTypeKernel)
        ++kernels;
    }
    (void)cudaGetLastError();
    std::fprintf(stderr,
                 "dtrun: function '%s' replays as a CUDA graph: %zu kernel launches, %zu other "
                 "nodes\n",
                 function_.c_str(), kernels, count - kernels);
  }

  Status capture() {
    cudaStream_t stream = device_.stream();
    // Outside the capture: nothing may stay forked into it from before.
    DTC_RETURN_IF_ERROR(device_.joinAll());
    // Thread-local: only this thread's capture-unsafe calls fail it, not other threads' work.
    cudaError_t began = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (began != cudaSuccess) {
      (void)cudaGetLastError();
      return giveUp(cudaStatus(began, "cudaStreamBeginCapture"));
    }
    Status ran = Status::Ok();
    for (const BoundStep& step : steps_) {
      ran = step();
      if (!ran.ok()) break;
    }
    // A step that failed may have left the comm stream forked (the list's last step joins it):
    // rejoin it, or the capture cannot end.
    Status joined = device_.joinAll();
    cudaGraph_t graph = nullptr;
    cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    Status why = !ran.ok()      ? ran
                 : !joined.ok() ? joined
                                : cudaStatus(ended, "cudaStreamEndCapture");
    if (why.ok()) {
      // Node priorities: the comm stream's NCCL kernels keep their higher priority in the graph.
      why = cudaStatus(
          cudaGraphInstantiateWithFlags(&exec_, graph, cudaGraphInstantiateFlagUseNodePriority),
          "cudaGraphInstantiate");
      if (!why.ok()) exec_ = nullptr;
    }
    if (why.ok()) reportNodes(graph);
    if (graph) (void)cudaGraphDestroy(graph);  // the instantiated graph is a copy
    if (!why.ok()) {
      // The capture's errors are not sticky; they must not surface in the next launch check.
      (void)cudaGetLastError();
      return giveUp(why);
    }
    phase_ = Phase::kGraph;
    return launch();
  }

  Device& device_;
  const std::vector<BoundStep> steps_;
  const std::string function_;
  Phase phase_ = Phase::kWarmUp;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

bool cudaGraphsEnabled() { return runtimeOptions().cudaGraphs; }

BoundStep capturedSteps(Device& device, std::vector<BoundStep> steps, std::string function) {
  // Shared: a BoundStep is copyable, the graph is owned once.
  auto captured = std::make_shared<Captured>(device, std::move(steps), std::move(function));
  return [captured] { return captured->run(); };
}

}  // namespace dtc::cuda
