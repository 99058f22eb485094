// The one simulator of a partitioned training step. Each device runs its tasks in program order
// on a compute stream and a communication stream; a task starts when its stream is free, the
// tasks whose results it reads have ended and the message it receives has arrived. Messages pass
// between devices first in, first out for each key. Where the prices come from is the caller's:
// the compiler's profile-free roofline on IR (cutting and checking pipeline stages), a device
// profile on a plan's steps (predictions), and explore's per-layer prices on a schedule's units
// (estimates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace dtc::perf {

enum class TaskKind { kCompute, kCollective, kSend, kRecv };
// kNone: a task that takes no time anywhere; its results are ready when its inputs are.
enum class Stream { kCompute, kCommunication, kNone };

// Names one message: what the three numbers mean is the caller's (stages and a tag, or the unit
// that sends it).
struct MessageKey {
  int64_t from = 0, to = 0, tag = 0;
  bool operator<(const MessageKey& o) const {
    return std::tie(from, to, tag) < std::tie(o.from, o.to, o.tag);
  }
  bool operator==(const MessageKey& o) const {
    return std::tie(from, to, tag) == std::tie(o.from, o.to, o.tag);
  }
};

struct Task {
  TaskKind kind = TaskKind::kCompute;
  Stream stream = Stream::kCompute;
  double seconds = 0;  // its time on its stream
  // >= 0: its stream (and its results) are free this long after it starts, while a message it
  // sends still takes `seconds` (a send whose wire time is the receiver's wait).
  double release = -1;
  // Earlier tasks of the same device whose results it reads, in the order of its inputs.
  std::vector<size_t> after;
  std::optional<MessageKey> receives;  // it starts no earlier than this message arrives
  std::optional<MessageKey> sends;     // arriving `delivery` after the task's `seconds`
  double delivery = 0;
  // Seconds of its own counted as exposed communication (a collective the compute stream
  // waits through).
  double exposed = 0;
};

struct TaskTime {
  double free = 0;  // when its stream was free for it (it waited from then to `start`)
  double start = 0, end = 0;
  double computeClock = 0;  // when the device's compute stream is free after it
};

struct DeviceRun {
  std::vector<TaskTime> tasks;
  double compute = 0, communication = 0;  // when each stream is last free
  // Time the compute stream stood idle: for a message (bubble), or for a collective or a send
  // (exposed communication, with the tasks' own `exposed`).
  double bubble = 0, exposed = 0;
  double end() const { return compute > communication ? compute : communication; }
};

struct Simulation {
  std::vector<DeviceRun> devices;
  // Where the programs deadlock: a device and its task that waits for a message never sent.
  std::optional<std::pair<size_t, size_t>> stuck;
};

Simulation simulateStep(const std::vector<std::vector<Task>>& programs);

}  // namespace dtc::perf
