#include "sharding/ReshardPlanner.h"

#include <algorithm>

namespace dtc::sharding {

std::vector<int64_t> ReshardPhase::localShape(const Mesh& mesh) const {
  std::vector<int64_t> local(shape);
  for (size_t d = 0; d < local.size(); ++d) local[d] /= mesh.groupSize(from.dims[d]);
  return local;
}

int64_t Mesh::groupSize(const std::vector<int>& axes) const {
  int64_t n = 1;
  for (int a : axes) n *= sizes[a];
  return n;
}

namespace {

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

size_t commonPrefix(const std::vector<int>& a, const std::vector<int>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// `cur` is a prefix of `want` and `want` continues with `axis`.
bool nextIs(const std::vector<int>& cur, const std::vector<int>& want, int axis) {
  return commonPrefix(cur, want) == cur.size() && want.size() > cur.size() &&
         want[cur.size()] == axis;
}

std::string validate(const Mesh& mesh, const std::vector<int64_t>& shape, const Layout& l,
                     const char* which) {
  if (l.dims.size() != shape.size())
    return std::string(which) + " sharding has " + std::to_string(l.dims.size()) +
           " dimensions, the tensor " + std::to_string(shape.size());
  std::vector<int> used;
  auto use = [&](int a) -> std::string {
    if (a < 0 || a >= (int)mesh.sizes.size())
      return std::string(which) + " sharding names no mesh axis " + std::to_string(a);
    if (contains(used, a))
      return std::string(which) + " sharding uses mesh axis " + mesh.names[a] + " twice";
    used.push_back(a);
    return "";
  };
  for (size_t d = 0; d < shape.size(); ++d) {
    for (int a : l.dims[d])
      if (std::string e = use(a); !e.empty()) return e;
    if (shape[d] % mesh.groupSize(l.dims[d]) != 0)
      return "dimension " + std::to_string(d) + " of size " + std::to_string(shape[d]) +
             " does not divide over " + std::to_string(mesh.groupSize(l.dims[d])) + " devices";
  }
  for (int a : l.partial)
    if (std::string e = use(a); !e.empty()) return e;
  for (int a : l.partialMax)
    if (std::string e = use(a); !e.empty()) return e;
  if (!l.partial.empty() && !l.partialMax.empty())
    return std::string(which) + " sharding awaits both a sum and a maximum";
  return "";
}

// The plain (unchunked) view of `layout` on `shape`: a chunked dimension becomes [chunks, size],
// the axes on the second.
void expand(const std::vector<int64_t>& shape, const Layout& layout, std::vector<int64_t>& outShape,
            Layout& out) {
  outShape.clear();
  out = Layout{{}, layout.partial, {}, layout.partialMax};
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t b = layout.blocksOf(d);
    if (b > 1) {
      outShape.push_back(b);
      out.dims.push_back({});
      outShape.push_back(shape[d] / b);
    } else {
      outShape.push_back(shape[d]);
    }
    out.dims.push_back(layout.dims[d]);
  }
}

ReshardPlan planPlain(const Mesh& mesh, const std::vector<int64_t>& shape, const Layout& from,
                      const Layout& to);

}  // namespace

ReshardPlan planReshard(const Mesh& mesh, const std::vector<int64_t>& shape, const Layout& from,
                        const Layout& to) {
  ReshardPlan plan;
  for (const Layout* l : {&from, &to})
    for (size_t d = 0; d < shape.size() && d < l->dims.size(); ++d)
      if (l->blocksOf(d) < 1 || shape[d] % (l->blocksOf(d) * mesh.groupSize(l->dims[d])) != 0) {
        plan.error = "dimension " + std::to_string(d) + " of size " + std::to_string(shape[d]) +
                     " does not divide into " + std::to_string(l->blocksOf(d)) + " chunks over " +
                     std::to_string(mesh.groupSize(l->dims[d])) + " devices";
        return plan;
      }
  if (from.dims.size() != shape.size() || to.dims.size() != shape.size()) {
    plan.error = "sharding rank differs from the tensor's";
    return plan;
  }
  // Phases: one if every dimension keeps its chunking; else gather the re-chunked dimensions
  // whole under the source's chunking, then cut them under the target's.
  std::vector<Layout> stops{from};
  if (!from.sameBlocks(to)) {
    Layout mid = from;
    mid.partial = to.partial;
    mid.partialMax = to.partialMax;
    for (size_t d = 0; d < shape.size(); ++d)
      if (from.blocksOf(d) != to.blocksOf(d)) mid.dims[d].clear();
    stops.push_back(mid);
    mid.blocks.assign(shape.size(), 1);
    for (size_t d = 0; d < shape.size(); ++d) mid.blocks[d] = to.blocksOf(d);
    stops.push_back(mid);
  }
  stops.push_back(to);
  for (size_t k = 0; k + 1 < stops.size(); ++k) {
    if (!stops[k].sameBlocks(stops[k + 1])) continue;  // a change of view, no data moves
    ReshardPhase phase;
    Layout a, b;
    expand(shape, stops[k], phase.shape, a);
    expand(shape, stops[k + 1], phase.shape, b);
    ReshardPlan part = planPlain(mesh, phase.shape, a, b);
    if (!part.error.empty()) return part;
    phase.steps = std::move(part.phases.front().steps);
    phase.from = a;
    if (!phase.steps.empty()) plan.phases.push_back(std::move(phase));
  }
  return plan;
}

namespace {

ReshardPlan planPlain(const Mesh& mesh, const std::vector<int64_t>& shape, const Layout& from,
                      const Layout& to) {
  ReshardPlan plan;
  plan.phases.emplace_back();
  std::vector<ReshardStep>& steps = plan.phases.back().steps;
  if ((plan.error = validate(mesh, shape, from, "source")) != "") return plan;
  if ((plan.error = validate(mesh, shape, to, "target")) != "") return plan;
  for (int a : to.partial)
    if (!contains(from.partial, a)) {
      plan.error = "cannot make a value partial over mesh axis " + mesh.names[a];
      return plan;
    }
  for (int a : to.partialMax)
    if (!contains(from.partialMax, a)) {
      plan.error = "cannot make a value a partial maximum over mesh axis " + mesh.names[a];
      return plan;
    }

  Layout cur = from;
  std::vector<int64_t> local(shape);
  for (size_t d = 0; d < shape.size(); ++d) local[d] /= mesh.groupSize(cur.dims[d]);

  // 1. Sums: reduce-scatter straight into a dimension `to` shards over the axis next.
  std::vector<int> allReduce;
  for (int p : from.partial) {
    if (contains(to.partial, p)) continue;
    bool scattered = false;
    for (size_t d = 0; d < shape.size() && !scattered; ++d)
      if (nextIs(cur.dims[d], to.dims[d], p) && local[d] % mesh.sizes[p] == 0) {
        steps.push_back({StepKind::kReduceScatter, {p}, (int)d});
        cur.dims[d].push_back(p);
        local[d] /= mesh.sizes[p];
        scattered = true;
      }
    if (!scattered) allReduce.push_back(p);
  }
  if (!allReduce.empty()) steps.push_back({StepKind::kAllReduce, allReduce});
  cur.partial = to.partial;
  std::vector<int> allMax;
  for (int p : from.partialMax)
    if (!contains(to.partialMax, p)) allMax.push_back(p);
  if (!allMax.empty()) steps.push_back({StepKind::kAllReduce, allMax, -1, -1, /*max=*/true});
  cur.partialMax = to.partialMax;

  // 2. Drop the axes past the common prefix, minor first: all-to-all into the dimension that
  // wants the axis next, else all-gather.
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (cur.dims[d].size() <= commonPrefix(cur.dims[d], to.dims[d])) continue;
      int a = cur.dims[d].back();
      int target = -1;
      for (size_t e = 0; e < shape.size() && target < 0; ++e)
        if (e != d && nextIs(cur.dims[e], to.dims[e], a) && local[e] % mesh.sizes[a] == 0)
          target = (int)e;
      cur.dims[d].pop_back();
      local[d] *= mesh.sizes[a];
      if (target >= 0) {
        steps.push_back({StepKind::kAllToAll, {a}, target, (int)d});
        cur.dims[target].push_back(a);
        local[target] /= mesh.sizes[a];
      } else {
        steps.push_back({StepKind::kAllGather, {a}, (int)d});
      }
      progress = true;
    }
  }

  // 3. Add the missing axes, major first: every device keeps its own block.
  for (size_t d = 0; d < shape.size(); ++d)
    for (size_t k = cur.dims[d].size(); k < to.dims[d].size(); ++k) {
      int a = to.dims[d][k];
      steps.push_back({StepKind::kLocalSlice, {a}, (int)d});
      cur.dims[d].push_back(a);
      local[d] /= mesh.sizes[a];
    }
  return plan;
}

}  // namespace

double sentBytes(const ReshardStep& step, const Mesh& mesh, double bytes) {
  double n = static_cast<double>(mesh.groupSize(step.axes));
  switch (step.kind) {
    case StepKind::kAllReduce: return 2 * (n - 1) / n * bytes;
    case StepKind::kReduceScatter:
    case StepKind::kAllToAll: return (n - 1) / n * bytes;
    case StepKind::kAllGather: return (n - 1) * bytes;
    case StepKind::kLocalSlice: return 0;
  }
  return 0;
}

}  // namespace dtc::sharding
