#include "text/unicode.h"

#include <algorithm>

namespace dtc::text {
namespace {

struct Range {
  uint32_t first, last;
};

bool within(uint32_t cp, const Range* ranges, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (cp >= ranges[i].first && cp <= ranges[i].last) return true;
  return false;
}

// Digits and other numbers outside ASCII: Latin-1's superscripts and fractions, the decimal
// digits of Arabic, Indic, Thai and other scripts, number forms, enclosed and full-width digits.
constexpr Range kNumbers[] = {
    {0x00B2, 0x00B3}, {0x00B9, 0x00B9}, {0x00BC, 0x00BE}, {0x0660, 0x0669},   {0x06F0, 0x06F9},
    {0x07C0, 0x07C9}, {0x0966, 0x096F}, {0x09E6, 0x09EF}, {0x0A66, 0x0A6F},   {0x0AE6, 0x0AEF},
    {0x0B66, 0x0B6F}, {0x0BE6, 0x0BF2}, {0x0C66, 0x0C6F}, {0x0CE6, 0x0CEF},   {0x0D66, 0x0D78},
    {0x0E50, 0x0E59}, {0x0ED0, 0x0ED9}, {0x0F20, 0x0F33}, {0x1040, 0x1049},   {0x17E0, 0x17E9},
    {0x1810, 0x1819}, {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089},   {0x2150, 0x2189},
    {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793}, {0x3007, 0x3007},   {0x3021, 0x3029},
    {0x3038, 0x303A}, {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324F},   {0x3251, 0x325F},
    {0x3280, 0x3289}, {0x32B1, 0x32BF}, {0xFF10, 0xFF19}, {0x1D7CE, 0x1D7FF}, {0x1F100, 0x1F10C}};

// Neither letters nor numbers: punctuation, symbols, marks and controls by block (what is
// left outside these, above Latin-1, is taken for letters).
constexpr Range kNotLetters[] = {
    {0x0080, 0x00BF},   {0x00D7, 0x00D7}, {0x00F7, 0x00F7}, {0x02C2, 0x02C5},   {0x02D2, 0x02DF},
    {0x02E5, 0x02EB},   {0x02ED, 0x02ED}, {0x02EF, 0x036F}, {0x037E, 0x037E},   {0x0384, 0x0385},
    {0x0387, 0x0387},   {0x0482, 0x0489}, {0x055A, 0x055F}, {0x0589, 0x058F},   {0x0591, 0x05CF},
    {0x0600, 0x061F},   {0x064B, 0x065F}, {0x066A, 0x066D}, {0x06D4, 0x06D4},   {0x06D6, 0x06E4},
    {0x0900, 0x0903},   {0x093A, 0x094F}, {0x0951, 0x0957}, {0x0962, 0x0965},   {0x0E31, 0x0E31},
    {0x0E34, 0x0E3F},   {0x0E47, 0x0E4F}, {0x2000, 0x206F}, {0x20A0, 0x20FF},   {0x2100, 0x2101},
    {0x2103, 0x2106},   {0x2108, 0x2109}, {0x2114, 0x2114}, {0x2116, 0x2118},   {0x211E, 0x2123},
    {0x2125, 0x2125},   {0x2127, 0x2127}, {0x2129, 0x2129}, {0x212E, 0x212E},   {0x213A, 0x213B},
    {0x2140, 0x2144},   {0x214A, 0x214D}, {0x214F, 0x214F}, {0x2190, 0x245F},   {0x249C, 0x24E9},
    {0x2500, 0x2775},   {0x2794, 0x2BFF}, {0x2E00, 0x2E7F}, {0x3000, 0x3004},   {0x3008, 0x3020},
    {0x302A, 0x3030},   {0x3036, 0x3037}, {0x303D, 0x303F}, {0x3099, 0x309C},   {0x30A0, 0x30A0},
    {0x30FB, 0x30FB},   {0xD800, 0xF8FF}, {0xFE00, 0xFE6F}, {0xFEFF, 0xFEFF},   {0xFF00, 0xFF20},
    {0xFF3B, 0xFF40},   {0xFF5B, 0xFF65}, {0xFFE0, 0xFFFF}, {0x1D000, 0x1D7CD}, {0x1F000, 0x1FAFF},
    {0xE0000, 0x10FFFF}};

}  // namespace

std::vector<uint32_t> codePoints(const std::string& s) {
  std::vector<uint32_t> out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const size_t len = utf8Length(p, i, n);
    if (len == 0) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    uint32_t cp = len == 1 ? p[i] : len == 2 ? p[i] & 0x1f : len == 3 ? p[i] & 0x0f : p[i] & 0x07;
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3f);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string utf8(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) appendUtf8(cps[i], out);
  return out;
}

bool validUtf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8Length(p, i, s.size());
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string lossyUtf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  std::string out;
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The sequence's length and the range its second byte must be in (no overlong forms, no
    // surrogates, nothing past U+10FFFF).
    size_t len = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, low = c == 0xE0 ? 0xA0 : 0x80, high = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, low = c == 0xF0 ? 0x90 : 0x80, high = c == 0xF4 ? 0x8F : 0xBF;
    size_t k = 1;
    while (len && k < len && i + k < n && p[i + k] >= (k == 1 ? low : 0x80) &&
           p[i + k] <= (k == 1 ? high : 0xBF))
      ++k;
    if (len && k == len) {
      out.append(s, i, len);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += len && k == len ? len : std::max<size_t>(k, 1);
  }
  return out;
}

bool isNumber(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return within(cp, kNumbers, sizeof kNumbers / sizeof kNumbers[0]);
}

bool isLetter(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp == 0xAA || cp == 0xB5 || cp == 0xBA)
    return true;  // ª µ º, letters inside Latin-1's symbols
  if (isNumber(cp) || isSpace(cp)) return false;
  return !within(cp, kNotLetters, sizeof kNotLetters / sizeof kNotLetters[0]);
}

bool isSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace dtc::text
