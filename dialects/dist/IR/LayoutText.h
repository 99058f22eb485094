// The command line's notation for a device mesh ("dp=2,tp=4") and for a tensor's split
// (--shard PATTERN=SPEC: "blocks.*.attn.c_attn.weight=-,3xtp"), parsed in one place for every
// reader: dtc compile's flags, dtc-user-shardings, and explore's given layouts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace dtc::dist {

struct MeshAxisText {
  std::string name;
  int64_t size = 1;
};

// "name=size[,name=size...]": each axis once, each size >= 1 (spaces around parts allowed). An
// error says what is wrong with `text` as one phrase ("mesh wants name=size[,name=size], got
// 'dp'", "mesh axis 'dp' named twice").
llvm::Expected<std::vector<MeshAxisText>> parseMeshText(llvm::StringRef text);

// The axes as the notation writes them.
std::string meshText(const std::vector<MeshAxisText>& axes);

// One dimension of a --shard SPEC: "-" (whole), "tp", "dp+tp" (over both, major first), or
// "3xtp" (three chunks one after another, each split over the axes: a fused q/k/v by heads).
struct ShardDimText {
  int64_t chunks = 1;
  std::vector<std::string> axes;  // empty: whole
};

struct ShardSpecText {
  std::string pattern;  // a glob over parameter names
  std::vector<ShardDimText> dims;
};

// "PATTERN=SPEC" with SPEC a comma-separated list of dimensions. The axes are not checked against
// a mesh here.
llvm::Expected<ShardSpecText> parseShardSpec(llvm::StringRef item);

}  // namespace dtc::dist
