#include "comm/mpi_watch.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "comm/watchdog.h"
#include "support/runtime_options.h"
#include "support/stop_signals.h"

namespace dtc::comm {
namespace {

constexpr int kAskTag = 1, kAnswerTag = 2, kDeathTag = 3;
constexpr double kSpinSeconds = 2e-4;      // most waits end within this: poll without sleeping
constexpr int kMaxSleepMicroseconds = 50;  // the back-off's ceiling (latency a wait may add)
constexpr int kWatchPeriodMicroseconds = 20000;
constexpr double kLivenessPeriod = 0.5;  // how often the thread looks at awaited peers
constexpr double kCensusSeconds = 3;     // how long a timed-out rank waits for answers
constexpr double kDeferSeconds = 10;     // a rank that lets a lower one report waits this long
constexpr int kTimeoutExit = 3;          // StatusCode::kTimeout's exit code

struct Peer {
  int pid = 0;
  char host[64] = {};
};

struct Watch {
  MPI_Comm census = MPI_COMM_NULL;
  bool threaded = false;
  int rank = 0, size = 1;
  std::vector<Peer> peers;
  std::thread thread;
  std::atomic<bool> stop{false};
  std::mutex mutex;  // guards the wait below, which the rank's thread sets and the watchdog reads
  bool waiting = false;
  WaitFor on;
  double since = 0;
  std::deque<std::string> answers;  // buffers of answers in flight (kept: MPI reads them)
  std::vector<MPI_Request> answerRequests;
  // Death notices: the host-mates this rank saw die and told everyone of (their numbers are the
  // notices' buffers), and the ranks other hosts' watchdogs reported dead, with the reporter.
  std::vector<char> announced;
  std::deque<int> notices;
  std::vector<MPI_Request> noticeRequests;
  std::map<int, int> reportedDead;
};

Watch* watch = nullptr;

void pause(int microseconds) { usleep(static_cast<useconds_t>(microseconds)); }

// What /proc says about a process of this host: 'R', 'S', 'D', 'T', 'Z'...; 0 if it is gone.
char processState(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? 0 : text[close + 2];
}

bool onThisHost(int rank) {
  return !std::strcmp(watch->peers[rank].host, watch->peers[watch->rank].host);
}

std::string whoIs(int rank) {
  const Peer& p = watch->peers[rank];
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(p.pid) + " on " + p.host + ")";
}

bool isDead(int rank) {
  if (!onThisHost(rank)) return false;
  const char s = processState(watch->peers[rank].pid);
  return s == 0 || s == 'Z' || s == 'X';
}

// What /proc's state of a process says of it, for a report; "" while it runs.
std::string stateText(char state) {
  switch (state) {
    case 0:
    case 'Z':
    case 'X': return "has died";
    case 'T': return "is stopped (SIGSTOP)";
    case 't': return "is stopped by a debugger";
    default: return "";
  }
}

// What /proc says of a rank of this host that is not running ("is stopped (SIGSTOP)"); "" for
// one that runs, and for a rank of another host.
std::string hostMateState(int rank) {
  return onThisHost(rank) ? stateText(processState(watch->peers[rank].pid)) : "";
}

// Why a rank did not answer: from /proc on this host; on another, from what a rank of that
// host saw (`seen`: rank -> its host-mates' states, from the census answers).
std::string silence(int rank, const std::map<int, std::map<int, char>>& seen = {}) {
  if (onThisHost(rank)) {
    const std::string state = hostMateState(rank);
    return state.empty() ? "did not answer" : state;
  }
  for (const auto& [by, states] : seen)
    if (auto it = states.find(rank); it != states.end())
      return stateText(it->second) + " (seen by rank " + std::to_string(by) + " on its host)";
  return "did not answer";
}

// This rank's host-mates that are not running, "6:T 7:Z", for the census answers: a rank on
// another host sees none of them.
std::string hostMateStates() {
  std::string text;
  for (int r = 0; r < watch->size; ++r) {
    if (r == watch->rank || !onThisHost(r)) continue;
    const char state = processState(watch->peers[r].pid);
    if (!stateText(state).empty())
      text += std::to_string(r) + ":" + std::string(1, state ? state : 'X') + " ";
  }
  return text;
}

[[noreturn]] void endJob(const std::string& message) {
  std::fprintf(stderr, "dtrun: error: %s\n", message.c_str());
  std::fflush(stderr);
  if (watch->threaded) MPI_Abort(MPI_COMM_WORLD, kTimeoutExit);
  std::_Exit(kTimeoutExit);  // without MPI from this thread: the launcher ends the others
}

std::string recorded(const std::string& reason) {
  const std::string path = writeFlightRecorder(watch->rank, reason);
  return path.empty() ? "" : " (flight recorder: " + path + ")";
}

// What this rank does, for another's report: the call it waits in (first line, the same text
// on every rank of that call), then a description.
// The third line: its host-mates that are not running (hostMateStates).
std::string whatIDo() {
  const std::string mates = "\n" + hostMateStates();
  std::lock_guard<std::mutex> lock(watch->mutex);
  const CollectiveRecord current = currentCollective();
  if (watch->waiting)
    return watch->on.call + "\n" + (current.sequence ? describe(current) : watch->on.call) + mates;
  const std::string doing = activity();
  return "\ncomputing" + (doing.empty() ? std::string() : " in " + doing) + mates;
}

void answerQuestions() {
  int asked = 0;
  MPI_Status status;
  while (MPI_Iprobe(MPI_ANY_SOURCE, kAskTag, watch->census, &asked, &status) == MPI_SUCCESS &&
         asked) {
    char byte = 0;
    MPI_Recv(&byte, 1, MPI_CHAR, status.MPI_SOURCE, kAskTag, watch->census, MPI_STATUS_IGNORE);
    (void)recorded("asked by rank " + std::to_string(status.MPI_SOURCE) + ", whose wait timed out");
    watch->answers.push_back(whatIDo());
    const std::string& text = watch->answers.back();
    MPI_Request request;
    MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, status.MPI_SOURCE, kAnswerTag,
              watch->census, &request);
    watch->answerRequests.push_back(request);
  }
}

// Every other rank's answer, or none after kCensusSeconds.
std::map<int, std::string> askEveryone() {
  static const char kQuestion = '?';
  std::vector<MPI_Request> asks;
  for (int r = 0; r < watch->size; ++r) {
    if (r == watch->rank) continue;
    asks.emplace_back();
    MPI_Isend(&kQuestion, 1, MPI_CHAR, r, kAskTag, watch->census, &asks.back());
  }
  std::map<int, std::string> answers;
  const double deadline = watchdogClock() + kCensusSeconds;
  while (static_cast<int>(answers.size()) < watch->size - 1 && watchdogClock() < deadline) {
    answerQuestions();
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, watch->census, &arrived, &status) != MPI_SUCCESS ||
        !arrived) {
      pause(1000);
      continue;
    }
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string text(static_cast<size_t>(std::max(length, 0)), '\0');
    MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, kAnswerTag, watch->census,
             MPI_STATUS_IGNORE);
    answers[status.MPI_SOURCE] = text;
  }
  return answers;
}

std::string described(const WaitFor& on) {
  const CollectiveRecord current = currentCollective();
  return current.sequence ? describe(current) : on.call;
}

// Whether a rank other than this one neither answered nor is seen stopped or dead on this host
// (those will not report).
bool someRankUnaccountedFor() {
  for (int r = 0; r < watch->size; ++r)
    if (r != watch->rank && hostMateState(r).empty()) return true;
  return false;
}

[[noreturn]] void timedOut(const WaitFor& on, double waited) {
  const std::string what = described(on);
  std::map<int, std::string> answers;
  if (watch->threaded) answers = askEveryone();
  std::vector<int> arrived{watch->rank}, missing;
  std::string others;
  bool lowerReports = false;
  // Each answer's third line: the answering rank's host-mates that are not running.
  std::map<int, std::map<int, char>> seen;
  for (const auto& [by, text] : answers) {
    const size_t second = text.find('\n'), third = text.find('\n', second + 1);
    if (third == std::string::npos) continue;
    std::istringstream in(text.substr(third + 1));
    for (std::string item; in >> item;)
      if (const size_t colon = item.find(':');
          colon != std::string::npos && colon + 1 < item.size())
        seen[by][std::atoi(item.substr(0, colon).c_str())] = item[colon + 1];
  }
  for (int r : on.ranks) {
    if (r == watch->rank) continue;
    auto it = answers.find(r);
    if (it == answers.end()) {
      missing.push_back(r);
      others += "; " + whoIs(r) + " " + silence(r, seen);
      continue;
    }
    const size_t newline = it->second.find('\n');
    if (it->second.compare(0, newline, on.call) == 0) {
      arrived.push_back(r);
      lowerReports = lowerReports || r < watch->rank;
    } else {
      missing.push_back(r);
      const size_t end = it->second.find('\n', newline + 1);
      const std::string doing = it->second.substr(
          newline + 1, end == std::string::npos ? std::string::npos : end - newline - 1);
      others += "; rank " + std::to_string(r) +
                (doing.rfind("computing", 0) == 0 ? " is " : " waits in ") + doing;
    }
  }
  std::sort(arrived.begin(), arrived.end());
  const std::string flight = recorded("collective timeout in " + what);
  // No other rank answered: more likely this rank's own messages are stuck than every other
  // rank's. A rank stopped halfway through handing a message to this one can wedge what it
  // receives (shared memory queues), and then this rank, alone in the next call, times out
  // first. The others time out soon after and see further; the job ends when one reports.
  const bool heardNobody = watch->threaded && answers.empty() && someRankUnaccountedFor();
  if (lowerReports || heardNobody) {
    // Another rank reports (a lower one in the same call, or one that heard more); the job
    // ends when it does.
    const double until = watchdogClock() + kDeferSeconds;
    while (watchdogClock() < until) {
      answerQuestions();
      pause(10000);
    }
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", waited);
  endJob("rank " + std::to_string(watch->rank) + " waited " + seconds +
         " s (--collective-timeout) in " + what + ": arrived: " + rankList(arrived) +
         "; not arrived: " + rankList(missing) + others + flight);
}

// `reporter`: the rank on the dead one's host that saw it die (-1: this rank saw it).
[[noreturn]] void rankDied(int rank, const WaitFor& on, int reporter = -1) {
  const std::string seen =
      reporter >= 0 ? " (seen by rank " + std::to_string(reporter) + " on its host)" : "";
  endJob(whoIs(rank) + " died while rank " + std::to_string(watch->rank) + " waited for it in " +
         described(on) + seen + recorded("rank " + std::to_string(rank) + " died"));
}

// A rank sees only its own host's processes: each watchdog looks at its host-mates and tells
// every other rank of one that died, so that a rank waiting on another host learns of it
// within a liveness period or two rather than at the timeout.
void announceDeadHostMates() {
  for (int r = 0; r < watch->size; ++r) {
    if (r == watch->rank || watch->announced[r] || !onThisHost(r) || !isDead(r)) continue;
    watch->announced[r] = 1;
    watch->notices.push_back(r);
    for (int q = 0; q < watch->size; ++q) {
      if (q == watch->rank || q == r) continue;
      MPI_Request request;
      MPI_Isend(&watch->notices.back(), 1, MPI_INT, q, kDeathTag, watch->census, &request);
      watch->noticeRequests.push_back(request);
    }
  }
}

void readDeathNotices() {
  int arrived = 0;
  MPI_Status status;
  while (MPI_Iprobe(MPI_ANY_SOURCE, kDeathTag, watch->census, &arrived, &status) == MPI_SUCCESS &&
         arrived) {
    int dead = -1;
    MPI_Recv(&dead, 1, MPI_INT, status.MPI_SOURCE, kDeathTag, watch->census, MPI_STATUS_IGNORE);
    if (dead >= 0 && dead < watch->size) watch->reportedDead.emplace(dead, status.MPI_SOURCE);
  }
}

void watchWaits() {
  double nextLook = 0, nextNotice = 0;
  // Without it (DTC_WATCHDOG_LIVENESS=0), a wait for a rank that died on another host ends at
  // the timeout.
  const bool liveness = runtimeOptions().watchdogLiveness;
  int signal = 0;
  while (!watch->stop.load()) {
    pause(kWatchPeriodMicroseconds);
    // A stop signal may be the launcher ending the job because a rank died: look, and tell the
    // other hosts, now rather than at the next period (the launcher kills every rank soon after).
    const bool signalled = stopSignalReceived() != signal;
    signal = stopSignalReceived();
    if (watch->threaded) {
      answerQuestions();
      readDeathNotices();
      if (liveness && (signalled || watchdogClock() >= nextNotice)) {
        nextNotice = watchdogClock() + kLivenessPeriod;
        announceDeadHostMates();
      }
    }
    WaitFor on;
    double since = 0;
    {
      std::lock_guard<std::mutex> lock(watch->mutex);
      if (!watch->waiting) continue;
      on = watch->on;
      since = watch->since;
    }
    const double now = watchdogClock();
    if (now >= nextLook || signalled) {
      nextLook = now + kLivenessPeriod;
      for (int r : on.ranks)
        if (r != watch->rank && isDead(r)) rankDied(r, on);
    }
    for (int r : on.ranks)
      if (auto it = watch->reportedDead.find(r); it != watch->reportedDead.end())
        rankDied(r, on, it->second);
    if (now - since > watchdogSettings().timeoutSeconds) timedOut(on, now - since);
  }
}

}  // namespace

Status startMpiWatch(bool threadMultiple) {
  if (watch) return Status::Ok();
  auto* w = new Watch;  // never destroyed: reports may come while the process exits
  w->threaded = threadMultiple;
  MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w->size);
  if (MPI_Comm_dup(MPI_COMM_WORLD, &w->census) != MPI_SUCCESS)
    return Status::Internal("MPI_Comm_dup failed (the watchdog's communicator)");
  MPI_Comm_set_errhandler(w->census, MPI_ERRORS_RETURN);
  Peer me;
  me.pid = static_cast<int>(getpid());
  // DTC_WATCHDOG_HOST: the host a rank says it runs on, where a test makes one machine's ranks
  // stand for several hosts that cannot see each other's processes.
  if (const char* host = std::getenv("DTC_WATCHDOG_HOST"); host && *host)
    std::snprintf(me.host, sizeof me.host, "%s", host);
  else
    gethostname(me.host, sizeof me.host - 1);
  w->peers.resize(static_cast<size_t>(w->size));
  if (MPI_Allgather(&me, sizeof me, MPI_BYTE, w->peers.data(), sizeof me, MPI_BYTE, w->census) !=
      MPI_SUCCESS)
    return Status::Internal("MPI_Allgather failed (the ranks' hosts and processes)");
  w->announced.assign(static_cast<size_t>(w->size), 0);
  watch = w;
  w->thread = std::thread(watchWaits);
  return Status::Ok();
}

void stopMpiWatch() {
  if (!watch || !watch->thread.joinable()) return;
  watch->stop = true;
  watch->thread.join();
  for (MPI_Request& r : watch->answerRequests) MPI_Cancel(&r);
  for (MPI_Request& r : watch->noticeRequests) MPI_Cancel(&r);
  MPI_Comm_free(&watch->census);
}

namespace {

// What the watchdog thread times and describes: this rank's wait for `on`, from now.
void markWaiting(const WaitFor& on) {
  std::lock_guard<std::mutex> lock(watch->mutex);
  watch->waiting = true;
  watch->on = on;
  watch->since = watchdogClock();
}

void clearWaiting() {
  std::lock_guard<std::mutex> lock(watch->mutex);
  watch->waiting = false;
}

}  // namespace

Waiting::Waiting(const WaitFor& on) {
  if (watch) markWaiting(on);
}

Waiting::~Waiting() {
  if (watch) clearWaiting();
}

ExternalWait::ExternalWait(const std::string& what) {
  if (!watch || watch->size == 1) return;
  active_ = true;
  record_ = beginCollective(what, "", 0);
  WaitFor everyone{what, std::vector<int>(static_cast<size_t>(watch->size))};
  for (int r = 0; r < watch->size; ++r) everyone.ranks[static_cast<size_t>(r)] = r;
  markWaiting(everyone);
}

ExternalWait::~ExternalWait() {
  if (!active_) return;
  finishCollective(record_);
  clearWaiting();
}

Status waitAll(MPI_Request* requests, int count, const std::string& what, MPI_Status* statuses) {
  MPI_Status* into = statuses ? statuses : MPI_STATUSES_IGNORE;
  const double begin = watchdogClock();
  int sleep = 0;
  for (;;) {
    int done = 0;
    const int code = MPI_Testall(count, requests, &done, into);
    if (code != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int length = 0;
      MPI_Error_string(code, text, &length);
      return Status::Internal(what + " failed: " + std::string(text, length));
    }
    if (done) return Status::Ok();
    if (watchdogClock() - begin < kSpinSeconds) continue;
    sleep = std::min(kMaxSleepMicroseconds, std::max(20, sleep * 2));
    pause(sleep);
  }
}

}  // namespace dtc::comm
