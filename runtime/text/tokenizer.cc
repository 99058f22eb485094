#include "text/tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <unordered_map>

#include "io/files.h"
#include "io/json.h"
#include "support/printable.h"
#include "text/pretokenize.h"
#include "text/unicode.h"

namespace dtc::text {
namespace {

// Llama 3's tokenizer.json is about 9 MB.
constexpr uint64_t kMaxBytes = uint64_t{256} << 20;

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for U+0100 on.
std::vector<uint32_t> byteCharacters() {
  std::vector<uint32_t> map(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    map[b] = printable ? b : next++;
  }
  return map;
}

struct Step {  // a normalizer, pre-tokenizer or decoder step
  std::string type;
  std::string a, b;   // Prepend: a; Replace: pattern a, content b; Metaspace: replacement a
  bool flag = false;  // ByteLevel: add_prefix_space; Metaspace: prepend; Split: its pattern's
  bool regex = true;  // ByteLevel: use_regex
  SplitPattern pattern = SplitPattern::kGpt2;
  int64_t start = 0, stop = 0;  // Strip
};

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// "<0x0A>" -> 10, else -1.
int byteToken(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  unsigned value = 0;
  if (std::sscanf(t.c_str() + 3, "%2x", &value) != 1) return -1;
  return static_cast<int>(value);
}

}  // namespace

struct Tokenizer::Impl {
  std::string path;
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<std::string> tokens;  // by id ("" for an id it lacks)
  struct Added {
    std::string content;
    int64_t id;
  };
  std::vector<Added> added;                                                   // longest first
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> merges;  // -> (rank, id)
  bool byteFallback = false, fuseUnk = false, ignoreMerges = false;
  int64_t unk = -1;
  std::vector<Step> normalizers, pretokenizers, decoders;
  std::vector<int64_t> prefix, suffix;  // the post-processor's special tokens around a text
  std::vector<uint32_t> byteChar;
  std::unordered_map<uint32_t, uint8_t> charByte;

  Status error(const std::string& message) const {
    return Status::InvalidInput(path + ": " + message);
  }

  Status readSteps(const io::Json* node, const char* what, const char* listKey,
                   std::vector<Step>& steps);
  Status readModel(const io::Json& model);
  Status readPostProcessor(const io::Json* node);
  // `first`: the text's first segment (none of its added tokens before it).
  std::vector<std::string> pieces(const std::string& text, bool first) const;
  void bpe(const std::string& piece, std::vector<int64_t>& out) const;
};

Status Tokenizer::Impl::readSteps(const io::Json* node, const char* what, const char* listKey,
                                  std::vector<Step>& steps) {
  if (!node || node->isNull()) return Status::Ok();
  if (!node->isObject()) return error(std::string(what) + " is not an object");
  auto str = [&](const io::Json& n, const char* key) {
    const io::Json* v = n.find(key);
    return v && v->isString() ? v->asString() : std::string();
  };
  auto boolean = [&](const io::Json& n, const char* key, bool fallback) {
    const io::Json* v = n.find(key);
    return v && v->isBool() ? v->asBool() : fallback;
  };
  const std::string type = str(*node, "type");
  if (type == "Sequence") {
    const io::Json* list = node->find(listKey);
    if (!list || !list->isArray())
      return error(std::string(what) + ": a Sequence without its list");
    for (const io::Json& step : list->asArray())
      DTC_RETURN_IF_ERROR(readSteps(&step, what, listKey, steps));
    return Status::Ok();
  }
  Step s;
  s.type = type;
  if (type == "Prepend") {
    s.a = str(*node, "prepend");
  } else if (type == "Replace") {
    const io::Json* pattern = node->find("pattern");
    if (!pattern || !pattern->find("String"))
      return error(std::string(what) + ": a Replace of a regular expression is not implemented");
    s.a = pattern->find("String")->asString();
    s.b = str(*node, "content");
  } else if (type == "ByteLevel") {
    s.flag = boolean(*node, "add_prefix_space", false);
    s.regex = boolean(*node, "use_regex", true);
  } else if (type == "Split") {
    const io::Json* pattern = node->find("pattern");
    const io::Json* regex = pattern ? pattern->find("Regex") : nullptr;
    if (!regex || !regex->isString() || !knownPattern(regex->asString(), s.pattern))
      return error(std::string(what) + ": a Split on a pattern other than GPT-2's, Llama 3's or " +
                   "Qwen2's is not implemented");
    if (str(*node, "behavior") != "Isolated" || boolean(*node, "invert", false))
      return error(std::string(what) + ": a Split other than Isolated is not implemented");
  } else if (type == "Metaspace") {
    s.a = str(*node, "replacement");
    const std::string scheme = str(*node, "prepend_scheme");
    s.flag = scheme.empty() ? boolean(*node, "add_prefix_space", true) : scheme != "never";
    s.start = scheme == "first";  // only before the text's first piece, not after added tokens
    s.regex = boolean(*node, "split", true);
  } else if (type == "Strip") {
    s.a = str(*node, "content");
    const io::Json* start = node->find("start");
    const io::Json* stop = node->find("stop");
    s.start = start ? start->asInt() : 0;
    s.stop = stop ? stop->asInt() : 0;
  } else if (type == "NFC" || type == "ByteFallback" || type == "Fuse") {
    // NFC: text arrives composed (what terminals and editors write); it is taken as it is.
  } else {
    return error(std::string(what) + " '" + printable(type) + "' is not one dtc implements");
  }
  steps.push_back(std::move(s));
  return Status::Ok();
}

Status Tokenizer::Impl::readModel(const io::Json& model) {
  const io::Json* type = model.find("type");
  if (!type || !type->isString() || type->asString() != "BPE")
    return error("model type " + (type ? printable(type->dump()) : std::string("none")) +
                 " is not one dtc reads (BPE)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"})
    if (const io::Json* v = model.find(key); v && !v->isNull())
      return error(std::string("BPE's ") + key + " is not implemented");
  const io::Json* words = model.find("vocab");
  if (!words || !words->isObject()) return error("the BPE model has no vocab");
  for (const auto& [token, id] : words->members()) {
    if (!id.isInteger() || id.asInt() < 0 || id.asInt() > INT32_MAX)
      return error("vocab entry '" + printable(token) + "' has no id");
    vocab[token] = id.asInt();
  }
  auto flag = [&](const char* key) {
    const io::Json* v = model.find(key);
    return v && v->isBool() && v->asBool();
  };
  byteFallback = flag("byte_fallback");
  fuseUnk = flag("fuse_unk");
  ignoreMerges = flag("ignore_merges");
  if (const io::Json* u = model.find("unk_token"); u && u->isString()) {
    auto it = vocab.find(u->asString());
    if (it != vocab.end()) unk = it->second;
  }
  const io::Json* list = model.find("merges");
  if (!list || !list->isArray()) return error("the BPE model has no merges");
  int64_t rank = 0;
  for (const io::Json& m : list->asArray()) {
    std::string left, right;
    if (m.isString()) {  // "a b"
      const size_t space = m.asString().find(' ', 1);
      if (space == std::string::npos)
        return error("merge '" + printable(m.asString()) + "' is not two tokens");
      left = m.asString().substr(0, space);
      right = m.asString().substr(space + 1);
    } else if (m.isArray() && m.size() == 2 && m.asArray()[0].isString() &&
               m.asArray()[1].isString()) {
      left = m.asArray()[0].asString();
      right = m.asArray()[1].asString();
    } else {
      return error("a merge is neither \"a b\" nor [a, b]");
    }
    auto a = vocab.find(left), b = vocab.find(right), ab = vocab.find(left + right);
    if (a == vocab.end() || b == vocab.end() || ab == vocab.end())
      return error("merge '" + printable(left + " " + right) + "' names a token the vocab lacks");
    merges.emplace(std::pair{a->second, b->second}, std::pair{rank++, ab->second});
  }
  return Status::Ok();
}

Status Tokenizer::Impl::readPostProcessor(const io::Json* node) {
  if (!node || node->isNull()) return Status::Ok();
  const io::Json* type = node->find("type");
  const std::string t = type && type->isString() ? type->asString() : "";
  if (t == "ByteLevel") return Status::Ok();  // offsets only
  if (t == "Sequence") {
    const io::Json* list = node->find("processors");
    if (!list || !list->isArray()) return error("post_processor: a Sequence without its list");
    for (const io::Json& p : list->asArray()) DTC_RETURN_IF_ERROR(readPostProcessor(&p));
    return Status::Ok();
  }
  if (t != "TemplateProcessing")
    return error("post_processor '" + printable(t) + "' is not one dtc implements");
  // The single-text template: special tokens before and after the text ($A).
  const io::Json* single = node->find("single");
  if (!single || !single->isArray()) return error("post_processor: no single template");
  bool text = false;
  for (const io::Json& piece : single->asArray()) {
    if (piece.find("Sequence")) {
      text = true;
      continue;
    }
    const io::Json* special = piece.find("SpecialToken");
    const io::Json* id = special ? special->find("id") : nullptr;
    if (!id || !id->isString()) return error("post_processor: a template piece dtc cannot read");
    auto it = vocab.find(id->asString());
    if (it == vocab.end()) {
      for (const Added& a : added)
        if (a.content == id->asString()) it = vocab.emplace(a.content, a.id).first;
      if (it == vocab.end())
        return error("post_processor: no token '" + printable(id->asString()) + "'");
    }
    (text ? suffix : prefix).push_back(it->second);
  }
  return Status::Ok();
}

// The text's pieces after normalizing and pre-tokenizing, as the strings BPE starts from
// (byte-level: each byte as its character).
std::vector<std::string> Tokenizer::Impl::pieces(const std::string& input, bool first) const {
  std::string text = input;
  for (const Step& n : normalizers) {
    if (n.type == "Prepend" && !text.empty()) text = n.a + text;
    if (n.type == "Replace") text = replaceAll(text, n.a, n.b);
  }
  std::vector<std::string> out = {text};
  bool byteLevel = false;
  for (const Step& p : pretokenizers) {
    std::vector<std::string> next;
    for (std::string& piece : out) {
      if (p.type == "Split") {
        for (std::string& s : splitText(piece, p.pattern)) next.push_back(std::move(s));
      } else if (p.type == "ByteLevel") {
        byteLevel = true;
        if (p.flag && (piece.empty() || piece[0] != ' ')) piece = " " + piece;
        if (!p.regex) {
          next.push_back(piece);
          continue;
        }
        for (std::string& s : splitText(piece, SplitPattern::kGpt2)) next.push_back(std::move(s));
      } else if (p.type == "Metaspace") {
        std::string s = replaceAll(piece, " ", p.a);
        if (p.flag && (first || !p.start) && &piece == &out.front() &&
            s.compare(0, p.a.size(), p.a) != 0)
          s = p.a + s;
        if (!p.regex) {
          next.push_back(s);
          continue;
        }
        // Each piece begins at a replacement character.
        size_t begin = 0;
        for (size_t at = s.find(p.a, 1); at != std::string::npos; at = s.find(p.a, at + 1)) {
          next.push_back(s.substr(begin, at - begin));
          begin = at;
        }
        next.push_back(s.substr(begin));
      } else {
        next.push_back(piece);
      }
    }
    out = std::move(next);
  }
  if (byteLevel)
    for (std::string& piece : out) {
      std::string chars;
      for (unsigned char c : piece) appendUtf8(byteChar[c], chars);
      piece = std::move(chars);
    }
  return out;
}

void Tokenizer::Impl::bpe(const std::string& piece, std::vector<int64_t>& out) const {
  if (piece.empty()) return;
  if (ignoreMerges) {
    if (auto it = vocab.find(piece); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // The piece's characters as symbols; one the vocab lacks as its bytes (byte fallback) or the
  // unknown token.
  std::vector<int64_t> symbols;
  const std::vector<uint32_t> cps = codePoints(piece);
  for (size_t i = 0; i < cps.size(); ++i) {
    const std::string c = utf8(cps, i, i + 1);
    if (auto it = vocab.find(c); it != vocab.end()) {
      symbols.push_back(it->second);
      continue;
    }
    bool fell = byteFallback;
    std::vector<int64_t> fallback;
    for (unsigned char b : c) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      auto it = vocab.find(name);
      if (it == vocab.end())
        fell = false;
      else
        fallback.push_back(it->second);
    }
    if (fell) {
      symbols.insert(symbols.end(), fallback.begin(), fallback.end());
    } else if (unk >= 0 && !(fuseUnk && !symbols.empty() && symbols.back() == unk)) {
      symbols.push_back(unk);
    }
  }
  // The pair of lowest rank merged first, the leftmost of equal ones, until none is left.
  for (;;) {
    int64_t best = INT64_MAX;
    size_t at = 0;
    int64_t merged = -1;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = merges.find({symbols[i], symbols[i + 1]});
      if (it != merges.end() && it->second.first < best) {
        best = it->second.first;
        merged = it->second.second;
        at = i;
      }
    }
    if (merged < 0) break;
    symbols[at] = merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

StatusOr<Tokenizer> Tokenizer::load(const std::string& where) {
  const std::string path = io::isDirectory(where) ? where + "/tokenizer.json" : where;
  if (!io::isRegularFile(path))
    return Status::InvalidInput(where + ": no tokenizer.json (a Hugging Face tokenizer's file)");
  DTC_ASSIGN_OR_RETURN(std::string text, io::readSmallFile(path, kMaxBytes));
  auto json = io::parseJson(text);
  if (!json.ok()) return Status::InvalidInput(path + ": " + json.status().message());
  Tokenizer t;
  Impl& m = *t.impl_;
  m.path = path;
  if (!json->isObject() || !json->find("model")) return m.error("not a tokenizer (no model)");
  DTC_RETURN_IF_ERROR(m.readModel(*json->find("model")));
  if (const io::Json* added = json->find("added_tokens"); added && added->isArray())
    for (const io::Json& a : added->asArray()) {
      const io::Json* content = a.find("content");
      const io::Json* id = a.find("id");
      if (!content || !content->isString() || !id || !id->isInteger() ||
          content->asString().empty())
        return m.error("an added token without its content and id");
      m.added.push_back({content->asString(), id->asInt()});
    }
  std::stable_sort(m.added.begin(), m.added.end(), [](const Impl::Added& a, const Impl::Added& b) {
    return a.content.size() > b.content.size();
  });
  DTC_RETURN_IF_ERROR(
      m.readSteps(json->find("normalizer"), "normalizer", "normalizers", m.normalizers));
  DTC_RETURN_IF_ERROR(
      m.readSteps(json->find("pre_tokenizer"), "pre_tokenizer", "pretokenizers", m.pretokenizers));
  DTC_RETURN_IF_ERROR(m.readSteps(json->find("decoder"), "decoder", "decoders", m.decoders));
  DTC_RETURN_IF_ERROR(m.readPostProcessor(json->find("post_processor")));
  int64_t size = 0;
  for (const auto& [token, id] : m.vocab) size = std::max(size, id + 1);
  for (const Impl::Added& a : m.added) size = std::max(size, a.id + 1);
  m.tokens.assign(static_cast<size_t>(size), "");
  for (const auto& [token, id] : m.vocab) m.tokens[id] = token;
  for (const Impl::Added& a : m.added) m.tokens[a.id] = a.content;
  m.byteChar = byteCharacters();
  for (uint32_t b = 0; b < 256; ++b) m.charByte[m.byteChar[b]] = static_cast<uint8_t>(b);
  t.size_ = size;
  return t;
}

StatusOr<std::vector<int64_t>> Tokenizer::encode(const std::string& text) const {
  const Impl& m = *impl_;
  std::vector<int64_t> ids = m.prefix;
  // Added tokens are taken as they are; the text between them is normalized and split.
  size_t begin = 0;
  auto plain = [&](size_t end) {
    if (end <= begin) return;
    for (const std::string& piece : m.pieces(text.substr(begin, end - begin), begin == 0))
      m.bpe(piece, ids);
  };
  for (size_t i = 0; i < text.size();) {
    const Impl::Added* hit = nullptr;
    for (const Impl::Added& a : m.added)
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    plain(i);
    ids.push_back(hit->id);
    i += hit->content.size();
    begin = i;
  }
  plain(text.size());
  ids.insert(ids.end(), m.suffix.begin(), m.suffix.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  for (int64_t id : ids)
    if (id >= 0 && id < size_ && !m.tokens[id].empty()) tokens.push_back(m.tokens[id]);
  if (m.decoders.empty()) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  for (const Step& d : m.decoders) {
    if (d.type == "Replace") {
      for (std::string& t : tokens) t = replaceAll(t, d.a, d.b);
    } else if (d.type == "Fuse") {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens = {all};
    } else if (d.type == "Strip") {
      for (std::string& t : tokens) {
        for (int64_t k = 0; k < d.start && t.compare(0, d.a.size(), d.a) == 0; ++k)
          t.erase(0, d.a.size());
        for (int64_t k = 0; k < d.stop && t.size() >= d.a.size() &&
                            t.compare(t.size() - d.a.size(), d.a.size(), d.a) == 0;
             ++k)
          t.erase(t.size() - d.a.size());
      }
    } else if (d.type == "ByteFallback") {
      // Runs of <0xXX> tokens become their bytes where those are UTF-8, else U+FFFD each.
      std::vector<std::string> next;
      std::string bytes;
      size_t count = 0;
      auto flush = [&] {
        if (count == 0) return;
        if (validUtf8(bytes))
          next.push_back(bytes);
        else
          for (size_t k = 0; k < count; ++k) next.push_back("\xEF\xBF\xBD");
        bytes.clear();
        count = 0;
      };
      for (const std::string& t : tokens) {
        const int b = byteToken(t);
        if (b < 0) {
          flush();
          next.push_back(t);
          continue;
        }
        bytes += static_cast<char>(b);
        ++count;
      }
      flush();
      tokens = std::move(next);
    } else if (d.type == "ByteLevel") {
      std::string bytes;
      for (const std::string& t : tokens)
        for (uint32_t cp : codePoints(t)) {
          auto it = m.charByte.find(cp);
          if (it != m.charByte.end())
            bytes += static_cast<char>(it->second);
          else
            appendUtf8(cp, bytes);
        }
      tokens = {lossyUtf8(bytes)};
    } else if (d.type == "Metaspace") {
      // Every replacement character a space, but in the first token, where they go (they were
      // prepended).
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replaceAll(tokens[i], d.a, i == 0 && d.flag ? "" : " ");
    }
  }
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

}  // namespace dtc::text
