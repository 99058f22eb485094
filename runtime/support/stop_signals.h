// SIGTERM and SIGINT as requests to stop: what Slurm, torchrun and a user's Ctrl-C send before
// they kill a job. The first one is recorded for the training loop to act on between steps
// (finish the step, write a checkpoint, exit); a second one ends the process at once, as the
// default action would have, unless it comes within 0.2 s of the first (a launcher signalling
// the process and its group at once: one request).
#pragma once

namespace dtc {

// Installs the handlers (idempotent).
void installStopSignalHandlers();
// The signal that asked this process to stop, or 0.
int stopSignalReceived();
// "SIGTERM", "SIGINT", or "signal N".
const char* stopSignalName(int signal);

}  // namespace dtc
