#include "planner/Layout.h"

#include "dist/IR/LayoutText.h"

namespace dtc {

std::vector<std::string> Layout::flags() const {
  std::vector<std::string> f;
  if (!mesh.empty()) f.insert(f.end(), {"--mesh", mesh});
  if (microBatches > 0) f.insert(f.end(), {"--microbatches", std::to_string(microBatches)});
  if (!schedule.empty()) f.insert(f.end(), {"--schedule", schedule});
  if (virtualStages > 0) f.insert(f.end(), {"--virtual-stages", std::to_string(virtualStages)});
  if (zero >= 0) f.insert(f.end(), {"--zero", std::to_string(zero)});
  if (sequenceParallel) f.push_back("--sequence-parallel");
  if (!recompute.empty()) f.insert(f.end(), {"--recompute", recompute});
  if (vocabParallel) f.push_back("--vocab-parallel");
  if (wholeVocabulary) f.push_back("--no-vocab-parallel");
  if (!stageCuts.empty()) f.insert(f.end(), {"--stage-cuts", stageCuts});
  if (!cpAttention.empty()) f.insert(f.end(), {"--cp-attention", cpAttention});
  if (contiguousSequence) f.push_back("--no-cp-load-balance");
  return f;
}

Layout Layout::withoutPipeline() const {
  Layout out = *this;
  std::vector<dist::MeshAxisText> kept;
  if (llvm::Expected<std::vector<dist::MeshAxisText>> axes = dist::parseMeshText(mesh)) {
    for (const dist::MeshAxisText& a : *axes)
      if (a.name != "pp") kept.push_back(a);
  } else {
    llvm::consumeError(axes.takeError());  // a layout explore made: never malformed
  }
  out.mesh = dist::meshText(kept);
  out.microBatches = out.virtualStages = 0;
  out.schedule.clear();
  out.stageCuts.clear();
  return out;
}

}  // namespace dtc
