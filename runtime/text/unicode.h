// Unicode for tokenizers: UTF-8 to code points and back, and the character classes their
// pre-tokenizer patterns use (\p{L}, \p{N}, \s).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/utf8.h"

namespace dtc::text {

// The code points of `s`; a byte that does not begin a valid sequence stands for itself as
// U+FFFD's place holder 0xFFFD (tokenizers read their input as UTF-8 text).
std::vector<uint32_t> codePoints(const std::string& s);
std::string utf8(const std::vector<uint32_t>& cps, size_t begin, size_t end);
// Whether `s` is valid UTF-8.
bool validUtf8(const std::string& s);
// `s` with each maximal invalid subpart replaced by U+FFFD (Rust's String::from_utf8_lossy,
// which tokenizers decode with).
std::string lossyUtf8(const std::string& s);

// Unicode's general categories as regex engines read \p{L} (letters), \p{N} (numbers) and \s
// (white space): exact for ASCII and Latin-1, by block elsewhere (the letters of alphabetic
// scripts and CJK, the digits of the common scripts, the punctuation and symbol blocks).
bool isLetter(uint32_t cp);
bool isNumber(uint32_t cp);
bool isSpace(uint32_t cp);

}  // namespace dtc::text
