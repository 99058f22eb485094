#pragma once

#include "mlir/IR/Dialect.h"

#include "dist/IR/DistDialect.h.inc"
