#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace dtc {
namespace {

// splitmix64: the next of a stream of 64-bit draws.
uint64_t nextDraw(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A byte from `row`'s first 256 logits: the argmax at temperature 0, else a draw from the
// softmax of logits / temperature over the k largest.
int64_t chooseToken(const float* row, const SamplingOptions& o, uint64_t& state) {
  constexpr int64_t kBytes = 256;
  if (o.temperature <= 0) return std::max_element(row, row + kBytes) - row;
  std::vector<int64_t> order(kBytes);
  for (int64_t i = 0; i < kBytes; ++i) order[i] = i;
  const int64_t k = o.topK > 0 ? std::min<int64_t>(o.topK, kBytes) : kBytes;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  std::vector<double> weights(k);
  double total = 0;
  for (int64_t i = 0; i < k; ++i)
    total += weights[i] = std::exp((row[order[i]] - row[order[0]]) / o.temperature);
  const double u = static_cast<double>(nextDraw(state) >> 11) * 0x1.0p-53 * total;
  double sum = 0;
  for (int64_t i = 0; i < k; ++i)
    if ((sum += weights[i]) > u) return order[i];
  return order[k - 1];
}

}  // namespace

namespace {

// The eval function's token input, other inputs (zeroed) and logits.
struct LanguageModel {
  TensorView tokens, logits;
  std::vector<TensorView> others;
};

StatusOr<LanguageModel> languageModel(Executor& ex) {
  const plan::Function* f = ex.function("eval");
  if (!f) return Status::InvalidInput("--sample: " + ex.plan().name() + " has no eval function");
  std::string targets = ex.plan().root().targets() ? ex.plan().root().targets()->str() : "";
  LanguageModel m;
  for (const plan::Binding* b : *f->arguments())
    if (b->role() == plan::Role::data) {
      TensorView v = ex.view("eval", b->value());
      if (b->name()->str() == targets)
        m.others.push_back(v);
      else
        m.tokens = v;
    }
  for (const plan::Binding* b : *f->results())
    if (b->role() == plan::Role::output) m.logits = ex.view("eval", b->value());
  if (!m.tokens.data || m.tokens.dtype != DType::kI64 || m.tokens.shape.size() != 2 ||
      m.logits.shape.size() != 3 || m.logits.shape[1] != m.tokens.shape[1])
    return Status::InvalidInput(
        "--sample needs a language model: int64 [B, T] tokens in, [B, T, V] logits out (" +
        ex.plan().name() + " is not one)");
  if (m.logits.shape[2] < 256)
    return Status::InvalidInput("--sample prints bytes: the vocabulary must be >= 256, " +
                                ex.plan().name() + "'s has " + std::to_string(m.logits.shape[2]));
  return m;
}

}  // namespace

Status checkCanGenerate(Executor& ex) { return languageModel(ex).status(); }

StatusOr<std::string> generate(Executor& ex, const std::string& prompt, int64_t count,
                               const SamplingOptions& sampling) {
  DTC_ASSIGN_OR_RETURN(LanguageModel m, languageModel(ex));
  TensorView tokens = m.tokens, logits = m.logits;
  std::vector<TensorView>& others = m.others;
  const int64_t t = tokens.shape[1], vocab = logits.shape[2];
  std::vector<int64_t> context;
  for (unsigned char c : prompt) context.push_back(c);
  if (context.empty()) context.push_back('\n');
  std::string out;
  uint64_t state = sampling.seed;
  for (int64_t i = 0; i < count; ++i) {
    // Row 0 holds the last T tokens; positions after them see nothing of the future (causal),
    // so what fills the rest of the batch does not matter.
    int64_t n = std::min<int64_t>(t, static_cast<int64_t>(context.size()));
    std::memset(tokens.data, 0, tokens.numElements() * sizeof(int64_t));
    std::copy(context.end() - n, context.end(), tokens.i64());
    for (TensorView& v : others) std::memset(v.data, 0, v.numElements() * dtypeSize(v.dtype));
    DTC_RETURN_IF_ERROR(ex.run("eval"));
    const float* row = logits.f32() + (n - 1) * vocab;  // batch row 0, position n-1
    const int64_t next = chooseToken(row, sampling, state);
    context.push_back(next);
    out += static_cast<char>(next);
  }
  return out;
}

}  // namespace dtc
