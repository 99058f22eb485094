// The mixture-of-experts kernels and logsumexp on CUDA against the CPU's: routing (the plan's
// experts and slots bit for bit: a different choice would send a token elsewhere), with capacity
// drops or not, normalised or not, one or two choices, tied scores; dispatch, combination and
// their gradients on valid plans with drops; logsumexp over short and vocabulary-wide rows.
// Routing plans are given, not random ids: two choices in one expert's slot would race.
#include <algorithm>
#include <numeric>
#include <random>

#include "exec/bind_util.h"
#include "harness.h"

namespace dtc::gputest {
namespace {

struct MoeCase {
  int64_t g, s, e, k, c, d;
};

std::string dims(const MoeCase& m) {
  return "G " + std::to_string(m.g) + " S " + std::to_string(m.s) + " E " + std::to_string(m.e) +
         " K " + std::to_string(m.k) + " C " + std::to_string(m.c) + " D " + std::to_string(m.d);
}

// Capacity drops (C below S·K/E) in most, none in the last.
const MoeCase kCases[] = {{1, 1, 1, 1, 1, 8},
                          {2, 64, 8, 2, 12, 96},
                          {4, 128, 16, 1, 6, 256},
                          {1, 300, 64, 2, 7, 33},
                          {2, 7, 4, 2, 100, 5}};

// K distinct experts per token at random, slots in moe_route's priority order (every token's
// j-th choice before any (j+1)-th, a counter per group and expert).
struct RoutingPlan {
  std::vector<int64_t> expert, slot;
};

RoutingPlan randomPlan(const MoeCase& m, uint32_t seed) {
  std::mt19937 gen(seed);
  RoutingPlan p{std::vector<int64_t>(m.g * m.s * m.k), std::vector<int64_t>(m.g * m.s * m.k)};
  std::vector<int64_t> experts(m.e);
  std::iota(experts.begin(), experts.end(), 0);
  for (int64_t t = 0; t < m.g * m.s; ++t) {
    std::shuffle(experts.begin(), experts.end(), gen);
    std::copy(experts.begin(), experts.begin() + m.k, p.expert.begin() + t * m.k);
  }
  for (int64_t g = 0; g < m.g; ++g) {
    std::vector<int64_t> count(m.e, 0);
    for (int64_t j = 0; j < m.k; ++j)
      for (int64_t s = 0; s < m.s; ++s) {
        const int64_t i = (g * m.s + s) * m.k + j, c = count[p.expert[i]]++;
        p.slot[i] = c < m.c ? c : -1;
      }
  }
  return p;
}

Case route(const MoeCase& m, bool normalize, Input scores) {
  Case k{"moe_route " + dims(m) + (normalize ? " normalized" : ""),
         "moe_route",
         {intAttr("top_k", m.k), intAttr("capacity", m.c), intAttr("normalize", normalize)},
         {std::move(scores)},
         {outI64({m.g, m.s, m.k}), outI64({m.g, m.s, m.k}), out({m.g, m.s, m.k}),
          out({m.g, m.s, m.e})}};
  k.tolerance = 1e-6;
  return k;
}

Case routeGrad(const MoeCase& m, bool normalize, uint32_t seed) {
  Case k{"moe_route_grad " + dims(m) + (normalize ? " normalized" : ""),
         "moe_route_grad",
         {intAttr("normalize", normalize)},
         {f32({m.g, m.s, m.k}), f32({m.g, m.s, m.e}, 0.05f, 1),
          givenIds({m.g, m.s, m.k}, randomPlan(m, seed).expert)},
         {out({m.g, m.s, m.e})}};
  k.tolerance = 1e-5;
  return k;
}

// The plan's two inputs (expert, slot).
std::vector<Input> planInputs(const MoeCase& m, uint32_t seed) {
  RoutingPlan p = randomPlan(m, seed);
  return {givenIds({m.g, m.s, m.k}, std::move(p.expert)),
          givenIds({m.g, m.s, m.k}, std::move(p.slot))};
}

Case dispatch(const MoeCase& m, bool grad, uint32_t seed) {
  const Shape tokens{m.g, m.s, m.d}, buffer{m.e, m.g, m.c, m.d};
  Case k{std::string(grad ? "moe_dispatch_grad " : "moe_dispatch ") + dims(m),
         grad ? "moe_dispatch_grad" : "moe_dispatch",
         {},
         {f32(grad ? buffer : tokens)},
         {out(grad ? tokens : buffer)}};
  for (Input& in : planInputs(m, seed)) k.inputs.push_back(std::move(in));
  k.tolerance = 1e-6;
  return k;
}

Case combine(const MoeCase& m, bool grad, uint32_t seed) {
  const Shape tokens{m.g, m.s, m.d}, buffer{m.e, m.g, m.c, m.d}, choices{m.g, m.s, m.k};
  Case k{std::string(grad ? "moe_combine_grad " : "moe_combine ") + dims(m),
         grad ? "moe_combine_grad" : "moe_combine",
         {},
         {f32(buffer)},
         {}};
  if (grad) k.inputs.insert(k.inputs.begin(), f32(tokens));
  for (Input& in : planInputs(m, seed)) k.inputs.push_back(std::move(in));
  k.inputs.push_back(f32(choices, 0, 1));
  k.outputs =
      grad ? std::vector<Output>{out(buffer), out(choices)} : std::vector<Output>{out(tokens)};
  k.tolerance = 1e-6;
  return k;
}

Case logSumExp(const Shape& x, float lo, float hi) {
  const Shape y(x.begin(), x.end() - 1);
  Case k{"logsumexp " + str(x), "logsumexp", {}, {f32(x, lo, hi)}, {out(y)}};
  k.tolerance = 1e-6;
  return k;
}

Case logSumExpGrad(const Shape& x) {
  const Shape y(x.begin(), x.end() - 1);
  Case k{"logsumexp_grad " + str(x),
         "logsumexp_grad",
         {},
         {f32(y), f32(x, -3, 3), f32(y, 1, 4)},
         {out(x)}};
  k.tolerance = 1e-5;
  return k;
}

}  // namespace

std::vector<Case> moeCases() {
  std::vector<Case> cases;
  uint32_t seed = 500;
  for (const MoeCase& m : kCases)
    for (bool normalize : {false, true}) {
      cases.push_back(route(m, normalize, f32({m.g, m.s, m.e}, 0.01f, 1)));
      cases.push_back(routeGrad(m, normalize, seed++));
    }
  // Ties among the best and the rest, every token alike: the lower index first, and the later
  // tokens past capacity.
  const MoeCase ties{2, 40, 5, 2, 9, 0};
  std::vector<float> tied;
  for (int64_t t = 0; t < ties.g * ties.s; ++t)
    tied.insert(tied.end(), {0.2f, 0.5f, 0.2f, 0.5f, 0.1f});
  cases.push_back(route(ties, true, given({ties.g, ties.s, ties.e}, std::move(tied))));
  cases.back().label += " ties";
  for (const MoeCase& m : kCases)
    for (bool grad : {false, true}) {
      cases.push_back(dispatch(m, grad, seed++));
      cases.push_back(combine(m, grad, seed++));
    }
  for (const Shape& x : {Shape{1}, Shape{7, 5}, Shape{4, 3, 64}, Shape{8, 50257}}) {
    cases.push_back(logSumExp(x, -10, 10));
    cases.push_back(logSumExpGrad(x));
  }
  cases.push_back(logSumExp({16, 300}, 80, 100));  // exp would overflow unshifted
  cases.back().label += " large";
  return cases;
}

std::vector<Case> moeMalformedCases() {
  const MoeCase m{1, 4, 3, 2, 2, 8};
  Case topK = route(m, false, f32({m.g, m.s, m.e}));
  topK.label = "bad moe_route top_k";
  topK.attrs[0] = intAttr("top_k", 4);
  Case capacity = route(m, false, f32({m.g, m.s, m.e}));
  capacity.label = "bad moe_route capacity";
  capacity.attrs[1] = intAttr("capacity", 0);
  Case buffer = dispatch(m, false, 1);
  buffer.label = "bad moe_dispatch buffer";
  buffer.outputs[0] = out({m.e, m.g + 1, m.c, m.d});
  Case weight = combine(m, false, 2);
  weight.label = "bad moe_combine weight";
  weight.inputs[3] = f32({m.g, m.s, m.k + 1});
  Case lse = logSumExp({4, 6}, -1, 1);
  lse.label = "bad logsumexp output";
  lse.outputs[0] = out({4, 1});
  return {topK, capacity, buffer, weight, lse};
}

// A corrupt plan (an expert outside [0, 4)), which the device can only flag.
Case moeCorruptPlan() {
  Case k{"bad routing plan",
         "moe_dispatch",
         {},
         {f32({1, 2, 8}), givenIds({1, 2, 1}, {0, 4}), givenIds({1, 2, 1}, {0, 0})},
         {out({4, 1, 2, 8})}};
  return k;
}

}  // namespace dtc::gputest
