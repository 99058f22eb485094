#include "text/pretokenize.h"

#include "text/unicode.h"

namespace dtc::text {
namespace {

constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool other(uint32_t c) { return !isSpace(c) && !isLetter(c) && !isNumber(c); }
bool newline(uint32_t c) { return c == '\r' || c == '\n'; }

uint32_t lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// The length of a contraction at `i` ('s 't 're 've 'm 'll 'd), 0 if none.
size_t contraction(const std::vector<uint32_t>& s, size_t i, bool anyCase) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  auto at = [&](size_t k) {
    return i + k < s.size() ? (anyCase ? lower(s[i + k]) : s[i + k]) : 0u;
  };
  const uint32_t a = at(1), b = at(2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

template <typename Pred>
size_t run(const std::vector<uint32_t>& s, size_t i, Pred pred, size_t most = SIZE_MAX) {
  size_t j = i;
  while (j < s.size() && j - i < most && pred(s[j])) ++j;
  return j - i;
}

// \s+(?!\S) then \s+: a run of white space, less its last character where a non-space follows.
size_t spaces(const std::vector<uint32_t>& s, size_t i) {
  const size_t k = run(s, i, isSpace);
  if (k == 0) return 0;
  if (i + k == s.size() || k == 1) return k;
  return k - 1;
}

size_t gpt2Piece(const std::vector<uint32_t>& s, size_t i) {
  if (size_t n = contraction(s, i, false)) return n;
  const size_t lead = s[i] == ' ' && i + 1 < s.size() ? 1 : 0;
  for (auto pred : {isLetter, isNumber, other}) {
    if (size_t n = run(s, i + lead, pred)) return lead + n;
  }
  if (size_t n = spaces(s, i)) return n;
  return 1;
}

size_t llama3Piece(const std::vector<uint32_t>& s, size_t i, size_t digits) {
  if (size_t n = contraction(s, i, true)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (isLetter(s[i])) return run(s, i, isLetter);
  if (!newline(s[i]) && !isLetter(s[i]) && !isNumber(s[i]) && i + 1 < s.size() &&
      isLetter(s[i + 1]))
    return 1 + run(s, i + 1, isLetter);
  if (size_t n = run(s, i, isNumber, digits)) return n;
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  const size_t lead = s[i] == ' ' && i + 1 < s.size() ? 1 : 0;
  if (size_t n = run(s, i + lead, other)) return lead + n + run(s, i + lead + n, newline);
  // \s*[\r\n]+: the white space up to its last line break.
  const size_t k = run(s, i, isSpace);
  for (size_t j = k; j > 0; --j)
    if (newline(s[i + j - 1])) return j;
  if (size_t n = spaces(s, i)) return n;
  return 1;
}

}  // namespace

bool knownPattern(const std::string& regex, SplitPattern& pattern) {
  if (regex == kGpt2Regex)
    pattern = SplitPattern::kGpt2;
  else if (regex == kLlama3Regex)
    pattern = SplitPattern::kLlama3;
  else if (regex == kQwen2Regex)
    pattern = SplitPattern::kQwen2;
  else
    return false;
  return true;
}

std::vector<std::string> splitText(const std::string& text, SplitPattern pattern) {
  const std::vector<uint32_t> s = codePoints(text);
  std::vector<std::string> pieces;
  for (size_t i = 0; i < s.size();) {
    const size_t n = pattern == SplitPattern::kGpt2     ? gpt2Piece(s, i)
                     : pattern == SplitPattern::kLlama3 ? llama3Piece(s, i, 3)
                                                        : llama3Piece(s, i, 1);
    pieces.push_back(utf8(s, i, i + n));
    i += n;
  }
  return pieces;
}

}  // namespace dtc::text
