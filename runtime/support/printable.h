// Text from a file (names in a plan) shown in a one-line error message, whatever bytes it holds.
#pragma once

#include <string>

namespace dtc {

inline std::string printable(std::string text, size_t limit = 240) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (text.size() > limit) text = text.substr(0, limit) + "...";
  return text;
}

}  // namespace dtc
