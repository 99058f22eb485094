// dtrun's flags (train/train_flags.def): the options a run takes, grouped by concern, and what
// is generated from their declarations: parsing with ranges, choices and the rules between
// flags, the usage, and the fields every rank of a job must have alike.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "comm/watchdog.h"
#include "support/args.h"
#include "support/status.h"
#include "train/run_agreement.h"

namespace dtc {

// A lower bound meaning "above zero" (the smallest positive double).
inline constexpr double kAboveZero = std::numeric_limits<double>::denorm_min();
// An upper bound of thread counts: a multiple of this machine's hardware threads (maxThreads()).
inline constexpr double kMachineThreads = -1;

#define DTRUN_TYPE_Path std::string
#define DTRUN_TYPE_Text std::string
#define DTRUN_TYPE_Int int64_t
#define DTRUN_TYPE_Real double
#define DTRUN_TYPE_Bytes uint64_t
#define DTRUN_TYPE_Seed std::optional<uint64_t>
#define DTRUN_TYPE_Switch bool
#define DTRUN_INITIAL_Path(v) v
#define DTRUN_INITIAL_Text(v) v
#define DTRUN_INITIAL_Int(v) v
#define DTRUN_INITIAL_Real(v) v
#define DTRUN_INITIAL_Bytes(v) v
#define DTRUN_INITIAL_Seed(v) std::nullopt
#define DTRUN_INITIAL_Switch(v) v

struct TrainOptions {
#define DTRUN_GROUP_BEGIN(member, Type, help) struct Type {
#define DTRUN_FLAG(Kind, field, flag, value, initial, min, max, agree, help) \
  DTRUN_TYPE_##Kind field = DTRUN_INITIAL_##Kind(initial);
#define DTRUN_GROUP_END(member) \
  }                             \
  member;
#include "train/train_flags.def"
};

// dtrun's command line from argv[first] on, read into `options`: each value parsed and in its
// range, a choice among its choices, and the rules between flags held; otherwise a one-line
// error naming the flag. `positionals` gets what is not a flag (the plan).
Status parseTrainFlags(int argc, char** argv, int first, TrainOptions& options,
                       std::vector<std::string>& positionals);

// `--flag`'s integer (`fallback` when it is not given), checked against its declared range: for
// the other commands that share a flag (dtrun --calibrate's --threads).
StatusOr<int64_t> integerFlag(const Args& args, const std::string& flag, int64_t fallback);

// The most threads a process may ask for: a multiple of this machine's hardware threads (more
// only make every kernel's threads wait for one another, and thousands exhaust the process).
int64_t maxThreads();

// dtrun's synopsis: `dtrun PLAN` and every flag with its value, in lines of at most `width`
// columns after the first's `column`, the others indented by `indent`.
std::string trainSynopsis(size_t width, size_t indent, size_t column);
// Every flag by group, each with its value, what it does and its default.
std::string trainFlagsHelp();

// The flags every rank of a job must have alike, as each rank has them (the Agree column).
std::vector<RunField> agreedFlags(const TrainOptions& options);

}  // namespace dtc
