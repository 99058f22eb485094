// Writes the plan schema's Kernel enum (kernels.fbs, included by schema/plan.fbs) from
// ops/kernels.def, so the plan's kernel codes are the registry's by construction.
#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_kernel_schema OUT.fbs\n");
    return 2;
  }
  std::vector<std::pair<int, const char*>> kernels;
#define DTC_KERNEL(name, code, types, family, contract) kernels.push_back({code, #name});
#include "ops/kernels.def"
  // FlatBuffers wants enum values in ascending order, and each once.
  std::sort(kernels.begin(), kernels.end());
  for (size_t i = 1; i < kernels.size(); ++i)
    if (kernels[i].first == kernels[i - 1].first) {
      std::fprintf(stderr, "gen_kernel_schema: kernels %s and %s share code %d\n",
                   kernels[i - 1].second, kernels[i].second, kernels[i].first);
      return 1;
    }
  std::FILE* out = std::fopen(argv[1], "w");
  if (!out) {
    std::perror(argv[1]);
    return 1;
  }
  std::fprintf(out,
               "// Generated from runtime/ops/kernels.def by gen_kernel_schema: do not edit.\n"
               "namespace dtc.plan;\n\n"
               "// The kernel a step runs; codes are stable across releases.\n"
               "enum Kernel : ushort {\n  none = 0,\n");
  for (const auto& [code, name] : kernels) std::fprintf(out, "  %s = %d,\n", name, code);
  std::fprintf(out, "}\n");
  return std::fclose(out) == 0 ? 0 : 1;
}
