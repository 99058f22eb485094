// UTF-8 as the runtime reads and writes it: a code point appended, and the length of the
// well-formed sequence at a position (no overlong forms, no surrogates, nothing past U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dtc {

inline void appendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The length of the well-formed sequence starting at p[i] of n bytes, 0 where there is none.
inline size_t utf8Length(const unsigned char* p, size_t i, size_t n) {
  const unsigned char c = p[i];
  const size_t len = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xe  ? 3
                     : (c >> 3) == 0x1e ? 4
                                        : 0;
  bool valid = len > 0 && i + len <= n && !(len == 2 && c < 0xc2) && !(len == 4 && c > 0xf4);
  for (size_t k = 1; valid && k < len; ++k) valid = (p[i + k] & 0xc0) == 0x80;
  if (valid && len == 3) {
    const unsigned char d = p[i + 1];
    valid = !(c == 0xe0 && d < 0xa0) && !(c == 0xed && d >= 0xa0);
  }
  if (valid && len == 4)
    valid = !(c == 0xf0 && p[i + 1] < 0x90) && !(c == 0xf4 && p[i + 1] >= 0x90);
  return valid ? len : 0;
}

}  // namespace dtc
