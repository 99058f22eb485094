// The layouts explore prices: every way to lay a model over N devices, as explore enumerates them,
// and the layouts a user gives with `--try`, checked so that a mistake is an error rather than a
// candidate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/CompileRequest.h"
#include "planner/Explore.h"
#include "support/status.h"

namespace dtc {

// Why a batch of `batch` samples in `m` micro-batches does not split evenly over `dp` ranks;
// empty where it does.
std::string unevenSplit(int64_t batch, int64_t m, int64_t dp);

// The greatest common divisor of the expert counts of the model's mixture-of-experts layers (its
// routers' rows), 0 for a model without one or that is not in dtc's format.
int64_t expertsDividing(const CompileRequest& request);

// What the model lets explore split besides the batch, the layers and the weights.
struct SplitAxes {
  // What every mixture-of-experts layer's expert count divides into (0: no such layer): the data
  // devices also split over ep, each ep that divides it.
  int64_t experts = 0;
  // The devices of a node: cp·tp stays within one, as Megatron places them (every layer's
  // attention exchanges keys and values over cp, as often as tp's collectives run). A model
  // without causal attention is refused cp by the compiler, and explore drops those layouts
  // (dropsContextSplit).
  int64_t perNode = 1;
  // Also split sequences where dp alone could split the micro-batch over the same devices
  // (explore --exhaustive); otherwise cp is enumerated only where it cannot.
  bool everyContextSplit = false;
  // The most chunks a pipeline cuts the model into (0: not known). Where candidates are
  // estimated, the interleaved and ZB-V schedules are enumerated with 2, 4, 8 ... chunks a device
  // up to it:
  // few micro-batches a data-parallel rank (a large dp) leave 1F1B's bubble at (p-1)/(m+p-1), and
  // only more chunks shrink it, as Megatron's and Llama 3's interleaving does.
  int64_t chunks = 0;
};

// The layouts of `devices` devices, and for each the settings that change its speed.
// `estimated` (each candidate priced from shallow copies, cheaply): beyond P, 2P and 4P
// micro-batches, every doubling that divides the batch, and more chunks a device (SplitAxes).
std::vector<ExploreCandidate> enumerateLayouts(int64_t devices, int64_t batch, bool estimated,
                                               const SplitAxes& axes);

// `c`, a context-parallel layout with all-gather attention, with the other methods (ring,
// Ulysses), unbuilt: explore prices them where all-gather's layout fits or nearly (a ring
// holds less of the sequence at a time, Ulysses about as much), rather than tripling every
// context-parallel layout that cannot fit.
std::vector<ExploreCandidate> otherAttentionMethods(const ExploreCandidate& c);

// Whether `c` is an enumerated context-parallel layout the compiler refused because the model has
// no attention to split (rather than for its sizes, which explore reports).
bool dropsContextSplit(const ExploreCandidate& c);

// A layout the user gives with --try: the `dtc compile` flags that lay it out (explore's own
// choices, nothing else).
StatusOr<ExploreCandidate> givenLayout(const std::string& text, int64_t devices, int64_t batch);

}  // namespace dtc
