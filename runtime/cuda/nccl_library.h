// NCCL, loaded at run time. The plugin never links libnccl: dlopen finds libnccl.so.2 when the
// first backend is created, so libdtc_cuda.so still loads where NCCL is not installed (its
// collectives then stay host-staged through MPI). nccl.h is used when the build found it; else
// the few declarations below, NCCL's C ABI as it has been since 2.0, so the plugin also builds
// with a CUDA toolkit that ships no NCCL headers.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "support/status.h"

#if DTC_HAVE_NCCL_H
#include <nccl.h>
#else
extern "C" {
typedef struct ncclComm* ncclComm_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
// int-sized, as NCCL's own enums, and able to hold every value NCCL returns.
typedef enum : int { ncclSuccess = 0 } ncclResult_t;
typedef enum : int { ncclSum = 0, ncclMax = 2 } ncclRedOp_t;
typedef enum : int {
  ncclUint8 = 1,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclBfloat16 = 9
} ncclDataType_t;
}
#endif

namespace dtc::cuda {

// The NCCL entry points dtc uses, resolved by name from the loaded library.
struct NcclApi {
  ncclResult_t (*getVersion)(int*);
  ncclResult_t (*getUniqueId)(ncclUniqueId*);
  ncclResult_t (*commInitRank)(ncclComm_t*, int nranks, ncclUniqueId, int rank);
  ncclResult_t (*commAbort)(ncclComm_t);
  const char* (*getErrorString)(ncclResult_t);
  const char* (*getLastError)(ncclComm_t);  // null before NCCL 2.13
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*allGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int root, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int peer, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int peer, ncclComm_t, cudaStream_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();

  std::string path;     // the file that was loaded
  std::string version;  // "2.28.9"
};

// The process's NCCL: loaded on the first call and kept for the process's life (communicators
// outlive no library). Tries $DTC_NCCL_LIBRARY, then libnccl.so.2 on the loader's path, then
// the library the build found. An error says what was tried and why it failed.
StatusOr<const NcclApi*> loadNccl();

// An NCCL result as a Status: `what` was attempted; NCCL's last error message when it has one.
Status ncclStatus(const NcclApi& api, ncclResult_t result, const std::string& what);

// Runs `calls` (NCCL calls returning Status) between ncclGroupStart and ncclGroupEnd, so NCCL
// fuses them into one launch; the group is always closed, even when a call failed.
template <typename Calls>
Status ncclGrouped(const NcclApi& api, const std::string& where, Calls&& calls) {
  DTC_RETURN_IF_ERROR(ncclStatus(api, api.groupStart(), where + "ncclGroupStart"));
  Status status = calls();
  Status closed = ncclStatus(api, api.groupEnd(), where + "ncclGroupEnd");
  return status.ok() ? closed : status;
}

}  // namespace dtc::cuda
