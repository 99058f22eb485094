// dtrun's numeric flags: the range each accepts, in one table, so that a value outside it is a
// one-line error naming the flag, the range and the value, whichever code path reads it.
#pragma once

#include <cstdint>
#include <string>

#include "support/args.h"
#include "support/status.h"

namespace dtc::dtrun {

// `--flag`'s integer (`fallback` when it is not given), checked against its rule.
StatusOr<int64_t> integerFlag(const Args& args, const std::string& flag, int64_t fallback);
// `--flag`'s number (`fallback` when it is not given), checked against its rule.
StatusOr<double> numberFlag(const Args& args, const std::string& flag, double fallback);

// The most threads a process may ask for: a multiple of this machine's hardware threads (more
// only make every kernel's threads wait for one another, and thousands exhaust the process).
int64_t maxThreads();

}  // namespace dtc::dtrun
