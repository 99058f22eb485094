// How MPI communicators wait for other ranks: polled with a back-off instead of spinning a
// core, and watched by a thread that ends the job with a report when a wait outlives the
// watchdog's timeout (comm/watchdog.h) or a rank it waits for has died.
//
// Collectives first wait for every rank of their group to arrive (a non-blocking barrier,
// polled), then run MPI's blocking collective, which every rank has reached: the blocking
// algorithms are much faster than MPI's non-blocking ones, and what hangs is the arrival.
//
// When a wait times out, the watchdog thread asks every other rank (on a communicator of its
// own) what it does: each rank's watchdog thread answers with the call its rank waits in, or
// the op it computes, so the report names the ranks that arrived and where the others are. A
// rank that does not answer is described from /proc when it runs on this host (stopped, dead).
// A rank that hears no answer at all leaves the report to the others, which time out soon
// after (a rank stopped mid-message can wedge what another receives over shared memory).
// A rank sees only its own host's processes: each watchdog thread tells every rank of a
// host-mate that died, so a wait for a dead rank on any host ends within a second or so.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "support/status.h"

namespace dtc::comm {

// Collective over MPI_COMM_WORLD, once, after MPI_Init_thread: learns every rank's host and
// process and starts the watchdog thread (which needs MPI_THREAD_MULTIPLE; without it, waits
// are still bounded but reports are this rank's view only).
Status startMpiWatch(bool threadMultiple);
// Stops the thread; before MPI_Finalize.
void stopMpiWatch();

// A wait of this rank: what for (for reports) and which ranks (of MPI_COMM_WORLD) it needs.
struct WaitFor {
  std::string call;  // "all_reduce over dp (ranks 0,1), call #12": the same on every rank of it
  std::vector<int> ranks;  // world ranks that take part
};

// Marks this rank as waiting for `on` (polled waits and the blocking calls after them) for the
// watchdog thread, from construction to destruction.
class Waiting {
 public:
  explicit Waiting(const WaitFor& on);
  ~Waiting();
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;
};

// Polls until every request completes (`statuses`: one per request, or nullptr), backing off.
Status waitAll(MPI_Request* requests, int count, const std::string& what,
               MPI_Status* statuses = nullptr);

}  // namespace dtc::comm
