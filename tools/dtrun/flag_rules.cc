#include "flag_rules.h"

#include <cmath>
#include <cstdio>
#include <thread>

namespace dtc::dtrun {
namespace {

struct Range {
  const char* flag;
  double min, max;
  bool minOpen = false;  // the minimum itself is outside (a timeout of 0 seconds)
};

constexpr double kMaxCount = 1e15;  // steps, samples, seeds within any run's reach

// Every numeric flag of dtrun. --threads' maximum depends on the machine (maxThreads()).
const Range kRanges[] = {
    {"steps", 0, kMaxCount},
    {"seed", 0, 9.2e18},
    {"threads", 1, 0},
    {"sample", 0, 1e9},
    {"checkpoint-every", 0, kMaxCount},
    {"keep", 0, 1e6},
    {"eval-every", 0, kMaxCount},
    {"eval-batches", 0, kMaxCount},
    {"top-k", 0, 1e9},
    {"max-skipped-steps", 1, 1e9},
    {"temperature", 0, 1e6},
    {"collective-timeout", 0, 1e7, true},
};

const Range* rangeOf(const std::string& flag) {
  for (const Range& r : kRanges)
    if (flag == r.flag) return &r;
  return nullptr;
}

std::string text(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

Status check(const std::string& flag, double value, const std::string& given) {
  const Range* r = rangeOf(flag);
  if (!r) return Status::Internal("dtrun: --" + flag + " has no range");
  const double max = flag == "threads" ? static_cast<double>(maxThreads()) : r->max;
  const bool above = r->minOpen ? value > r->min : value >= r->min;
  if (above && value <= max && std::isfinite(value)) return Status::Ok();
  std::string why = flag == "threads" ? " (" + std::to_string(std::thread::hardware_concurrency()) +
                                            " hardware threads here)"
                                      : "";
  return Status::InvalidInput("--" + flag + " must be in " + (r->minOpen ? "(" : "[") +
                              text(r->min) + ", " + text(max) + "]" + why + ", got " + given);
}

}  // namespace

int64_t maxThreads() {
  return 8 * static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
}

StatusOr<int64_t> integerFlag(const Args& args, const std::string& flag, int64_t fallback) {
  DTC_ASSIGN_OR_RETURN(int64_t value, args.integer(flag, fallback));
  if (args.has(flag)) DTC_RETURN_IF_ERROR(check(flag, static_cast<double>(value), args.str(flag)));
  return value;
}

StatusOr<double> numberFlag(const Args& args, const std::string& flag, double fallback) {
  DTC_ASSIGN_OR_RETURN(double value, args.number(flag, fallback));
  if (args.has(flag)) DTC_RETURN_IF_ERROR(check(flag, value, args.str(flag)));
  return value;
}

}  // namespace dtc::dtrun
