// A plan file in memory, verified before any use: identifier, FlatBuffers structure, version,
// and every index, offset and size it contains (so a corrupt plan is an error, never a crash).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan_format.h"
#include "plan_generated.h"
#include "support/dtype.h"
#include "support/status.h"

namespace dtc {

class Plan {
 public:
  static StatusOr<Plan> load(const std::string& path);
  static StatusOr<Plan> fromBytes(std::vector<uint8_t> bytes, const std::string& name);

  const plan::Plan& root() const { return *plan::GetPlan(bytes_.data()); }
  const std::string& name() const { return name_; }
  // The function called `name`, or nullptr.
  const plan::Function* function(const std::string& name) const;
  // Bytes of the largest function arena: one arena serves every function in turn.
  uint64_t maxArenaBytes() const;

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

}  // namespace dtc
