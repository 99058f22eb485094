// Version of the plan format (runtime/schema/plan.fbs) this build writes and reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace dtc {

// Bumped when a change would make an old runtime misread a new plan.
inline constexpr uint32_t kPlanVersion = 5;

// A plan file is the FlatBuffer followed by this footer, little-endian: "DTCS", the CRC-32
// (zlib's) of the FlatBuffer, and the FlatBuffer's length as a u64. A flipped bit anywhere is
// caught at load, where FlatBuffers' verifier only checks structure.
inline constexpr char kPlanFooterMagic[4] = {'D', 'T', 'C', 'S'};
inline constexpr size_t kPlanFooterBytes = 16;

// Appends the footer to a finished FlatBuffer; `crc` is the CRC-32 of `bytes` (the writer and
// the reader each compute it with their own library).
inline void appendPlanFooter(std::vector<uint8_t>& bytes, uint32_t crc) {
  const uint64_t length = bytes.size();
  bytes.insert(bytes.end(), kPlanFooterMagic, kPlanFooterMagic + 4);
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(crc >> (8 * i)));
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(length >> (8 * i)));
}

// The footer at the end of a plan file's bytes, if they end with one.
struct PlanFooter {
  uint32_t crc = 0;
  uint64_t length = 0;  // of the FlatBuffer before it
};
inline bool readPlanFooter(const std::vector<uint8_t>& bytes, PlanFooter& out) {
  if (bytes.size() < kPlanFooterBytes) return false;
  const uint8_t* footer = bytes.data() + bytes.size() - kPlanFooterBytes;
  if (std::memcmp(footer, kPlanFooterMagic, 4) != 0) return false;
  out = PlanFooter{};
  for (int i = 3; i >= 0; --i) out.crc = out.crc << 8 | footer[4 + i];
  for (int i = 7; i >= 0; --i) out.length = out.length << 8 | footer[8 + i];
  return true;
}

}  // namespace dtc
