#include "comm/watchdog.h"

#include <chrono>
#include <deque>
#include <mutex>

#include "io/files.h"
#include "io/json.h"

namespace dtc::comm {
namespace {

constexpr size_t kRecorded = 256;  // calls the flight recorder keeps

struct State {
  std::mutex mutex;  // the watchdog thread reads what the communicating thread writes
  WatchdogSettings settings;
  std::string phase, function;
  const std::string* node = nullptr;
  std::deque<CollectiveRecord> records;
  uint64_t count = 0;
  const std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
};

State& state() {
  static State* s = new State;  // never destroyed: a report may come while the process exits
  return *s;
}

}  // namespace

void configureWatchdog(const WatchdogSettings& settings) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().settings = settings;
}

const WatchdogSettings& watchdogSettings() { return state().settings; }

void setPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().phase = phase;
}

void setFunction(const std::string& function) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().function = function;
}

void setNode(const std::string* node) { state().node = node; }

static std::string activityLocked(const State& s) {
  std::string out;
  auto add = [&](const std::string& part) {
    if (!part.empty()) out += (out.empty() ? "" : ", ") + part;
  };
  add(s.function);
  add(s.phase);
  if (s.node && !s.node->empty()) add(*s.node);
  return out;
}

std::string activity() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return activityLocked(state());
}

double watchdogClock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - state().origin).count();
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() > 1 ? "ranks " : "rank ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

uint64_t beginCollective(const std::string& op, const std::string& group, int64_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  CollectiveRecord r;
  r.sequence = ++s.count;
  r.op = op;
  r.group = group;
  r.bytes = bytes;
  r.where = activityLocked(s);
  r.start = watchdogClock();
  if (s.records.size() == kRecorded) s.records.pop_front();
  s.records.push_back(std::move(r));
  return s.count;
}

void finishCollective(uint64_t id) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto it = s.records.rbegin(); it != s.records.rend(); ++it)
    if (it->sequence == id) {
      it->end = watchdogClock();
      return;
    }
}

CollectiveRecord currentCollective() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto it = s.records.rbegin(); it != s.records.rend(); ++it)
    if (it->end == 0) return *it;
  return {};
}

std::string describe(const CollectiveRecord& r) {
  std::string out = r.op;
  if (!r.group.empty()) out += " over " + r.group;
  // The rank's own count of calls, as its flight recorder numbers them (a communicator numbers
  // its collectives apart, the same on every rank of them: "call #12" in the line before).
  out +=
      ", " + std::to_string(r.bytes) + " bytes, flight recorder call " + std::to_string(r.sequence);
  if (!r.where.empty()) out += ", in " + r.where;
  return out;
}

std::string writeFlightRecorder(int rank, const std::string& reason) {
  State& s = state();
  std::string path, text;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    path = s.settings.flightRecorderPath;
    if (path.empty()) return "";
    const double now = watchdogClock();
    text = "{\"rank\": " + std::to_string(rank) + ", \"reason\": " + io::jsonQuote(reason) +
           ", \"time\": " + std::to_string(now) +
           ", \"timeout_seconds\": " + std::to_string(s.settings.timeoutSeconds) +
           ",\n \"calls\": [";
    bool first = true;
    for (const CollectiveRecord& r : s.records) {
      text += first ? "\n  " : ",\n  ";
      first = false;
      text += "{\"call\": " + std::to_string(r.sequence) + ", \"op\": " + io::jsonQuote(r.op) +
              ", \"group\": " + io::jsonQuote(r.group) + ", \"bytes\": " + std::to_string(r.bytes) +
              ", \"where\": " + io::jsonQuote(r.where) + ", \"start\": " + std::to_string(r.start) +
              ", \"end\": " + (r.end > 0 ? std::to_string(r.end) : std::string("null")) +
              ", \"waited\": " + std::to_string((r.end > 0 ? r.end : now) - r.start) + "}";
    }
    text += "\n]}\n";
  }
  // Through a temporary name: a reader never sees half a file.
  if (!io::writeFileAtomically(path, text.data(), text.size()).ok()) return "";
  return path;
}

}  // namespace dtc::comm
