// Command-line flags for the tools: `--name value`, `--name=value`, boolean `--name`, and
// positionals. Unknown flags and malformed numbers are errors, reported as one line.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc {

class Args {
 public:
  // `valued` lists flags that take a value, `switches` those that do not; a flag given twice
  // is an error unless it is `repeatable` (then all() has every value).
  static StatusOr<Args> parse(int argc, char** argv, int first, const std::set<std::string>& valued,
                              const std::set<std::string>& switches,
                              const std::set<std::string>& repeatable = {});

  const std::vector<std::string>& positionals() const { return positionals_; }
  bool has(const std::string& flag) const { return values_.count(flag) != 0; }
  // The value given (the last one of a repeatable flag), or `fallback`.
  std::string str(const std::string& flag, const std::string& fallback = "") const;
  // Every value given, in order.
  std::vector<std::string> all(const std::string& flag) const {
    auto it = repeated_.find(flag);
    return it == repeated_.end() ? std::vector<std::string>() : it->second;
  }
  StatusOr<int64_t> integer(const std::string& flag, int64_t fallback) const;
  StatusOr<double> number(const std::string& flag, double fallback) const;
  // A size in bytes as Hugging Face writes one: "5GB" (10^9), "40KB", "2GiB" (2^30), "4096";
  // it must be positive.
  StatusOr<uint64_t> byteSize(const std::string& flag, uint64_t fallback) const;
  // A comma-separated list of integers ("256,128").
  StatusOr<std::vector<int64_t>> integers(const std::string& flag,
                                          std::vector<int64_t> fallback) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> repeated_;
  std::vector<std::string> positionals_;
};

}  // namespace dtc
