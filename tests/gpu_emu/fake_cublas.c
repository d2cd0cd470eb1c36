/* fake_cublas: an emulated cuBLAS 13 for deviceless tests, built as libcublas.so.13 so that
 * hetsim's loader (nn/nn_cudalib.c) opens it through HETSIM_CUBLAS_PATH. Its work runs on the
 * emulated runtime's streams (fake_cudart.c, whose symbols the test executable exports;
 * gpu_emu.h). It defines the entries of nn_cudalib.h's HS_CUBLAS_FUNCS with <cublas_v2.h>'s
 * declarations, hence under the symbols that header maps them to (cublasCreate_v2,
 * cublasSgemm_v2, ...), as a linked call and the loader resolve them.
 *
 * What it follows from the cuBLAS documentation, adversarially:
 * - cublasSgemm checks its arguments as documented (CUBLAS_STATUS_INVALID_VALUE), reads alpha and
 *   beta at the call (the default host pointer mode: "coefficient values are captured in the
 *   graph", "CUDA Graphs Support"), and computes C = alpha op(A) op(B) + beta C column-major, in
 *   double, stored as float, LATER: the work goes on the handle's stream through
 *   hs_emu_stream_submit_owned. With beta == 0, C is not read ("If beta==0, C does not have to be
 *   a valid input"; emulated device memory starts as NaN bytes, so a read would show).
 * - The matrices must be device memory of the handle's device over their whole extent (columns
 *   times the leading dimension), at the call and again when the work runs: a host pointer, an
 *   overrun or freed memory would fault or corrupt on a GPU, so each is a VIOLATION (message on
 *   stderr, abort()), and so are alpha or beta in device memory under the host pointer mode, and C
 *   overlapping A or B.
 * - Math modes (cublasMath_t): CUBLAS_TF32_TENSOR_OP_MATH rounds A and B to TF32 (10 mantissa
 *   bits; "input conversions round to nearest even") unless NVIDIA_TF32_OVERRIDE=0 was set when
 *   the library started ("will override any defaults or programmatic configuration of NVIDIA
 *   libraries"); the deprecated CUBLAS_TENSOR_OP_MATH ("cuBLAS will use the
 *   CUBLAS_COMPUTE_32F_FAST_16F compute type") rounds them to fp16. The others compute in full
 *   fp32 (BF16x9 emulation is as exact as fp32).
 * - A handle belongs to the device current at cublasCreate ("The cuBLAS library context is tied
 *   to the current CUDA device"): a call while another device is current, or with a stream of
 *   another device, is a VIOLATION. cublasDestroy synchronises that device ("the release of those
 *   resources by calling cublasDestroy() will implicitly call cudaDeviceSynchronize()").
 * - cublasSetStream resets the workspace to the default pool ("unconditionally resets the cuBLAS
 *   library workspace back to the default workspace pool"). A workspace from cublasSetWorkspace
 *   must be 256-byte aligned (CUBLAS_STATUS_INVALID_VALUE) device memory, checked when the work
 *   runs as well.
 * - Graphs ("CUDA Graphs Support"): an sgemm while the calling thread captures
 *   (hs_emu_thread_capturing) on a handle without a workspace from cublasSetWorkspace is a
 *   VIOLATION. cuBLAS would allocate its workspace inside the capture ("cuBLAS routines can create
 *   memory nodes through the use of stream-ordered allocation APIs, cudaMallocAsync and
 *   cudaFreeAsync ... To avoid this issue, use the cublasSetWorkspace() function to provide
 *   user-owned workspace memory"); the emulation has no memory nodes.
 * Handles are never freed: a destroyed one keeps its memory with a poisoned magic, so that a later
 * use is reported. Not modelled: other routines, pointer modes other than host, atomics, the
 * default workspace's device memory, and the SM count target's effect (it is checked and kept). */
#include <cublas_v2.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu_emu/gpu_emu.h"

enum { HANDLE_LIVE = 0x43424c53u, HANDLE_DEAD = 0xdead4342u };

struct cublasContext {
  unsigned magic;
  int device; /* current at cublasCreate */
  cudaStream_t stream;
  int ws_set; /* cublasSetWorkspace since the last cublasSetStream */
  void *ws;
  size_t ws_bytes;
  cublasMath_t math;
  int sm_target;
  struct cublasContext *next_all;
};

/* The library's state is process-wide, as the real library's is. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct cublasContext *all_handles;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int tf32_off; /* NVIDIA_TF32_OVERRIDE=0 when the library started */

static void read_env(void) {
  const char *s = getenv("NVIDIA_TF32_OVERRIDE");
  tf32_off = s && strcmp(s, "0") == 0;
}

/* The handle h names (mu held); a violation for one that is not a handle or was destroyed. */
static struct cublasContext *handle_of(cublasHandle_t h, const char *api) {
  for (struct cublasContext *t = all_handles; t; t = t->next_all)
    if (t == h) {
      if (t->magic == HANDLE_DEAD) hs_emu_violation("%s: cuBLAS handle %p used after cublasDestroy", api, (void *)h);
      return t;
    }
  hs_emu_violation("%s: %p is not a cuBLAS handle", api, (void *)h);
}

/* The runtime calls the library makes leave the caller's last error as it was: cuBLAS carries
 * its own runtime, whose errors are not the application's. */
static cudaError_t keep_last_error(void) { return cudaPeekAtLastError(); }
static void restore_last_error(cudaError_t e) { hs_emu_set_last_error(e); }

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  pthread_once(&env_once, read_env);
  cudaError_t kept = keep_last_error();
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  restore_last_error(kept);
  if (e != cudaSuccess || count == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  struct cublasContext *c = calloc(1, sizeof *c);
  if (!c) return CUBLAS_STATUS_ALLOC_FAILED;
  c->magic = HANDLE_LIVE;
  c->device = hs_emu_current_device();
  c->math = CUBLAS_DEFAULT_MATH;
  pthread_mutex_lock(&mu);
  c->next_all = all_handles;
  all_handles = c;
  pthread_mutex_unlock(&mu);
  *handle = c;
  return CUBLAS_STATUS_SUCCESS;
}

/* Synchronises the current device, as documented; while a capture is under way on it that
 * synchronisation fails (and invalidates the capture): CUBLAS_STATUS_INTERNAL_ERROR, the handle
 * is destroyed all the same. */
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  pthread_mutex_lock(&mu);
  struct cublasContext *c = handle_of(handle, "cublasDestroy");
  c->magic = HANDLE_DEAD;
  pthread_mutex_unlock(&mu);
  cudaError_t kept = keep_last_error();
  cudaError_t e = cudaDeviceSynchronize();
  restore_last_error(kept);
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INTERNAL_ERROR;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value) {
  if (!value) return CUBLAS_STATUS_INVALID_VALUE;
  switch (type) {
  case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
  case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
  case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
  default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

/* The real library's descriptions. */
const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "success";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "the function requires an architectural feature absent from the device";
  case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "the function failed to launch on the GPU";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
  case CUBLAS_STATUS_LICENSE_ERROR: return "the license check failed";
  default: return "unknown error";
  }
}

/* The stream is checked when work is put on it. */
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  pthread_mutex_lock(&mu);
  struct cublasContext *c = handle_of(handle, "cublasSetStream");
  c->stream = streamId;
  c->ws_set = 0;
  c->ws = NULL;
  c->ws_bytes = 0;
  pthread_mutex_unlock(&mu);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t workspaceSizeInBytes) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((uintptr_t)workspace % 256) return CUBLAS_STATUS_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  struct cublasContext *c = handle_of(handle, "cublasSetWorkspace");
  int dev = -1;
  if (workspaceSizeInBytes && (!hs_emu_device_range(workspace, workspaceSizeInBytes, &dev) || dev != c->device))
    hs_emu_violation("cublasSetWorkspace(%p, %zu bytes): not device memory of the handle's device %d (a \"user-owned "
                     "device buffer\" is required; cuBLAS's kernels would fault on it)",
                     workspace, workspaceSizeInBytes, c->device);
  c->ws_set = 1;
  c->ws = workspace;
  c->ws_bytes = workspaceSizeInBytes;
  pthread_mutex_unlock(&mu);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  unsigned base = (unsigned)mode & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH && base != CUBLAS_PEDANTIC_MATH &&
      base != CUBLAS_TF32_TENSOR_OP_MATH && base != CUBLAS_FP32_EMULATED_BF16X9_MATH &&
      base != CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  handle_of(handle, "cublasSetMathMode")->math = mode;
  pthread_mutex_unlock(&mu);
  return CUBLAS_STATUS_SUCCESS;
}

/* "The input value should not exceed the device's multiprocessor count ... Negative values are
 * not accepted." */
cublasStatus_t cublasSetSmCountTarget(cublasHandle_t handle, int smCountTarget) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  pthread_mutex_lock(&mu);
  struct cublasContext *c = handle_of(handle, "cublasSetSmCountTarget");
  int device = c->device;
  pthread_mutex_unlock(&mu);
  cudaError_t kept = keep_last_error();
  int sms = 0;
  cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  restore_last_error(kept);
  if (e != cudaSuccess) return CUBLAS_STATUS_INTERNAL_ERROR;
  if (smCountTarget < 0 || smCountTarget > sms) return CUBLAS_STATUS_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  c->sm_target = smCountTarget;
  pthread_mutex_unlock(&mu);
  return CUBLAS_STATUS_SUCCESS;
}

/* --- SGEMM ---------------------------------------------------------------------------------- */

enum { ROUND_NONE = 0, ROUND_TF32 = 1, ROUND_FP16 = 2 };

/* One SGEMM as its kernel would see it: parameters taken at the call. */
typedef struct sgemm_work {
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc;
  double alpha, beta;
  const float *a, *b;
  float *c;
  size_t a_bytes, b_bytes, c_bytes; /* extents; 0 for a matrix not read */
  void *ws;
  size_t ws_bytes;
  int rounding;
  int device;
} sgemm_work;

/* x rounded to nearest even with 11 significant bits (10 stored), quanta no finer than 2^min_exp
 * (the subnormals of the format). */
static float round_11_bits(float x, int min_exp) {
  if (!isfinite(x) || x == 0.0f) return x;
  int e;
  (void)frexpf(x, &e); /* |x| in [2^(e-1), 2^e) */
  int q = e - 11 < min_exp ? min_exp : e - 11;
  return ldexpf(rintf(ldexpf(x, -q)), q);
}

static float tf32(float x) { return round_11_bits(x, -149); }

static float fp16(float x) {
  float r = round_11_bits(x, -24);
  return fabsf(r) > 65504.0f ? copysignf(INFINITY, x) : r;
}

static float rounded(float x, int rounding) {
  return rounding == ROUND_TF32 ? tf32(x) : rounding == ROUND_FP16 ? fp16(x) : x;
}

/* Bytes from the first to past the last element of a column-major rows x cols matrix. */
static size_t extent(int rows, int cols, int ld) {
  if (rows == 0 || cols == 0) return 0;
  return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * sizeof(float);
}

static void check_matrix(const void *p, size_t bytes, int device, const char *what, const char *when) {
  int dev = -1;
  if (!bytes) return;
  if (!hs_emu_device_range(p, bytes, &dev))
    hs_emu_violation("cublasSgemm %s: %s %p (%zu bytes) is not device memory of that size (host memory, an overrun "
                     "or freed): the kernel would fault",
                     when, what, p, bytes);
  if (dev != device)
    hs_emu_violation("cublasSgemm %s: %s is memory of device %d, the handle's is %d", when, what, dev, device);
}

static void sgemm_check(const sgemm_work *w, const char *when) {
  check_matrix(w->a, w->a_bytes, w->device, "A", when);
  check_matrix(w->b, w->b_bytes, w->device, "B", when);
  check_matrix(w->c, w->c_bytes, w->device, "C", when);
  if (w->ws && w->ws_bytes && !hs_emu_device_range(w->ws, w->ws_bytes, NULL))
    hs_emu_violation("cublasSgemm %s: the workspace %p (%zu bytes, cublasSetWorkspace) was freed", when, w->ws,
                     w->ws_bytes);
}

static void sgemm_run(void *p) {
  const sgemm_work *w = p;
  sgemm_check(w, "(when its work ran)");
  for (int j = 0; j < w->n; j++)
    for (int i = 0; i < w->m; i++) {
      double acc = 0.0;
      if (w->a_bytes)
        for (int l = 0; l < w->k; l++) {
          float x = w->ta == CUBLAS_OP_N ? w->a[i + (size_t)l * (size_t)w->lda] : w->a[l + (size_t)i * (size_t)w->lda];
          float y = w->tb == CUBLAS_OP_N ? w->b[l + (size_t)j * (size_t)w->ldb] : w->b[j + (size_t)l * (size_t)w->ldb];
          acc += (double)rounded(x, w->rounding) * (double)rounded(y, w->rounding);
        }
      float *c = &w->c[i + (size_t)j * (size_t)w->ldc];
      double v = w->alpha * acc;
      if (w->beta != 0.0) v += w->beta * (double)*c; /* beta == 0: C is not read */
      *c = (float)v;
    }
}

static void sgemm_release(void *p) { free(p); }

static int overlaps(const void *p, size_t pn, const void *q, size_t qn) {
  const char *a = p, *b = q;
  return pn && qn && a < b + qn && b < a + pn;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  pthread_mutex_lock(&mu);
  struct cublasContext h = *handle_of(handle, "cublasSgemm"); /* the configuration at the call */
  pthread_mutex_unlock(&mu);
  int ok_op = (transa == CUBLAS_OP_N || transa == CUBLAS_OP_T || transa == CUBLAS_OP_C) &&
              (transb == CUBLAS_OP_N || transb == CUBLAS_OP_T || transb == CUBLAS_OP_C);
  int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  if (!ok_op || m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) ||
      ldc < (m > 1 ? m : 1) || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (hs_emu_current_device() != h.device)
    hs_emu_violation("cublasSgemm: device %d is current, the handle's is %d (\"applications must ensure that the "
                     "device associated with a given cuBLAS context is current\")",
                     hs_emu_current_device(), h.device);
  /* The host pointer mode: the scalars are read here, on the host. */
  if (hs_emu_device_range(alpha, sizeof *alpha, NULL) || hs_emu_device_range(beta, sizeof *beta, NULL))
    hs_emu_violation("cublasSgemm: alpha or beta is device memory, but the pointer mode is "
                     "CUBLAS_POINTER_MODE_HOST (the host would dereference a device address)");
  double al = *alpha, be = *beta;
  if (m == 0 || n == 0 || ((al == 0.0 || k == 0) && be == 1.0)) return CUBLAS_STATUS_SUCCESS;
  if (!C) return CUBLAS_STATUS_INVALID_VALUE; /* "C == NULL if C needs to be scaled" */
  int reads_ab = k > 0 && al != 0.0;
  sgemm_work *w = malloc(sizeof *w);
  if (!w) return CUBLAS_STATUS_ALLOC_FAILED;
  unsigned base = (unsigned)h.math & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  *w = (sgemm_work){.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
                    .alpha = al, .beta = be, .a = A, .b = B, .c = C,
                    .a_bytes = reads_ab ? extent(a_rows, transa == CUBLAS_OP_N ? k : m, lda) : 0,
                    .b_bytes = reads_ab ? extent(b_rows, transb == CUBLAS_OP_N ? n : k, ldb) : 0,
                    .c_bytes = extent(m, n, ldc), .ws = h.ws_set ? h.ws : NULL, .ws_bytes = h.ws_set ? h.ws_bytes : 0,
                    .rounding = base == CUBLAS_TENSOR_OP_MATH                      ? ROUND_FP16
                                : base == CUBLAS_TF32_TENSOR_OP_MATH && !tf32_off ? ROUND_TF32
                                                                                   : ROUND_NONE,
                    .device = h.device};
  sgemm_check(w, "(at the call)");
  if (overlaps(w->c, w->c_bytes, w->a, w->a_bytes) || overlaps(w->c, w->c_bytes, w->b, w->b_bytes))
    hs_emu_violation("cublasSgemm: C (%p, %zu bytes) overlaps A or B: the result would depend on the kernel's order "
                     "of reads and writes",
                     (void *)C, w->c_bytes);
  if (!h.ws_set && hs_emu_thread_capturing())
    hs_emu_violation("cublasSgemm during a stream capture on a handle without cublasSetWorkspace: cuBLAS would "
                     "allocate its workspace inside the capture (cuBLAS documentation, \"CUDA Graphs Support\": "
                     "\"use the cublasSetWorkspace() function to provide user-owned workspace memory\"); note that "
                     "cublasSetStream resets the workspace to the default pool");
  int sdev = hs_emu_stream_device(h.stream);
  if (sdev < 0) hs_emu_violation("cublasSgemm: the handle's stream %p is not a live stream", (void *)h.stream);
  if (sdev != h.device)
    hs_emu_violation("cublasSgemm: the handle's stream belongs to device %d, the handle to device %d", sdev, h.device);
  cudaError_t e = hs_emu_stream_submit_owned(h.stream, sgemm_run, w, sgemm_release);
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
