#include "train/generate.h"

#include <algorithm>
#include <cstring>

namespace dtc {

StatusOr<std::string> generateGreedy(Executor& ex, const std::string& prompt, int64_t count) {
  const plan::Function* f = ex.function("eval");
  if (!f) return Status::InvalidInput(ex.plan().name() + " has no eval function");
  std::string targets = ex.plan().root().targets() ? ex.plan().root().targets()->str() : "";
  TensorView tokens, logits;
  std::vector<TensorView> others;
  for (const plan::Binding* b : *f->arguments())
    if (b->role() == plan::Role::data) {
      TensorView v = ex.view("eval", b->value());
      if (b->name()->str() == targets) others.push_back(v);
      else tokens = v;
    }
  for (const plan::Binding* b : *f->results())
    if (b->role() == plan::Role::output) logits = ex.view("eval", b->value());
  if (!tokens.data || tokens.dtype != DType::kI64 || tokens.shape.size() != 2 ||
      logits.shape.size() != 3 || logits.shape[1] != tokens.shape[1])
    return Status::InvalidInput("generation needs a language model: int64 [B, T] tokens in, "
                                "[B, T, V] logits out");
  const int64_t t = tokens.shape[1], vocab = logits.shape[2];
  if (vocab < 256) return Status::InvalidInput("generation prints bytes: the vocabulary must be >= 256");
  std::vector<int64_t> context;
  for (unsigned char c : prompt) context.push_back(c);
  if (context.empty()) context.push_back('\n');
  std::string out;
  for (int64_t i = 0; i < count; ++i) {
    // Row 0 holds the last T tokens; positions after them see nothing of the future (causal),
    // so what fills the rest of the batch does not matter.
    int64_t n = std::min<int64_t>(t, static_cast<int64_t>(context.size()));
    std::memset(tokens.data, 0, tokens.numElements() * sizeof(int64_t));
    std::copy(context.end() - n, context.end(), tokens.i64());
    for (TensorView& v : others) std::memset(v.data, 0, v.numElements() * dtypeSize(v.dtype));
    DTC_RETURN_IF_ERROR(ex.run("eval"));
    const float* row = logits.f32() + (n - 1) * vocab;  // batch row 0, position n-1
    int64_t next = std::max_element(row, row + 256) - row;
    context.push_back(next);
    out += static_cast<char>(next);
  }
  return out;
}

}  // namespace dtc
