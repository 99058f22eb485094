// `dtrun --calibrate`: measures the machine it runs on as a device profile (perf/device_profile.h)
// — the CPU backend's GEMM throughput over problem sizes, its memory bandwidth and the fixed cost
// of a kernel call, and, when a launcher started several processes, the latency and bandwidth of
// the links between them (inside this node and, where ranks sit on other nodes, between nodes).
// Every rank computes at once, as in a job, so the numbers include their contention.
#pragma once

#include <string>

#include "comm/communicator.h"
#include "exec/backend.h"
#include "perf/device_profile.h"

namespace dtc::perf {

struct CalibrateOptions {
  int threads = 1;   // the CPU backend's threads per process, as dtrun --threads
  std::string name;  // the profile's name
  // A device backend to measure through its own kernels (perf/calibrate_device.h); null: the
  // CPU backend's kernels, called directly.
  Backend* device = nullptr;
};

// Rank 0's profile (every rank must call it: the link measurements are collective).
StatusOr<DeviceProfile> calibrate(comm::Communicator& comm, const CalibrateOptions& options);

}  // namespace dtc::perf
