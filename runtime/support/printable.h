// Text from a file (names in a plan) shown in a one-line error message, whatever bytes it holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtc {

inline std::string printable(std::string text, size_t limit = 240) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (text.size() > limit) text = text.substr(0, limit) + "...";
  return text;
}

// "[2,3]": a shape in an error message.
inline std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// "a, b, c and 5 more": the first `shown` names of a list in an error message.
inline std::string nameList(const std::vector<std::string>& names, size_t shown = 8) {
  std::string s;
  if (shown > names.size()) shown = names.size();
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > shown) s += " and " + std::to_string(names.size() - shown) + " more";
  return s;
}

}  // namespace dtc
