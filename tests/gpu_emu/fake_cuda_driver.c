/* fake_cuda_driver: an emulated CUDA driver for deviceless tests, built as libcuda.so.1 and found
 * by hetsim's loader (nn/nn_cudalib.c) on LD_LIBRARY_PATH. It exports every entry of hetsim's
 * driver table (HS_CUDRV_FUNCS, under the names <cuda.h> gives them: cuDeviceTotalMem_v2, ...)
 * and emulates, on the devices of the emulated runtime (tests/gpu_emu/fake_cudart.c, in the test
 * executable, whose symbols it calls), with 132 SMs each in groups of 8 (as an H100's):
 * - primary contexts, retained and released (counted), and the calling thread's current context,
 *   which, as with the real driver and runtime, decides the runtime's current device;
 * - green contexts as cuda.h (13.0) describes them. An SM resource carries, in the header's
 *   internal padding, its device, the set of SMs it stands for and where it came from: the
 *   device, a context or a green context (splittable), or a split (whose results and remainder
 *   cannot be split again, and combine in one descriptor only with results of the same split:
 *   CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION otherwise). A split makes disjoint groups of
 *   minCount rounded up to the alignment. A green context retains its device's primary context
 *   until destroyed, has the descriptor's SMs, makes non-blocking streams of the runtime's on its
 *   device, and may be current to one thread at a time.
 * Misuse that the real driver would let corrupt a run, and what cuda.h forbids without naming an
 * error (a green context current on two threads, one destroyed while streams made in it live, a
 * context used after it was destroyed, a primary context released more often than retained), is
 * a violation (gpu_emu.h): the test aborts. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu_emu/gpu_emu.h"

#define EMU_MAX_DEVICES 16
#define EMU_SMS 132      /* SMs of every device */
#define EMU_SM_ALIGN 8   /* minSmPartitionSize and smCoscheduledAlignment */
#define SM_WORDS 3       /* 64-bit words of an SM set */
#define CTX_MAGIC 0x43545855u
#define GREEN_MAGIC 0x47524e43u
#define RES_MAGIC 0x52455355u

struct CUctx_st {
  unsigned magic;
  int device;
  struct CUgreenCtx_st *green; /* the green context this is, or NULL (a primary context) */
};

/* A green context; never freed (a destroyed one keeps its memory, marked, so that a later use is
 * reported). */
struct CUgreenCtx_st {
  unsigned magic;
  int destroyed;
  struct CUctx_st ctx;
  uint64_t sms[SM_WORDS];
  int streams;           /* streams made in it and not destroyed yet */
  int current_on;        /* the thread (thread_id) that has it current, or 0 */
  struct CUgreenCtx_st *next;
};

struct CUdevResourceDesc_st {
  int device;
  uint64_t sms[SM_WORDS];
  struct CUdevResourceDesc_st *next;
};

/* What an SM resource carries in CUdevResource's internal padding. */
typedef struct res_tag {
  unsigned magic;
  int device;
  int split;           /* 0: splittable (a device's or a context's); else the split it came from */
  uint64_t sms[SM_WORDS];
} res_tag;
_Static_assert(sizeof(res_tag) <= sizeof(((CUdevResource *)0)->_internal_padding), "res_tag fits the padding");

static struct CUctx_st primaries[EMU_MAX_DEVICES];
static int primary_refs[EMU_MAX_DEVICES]; /* under __atomic builtins */
static _Thread_local CUcontext current;
static _Thread_local int thread_id;

/* Green contexts, descriptors and streams, under mu. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUgreenCtx_st *greens;
static struct CUdevResourceDesc_st *descs;
static int next_split, next_thread;
typedef struct stream_owner {
  CUstream stream;
  struct CUgreenCtx_st *green;
} stream_owner;
static stream_owner owners[1024];
static int n_owners;

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
    case CUDA_ERROR_OUT_OF_MEMORY: return name ? "CUDA_ERROR_OUT_OF_MEMORY" : "out of memory";
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return name ? "CUDA_ERROR_CONTEXT_IS_DESTROYED" : "context is destroyed";
    case CUDA_ERROR_INVALID_RESOURCE_TYPE: return name ? "CUDA_ERROR_INVALID_RESOURCE_TYPE" : "invalid resource type";
    case CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION:
      return name ? "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION" : "invalid resource configuration";
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

/* A thread that ends gives up the green context current on it: the driver's per-thread state
 * (the context stack) ends with the thread, and a thread that no longer runs cannot race.
 * (An assumption: cuda.h says a green context is current to one thread at a time, and nothing
 * of threads that end.) */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void thread_ends(void *arg) {
  int me = (int)(intptr_t)arg;
  pthread_mutex_lock(&mu);
  for (struct CUgreenCtx_st *x = greens; x; x = x->next)
    if (x->current_on == me) x->current_on = 0;
  pthread_mutex_unlock(&mu);
}

static void exit_key_make(void) {
  if (pthread_key_create(&exit_key, thread_ends) != 0) hs_emu_violation("pthread_key_create failed");
}

static int my_thread(void) {
  if (!thread_id) {
    thread_id = __atomic_add_fetch(&next_thread, 1, __ATOMIC_ACQ_REL);
    pthread_once(&exit_once, exit_key_make);
    (void)pthread_setspecific(exit_key, (void *)(intptr_t)thread_id);
  }
  return thread_id;
}

/* The green context g is one this driver made (mu held). */
static int is_green(const struct CUgreenCtx_st *g) {
  for (const struct CUgreenCtx_st *x = greens; x; x = x->next)
    if (x == g) return 1;
  return 0;
}

static int is_context(CUcontext ctx) {
  if (ctx >= &primaries[0] && ctx < &primaries[EMU_MAX_DEVICES]) return ctx->magic == CTX_MAGIC;
  pthread_mutex_lock(&mu);
  int ok = 0;
  for (const struct CUgreenCtx_st *x = greens; x && !ok; x = x->next) ok = ctx == &x->ctx;
  pthread_mutex_unlock(&mu);
  return ok;
}

/* Makes ctx current on the calling thread and its device the runtime's current device, as the
 * runtime binds to the context current on the thread. */
CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (ctx && !is_context(ctx)) hs_emu_violation("cuCtxSetCurrent(%p): not a context", (void *)ctx);
  if (ctx && __atomic_load_n(&primary_refs[ctx->device], __ATOMIC_ACQUIRE) < 1)
    hs_emu_violation("cuCtxSetCurrent: device %d's primary context is not retained", ctx->device);
  int me = my_thread();
  pthread_mutex_lock(&mu);
  if (ctx && ctx->green) {
    struct CUgreenCtx_st *g = ctx->green;
    if (g->destroyed) hs_emu_violation("cuCtxSetCurrent: the green context %p was destroyed", (void *)g);
    if (g->current_on && g->current_on != me)
      hs_emu_violation("cuCtxSetCurrent: the green context %p is current on another thread (cuda.h: \"a green "
                       "context can be current to only one thread at a time\")", (void *)g);
  }
  if (current && current->green && current->green->current_on == me) current->green->current_on = 0;
  if (ctx && ctx->green) ctx->green->current_on = me;
  pthread_mutex_unlock(&mu);
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

/* A stream made in a green context: destroyed before its context (cuda.h); a stream of a
 * destroyed green context answers CUDA_ERROR_CONTEXT_IS_DESTROYED. */
CUresult cuStreamDestroy(CUstream stream) {
  pthread_mutex_lock(&mu);
  struct CUgreenCtx_st *g = NULL;
  int k = 0;
  while (k < n_owners && owners[k].stream != stream) k++;
  if (k < n_owners) {
    g = owners[k].green;
    owners[k] = owners[--n_owners];
  }
  int gone = g && g->destroyed;
  if (g && !gone) g->streams--;
  pthread_mutex_unlock(&mu);
  if (gone) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  return cudaStreamDestroy((cudaStream_t)stream) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* --- green contexts -------------------------------------------------------------------------- */

static void sm_all(uint64_t *sms) {
  memset(sms, 0, SM_WORDS * sizeof *sms);
  for (int i = 0; i < EMU_SMS; i++) sms[i / 64] |= 1ull << (i % 64);
}

static unsigned sm_count(const uint64_t *sms) {
  unsigned n = 0;
  for (int w = 0; w < SM_WORDS; w++) n += (unsigned)__builtin_popcountll(sms[w]);
  return n;
}

static void res_make(CUdevResource *r, int device, int split, const uint64_t *sms) {
  memset(r, 0, sizeof *r);
  r->type = CU_DEV_RESOURCE_TYPE_SM;
  res_tag t = {.magic = RES_MAGIC, .device = device, .split = split};
  memcpy(t.sms, sms, sizeof t.sms);
  memcpy(r->_internal_padding, &t, sizeof t);
  r->sm.smCount = sm_count(sms);
  r->sm.minSmPartitionSize = EMU_SM_ALIGN;
  r->sm.smCoscheduledAlignment = EMU_SM_ALIGN;
}

/* The tag of an SM resource this driver made, or 0. */
static int res_read(const CUdevResource *r, res_tag *t) {
  if (!r || r->type != CU_DEV_RESOURCE_TYPE_SM) return 0;
  memcpy(t, r->_internal_padding, sizeof *t);
  return t->magic == RES_MAGIC;
}

CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource *resource, CUdevResourceType type) {
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  uint64_t sms[SM_WORDS];
  sm_all(sms);
  res_make(resource, dev, 0, sms);
  return CUDA_SUCCESS;
}

CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nb_groups, const CUdevResource *input,
                                     CUdevResource *remaining, unsigned int use_flags, unsigned int min_count) {
  res_tag in;
  if (!nb_groups || !res_read(input, &in) || use_flags) return CUDA_ERROR_INVALID_VALUE;
  if (in.split) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION; /* a split's output, split again */
  unsigned total = sm_count(in.sms);
  if (min_count > total) return CUDA_ERROR_INVALID_VALUE;
  unsigned size = (min_count + EMU_SM_ALIGN - 1) / EMU_SM_ALIGN * EMU_SM_ALIGN;
  if (size < EMU_SM_ALIGN) size = EMU_SM_ALIGN;
  unsigned n = total / size;
  if (!result) {
    *nb_groups = n;
    return CUDA_SUCCESS;
  }
  if (n > *nb_groups) n = *nb_groups;
  pthread_mutex_lock(&mu);
  int split = ++next_split;
  pthread_mutex_unlock(&mu);
  uint64_t left[SM_WORDS];
  memcpy(left, in.sms, sizeof left);
  for (unsigned g = 0; g < n; g++) {
    uint64_t part[SM_WORDS] = {0};
    unsigned taken = 0;
    for (int i = 0; i < EMU_SMS && taken < size; i++)
      if (left[i / 64] >> (i % 64) & 1) {
        left[i / 64] &= ~(1ull << (i % 64));
        part[i / 64] |= 1ull << (i % 64);
        taken++;
      }
    res_make(&result[g], in.device, split, part);
  }
  if (remaining) res_make(remaining, in.device, split, left);
  *nb_groups = n;
  return CUDA_SUCCESS;
}

CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *resources, unsigned int nb_resources) {
  if (!desc || !resources || nb_resources < 1) return CUDA_ERROR_INVALID_VALUE;
  struct CUdevResourceDesc_st *x = calloc(1, sizeof *x);
  if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
  res_tag first;
  for (unsigned k = 0; k < nb_resources; k++) {
    res_tag t;
    if (!res_read(&resources[k], &t)) {
      free(x);
      return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    }
    if (k == 0) first = t;
    /* One device; several SM resources only as outputs of one split (cuda.h). */
    if (t.device != first.device || (nb_resources > 1 && (!t.split || t.split != first.split))) {
      free(x);
      return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    }
    for (int w = 0; w < SM_WORDS; w++) {
      if (x->sms[w] & t.sms[w]) hs_emu_violation("cuDevResourceGenerateDesc: resource %u overlaps another", k);
      x->sms[w] |= t.sms[w];
    }
  }
  x->device = first.device;
  pthread_mutex_lock(&mu);
  x->next = descs; /* kept: cuda.h has no call that frees a descriptor */
  descs = x;
  pthread_mutex_unlock(&mu);
  *desc = x;
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxCreate(CUgreenCtx *ctx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  if (!ctx || !desc || !(flags & CU_GREEN_CTX_DEFAULT_STREAM)) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev) || desc->device != dev) return CUDA_ERROR_INVALID_DEVICE;
  struct CUgreenCtx_st *g = calloc(1, sizeof *g);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  CUcontext primary;
  (void)cuDevicePrimaryCtxRetain(&primary, dev); /* released when the green context is destroyed */
  g->magic = GREEN_MAGIC;
  g->ctx = (struct CUctx_st){.magic = CTX_MAGIC, .device = dev, .green = g};
  memcpy(g->sms, desc->sms, sizeof g->sms);
  pthread_mutex_lock(&mu);
  g->next = greens;
  greens = g;
  pthread_mutex_unlock(&mu);
  *ctx = g;
  return CUDA_SUCCESS;
}

/* The live green context g (mu held), or a violation. */
static struct CUgreenCtx_st *green_of(CUgreenCtx g, const char *api) {
  if (!is_green(g)) hs_emu_violation("%s(%p): not a green context", api, (void *)g);
  if (g->destroyed) hs_emu_violation("%s: the green context %p was destroyed", api, (void *)g);
  return g;
}

CUresult cuGreenCtxDestroy(CUgreenCtx ctx) {
  pthread_mutex_lock(&mu);
  struct CUgreenCtx_st *g = green_of(ctx, "cuGreenCtxDestroy");
  if (g->streams)
    hs_emu_violation("cuGreenCtxDestroy: %d stream(s) made in it are not destroyed (cuda.h: destroy them first)",
                     g->streams);
  g->destroyed = 1;
  g->current_on = 0;
  int dev = g->ctx.device;
  pthread_mutex_unlock(&mu);
  return cuDevicePrimaryCtxRelease(dev);
}

CUresult cuGreenCtxStreamCreate(CUstream *stream, CUgreenCtx ctx, unsigned int flags, int priority) {
  (void)priority;
  if (!stream || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  struct CUgreenCtx_st *g = green_of(ctx, "cuGreenCtxStreamCreate");
  int dev = g->ctx.device;
  pthread_mutex_unlock(&mu);
  /* In the green context whatever the thread has current (cuda.h): on its device. */
  int before = hs_emu_current_device();
  cudaStream_t s = NULL;
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  (void)cudaSetDevice(before);
  if (e != cudaSuccess) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  if (n_owners == (int)(sizeof owners / sizeof owners[0])) hs_emu_violation("cuGreenCtxStreamCreate: too many streams");
  owners[n_owners++] = (stream_owner){.stream = (CUstream)s, .green = g};
  g->streams++;
  pthread_mutex_unlock(&mu);
  *stream = (CUstream)s;
  return CUDA_SUCCESS;
}

CUresult cuCtxFromGreenCtx(CUcontext *ctx, CUgreenCtx green) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  struct CUgreenCtx_st *g = green_of(green, "cuCtxFromGreenCtx");
  pthread_mutex_unlock(&mu);
  *ctx = &g->ctx;
  return CUDA_SUCCESS;
}

CUresult cuGreenCtxGetDevResource(CUgreenCtx ctx, CUdevResource *resource, CUdevResourceType type) {
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  pthread_mutex_lock(&mu);
  struct CUgreenCtx_st *g = green_of(ctx, "cuGreenCtxGetDevResource");
  res_make(resource, g->ctx.device, 0, g->sms);
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

int hs_emu_driver_green_sms(CUgreenCtx ctx, unsigned long long *sms, int words) {
  pthread_mutex_lock(&mu);
  int ok = is_green(ctx) && !ctx->destroyed && words >= SM_WORDS;
  if (ok) memcpy(sms, ctx->sms, SM_WORDS * sizeof *sms);
  pthread_mutex_unlock(&mu);
  return ok ? (int)sm_count(ctx->sms) : -1;
}

int hs_emu_driver_stream_sms(void *stream) {
  pthread_mutex_lock(&mu);
  int n = EMU_SMS;
  for (int k = 0; k < n_owners; k++)
    if (owners[k].stream == (CUstream)stream) n = (int)sm_count(owners[k].green->sms);
  pthread_mutex_unlock(&mu);
  return n;
}
