// Which rank writes which piece of the state. Replicated state (a dp replica's parameters, a
// scalar every pipeline stage keeps) is written once: each distinct block goes to one of the
// ranks holding it, the one with the fewest bytes so far, so the ranks share the writing.
// Every rank computes the same layout from the plan alone, without communicating.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/boxes.h"
#include "planfile/plan.h"
#include "support/dtype.h"

namespace dtc::checkpoint {

struct PlannedSlice {
  Box box;                            // in the whole tensor
  int rank = 0;                       // the writer
  std::vector<int64_t> localOffsets;  // where the box starts in the writer's local tensor
  std::string key;                    // its name in the writer's file
};

struct PlannedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // whole
  plan::Role role = plan::Role::param;
  std::vector<PlannedSlice> slices;
};

struct CheckpointLayout {
  std::vector<PlannedTensor> tensors;  // in the plan's state order
  int ranks = 1;
};

// The layout of `plan`'s state on its mesh (one device without one).
StatusOr<CheckpointLayout> planCheckpointLayout(const Plan& plan);

// The file a rank writes its pieces to.
std::string rankFileName(int rank);

}  // namespace dtc::checkpoint
