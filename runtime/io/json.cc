#include "io/json.h"

#include "support/utf8.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "support/printable.h"

namespace dtc::io {

const std::string& Json::asString() const {
  static const std::string kEmpty;
  return isString() ? string_ : kEmpty;
}

const Json::Array& Json::asArray() const {
  static const Array kEmpty;
  return isArray() ? array_ : kEmpty;
}

const Json::Object& Json::members() const {
  static const Object kEmpty;
  return isObject() ? object_ : kEmpty;
}

const Json* Json::find(std::string_view key) const {
  if (!isObject()) return nullptr;
  for (const auto& [k, v] : object_)
    if (k == key) return &v;
  return nullptr;
}

Json& Json::set(const std::string& key, Json value) {
  if (isNull()) type_ = Type::kObject;
  for (auto& [k, v] : object_)
    if (k == key) return v = std::move(value);
  object_.emplace_back(key, std::move(value));
  return object_.back().second;
}

Json& Json::push(Json value) {
  if (isNull()) type_ = Type::kArray;
  array_.push_back(std::move(value));
  return array_.back();
}

size_t Json::size() const { return isArray() ? array_.size() : isObject() ? object_.size() : 0; }

bool Json::operator==(const Json& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::kNull: return true;
    case Type::kBool: return bool_ == o.bool_;
    case Type::kNumber:
      return isInteger_ && o.isInteger_ ? integer_ == o.integer_ : number_ == o.number_;
    case Type::kString: return string_ == o.string_;
    case Type::kArray: return array_ == o.array_;
    case Type::kObject: return object_ == o.object_;
  }
  return false;
}

std::string jsonQuote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

void Json::dumpTo(std::string& out) const {
  switch (type_) {
    case Type::kNull: out += "null"; break;
    case Type::kBool: out += bool_ ? "true" : "false"; break;
    case Type::kNumber: {
      if (isInteger_) {
        out += std::to_string(integer_);
      } else if (!std::isfinite(number_)) {
        out += "null";
      } else {
        char buf[32];  // shortest text that reads back as the same double
        auto r = std::to_chars(buf, buf + sizeof buf, number_);
        out.append(buf, r.ptr);
      }
      break;
    }
    case Type::kString: out += jsonQuote(string_); break;
    case Type::kArray:
      out += '[';
      for (size_t i = 0; i < array_.size(); ++i) {
        if (i) out += ',';
        array_[i].dumpTo(out);
      }
      out += ']';
      break;
    case Type::kObject:
      out += '{';
      for (size_t i = 0; i < object_.size(); ++i) {
        if (i) out += ',';
        out += jsonQuote(object_[i].first);
        out += ':';
        object_[i].second.dumpTo(out);
      }
      out += '}';
      break;
  }
}

std::string Json::dump() const {
  std::string out;
  dumpTo(out);
  return out;
}

namespace {

constexpr int kMaxDepth = 256;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  StatusOr<Json> parseDocument() {
    Json value;
    skipSpace();
    if (!parseValue(value, 0)) return error_;
    skipSpace();
    if (pos_ != s_.size()) return fail("unexpected text after the JSON value");
    return value;
  }

 private:
  Status fail(const std::string& what) {
    error_ = Status::InvalidInput("JSON error at byte " + std::to_string(pos_) + ": " + what);
    return error_;
  }
  bool failed(const std::string& what) {
    (void)fail(what);
    return false;
  }

  void skipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool parseValue(Json& out, int depth) {
    if (depth > kMaxDepth) return failed("nested deeper than " + std::to_string(kMaxDepth));
    if (pos_ >= s_.size()) return failed("unexpected end of input");
    char c = s_[pos_];
    if (c == '{') return parseObject(out, depth);
    if (c == '[') return parseArray(out, depth);
    if (c == '"') {
      std::string str;
      if (!parseString(str)) return false;
      out = Json(std::move(str));
      return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parseNumber(out);
    if (consume("true")) return out = Json(true), true;
    if (consume("false")) return out = Json(false), true;
    if (consume("null")) return out = Json(), true;
    return failed("unexpected character '" + printable(std::string(1, c)) + "'");
  }

  bool parseObject(Json& out, int depth) {
    ++pos_;  // '{'
    out = Json::object();
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
    while (true) {
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return failed("expected a string key");
      std::string key;
      if (!parseString(key)) return false;
      if (out.find(key)) return failed("duplicate key " + jsonQuote(key));
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return failed("expected ':'");
      ++pos_;
      skipSpace();
      Json value;
      if (!parseValue(value, depth + 1)) return false;
      out.set(key, std::move(value));
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      return failed("expected ',' or '}'");
    }
  }

  bool parseArray(Json& out, int depth) {
    ++pos_;  // '['
    out = Json(Json::Array{});
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
    while (true) {
      skipSpace();
      Json value;
      if (!parseValue(value, depth + 1)) return false;
      out.push(std::move(value));
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      return failed("expected ',' or ']'");
    }
  }

  bool parseHex4(uint32_t& v) {
    if (s_.size() - pos_ < 4) return failed("truncated \\u escape");
    v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        return failed("bad hex digit in \\u escape");
    }
    return true;
  }

  bool parseString(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return failed("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return failed("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) return failed("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!parseHex4(cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return failed("unpaired surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low;
            if (!consume("\\u") || !parseHex4(low) || low < 0xDC00 || low > 0xDFFF)
              return failed("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          appendUtf8(cp, out);
          break;
        }
        default: return failed("bad escape '\\" + printable(std::string(1, e)) + "'");
      }
    }
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  bool parseNumber(Json& out) {
    const size_t start = pos_;
    auto digits = [&] {
      size_t from = pos_;
      while (pos_ < s_.size() && isDigit(s_[pos_])) ++pos_;
      return pos_ > from;
    };
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;  // no leading zeros: "01" is not JSON
    } else if (!digits()) {
      return failed("malformed number");
    }
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      integral = false;
      if (!digits()) return failed("malformed number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      integral = false;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) return failed("malformed number");
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integral) {
      int64_t v;
      auto r = std::from_chars(first, last, v);
      if (r.ec == std::errc() && r.ptr == last) return out = Json(v), true;
      // Too large for int64: fall through to a double.
    }
    double d;
    auto r = std::from_chars(first, last, d);  // locale-independent, unlike strtod
    if (r.ec != std::errc() || r.ptr != last) {
      pos_ = start;
      return failed("number out of range");
    }
    out = Json(d);
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  Status error_;
};

}  // namespace

StatusOr<Json> parseJson(std::string_view text) { return Parser(text).parseDocument(); }

}  // namespace dtc::io
