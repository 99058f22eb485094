#include <cblas.h>

#include <thread>

#include "cpu/blas.h"

namespace dtc::cpu {

void setBlasThreads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  openblas_set_num_threads(threads > 0 ? threads : 1);
}

}  // namespace dtc::cpu
