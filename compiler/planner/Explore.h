// `dtc explore`: every way to lay a model over N devices — dp × (ep ×) (cp ×) tp × pp, cp with
// each attention method, ZeRO, sequence parallelism, micro-batches and schedule, recomputation —
// each built by the real compiler from the `dtc compile` flags it lists, its memory per rank read
// from its memory plan and its step predicted on a device profile (perf/step_time.h); ranked,
// with the reasons the others cannot run. `dtc compile --mesh auto --devices N` compiles the
// winner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perf/device_profile.h"
#include "perf/step_time.h"
#include "planner/Layout.h"
#include "support/status.h"

namespace dtc {

struct ExploreCandidate {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t ep = 1;  // experts split over ep (mixture-of-experts models); the batch over dp·ep
  int64_t cp = 1;  // sequences split over cp (context parallelism; models with causal attention)
  Layout layout;
  // The `dtc compile` flags that build it (its layout's).
  std::vector<std::string> flags() const { return layout.flags(); }
  bool built = false;    // compiled (else not, for `reason`)
  bool skipped = false;  // a memory-saving variant left unbuilt (it only adds work)
  bool feasible = false;
  bool estimated = false;  // priced from shallow copies of the model (planner/ExploreEstimate.h)
  bool unpriced = false;   // a layout the estimate cannot price (a whole compile can)
  bool given = false;      // a layout the user asked for (--try), priced beside the rest
  std::string reason;      // why it is not feasible or was not built
  uint64_t memoryPerRank = 0;  // the largest rank's bytes
  double buildSeconds = 0;     // compiling and predicting it, on one thread
  perf::StepPrediction prediction;
  // "dp=2,tp=2,pp=1" ("dp=1,ep=2,tp=2,pp=1" with experts split, "dp=1,cp=2,tp=2,pp=1" with
  // sequences split)
  std::string mesh() const;

  // Where `failure` is Megatron's vocabulary split meeting a vocabulary that does not divide
  // over tp: keeps the vocabulary whole (the table and the logits) and says to build
  // again; false otherwise, and when the flag is there already.
  bool keepVocabularyWhole(const Status& failure);
  // Where `failure` is load-balanced context parallelism meeting an op that reads the sequence
  // in order (an MoE router filling its capacity): keeps each rank's positions contiguous
  // (--no-cp-load-balance) and says to build again; false otherwise.
  bool keepSequenceOrder(const Status& failure);
};

struct ExploreResult {
  std::vector<ExploreCandidate> candidates;  // feasible first, fastest first
  int best = -1;                             // index of the pick, -1: none is feasible
  uint64_t budget = 0;                       // bytes per rank candidates must fit
  perf::DeviceProfile profile;
  int64_t devices = 0;
  std::vector<std::string> shared;  // the `dtc compile` arguments every candidate starts from
  double seconds = 0;               // the whole exploration, wall clock
  int threads = 1;                  // candidates compiled side by side
  // Candidates priced from shallow copies (planner/ExploreEstimate.h) rather than compiled whole,
  // and why (or why not).
  bool estimated = false;
  std::string estimateNote;
  // The model's FLOPs per step, as Megatron and PaLM count them for MFU (6·N per token plus
  // attention): every contraction of the forward and backward once, none recomputed or
  // replicated. The fewest any candidate executes; 0 when none was priced.
  double modelFlops = 0;
  // A candidate's FLOP/s utilisation by the model's FLOPs (MFU); its prediction's
  // `utilisation` counts what it executes (recomputation, replicated work: HFU).
  double modelUtilisation(const ExploreCandidate& c) const;
};

// Whether explore compiles every candidate whole (kExact), prices deep models from shallow
// copies (kEstimate), screens the candidates by those prices and compiles the contenders whole
// (kScreen), or chooses by the work whole compiles would unroll (kAuto): whole when it is
// little, estimates when one candidate alone would unroll too much, screening otherwise.
enum class ExploreMode { kAuto, kExact, kEstimate, kScreen };

// Explores `dtc compile` with `compileArgs` (the model and the flags every candidate shares:
// batch, optimizer, precision, ...) over `devices` devices. `memoryGiB` 0: the profile's device
// memory is the budget. `exhaustive`: also build the memory-saving variants (ZeRO-3,
// recomputation) of layouts that fit without them. `tries`: layouts the user gives (each the
// layout's `dtc compile` flags, as `--try` spells them), priced and ranked with the rest.
StatusOr<ExploreResult> explore(const std::vector<std::string>& compileArgs, int64_t devices,
                                const perf::DeviceProfile& profile, double memoryGiB,
                                bool exhaustive, ExploreMode mode = ExploreMode::kAuto,
                                const std::vector<std::string>& tries = {});

// Why the pick won: its breakdown against the runner-up.
std::string whyItWon(const ExploreResult& r);

// `dtc explore ...`; `dtc compile ... --mesh auto --devices N` (returns the flags to compile with,
// having said what it chose).
int runExplore(int argc, char** argv);
StatusOr<std::vector<std::string>> chooseLayout(const std::vector<std::string>& compileArgs,
                                                int64_t devices, const std::string& profileName,
                                                double memoryGiB);

}  // namespace dtc
