// CPU kernels of a mixture-of-experts layer: top-k routing with per-group expert capacity, the
// dispatch of tokens into the experts' buffers [E, G, C, D] and their weighted combination, with
// the gradients; and logsumexp over the last dimension. Row-major buffers, shapes passed
// explicitly (ops/moe_math.h's MoeShape), as in kernels.h. The routing plan (expert, slot: int64
// [G, S, K]) is what moe_route writes; the kernels that read one return false, having written
// nothing, when an entry lies outside the buffers.
#pragma once

#include <cstdint>

#include "ops/moe_math.h"
#include "support/thread_pool.h"

namespace dtc::cpu {

using moe::MoeShape;

// scores [G, S, E] -> expert, slot, weight [G, S, K], load [G, S, E] (m.width unused).
void moeRoute(const float* scores, int64_t* expert, int64_t* slot, float* weight, float* load,
              const MoeShape& m, bool normalize, ThreadPool& pool);
// (dweight [G, S, K], scores [G, S, E], expert) -> dscores [G, S, E]; false on an expert
// outside [0, E) (m.capacity unused).
bool moeRouteGrad(const float* dweight, const float* scores, const int64_t* expert, float* dscores,
                  const MoeShape& m, bool normalize, ThreadPool& pool);

// x [G, S, D] -> buffer [E, G, C, D], zero where no token was sent.
bool moeDispatch(const float* x, const int64_t* expert, const int64_t* slot, float* buffer,
                 const MoeShape& m, ThreadPool& pool);
// dbuffer [E, G, C, D] -> dx [G, S, D].
bool moeDispatchGrad(const float* dbuffer, const int64_t* expert, const int64_t* slot, float* dx,
                     const MoeShape& m, ThreadPool& pool);
// (buffer [E, G, C, D], weight [G, S, K]) -> y [G, S, D].
bool moeCombine(const float* buffer, const int64_t* expert, const int64_t* slot,
                const float* weight, float* y, const MoeShape& m, ThreadPool& pool);
// dy [G, S, D] -> dbuffer [E, G, C, D], dweight [G, S, K].
bool moeCombineGrad(const float* dy, const float* buffer, const int64_t* expert,
                    const int64_t* slot, const float* weight, float* dbuffer, float* dweight,
                    const MoeShape& m, ThreadPool& pool);

// y[r] = log Σ_n exp(x[r, n]) over rows of n, the row's maximum subtracted first.
void logSumExp(const float* x, float* y, int64_t rows, int64_t n, ThreadPool& pool);
// dx[r, n] = dy[r] · exp(x[r, n] − y[r]).
void logSumExpGrad(const float* dy, const float* x, const float* y, float* dx, int64_t rows,
                   int64_t n, ThreadPool& pool);

}  // namespace dtc::cpu
