#include "support/stop_signals.h"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdio>

namespace dtc {
namespace {

volatile sig_atomic_t received = 0;
// When the first arrived (CLOCK_MONOTONIC). A launcher ending a job often signals each process
// and its process group at once: copies within kSameDeliveryNs of the first are that one
// request. (Dying at once on them raced the watchdog's report of the rank whose death ended
// the job.)
struct timespec first = {};
constexpr long long kSameDeliveryNs = 200'000'000;

bool sameDelivery() {
  struct timespec now = {};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return (now.tv_sec - first.tv_sec) * 1'000'000'000LL + (now.tv_nsec - first.tv_nsec) <
         kSameDeliveryNs;
}

void onStopSignal(int signal) {
  if (received != 0 && sameDelivery()) return;
  if (received != 0) {
    // A second request: the user means it. Die of the signal as if no handler were installed.
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  clock_gettime(CLOCK_MONOTONIC, &first);
  received = signal;
}

}  // namespace

void installStopSignalHandlers() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction action = {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // system calls in flight (writes, MPI's polls) carry on
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int stopSignalReceived() { return received; }

const char* stopSignalName(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
  }
  static thread_local char text[32];
  std::snprintf(text, sizeof text, "signal %d", signal);
  return text;
}

}  // namespace dtc
