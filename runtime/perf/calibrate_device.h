// The compute half of `dtrun --calibrate --device cuda`: a device measured through its backend
// with dtrun's own kernels (perf/kernel_bench.h) — GEMM throughput over sizes per element type,
// causal attention's throughput forward and backward, memory bandwidth, a kernel call's cost,
// and the per-element cost of the kernels whose time is not their bytes over the bandwidth.
#pragma once

#include <string>
#include <vector>

#include "exec/backend.h"
#include "perf/device_profile.h"
#include "support/thread_pool.h"

namespace dtc::perf {

// Fills `p`'s compute numbers for `backend`; kernels the backend refuses are left out (the
// prediction then prices them by their bytes) and named in `skipped`.
Status measureDevice(Backend& backend, ThreadPool& pool, DeviceProfile& p,
                     std::vector<std::string>& skipped);

}  // namespace dtc::perf
