#include "zoo/Attention.h"

#include <cmath>

namespace dtc::zoo {

void causalAttention(ModelBuilder& b, const std::string& a, const std::string& q,
                     const std::string& k, const std::string& v, int64_t t, int64_t heads,
                     int64_t d, const std::string& out) {
  b.node(a + ".scores", "MatMul", {q, k}, {a + ".scores"}, {NodeAttr::integer("transpose_b", 1)});
  b.node(a + ".softmax", "CausalSoftmax", {a + ".scores"}, {a + ".probs"},
         {NodeAttr::real("scale", 1.0 / std::sqrt(static_cast<double>(d)))});
  b.node(a + ".context", "MatMul", {a + ".probs", v}, {a + ".ctx.bhtd"});
  b.node(a + ".merge", "Transpose", {a + ".ctx.bhtd"}, {a + ".ctx.bthd"},
         {NodeAttr::ints("perm", {0, 2, 1, 3})});
  b.node(a + ".merge_heads", "Reshape", {a + ".ctx.bthd"}, {out},
         {NodeAttr::ints("shape", {-1, t, heads * d})});
}

}  // namespace dtc::zoo
