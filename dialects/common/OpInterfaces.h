// The op interfaces every graph-level op implements beside its definition (OpInterfaces.td).
#pragma once

#include "mlir/IR/OpDefinition.h"

#include "common/SequenceTrace.h"
#include "common/ShardingRule.h"

#include "common/OpInterfaces.h.inc"
