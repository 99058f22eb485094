// What a device and its links can do, for predicting a plan's step time: GEMM throughput by
// element type and problem size, memory bandwidth, the fixed cost of one kernel, and the
// latency and bandwidth of the links inside a node and between nodes. Profiles are JSON files
// (format "dtc-device-profile", version 1): shipped ones built from published specifications
// (profiles/*.json, compiled in by name) or one `dtrun --calibrate` measured.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/json.h"
#include "support/dtype.h"
#include "support/status.h"

namespace dtc::perf {

// A link's alpha-beta model: a message of b bytes takes latency + b / bytesPerSecond.
struct Link {
  double latencySeconds = 0;
  double bytesPerSecond = 0;  // what an all-reduce's ring achieves per byte sent
  // Measured apart where a library runs them slower than the all-reduce's ring (MPI's
  // reduce-scatter on shared memory); 0: as bytesPerSecond.
  double reduceScatterBytesPerSecond = 0, allGatherBytesPerSecond = 0;
};

struct DeviceProfile {
  std::string name;
  std::string source;  // where the numbers come from (datasheets, a measurement)
  // "datasheet" (published peaks, assumed efficiencies) or "measured" (dtrun --calibrate); empty
  // where a profile does not say.
  std::string basis;
  std::string device;  // the backend it describes: "cpu" or "cuda"
  // Sustained GEMM FLOP/s by element type at increasing FLOPs per call, as (flops, flop/s)
  // points: throughput between them is interpolated in log(flops), and held beyond the ends.
  std::vector<std::pair<DType, std::vector<std::pair<double, double>>>> gemm;
  // Causal attention's FLOP/s forward and backward by element type, as GEMM's (FLOPs as the
  // prediction counts them); empty where not measured: attention then runs at the GEMM rate.
  std::vector<std::pair<DType, std::vector<std::pair<double, double>>>> attention, attentionGrad;
  // The curves above are measured at head dimension 64; attention's rate at another head
  // dimension is that times a factor, as (head dimension, factor) points by element type
  // (interpolated in log(d), held beyond the ends): a CPU's kernel pays an exp and a loop per
  // score, which a small head dimension does not amortise. Empty: 1 everywhere.
  std::vector<std::pair<DType, std::vector<std::pair<double, double>>>> attentionHeadDim,
      attentionGradHeadDim;
  // The same for attention on the fused projection (causal_attention_qkv and its gradient), which
  // a backend may run on other kernels (cuDNN's, on CUDA, which also runs 16-bit causal_attention
  // over whole sequences and is priced so); empty: as `attention`.
  std::vector<std::pair<DType, std::vector<std::pair<double, double>>>> qkvAttention,
      qkvAttentionGrad;
  // The published peak FLOP/s by element type (a datasheet's dense tensor-core figure), which
  // model FLOPs utilisation is reckoned against as papers reckon it; where a type has none, the
  // curve's highest point (what a measured profile's device reached) stands for it.
  std::vector<std::pair<DType, double>> peak;
  double memoryBytesPerSecond = 0;  // sustained, for element-wise and other memory-bound kernels
  double kernelSeconds = 0;         // the fixed cost of one kernel call (launch, dispatch)
  // Kernels whose arithmetic, not their bytes, can bound them (a CPU's erf, exp, softmax rows):
  // seconds per element of their largest operand, by kernel name. A kernel takes the longer
  // of that and its bytes over the memory bandwidth.
  std::vector<std::pair<std::string, double>> elementSeconds;
  Link intraNode, interNode;
  int devicesPerNode = 1;
  uint64_t deviceMemoryBytes = 0;  // what one device holds (0: not stated)

  // FLOP/s of a GEMM of `flops` in `dtype` (the closest type measured when it is absent).
  double gemmFlopsPerSecond(DType dtype, double flops) const;
  // The peak: the published one for `dtype`, else the highest throughput listed for it.
  double peakFlopsPerSecond(DType dtype) const;
  // FLOP/s of causal attention (its backward when `grad`) of `flops` in `dtype` at head dimension
  // `headDim`; 0 when the profile has no attention curve for that type.
  double attentionFlopsPerSecond(bool grad, DType dtype, double flops, double headDim = 64) const;
  // The same for attention on the fused projection: its own curve, else attention's.
  double qkvAttentionFlopsPerSecond(bool grad, DType dtype, double flops,
                                    double headDim = 64) const;
  // Seconds per element of the kernel named `kernel` (0: not listed).
  double secondsPerElement(const std::string& kernel) const;
  // The same for operands of `dtype`: the entry "kernel@bf16" (16-bit types), else "kernel".
  double secondsPerElement(const std::string& kernel, DType dtype) const;

  // " (datasheet: ...)" for a datasheet profile, to follow its name where a prediction is told;
  // empty otherwise.
  std::string basisNote() const;

  io::Json toJson() const;
  static StatusOr<DeviceProfile> fromJson(const io::Json& json, const std::string& origin);
};

// A measured throughput curve as the model takes it: throughput never falls with size, so a
// point below an earlier one (noise) is raised to it.
void keepNonDecreasing(std::vector<std::pair<double, double>>& curve);
// Rates measured by head dimension, as (head dimension, flop/s) points, made the factors the
// attention curves (measured at head dimension 64) are scaled by: each rate over the rate at 64.
// False, the points untouched, when 64 is not among them.
bool relativeToHeadDim64(std::vector<std::pair<double, double>>& points);

// A shipped profile by name ("a100-80g", "h100-80g", "cpu"), or a JSON file's path.
StatusOr<DeviceProfile> loadProfile(const std::string& nameOrPath);
// The names of the shipped profiles.
std::vector<std::string> shippedProfiles();

}  // namespace dtc::perf
