// Version of the model format (model.fbs) this build writes and reads.
#pragma once

#include <cstdint>

namespace dtc {

// Bumped when a change would make old readers misread new files.
inline constexpr uint32_t kModelVersion = 1;

}  // namespace dtc
