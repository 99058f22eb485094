// The collective watchdog's process-wide state: how long a rank may wait for the others, what
// the program is doing (for reports that name the function, the step and the model node), and
// the flight recorder (this rank's last collectives, written as JSON when something hangs).
//
// The communicators time their waits against the timeout and record every collective here;
// the trainer and the executor say what runs. One process, one watchdog: everything here is
// global, and the recording calls come from the thread that communicates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc::comm {

// What a healthy step never reaches: a collective that waits longer ends the job.
constexpr double kDefaultCollectiveTimeoutSeconds = 600;

struct WatchdogSettings {
  double timeoutSeconds = kDefaultCollectiveTimeoutSeconds;
  // Where this rank's flight recorder goes when the job hangs ("" : nowhere).
  std::string flightRecorderPath;
};
void configureWatchdog(const WatchdogSettings& settings);
const WatchdogSettings& watchdogSettings();

// What this rank is doing: a phase ("startup", "step 12", "checkpoint at step 10"), the
// function the executor runs, and the model node of the step it runs now. The node is a
// pointer to a string that outlives its use (the executor's list of step labels).
void setPhase(const std::string& phase);
void setFunction(const std::string& function);
void setNode(const std::string* node);
// "train_step, step 12, node 'fc1' (all_reduce)": the parts that are known.
std::string activity();

// One communication call, from start to end.
struct CollectiveRecord {
  uint64_t sequence = 0;  // this rank's count of calls so far
  std::string op;         // "all_reduce", "recv from rank 1", ...
  std::string group;      // "dp (ranks 0,1)"
  int64_t bytes = 0;
  std::string where;          // activity() when it started
  double start = 0, end = 0;  // seconds since the watchdog started; end 0 while it waits
};

// Records the start of a call; returns the id finishCollective takes.
uint64_t beginCollective(const std::string& op, const std::string& group, int64_t bytes);
void finishCollective(uint64_t id);
// The call in progress (the latest begun and not finished); sequence 0 if none.
CollectiveRecord currentCollective();
// "all_reduce over dp (ranks 0,1), 4096 bytes, flight recorder call 37, in train_step, step 12,
// node 'fc1'".
std::string describe(const CollectiveRecord& record);
double watchdogClock();
// "rank 3", "ranks 0,2": how reports list ranks.
std::string rankList(const std::vector<int>& ranks);

// A wait outside the communicators that other ranks can hold up: a device stream whose NCCL
// collectives are in flight. While one lasts, the watchdog times it as a collective of the whole
// job (the report, the census and the exit are the same). Scoped; nothing without MPI.
class ExternalWait {
 public:
  explicit ExternalWait(const std::string& what);
  ~ExternalWait();
  ExternalWait(const ExternalWait&) = delete;
  ExternalWait& operator=(const ExternalWait&) = delete;

 private:
  bool active_ = false;
  uint64_t record_ = 0;
};

// Writes the newest records (oldest first) and `reason` to the settings' path, through a
// temporary name; nothing without a path. Returns the path written, or "".
std::string writeFlightRecorder(int rank, const std::string& reason);

}  // namespace dtc::comm
