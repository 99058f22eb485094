#include "zoo/Attention.h"

#include <cmath>

namespace dtc::zoo {

void causalAttention(ModelBuilder& b, const std::string& a, const std::string& q,
                     const std::string& k, const std::string& v, int64_t t, int64_t heads,
                     int64_t d, const std::string& out, const AttentionOptions& options) {
  const double scale = options.scale != 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(d));
  b.node(a + ".scores", "MatMul", {q, k}, {a + ".scores"}, {NodeAttr::integer("transpose_b", 1)});
  b.node(a + ".softmax", "CausalSoftmax", {a + ".scores"}, {a + ".probs"},
         {NodeAttr::real("scale", scale)});
  std::string probs = a + ".probs";
  if (options.dropout > 0) {
    b.node(a + ".attn_dropout", "Dropout", {probs}, {a + ".probs.dropped"},
           {NodeAttr::real("ratio", options.dropout)});
    probs = a + ".probs.dropped";
  }
  b.node(a + ".context", "MatMul", {probs, v}, {a + ".ctx.bhtd"});
  b.node(a + ".merge", "Transpose", {a + ".ctx.bhtd"}, {a + ".ctx.bthd"},
         {NodeAttr::ints("perm", {0, 2, 1, 3})});
  b.node(a + ".merge_heads", "Reshape", {a + ".ctx.bthd"}, {out},
         {NodeAttr::ints("shape", {-1, t, heads * d})});
}

}  // namespace dtc::zoo
