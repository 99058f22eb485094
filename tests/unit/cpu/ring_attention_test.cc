// Ring attention's kernels against attention over the whole sequence: each device's queries
// attended to one block of keys at a time (its own, then the blocks `shift` places back), the
// partial results merged by their log-sum-exps, must give the whole-key result; and the
// gradients computed block by block with the final out and lse, dq summed over blocks and each
// block's dk and dv summed over the devices that visited it, the whole-key gradients (their
// reduce-scatter). Contiguous and load-balanced layouts, 2 and 4 devices.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::PoolTest;
using testing::randomFloats;

struct RingCase {
  int64_t devices, chunks;  // chunks 0: contiguous
};

std::vector<double> toDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

class RingAttentionTest : public PoolTest {
 protected:
  static constexpr int64_t kSlices = 3, kT = 8, kD = 5;  // kT rows per device
  static constexpr float kScale = 0.4f;

  // Rows [first, first + kT) of each slice of x [kSlices, rows, kD].
  static std::vector<float> block(const std::vector<float>& x, int64_t rows, int64_t first) {
    std::vector<float> out(kSlices * kT * kD);
    for (int64_t s = 0; s < kSlices; ++s)
      std::copy(x.begin() + (s * rows + first) * kD, x.begin() + (s * rows + first + kT) * kD,
                out.begin() + s * kT * kD);
    return out;
  }

  void check(const RingCase& c) {
    const int64_t n = c.devices, length = n * kT;
    const std::vector<float> k = randomFloats(kSlices * length * kD, 2),
                             v = randomFloats(kSlices * length * kD, 3),
                             dout = randomFloats(kSlices * length * kD, 4);
    const std::vector<float> qAll = randomFloats(kSlices * length * kD, 1);
    // Each block's dk and dv, summed over the devices (the ring's sums).
    std::vector<std::vector<double>> dkSum(n, std::vector<double>(kSlices * kT * kD, 0.0)),
        dvSum = dkSum, dkWhole = dkSum, dvWhole = dkSum;
    for (int64_t r = 0; r < n; ++r) {
      const std::string what = std::to_string(n) + " devices, chunks " + std::to_string(c.chunks) +
                               ", device " + std::to_string(r);
      const std::vector<float> q = block(qAll, length, r * kT), dy = block(dout, length, r * kT);
      AttentionPositions whole{r * kT, 0, length, c.chunks};
      std::vector<float> out(q.size()), lse(kSlices * kT);
      causalAttention(q.data(), k.data(), v.data(), out.data(), lse.data(), kSlices, kT, length, kD,
                      kScale, whole, pool_);
      std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
      causalAttentionGrad(dy.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                          dq.data(), dk.data(), dv.data(), kSlices, kT, length, kD, kScale, whole,
                          pool_);
      for (int64_t b = 0; b < n; ++b) {
        const std::vector<float> dkb = block(dk, length, b * kT), dvb = block(dv, length, b * kT);
        for (size_t i = 0; i < dkb.size(); ++i) {
          dkWhole[b][i] += dkb[i];
          dvWhole[b][i] += dvb[i];
        }
      }
      // The ring: block (r − s) mod n at step s.
      std::vector<float> ringOut(q.size()), ringLse(lse.size());
      std::vector<double> ringDq(q.size(), 0.0);
      for (int64_t s = 0; s < n; ++s) {
        const int64_t owner = (r - s + n) % n;
        const std::vector<float> kb = block(k, length, owner * kT),
                                 vb = block(v, length, owner * kT);
        AttentionPositions at{r * kT, owner * kT, length, c.chunks};
        std::vector<float> o(q.size()), l(lse.size());
        causalAttention(q.data(), kb.data(), vb.data(), o.data(), l.data(), kSlices, kT, kT, kD,
                        kScale, at, pool_);
        if (s == 0) {
          ringOut = o;
          ringLse = l;
        } else {
          attentionMerge(ringOut.data(), ringLse.data(), o.data(), l.data(), ringOut.data(),
                         ringLse.data(), kSlices * kT, kD, pool_);
        }
      }
      testing::expectClose(ringOut, toDouble(out), 1e-5, 1e-6, what + ": out");
      testing::expectClose(ringLse, toDouble(lse), 1e-5, 1e-6, what + ": lse");
      for (int64_t s = 0; s < n; ++s) {
        const int64_t owner = (r - s + n) % n;
        const std::vector<float> kb = block(k, length, owner * kT),
                                 vb = block(v, length, owner * kT);
        AttentionPositions at{r * kT, owner * kT, length, c.chunks};
        std::vector<float> dqb(q.size()), dkb(kb.size()), dvb(vb.size());
        causalAttentionGrad(dy.data(), q.data(), kb.data(), vb.data(), ringOut.data(),
                            ringLse.data(), dqb.data(), dkb.data(), dvb.data(), kSlices, kT, kT, kD,
                            kScale, at, pool_);
        for (size_t i = 0; i < dqb.size(); ++i) {
          ringDq[i] += dqb[i];
          dkSum[owner][i] += dkb[i];
          dvSum[owner][i] += dvb[i];
        }
      }
      std::vector<float> ringDqF(ringDq.begin(), ringDq.end());
      testing::expectClose(ringDqF, toDouble(dq), 1e-4, 1e-6, what + ": dq");
    }
    for (int64_t b = 0; b < n; ++b) {
      const std::string what = std::to_string(n) + " devices, block " + std::to_string(b);
      testing::expectClose(std::vector<float>(dkSum[b].begin(), dkSum[b].end()), dkWhole[b], 1e-4,
                           1e-6, what + ": dk");
      testing::expectClose(std::vector<float>(dvSum[b].begin(), dvSum[b].end()), dvWhole[b], 1e-4,
                           1e-6, what + ": dv");
    }
  }
};

TEST_P(RingAttentionTest, BlocksMergeToTheWholeSequence) {
  for (const RingCase& c : {RingCase{2, 0}, RingCase{2, 4}, RingCase{4, 0}, RingCase{4, 8}})
    check(c);
}

// A query that sees no key of a block (an early query against a later block) gets out 0 and
// lse −inf there, and merging it changes nothing.
TEST_P(RingAttentionTest, BlockWithNoVisibleKey) {
  const std::vector<float> q = randomFloats(kT * kD, 5), k = randomFloats(kT * kD, 6),
                           v = randomFloats(kT * kD, 7);
  std::vector<float> out(kT * kD, 1.0f), lse(kT, 1.0f);
  AttentionPositions at{0, kT, 2 * kT, 0};  // device 0's queries, device 1's keys: all later
  causalAttention(q.data(), k.data(), v.data(), out.data(), lse.data(), 1, kT, kT, kD, kScale, at,
                  pool_);
  for (float o : out) EXPECT_EQ(o, 0.0f);
  for (float l : lse) EXPECT_EQ(l, -std::numeric_limits<float>::infinity());
  std::vector<float> own(kT * kD), ownLse(kT);
  causalAttention(q.data(), k.data(), v.data(), own.data(), ownLse.data(), 1, kT, kT, kD, kScale,
                  AttentionPositions{0, 0, 2 * kT, 0}, pool_);
  std::vector<float> merged(kT * kD), mergedLse(kT);
  attentionMerge(own.data(), ownLse.data(), out.data(), lse.data(), merged.data(), mergedLse.data(),
                 kT, kD, pool_);
  EXPECT_EQ(merged, own);
  EXPECT_EQ(mergedLse, ownLse);
}

DTC_INSTANTIATE_POOL_TEST(RingAttentionTest);

}  // namespace
}  // namespace dtc::cpu
