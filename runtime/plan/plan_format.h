// Version of the plan format (runtime/schema/plan.fbs) this build writes and reads.
#pragma once

#include <cstdint>

namespace dtc {

// Bumped when a change would make an old runtime misread a new plan.
inline constexpr uint32_t kPlanVersion = 2;

}  // namespace dtc
