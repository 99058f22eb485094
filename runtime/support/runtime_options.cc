#include "support/runtime_options.h"

#include <cstdlib>
#include <utility>
#include <vector>

namespace dtc {
namespace {

// Each enum's values as the switches spell them (DTC_CHOICE).
struct Choices {
#define DTC_SWITCH_ENUM(Enum, ...) std::vector<std::pair<const char*, RuntimeOptions::Enum>> Enum;
#include "support/runtime_options.def"
};

const Choices& choices() {
  static const Choices all = [] {
    Choices c;
#define DTC_CHOICE(Enum, value, text) c.Enum.push_back({text, RuntimeOptions::Enum::value});
#include "support/runtime_options.def"
    return c;
  }();
  return all;
}

template <typename Enum>
std::string spelled(const std::vector<std::pair<const char*, Enum>>& values) {
  std::string text;
  for (const auto& v : values) text += (text.empty() ? "" : "|") + std::string(v.first);
  return text;
}

struct Switch {
  const char* name;
  std::string values;
  const char* help;
};

// The switches as runtime_options.def declares them, for the help and the messages.
const std::vector<Switch>& switches() {
  static const std::vector<Switch> all = [] {
    std::vector<Switch> out;
#define DTC_SWITCH_TEXT(field, name, value, help) out.push_back({name, value, help});
#define DTC_SWITCH_FLAG(field, name, initial, help) out.push_back({name, "0|1", help});
#define DTC_SWITCH_CHOICE(field, Enum, name, initial, help) \
  out.push_back({name, spelled(choices().Enum), help});
#define DTC_SWITCH_FAULT(name, value, help) out.push_back({name, value, help});
#include "support/runtime_options.def"
    return out;
  }();
  return all;
}

Status malformed(const char* name, const std::string& value) {
  for (const Switch& s : switches())
    if (std::string(s.name) == name)
      return Status::InvalidInput(std::string(name) + " is '" + value + "': expected " + s.values);
  return Status::Internal(std::string("undeclared switch ") + name);
}

Status parseFlag(const char* name, const char* value, bool& flag) {
  if (!value || !*value) return Status::Ok();
  const std::string text = value;
  if (text != "0" && text != "1") return malformed(name, text);
  flag = text == "1";
  return Status::Ok();
}

template <typename Enum>
Status parseChoice(const char* name, const char* value,
                   const std::vector<std::pair<const char*, Enum>>& choices, Enum& out) {
  if (!value || !*value) return Status::Ok();
  for (const auto& [text, choice] : choices)
    if (std::string(value) == text) {
      out = choice;
      return Status::Ok();
    }
  return malformed(name, value);
}

Status parseFault(const char* value, RuntimeOptions& o) {
  if (!value || !*value) return Status::Ok();
  std::string spec = value;
  auto endsWith = [&](const std::string& action) {
    if (spec.size() <= action.size() ||
        spec.compare(spec.size() - action.size(), action.size(), action) != 0)
      return false;
    spec.resize(spec.size() - action.size());
    return true;
  };
  if (endsWith(":throw"))
    o.faultThrows = true;
  else if (endsWith(":pause"))
    o.faultPauses = true;
  auto number = [&](size_t at, long& out) {
    char* end = nullptr;
    out = std::strtol(spec.c_str() + at + 1, &end, 10);
    return end != spec.c_str() + at + 1 && *end == '\0';
  };
  if (size_t hash = spec.find('#'); hash != std::string::npos) {
    if (!number(hash, o.faultWhen) || o.faultWhen < 1) return malformed("DTC_FAULT", value);
    spec.resize(hash);
  }
  if (size_t at = spec.find('@'); at != std::string::npos) {
    long rank = 0;
    if (!number(at, rank) || rank < 0) return malformed("DTC_FAULT", value);
    o.faultRank = static_cast<int>(rank);
    spec.resize(at);
  }
  if (spec.empty()) return malformed("DTC_FAULT", value);
  o.faultPoint = spec;
  return Status::Ok();
}

}  // namespace

StatusOr<RuntimeOptions> parseRuntimeOptions(
    const std::function<const char*(const char*)>& lookup) {
  RuntimeOptions o;
  auto text = [&](const char* name) -> std::string {
    const char* value = lookup(name);
    return value ? value : "";
  };
#define DTC_SWITCH_TEXT(field, name, value, help) o.field = text(name);
#define DTC_SWITCH_FLAG(field, name, initial, help) \
  DTC_RETURN_IF_ERROR(parseFlag(name, lookup(name), o.field));
#define DTC_SWITCH_CHOICE(field, Enum, name, initial, help) \
  DTC_RETURN_IF_ERROR(parseChoice(name, lookup(name), choices().Enum, o.field));
#include "support/runtime_options.def"
  DTC_RETURN_IF_ERROR(parseFault(lookup("DTC_FAULT"), o));
  return o;
}

namespace {

StatusOr<RuntimeOptions> fromEnvironment() {
  return parseRuntimeOptions([](const char* name) { return std::getenv(name); });
}

StatusOr<RuntimeOptions>& parsedOptions() {
  static StatusOr<RuntimeOptions> options = fromEnvironment();
  return options;
}

}  // namespace

const StatusOr<RuntimeOptions>& runtimeOptionsStatus() { return parsedOptions(); }

void reloadRuntimeOptions() { parsedOptions() = fromEnvironment(); }

const RuntimeOptions& runtimeOptions() {
  static const RuntimeOptions defaults;
  const StatusOr<RuntimeOptions>& parsed = runtimeOptionsStatus();
  return parsed.ok() ? *parsed : defaults;
}

std::string runtimeOptionsHelp() {
  std::string help;
  for (const Switch& s : switches())
    help += "  " + std::string(s.name) + "=" + s.values + "  " + s.help + "\n";
  return help;
}

}  // namespace dtc
