#include "perf/step_simulation.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace dtc::perf {
namespace {

struct Device {
  const std::vector<Task>* tasks = nullptr;
  size_t next = 0;
  DeviceRun run;
};

// The messages in flight, first in, first out for each key, and the devices waiting for them.
// The keys devices send on are numbered once, before the run (in an open-addressed table), and
// each task's numbers looked up then: the run allocates nothing per message, which matters
// where explore simulates thousands of pipeline schedules of many units each.
class Messages {
 public:
  static constexpr int64_t kNone = -1;   // the task receives or sends nothing
  static constexpr int64_t kNever = -2;  // it receives what no device sends

  explicit Messages(const std::vector<std::vector<Task>>& programs) {
    size_t sends = 0;
    for (const std::vector<Task>& tasks : programs)
      for (const Task& t : tasks) sends += t.sends ? 1 : 0;
    size_t slots = 16;
    while (slots < 2 * sends) slots *= 2;
    slot_.assign(slots, -1);
    for (const std::vector<Task>& tasks : programs)
      for (const Task& t : tasks)
        if (t.sends) number(*t.sends);
    head_.assign(keys_.size(), -1);
    tail_.assign(keys_.size(), -1);
    waiter_.assign(keys_.size(), -1);
    nextWaiter_.assign(programs.size(), -1);
    sends_.resize(programs.size());
    receives_.resize(programs.size());
    for (size_t d = 0; d < programs.size(); ++d) {
      sends_[d].reserve(programs[d].size());
      receives_[d].reserve(programs[d].size());
      for (const Task& t : programs[d]) {
        sends_[d].push_back(t.sends ? find(*t.sends) : kNone);
        receives_[d].push_back(t.receives ? find(*t.receives) : kNone);
      }
    }
  }
  // The key device `d`'s task `i` sends or receives (kNone, or kNever for a receive).
  int64_t sent(size_t d, size_t i) const { return sends_[d][i]; }
  int64_t received(size_t d, size_t i) const { return receives_[d][i]; }

  // Sends a message on `key`; the devices that waited for one are appended to `woken`.
  void push(int64_t key, double arrival, std::vector<size_t>& woken) {
    const int64_t at = static_cast<int64_t>(arrival_.size());
    arrival_.push_back(arrival);
    after_.push_back(-1);
    if (tail_[key] >= 0)
      after_[tail_[key]] = at;
    else
      head_[key] = at;
    tail_[key] = at;
    for (int64_t d = waiter_[key]; d >= 0; d = nextWaiter_[d]) woken.push_back(size_t(d));
    waiter_[key] = -1;
  }
  // The oldest arrival of `key` not yet taken, taken; nullopt where none has been sent.
  std::optional<double> pop(int64_t key) {
    if (key < 0) return std::nullopt;
    const int64_t at = head_[key];
    if (at < 0) return std::nullopt;
    head_[key] = after_[at];
    if (head_[key] < 0) tail_[key] = -1;
    return arrival_[at];
  }
  // Device `d` waits for a message on `key` (none will come for kNever).
  void await(int64_t key, size_t d) {
    if (key < 0) return;
    nextWaiter_[d] = waiter_[key];
    waiter_[key] = static_cast<int64_t>(d);
  }

 private:
  // The slot of `k` in the open-addressed table: where it is, or the empty one it would take.
  size_t slotOf(const MessageKey& k) const {
    uint64_t h = uint64_t(k.from) * 0x9E3779B97F4A7C15ull;
    h = (h ^ uint64_t(k.to)) * 0xC2B2AE3D27D4EB4Full;
    h = (h ^ uint64_t(k.tag)) * 0x165667B19E3779F9ull;
    const size_t mask = slot_.size() - 1;
    for (size_t at = size_t(h >> 17) & mask;; at = (at + 1) & mask)
      if (slot_[at] < 0 || keys_[slot_[at]] == k) return at;
  }
  void number(const MessageKey& k) {
    const size_t at = slotOf(k);
    if (slot_[at] >= 0) return;
    slot_[at] = static_cast<int64_t>(keys_.size());
    keys_.push_back(k);
  }
  int64_t find(const MessageKey& k) const {
    const int64_t n = slot_[slotOf(k)];
    return n >= 0 ? n : kNever;
  }
  std::vector<MessageKey> keys_;      // by number
  std::vector<int64_t> slot_;         // the table: each slot a key's number, or -1
  std::vector<int64_t> head_, tail_;  // per key: its oldest and newest message not yet taken
  std::vector<int64_t> waiter_;       // per key: a device waiting for it, the first of a list
  std::vector<int64_t> nextWaiter_;   // per device: the next waiting for the same key
  std::vector<double> arrival_;       // per message sent
  std::vector<int64_t> after_;        // per message: the next of its key
  std::vector<std::vector<int64_t>> sends_, receives_;  // per device and task
};

// Idle time of the compute stream, charged to what it waited for.
void wait(DeviceRun& run, double idle, TaskKind cause) {
  if (idle <= 0) return;
  if (cause == TaskKind::kRecv)
    run.bubble += idle;
  else if (cause != TaskKind::kCompute)
    run.exposed += idle;
}

// Runs `d` until it ends or waits for a message not yet sent (it is then among the key's
// waiters); the devices its messages wake are appended to `woken`.
void advance(size_t device, Device& d, Messages& messages, std::vector<size_t>& woken) {
  DeviceRun& run = d.run;
  for (; d.next < d.tasks->size(); ++d.next) {
    const Task& task = (*d.tasks)[d.next];
    double ready = 0;
    TaskKind cause = TaskKind::kCompute;
    for (size_t i : task.after)
      if (run.tasks[i].end > ready) {
        ready = run.tasks[i].end;
        cause = (*d.tasks)[i].kind;
      }
    if (const int64_t key = messages.received(device, d.next); key != Messages::kNone) {
      const std::optional<double> arrival = messages.pop(key);
      if (!arrival) {  // its sender is not there yet
        messages.await(key, device);
        return;
      }
      if (*arrival > ready) {
        ready = *arrival;
        cause = TaskKind::kRecv;
      }
    }
    TaskTime t;
    if (task.stream == Stream::kNone) {
      t.free = t.start = t.end = ready;
    } else {
      double& clock = task.stream == Stream::kCompute ? run.compute : run.communication;
      t.free = clock;
      t.start = std::max(clock, ready);
      if (task.stream == Stream::kCompute) wait(run, t.start - clock, cause);
      const double finished = t.start + task.seconds;
      t.end = task.release >= 0 ? t.start + task.release : finished;
      if (const int64_t key = messages.sent(device, d.next); key >= 0)
        messages.push(key, finished + task.delivery, woken);
      if (task.stream == Stream::kCompute) run.exposed += task.exposed;
      clock = t.end;
    }
    t.computeClock = run.compute;
    run.tasks.push_back(t);
  }
}

}  // namespace

Simulation simulateStep(const std::vector<std::vector<Task>>& programs) {
  std::vector<Device> devices(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    devices[i].tasks = &programs[i];
    devices[i].run.tasks.reserve(programs[i].size());
  }
  Messages messages(programs);
  Simulation out;
  // Each device runs until it waits, and again when a message it waits for is sent. A key's
  // messages come from one device, so the order devices run in changes no time.
  std::vector<size_t> runnable;
  for (size_t i = devices.size(); i-- > 0;) runnable.push_back(i);
  while (!runnable.empty()) {
    const size_t i = runnable.back();
    runnable.pop_back();
    advance(i, devices[i], messages, runnable);
  }
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].next < devices[i].tasks->size()) {
      out.stuck = {{i, devices[i].next}};
      break;
    }
  for (Device& d : devices) out.devices.push_back(std::move(d.run));
  return out;
}

}  // namespace dtc::perf
