// dtc compile's options by group, as driver/PipelineOptions.def declares them.
#include <cstdio>
#include <string>

#include "planner/CompileRequest.h"

namespace dtc {

namespace {

std::string shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
std::string shown(int64_t v) { return std::to_string(v); }
std::string shown(const std::string& v) { return v; }
std::string shown(bool) { return ""; }

// "--zero 0|1|2|3", "--recompute none|full|selective|auto", "--lr F".
std::string flagValues(const char* name, llvm::StringRef kind) {
  if (const OptionChoices* choices = pipelineOptionChoices(name)) {
    std::string out = choices->values;  // already "a|b|c"
    if (llvm::StringRef extra = resolvedByDriver(name); !extra.empty()) out += "|" + extra.str();
    return out;
  }
  if (const OptionRange* range = pipelineOptionRange(name);
      range && range->integer && range->max - range->min <= 4) {
    std::string out;
    for (double v = range->min; v <= range->max; ++v) out += (out.empty() ? "" : "|") + shown(v);
    return out;
  }
  return kind == "Real" ? "F" : kind == "Int" ? "N" : "VALUE";
}

}  // namespace

std::string compileOptionsHelp() {
  std::string out = "Options by group (default):\n";
  const CompileOptions defaults;
  const char* group = "";  // the group's title until its first flag prints it
  auto line = [&](const char* flag, const char* name, const char* kind, const char* help,
                  const std::string& initial) {
    if (!*flag) return;
    if (*group) out += std::string("  ") + group + ":\n";
    group = "";
    constexpr size_t kColumn = 36;
    std::string head = std::string("    --") + flag + " " + flagValues(name, kind);
    head = head.size() < kColumn ? head + std::string(kColumn - head.size(), ' ')
                                 : head + "\n" + std::string(kColumn, ' ');
    out += head + help + (initial.empty() ? "" : " (" + initial + ")") + "\n";
  };
#define DTC_GROUP_BEGIN(member, Type, help) group = help;
#define DTC_OPTION(Kind, field, name, flag, initial, min, max, help) \
  line(flag, name, #Kind, help, shown(defaults.DTC_GROUP.field));
#include "driver/PipelineOptions.def"
  return out;
}

}  // namespace dtc
