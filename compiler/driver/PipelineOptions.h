// The ranges of the training pipeline's numeric options and the values of its enumerated ones
// (driver/PipelineOptions.def), for the one check every path runs: the command line's flags, and
// the pipeline dtc-opt parses.
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
  // As a message completes "--zero must be " for `value`: "0, 1, 2 or 3", ">= 1", ">= 0",
  // "> 0", or "<= MAX" for a value above a range that is not a short list.
  std::string text(double value) const;
};

// The range of numeric pipeline option `name`, or null (not numeric, or unbounded).
const OptionRange* pipelineOptionRange(llvm::StringRef name);

struct OptionChoices {
  const char* name;    // the pipeline option's name
  const char* values;  // "a|b|c"
  bool list;           // a comma-separated list of them
  bool allows(llvm::StringRef value) const;
  // As a message completes "--precision must be ": "fp32, bf16 or fp16", with `extra` (a value
  // the command line resolves before the pipeline sees it) last.
  std::string text(llvm::StringRef extra = "") const;
};

// The values enumerated pipeline option `name` takes, or null (any string).
const OptionChoices* pipelineOptionChoices(llvm::StringRef name);

}  // namespace dtc
