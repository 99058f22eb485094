// A minimal JSON value with a strict parser and a compact serialiser: enough for safetensors
// headers and the runtime's JSON-lines logs, with no external dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/status.h"

namespace dtc::io {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Json>;
  // Members keep their insertion (or file) order, so logs read in the order they were written.
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;
  Json(std::nullptr_t) {}  // NOLINT: implicit by design, as are the constructors below
  Json(bool b) : type_(Type::kBool), bool_(b) {}
  Json(double d) : type_(Type::kNumber), number_(d) {}
  Json(float f) : Json(static_cast<double>(f)) {}
  // Integers stay exact (offsets beyond 2^53 would not survive a double).
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Json(T v) : type_(Type::kNumber), number_(static_cast<double>(v)) {
    if (std::is_signed_v<T> || static_cast<uint64_t>(v) <= static_cast<uint64_t>(INT64_MAX)) {
      isInteger_ = true;
      integer_ = static_cast<int64_t>(v);
    }
  }
  Json(std::string s) : type_(Type::kString), string_(std::move(s)) {}
  Json(const char* s) : Json(std::string(s)) {}
  Json(Array a) : type_(Type::kArray), array_(std::move(a)) {}
  static Json object() {
    Json j;
    j.type_ = Type::kObject;
    return j;
  }

  Type type() const { return type_; }
  bool isNull() const { return type_ == Type::kNull; }
  bool isBool() const { return type_ == Type::kBool; }
  bool isNumber() const { return type_ == Type::kNumber; }
  // A number written without fraction or exponent that fits int64 (or built from an integer).
  bool isInteger() const { return type_ == Type::kNumber && isInteger_; }
  bool isString() const { return type_ == Type::kString; }
  bool isArray() const { return type_ == Type::kArray; }
  bool isObject() const { return type_ == Type::kObject; }

  // Accessors of the wrong type return a default (false, 0, "", empty): check the type first
  // where the input is untrusted.
  bool asBool() const { return isBool() && bool_; }
  double asDouble() const { return isNumber() ? number_ : 0.0; }
  int64_t asInt() const { return isInteger() ? integer_ : 0; }
  const std::string& asString() const;
  const Array& asArray() const;
  const Object& members() const;

  // Object member `key`, or nullptr (also when this is not an object).
  const Json* find(std::string_view key) const;
  // Sets member `key` (replacing an existing one in place); turns null into an object.
  Json& set(const std::string& key, Json value);
  // Appends to an array; turns null into an array.
  Json& push(Json value);
  // Elements of an array or members of an object; 0 otherwise.
  size_t size() const;

  // Compact text (no spaces). Non-finite numbers, which JSON cannot express, become null.
  std::string dump() const;
  void dumpTo(std::string& out) const;

  bool operator==(const Json& other) const;
  bool operator!=(const Json& other) const { return !(*this == other); }

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  bool isInteger_ = false;
  double number_ = 0;
  int64_t integer_ = 0;
  std::string string_;
  Array array_;
  Object object_;
};

// Parses one JSON text (RFC 8259; surrounding whitespace allowed, nothing else). Rejects
// duplicate object keys and nesting deeper than 256, so hostile input cannot exhaust the stack
// or smuggle a second value for a key. Errors are InvalidInput "at byte N: ...".
StatusOr<Json> parseJson(std::string_view text);

// `s` as a JSON string literal, quotes included.
std::string jsonQuote(std::string_view s);

}  // namespace dtc::io
