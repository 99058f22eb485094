// A plan file in memory, verified before any use: identifier, FlatBuffers structure, version,
// and every index, offset and size it contains (so a corrupt plan is an error, never a crash).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan_generated.h"
#include "planfile/plan_format.h"
#include "support/dtype.h"
#include "support/status.h"

namespace dtc {

class Plan {
 public:
  // A plan file: its checksum footer (plan_format.h), then everything fromBytes checks.
  static StatusOr<Plan> load(const std::string& path);
  // A FlatBuffer without the footer.
  static StatusOr<Plan> fromBytes(std::vector<uint8_t> bytes, const std::string& name);
  // A whole plan file's bytes (FlatBuffer and footer), as load reads them.
  static StatusOr<Plan> fromFileBytes(std::vector<uint8_t> bytes, const std::string& name);
  // `bytes` (a whole plan file) ends with a footer whose length and checksum match.
  static Status checkFooter(const std::vector<uint8_t>& bytes, const std::string& name);

  const plan::Plan& root() const { return *plan::GetPlan(bytes_.data()); }
  const std::string& name() const { return name_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  // The first function called `name`, or nullptr (pipeline plans have one per stage: see below).
  const plan::Function* function(const std::string& name) const;

  // Pipeline plans split functions and state among stages (coordinates along the mesh axis
  // `pipeline_axis`). A `stage` of -1 means every rank: an item without a stage belongs to
  // every stage, and a rank of a plan without a pipeline (stage -1) runs and holds everything.

  // Stages in the pipeline (the size of its mesh axis); 0 for a plan without one.
  int64_t stages() const;
  // Whether an item (function, state tensor) of stage `owner` is on the ranks of `stage`.
  static bool onStage(int owner, int stage) { return owner < 0 || stage < 0 || owner == stage; }
  // The function called `name` that ranks of `stage` run, or nullptr.
  const plan::Function* function(const std::string& name, int stage) const;
  // The state tensor called `name` that ranks of `stage` hold, or nullptr.
  const plan::StateTensor* stateTensor(const std::string& name, int stage) const;
  // Bytes of the largest arena among the functions `stage` runs (every function for -1): one
  // arena serves a rank's functions in turn.
  uint64_t maxArenaBytes(int stage = -1) const;

 private:
  Status verify() const;
  std::vector<uint8_t> bytes_;
  std::string name_;
};

DType toDType(plan::DType t);
int64_t numElements(const flatbuffers::Vector<int64_t>* shape);
std::string shapeString(const flatbuffers::Vector<int64_t>* shape);
// Bytes a value occupies (elements × element size).
uint64_t valueBytes(const plan::Value& v);
// Bytes a state tensor occupies on one rank (its local shape).
uint64_t stateTensorBytes(const plan::StateTensor& s);
// The attribute `name` of `step`, or null.
const plan::Attr* findStepAttr(const plan::Step& step, const char* name);

}  // namespace dtc
