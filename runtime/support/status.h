// Errors are values in the runtime: every fallible call returns a Status (or StatusOr<T>) up to
// the tool's main(), which prints the one-line message and exits with exitCode().
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dtc {

// The exit codes dtrun and dtc keep (docs/faults.md): 0 success, 1 internal error,
// 2 bad input, 3 a rank stopped answering (collective timeout, a rank died), 4 non-finite values,
// 128 + N stopped by signal N.
enum class StatusCode {
  kOk = 0,
  kInternal = 1,      // a broken invariant or a failing system call
  kInvalidInput = 2,  // the user's files or flags are wrong
  kTimeout = 3,       // a collective waited past --collective-timeout, or a rank died
  kNonFinite = 4,     // the loss, the gradients or the weights became inf or NaN
  kStopped = 5,       // asked to stop (SIGTERM, SIGINT): exits 128 + the signal's number
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
  // A failure of `code` (not kStopped) known from elsewhere: another rank's.
  static Status WithCode(StatusCode code, std::string message) {
    return code == StatusCode::kOk || code == StatusCode::kStopped
               ? Status(StatusCode::kInternal, std::move(message))
               : Status(code, std::move(message));
  }
  static Status Timeout(std::string message) {
    return Status(StatusCode::kTimeout, std::move(message));
  }
  static Status NonFinite(std::string message) {
    return Status(StatusCode::kNonFinite, std::move(message));
  }
  // The run stopped early on a signal, its state saved as asked: not a failure of this
  // process, but not a finished run either (the shell's convention: exit 128 + signal).
  static Status Stopped(std::string message, int signal) {
    Status s(StatusCode::kStopped, std::move(message));
    s.signal_ = signal;
    return s;
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  int exitCode() const {
    return code_ == StatusCode::kStopped ? 128 + signal_ : static_cast<int>(code_);
  }

  // Prefixes the message with where it happened ("reading data/x.npy: ...").
  Status withContext(const std::string& context) const {
    if (ok()) return *this;
    Status s = *this;
    s.message_ = context + ": " + message_;
    return s;
  }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int signal_ = 0;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : value_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace dtc

#define DTC_CONCAT_INNER(a, b) a##b
#define DTC_CONCAT(a, b) DTC_CONCAT_INNER(a, b)

#define DTC_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::dtc::Status dtc_status_ = (expr);        \
    if (!dtc_status_.ok()) return dtc_status_; \
  } while (0)

#define DTC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define DTC_ASSIGN_OR_RETURN(lhs, expr) \
  DTC_ASSIGN_OR_RETURN_IMPL(DTC_CONCAT(dtc_statusor_, __LINE__), lhs, expr)
