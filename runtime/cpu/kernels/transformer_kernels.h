// CPU kernels for transformer ops: batched matmul, layout changes, causal softmax, LayerNorm,
// embedding lookup. Row-major fp32 buffers, shapes passed explicitly, as in kernels.h.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/kernels/kernels.h"
#include "ops/attention_positions.h"

namespace dtc::cpu {

// c[b] = op(a[b]) · op(b[b]) for b in [0, batch): a[b] is [M,K] ([K,M] if transA), b[b] is
// [K,N] ([N,K] if transB), c[b] is [M,N]; the batches are contiguous.
void batchMatmul(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n,
                 int64_t k, bool transA, bool transB, ThreadPool& pool);

// out = x permuted: out.shape[i] = xShape[perm[i]] (rank <= 8).
void transpose(const float* x, const Shape& xShape, const std::vector<int64_t>& perm, float* out,
               ThreadPool& pool);

// Splits x along `axis` into outs.size() parts, part p `sizes[p]` long along it (the sizes add
// up to xShape[axis]).
// The same for elements of `element` bytes (int64 labels as well as floats).
void splitBytes(const uint8_t* x, const Shape& xShape, int64_t axis,
                const std::vector<int64_t>& sizes, const std::vector<uint8_t*>& outs,
                size_t element, ThreadPool& pool);
void split(const float* x, const Shape& xShape, int64_t axis, const std::vector<int64_t>& sizes,
           const std::vector<float*>& outs, ThreadPool& pool);
// The inverse: out (shape outShape) = concatenation of parts along `axis`.
void concat(const std::vector<const float*>& parts, const std::vector<int64_t>& sizes,
            const Shape& outShape, int64_t axis, float* out, ThreadPool& pool);

// x is [batch, T, T] attention scores; y[b,i,j] = softmax_j(scale·x[b,i,j]) over j <= i, and 0
// for j > i (causal mask). Rows are independent. y may alias x.
void causalSoftmax(const float* x, float* y, int64_t batch, int64_t t, float scale,
                   ThreadPool& pool);
// dx = scale · y ⊙ (dy − Σ_j dy⊙y) over unmasked j; 0 where masked.
void causalSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t batch, int64_t t,
                       float scale, ThreadPool& pool);
// The same over `rows` whole rows of n (F.softmax(scale·x, dim=-1)). y may alias x; dx may alias
// dy or y.
void softmax(const float* x, float* y, int64_t rows, int64_t n, float scale, ThreadPool& pool);
void softmaxGrad(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, float scale,
                 ThreadPool& pool);
// log_softmax(scale·x) over whole rows (F.log_softmax), and its gradient from the output:
// dx = scale · (dy − exp(y) · Σ_j dy). Aliasing as softmax.
void logSoftmax(const float* x, float* y, int64_t rows, int64_t n, float scale, ThreadPool& pool);
void logSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t rows, int64_t n,
                    float scale, ThreadPool& pool);

// Causal attention on `slices` independent [T, D] slices of q, k, v (batch × heads), flash-style:
// out [slices, T, D] and lse [slices, T] (log-sum-exp of each query's scaled scores); the
// gradient recomputes the probabilities from q, k and lse.
void causalAttention(const float* q, const float* k, const float* v, float* out, float* lse,
                     int64_t slices, int64_t t, int64_t d, float scale, ThreadPool& pool);
void causalAttentionGrad(const float* dout, const float* q, const float* k, const float* v,
                         const float* out, const float* lse, float* dq, float* dk, float* dv,
                         int64_t slices, int64_t t, int64_t d, float scale, ThreadPool& pool);
// The same for `t` queries against `tk` keys placed by `at` (context parallelism: a block of
// the queries, the sequence load-balanced): query i sees the keys not after it in the original
// sequence. Grouped-query attention: k and v hold slices / `group` slices, query slice s reading
// slice s / group; the backward sums each key/value slice's gradient over its group's queries.
void causalAttention(const float* q, const float* k, const float* v, float* out, float* lse,
                     int64_t slices, int64_t t, int64_t tk, int64_t d, float scale,
                     const AttentionPositions& at, ThreadPool& pool, int64_t group = 1);
void causalAttentionGrad(const float* dout, const float* q, const float* k, const float* v,
                         const float* out, const float* lse, float* dq, float* dk, float* dv,
                         int64_t slices, int64_t t, int64_t tk, int64_t d, float scale,
                         const AttentionPositions& at, ThreadPool& pool, int64_t group = 1);
// A query that sees none of the keys gets out 0 and lse −inf. Merging two such partial results
// of the same `rows` queries (attention over the union of their keys): out [rows, d], lse [rows];
// out and lse may be a's (each row is read before it is written).
void attentionMerge(const float* outA, const float* lseA, const float* outB, const float* lseB,
                    float* out, float* lse, int64_t rows, int64_t d, ThreadPool& pool);

// LayerNorm over the last dimension C of `rows` rows (nn.LayerNorm, biased variance):
// y = (x − mean)·rstd·w + b with rstd = 1/sqrt(var + eps). Writes mean and rstd [rows].
void layerNorm(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
               int64_t rows, int64_t c, float eps, ThreadPool& pool);
// Gradients from the saved mean/rstd: dx [rows,C], dw [C], db [C] (dw/db overwritten, not
// accumulated).
void layerNormGrad(const float* dy, const float* x, const float* w, const float* mean,
                   const float* rstd, float* dx, float* dw, float* db, int64_t rows, int64_t c,
                   ThreadPool& pool);

// out[i, :] = table[ids[i], :] for i in [0, n); table is [vocab, dim]. Returns false (output
// unspecified) if an id is outside [0, vocab).
bool embedding(const float* table, const int64_t* ids, float* out, int64_t n, int64_t vocab,
               int64_t dim, ThreadPool& pool);
// dtable = 0, then dtable[ids[i], :] += dy[i, :]. Deterministic (same result for any thread
// count); ids are assumed in range (the forward checked them).
void embeddingGrad(const float* dy, const int64_t* ids, float* dtable, int64_t n, int64_t vocab,
                   int64_t dim, ThreadPool& pool);

}  // namespace dtc::cpu
