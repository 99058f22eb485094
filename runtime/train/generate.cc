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

// A token from `row`'s first `vocab` logits: the argmax at temperature 0, else a draw from the
// softmax of logits / temperature over the k largest.
int64_t chooseToken(const float* row, int64_t vocab, const SamplingOptions& o, uint64_t& state) {
  if (o.temperature <= 0) return std::max_element(row, row + vocab) - row;
  const int64_t k = o.topK > 0 ? std::min<int64_t>(o.topK, vocab) : vocab;
  std::vector<int64_t> order(vocab);
  for (int64_t i = 0; i < vocab; ++i) order[i] = i;
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

bool labels(const std::string& name) {
  return name.find("label") != std::string::npos || name.find("target") != std::string::npos;
}

// The eval function's token input, its attention mask (ones: every token is real), other
// inputs (zeroed) and logits.
struct LanguageModel {
  TensorView tokens, logits;
  std::vector<TensorView> masks, others;
};

StatusOr<LanguageModel> languageModel(Executor& ex) {
  const std::string name = ex.plan().name();
  const plan::Function* f = ex.function("eval");
  if (!f) return Status::InvalidInput("--sample: " + name + " has no eval function");
  std::string targets = ex.plan().root().targets() ? ex.plan().root().targets()->str() : "";
  LanguageModel m;
  std::vector<std::string> candidates;
  for (const plan::Binding* b : *f->arguments()) {
    if (b->role() != plan::Role::data) continue;
    TensorView v = ex.view("eval", b->value());
    const std::string input = b->name()->str();
    const bool tokenShaped = v.dtype == DType::kI64 && v.shape.size() == 2;
    if (input.find("attention_mask") != std::string::npos) {
      m.masks.push_back(v);
    } else if (input == targets || labels(input) || !tokenShaped) {
      m.others.push_back(v);
    } else {
      candidates.push_back(input);
      m.tokens = v;
    }
  }
  if (candidates.size() > 1) {
    std::string list;
    for (const std::string& c : candidates) list += (list.empty() ? "" : ", ") + c;
    return Status::InvalidInput("--sample: " + name + " has several token inputs (" + list +
                                "): which one the prompt goes into is unknown");
  }
  for (const plan::Binding* b : *f->results())
    if (b->role() == plan::Role::output) {
      TensorView v = ex.view("eval", b->value());
      if (v.shape.size() == 3) m.logits = v;
    }
  if (!m.tokens.data || m.logits.shape.size() != 3 || m.logits.shape[1] != m.tokens.shape[1])
    return Status::InvalidInput(
        "--sample needs a language model: int64 [B, T] tokens in, [B, T, V] logits out (" + name +
        " is not one" +
        (m.tokens.data ? "; an ONNX export returns its logits as an output beside the loss" : "") +
        ")");
  return m;
}

// How many of the logits are tokens the sampler can write.
StatusOr<int64_t> writableVocabulary(const LanguageModel& m, const SamplingOptions& o,
                                     const std::string& name) {
  const int64_t vocab = m.logits.shape[2];
  if (o.tokenizer) {
    if (o.tokenizer->size() > vocab)
      return Status::InvalidInput("--tokenizer has " + std::to_string(o.tokenizer->size()) +
                                  " tokens, more than " + name + "'s vocabulary of " +
                                  std::to_string(vocab) + ": it is another model's");
    return vocab;
  }
  if (vocab == 256 || (o.bytes && vocab > 256)) return int64_t{256};
  return Status::InvalidInput(
      "--sample: " + name + "'s vocabulary has " + std::to_string(vocab) +
      " tokens, not 256 bytes: give --tokenizer DIR (a Hugging Face tokenizer.json) to read and "
      "write them" +
      (vocab > 256 ? " (--tokenizer bytes: bytes, the first 256 of them)" : ""));
}

}  // namespace

Status checkCanGenerate(Executor& ex, const SamplingOptions& sampling) {
  DTC_ASSIGN_OR_RETURN(LanguageModel m, languageModel(ex));
  return writableVocabulary(m, sampling, ex.plan().name()).status();
}

StatusOr<std::string> generate(Executor& ex, const std::string& prompt, int64_t count,
                               const SamplingOptions& sampling) {
  DTC_ASSIGN_OR_RETURN(LanguageModel m, languageModel(ex));
  DTC_ASSIGN_OR_RETURN(const int64_t drawn, writableVocabulary(m, sampling, ex.plan().name()));
  TensorView tokens = m.tokens, logits = m.logits;
  const int64_t t = tokens.shape[1], vocab = logits.shape[2];
  std::vector<int64_t> context;
  if (sampling.tokenizer) {
    DTC_ASSIGN_OR_RETURN(context, sampling.tokenizer->encode(prompt.empty() ? "\n" : prompt));
    if (context.empty())
      return Status::InvalidInput("--prompt: the tokenizer makes no tokens of it");
    for (int64_t id : context)
      if (id < 0 || id >= vocab)
        return Status::InvalidInput("--prompt: token " + std::to_string(id) +
                                    " is outside the model's vocabulary");
  } else {
    for (unsigned char c : prompt) context.push_back(c);
    if (context.empty()) context.push_back('\n');
  }
  const size_t prompted = context.size();
  uint64_t state = sampling.seed;
  for (int64_t i = 0; i < count; ++i) {
    // Row 0 holds the last T tokens; positions after them see nothing of the future (causal),
    // so what fills the rest of the batch does not matter.
    int64_t n = std::min<int64_t>(t, static_cast<int64_t>(context.size()));
    std::memset(tokens.data, 0, tokens.numElements() * sizeof(int64_t));
    std::copy(context.end() - n, context.end(), tokens.i64());
    for (TensorView& v : m.others) std::memset(v.data, 0, v.numElements() * dtypeSize(v.dtype));
    for (TensorView& v : m.masks) std::fill(v.i64(), v.i64() + v.numElements(), int64_t{1});
    DTC_RETURN_IF_ERROR(ex.run("eval"));
    const float* row = logits.f32() + (n - 1) * vocab;  // batch row 0, position n-1
    context.push_back(chooseToken(row, drawn, sampling, state));
  }
  if (sampling.tokenizer) return sampling.tokenizer->decode(context);
  std::string out = prompt.empty() ? "" : prompt;
  for (size_t i = prompted; i < context.size(); ++i) out += static_cast<char>(context[i]);
  return out;
}

}  // namespace dtc
