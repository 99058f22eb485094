// Times one kernel on a backend as a plan's step would run it: the step built from its op,
// attributes and operand shapes, its operands in the backend's memory filled with normally
// distributed values (ids in range), its planned scratch and the GEMM workspace given, bound
// by the backend and run back to back. What `dtrun --calibrate` measures a device with, so a
// profile describes dtrun's own kernels on it, not the hardware's datasheet.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "support/dtype.h"
#include "support/thread_pool.h"

namespace dtc::perf {

struct BenchOperand {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t idRange = 0;  // int64 operands: values drawn from [0, idRange)
  int alias = -1;       // outputs: the input they are written over (in place), or -1

  uint64_t elements() const;
};

struct BenchAttr {
  std::string name;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
};

struct BenchStep {
  std::string op;  // the kernel's name (ops/kernels.def)
  std::vector<BenchAttr> attrs;
  std::vector<BenchOperand> inputs, outputs;
};

class KernelBench {
 public:
  // `backend` (not owned) outlives the bench; `pool` serves the CPU backend's kernels.
  KernelBench(Backend& backend, ThreadPool& pool);
  ~KernelBench();
  KernelBench(const KernelBench&) = delete;
  KernelBench& operator=(const KernelBench&) = delete;

  // Seconds one call of `step` takes: after a warm-up call, the best of `rounds` rounds, each
  // the mean of as many calls as fill `budget` seconds (at least 2), the backend synchronised
  // around each round.
  StatusOr<double> secondsPerCall(const BenchStep& step, double budget, int rounds = 3);

 private:
  Status ensureWorkspace();

  Backend& backend_;
  ThreadPool& pool_;
  uint8_t* workspace_ = nullptr;
  uint64_t workspaceBytes_ = 0;
  uint64_t seed_ = 1;
};

}  // namespace dtc::perf
