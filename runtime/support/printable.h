// Text from a file (names in a plan) shown in a one-line error message, whatever bytes it holds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/utf8.h"

namespace dtc {

// Alternatives as a message lists them: "a", "a or b", "a, b or c".
inline std::string alternatives(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}

// The values of a declaration's "a|b|c", in order.
inline std::vector<std::string> splitAlternatives(std::string_view values) {
  std::vector<std::string> out;
  for (size_t begin = 0; begin <= values.size();) {
    const size_t end = std::min(values.find('|', begin), values.size());
    out.emplace_back(values.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

inline std::string printable(std::string text, size_t limit = 240) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (text.size() > limit) text = text.substr(0, limit) + "...";
  return text;
}

// Generated text for a terminal: valid UTF-8, newlines and tabs as they are; control characters
// and bytes that are not UTF-8 as \xNN (a byte-level model may emit any byte).
inline std::string terminalText(const std::string& text) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    const size_t len = utf8Length(p, i, n);
    const bool valid = len > 0;
    const bool control = len == 1 && (c < 0x20 || c == 0x7f) && c != '\n' && c != '\t';
    if (!valid || control) {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
      ++i;
      continue;
    }
    out.append(text, i, len);
    i += len;
  }
  return out;
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
