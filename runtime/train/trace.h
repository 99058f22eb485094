// The measured timeline of a run as Chrome trace JSON (chrome://tracing, Perfetto): one row per
// rank, one box per kernel call (collectives included), gathered to rank 0.
#pragma once

#include <string>

#include "comm/device_mesh.h"
#include "exec/executor.h"

namespace dtc {

// Collective over the whole job: every rank passes its executor's timings; rank 0 writes `path`
// (to a temporary name, then renamed).
Status writeTrace(const Executor& ex, comm::DeviceMesh& mesh, const std::string& path);

}  // namespace dtc
