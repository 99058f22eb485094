// Mixture-of-experts pieces the zoo's models share (MoeOptions is declared in zoo/Zoo.h).
#pragma once

#include <string>
#include <vector>

#include "zoo/Zoo.h"

namespace dtc::zoo {

// The training loss "loss": cross-entropy of "logits" against "targets", plus, for each MoE
// layer named in `layers` (its node's outputs <layer>.aux_loss and <layer>.z_loss), auxWeight
// times its load-balancing loss and zWeight times its z-loss.
void trainingLoss(ModelBuilder& b, const MoeOptions& o, const std::vector<std::string>& layers);

}  // namespace dtc::zoo
