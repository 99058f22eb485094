#include "perf/step_simulation.h"

#include <algorithm>
#include <deque>
#include <map>

namespace dtc::perf {
namespace {

struct Device {
  const std::vector<Task>* tasks = nullptr;
  size_t next = 0;
  DeviceRun run;
};

using Messages = std::map<MessageKey, std::deque<double>>;

// Idle time of the compute stream, charged to what it waited for.
void wait(DeviceRun& run, double idle, TaskKind cause) {
  if (idle <= 0) return;
  if (cause == TaskKind::kRecv)
    run.bubble += idle;
  else if (cause != TaskKind::kCompute)
    run.exposed += idle;
}

// Runs `d` until it ends or waits for a message not yet sent; whether it moved.
bool advance(Device& d, Messages& messages) {
  bool moved = false;
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
    if (task.receives) {
      auto it = messages.find(*task.receives);
      if (it == messages.end() || it->second.empty()) break;  // its sender is not there yet
      const double arrival = it->second.front();
      it->second.pop_front();
      if (arrival > ready) {
        ready = arrival;
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
      if (task.sends) messages[*task.sends].push_back(finished + task.delivery);
      if (task.stream == Stream::kCompute) run.exposed += task.exposed;
      clock = t.end;
    }
    t.computeClock = run.compute;
    run.tasks.push_back(t);
    moved = true;
  }
  return moved;
}

}  // namespace

Simulation simulateStep(const std::vector<std::vector<Task>>& programs) {
  std::vector<Device> devices(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    devices[i].tasks = &programs[i];
    devices[i].run.tasks.reserve(programs[i].size());
  }
  Messages messages;
  Simulation out;
  for (;;) {
    bool moved = false, done = true;
    for (Device& d : devices) {
      moved |= advance(d, messages);
      done &= d.next == d.tasks->size();
    }
    if (done) break;
    if (!moved) {
      for (size_t i = 0; i < devices.size(); ++i)
        if (devices[i].next < devices[i].tasks->size()) {
          out.stuck = {{i, devices[i].next}};
          break;
        }
      break;
    }
  }
  for (Device& d : devices) out.devices.push_back(std::move(d.run));
  return out;
}

}  // namespace dtc::perf
