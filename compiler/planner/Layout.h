// One way to lay a model over devices, as explore builds, edits and compares layouts: values, not
// flag strings. `flags()` spells it as the `dtc compile` flags that build it (in one order, so
// that equal layouts read alike); those flags are what the candidate reports and compiles with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtc {

struct Layout {
  std::string mesh;           // "pp=2,dp=2,tp=2", its axes outermost first ("": one device)
  int64_t microBatches = 0;   // --microbatches (0: not given)
  std::string schedule;       // --schedule ("": not given)
  int64_t virtualStages = 0;  // --virtual-stages (0: not given)
  int64_t zero = -1;          // --zero (-1: not given)
  bool sequenceParallel = false;
  std::string recompute;            // --recompute ("": not given)
  bool vocabParallel = false;       // --vocab-parallel
  bool wholeVocabulary = false;     // --no-vocab-parallel
  std::string stageCuts;            // --stage-cuts ("": the compiler's own)
  std::string cpAttention;          // --cp-attention ("": the compiler's default)
  bool contiguousSequence = false;  // --no-cp-load-balance

  std::vector<std::string> flags() const;
  // The same layout without its pipeline: the mesh without pp, no micro-batches, schedule or
  // cuts (what one stage's layers are compiled with).
  Layout withoutPipeline() const;
  int64_t microBatchesOrOne() const { return microBatches > 0 ? microBatches : 1; }
};

}  // namespace dtc
