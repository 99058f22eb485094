// The runtime's switches, read once per process from DTC_* environment variables, as
// support/runtime_options.def declares them (dtrun --help lists them).
#pragma once

#include <functional>
#include <string>

#include "support/status.h"

namespace dtc {

struct RuntimeOptions {
#define DTC_SWITCH_ENUM(Enum, ...) enum class Enum { __VA_ARGS__ };
#include "support/runtime_options.def"
#define DTC_SWITCH_TEXT(field, name, value, help) std::string field;
#define DTC_SWITCH_FLAG(field, name, initial, help) bool field = initial;
#define DTC_SWITCH_CHOICE(field, Enum, name, initial, help) Enum field = Enum::initial;
#include "support/runtime_options.def"
  // DTC_FAULT: a fault point to die at (empty: none), on `faultRank` (-1: any) at its
  // `faultWhen`-th arrival.
  std::string faultPoint;
  int faultRank = -1;
  long faultWhen = 1;
  bool faultThrows = false;  // ":throw": an exception rather than SIGKILL
  bool faultPauses = false;  // ":pause": a second's sleep rather than SIGKILL
};

// Parses the switches from `lookup` (the environment's getenv; null: unset).
StatusOr<RuntimeOptions> parseRuntimeOptions(const std::function<const char*(const char*)>& lookup);

// The process's switches, parsed from the environment on first use. When a value is malformed,
// this is its error; the defaults apply until dtrun reports it.
const StatusOr<RuntimeOptions>& runtimeOptionsStatus();
const RuntimeOptions& runtimeOptions();
// Parses the environment again, for tests that change a switch between binds (what was bound
// keeps what it read). Not thread-safe: nothing may read the switches meanwhile.
void reloadRuntimeOptions();

// One line per switch: the variable, the values it takes and what it does.
std::string runtimeOptionsHelp();

}  // namespace dtc
