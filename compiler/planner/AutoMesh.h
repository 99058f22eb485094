// `dtc compile --mesh auto --devices N [--profile P]`: the layout explore picks, compiled.
#pragma once

#include <string>
#include <vector>

#include "support/status.h"

namespace dtc {

// `dtc compile`'s arguments (what follows the subcommand) with `--mesh auto`, `--devices` and
// `--profile` replaced by the flags of explore's pick on that many devices of that profile (cpu
// by default, saying on stdout what won and why); the arguments as given where the mesh is not
// auto. -o and --memory stay for the compile of the pick; --memory is also the budget explored.
StatusOr<std::vector<std::string>> resolveAutoMesh(const std::vector<std::string>& args);

}  // namespace dtc
