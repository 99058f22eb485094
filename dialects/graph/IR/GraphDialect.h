#pragma once

#include "mlir/IR/Dialect.h"

#include "graph/IR/GraphDialect.h.inc"
