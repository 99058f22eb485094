#include "checkpoint/layout.h"

#include <cstdio>
#include <map>

#include "exec/shard_layout.h"
#include "planfile/communication.h"

namespace dtc::checkpoint {

std::string rankFileName(int rank) {
  char name[40];
  std::snprintf(name, sizeof name, "rank-%05d.safetensors", rank);
  return name;
}

StatusOr<CheckpointLayout> planCheckpointLayout(const Plan& plan) {
  const std::vector<int64_t> sizes = meshSizes(plan);
  int64_t ranks = 1;
  for (int64_t s : sizes) ranks *= s;
  CheckpointLayout layout;
  layout.ranks = static_cast<int>(ranks);
  std::map<std::string, size_t> byName;
  // Per tensor, the ranks holding each distinct block (keyed by its first piece's offsets), in
  // rank order, and the pieces of that block.
  struct Block {
    std::vector<int> holders;
    std::vector<Piece> pieces;
  };
  std::vector<std::map<std::vector<int64_t>, Block>> blocks;
  std::vector<std::vector<std::vector<int64_t>>> blockOrder;  // first-seen order per tensor
  for (int64_t r = 0; r < ranks; ++r) {
    const std::vector<int64_t> coords = meshCoords(r, sizes);
    // Its pipeline stage, for a pipeline plan: its coordinate on the pipeline axis.
    const int stage =
        plan.stages() > 0 ? static_cast<int>(coords[plan.root().pipeline_axis()]) : -1;
    for (const plan::StateTensor* s : *plan.root().state()) {
      if (!Plan::onStage(s->stage(), stage)) continue;
      const std::string name = s->name()->str();
      const auto* globalShape = s->global_shape() ? s->global_shape() : s->shape();
      std::vector<int64_t> shape(globalShape->begin(), globalShape->end());
      auto [it, fresh] = byName.emplace(name, layout.tensors.size());
      if (fresh) {
        layout.tensors.push_back({name, toDType(s->dtype()), shape, s->role(), {}});
        blocks.emplace_back();
        blockOrder.emplace_back();
      }
      PlannedTensor& t = layout.tensors[it->second];
      // One tensor listed by several stages (AdamW's step): the same tensor everywhere.
      if (t.shape != shape || t.dtype != toDType(s->dtype()))
        return Status::InvalidInput(plan.name() + " is invalid: state tensor '" + name +
                                    "' differs between pipeline stages");
      std::vector<Piece> pieces =
          piecesOf(shape, cutsAt(s->sharding(), shape.size(), sizes, coords));
      Block& block = blocks[it->second][pieces.front().global.offsets];
      if (block.holders.empty()) {
        block.pieces = std::move(pieces);
        blockOrder[it->second].push_back(block.pieces.front().global.offsets);
      }
      block.holders.push_back(static_cast<int>(r));
    }
  }
  std::vector<uint64_t> assigned(ranks, 0);
  for (size_t t = 0; t < layout.tensors.size(); ++t) {
    PlannedTensor& tensor = layout.tensors[t];
    for (const std::vector<int64_t>& key : blockOrder[t]) {
      const Block& block = blocks[t][key];
      int writer = block.holders.front();
      for (int h : block.holders)
        if (assigned[h] < assigned[writer]) writer = h;
      uint64_t bytes = 0;
      for (size_t k = 0; k < block.pieces.size(); ++k) {
        const Piece& p = block.pieces[k];
        std::string sliceKey =
            block.pieces.size() == 1 ? tensor.name : tensor.name + "/" + std::to_string(k);
        tensor.slices.push_back({p.global, writer, p.localOffsets, sliceKey});
        bytes += static_cast<uint64_t>(p.global.elements()) * dtypeSize(tensor.dtype);
      }
      assigned[writer] += bytes;
    }
  }
  return layout;
}

}  // namespace dtc::checkpoint
