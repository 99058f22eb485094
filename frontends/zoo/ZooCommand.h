// `dtc zoo MODEL [flags] -o FILE`: the flags of each built-in model, checked, and the model
// file they describe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace dtc::zoo {

struct ZooModel {
  std::vector<uint8_t> bytes;  // the model file's contents
  std::string output;          // -o
};

// argv[1] is "zoo", argv[2] the model's name, its flags after.
StatusOr<ZooModel> zooModelFromArgs(int argc, char** argv);

}  // namespace dtc::zoo
