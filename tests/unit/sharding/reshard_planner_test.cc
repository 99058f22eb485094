// Property test of the reshard planner: on random meshes (1-D to 3-D) and random pairs of
// shardings of random tensors, executing the planned collectives on simulated devices gives
// every device exactly its block of the target sharding. Values are small integers, so sums
// are exact and any misplaced element shows.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "sharding/ReshardPlanner.h"

namespace dtc::sharding {
namespace {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
  int64_t size() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  }
};

std::vector<int64_t> strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = (int)shape.size() - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

// Block `index` of `parts` equal blocks along `dim`.
Tensor block(const Tensor& t, int dim, int64_t parts, int64_t index) {
  Tensor out{t.shape, {}};
  out.shape[dim] /= parts;
  out.data.resize(out.size());
  auto in = strides(t.shape), os = strides(out.shape);
  for (int64_t i = 0; i < out.size(); ++i) {
    int64_t src = 0, rem = i;
    for (size_t d = 0; d < out.shape.size(); ++d) {
      int64_t c = rem / os[d];
      rem %= os[d];
      if ((int)d == dim) c += index * out.shape[d];
      src += c * in[d];
    }
    out.data[i] = t.data[src];
  }
  return out;
}

Tensor concat(const std::vector<Tensor>& pieces, int dim) {
  Tensor out{pieces[0].shape, {}};
  out.shape[dim] *= pieces.size();
  out.data.resize(out.size());
  auto os = strides(out.shape), ps = strides(pieces[0].shape);
  for (size_t p = 0; p < pieces.size(); ++p)
    for (int64_t i = 0; i < pieces[p].size(); ++i) {
      int64_t dst = 0, rem = i;
      for (size_t d = 0; d < out.shape.size(); ++d) {
        int64_t c = rem / ps[d];
        rem %= ps[d];
        if ((int)d == dim) c += p * pieces[0].shape[d];
        dst += c * os[d];
      }
      out.data[dst] = pieces[p].data[i];
    }
  return out;
}

struct Sim {
  Mesh mesh;
  int64_t devices() const { return mesh.groupSize(allAxes()); }
  std::vector<int> allAxes() const {
    std::vector<int> a(mesh.sizes.size());
    std::iota(a.begin(), a.end(), 0);
    return a;
  }
  std::vector<int64_t> coords(int64_t dev) const {
    std::vector<int64_t> c(mesh.sizes.size());
    for (int i = (int)c.size() - 1; i >= 0; --i) c[i] = dev % mesh.sizes[i], dev /= mesh.sizes[i];
    return c;
  }
  int64_t device(const std::vector<int64_t>& c) const {
    int64_t dev = 0;
    for (size_t i = 0; i < c.size(); ++i) dev = dev * mesh.sizes[i] + c[i];
    return dev;
  }
  int64_t indexIn(int64_t dev, const std::vector<int>& axes) const {
    auto c = coords(dev);
    int64_t idx = 0;
    for (int a : axes) idx = idx * mesh.sizes[a] + c[a];
    return idx;
  }
  // The group of `dev` over `axes`, in group order.
  std::vector<int64_t> group(int64_t dev, const std::vector<int>& axes) const {
    std::vector<int64_t> members;
    int64_t n = mesh.groupSize(axes);
    for (int64_t k = 0; k < n; ++k) {
      auto c = coords(dev);
      int64_t rem = k;
      for (int i = (int)axes.size() - 1; i >= 0; --i)
        c[axes[i]] = rem % mesh.sizes[axes[i]], rem /= mesh.sizes[axes[i]];
      members.push_back(device(c));
    }
    return members;
  }
  // Device `dev`'s block of `global` under the dims of `layout` (partial ignored). A chunked
  // dimension is cut in its [chunks, size] view; the block keeps the tensor's rank.
  Tensor shard(const Tensor& global, const Layout& layout, int64_t dev) const {
    Tensor t = global;
    std::vector<int64_t> expanded, localShape;
    std::vector<std::vector<int>> dims;
    for (size_t d = 0; d < layout.dims.size(); ++d) {
      int64_t b = layout.blocksOf(d);
      if (b > 1) expanded.push_back(b), dims.push_back({});
      expanded.push_back(global.shape[d] / b);
      dims.push_back(layout.dims[d]);
      localShape.push_back(global.shape[d] / mesh.groupSize(layout.dims[d]));
    }
    t.shape = expanded;
    for (size_t d = 0; d < dims.size(); ++d)
      t = block(t, (int)d, mesh.groupSize(dims[d]), indexIn(dev, dims[d]));
    t.shape = localShape;
    return t;
  }

  std::vector<Tensor> run(const std::vector<Tensor>& locals, const ReshardStep& s) const {
    std::vector<Tensor> out(locals.size());
    for (int64_t dev = 0; dev < devices(); ++dev) {
      std::vector<int64_t> g = group(dev, s.axes);
      int64_t me = indexIn(dev, s.axes), n = (int64_t)g.size();
      auto sum = [&] {
        Tensor t = locals[g[0]];
        for (size_t k = 1; k < g.size(); ++k)
          for (size_t i = 0; i < t.data.size(); ++i)
            t.data[i] = s.max ? std::max(t.data[i], locals[g[k]].data[i])
                              : t.data[i] + locals[g[k]].data[i];
        return t;
      };
      switch (s.kind) {
        case StepKind::kAllReduce: out[dev] = sum(); break;
        case StepKind::kReduceScatter: out[dev] = block(sum(), s.dim, n, me); break;
        case StepKind::kLocalSlice: out[dev] = block(locals[dev], s.dim, n, me); break;
        case StepKind::kAllGather: {
          std::vector<Tensor> pieces;
          for (int64_t m : g) pieces.push_back(locals[m]);
          out[dev] = concat(pieces, s.dim);
          break;
        }
        case StepKind::kAllToAll: {
          std::vector<Tensor> pieces;
          for (int64_t m : g) pieces.push_back(block(locals[m], s.dim, n, me));
          out[dev] = concat(pieces, s.concatDim);
          break;
        }
      }
    }
    return out;
  }
};

Layout randomLayout(std::mt19937& rng, const Mesh& mesh, size_t rank, bool allowPartial,
                    const std::vector<int64_t>& chunkable) {
  Layout l;
  l.dims.resize(rank);
  // Sometimes chunk a dimension that allows it (2 or 3 chunks, as a fused q/k/v weight).
  l.blocks.assign(rank, 1);
  for (size_t d = 0; d < rank; ++d)
    if (chunkable[d] > 1 && std::uniform_int_distribution<int>(0, 2)(rng) == 0)
      l.blocks[d] = chunkable[d];
  std::vector<int> axes(mesh.sizes.size());
  std::iota(axes.begin(), axes.end(), 0);
  std::shuffle(axes.begin(), axes.end(), rng);
  for (int a : axes) {
    int choice = std::uniform_int_distribution<int>(0, (int)rank + 1)(rng);
    if (choice < (int)rank)
      l.dims[choice].push_back(a);
    else if (choice == (int)rank && allowPartial)
      l.partial.push_back(a);
  }
  return l;
}

TEST(ReshardPlanner, RandomShardingsOnRandomMeshesReachTheirTargetsExactly) {
  std::mt19937 rng(20261123);
  int planned = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Sim sim;
    int meshRank = 1 + trial % 3;
    // Small meshes (3-D: axes of 1 to 3, at most 18 devices) keep 3000 trials fast.
    int maxSize = meshRank == 3 ? 3 : 4;
    for (int i = 0; i < meshRank; ++i) {
      int size = std::uniform_int_distribution<int>(1, maxSize)(rng);
      if (meshRank == 3 && size == 3 && i > 0 && sim.mesh.sizes.back() == 3) size = 2;
      sim.mesh.sizes.push_back(size);
      sim.mesh.names.push_back("a" + std::to_string(i));
    }
    size_t rank = std::uniform_int_distribution<size_t>(1, 3)(rng);
    // Every dimension divides over every axis combination: a multiple of the device count,
    // times the chunk count of the dimensions that may be chunked.
    std::vector<int64_t> shape(rank), chunkable(rank, 1);
    for (auto& d : shape) d = sim.devices();
    shape[0] *= std::uniform_int_distribution<int>(1, 2)(rng);
    chunkable[rank - 1] = std::uniform_int_distribution<int>(1, 3)(rng);
    shape[rank - 1] *= chunkable[rank - 1];
    Layout from = randomLayout(rng, sim.mesh, rank, true, chunkable);
    Layout to = randomLayout(rng, sim.mesh, rank, false, chunkable);
    // Sometimes the source awaits a maximum instead of a sum.
    if (std::uniform_int_distribution<int>(0, 2)(rng) == 0)
      std::swap(from.partial, from.partialMax);
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) {  // sometimes keep the partial axes
      for (int p : from.partial) {
        for (auto& dim : to.dims) dim.erase(std::remove(dim.begin(), dim.end(), p), dim.end());
        to.partial.push_back(p);
      }
      for (int p : from.partialMax) {
        for (auto& dim : to.dims) dim.erase(std::remove(dim.begin(), dim.end(), p), dim.end());
        to.partialMax.push_back(p);
      }
    }

    Tensor global{shape, {}};
    global.data.resize(global.size());
    for (auto& v : global.data) v = std::uniform_int_distribution<int>(-9, 9)(rng);
    // Source locals: the block of `from`, split into random integer summands over its partial
    // axes (the member with index 0 in the partial group takes the remainder).
    std::vector<Tensor> locals(sim.devices());
    for (int64_t dev = 0; dev < sim.devices(); ++dev) locals[dev] = sim.shard(global, from, dev);
    if (!from.partial.empty()) {
      std::vector<Tensor> parts = locals;
      for (int64_t dev = 0; dev < sim.devices(); ++dev) {
        if (sim.indexIn(dev, from.partial) == 0) continue;
        for (auto& v : parts[dev].data) v = std::uniform_int_distribution<int>(-5, 5)(rng);
      }
      for (int64_t dev = 0; dev < sim.devices(); ++dev) {
        if (sim.indexIn(dev, from.partial) != 0) continue;
        for (int64_t m : sim.group(dev, from.partial))
          if (m != dev)
            for (size_t i = 0; i < parts[dev].data.size(); ++i)
              parts[dev].data[i] -= parts[m].data[i];
      }
      locals = parts;
    }
    // Partial maxima: the member with index 0 holds the block, the others values at most it.
    for (int64_t dev = 0; dev < sim.devices() && !from.partialMax.empty(); ++dev)
      if (sim.indexIn(dev, from.partialMax) != 0)
        for (auto& v : locals[dev].data) v -= std::uniform_int_distribution<int>(0, 5)(rng);

    ReshardPlan plan = planReshard(sim.mesh, shape, from, to);
    ASSERT_EQ(plan.error, "") << "trial " << trial;
    ++planned;
    for (const ReshardPhase& phase : plan.phases) {
      for (Tensor& t : locals) t.shape = phase.localShape(sim.mesh);  // a row-major view
      for (const ReshardStep& step : phase.steps) locals = sim.run(locals, step);
    }
    for (int64_t dev = 0; dev < sim.devices(); ++dev)
      locals[dev].shape = sim.shard(global, to, dev).shape;

    // Axes kept partial: the group's sum (maximum) must be the target block.
    std::vector<Tensor> result = locals;
    for (int64_t dev = 0; dev < sim.devices() && !to.partial.empty(); ++dev)
      for (int64_t m : sim.group(dev, to.partial))
        if (m != dev)
          for (size_t i = 0; i < result[dev].data.size(); ++i)
            result[dev].data[i] += locals[m].data[i];
    for (int64_t dev = 0; dev < sim.devices() && !to.partialMax.empty(); ++dev)
      for (int64_t m : sim.group(dev, to.partialMax))
        for (size_t i = 0; i < result[dev].data.size(); ++i)
          result[dev].data[i] = std::max(result[dev].data[i], locals[m].data[i]);
    for (int64_t dev = 0; dev < sim.devices(); ++dev) {
      Tensor want = sim.shard(global, to, dev);
      ASSERT_EQ(result[dev].shape, want.shape) << "trial " << trial << " device " << dev;
      ASSERT_EQ(result[dev].data, want.data) << "trial " << trial << " device " << dev;
    }
  }
  EXPECT_EQ(planned, 3000);
}

TEST(ReshardPlanner, TransposedShardingOnTwoByFourUsesAllToAllNotAWrongShape) {
  // The case MLIR's shard dialect gets wrong: [[0],[1]] -> [[1],[0]] on a 2x4 mesh.
  Mesh mesh{{"x", "y"}, {2, 4}};
  ReshardPlan plan =
      planReshard(mesh, {8, 8}, Layout{{{0}, {1}}, {}, {}, {}}, Layout{{{1}, {0}}, {}, {}, {}});
  ASSERT_EQ(plan.error, "");
  bool allToAll = false;
  for (auto& phase : plan.phases)
    for (auto& s : phase.steps) allToAll |= s.kind == StepKind::kAllToAll;
  EXPECT_TRUE(allToAll);
}

TEST(ReshardPlanner, PartialToShardedIsOneReduceScatter) {
  Mesh mesh{{"dp"}, {4}};
  ReshardPlan plan =
      planReshard(mesh, {8, 3}, Layout{{{}, {}}, {0}, {}, {}}, Layout{{{0}, {}}, {}, {}, {}});
  ASSERT_EQ(plan.phases.size(), 1u);
  ASSERT_EQ(plan.phases[0].steps.size(), 1u);
  EXPECT_EQ(plan.phases[0].steps[0].kind, StepKind::kReduceScatter);
  EXPECT_EQ(plan.phases[0].steps[0].dim, 0);
}

TEST(ReshardPlanner, ChunkedToPlainGathersThenSlicesInTheNewView) {
  // A fused q/k/v dimension [3·4] split by heads over 2 devices, to contiguous halves.
  Mesh mesh{{"tp"}, {2}};
  ReshardPlan plan = planReshard(mesh, {12}, Layout{{{0}}, {}, {3}, {}}, Layout{{{0}}, {}, {}, {}});
  ASSERT_EQ(plan.error, "");
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_EQ(plan.phases[0].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(plan.phases[0].steps[0].kind, StepKind::kAllGather);
  EXPECT_EQ(plan.phases[0].steps[0].dim, 1);
  EXPECT_EQ(plan.phases[1].steps[0].kind, StepKind::kLocalSlice);
}

TEST(ReshardPlanner, UnevenSplitIsAnErrorNamingTheDimension) {
  Mesh mesh{{"dp"}, {4}};
  ReshardPlan plan = planReshard(mesh, {10}, Layout{{{}}, {}, {}, {}}, Layout{{{0}}, {}, {}, {}});
  EXPECT_NE(plan.error.find("dimension 0 of size 10"), std::string::npos) << plan.error;
}

TEST(ReshardPlanner, MakingAValuePartialIsRefused) {
  Mesh mesh{{"dp"}, {2}};
  ReshardPlan plan = planReshard(mesh, {4}, Layout{{{}}, {}, {}, {}}, Layout{{{}}, {0}, {}, {}});
  EXPECT_NE(plan.error, "");
}

TEST(ReshardPlanner, SentBytesFollowRingAlgorithms) {
  Mesh mesh{{"dp"}, {4}};
  EXPECT_DOUBLE_EQ(sentBytes({StepKind::kAllReduce, {0}}, mesh, 400), 600);
  EXPECT_DOUBLE_EQ(sentBytes({StepKind::kAllGather, {0}, 0}, mesh, 100), 300);
  EXPECT_DOUBLE_EQ(sentBytes({StepKind::kReduceScatter, {0}, 0}, mesh, 400), 300);
  EXPECT_DOUBLE_EQ(sentBytes({StepKind::kLocalSlice, {0}, 0}, mesh, 400), 0);
}

}  // namespace
}  // namespace dtc::sharding
