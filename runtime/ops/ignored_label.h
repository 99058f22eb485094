// The label a loss leaves out (F.cross_entropy's ignore_index), when it has one: rows with it
// add nothing and get no gradient, and any other label must be a class.
#pragma once

#include <cstdint>

namespace dtc {

struct IgnoredLabel {
  bool any = false;
  int64_t label = 0;
  bool ignores(int64_t l) const { return any && l == label; }
};

}  // namespace dtc
