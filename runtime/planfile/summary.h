// Human and JSON summaries of a plan (`dtc inspect`).
#pragma once

#include <string>

#include "planfile/plan.h"

namespace dtc {

std::string summarizePlanText(const Plan& plan);
// The bytes one rank of pipeline stage `stage` (-1: a plan without a pipeline) holds for the
// plan: its state region and its largest arena.
uint64_t rankMemoryBytes(const Plan& plan, int stage);
// One JSON object; stable keys so tests can FileCheck it.
std::string summarizePlanJson(const Plan& plan);

}  // namespace dtc
