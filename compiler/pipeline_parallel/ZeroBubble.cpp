#include "pipeline_parallel/ZeroBubble.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <queue>
#include <tuple>

namespace dtc::pipeline {
namespace {

std::vector<Unit> zbH1(const PipelineConfig& c, int64_t device) {
  const int64_t p = c.stages, m = c.microBatches, lag = device;
  std::vector<Unit> order;
  int64_t inputGrads = 0, weightGrads = 0;
  auto backward = [&](int64_t mb) {
    order.push_back({device, mb, Pass::kInputGrad});
    ++inputGrads;
    if (inputGrads - weightGrads > lag) order.push_back({device, weightGrads++, Pass::kWeightGrad});
  };
  const int64_t warmup = std::min(p - device - 1, m);
  for (int64_t mb = 0; mb < warmup; ++mb) order.push_back({device, mb, Pass::kForward});
  for (int64_t i = 0; i < m - warmup; ++i) {
    order.push_back({device, warmup + i, Pass::kForward});
    backward(i);
  }
  for (int64_t mb = m - warmup; mb < m; ++mb) backward(mb);
  while (weightGrads < m) order.push_back({device, weightGrads++, Pass::kWeightGrad});
  return order;
}

// List scheduling of the V's units on the passes' times (transfers free). Each device's next
// choice is kept and recomputed only when something it depends on changes (its own unit ended,
// or a neighbour chunk's pass it waits for), and the earliest is taken from a heap.
struct VScheduler {
  const PipelineConfig& c;
  int64_t limit;     // chunk-micro-batches a device holds between F and W
  int64_t chunkCap;  // ... of one chunk (0: no cap)

  static constexpr double kNever = std::numeric_limits<double>::infinity();

  struct Choice {
    double start = kNever;
    int priority = 3;  // B, F, W
    int64_t chunk = -1;
    Unit unit;
    bool before(const Choice& o) const {
      return std::make_pair(priority, -chunk) < std::make_pair(o.priority, -o.chunk);
    }
  };

  // The orders and their span, or nothing when the settings leave every device waiting.
  std::optional<std::pair<std::vector<std::vector<Unit>>, double>> run() const {
    const int64_t p = c.stages, m = c.microBatches, chunks = c.chunks();
    auto at = [m](int64_t chunk, int64_t mb) { return static_cast<size_t>(chunk * m + mb); };
    std::vector<double> forwardEnd(chunks * m, kNever), inputEnd(chunks * m, kNever);
    std::vector<int64_t> nextForward(chunks, 0), nextInput(chunks, 0), held(chunks, 0);
    std::vector<int64_t> holding(p, 0);
    std::vector<int64_t> device(chunks);
    for (int64_t ch = 0; ch < chunks; ++ch) device[ch] = c.deviceOf(ch);
    std::vector<std::deque<Unit>> pendingWeight(p);
    std::vector<double> free(p, 0);
    std::vector<std::vector<Unit>> orders(p);

    // Each device's chunks whose next F or next B has its input (memory aside), so a choice
    // looks at those alone, not at every chunk of the device.
    std::vector<std::vector<int64_t>> live(p);
    std::vector<int64_t> slot(chunks, -1);  // a chunk's place in its device's `live`
    auto inputsThere = [&](int64_t ch) {
      const int64_t f = nextForward[ch], b = nextInput[ch];
      const bool forward = f < m && (ch == 0 || forwardEnd[at(ch - 1, f)] < kNever);
      const bool input = b < m && forwardEnd[at(ch, b)] < kNever &&
                         (ch + 1 == chunks || inputEnd[at(ch + 1, b)] < kNever);
      return forward || input;
    };
    auto recheck = [&](int64_t ch) {
      if (ch < 0 || ch >= chunks) return;
      std::vector<int64_t>& set = live[device[ch]];
      const bool now = inputsThere(ch);
      if (now && slot[ch] < 0) {
        slot[ch] = static_cast<int64_t>(set.size());
        set.push_back(ch);
      } else if (!now && slot[ch] >= 0) {
        slot[set.back()] = slot[ch];
        set[slot[ch]] = set.back();
        set.pop_back();
        slot[ch] = -1;
      }
    };
    for (int64_t ch = 0; ch < chunks; ++ch) recheck(ch);

    auto choose = [&](int64_t d) {
      const double t = free[d];
      Choice none, best;
      auto offer = [&](const Choice& x) {
        if (x.start < best.start || (x.start == best.start && x.before(best))) best = x;
      };
      for (int64_t ch : live[d]) {
        if (int64_t mb = nextInput[ch]; mb < m && forwardEnd[at(ch, mb)] < kNever) {
          const double ready = ch + 1 == chunks ? forwardEnd[at(ch, mb)] : inputEnd[at(ch + 1, mb)];
          if (ready < kNever) offer({std::max(ready, t), 0, ch, {ch, mb, Pass::kInputGrad}});
        }
        if (int64_t mb = nextForward[ch];
            mb < m && holding[d] < limit && (chunkCap == 0 || held[ch] < chunkCap)) {
          const double ready = ch == 0 ? 0.0 : forwardEnd[at(ch - 1, mb)];
          if (ready < kNever) offer({std::max(ready, t), 1, ch, {ch, mb, Pass::kForward}});
        }
      }
      if (!pendingWeight[d].empty())
        offer({t, 2, pendingWeight[d].front().chunk, pendingWeight[d].front()});
      return best.start < kNever ? best : none;
    };

    // The devices' choices by start, then device; an entry is stale once its device chose again.
    std::vector<Choice> choice(p);
    std::vector<int64_t> version(p, 0);
    using Entry = std::tuple<double, int64_t, int64_t>;  // start, device, version
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> earliest;
    auto rechoose = [&](int64_t d) {
      choice[d] = choose(d);
      ++version[d];
      if (choice[d].start < kNever) earliest.emplace(choice[d].start, d, version[d]);
    };
    for (int64_t d = 0; d < p; ++d) rechoose(d);
    const int64_t total = 3 * chunks * m;
    for (int64_t done = 0; done < total; ++done) {
      while (!earliest.empty() &&
             std::get<2>(earliest.top()) != version[std::get<1>(earliest.top())])
        earliest.pop();
      if (earliest.empty()) return std::nullopt;
      const int64_t d = std::get<1>(earliest.top());
      const Unit u = choice[d].unit;
      const double end = choice[d].start + c.seconds(u);
      free[d] = end;
      orders[d].push_back(u);
      if (u.pass == Pass::kForward) {
        forwardEnd[at(u.chunk, u.microBatch)] = end;
        ++nextForward[u.chunk], ++held[u.chunk], ++holding[d];
      } else if (u.pass == Pass::kInputGrad) {
        inputEnd[at(u.chunk, u.microBatch)] = end;
        ++nextInput[u.chunk];
        pendingWeight[d].push_back({u.chunk, u.microBatch, Pass::kWeightGrad});
      } else {
        pendingWeight[d].pop_front();
        --held[u.chunk], --holding[d];
      }
      // Whose inputs may be there now: the unit's chunk and its neighbours; who may now choose
      // otherwise: this device, and those of the chunks next to the unit's.
      for (int64_t ch : {u.chunk - 1, u.chunk, u.chunk + 1}) recheck(ch);
      rechoose(d);
      for (int64_t next : {u.chunk - 1, u.chunk + 1})
        if (next >= 0 && next < chunks && device[next] != d) rechoose(device[next]);
    }
    return std::make_pair(orders, *std::max_element(free.begin(), free.end()));
  }
};

// The passes' times in units of the median pass, rounded to halves: list scheduling is myopic,
// and on times a few percent apart it lets a W start just before a B arrives, delaying every
// stage after it; on the rounded times the orders keep their steady rhythm, and the passes
// that differ by a whole unit (the first chunk's backward, all W) still count.
PipelineConfig rounded(const PipelineConfig& c) {
  PipelineConfig out = c;
  std::vector<double> positive;
  for (double s : c.passSeconds)
    if (s > 0) positive.push_back(s);
  if (positive.empty()) return out;
  std::nth_element(positive.begin(), positive.begin() + positive.size() / 2, positive.end());
  const double unit = positive[positive.size() / 2];
  for (double& s : out.passSeconds) s = std::round(2 * s / unit) / 2;
  return out;
}

// The span of `orders` on the passes' own times (transfers free); infinity if they stall.
double spanOf(const PipelineConfig& c, const std::vector<std::vector<Unit>>& orders) {
  const OrdersRun run = runOrders(c, orders, [&](const Unit& u) { return c.seconds(u); });
  if (run.stuck) return std::numeric_limits<double>::infinity();
  return *std::max_element(run.end.begin(), run.end.end());
}

std::vector<std::vector<Unit>> zbV(const PipelineConfig& c) {
  // Scheduled on the rounded times and on the exact ones, with and without the cap per chunk:
  // the orders with the shortest span on the exact times.
  const int64_t p = c.stages;
  std::vector<std::vector<Unit>> best;
  double bestSpan = std::numeric_limits<double>::infinity();
  for (const PipelineConfig& times : {rounded(c), c})
    for (int64_t cap : {int64_t{0}, p}) {
      auto run = VScheduler{times, c.virtualStages * p, cap}.run();
      if (!run) continue;
      const double span = spanOf(c, run->first);
      if (span < bestSpan) bestSpan = span, best = std::move(run->first);
    }
  // Without a memory bound some unit is always ready: list scheduling cannot stall.
  if (best.empty()) best = VScheduler{c, std::numeric_limits<int64_t>::max(), 0}.run()->first;
  return best;
}

}  // namespace

std::vector<std::vector<Unit>> zeroBubbleOrders(const PipelineConfig& config) {
  if (config.schedule == "zb-v") return zbV(config);
  std::vector<std::vector<Unit>> orders;
  for (int64_t d = 0; d < config.stages; ++d) orders.push_back(zbH1(config, d));
  return orders;
}

}  // namespace dtc::pipeline
