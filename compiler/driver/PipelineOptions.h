// The ranges of the training pipeline's numeric options (driver/PipelineOptions.def), for the
// one check every path runs: the command line's flags, and the pipeline dtc-opt parses.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "llvm/ADT/StringRef.h"

namespace dtc {

// A lower bound meaning "above zero" (the smallest positive double).
inline constexpr double kAboveZero = std::numeric_limits<double>::denorm_min();

struct OptionRange {
  const char* name;  // the pipeline option's name
  double min, max;
  bool integer;
  bool contains(double value) const { return value >= min && value <= max; }
  // As a message completes "--zero must be ": "0, 1, 2 or 3", ">= 1", ">= 0", "> 0".
  std::string text() const;
};

// The range of numeric pipeline option `name`, or null (not numeric, or unbounded).
const OptionRange* pipelineOptionRange(llvm::StringRef name);

}  // namespace dtc
