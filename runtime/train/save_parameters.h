// The consolidated model (dtrun --save DIR): every parameter whole, under PyTorch's names and
// its tied weights' other names, in DIR/model.safetensors, so that
// `model.load_state_dict(load_file(...))` takes it as it is; or, above `maxShardBytes`, in
// shards and their index as save_pretrained writes them (model-00001-of-00003.safetensors...,
// model.safetensors.index.json).
#pragma once

#include <cstdint>
#include <string>

#include "exec/executor.h"

namespace dtc {

// The float type --save writes: `flag` (--save-dtype f32, bf16 or f16), or when not given
// float32, or under --format hf (`hf`) the torch_dtype of the model's config (a bfloat16
// checkpoint is saved as bfloat16, as transformers would).
StatusOr<DType> saveDtypeFor(const Plan& plan, const std::string& flag, bool hf);
// torch's name of it ("bfloat16"), as config.json states it.
std::string torchDtypeName(DType dtype);

struct SaveOptions {
  uint64_t maxShardBytes = 5'000'000'000;
  DType dtype = DType::kF32;  // the files' float type (the state's float32 rounded to it)
  // Hugging Face's names: a parameter with external tensors (Mixtral's experts) is written as
  // those, each expert apart, rather than under its own name.
  bool external = false;
};

// Every rank calls it (each sends rank 0 the pieces it writes, a bounded block at a time); only
// `write` (rank 0) writes. The host state must be current (Executor::pullState).
Status saveParameters(Executor& ex, const std::string& dir, bool write, const SaveOptions& options);

}  // namespace dtc
