// Mixture-of-experts pieces the zoo's models share (MoeOptions is declared in zoo/Zoo.h).
#pragma once

#include <string>
#include <vector>

#include "zoo/Zoo.h"

namespace dtc::zoo {

// An MoE node's router losses as terms of the training loss, inside its layer (the layer's
// nodes stay one run, so a stack of MoE layers is still a stack): auxWeight times its
// load-balancing loss (<moe>.aux_loss) and zWeight times its z-loss (<moe>.z_loss), those whose
// weight is not 0, appended to `terms`.
void routerLossTerms(ModelBuilder& b, const MoeOptions& o, const std::string& moe,
                     std::vector<std::string>& terms);

// The training loss "loss": cross-entropy of "logits" against "targets", plus each of `terms`
// (routerLossTerms'), added in order after the stack.
void trainingLoss(ModelBuilder& b, const std::vector<std::string>& terms);

}  // namespace dtc::zoo
