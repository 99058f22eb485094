#include <cblas.h>

#include <thread>

#include "cpu/kernels/blas.h"

namespace dtc::cpu {

void setBlasThreads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  openblas_set_num_threads(threads > 0 ? threads : 1);
}

}  // namespace dtc::cpu

#include <unistd.h>
#include <cstdlib>

namespace dtc::cpu {

void selectBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const char* core = nullptr;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    core = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    core = "Haswell";
#endif
  if (!core) return;
  ::setenv("OPENBLAS_CORETYPE", core, 1);
  ::execv("/proc/self/exe", argv);  // only returns on failure: keep going with what we have
}

}  // namespace dtc::cpu
