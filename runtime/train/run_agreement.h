// Before anything collective happens, the ranks of a job agree: every rank is ready (its flags,
// plan and inputs are good) and every rank runs the same program on the same inputs (the same
// plan, steps, seed, data, schedule...). A rank given another plan or flag would otherwise
// train on silently, hang, or corrupt memory inside MPI; here it is one error naming the field
// and the ranks.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "support/status.h"

namespace dtc {

// One thing every rank must have alike, and how this rank sees it ("5", "1234 bytes, crc32 ...").
struct RunField {
  std::string name;  // "--steps", "the plan"
  std::string value;
};

// A failure every rank knows about ends the job in order: rank 0 reports it, nobody is left
// waiting in a collective, no abort is needed.
struct AgreedFailure {
  bool agreed = false;
};

// Collective: every rank learns whether any rank failed (`outcome.agreed`); rank 0's result
// carries the message of the lowest failing rank, the others' say which rank failed.
Status agree(comm::Communicator& world, const Status& local, AgreedFailure& outcome);

// Collective, the job's first: agree on `local` (this rank is ready), then on `fields` (the
// same on every rank). A disagreement is an InvalidInput error on every rank; rank 0's names
// the first field that differs and which ranks have which value.
Status agreeToStart(comm::Communicator& world, const Status& local,
                    const std::vector<RunField>& fields);

// A cheap fingerprint of a file or a directory's files (their names, sizes and a CRC of blocks
// spread over each): equal on two hosts for the same data, almost surely unequal otherwise.
std::string contentFingerprint(const std::string& path);

}  // namespace dtc
