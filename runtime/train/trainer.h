// The training loop behind `dtrun`: data in, steps run, progress out, checkpoints and
// parameters saved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "planfile/plan.h"
#include "train/run_agreement.h"
#include "train/train_flags.h"

namespace dtc {

// What every rank of a job must have alike (train/run_agreement.h): the plan, and every flag
// that shapes the run (train/train_flags.def's Agree column).
std::vector<RunField> runFields(const Plan& plan, const TrainOptions& options);

// The job must have one process per device of the plan's mesh (one for a plan without a mesh).
Status checkWorldSize(const Plan& plan, int processes, const std::string& launcher);

// Prints `status` as dtrun reports it ("dtrun: error: ..."; a stop by a signal without "error")
// on stderr and returns its exit code.
int reportFailure(const Status& status);
// A failure every rank of `world` knows of: rank 0 reports it, the others wait until it has (a
// launcher tears the job down as soon as one process exits with an error, and rank 0 would be
// killed before it printed). Collective; returns the exit code.
int reportAgreedFailure(comm::Communicator& world, const Status& status);

// Runs on every process of the job (`world`: one per device of the plan's mesh; a plan without
// a mesh needs a job of one). Only rank 0 prints, logs and saves; every rank writes its own
// pieces of a checkpoint. SIGTERM or SIGINT on any rank stops every rank after the same step,
// with a checkpoint when one was asked for (Status::Stopped). On several processes a failure
// is reported here, once, before this returns (the caller only exits with its code).
Status train(const Plan& plan, const TrainOptions& options,
             std::unique_ptr<comm::Communicator> world);

}  // namespace dtc
