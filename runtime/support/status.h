// Errors are values in the runtime: every fallible call returns a Status (or StatusOr<T>) up to
// the tool's main(), which prints the one-line message and exits with exitCode().
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dtc {

enum class StatusCode {
  kOk = 0,
  kInternal = 1,      // a broken invariant or a failing system call
  kInvalidInput = 2,  // the user's files or flags are wrong
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidInput(std::string message) {
    return Status(StatusCode::kInvalidInput, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(StatusCode::kInternal, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  int exitCode() const { return static_cast<int>(code_); }

  // Prefixes the message with where it happened ("reading data/x.npy: ...").
  Status withContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : value_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace dtc

#define DTC_CONCAT_INNER(a, b) a##b
#define DTC_CONCAT(a, b) DTC_CONCAT_INNER(a, b)

#define DTC_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::dtc::Status dtc_status_ = (expr);      \
    if (!dtc_status_.ok()) return dtc_status_; \
  } while (0)

#define DTC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define DTC_ASSIGN_OR_RETURN(lhs, expr) \
  DTC_ASSIGN_OR_RETURN_IMPL(DTC_CONCAT(dtc_statusor_, __LINE__), lhs, expr)
