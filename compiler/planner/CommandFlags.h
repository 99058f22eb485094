// A planning command's own flags picked out of a command line whose other flags are
// `dtc compile`'s: `dtc explore` prices candidates from the rest, and `dtc compile --mesh auto`
// explores with it. One parser, so both read `--flag value` and `--flag=value` alike.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc {

struct CommandFlags {
  std::map<std::string, std::vector<std::string>> values;  // a valued flag's values, in order
  std::set<std::string> switches;                          // the switches given
  std::vector<std::string> rest;                           // everything else, in order

  bool has(const std::string& flag) const { return values.count(flag) || switches.count(flag); }
  // The flag's last value, or `fallback` where it is not given.
  std::string value(const std::string& flag, const std::string& fallback = "") const;
};

// Splits `args` into the flags of `valued` (each taking a value) and `switches`, and the rest.
// A valued flag without its value is an error naming `command`.
StatusOr<CommandFlags> takeCommandFlags(const std::vector<std::string>& args,
                                        const std::set<std::string>& valued,
                                        const std::set<std::string>& switches,
                                        const std::string& command);

}  // namespace dtc
