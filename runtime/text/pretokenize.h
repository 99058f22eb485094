// The pre-tokenizer patterns of the common byte-level BPE tokenizers, as hand-written scanners
// that split text as their regular expressions do: GPT-2's (ByteLevel's use_regex), Llama 3's
// and Qwen2's (a Split before ByteLevel).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::text {

enum class SplitPattern {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
            // \s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,   // as Llama 3's, one digit at a time (\p{N})
};

// The pattern a tokenizer.json Split's regex is (false: none of these).
bool knownPattern(const std::string& regex, SplitPattern& pattern);

// `text` cut into its pieces, in order (their concatenation is `text`).
std::vector<std::string> splitText(const std::string& text, SplitPattern pattern);

}  // namespace dtc::text
