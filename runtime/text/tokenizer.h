// A Hugging Face tokenizer (tokenizer.json, as the tokenizers library saves it) for sampling:
// text to token ids and back. The BPE models of the common causal LMs: byte-level (GPT-2,
// Llama 3, Qwen2: ByteLevel, its regex or a Split before it) and SentencePiece's (Llama 2,
// Mistral: "▁" for spaces, byte fallback), with their added tokens. Anything else in the file
// is an error naming it, when loading.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc::text {

class Tokenizer {
 public:
  // `path`: a tokenizer.json, or a folder holding one.
  static StatusOr<Tokenizer> load(const std::string& path);

  // The ids of `text`, as the tokenizer's encode(text, add_special_tokens=False) gives them.
  StatusOr<std::vector<int64_t>> encode(const std::string& text) const;
  // The text of `ids`, as its decode(ids) gives it (added tokens as their text; an id it does
  // not have adds nothing).
  std::string decode(const std::vector<int64_t>& ids) const;
  // One more than the largest id it has.
  int64_t size() const { return size_; }

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

 private:
  struct Impl;
  Tokenizer();
  std::unique_ptr<Impl> impl_;
  int64_t size_ = 0;
};

}  // namespace dtc::text
