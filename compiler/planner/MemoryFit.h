// `dtc compile --memory GiB`: whether a plan fits a per-rank budget, and `--recompute auto`,
// which picks each pipeline stage's recomputation from what compiling each setting plans.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc {

class Plan;

// The bytes one rank holds, per pipeline stage (one entry, for every rank, without a pipeline).
std::vector<uint64_t> rankBytesByStage(const Plan& plan);

// The error for a plan over `budget` bytes per rank, or OK.
Status checkFits(const Plan& plan, uint64_t budget);

// Compiles with `--recompute` none, selective and full (`compile` returns the plan file's bytes)
// and keeps, per pipeline stage, the first setting under which its ranks fit `budget`: the
// cheapest in compute. Returns the setting to compile with (one, or one per stage joined by
// commas) and, in `report`, one line saying what each stage got and needs.
StatusOr<std::string> chooseRecompute(
    const std::function<StatusOr<std::vector<uint8_t>>(const std::string& mode)>& compile,
    uint64_t budget, std::string& report);

}  // namespace dtc
