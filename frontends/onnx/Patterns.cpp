// The decomposed forms exporters write for ops dtc has whole, fused back so that dtc's kernels,
// gradient rules and sharding rules (Megatron's splits, sequence parallelism) apply:
//   LayerNorm   ReduceMean → Sub → Pow 2 → ReduceMean → Add ε → Sqrt → Div → Mul w → Add b
//   RMSNorm     w · x · 1/Sqrt(ReduceMean(Pow(x, 2)) + ε)  (LlamaRMSNorm)
//   SwiGLU      x · Sigmoid(x) · up  (a Llama MLP's silu(gate_proj) · up_proj)
//   GELU        0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))  and  0.5·x·(1 + erf(x/√2))
//   attention   Softmax(Where(causal mask, −∞, c·scores)), Softmax(c·scores + causal additive
//               mask)  →  CausalSoftmax(scores, c)
//   Linear      MatMul(x, Transpose(W)) [+ b]  →  Linear(x, W[, b])
//   loss        NegativeLogLikelihoodLoss(LogSoftmax(x))  →  SoftmaxCrossEntropy
// Each match is checked whole (constants' values, every interior value read only inside the
// match) before it is recorded; roots are tried from the last node back, so an outer match
// (Linear with its bias) claims its nodes before an inner one (Linear without).
#include <cmath>
#include <optional>
#include <set>

#include "onnx/RuleKit.h"
#include "onnx/Translator.h"

namespace dtc::onnx_import {
namespace {

using Error = llvm::Error;

// Matching state: the nodes a candidate covers.
struct Match {
  Translator* tr;
  std::set<int> members;

  // The dynamic, unclaimed node producing `name` with op `op`, added to the match; -1 otherwise.
  int take(const std::string& name, const std::string& op) {
    const int p = tr->producer(name);
    if (p < 0 || !tr->dynamic(p) || tr->groupOf(p) >= 0 || tr->node(p).op_type() != op) return -1;
    members.insert(p);
    return p;
  }
  // A scalar constant's value.
  std::optional<double> scalar(const std::string& name) const {
    const Value* v = tr->value(name);
    if (!v || v->kind != ValueKind::kConst || v->constant->size() != 1) return std::nullopt;
    return v->constant->real(0);
  }
  // Of a binary node, the operand that is not the scalar constant `value` (within `tolerance`).
  std::optional<std::string> otherThan(int node, double value, double tolerance = 1e-6) const {
    const onnx::NodeProto& n = tr->node(node);
    for (int k = 0; k < 2; ++k)
      if (std::optional<double> c = scalar(n.input(k));
          c && std::fabs(*c - value) <= tolerance * std::max(1.0, std::fabs(value)))
        return n.input(1 - k);
    return std::nullopt;
  }
  // Every value a member produces, other than the root's, is read only by members.
  bool closed(int root) const {
    for (int m : members) {
      if (m == root) continue;
      for (const std::string& out : tr->node(m).output()) {
        if (tr->isGraphOutput(out)) return false;
        for (int user : tr->users(out))
          if (!members.count(user)) return false;
      }
    }
    return true;
  }
  bool isParam(const std::string& name) const {
    const Value* v = tr->value(name);
    return v && v->kind == ValueKind::kParam;
  }
  // The fused op is emitted when the walk reaches `root` and named after the first member (a
  // cut before it, --stage-cuts, is a cut before the whole match).
  void record(int root, const std::function<Error(int named)>& emit) {
    Group g;
    g.root = root;
    g.members.assign(members.begin(), members.end());
    const int first = *members.begin();
    g.emit = [emit, first] { return emit(first); };
    tr->addGroup(std::move(g));
  }
};

// The leaves of a product: `name` itself, or the factors of the single-use Muls computing it.
void factors(Match& m, const std::string& name, std::vector<std::string>& out, int depth = 0) {
  const int p = depth < 8 ? m.tr->producer(name) : -1;
  if (p >= 0 && m.tr->dynamic(p) && m.tr->groupOf(p) < 0 && m.tr->node(p).op_type() == "Mul" &&
      m.tr->users(name).size() == 1) {
    m.members.insert(p);
    factors(m, m.tr->node(p).input(0), out, depth + 1);
    factors(m, m.tr->node(p).input(1), out, depth + 1);
    return;
  }
  out.push_back(name);
}

// The leaves of the product rooted at node `root` (its single-use Muls added to `m`); empty when
// the root is no Mul.
std::vector<std::string> productLeaves(Match& m, int root) {
  std::vector<std::string> leaves;
  if (m.tr->node(root).op_type() != "Mul") return leaves;
  factors(m, m.tr->node(root).input(0), leaves);
  factors(m, m.tr->node(root).input(1), leaves);
  return leaves;
}

bool sameMultiset(std::vector<std::string> a, std::vector<std::string> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

const std::string& outName(Translator& t, int node) { return t.node(node).output(0); }

// Linear: [Add(b,] MatMul(x, Transpose(W, [1, 0]))[)].
bool matchLinear(Translator& t, int root) {
  Match m{&t, {root}};
  const onnx::NodeProto& r = t.node(root);
  std::string bias;
  int matmul = root;
  if (r.op_type() == "Add") {
    for (int k = 0; k < 2 && matmul == root; ++k) {
      Match trial = m;
      if (int p = trial.take(r.input(k), "MatMul"); p >= 0 && m.isParam(r.input(1 - k))) {
        m = trial;
        matmul = p;
        bias = r.input(1 - k);
      }
    }
    if (matmul == root) return false;
  } else if (r.op_type() != "MatMul") {
    return false;
  }
  const int transpose = m.take(t.node(matmul).input(1), "Transpose");
  if (transpose < 0) return false;
  const std::string& weight = t.node(transpose).input(0);
  const Value* w = t.value(weight);
  if (!m.isParam(weight) || w->shape.size() != 2 ||
      intsAttribute(t.node(transpose), "perm") != std::vector<int64_t>{1, 0})
    return false;
  const Value* x = t.value(t.node(matmul).input(0));
  if (!x || x->shape.size() < 2 || x->type != onnx::TensorProto::FLOAT) return false;
  if (!bias.empty() && t.value(bias)->shape != Shape{w->shape[0]}) return false;
  if (!m.closed(root)) return false;
  const std::string input = x->name, out = outName(t, root);
  m.record(root, [&t, input, weight, bias, out](int named) {
    std::vector<std::string> in = {input, weight};
    if (!bias.empty()) in.push_back(bias);
    t.emit(named, "Linear", in, {out});
    return Error::success();
  });
  return true;
}

// LayerNorm over the last dimension, decomposed.
bool matchLayerNorm(Translator& t, int root) {
  Match m{&t, {root}};
  const onnx::NodeProto& r = t.node(root);
  if (r.op_type() != "Add") return false;
  for (int kb = 0; kb < 2; ++kb) {
    Match trial = m;
    const std::string& bias = r.input(1 - kb);
    const int mul = trial.take(r.input(kb), "Mul");
    if (mul < 0 || !trial.isParam(bias)) continue;
    for (int kw = 0; kw < 2; ++kw) {
      Match inner = trial;
      const std::string& weight = t.node(mul).input(1 - kw);
      const int div = inner.take(t.node(mul).input(kw), "Div");
      if (div < 0 || !inner.isParam(weight)) continue;
      const int sub = inner.take(t.node(div).input(0), "Sub");
      const int sqrt = inner.take(t.node(div).input(1), "Sqrt");
      if (sub < 0 || sqrt < 0) continue;
      const std::string& x = t.node(sub).input(0);
      const int mean = inner.take(t.node(sub).input(1), "ReduceMean");
      const int add = inner.take(t.node(sqrt).input(0), "Add");
      if (mean < 0 || add < 0 || t.node(mean).input(0) != x) continue;
      double eps = 0;
      int variance = -1;
      for (int k = 0; k < 2 && variance < 0; ++k)
        if (std::optional<double> c = inner.scalar(t.node(add).input(1 - k))) {
          eps = *c;
          variance = inner.take(t.node(add).input(k), "ReduceMean");
        }
      if (variance < 0) continue;
      const int pow = inner.take(t.node(variance).input(0), "Pow");
      if (pow < 0 || t.node(pow).input(0) != outName(t, sub) ||
          inner.scalar(t.node(pow).input(1)) != 2.0)
        continue;
      const Value* xv = t.value(x);
      const int64_t last = static_cast<int64_t>(xv->shape.size()) - 1;
      auto lastAxisOnly = [&](int node) {
        std::vector<int64_t> axes = intsAttribute(t.node(node), "axes");
        return axes.size() == 1 && (axes[0] == -1 || axes[0] == last) &&
               intAttribute(t.node(node), "keepdims", 1) == 1;
      };
      const Shape width = {xv->shape.back()};
      if (!lastAxisOnly(mean) || !lastAxisOnly(variance) || t.value(weight)->shape != width ||
          t.value(bias)->shape != width || !inner.closed(root))
        continue;
      const std::string xName = xv->name, out = outName(t, root);
      inner.record(root, [&t, xName, weight, bias, out, eps](int named) {
        t.emit(named, "LayerNorm", {xName, weight, bias}, {out}, {NodeAttr::real("eps", eps)});
        return Error::success();
      });
      return true;
    }
  }
  return false;
}

// RMSNorm over the last dimension: the product of w, x and 1/Sqrt(mean(x²) + ε) (Div by it, or
// its Reciprocal), in any association.
bool matchRmsNorm(Translator& t, int root) {
  Match m{&t, {root}};
  std::vector<std::string> leaves = productLeaves(m, root);
  // LlamaRMSNorm casts the normalised x back to the input's type before the weight: float to
  // float in a float32 export.
  std::vector<std::string> expanded;
  for (const std::string& leaf : leaves) {
    const int cast = t.users(leaf).size() == 1 ? m.take(leaf, "Cast") : -1;
    const Value* in = cast < 0 ? nullptr : t.value(t.node(cast).input(0));
    if (cast >= 0 && in && in->type == onnx::TensorProto::FLOAT &&
        intAttribute(t.node(cast), "to", 0) == onnx::TensorProto::FLOAT)
      factors(m, t.node(cast).input(0), expanded);
    else if (cast >= 0)
      return false;
    else
      expanded.push_back(leaf);
  }
  leaves = std::move(expanded);
  if (leaves.size() != 3) return false;
  for (int inv = 0; inv < 3; ++inv) {
    Match trial = m;
    int sqrt = -1;
    if (int div = trial.take(leaves[inv], "Div"); div >= 0) {
      if (trial.scalar(t.node(div).input(0)) != 1.0) continue;
      sqrt = trial.take(t.node(div).input(1), "Sqrt");
    } else if (int reciprocal = trial.take(leaves[inv], "Reciprocal"); reciprocal >= 0) {
      sqrt = trial.take(t.node(reciprocal).input(0), "Sqrt");
    }
    const int add = sqrt < 0 ? -1 : trial.take(t.node(sqrt).input(0), "Add");
    if (add < 0) continue;
    double eps = 0;
    int mean = -1;
    for (int k = 0; k < 2 && mean < 0; ++k)
      if (std::optional<double> c = trial.scalar(t.node(add).input(1 - k))) {
        eps = *c;
        mean = trial.take(t.node(add).input(k), "ReduceMean");
      }
    const int pow = mean < 0 ? -1 : trial.take(t.node(mean).input(0), "Pow");
    if (pow < 0 || trial.scalar(t.node(pow).input(1)) != 2.0 || !(eps > 0)) continue;
    const std::string& x = t.node(pow).input(0);
    const Value* xv = t.value(x);
    if (!xv || xv->shape.empty() || xv->type != onnx::TensorProto::FLOAT) continue;
    // The other two leaves: x and the weight [C].
    std::string weight;
    int seenX = 0;
    for (int k = 0; k < 3; ++k) {
      if (k == inv) continue;
      if (leaves[k] == x && seenX == 0)
        ++seenX;
      else
        weight = leaves[k];
    }
    const int64_t last = static_cast<int64_t>(xv->shape.size()) - 1;
    const std::vector<int64_t> axes = intsAttribute(t.node(mean), "axes");
    if (seenX != 1 || weight.empty() || !trial.isParam(weight) ||
        t.value(weight)->shape != Shape{xv->shape.back()} || axes.size() != 1 ||
        (axes[0] != -1 && axes[0] != last) || intAttribute(t.node(mean), "keepdims", 1) != 1 ||
        !trial.closed(root))
      continue;
    const std::string xName = xv->name, out = outName(t, root);
    trial.record(root, [&t, xName, weight, out, eps](int named) {
      t.emit(named, "RMSNorm", {xName, weight}, {out}, {NodeAttr::real("eps", eps)});
      return Error::success();
    });
    return true;
  }
  return false;
}

// SwiGLU's product: gate · Sigmoid(gate) · up, in any association.
bool matchSwiglu(Translator& t, int root) {
  Match m{&t, {root}};
  const std::vector<std::string> leaves = productLeaves(m, root);
  if (leaves.size() != 3) return false;
  for (int s = 0; s < 3; ++s) {
    Match trial = m;
    const int sigmoid = trial.take(leaves[s], "Sigmoid");
    if (sigmoid < 0) continue;
    const std::string& gate = t.node(sigmoid).input(0);
    int g = -1;
    for (int k = 0; k < 3; ++k)
      if (k != s && leaves[k] == gate) g = k;
    if (g < 0) continue;
    const std::string& up = leaves[3 - s - g];
    const Value *gv = t.value(gate), *uv = t.value(up);
    if (up == gate || !gv || !uv || gv->shape != uv->shape ||
        gv->type != onnx::TensorProto::FLOAT || uv->type != onnx::TensorProto::FLOAT ||
        !trial.closed(root))
      continue;
    const std::string gateName = gv->name, upName = uv->name, out = outName(t, root);
    trial.record(root, [&t, gateName, upName, out](int named) {
      t.emit(named, "SwiGLU", {gateName, upName}, {out});
      return Error::success();
    });
    return true;
  }
  return false;
}

// GELU: 0.5·x·(1 + tanh(√(2/π)(x + 0.044715·x³))) or 0.5·x·(1 + erf(x/√2)), in any association
// of the products.
bool matchGelu(Translator& t, int root) {
  Match m{&t, {root}};
  const std::vector<std::string> leaves = productLeaves(m, root);
  if (leaves.size() != 3) return false;
  // One leaf is 0.5, one is x, one is 1 + f(...).
  for (int half = 0; half < 3; ++half) {
    if (m.scalar(leaves[half]) != 0.5) continue;
    for (int xi = 0; xi < 3; ++xi) {
      if (xi == half) continue;
      Match trial = m;
      const std::string& x = leaves[xi];
      const int onePlus = trial.take(leaves[3 - half - xi], "Add");
      if (onePlus < 0) continue;
      std::optional<std::string> inner = trial.otherThan(onePlus, 1.0);
      if (!inner) continue;
      bool tanhForm = false;
      if (int th = trial.take(*inner, "Tanh"); th >= 0) {
        // √(2/π)·(x + 0.044715·x³)
        std::vector<std::string> outer;
        factors(trial, t.node(th).input(0), outer);
        if (outer.size() != 2) continue;
        std::string sum;
        for (int k = 0; k < 2; ++k)
          if (std::optional<double> c = trial.scalar(outer[k]);
              c && std::fabs(*c - 0.7978845608028654) < 1e-6)
            sum = outer[1 - k];
        const int add = sum.empty() ? -1 : trial.take(sum, "Add");
        if (add < 0) continue;
        std::string cubic;
        for (int k = 0; k < 2; ++k)
          if (t.node(add).input(k) == x) cubic = t.node(add).input(1 - k);
        if (cubic.empty()) continue;
        std::vector<std::string> terms;
        factors(trial, cubic, terms);
        // 0.044715·x·x·x, or 0.044715·Pow(x, 3)
        std::vector<std::string> rest;
        bool coefficient = false;
        for (const std::string& term : terms) {
          std::optional<double> c = trial.scalar(term);
          if (c && std::fabs(*c - 0.044715) < 1e-7 && !coefficient) {
            coefficient = true;
          } else if (int p = trial.take(term, "Pow"); p >= 0) {
            if (t.node(p).input(0) != x || trial.scalar(t.node(p).input(1)) != 3.0) break;
            rest.insert(rest.end(), {x, x, x});
          } else {
            rest.push_back(term);
          }
        }
        if (!coefficient || !sameMultiset(rest, {x, x, x})) continue;
        tanhForm = true;
      } else if (int erf = trial.take(*inner, "Erf"); erf >= 0) {
        // erf(x/√2), or erf(x·(1/√2))
        const std::string& arg = t.node(erf).input(0);
        if (int div = trial.take(arg, "Div"); div >= 0) {
          if (t.node(div).input(0) != x) continue;
          std::optional<double> c = trial.scalar(t.node(div).input(1));
          if (!c || std::fabs(*c - 1.4142135623730951) > 1e-6) continue;
        } else if (int mul = trial.take(arg, "Mul"); mul >= 0) {
          std::optional<std::string> other = trial.otherThan(mul, 0.7071067811865476, 1e-6);
          if (!other || *other != x) continue;
        } else {
          continue;
        }
      } else {
        continue;
      }
      if (!trial.closed(root)) continue;
      const Value* xv = t.value(x);
      if (!xv || xv->type != onnx::TensorProto::FLOAT) continue;
      const std::string xName = xv->name, out = outName(t, root);
      trial.record(root, [&t, xName, out, tanhForm](int named) {
        t.emit(named, "Gelu", {xName}, {out},
               {NodeAttr::text("approximate", tanhForm ? "tanh" : "none")});
        return Error::success();
      });
      return true;
    }
  }
  return false;
}

// Whether constant `c` (broadcast to [..., T, T]) is true exactly where key j > query i
// (`masked`: the entries hidden), or exactly where j <= i (`!masked`).
bool isCausal(const Constant& c, int64_t tSize, bool masked) {
  if (c.shape.size() < 2 || c.shape.back() != tSize || c.shape[c.shape.size() - 2] != tSize)
    return false;
  for (uint64_t k = 0; k < c.size(); ++k) {
    const int64_t j = static_cast<int64_t>(k % tSize), i = static_cast<int64_t>(k / tSize % tSize);
    if ((c.integer(k) != 0) != (masked ? j > i : j <= i)) return false;
  }
  return true;
}

// An additive mask of [T, T] slices: 0 where the key is visible (j <= i), a huge negative
// (−∞, or transformers' finfo.min) where it is hidden.
bool isAdditiveCausal(const Constant& c, int64_t tSize) {
  if (c.shape.size() < 2 || c.shape.back() != tSize || c.shape[c.shape.size() - 2] != tSize)
    return false;
  for (uint64_t k = 0; k < c.size(); ++k) {
    const int64_t j = static_cast<int64_t>(k % tSize), i = static_cast<int64_t>(k / tSize % tSize);
    const double v = c.real(k);
    if (j <= i ? v != 0 : !(v <= -1e9)) return false;
  }
  return true;
}

// Softmax(Where(mask, −∞, c·S)), or Softmax(c·S + causal additive mask) as transformers' eager
// attention writes it, over the last axis of square scores: CausalSoftmax(S, c).
bool matchCausalSoftmax(Translator& t, int root) {
  const onnx::NodeProto& r = t.node(root);
  if (r.op_type() != "Softmax") return false;
  Match m{&t, {root}};
  const Value* out = t.value(outName(t, root));
  const int64_t rank = static_cast<int64_t>(out->shape.size());
  int64_t axis = intAttribute(r, "axis", -1);
  if (rank < 2 || (axis != -1 && axis != rank - 1) || out->shape[rank - 1] != out->shape[rank - 2])
    return false;
  std::string scaled;
  if (const int where = m.take(r.input(0), "Where"); where >= 0) {
    const onnx::NodeProto& w = t.node(where);
    const Constant* cond = t.constant(where, 0);
    for (int k : {1, 2}) {
      std::optional<double> fill = m.scalar(w.input(k));
      if (!cond || !fill || !(*fill == -INFINITY || *fill <= -1e9)) continue;
      // Where(mask, −∞, S): the mask marks hidden keys; Where(keep, S, −∞): visible ones.
      if (isCausal(*cond, out->shape.back(), k == 1)) scaled = w.input(k == 1 ? 2 : 1);
    }
  } else if (const int add = m.take(r.input(0), "Add"); add >= 0) {
    for (int k : {0, 1})
      if (const Constant* mask = t.constant(add, k);
          mask && isAdditiveCausal(*mask, out->shape.back()))
        scaled = t.node(add).input(1 - k);
  }
  if (scaled.empty() || t.value(scaled)->shape != out->shape) return false;
  double scale = 1.0;
  std::string scores = scaled;
  Match trial = m;
  if (int mul = trial.take(scaled, "Mul"); mul >= 0) {
    for (int k = 0; k < 2; ++k)
      if (std::optional<double> c = trial.scalar(t.node(mul).input(k));
          c && t.value(t.node(mul).input(1 - k))->shape == out->shape) {
        scale = *c;
        scores = t.node(mul).input(1 - k);
        m = trial;
        break;
      }
  } else if (int div = trial.take(scaled, "Div"); div >= 0) {
    if (std::optional<double> c = trial.scalar(t.node(div).input(1)); c && *c != 0) {
      scale = 1.0 / *c;
      scores = t.node(div).input(0);
      m = trial;
    }
  }
  const Value* s = t.value(scores);
  if (!s || s->kind == ValueKind::kConst || !m.closed(root)) return false;
  const std::string sName = s->name, outN = outName(t, root);
  m.record(root, [&t, sName, outN, scale](int named) {
    t.emit(named, "CausalSoftmax", {sName}, {outN}, {NodeAttr::real("scale", scale)});
    return Error::success();
  });
  return true;
}

// NegativeLogLikelihoodLoss(LogSoftmax(x, classes), labels), mean or sum, no weights, any
// ignore_index.
bool matchCrossEntropy(Translator& t, int root) {
  const onnx::NodeProto& r = t.node(root);
  if (r.op_type() != "NegativeLogLikelihoodLoss") return false;
  Match m{&t, {root}};
  const int logSoftmax = m.take(r.input(0), "LogSoftmax");
  if (logSoftmax < 0 || r.input_size() > 2) return false;
  const std::string reduction = stringAttribute(r, "reduction", "mean");
  if (reduction != "mean" && reduction != "sum") return false;
  const onnx::AttributeProto* ignoreAttr = findAttribute(r, "ignore_index");
  const std::optional<int64_t> ignore =
      ignoreAttr ? std::optional<int64_t>(ignoreAttr->i()) : std::nullopt;
  const Value* x = t.value(t.node(logSoftmax).input(0));
  const Value* labels = t.value(r.input(1));
  const int64_t axis = intAttribute(t.node(logSoftmax), "axis", -1);
  if (!x || x->shape.size() != 2 || (axis != 1 && axis != -1) || !labels ||
      labels->type != onnx::TensorProto::INT64 || labels->shape != Shape{x->shape[0]} ||
      !m.closed(root))
    return false;
  const std::string xName = x->name, labelName = labels->name, out = outName(t, root);
  const bool sum = reduction == "sum";
  const int64_t positions = labels->shape[0];
  m.record(root, [&t, xName, labelName, out, sum, ignore, positions](int named) {
    rules::emitCrossEntropy(
        t, named,
        {xName, labelName, "", sum ? rules::Reduction::kSum : rules::Reduction::kMean, ignore,
         positions},
        out);
    return Error::success();
  });
  return true;
}

}  // namespace

void findPatterns(Translator& t) {
  for (int root = t.nodeCount(); root-- > 0;) {
    if (!t.dynamic(root) || t.groupOf(root) >= 0) continue;
    if (matchLayerNorm(t, root) || matchRmsNorm(t, root) || matchSwiglu(t, root) ||
        matchGelu(t, root) || matchCausalSoftmax(t, root) || matchCrossEntropy(t, root) ||
        matchLinear(t, root))
      continue;
  }
}

}  // namespace dtc::onnx_import
