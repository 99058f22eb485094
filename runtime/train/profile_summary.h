// Where a run's time went, as a table (dtrun --profile-summary): a function's kernel calls
// summed by op type and by model node (layers folded: transformer.h.*.mlp), and the time the
// function spent outside its kernels (dispatch, threading, copies, uploads) as one number.
// Read from the executor's timings of this rank; the first run of the function is left out
// when there are others (it warms caches, threads and the device).
#pragma once

#include <string>

#include "exec/executor.h"

namespace dtc {

// The summary of `train_step` (or, where a plan has none that ran, of every function that
// ran); empty when nothing was timed. `rows`: the most model nodes listed.
std::string profileSummary(const Executor& ex, int rows = 15);

// A model node's name with its numeric components folded ("transformer.h.3.attn" ->
// "transformer.h.*.attn"), so that a model's layers add up under one name.
std::string foldLayerIndices(const std::string& node);

}  // namespace dtc
