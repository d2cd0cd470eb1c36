/* fake_cuda_driver: an emulated CUDA driver for deviceless tests, built as libcuda.so.1 and found
 * by hetsim's loader (nn/nn_cudalib.c) on LD_LIBRARY_PATH. It exports every entry of hetsim's
 * driver table (HS_CUDRV_FUNCS, under the names <cuda.h> gives them: cuDeviceTotalMem_v2, ...)
 * and emulates the part the local communication backend (real/real_local.c) uses: the devices of
 * the emulated runtime (tests/gpu_emu/fake_cudart.c, in the test executable, whose symbols it
 * calls), their primary contexts (retained and released, counted), and the calling thread's
 * current context, which, as with the real driver and runtime, decides the runtime's current
 * device. Green contexts are not emulated: those entries answer CUDA_ERROR_NOT_SUPPORTED.
 *
 * Misuse that the real driver would let corrupt a run (a context that is not one, a primary
 * context released more often than retained) is a violation (gpu_emu.h): the test aborts. */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "tests/gpu_emu/gpu_emu.h"

#define EMU_MAX_DEVICES 16
#define CTX_MAGIC 0x43545855u

struct CUctx_st {
  unsigned magic;
  int device;
};

static struct CUctx_st primaries[EMU_MAX_DEVICES];
static int primary_refs[EMU_MAX_DEVICES]; /* under __atomic builtins */
static _Thread_local CUcontext current;

static int count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  return n < EMU_MAX_DEVICES ? n : EMU_MAX_DEVICES;
}

static int valid_device(CUdevice dev) { return dev >= 0 && dev < count(); }

/* For the tests: how often device dev's primary context is retained now (dlsym it). */
int hs_emu_driver_primary_refs(int dev) {
  return dev >= 0 && dev < EMU_MAX_DEVICES ? __atomic_load_n(&primary_refs[dev], __ATOMIC_ACQUIRE) : -1;
}

CUresult cuInit(unsigned int flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }

CUresult cuDriverGetVersion(int *version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

static const char *error_text(CUresult e, int name) {
  switch (e) {
    case CUDA_SUCCESS: return name ? "CUDA_SUCCESS" : "no error";
    case CUDA_ERROR_INVALID_VALUE: return name ? "CUDA_ERROR_INVALID_VALUE" : "invalid argument";
    case CUDA_ERROR_INVALID_DEVICE: return name ? "CUDA_ERROR_INVALID_DEVICE" : "invalid device ordinal";
    case CUDA_ERROR_INVALID_CONTEXT: return name ? "CUDA_ERROR_INVALID_CONTEXT" : "invalid device context";
    case CUDA_ERROR_NOT_SUPPORTED: return name ? "CUDA_ERROR_NOT_SUPPORTED" : "operation not supported";
    default: return NULL;
  }
}

CUresult cuGetErrorString(CUresult error, const char **str) {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  *str = error_text(error, 0);
  return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **str) {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  *str = error_text(error, 1);
  return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int *n) {
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  if (!name || len < 1) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "gpu_emu device %d", dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  memset(uuid, 0, sizeof *uuid);
  uuid->bytes[15] = (char)dev;
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = (size_t)80 << 30;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  primaries[dev].magic = CTX_MAGIC;
  primaries[dev].device = dev;
  __atomic_add_fetch(&primary_refs[dev], 1, __ATOMIC_ACQ_REL);
  *ctx = &primaries[dev];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (__atomic_sub_fetch(&primary_refs[dev], 1, __ATOMIC_ACQ_REL) < 0)
    hs_emu_violation("cuDevicePrimaryCtxRelease(%d): released more often than retained", dev);
  return CUDA_SUCCESS;
}

static int is_context(CUcontext ctx) {
  return ctx >= &primaries[0] && ctx < &primaries[EMU_MAX_DEVICES] && ctx->magic == CTX_MAGIC;
}

/* Makes ctx current on the calling thread and its device the runtime's current device, as the
 * runtime binds to the context current on the thread. */
CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (ctx && !is_context(ctx)) hs_emu_violation("cuCtxSetCurrent(%p): not a context", (void *)ctx);
  if (ctx && __atomic_load_n(&primary_refs[ctx->device], __ATOMIC_ACQUIRE) < 1)
    hs_emu_violation("cuCtxSetCurrent: device %d's primary context is not retained", ctx->device);
  current = ctx;
  if (ctx && cudaSetDevice(ctx->device) != cudaSuccess)
    hs_emu_violation("cuCtxSetCurrent: the runtime refused device %d", ctx->device);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = current;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  return cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuStreamDestroy(CUstream stream) {
  return cudaStreamDestroy((cudaStream_t)stream) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Green contexts: not emulated. */
CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource *resource, CUdevResourceType type) {
  (void)dev, (void)resource, (void)type;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nb_groups, const CUdevResource *input,
                                     CUdevResource *remaining, unsigned int use_flags, unsigned int min_count) {
  (void)result, (void)nb_groups, (void)input, (void)remaining, (void)use_flags, (void)min_count;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *resources, unsigned int nb_resources) {
  (void)desc, (void)resources, (void)nb_resources;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuGreenCtxCreate(CUgreenCtx *ctx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  (void)ctx, (void)desc, (void)dev, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuGreenCtxDestroy(CUgreenCtx ctx) {
  (void)ctx;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuGreenCtxStreamCreate(CUstream *stream, CUgreenCtx ctx, unsigned int flags, int priority) {
  (void)stream, (void)ctx, (void)flags, (void)priority;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuCtxFromGreenCtx(CUcontext *ctx, CUgreenCtx green) {
  (void)ctx, (void)green;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuGreenCtxGetDevResource(CUgreenCtx ctx, CUdevResource *resource, CUdevResourceType type) {
  (void)ctx, (void)resource, (void)type;
  return CUDA_ERROR_NOT_SUPPORTED;
}
