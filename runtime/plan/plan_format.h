// Version of the plan format (runtime/schema/plan.fbs) this build writes and reads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtc {

// Bumped when a change would make an old runtime misread a new plan.
inline constexpr uint32_t kPlanVersion = 3;

// A plan file is the FlatBuffer followed by this footer, little-endian: "DTCS", the CRC-32
// (zlib's) of the FlatBuffer, and the FlatBuffer's length as a u64. A flipped bit anywhere is
// caught at load, where FlatBuffers' verifier only checks structure.
inline constexpr char kPlanFooterMagic[4] = {'D', 'T', 'C', 'S'};
inline constexpr size_t kPlanFooterBytes = 16;

}  // namespace dtc
