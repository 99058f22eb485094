#include "support/args.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace dtc {

StatusOr<Args> Args::parse(int argc, char** argv, int first, const std::set<std::string>& valued,
                           const std::set<std::string>& switches,
                           const std::set<std::string>& repeatable) {
  Args args;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-o") arg = "--output";  // the one short flag, as compilers spell it
    bool isFlag = arg.size() > 2 && arg.compare(0, 2, "--") == 0;
    if (!isFlag) {
      if (arg.size() > 1 && arg[0] == '-') return Status::InvalidInput("unknown option " + arg);
      args.positionals_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool inlineValue = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inlineValue = true;
    }
    // A second value would silently replace the first (a typo in a long command line).
    if ((switches.count(name) || valued.count(name)) && args.values_.count(name) &&
        !repeatable.count(name))
      return Status::InvalidInput("option --" + name + " is given twice");
    if (switches.count(name)) {
      if (inlineValue) return Status::InvalidInput("option --" + name + " takes no value");
      args.values_[name] = "1";
    } else if (valued.count(name)) {
      if (!inlineValue) {
        if (i + 1 >= argc) return Status::InvalidInput("option --" + name + " needs a value");
        value = argv[++i];
      }
      args.values_[name] = value;
      args.repeated_[name].push_back(value);
    } else {
      return Status::InvalidInput("unknown option --" + name);
    }
  }
  return args;
}

std::string Args::str(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second;
}

StatusOr<int64_t> Args::integer(const std::string& flag, int64_t fallback) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (errno || end == it->second.c_str() || *end)
    return Status::InvalidInput("--" + flag + " expects an integer, got '" + it->second + "'");
  return static_cast<int64_t>(v);
}

StatusOr<double> Args::number(const std::string& flag, double fallback) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (errno || end == it->second.c_str() || *end)
    return Status::InvalidInput("--" + flag + " expects a number, got '" + it->second + "'");
  return v;
}

StatusOr<uint64_t> Args::byteSize(const std::string& flag, uint64_t fallback) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"B", 1},
                                                          {"KB", 1e3},
                                                          {"MB", 1e6},
                                                          {"GB", 1e9},
                                                          {"TB", 1e12},
                                                          {"KiB", 1024.0},
                                                          {"MiB", 1048576.0},
                                                          {"GiB", 1073741824.0},
                                                          {"TiB", 1099511627776.0}};
  const std::string& text = it->second;
  errno = 0;
  char* end = nullptr;
  const double count = std::strtod(text.c_str(), &end);
  const bool parsed =
      !errno && end != text.c_str() && std::isdigit(static_cast<unsigned char>(text[0]));
  for (const auto& [unit, scale] : kUnits) {
    if (!parsed || std::string(end) != unit) continue;
    const double bytes = count * scale;
    if (bytes >= 1 && bytes < 1.8e19) return static_cast<uint64_t>(bytes);
  }
  return Status::InvalidInput(
      "--" + flag + " expects a positive size such as 5GB, 500MB or 2GiB, got '" + text + "'");
}

StatusOr<std::vector<int64_t>> Args::integers(const std::string& flag,
                                              std::vector<int64_t> fallback) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  std::vector<int64_t> out;
  const std::string& s = it->second;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string part =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || errno || *end)
      return Status::InvalidInput("--" + flag + " expects comma-separated integers, got '" + s +
                                  "'");
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace dtc
