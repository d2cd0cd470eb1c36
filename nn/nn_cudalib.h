/* nn_cudalib: the GPU libraries hetsim opens at run time — the CUDA driver (libcuda.so.1), cuBLAS
 * (libcublas.so.13), cuDNN (libcudnn.so.9) and NCCL (libnccl.so.2) — as tables of function
 * pointers.
 *
 * Why: only the static CUDA runtime is linked, so one hetsim binary starts on machines with or
 * without a GPU, cuDNN or NCCL and says what is missing (`hetsim doctor`) instead of failing in
 * the dynamic loader. Libraries are found by core_dl (HETSIM_CUBLAS_PATH, HETSIM_CUDNN_PATH,
 * HETSIM_NCCL_PATH, pip `nvidia-*` wheels, /usr/local/cuda/lib64, the default loader path).
 *
 * Each library has one X-macro list of `XX(return type, name, (parameters))` entries. The list
 * generates the table's fields and the dlsym calls, and nn_cudalib.c checks every entry against
 * the prototype in the library's real header at compile time, so a wrong signature does not
 * build. Names that the headers map to versioned symbols (cuDeviceTotalMem -> _v2,
 * cublasCreate -> _v2) resolve to the versioned symbol, as a linked call would. To use a function
 * not listed yet, append an entry to its list; nothing else changes.
 *
 * Threading and state: each library is loaded lazily, once per process, under pthread_once. This
 * is the one process-wide state in hetsim, because the libraries themselves are process-wide
 * (they cannot be loaded twice or unloaded). The tables are read-only after loading and may be
 * used from any thread. Nothing is ever unloaded.
 *
 * Builds without the CUDA toolkit keep hs_cudalib_status_get (every library reports "built
 * without CUDA"); the tables and their getters exist only when HETSIM_HAVE_CUDA (cuDNN: also
 * HETSIM_HAVE_CUDNN; NCCL: also HETSIM_HAVE_NCCL). */
#ifndef HS_NN_CUDALIB_H
#define HS_NN_CUDALIB_H

#include "core/core_buildinfo.h"
#include "core/core_dl.h"
#include "core/core_error.h"

#if HETSIM_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda.h>
#endif
#if HETSIM_HAVE_CUDA && HETSIM_HAVE_CUDNN
#include <cudnn.h>
#endif
#if HETSIM_HAVE_CUDA && HETSIM_HAVE_NCCL
#include <nccl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hs_cudalib_id {
  HS_CUDALIB_DRIVER = 0,
  HS_CUDALIB_CUBLAS = 1,
  HS_CUDALIB_CUDNN = 2,
  HS_CUDALIB_NCCL = 3,
  HS_CUDALIB_COUNT = 4
} hs_cudalib_id;

typedef enum hs_cudalib_state {
  HS_CUDALIB_OK = 0,        /* loaded, every listed function resolved */
  HS_CUDALIB_MISSING = 1,   /* not found, not loadable, or a listed function is absent */
  HS_CUDALIB_NOT_BUILT = 2  /* this build has no headers for it (built without CUDA, ...) */
} hs_cudalib_state;

typedef struct hs_cudalib_status {
  const char *name;          /* "cuDNN" */
  const char *soname;        /* "libcudnn.so.9" */
  const char *env_var;       /* "HETSIM_CUDNN_PATH", or NULL (the driver has none) */
  hs_cudalib_state state;
  int version;               /* the library's own number: driver 13000, cuBLAS 130100,
                                cuDNN 91900, NCCL 22803; 0 when not loaded */
  char version_str[32];      /* "9.19.0"; empty when not loaded */
  char path[HS_DL_PATH_MAX]; /* the file opened; empty when not loaded */
  char error[HS_DL_WHY_MAX]; /* why the state is not OK; empty when OK */
  char note[160];            /* OK but worth saying (the driver is the toolkit's stub); or empty */
} hs_cudalib_status;

/* Loads the library on first use and returns its status; never NULL for a valid id (NULL for an
 * invalid one). Safe in every build and from any thread. */
const hs_cudalib_status *hs_cudalib_status_get(hs_cudalib_id id);

#if HETSIM_HAVE_CUDA

/* Table helpers: a typedef per entry and one field per entry. */
#define HS_CUDALIB_TYPEDEF(ret, name, args) typedef ret(*hs_pfn_##name) args;
#define HS_CUDALIB_FIELD(ret, name, args) hs_pfn_##name name;

/* The CUDA driver API (libcuda.so.1, installed with the NVIDIA driver). Green contexts need a
 * CUDA 12.4+ driver; on older drivers the library loads but those entries are missing and the
 * table reports so. The CUDA toolkit's stub libcuda.so (lib64/stubs) resolves every entry but
 * answers CUDA_ERROR_STUB_LIBRARY to every call: the status then says so in `note`. */
#define HS_CUDRV_FUNCS(XX)                                                                      \
  XX(CUresult, cuInit, (unsigned int flags))                                                   \
  XX(CUresult, cuDriverGetVersion, (int *version))                                             \
  XX(CUresult, cuGetErrorString, (CUresult error, const char **str))                           \
  XX(CUresult, cuGetErrorName, (CUresult error, const char **str))                             \
  XX(CUresult, cuDeviceGetCount, (int *count))                                                 \
  XX(CUresult, cuDeviceGet, (CUdevice * dev, int ordinal))                                     \
  XX(CUresult, cuDeviceGetName, (char *name, int len, CUdevice dev))                           \
  XX(CUresult, cuDeviceGetUuid, (CUuuid * uuid, CUdevice dev))                                 \
  XX(CUresult, cuDeviceTotalMem, (size_t * bytes, CUdevice dev))                               \
  XX(CUresult, cuDeviceGetAttribute, (int *value, CUdevice_attribute attrib, CUdevice dev))    \
  XX(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice dev))                      \
  XX(CUresult, cuDevicePrimaryCtxRelease, (CUdevice dev))                                      \
  XX(CUresult, cuCtxSetCurrent, (CUcontext ctx))                                               \
  XX(CUresult, cuCtxGetCurrent, (CUcontext * ctx))                                             \
  XX(CUresult, cuStreamSynchronize, (CUstream stream))                                         \
  XX(CUresult, cuStreamDestroy, (CUstream stream))                                             \
  XX(CUresult, cuDeviceGetDevResource,                                                         \
     (CUdevice dev, CUdevResource * resource, CUdevResourceType type))                         \
  XX(CUresult, cuDevSmResourceSplitByCount,                                                    \
     (CUdevResource * result, unsigned int *nb_groups, const CUdevResource *input,             \
      CUdevResource *remaining, unsigned int use_flags, unsigned int min_count))               \
  XX(CUresult, cuDevResourceGenerateDesc,                                                      \
     (CUdevResourceDesc * desc, CUdevResource * resources, unsigned int nb_resources))         \
  XX(CUresult, cuGreenCtxCreate,                                                               \
     (CUgreenCtx * ctx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags))             \
  XX(CUresult, cuGreenCtxDestroy, (CUgreenCtx ctx))                                            \
  XX(CUresult, cuGreenCtxStreamCreate,                                                         \
     (CUstream * stream, CUgreenCtx ctx, unsigned int flags, int priority))                    \
  XX(CUresult, cuCtxFromGreenCtx, (CUcontext * ctx, CUgreenCtx green))                       \
  XX(CUresult, cuGreenCtxGetDevResource,                                                       \
     (CUgreenCtx ctx, CUdevResource * resource, CUdevResourceType type))

/* cuBLAS (libcublas.so.13). */
#define HS_CUBLAS_FUNCS(XX)                                                                     \
  XX(cublasStatus_t, cublasCreate, (cublasHandle_t * handle))                                  \
  XX(cublasStatus_t, cublasDestroy, (cublasHandle_t handle))                                   \
  XX(cublasStatus_t, cublasGetProperty, (libraryPropertyType type, int *value))                \
  XX(cublasStatus_t, cublasSetStream, (cublasHandle_t handle, cudaStream_t stream))            \
  XX(const char *, cublasGetStatusString, (cublasStatus_t status))                             \
  XX(cublasStatus_t, cublasSgemm,                                                              \
     (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, \
      int k, const float *alpha, const float *a, int lda, const float *b, int ldb,             \
      const float *beta, float *c, int ldc))                                                  \
  XX(cublasStatus_t, cublasSetWorkspace,                                                       \
     (cublasHandle_t handle, void *workspace, size_t workspace_bytes))                          \
  XX(cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode))            \
  XX(cublasStatus_t, cublasSetSmCountTarget, (cublasHandle_t handle, int sm_count_target))

HS_CUDRV_FUNCS(HS_CUDALIB_TYPEDEF)
HS_CUBLAS_FUNCS(HS_CUDALIB_TYPEDEF)

typedef struct hs_cudrv_api {
  HS_CUDRV_FUNCS(HS_CUDALIB_FIELD)
} hs_cudrv_api;

typedef struct hs_cublas_api {
  HS_CUBLAS_FUNCS(HS_CUDALIB_FIELD)
} hs_cublas_api;

/* The loaded table, or NULL with d set (HS_ENOTFOUND: "cuBLAS: libcublas.so.13 not found
 * (searched: ...)"). */
const hs_cudrv_api *hs_cudrv_api_get(hs_diag *d);
const hs_cublas_api *hs_cublas_api_get(hs_diag *d);

/* What driver result r means, for a message: "the driver's text (ITS_NAME)", as the driver
 * describes it; the name alone where the driver cannot describe it (cu NULL, or the toolkit's
 * stub, which answers every call with CUDA_ERROR_STUB_LIBRARY) but hetsim knows the code; else
 * "unknown CUDA driver error N". Written into buf (n bytes, HS_CUDRV_ERROR_TEXT suffice), which
 * it returns. */
enum { HS_CUDRV_ERROR_TEXT = 256 };
const char *hs_cudrv_error_text(const hs_cudrv_api *cu, CUresult r, char *buf, size_t n);

/* A driver call's failure as a diagnostic: HS_ENOMEM for CUDA_ERROR_OUT_OF_MEMORY, else
 * HS_ERUNTIME, "CUDA driver: WHAT: " and the result's text (hs_cudrv_error_text); 0 for
 * CUDA_SUCCESS. */
int hs_cudrv_err(const hs_cudrv_api *cu, CUresult r, const char *what, hs_diag *d);

/* The SMs of the smallest green-context partition of `all` (a GPU's SM resource from
 * cuDeviceGetDevResource): its minimum partition size aligned to its co-scheduling granularity
 * (8 SMs on compute capability 9.0). Partitions are whole numbers of such groups: one of N SMs
 * is granted N rounded up to a multiple of it (hs_cudrv_sm_granted). */
static inline unsigned hs_cudrv_sm_granule(const CUdevResource *all) {
  unsigned g = all->sm.minSmPartitionSize;
  if (all->sm.smCoscheduledAlignment > g) g = all->sm.smCoscheduledAlignment;
  return g < 1 ? 1 : g;
}
static inline unsigned hs_cudrv_sm_granted(unsigned want, unsigned granule) {
  return (want + granule - 1) / granule * granule;
}

#if HETSIM_HAVE_CUDNN
/* cuDNN 9 (libcudnn.so.9; it opens its own sub-libraries, libcudnn_cnn.so.9 and others, from
 * its folder). */
#define HS_CUDNN_FUNCS(XX)                                                                      \
  XX(size_t, cudnnGetVersion, (void))                                                          \
  XX(const char *, cudnnGetErrorString, (cudnnStatus_t status))                                \
  XX(cudnnStatus_t, cudnnCreate, (cudnnHandle_t * handle))                                     \
  XX(cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle))                                      \
  XX(cudnnStatus_t, cudnnSetStream, (cudnnHandle_t handle, cudaStream_t stream))               \
  XX(void, cudnnGetLastErrorString, (char *message, size_t max_size))                          \
  XX(cudnnStatus_t, cudnnBackendCreateDescriptor,                                              \
     (cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t * desc))                     \
  XX(cudnnStatus_t, cudnnBackendDestroyDescriptor, (cudnnBackendDescriptor_t desc))            \
  XX(cudnnStatus_t, cudnnBackendFinalize, (cudnnBackendDescriptor_t desc))                     \
  XX(cudnnStatus_t, cudnnBackendSetAttribute,                                                  \
     (cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,                         \
      cudnnBackendAttributeType_t type, int64_t count, const void *elements))                  \
  XX(cudnnStatus_t, cudnnBackendGetAttribute,                                                  \
     (cudnnBackendDescriptor_t const desc, cudnnBackendAttributeName_t name,                   \
      cudnnBackendAttributeType_t type, int64_t requested, int64_t *count, void *elements))    \
  XX(cudnnStatus_t, cudnnBackendExecute,                                                       \
     (cudnnHandle_t handle, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack))

HS_CUDNN_FUNCS(HS_CUDALIB_TYPEDEF)
typedef struct hs_cudnn_api {
  HS_CUDNN_FUNCS(HS_CUDALIB_FIELD)
} hs_cudnn_api;
const hs_cudnn_api *hs_cudnn_api_get(hs_diag *d);
#endif /* HETSIM_HAVE_CUDNN */

#if HETSIM_HAVE_NCCL
/* NCCL 2 (libnccl.so.2). */
#define HS_NCCL_FUNCS(XX)                                                                       \
  XX(ncclResult_t, ncclGetVersion, (int *version))                                             \
  XX(const char *, ncclGetErrorString, (ncclResult_t result))                                  \
  XX(const char *, ncclGetLastError, (ncclComm_t comm))                                        \
  XX(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id))                                       \
  XX(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank)) \
  XX(ncclResult_t, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int *devlist))        \
  XX(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))                                         \
  XX(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * async_error))       \
  XX(ncclResult_t, ncclGroupStart, (void))                                                     \
  XX(ncclResult_t, ncclGroupEnd, (void))                                                       \
  XX(ncclResult_t, ncclAllReduce,                                                              \
     (const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,         \
      ncclComm_t comm, cudaStream_t stream))                                                  \
  XX(ncclResult_t, ncclCommInitRankConfig,                                                     \
     (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config))          \
  XX(ncclResult_t, ncclCommAbort, (ncclComm_t comm))                                           \
  XX(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))                                        \
  XX(ncclResult_t, ncclSend,                                                                   \
     (const void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,          \
      cudaStream_t stream))                                                                   \
  XX(ncclResult_t, ncclRecv,                                                                   \
     (void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,                \
      cudaStream_t stream))                                                                   \
  XX(ncclResult_t, ncclRedOpCreatePreMulSum,                                                   \
     (ncclRedOp_t * op, void *scalar, ncclDataType_t type, ncclScalarResidence_t residence,    \
      ncclComm_t comm))                                                                       \
  XX(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))

HS_NCCL_FUNCS(HS_CUDALIB_TYPEDEF)
typedef struct hs_nccl_api {
  HS_NCCL_FUNCS(HS_CUDALIB_FIELD)
} hs_nccl_api;
const hs_nccl_api *hs_nccl_api_get(hs_diag *d);
#endif /* HETSIM_HAVE_NCCL */

#endif /* HETSIM_HAVE_CUDA */

#ifdef __cplusplus
}
#endif

#endif
