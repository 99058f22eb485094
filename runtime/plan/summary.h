// Human and JSON summaries of a plan (`dtc inspect`).
#pragma once

#include <string>

#include "plan/plan.h"

namespace dtc {

std::string summarizePlanText(const Plan& plan);
// One JSON object; stable keys so tests can FileCheck it.
std::string summarizePlanJson(const Plan& plan);

}  // namespace dtc
