// Mixtral's sparse MLP as torch.onnx.export traces it: a softmax router and TopK, each expert's
// SwiGLU MLP run on the tokens NonZero finds routed to it, its output scaled by the routing
// weight and added back with ScatterElements (index_add_). The shapes in between depend on the
// data, so the block cannot be translated op by op; found by its structure before the walk, it
// becomes dtc's MixtureOfExperts op (dropless: a capacity of every token), the experts' weights
// stacked from their own parameters, which keep their names.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "onnx/Translator.h"

namespace dtc::onnx_import {
namespace {

// The node producing `name`, through float-to-float Casts.
int producerThroughCasts(const Translator& t, std::string name) {
  for (;;) {
    const int p = t.producer(name);
    if (p < 0 || t.node(p).op_type() != "Cast") return p;
    name = t.node(p).input(0);
  }
}

// The 2-D initializer a MatMul's right operand transposes (Transpose(W, perm [1, 0])), or "".
std::string transposedWeight(const Translator& t, const std::string& operand) {
  const int p = t.producer(operand);
  if (p < 0 || t.node(p).op_type() != "Transpose") return "";
  const std::vector<int64_t> perm = intsAttribute(t.node(p), "perm");
  const onnx::TensorProto* w = t.initializer(t.node(p).input(0));
  if (!w || w->dims_size() != 2 || perm != std::vector<int64_t>{1, 0}) return "";
  return w->name();
}

// The scalar a Constant node or an initializer holds, if it is one.
std::optional<int64_t> scalarOf(const Translator& t, const std::string& name) {
  if (const onnx::TensorProto* init = t.initializer(name)) {
    (void)init;
    const Value* v = t.value(name);
    if (v && v->constant && v->constant->size() == 1) return v->constant->integer(0);
    return std::nullopt;
  }
  const int p = t.producer(name);
  if (p < 0 || t.node(p).op_type() != "Constant") return std::nullopt;
  llvm::Expected<Constant> c = t.constantOf(t.node(p));
  if (!c) {
    llvm::consumeError(c.takeError());
    return std::nullopt;
  }
  return c->size() == 1 ? std::optional<int64_t>(c->integer(0)) : std::nullopt;
}

struct Expert {
  std::string w1, w3, w2;  // gate [F, C], up [F, C], down [C, F]
  int output = -1;         // the down projection's MatMul
  std::string input;       // the tokens routed to it
};

// The experts' SwiGLU MLPs among `reach`: MatMul(x, w1ᵀ) → x·sigmoid(x) → · MatMul(x, w3ᵀ) →
// MatMul(·, w2ᵀ).
std::vector<Expert> findExperts(const Translator& t, const std::vector<bool>& reach) {
  std::vector<Expert> experts;
  for (int s = 0; s < t.nodeCount(); ++s) {
    if (!reach[s] || t.node(s).op_type() != "Sigmoid") continue;
    const std::string a = t.node(s).input(0);
    const int gate = t.producer(a);
    if (gate < 0 || t.node(gate).op_type() != "MatMul") continue;
    Expert e;
    e.w1 = transposedWeight(t, t.node(gate).input(1));
    e.input = t.node(gate).input(0);
    for (int silu : t.users(t.node(s).output(0))) {
      const onnx::NodeProto& u = t.node(silu);
      if (u.op_type() != "Mul" || (u.input(0) != a && u.input(1) != a)) continue;
      for (int product : t.users(u.output(0))) {
        const onnx::NodeProto& h = t.node(product);
        if (h.op_type() != "Mul") continue;
        const std::string other = h.input(0) == u.output(0) ? h.input(1) : h.input(0);
        const int up = t.producer(other);
        if (up < 0 || t.node(up).op_type() != "MatMul" || t.node(up).input(0) != e.input) continue;
        e.w3 = transposedWeight(t, t.node(up).input(1));
        for (int down : t.users(h.output(0)))
          if (t.node(down).op_type() == "MatMul" && t.node(down).input(0) == h.output(0)) {
            e.w2 = transposedWeight(t, t.node(down).input(1));
            e.output = down;
          }
      }
    }
    if (!e.w1.empty() && !e.w3.empty() && !e.w2.empty() && e.output >= 0) experts.push_back(e);
  }
  return experts;
}

// The router and expert index the tokens `input` are routed by: the nearest Gather of row e of
// a one-hot routing (Transpose(OneHot(TopK's indices))) among its ancestors, as (the rows, e).
std::optional<std::pair<std::string, int64_t>> expertIndex(const Translator& t,
                                                           const std::string& input) {
  std::deque<std::string> todo = {input};
  std::set<std::string> seen;
  while (!todo.empty()) {
    const std::string name = todo.front();
    todo.pop_front();
    if (!seen.insert(name).second) continue;
    const int p = t.producer(name);
    if (p < 0) continue;
    const onnx::NodeProto& n = t.node(p);
    if (n.op_type() == "Gather") {
      const int rows = t.producer(n.input(0));
      if (rows >= 0 && t.node(rows).op_type() == "Transpose") {
        const int hot = t.producer(t.node(rows).input(0));
        if (hot >= 0 && t.node(hot).op_type() == "OneHot") {
          const std::optional<int64_t> e = scalarOf(t, n.input(1));
          if (!e) return std::nullopt;
          return std::pair{n.input(0), *e};
        }
      }
    }
    for (const std::string& in : n.input())
      if (!in.empty()) todo.push_back(in);
  }
  return std::nullopt;
}

void findBlock(Translator& t, int topK) {
  const onnx::NodeProto& top = t.node(topK);
  // The router: TopK(Softmax(MatMul(x, Wgᵀ))).
  const int softmax = producerThroughCasts(t, top.input(0));
  if (softmax < 0 || t.node(softmax).op_type() != "Softmax") return;
  const int router = t.producer(t.node(softmax).input(0));
  if (router < 0 || t.node(router).op_type() != "MatMul") return;
  const std::string routerWeight = transposedWeight(t, t.node(router).input(1));
  const onnx::TensorProto* wg = t.initializer(routerWeight);
  if (!wg) return;
  const int64_t experts = wg->dims(0), width = wg->dims(1);
  const std::string x = t.node(router).input(0);
  // Everything computed from the router's input, in node order.
  std::vector<bool> reach(t.nodeCount(), false);
  std::set<std::string> values = {x};
  for (int i = 0; i < t.nodeCount(); ++i)
    for (const std::string& in : t.node(i).input())
      if (values.count(in)) {
        reach[i] = true;
        for (const std::string& out : t.node(i).output()) values.insert(out);
        break;
      }
  // The routing's one-hot rows, the experts and which expert each is.
  std::string oneHotRows;
  for (int u : t.users(top.output(1)))
    if (t.node(u).op_type() == "OneHot")
      for (int v : t.users(t.node(u).output(0)))
        if (t.node(v).op_type() == "Transpose") oneHotRows = t.node(v).output(0);
  if (oneHotRows.empty()) return;
  std::map<int64_t, Expert> byIndex;
  for (Expert& e : findExperts(t, reach)) {
    const auto routed = expertIndex(t, e.input);
    if (!routed || routed->first != oneHotRows) continue;  // another block's expert
    const int64_t index = routed->second;
    if (index < 0 || index >= experts || byIndex.count(index)) return;
    byIndex[index] = e;
  }
  if (static_cast<int64_t>(byIndex.size()) != experts) return;
  int last = topK;
  for (const auto& [index, e] : byIndex) last = std::max(last, e.output);
  // The block's output: the first value after every expert whose computation (what it derives
  // from the router's input) is read nowhere else.
  for (int root = last + 1; root < t.nodeCount(); ++root) {
    if (!reach[root] || t.node(root).output_size() != 1) continue;
    std::set<int> members;
    std::vector<int> todo = {root};
    while (!todo.empty()) {
      const int m = todo.back();
      todo.pop_back();
      if (!reach[m] || !members.insert(m).second) continue;
      for (const std::string& in : t.node(m).input())
        if (const int p = t.producer(in); p >= 0) todo.push_back(p);
    }
    if (!members.count(topK) || !members.count(router)) continue;
    bool closed = true, allExperts = true;
    for (const auto& [index, e] : byIndex) allExperts = allExperts && members.count(e.output);
    for (int m : members)
      for (const std::string& out : t.node(m).output()) {
        if (m == root) continue;
        closed = closed && !t.isGraphOutput(out);
        for (int user : t.users(out)) closed = closed && members.count(user) > 0;
      }
    if (!allExperts || !closed) continue;
    // The routing weights renormalised (Mixtral's): TopK's values over their sum.
    bool normalize = false;
    for (int u : t.users(top.output(0)))
      normalize = normalize || t.node(u).op_type() == "ReduceSum";
    const std::string out = t.node(root).output(0);
    const std::string topKName = top.input(1);
    Translator::Region region;
    region.root = root;
    region.members.assign(members.begin(), members.end());
    region.infer = [&t, x, out, root]() -> llvm::Error {
      const Value* in = t.value(x);
      if (!in || in->type != onnx::TensorProto::FLOAT || in->shape.size() != 2)
        return t.nodeError(root,
                           "a mixture of experts whose router reads other than [tokens, "
                           "width] floats");
      t.define(out, onnx::TensorProto::FLOAT, in->shape);
      return llvm::Error::success();
    };
    region.emit = [&t, x, out, root, topKName, routerWeight, byIndex, experts, width,
                   normalize]() -> llvm::Error {
      const Value* k = t.value(topKName);
      if (!k || !k->constant || k->constant->size() != 1)
        return t.nodeError(root, "a router whose top-k is not known when compiling");
      const int64_t topk = k->constant->integer(0);
      if (topk < 1 || topk > experts)
        return t.nodeError(
            root, "top-" + std::to_string(topk) + " of " + std::to_string(experts) + " experts");
      const Value& in = *t.value(x);
      const int64_t tokens = in.shape[0];
      // Sequences as the data gives them, where x flattens [B, T, C] (the batch splits over dp).
      std::string x3 = t.fresh(out + "::tokens");
      Shape shape3 = {1, tokens, width};
      if (const int p = t.producer(x); p >= 0 && t.node(p).op_type() == "Reshape")
        if (const Value* h = t.value(t.node(p).input(0));
            h && h->shape.size() == 3 && h->shape[0] * h->shape[1] == tokens)
          shape3 = h->shape;
      t.emit(root, "Reshape", {in.name}, {x3}, {NodeAttr::ints("shape", shape3)});
      // Each kind of weight stacked [E, in, out] from the experts' own [out, in] parameters.
      auto stacked = [&](const std::string Expert::*weight, const std::string& kind) {
        std::vector<std::string> rows;
        for (const auto& [index, e] : byIndex) {
          const Value* w = t.value(e.*weight);
          const std::string turned = t.fresh(out + "::" + kind + "_t");
          const std::string row = t.fresh(out + "::" + kind + "_row");
          t.emit(root, "Transpose", {w->name}, {turned}, {NodeAttr::ints("perm", {1, 0})});
          t.emit(root, "Reshape", {turned}, {row},
                 {NodeAttr::ints("shape", {1, w->shape[1], w->shape[0]})});
          rows.push_back(row);
        }
        const std::string all = t.fresh(out + "::" + kind);
        t.emit(root, "Concat", rows, {all}, {NodeAttr::integer("axis", 0)});
        return all;
      };
      const std::string gate = stacked(&Expert::w1, "gate"), up = stacked(&Expert::w3, "up"),
                        down = stacked(&Expert::w2, "down");
      const std::string y3 = t.fresh(out + "::mixed");
      t.emit(root, "MixtureOfExperts", {x3, t.value(routerWeight)->name, gate, up, down},
             {y3, t.fresh(out + "::aux_loss"), t.fresh(out + "::z_loss")},
             {NodeAttr::integer("top_k", topk),
              NodeAttr::real("capacity_factor",
                             static_cast<double>(experts) / static_cast<double>(topk)),
              NodeAttr::integer("normalize", normalize), NodeAttr::text("activation", "swiglu"),
              NodeAttr::text("score", "softmax")});
      t.emit(root, "Reshape", {y3}, {out}, {NodeAttr::ints("shape", in.shape)});
      return llvm::Error::success();
    };
    t.addRegion(std::move(region));
    return;
  }
}

}  // namespace

void findMoeRegions(Translator& t) {
  for (int i = 0; i < t.nodeCount(); ++i)
    if (t.node(i).op_type() == "TopK") findBlock(t, i);
}

}  // namespace dtc::onnx_import
