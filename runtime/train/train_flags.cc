#include "train/train_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string_view>
#include <thread>

#include "support/printable.h"

namespace dtc {
namespace {

enum class Kind { kPath, kText, kInt, kReal, kBytes, kSeed, kSwitch };
enum class Agree { kNo, kValue, kContent };

// One flag as train_flags.def declares it.
struct Flag {
  const char* name;
  const char* value;  // what the usage shows after it
  Kind kind;
  double min, max;
  Agree agree;
  const char* help;
  const char* group;    // its group's description
  std::string initial;  // the default as the usage shows it ("": none to show)
};

std::string number(double v) {
  char text[48];
  std::snprintf(text, sizeof text, "%.15g", v);
  return text;
}

// A default as the usage shows it ("": none to show).
template <Kind K, typename T>
std::string shown(T v) {
  if constexpr (K == Kind::kSeed || K == Kind::kSwitch) {
    return "";
  } else if constexpr (K == Kind::kPath || K == Kind::kText) {
    return v;
  } else if constexpr (K == Kind::kBytes) {
    const auto bytes = static_cast<uint64_t>(v);
    return bytes % 1'000'000'000 == 0 ? std::to_string(bytes / 1'000'000'000) + "GB"
                                      : std::to_string(bytes);
  } else {
    return v == 0 ? "" : number(static_cast<double>(v));  // a 0 says itself in the help
  }
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> all = [] {
    std::vector<Flag> out;
    const char* group = "";
#define DTRUN_GROUP_BEGIN(member, Type, help) group = help;
#define DTRUN_FLAG(K, field, flag, value, initial, min, max, agree, help)                     \
  out.push_back({flag, value, Kind::k##K, static_cast<double>(min), static_cast<double>(max), \
                 Agree::k##agree, help, group, shown<Kind::k##K>(initial)});
#include "train/train_flags.def"
    return out;
  }();
  return all;
}

const Flag& flagNamed(std::string_view name) {
  for (const Flag& f : flags())
    if (name == f.name) return f;
  // Only the .def's own names reach here: a typo in it fails every test that parses flags.
  static const Flag none{"", "", Kind::kText, 0, 0, Agree::kNo, "", "", ""};
  return none;
}

Status checkRange(const Flag& f, double value, const std::string& given) {
  const double max = f.max == kMachineThreads ? static_cast<double>(maxThreads()) : f.max;
  const bool open = f.min == kAboveZero;
  const double min = open ? 0 : f.min;
  const bool above = open ? value > min : value >= min;
  if (above && value <= max && std::isfinite(value)) return Status::Ok();
  const std::string why =
      f.max == kMachineThreads
          ? " (" + std::to_string(std::thread::hardware_concurrency()) + " hardware threads here)"
          : "";
  return Status::InvalidInput("--" + std::string(f.name) + " must be in " + (open ? "(" : "[") +
                              number(min) + ", " + number(max) + "]" + why + ", got " + given);
}

// Reads one flag into its field, by the field's type.
Status read(const Args& args, const Flag& f, std::string& field) {
  if (!args.has(f.name)) return Status::Ok();
  field = args.str(f.name);
  if (f.kind == Kind::kPath && field.empty())
    return Status::InvalidInput("--" + std::string(f.name) + " needs a path");
  return Status::Ok();
}
Status read(const Args& args, const Flag& f, int64_t& field) {
  DTC_ASSIGN_OR_RETURN(field, args.integer(f.name, field));
  if (args.has(f.name))
    DTC_RETURN_IF_ERROR(checkRange(f, static_cast<double>(field), args.str(f.name)));
  return Status::Ok();
}
Status read(const Args& args, const Flag& f, double& field) {
  DTC_ASSIGN_OR_RETURN(field, args.number(f.name, field));
  if (args.has(f.name)) DTC_RETURN_IF_ERROR(checkRange(f, field, args.str(f.name)));
  return Status::Ok();
}
Status read(const Args& args, const Flag& f, uint64_t& field) {
  DTC_ASSIGN_OR_RETURN(field, args.byteSize(f.name, field));
  return Status::Ok();
}
Status read(const Args& args, const Flag& f, std::optional<uint64_t>& field) {
  if (!args.has(f.name)) return Status::Ok();
  int64_t value = 0;
  DTC_RETURN_IF_ERROR(read(args, f, value));
  field = static_cast<uint64_t>(value);
  return Status::Ok();
}
Status read(const Args& args, const Flag& f, bool& field) {
  field = args.has(f.name);
  return Status::Ok();
}

// Whether a field holds something: a path or text, a number other than 0, a switch that is on.
bool holds(const std::string& v) { return !v.empty(); }
bool holds(int64_t v) { return v != 0; }
bool holds(double v) { return v != 0; }
bool holds(uint64_t v) { return v != 0; }
bool holds(const std::optional<uint64_t>& v) { return v.has_value(); }
bool holds(bool v) { return v; }

// Whether `flag` is set: given, and holding something (train_flags.def's DTRUN_NEEDS).
bool isSet(const TrainOptions& o, const Args& args, std::string_view flag) {
#define DTRUN_GROUP_BEGIN(member, Type, help) \
  {                                           \
    const auto& group = o.member;
#define DTRUN_FLAG(K, field, name, value, initial, min, max, agree, help) \
  if (flag == name) return args.has(name) && holds(group.field);
#define DTRUN_GROUP_END(member) }
#include "train/train_flags.def"
  return false;
}

// Whether one of `others` ("a|b") is set.
bool anySet(const TrainOptions& o, const Args& args, std::string_view others) {
  for (const std::string& flag : splitAlternatives(others))
    if (isSet(o, args, flag)) return true;
  return false;
}

// A text field's value, for its choices (no other field has any).
std::string text(const std::string& v) { return v; }
template <typename T>
std::string text(const T&) {
  return "";
}

Status checkChoices(const TrainOptions& o, const Args& args) {
  auto value = [&](std::string_view flag) -> std::string {
#define DTRUN_GROUP_BEGIN(member, Type, help) \
  {                                           \
    const auto& group = o.member;
#define DTRUN_FLAG(K, field, name, value, initial, min, max, agree, help) \
  if (flag == name) return text(group.field);
#define DTRUN_GROUP_END(member) }
#include "train/train_flags.def"
    return "";
  };
  auto check = [&](const char* flag, std::string_view values) -> Status {
    if (!args.has(flag)) return Status::Ok();
    const std::string v = value(flag);
    const std::vector<std::string> choices = splitAlternatives(values);
    if (std::find(choices.begin(), choices.end(), v) != choices.end()) return Status::Ok();
    return Status::InvalidInput("--" + std::string(flag) + " must be " + alternatives(choices) +
                                ", got '" + v + "'");
  };
#define DTRUN_CHOICES(flag, values) DTC_RETURN_IF_ERROR(check(flag, values));
#include "train/train_flags.def"
  return Status::Ok();
}

Status checkRules(const TrainOptions& o, const Args& args) {
#define DTRUN_NEEDS(flag, other, message) \
  if (args.has(flag) && !anySet(o, args, other)) return Status::InvalidInput(message);
#define DTRUN_NEEDS_GIVEN(flag, other, unless, message)               \
  if (args.has(flag) && !args.has(other) && !anySet(o, args, unless)) \
    return Status::InvalidInput(message);
#define DTRUN_EXCLUDES(flag, other, message) \
  if (isSet(o, args, flag) && isSet(o, args, other)) return Status::InvalidInput(message);
#include "train/train_flags.def"
  return Status::Ok();
}

// Word-wraps `text` into lines of at most `width` columns, every line after the first indented
// by `indent` spaces.
std::string wrap(const std::string& text, size_t width, size_t indent, size_t column) {
  std::string out;
  size_t at = column;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find(' ', begin);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(begin, end - begin);
    if (at > indent && at + 1 + word.size() > width) {
      out += "\n" + std::string(indent, ' ');
      at = indent;
    } else if (at > column || (at == column && !out.empty())) {
      out += ' ';
      ++at;
    }
    out += word;
    at += word.size();
    begin = end + 1;
  }
  return out;
}

std::string agreedText(const std::string& v, Agree agree) {
  return agree == Agree::kContent && !v.empty() ? contentFingerprint(v) : v;
}
std::string agreedText(int64_t v, Agree) { return std::to_string(v); }
std::string agreedText(uint64_t v, Agree) { return std::to_string(v); }
std::string agreedText(double v, Agree) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}
std::string agreedText(bool v, Agree) { return v ? "on" : "off"; }
std::string agreedText(const std::optional<uint64_t>& v, Agree) {
  return v ? std::to_string(static_cast<int64_t>(*v)) : std::string("(not given)");
}

}  // namespace

int64_t maxThreads() {
  return 8 * static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
}

StatusOr<int64_t> integerFlag(const Args& args, const std::string& flag, int64_t fallback) {
  const Flag& f = flagNamed(flag);
  if (!*f.name) return Status::Internal("--" + flag + " is not one of dtrun's flags");
  int64_t value = fallback;
  DTC_RETURN_IF_ERROR(read(args, f, value));
  return value;
}

Status parseTrainFlags(int argc, char** argv, int first, TrainOptions& options,
                       std::vector<std::string>& positionals) {
  std::set<std::string> valued, switches;
  for (const Flag& f : flags()) (f.kind == Kind::kSwitch ? switches : valued).insert(f.name);
  DTC_ASSIGN_OR_RETURN(Args args, Args::parse(argc, argv, first, valued, switches));
  positionals = args.positionals();
#define DTRUN_GROUP_BEGIN(member, Type, help) \
  {                                           \
    auto& group = options.member;
#define DTRUN_FLAG(K, field, flag, value, initial, min, max, agree, help) \
  DTC_RETURN_IF_ERROR(read(args, flagNamed(flag), group.field));
#define DTRUN_GROUP_END(member) }
#include "train/train_flags.def"
  DTC_RETURN_IF_ERROR(checkChoices(options, args));
  return checkRules(options, args);
}

std::string trainSynopsis(size_t width, size_t indent, size_t column) {
  std::string text = "dtrun PLAN";
  size_t at = column + text.size();
  for (const Flag& f : flags()) {
    const std::string item =
        std::string("[--") + f.name + (*f.value ? std::string(" ") + f.value : "") + "]";
    if (at + 1 + item.size() > width) {
      text += "\n" + std::string(indent, ' ');
      at = indent;
    } else {
      text += ' ';
      ++at;
    }
    text += item;
    at += item.size();
  }
  return text;
}

std::string trainFlagsHelp() {
  constexpr size_t kWidth = 96, kColumn = 36;
  std::string out;
  const char* group = nullptr;
  for (const Flag& f : flags()) {
    if (group != f.group) {
      group = f.group;
      out += std::string("  ") + group + ":\n";
    }
    std::string head = std::string("    --") + f.name + (*f.value ? " " : "") + f.value;
    const std::string help = f.help + (f.initial.empty() ? "" : " (" + f.initial + ")");
    if (head.size() + 1 > kColumn) {
      out += head + "\n" + std::string(kColumn, ' ');
    } else {
      out += head + std::string(kColumn - head.size(), ' ');
    }
    out += wrap(help, kWidth, kColumn, kColumn) + "\n";
  }
  return out;
}

std::vector<RunField> agreedFlags(const TrainOptions& o) {
  std::vector<RunField> fields;
#define DTRUN_GROUP_BEGIN(member, Type, help) \
  {                                           \
    const auto& group = o.member;
#define DTRUN_FLAG(K, field, flag, value, initial, min, max, agree, help) \
  if (Agree::k##agree != Agree::kNo)                                      \
    fields.push_back({"--" flag, agreedText(group.field, Agree::k##agree)});
#define DTRUN_GROUP_END(member) }
#include "train/train_flags.def"
  return fields;
}

}  // namespace dtc
