#include "exec/batch_source.h"

#include <sys/stat.h>

#include <algorithm>

#include "data/sampler.h"
#include "data/tokens.h"
#include "io/npy.h"

namespace dtc {
namespace {

std::string shapeText(const std::vector<int64_t>& shape, size_t from, const char* first) {
  std::string s = first;
  for (size_t i = from; i < shape.size(); ++i) s += (s.size() > 1 ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Which rows of each global batch this device reads: the block of its index in the group of
// mesh axes that split the input's batch dimension (DistributedSampler semantics, with
// contiguous blocks so that the devices' rows, in rank order, are the single-device batch).
struct RowSlice {
  int64_t offset = 0, rows = 0;
};

// Micro-batch k of a step is rows [k·B, (k+1)·B) of the step's K·B rows.
StatusOr<RowSlice> rowSlice(Executor& ex, const plan::Binding& b, const TensorView& dest,
                            int64_t globalBatch) {
  RowSlice slice{0, globalBatch};
  std::string name = b.name()->str();
  if (b.batch_dim() > 0)
    return Status::InvalidInput("input '" + name + "' has its samples along dimension " +
                                std::to_string(b.batch_dim()) + "; dtrun reads them along 0");
  if (b.sharding() && b.sharding()->size()) {
    comm::DeviceMesh* mesh = ex.mesh();
    for (uint32_t d = 0; d < b.sharding()->size(); ++d) {
      const auto* axes = b.sharding()->Get(d)->axes();
      if (!axes || axes->size() == 0) continue;
      if (b.sharding()->Get(d)->blocks() != 1)
        return Status::InvalidInput("input '" + name + "' is split in chunks; dtrun splits data "
                                    "in plain blocks of samples only");
      if (d != 0)
        return Status::InvalidInput("input '" + name + "' is split along dimension " +
                                    std::to_string(d) + "; dtrun splits data along samples only");
      if (!mesh) return Status::InvalidInput("input '" + name + "' is split over a device mesh");
      std::vector<int> list(axes->begin(), axes->end());
      int64_t parts = mesh->groupSize(list);
      slice.rows = globalBatch / parts;
      slice.offset = mesh->indexIn(list) * slice.rows;
    }
  }
  if (dest.shape.empty() || dest.shape[0] != slice.rows)
    return Status::InvalidInput(ex.plan().name() + " is invalid: input '" + name + "' holds " +
                                std::to_string(dest.shape.empty() ? 0 : dest.shape[0]) +
                                " samples per device, its batch share is " +
                                std::to_string(slice.rows));
  if (b.micro_batch() < 0) return Status::InvalidInput(ex.plan().name() + " is invalid: micro-batch < 0");
  slice.offset += static_cast<int64_t>(b.micro_batch()) * globalBatch;
  return slice;
}

// Batches of batch_size rows that one call of `f` consumes (its micro-batches).
int64_t microBatches(const plan::Function& f) {
  int64_t n = 1;
  for (const plan::Binding* b : *f.arguments())
    if (b->role() == plan::Role::data) n = std::max<int64_t>(n, b->micro_batch() + 1);
  return n;
}

std::vector<int64_t> take(const std::vector<int64_t>& all, RowSlice s) {
  return std::vector<int64_t>(all.begin() + s.offset, all.begin() + s.offset + s.rows);
}

// DIR/<input>.npy per data input; samples are rows.
class NpySource : public BatchSource {
 public:
  static StatusOr<std::unique_ptr<BatchSource>> open(Executor& ex, const plan::Function& f,
                                                     const std::string& dir, uint64_t seed) {
    auto source = std::make_unique<NpySource>();
    for (const plan::Binding* b : *f.arguments()) {
      if (b->role() != plan::Role::data) continue;
      std::string name = b->name()->str();
      std::string path = dir + "/" + name + ".npy";
      DTC_ASSIGN_OR_RETURN(io::NpyArray array, io::openNpy(path));
      TensorView dest = ex.view(f.name()->str(), b->value());
      if (array.dtype() != dest.dtype)
        return Status::InvalidInput(path + " has dtype " + dtypeName(array.dtype()) +
                                    "; the model's input '" + name + "' is " +
                                    dtypeName(dest.dtype));
      const std::vector<int64_t>& shape = array.shape();
      if (shape.empty() || std::vector<int64_t>(shape.begin() + 1, shape.end()) !=
                               std::vector<int64_t>(dest.shape.begin() + 1, dest.shape.end()))
        return Status::InvalidInput(path + " has shape " + shapeText(shape, 0, "[") +
                                    "; the model's input '" + name + "' needs " +
                                    shapeText(dest.shape, 1, "[N"));
      if (!source->inputs_.empty() && shape[0] != source->rows_)
        return Status::InvalidInput(path + " has " + std::to_string(shape[0]) + " samples, " +
                                    source->inputs_.front().name + ".npy has " +
                                    std::to_string(source->rows_));
      source->rows_ = shape[0];
      DTC_ASSIGN_OR_RETURN(RowSlice slice, rowSlice(ex, *b, dest, ex.plan().root().batch_size()));
      source->inputs_.push_back({name, std::move(array), dest, slice});
    }
    int64_t batch = ex.plan().root().batch_size() * microBatches(f);
    if (!source->inputs_.empty() && source->rows_ < batch)
      return Status::InvalidInput(dir + " has " + std::to_string(source->rows_) +
                                  " samples, fewer than one batch of " + std::to_string(batch));
    source->batch_ = batch;
    source->sampler_ = std::make_unique<data::EpochSampler>(source->rows_, batch, seed);
    return std::unique_ptr<BatchSource>(std::move(source));
  }

  void fillTraining(int64_t) override { load(sampler_->nextBatch()); }
  int64_t evalBatches() const override { return rows_ / batch_; }
  void fillEval(int64_t k) override {
    std::vector<int64_t> indices(batch_);
    for (int64_t i = 0; i < batch_; ++i) indices[i] = k * batch_ + i;
    load(indices);
  }
  int64_t samples() const override { return rows_; }
  const TensorView* input(const std::string& name) const override {
    for (const Input& in : inputs_)
      if (in.name == name) return &in.dest;
    return nullptr;
  }

 private:
  struct Input {
    std::string name;
    io::NpyArray array;
    TensorView dest;  // where one batch goes in the arena
    RowSlice slice;   // this device's rows of each batch
  };
  void load(const std::vector<int64_t>& indices) {
    for (Input& in : inputs_) data::gatherRows(in.array, take(indices, in.slice), in.dest.data);
  }

  std::vector<Input> inputs_;
  int64_t rows_ = 0, batch_ = 1;
  std::unique_ptr<data::EpochSampler> sampler_;
};

// Windows of T+1 tokens: the model's token input gets the first T, its targets the last T.
class TokenSource : public BatchSource {
 public:
  static StatusOr<std::unique_ptr<BatchSource>> open(Executor& ex, const plan::Function& f,
                                                     const std::string& path, uint64_t seed) {
    auto source = std::make_unique<TokenSource>();
    std::string fn = f.name()->str();
    std::string targets = ex.plan().root().targets() ? ex.plan().root().targets()->str() : "";
    // One (tokens, targets) pair per micro-batch.
    source->micro_.resize(microBatches(f));
    std::vector<const plan::Binding*> tokensBindings(source->micro_.size(), nullptr);
    for (const plan::Binding* b : *f.arguments()) {
      if (b->role() != plan::Role::data) continue;
      TensorView view = ex.view(fn, b->value());
      if (view.dtype != DType::kI64 || view.shape.size() != 2)
        return Status::InvalidInput(path + " is a token file, but the model's input '" +
                                    b->name()->str() + "' is not int64 [B, T]");
      Micro& m = source->micro_[b->micro_batch()];
      if (b->name()->str() == targets) {
        m.targets = view;
      } else if (!tokensBindings[b->micro_batch()]) {
        tokensBindings[b->micro_batch()] = b;
        m.tokens = view;
        source->tokensName_ = b->name()->str();
      } else {
        return Status::InvalidInput(path + " is a token file, but the model takes more than "
                                    "tokens and targets");
      }
    }
    for (size_t k = 0; k < source->micro_.size(); ++k) {
      Micro& m = source->micro_[k];
      if (!tokensBindings[k] || !m.targets.data || m.targets.shape != m.tokens.shape)
        return Status::InvalidInput(path + " is a token file, but the model does not take "
                                    "[B, T] tokens and targets");
      DTC_ASSIGN_OR_RETURN(m.slice, rowSlice(ex, *tokensBindings[k], m.tokens,
                                             ex.plan().root().batch_size()));
    }
    const plan::Binding* tokensBinding = tokensBindings[0];
    source->tokens_ = source->micro_[0].tokens;
    DTC_ASSIGN_OR_RETURN(source->file_, data::TokenFile::open(path));
    source->t_ = source->tokens_.shape[1];
    source->batch_ = ex.plan().root().batch_size() * static_cast<int64_t>(source->micro_.size());
    source->seed_ = seed;
    if (source->file_.size() <= source->t_)
      return Status::InvalidInput(path + " holds " + std::to_string(source->file_.size()) +
                                  " tokens, too few for one window of " +
                                  std::to_string(source->t_ + 1));
    // Every id must index the embedding table that reads the tokens.
    for (const plan::Step* step : *f.steps())
      if (step->op()->str() == "embedding" && step->inputs()->size() == 2 &&
          step->inputs()->Get(1) == tokensBinding->value()) {
        int64_t vocab = ex.view(fn, step->inputs()->Get(0)).shape[0];
        // A table split by vocabulary holds a block of the rows on each device.
        if (step->attrs() && ex.mesh())
          for (const plan::Attr* a : *step->attrs())
            if (a->name()->str() == "vocab_axes" && a->ints()) {
              std::vector<int> axes(a->ints()->begin(), a->ints()->end());
              bool valid = true;
              for (int axis : axes) valid &= axis >= 0 && axis < (int)ex.mesh()->sizes().size();
              if (valid) vocab *= ex.mesh()->groupSize(axes);
            }
        if (source->file_.maxTokenPlusOne() > vocab)
          return Status::InvalidInput(path + " holds token id " +
                                      std::to_string(source->file_.maxTokenPlusOne() - 1) +
                                      ", outside the model's vocabulary of " +
                                      std::to_string(vocab));
      }
    return std::unique_ptr<BatchSource>(std::move(source));
  }

  void fillTraining(int64_t step) override {
    fill(data::windowOffsets(file_.size(), batch_, t_, seed_, step));
  }
  // Evaluation walks consecutive, non-overlapping windows.
  int64_t evalBatches() const override { return samples() / batch_; }
  void fillEval(int64_t k) override {
    std::vector<int64_t> offsets(batch_);
    for (int64_t b = 0; b < batch_; ++b) offsets[b] = (k * batch_ + b) * t_;
    fill(offsets);
  }
  int64_t samples() const override { return (file_.size() - 1) / t_; }
  const TensorView* input(const std::string& name) const override {
    return name == tokensName_ ? &tokens_ : nullptr;
  }

 private:
  struct Micro {
    TensorView tokens, targets;
    RowSlice slice;  // this device's windows of the step
  };
  void fill(const std::vector<int64_t>& offsets) {
    for (Micro& m : micro_)
      data::fillWindows(file_, take(offsets, m.slice), t_, m.tokens.i64(), m.targets.i64());
  }

  data::TokenFile file_;
  std::vector<Micro> micro_;
  TensorView tokens_;  // micro-batch 0's, for input()
  std::string tokensName_;
  int64_t t_ = 0, batch_ = 0;  // batch_: the step's windows (every device, every micro-batch)
  uint64_t seed_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<BatchSource>> openBatchSource(Executor& ex, const std::string& function,
                                                       const std::string& path, uint64_t seed) {
  const plan::Function* f = ex.plan().function(function);
  if (!f) return Status::InvalidInput(ex.plan().name() + " has no " + function + " function");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::InvalidInput("cannot open " + path + ": no such file or directory");
  if (S_ISDIR(st.st_mode)) return NpySource::open(ex, *f, path, seed);
  return TokenSource::open(ex, *f, path, seed);
}

}  // namespace dtc
