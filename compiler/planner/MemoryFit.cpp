#include "planner/MemoryFit.h"

#include <cstdio>

#include "planfile/plan.h"
#include "planfile/summary.h"

namespace dtc {
namespace {

// Bytes as people read them: GiB, MiB or KiB to three significant places, or bytes.
std::string bytesText(uint64_t bytes) {
  char text[48];
  const double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30))
    std::snprintf(text, sizeof text, "%.3g GiB", b / (1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(text, sizeof text, "%.3g MiB", b / (1ull << 20));
  else if (bytes >= (1ull << 10))
    std::snprintf(text, sizeof text, "%.3g KiB", b / (1ull << 10));
  else
    std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  return text;
}

std::string stageName(const std::vector<uint64_t>& byStage, size_t s) {
  return byStage.size() == 1 ? "every rank" : "stage " + std::to_string(s);
}

}  // namespace

std::vector<uint64_t> rankBytesByStage(const Plan& plan) {
  const int64_t stages = plan.stages();
  if (stages == 0) return {rankMemoryBytes(plan, -1)};
  std::vector<uint64_t> bytes;
  for (int s = 0; s < stages; ++s) bytes.push_back(rankMemoryBytes(plan, s));
  return bytes;
}

Status checkFits(const Plan& plan, uint64_t budget) {
  const std::vector<uint64_t> byStage = rankBytesByStage(plan);
  for (size_t s = 0; s < byStage.size(); ++s)
    if (byStage[s] > budget)
      return Status::InvalidInput("the plan needs " + bytesText(byStage[s]) + " on " +
                                  stageName(byStage, s) + ", over --memory " + bytesText(budget) +
                                  " (--recompute auto, --zero 3, more tensor, pipeline or context "
                                  "parallelism or a smaller batch "
                                  "need less)");
  return Status::Ok();
}

StatusOr<std::string> chooseRecompute(
    const std::function<StatusOr<std::vector<uint8_t>>(const std::string& mode)>& compile,
    uint64_t budget, std::string& report) {
  const char* settings[] = {"none", "selective", "full"};  // by the compute they add
  std::vector<std::vector<uint64_t>> needs;                // [setting][stage]
  for (const char* setting : settings) {
    DTC_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, compile(setting));
    DTC_ASSIGN_OR_RETURN(Plan plan, Plan::fromFileBytes(std::move(bytes), "the compiled plan"));
    needs.push_back(rankBytesByStage(plan));
  }
  std::vector<std::string> chosen;
  report = "--recompute auto (--memory " + bytesText(budget) + "):";
  for (size_t s = 0; s < needs[0].size(); ++s) {
    size_t pick = 0;
    while (pick < needs.size() && needs[pick][s] > budget) ++pick;
    if (pick == needs.size())
      return Status::InvalidInput(
          stageName(needs[0], s) + " needs " + bytesText(needs.back()[s]) +
          " even with --recompute full, over --memory " + bytesText(budget) +
          " (--zero 3, more tensor, pipeline or context parallelism or a smaller "
          "batch need less)");
    chosen.push_back(settings[pick]);
    report += (s ? ";" : "") + std::string(" ") + stageName(needs[0], s) + " " + settings[pick] +
              " (" + bytesText(needs[pick][s]) + "; none " + bytesText(needs[0][s]) +
              ", selective " + bytesText(needs[1][s]) + ", full " + bytesText(needs[2][s]) + ")";
  }
  std::string modes = chosen[0];
  bool same = true;
  for (size_t s = 1; s < chosen.size(); ++s) {
    same &= chosen[s] == chosen[0];
    modes += "," + chosen[s];
  }
  return same ? chosen[0] : modes;
}

}  // namespace dtc
