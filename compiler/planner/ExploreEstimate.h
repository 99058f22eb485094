// Explore's estimate for deep models: a candidate priced from shallow copies of the model instead
// of compiled whole. Each distinct setting of the layout's dp and tp ranks (mesh without pp,
// micro-batch size, ZeRO, sequence parallelism, recomputation) is compiled by the real passes on
// the model cut to three layers of its stack, without a pipeline; its simulated program gives
// one layer's forward, backward and update, the embedding's and the head's, and the
// activations a layer keeps for its backward. The pipeline is then simulated unit by unit in the
// schedule's own order (pipeline::trainSchedules), with the layers cut into chunks by explore
// (`--stage-cuts` in the candidate's flags) and each chunk's transfer on the link its stages
// span. tests/lit/explore_estimate.test holds the estimate against whole compiles.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hf/HfFolder.h"
#include "model/LayerStack.h"
#include "onnx/OnnxTranslator.h"
#include "planner/Explore.h"

namespace dtc {

struct LayerUnit;  // one setting's shallow compiles, priced

class LayerEstimator {
 public:
  // nullptr (with `why`) when the model has no layer stack to extrapolate over.
  static std::unique_ptr<LayerEstimator> create(const std::vector<std::string>& base,
                                                const perf::DeviceProfile& profile,
                                                std::string* why);
  ~LayerEstimator();

  int64_t layers() const { return stack_.size(); }
  // The most chunks a pipeline cuts the model into: a layer each, and the embedding and the head
  // alone in the first and the last where they are apart from the stack.
  int64_t mostChunks() const {
    return layers() + (stack_.nodesBefore ? 1 : 0) + (stack_.nodeAfter.empty() ? 0 : 1);
  }
  // Settings compiled so far (each a three-layer copy).
  size_t settings() {
    std::lock_guard<std::mutex> lock(mutex_);
    return units_.size();
  }
  // Prices `c` (a layout's flags, as explore enumerates them): its prediction, its memory per
  // rank, and `--stage-cuts` added to its flags for a pipeline. Thread-safe.
  void estimate(ExploreCandidate& c, uint64_t budget);

 private:
  LayerEstimator(std::vector<std::string> base, const perf::DeviceProfile& profile,
                 LayerStack stack);
  // `microBatches` > 1: the step accumulates them, so its gradient reductions over dp run once,
  // after the last.
  StatusOr<std::shared_ptr<const LayerUnit>> unit(const std::vector<std::string>& flags,
                                                  int64_t microBatch, int64_t microBatches);

  std::vector<std::string> base_;
  perf::DeviceProfile profile_;
  LayerStack stack_;
  using Shallow = std::shared_ptr<const ModelFile>;  // the model cut to three layers
  StatusOr<Shallow> copies(const ModelFile& model, int64_t microBatch);
  StatusOr<Shallow> copiesFor(int64_t microBatch);
  // The model's copies, by micro-batch size for an ONNX export (translated at a batch; 0 for a
  // dtc model, whose copies serve every size).
  std::map<int64_t, Shallow> shallow_;
  bool onnx_ = false;
  std::string path_;
  onnx_import::TranslateOptions translate_;
  hf::FolderOptions folder_;
  int64_t batch_ = 0;
  std::mutex mutex_;
  std::map<std::string, std::shared_future<StatusOr<std::shared_ptr<const LayerUnit>>>> units_;
};

}  // namespace dtc
