#include "train/batch_source.h"

#include <sys/stat.h>

#include <algorithm>

#include "data/sampler.h"
#include "data/tokens.h"
#include "io/files.h"
#include "io/npy.h"
#include "ops/attention_positions.h"
#include "ops/kernel_registry.h"

namespace dtc {
namespace {

std::string shapeText(const std::vector<int64_t>& shape, size_t from, const char* first) {
  std::string s = first;
  for (size_t i = from; i < shape.size(); ++i)
    s += (s.size() > 1 ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Which rows of each global batch this device reads: the block of its index in the group of
// mesh axes that split the input's batch dimension (DistributedSampler semantics, with
// contiguous blocks so that the devices' rows, in rank order, are the single-device batch).
struct RowSlice {
  int64_t offset = 0, rows = 0;
  // Context parallelism: the positions of each sequence (dimension 1, of `length`) this device
  // holds, in its order; empty when it holds whole sequences.
  std::vector<data::SequenceRun> runs;
  int64_t length = 0;
};

// This device's positions of a sequence of `local` per device split over `axes`, laid out
// load-balanced in `chunks` chunks (0: in order): runs of consecutive positions of the whole.
std::vector<data::SequenceRun> sequenceRuns(const comm::DeviceMesh& mesh,
                                            const std::vector<int>& axes, int64_t local,
                                            int64_t chunks) {
  const int64_t length = local * mesh.groupSize(axes), first = mesh.indexIn(axes) * local;
  std::vector<data::SequenceRun> runs;
  for (int64_t row = first; row < first + local; ++row) {
    const int64_t at = sequencePosition(row, length, chunks);
    if (!runs.empty() && runs.back().from + runs.back().count == at)
      ++runs.back().count;
    else
      runs.push_back({at, 1});
  }
  return runs;
}

// Micro-batch k of a step is rows [k·B, (k+1)·B) of the step's K·B rows.
StatusOr<RowSlice> rowSlice(Executor& ex, const plan::Binding& b, const TensorView& dest,
                            int64_t globalBatch) {
  RowSlice slice;
  slice.rows = globalBatch;
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
        return Status::InvalidInput("input '" + name +
                                    "' is split in chunks; dtrun splits data "
                                    "in plain blocks of samples only");
      if (d > 1)
        return Status::InvalidInput("input '" + name + "' is split along dimension " +
                                    std::to_string(d) +
                                    "; dtrun splits data along samples and sequences only");
      if (!mesh) return Status::InvalidInput("input '" + name + "' is split over a device mesh");
      std::vector<int> list(axes->begin(), axes->end());
      if (d == 1) {  // a sequence split over devices (context parallelism)
        if (dest.shape.size() < 2 || dest.shape[1] <= 0)
          return Status::InvalidInput(ex.plan().name() + " is invalid: input '" + name +
                                      "' is split along a sequence it does not have");
        slice.length = dest.shape[1] * mesh->groupSize(list);
        slice.runs =
            sequenceRuns(*mesh, list, dest.shape[1], b.sharding()->Get(d)->sequence_chunks());
        continue;
      }
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
  if (b.micro_batch() < 0)
    return Status::InvalidInput(ex.plan().name() + " is invalid: micro-batch < 0");
  slice.offset += static_cast<int64_t>(b.micro_batch()) * globalBatch;
  return slice;
}

// A data input of a function, as one stage or another reads it. A pipeline splits a step's
// inputs among its stages (tokens to the first, targets to the last, none to those between),
// yet every stage must agree on the sample count and order: each rank looks at the inputs of
// every stage's function of that name and fills its own.
struct DataInput {
  const plan::Function* function;
  const plan::Binding* binding;
  TensorView view;  // in this rank's arena; data is null when another stage reads the input
};

std::vector<DataInput> dataInputs(Executor& ex, const std::string& function) {
  std::vector<DataInput> inputs;
  const plan::Function* mine = ex.function(function);
  for (const plan::Function* f : *ex.plan().root().functions()) {
    if (f->name()->str() != function) continue;
    for (const plan::Binding* b : *f->arguments()) {
      if (b->role() != plan::Role::data) continue;
      DataInput in{f, b, {}};
      if (f == mine) {
        in.view = ex.view(function, b->value());
      } else {
        const plan::Value& v = *f->values()->Get(b->value());
        in.view.dtype = toDType(v.dtype());
        if (v.shape()) in.view.shape.assign(v.shape()->begin(), v.shape()->end());
      }
      inputs.push_back(in);
    }
  }
  return inputs;
}

// Batches of batch_size rows that one call of the function consumes (its micro-batches).
int64_t microBatches(const std::vector<DataInput>& inputs) {
  int64_t n = 1;
  for (const DataInput& in : inputs) n = std::max<int64_t>(n, in.binding->micro_batch() + 1);
  return n;
}

std::vector<int64_t> take(const std::vector<int64_t>& all, RowSlice s) {
  return std::vector<int64_t>(all.begin() + s.offset, all.begin() + s.offset + s.rows);
}

// DIR/<input>.npy per data input; samples are rows.
class NpySource : public BatchSource {
 public:
  static StatusOr<std::unique_ptr<BatchSource>> open(Executor& ex, const std::string& function,
                                                     const std::vector<DataInput>& inputs,
                                                     const std::string& dir, uint64_t seed) {
    auto source = std::make_unique<NpySource>();
    // A pipeline stage that scores predictions reads the labels even when another stage's
    // function takes them (the loss's): evaluation's accuracy needs them where the logits are.
    const plan::Function* mine = ex.function(function);
    const std::string targets = ex.plan().root().targets() ? ex.plan().root().targets()->str() : "";
    const std::string predictions =
        ex.plan().root().predictions() ? ex.plan().root().predictions()->str() : "";
    bool scores = false, ownsTargets = false;
    for (const plan::Binding* b : *mine->results())
      scores |= b->role() == plan::Role::output && !predictions.empty() &&
                b->name()->str() == predictions;
    for (const DataInput& in : inputs)
      ownsTargets |= in.view.data && in.binding->name()->str() == targets;
    std::string first;  // the input that set the sample count
    for (const DataInput& in : inputs) {
      const plan::Binding* b = in.binding;
      std::string name = b->name()->str();
      std::string path = dir + "/" + name + ".npy";
      DTC_ASSIGN_OR_RETURN(io::NpyArray array, io::openNpy(path));
      TensorView dest = in.view;
      if (array.dtype() != dest.dtype)
        return Status::InvalidInput(path + " has dtype " + dtypeName(array.dtype()) +
                                    "; the model's input '" + name + "' is " +
                                    dtypeName(dest.dtype));
      DTC_ASSIGN_OR_RETURN(RowSlice slice, rowSlice(ex, *b, dest, ex.plan().root().batch_size()));
      // A sequence split over devices: the file holds whole ones.
      std::vector<int64_t> sample(dest.shape);
      if (!slice.runs.empty()) sample[1] = slice.length;
      const std::vector<int64_t>& shape = array.shape();
      if (shape.empty() || std::vector<int64_t>(shape.begin() + 1, shape.end()) !=
                               std::vector<int64_t>(sample.begin() + 1, sample.end()))
        return Status::InvalidInput(path + " has shape " + shapeText(shape, 0, "[") +
                                    "; the model's input '" + name + "' needs " +
                                    shapeText(sample, 1, "[N"));
      if (!first.empty() && shape[0] != source->rows_)
        return Status::InvalidInput(path + " has " + std::to_string(shape[0]) + " samples, " +
                                    first + ".npy has " + std::to_string(source->rows_));
      if (first.empty()) first = name;
      source->rows_ = shape[0];
      if (!dest.data) {
        if (!scores || ownsTargets || name != targets) continue;  // another stage's input
        ownsTargets = true;
        source->owned_.push_back(std::make_unique<std::vector<uint8_t>>(
            static_cast<size_t>(dest.numElements()) * dtypeSize(dest.dtype)));
        dest.data = source->owned_.back()->data();
      }
      source->inputs_.push_back({name, std::move(array), dest, slice});
    }
    int64_t batch = ex.plan().root().batch_size() * microBatches(inputs);
    if (!first.empty() && source->rows_ < batch)
      return Status::InvalidInput(dir + " has " + std::to_string(source->rows_) +
                                  " samples, fewer than one batch of " + std::to_string(batch));
    source->batch_ = batch;
    source->sampler_ = std::make_unique<data::EpochSampler>(source->rows_, batch, seed);
    return std::unique_ptr<BatchSource>(std::move(source));
  }

  void fillTraining(int64_t step) override { load(sampler_->batch(step)); }
  io::Json position(int64_t steps) const override {
    io::Json p = io::Json::object();
    p.set("source", "npy");
    p.set("samples", rows_);
    p.set("batch", batch_);
    p.set("epoch", steps / sampler_->batchesPerEpoch());
    p.set("batch_in_epoch", steps % sampler_->batchesPerEpoch());
    return p;
  }
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
    for (Input& in : inputs_)
      if (in.slice.runs.empty())
        data::gatherRows(in.array, take(indices, in.slice), in.dest.data);
      else
        data::gatherRowRuns(in.array, take(indices, in.slice), in.slice.runs, in.slice.length,
                            in.dest.data);
  }

  std::vector<Input> inputs_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;  // labels of another stage's input
  int64_t rows_ = 0, batch_ = 1;
  std::unique_ptr<data::EpochSampler> sampler_;
};

// Windows of T+1 tokens: the model's token input gets the first T, its targets the last T.
class TokenSource : public BatchSource {
 public:
  static StatusOr<std::unique_ptr<BatchSource>> open(Executor& ex,
                                                     const std::vector<DataInput>& inputs,
                                                     const std::string& path, uint64_t seed) {
    auto source = std::make_unique<TokenSource>();
    std::string targets = ex.plan().root().targets() ? ex.plan().root().targets()->str() : "";
    // One (tokens, targets) pair per micro-batch; in a pipeline, this rank may fill either,
    // both or neither (views without data).
    source->micro_.resize(microBatches(inputs));
    std::vector<const DataInput*> tokensInputs(source->micro_.size(), nullptr),
        targetsInputs(source->micro_.size(), nullptr);
    for (const DataInput& in : inputs) {
      const plan::Binding* b = in.binding;
      const std::string name = b->name()->str();
      if (in.view.dtype != DType::kI64 || in.view.shape.size() != 2)
        return Status::InvalidInput(path + " is a token file, but the model's input '" + name +
                                    "' is not int64 [B, T]");
      Micro& m = source->micro_[b->micro_batch()];
      const bool isTargets = name == targets;
      const DataInput*& seen = (isTargets ? targetsInputs : tokensInputs)[b->micro_batch()];
      // Several stages may read one input; a second input of another name is not ours.
      if (seen && (seen->binding->name()->str() != name || seen->function == in.function))
        return Status::InvalidInput(path +
                                    " is a token file, but the model takes more than "
                                    "tokens and targets");
      if (seen && !in.view.data) continue;  // keep the view this rank fills
      seen = &in;
      (isTargets ? m.targets : m.tokens) = in.view;
      if (!isTargets) source->tokensName_ = name;
    }
    for (size_t k = 0; k < source->micro_.size(); ++k) {
      Micro& m = source->micro_[k];
      if (!tokensInputs[k] || !targetsInputs[k] || m.targets.shape != m.tokens.shape)
        return Status::InvalidInput(path +
                                    " is a token file, but the model does not take "
                                    "[B, T] tokens and targets");
      DTC_ASSIGN_OR_RETURN(m.slice, rowSlice(ex, *tokensInputs[k]->binding, m.tokens,
                                             ex.plan().root().batch_size()));
    }
    const DataInput& tokensInput = *tokensInputs[0];
    source->tokens_ = source->micro_[0].tokens;
    DTC_ASSIGN_OR_RETURN(source->file_, data::TokenShards::open(path));
    // Windows of the whole sequence, of which a device may read its part (context parallelism).
    source->t_ = source->micro_[0].slice.runs.empty() ? source->tokens_.shape[1]
                                                      : source->micro_[0].slice.length;
    source->batch_ = ex.plan().root().batch_size() * static_cast<int64_t>(source->micro_.size());
    source->seed_ = seed;
    if (source->file_.size() <= source->t_)
      return Status::InvalidInput(path + " holds " + std::to_string(source->file_.size()) +
                                  " tokens, too few for one window of " +
                                  std::to_string(source->t_ + 1));
    // Every id must index the embedding table that reads the tokens (checked on every rank,
    // which all fail alike).
    const plan::Function& f = *tokensInput.function;
    for (const plan::Step* step : *f.steps())
      if (step->kernel() == Kernel::embedding && step->inputs()->size() == 2 &&
          step->inputs()->Get(1) == tokensInput.binding->value()) {
        const auto* table = f.values()->Get(step->inputs()->Get(0))->shape();
        int64_t vocab = table && table->size() ? table->Get(0) : 0;
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
          return Status::InvalidInput(
              path + " holds token id " + std::to_string(source->file_.maxTokenPlusOne() - 1) +
              ", outside the model's vocabulary of " + std::to_string(vocab));
      }
    return std::unique_ptr<BatchSource>(std::move(source));
  }

  void fillTraining(int64_t step) override {
    fill(data::windowOffsets(file_.size(), batch_, t_, seed_, step));
  }
  // Windows are drawn from the random stream of each step: the next stream is the position.
  io::Json position(int64_t steps) const override {
    io::Json p = io::Json::object();
    p.set("source", "tokens");
    p.set("tokens", file_.size());
    p.set("shards", static_cast<int64_t>(file_.paths().size()));
    p.set("context", t_);
    p.set("windows_per_step", batch_);
    p.set("next_stream", steps);
    return p;
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
    return name == tokensName_ && tokens_.data ? &tokens_ : nullptr;
  }

 private:
  struct Micro {
    TensorView tokens, targets;
    RowSlice slice;  // this device's windows of the step
  };
  void fill(const std::vector<int64_t>& offsets) {
    for (Micro& m : micro_)
      // A view without data is another stage's input: fillWindows skips it.
      if (m.slice.runs.empty())
        data::fillWindows(file_, take(offsets, m.slice), t_, m.tokens.i64(), m.targets.i64());
      else
        data::fillWindowRuns(file_, take(offsets, m.slice), m.slice.runs, m.tokens.i64(),
                             m.targets.i64());
  }

  data::TokenShards file_;
  std::vector<Micro> micro_;
  TensorView tokens_;  // micro-batch 0's, for input()
  std::string tokensName_;
  int64_t t_ = 0, batch_ = 0;  // batch_: the step's windows (every device, every micro-batch)
  uint64_t seed_ = 0;
};

}  // namespace

Status checkDataPath(const std::string& path) {
  if (data::isTokenGlob(path)) return data::tokenShardPaths(path).status();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::InvalidInput("cannot open " + path + ": no such file or directory");
  return Status::Ok();
}

StatusOr<std::unique_ptr<BatchSource>> openBatchSource(Executor& ex, const std::string& function,
                                                       const std::string& path, uint64_t seed) {
  if (!ex.function(function))
    return Status::InvalidInput(ex.plan().name() + " has no " + function + " function");
  std::vector<DataInput> inputs = dataInputs(ex, function);
  DTC_RETURN_IF_ERROR(checkDataPath(path));
  // A folder of .npy arrays, or token files: one, a folder of shards (*.bin and no .npy), or a
  // glob of them.
  if (io::isDirectory(path) && !data::holdsTokenShards(path))
    return NpySource::open(ex, function, inputs, path, seed);
  return TokenSource::open(ex, inputs, path, seed);
}

}  // namespace dtc
