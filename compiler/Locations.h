// The model node an op came from: the importer gives ops NameLocs with the node's name.
#pragma once

#include <string>

#include "mlir/IR/Location.h"

namespace dtc {

// The first node name in `loc` (fused locations searched in order), or "".
inline std::string locationName(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc)) return name.getName().str();
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location inner : fused.getLocations())
      if (std::string name = locationName(inner); !name.empty()) return name;
  return "";
}

}  // namespace dtc
