// What the fuzz targets that reach the MLIR importer share: their abort on a violated property,
// the sanitizer setting libMLIR needs, and the count of accepted inputs that replay_main.cc
// reads. Included by one source file per fuzz binary (it defines symbols).
#pragma once

#include "fuzz_support.h"

// LLVM's allocator headers poison bump-allocator slabs when inlined into instrumented code, and
// libMLIR (not instrumented) hands out memory from the same slabs without unpoisoning it: reads
// of MLIR attributes would be reported as use-after-poison.
extern "C" const char* __asan_default_options() { return "allow_user_poisoning=0"; }
