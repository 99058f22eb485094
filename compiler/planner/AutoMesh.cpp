#include "planner/AutoMesh.h"

#include <algorithm>
#include <cstdlib>

#include "io/files.h"
#include "planner/CommandFlags.h"
#include "planner/Explore.h"

namespace dtc {

StatusOr<std::vector<std::string>> resolveAutoMesh(const std::vector<std::string>& args) {
  // -o and --memory are taken out too: explore compiles its candidates without them.
  DTC_ASSIGN_OR_RETURN(
      CommandFlags own,
      takeCommandFlags(args, {"--mesh", "--devices", "--profile", "-o", "--output", "--memory"}, {},
                       "dtc compile"));
  const auto meshes = own.values.find("--mesh");
  const bool automatic = meshes != own.values.end() &&
                         std::count(meshes->second.begin(), meshes->second.end(), "auto") > 0;
  if (!automatic) {
    if (own.has("--devices"))
      return Status::InvalidInput("dtc compile: --devices goes with --mesh auto");
    return args;
  }
  if (meshes->second.size() > 1)
    return Status::InvalidInput("dtc compile: --mesh auto and another --mesh exclude each other");
  const std::string devices = own.value("--devices");
  char* end = nullptr;
  const long n = std::strtol(devices.c_str(), &end, 10);
  if (devices.empty() || *end || n < 1)
    return Status::InvalidInput("dtc compile: --mesh auto needs --devices N (N > 0)");
  const std::string output = own.value("--output", own.value("-o"));
  const std::string memory = own.value("--memory");
  // Exploring takes a while: a plan that could not be written is said first.
  if (!output.empty()) DTC_RETURN_IF_ERROR(io::checkOutputFile(output, "-o"));
  const double gib = memory.empty() ? 0 : std::strtod(memory.c_str(), nullptr);
  DTC_ASSIGN_OR_RETURN(std::vector<std::string> chosen,
                       chooseLayout(own.rest, n, own.value("--profile", "cpu"), gib));
  std::vector<std::string> compile = own.rest;
  if (!output.empty()) compile.insert(compile.end(), {"-o", output});
  if (!memory.empty()) compile.insert(compile.end(), {"--memory", memory});
  compile.insert(compile.end(), chosen.begin(), chosen.end());
  return compile;
}

}  // namespace dtc
