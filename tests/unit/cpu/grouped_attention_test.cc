// Grouped-query attention (k and v with fewer heads, each serving `group` query heads) against
// the same kernels on k and v repeated to every query head: the forward must give the same bits
// (each query reads the same keys in the same order), and the key/value gradients the repeated
// gradients summed over each group. Whole sequences and a context-parallel block of the queries
// against the whole sequence, odd sizes, groups of 1 to 4.
#include <string>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

struct GroupCase {
  int64_t batch, kvHeads, group, t, d;
  AttentionPositions at;  // plain, or a block of the queries (tk = at.length)
  int64_t tk;
};

// x [batch, kvHeads, rows, d] with every head repeated `group` times:
// [batch, kvHeads·group, rows, d].
std::vector<float> repeatHeads(const std::vector<float>& x, const GroupCase& c) {
  const int64_t block = c.tk * c.d;
  std::vector<float> out;
  out.reserve(x.size() * c.group);
  for (int64_t kv = 0; kv < c.batch * c.kvHeads; ++kv)
    for (int64_t g = 0; g < c.group; ++g)
      out.insert(out.end(), x.begin() + kv * block, x.begin() + (kv + 1) * block);
  return out;
}

// The repeated gradient summed over each group, back to [batch, kvHeads, rows, d].
std::vector<double> sumGroups(const std::vector<float>& x, const GroupCase& c) {
  const int64_t block = c.tk * c.d;
  std::vector<double> out(c.batch * c.kvHeads * block, 0.0);
  for (int64_t s = 0; s < c.batch * c.kvHeads * c.group; ++s)
    for (int64_t e = 0; e < block; ++e) out[s / c.group * block + e] += x[s * block + e];
  return out;
}

class GroupedAttentionTest : public PoolTest {};

TEST_P(GroupedAttentionTest, MatchesRepeatedKeysAndValues) {
  const float scale = 0.37f;
  const GroupCase cases[] = {
      {2, 3, 1, 7, 5, {}, 7},
      {1, 2, 2, 9, 4, {}, 9},
      {2, 1, 3, 13, 6, {}, 13},
      {3, 2, 4, 5, 3, {}, 5},
      // A block of 6 queries (the second of 3 devices) against the whole sequence of 18.
      {1, 2, 2, 6, 4, {6, 0, 18, 0}, 18},
      // The load-balanced layout: 4 chunks of the sequence of 12, the first device's half.
      {2, 1, 4, 6, 5, {0, 0, 12, 4}, 12},
  };
  uint32_t seed = 700;
  for (const GroupCase& c : cases) {
    const std::string what = "batch " + std::to_string(c.batch) + ", kv heads " +
                             std::to_string(c.kvHeads) + ", group " + std::to_string(c.group) +
                             ", t " + std::to_string(c.t) + ", tk " + std::to_string(c.tk);
    const int64_t slices = c.batch * c.kvHeads * c.group;
    const std::vector<float> q = randomFloats(slices * c.t * c.d, seed++),
                             dout = randomFloats(slices * c.t * c.d, seed++),
                             k = randomFloats(c.batch * c.kvHeads * c.tk * c.d, seed++),
                             v = randomFloats(c.batch * c.kvHeads * c.tk * c.d, seed++);
    const std::vector<float> kr = repeatHeads(k, c), vr = repeatHeads(v, c);

    std::vector<float> out(q.size()), lse(slices * c.t), outR(q.size()), lseR(lse.size());
    causalAttention(q.data(), k.data(), v.data(), out.data(), lse.data(), slices, c.t, c.tk, c.d,
                    scale, c.at, pool_, c.group);
    causalAttention(q.data(), kr.data(), vr.data(), outR.data(), lseR.data(), slices, c.t, c.tk,
                    c.d, scale, c.at, pool_);
    EXPECT_EQ(out, outR) << what;
    EXPECT_EQ(lse, lseR) << what;

    std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
    causalAttentionGrad(dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                        dq.data(), dk.data(), dv.data(), slices, c.t, c.tk, c.d, scale, c.at, pool_,
                        c.group);
    std::vector<float> dqR(q.size()), dkR(kr.size()), dvR(vr.size());
    causalAttentionGrad(dout.data(), q.data(), kr.data(), vr.data(), outR.data(), lseR.data(),
                        dqR.data(), dkR.data(), dvR.data(), slices, c.t, c.tk, c.d, scale, c.at,
                        pool_);
    EXPECT_EQ(dq, dqR) << what;
    // The grouped kernel sums over the group before it rounds, the reference after.
    expectClose(dk, sumGroups(dkR, c), 1e-5, 1e-6, what + ", dk");
    expectClose(dv, sumGroups(dvR, c), 1e-5, 1e-6, what + ", dv");

    // Deterministic: a second run gives the same bits.
    std::vector<float> dk2(k.size()), dv2(v.size()), dq2(q.size());
    causalAttentionGrad(dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                        dq2.data(), dk2.data(), dv2.data(), slices, c.t, c.tk, c.d, scale, c.at,
                        pool_, c.group);
    EXPECT_EQ(dk, dk2) << what;
    EXPECT_EQ(dv, dv2) << what;
  }
}

DTC_INSTANTIATE_POOL_TEST(GroupedAttentionTest);

}  // namespace
}  // namespace dtc::cpu
