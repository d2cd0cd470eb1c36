/* nn_probe: GPU probes that really run (see nn_probe.h). */
#include "nn/nn_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/core_buildinfo.h"
#include "nn/nn_cuda.h"
#include "nn/nn_cuda_plan.h"
#include "nn/nn_cudalib.h"

#if HETSIM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static void result_set(hs_probe_result *r, hs_probe_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void result_set(hs_probe_result *r, hs_probe_status s, const char *fmt, ...) {
  r->status = s;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->detail, sizeof r->detail, fmt, ap);
  va_end(ap);
}

static void result_init(hs_probe_result *r) {
  memset(r, 0, sizeof *r);
  r->value = NAN;
  r->expected = NAN;
}

const char *hs_probe_status_name(hs_probe_status s) {
  switch (s) {
  case HS_PROBE_OK: return "ok";
  case HS_PROBE_MISSING: return "missing";
  case HS_PROBE_FAILED: return "failed";
  }
  return "failed";
}

/* Opens a socket or FIFO at path without sending anything: 1 when something accepted it. */
static int endpoint_answers(const char *path, char *why, size_t why_cap) {
  struct stat st;
  if (stat(path, &st) != 0) {
    snprintf(why, why_cap, "%s: %s", path, strerror(errno));
    return 0;
  }
  if (S_ISSOCK(st.st_mode)) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
      snprintf(why, why_cap, "%s: path too long for a socket", path);
      return 0;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
      snprintf(why, why_cap, "socket: %s", strerror(errno));
      return 0;
    }
    int ok = connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
    if (!ok) snprintf(why, why_cap, "connect %s: %s", path, strerror(errno));
    close(fd);
    return ok;
  }
  if (S_ISFIFO(st.st_mode)) {
    /* A FIFO opened for writing without blocking fails with ENXIO when nobody reads it. */
    int fd = open(path, O_WRONLY | O_NONBLOCK);
    if (fd < 0) {
      snprintf(why, why_cap, "%s: %s", path,
               errno == ENXIO ? "no daemon reads the control pipe" : strerror(errno));
      return 0;
    }
    close(fd);
    return 1;
  }
  snprintf(why, why_cap, "%s is neither a socket nor a pipe", path);
  return 0;
}

void hs_probe_mps(hs_probe_result *r) {
  result_init(r);
  const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
  if (!dir || !dir[0]) dir = "/tmp/nvidia-mps";
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    result_set(r, HS_PROBE_MISSING, "no control daemon: %s does not exist (start one with "
               "`nvidia-cuda-mps-control -d`)", dir);
    return;
  }
  char path[1024], why[1200];
  if (snprintf(path, sizeof path, "%s/control", dir) >= (int)sizeof path) {
    result_set(r, HS_PROBE_MISSING, "MPS pipe directory path too long: %.100s...", dir);
    return;
  }
  if (!endpoint_answers(path, why, sizeof why)) {
    result_set(r, HS_PROBE_MISSING, "no control daemon answers: %s", why);
    return;
  }
  result_set(r, HS_PROBE_OK, "control daemon answers at %s", path);
}

#if HETSIM_HAVE_CUDA

/* Deterministic test data in [-1, 1). */
static float pattern(int i, int salt) {
  unsigned x = (unsigned)i * 2654435761u + (unsigned)salt * 40503u;
  x ^= x >> 13;
  return (float)(x % 2000u) / 1000.0f - 1.0f;
}

int hs_probe_cuda_runtime_version(int *version, hs_diag *d) {
  *version = 0;
  cudaError_t e = cudaRuntimeGetVersion(version);
  if (e != cudaSuccess)
    return hs_diag_set(d, HS_ERUNTIME, "cudaRuntimeGetVersion: %s", cudaGetErrorString(e));
  return 0;
}

/* The driver table with cuInit done and at least one device, or NULL with r saying why. */
static const hs_cudrv_api *driver_ready(hs_probe_result *r) {
  char et[HS_CUDRV_ERROR_TEXT];
  hs_diag d = {0};
  const hs_cudrv_api *cu = hs_cudrv_api_get(&d);
  if (!cu) {
    result_set(r, HS_PROBE_MISSING, "no GPU: %s", d.msg);
    return NULL;
  }
  CUresult e = cu->cuInit(0);
  int n = 0;
  if (e == CUDA_SUCCESS) e = cu->cuDeviceGetCount(&n);
  if (e != CUDA_SUCCESS || n < 1) {
    result_set(r, HS_PROBE_MISSING, "no GPU: %s",
               e != CUDA_SUCCESS ? hs_cudrv_error_text(cu, e, et, sizeof et) : "0 devices");
    return NULL;
  }
  return cu;
}

int hs_probe_gpus(hs_gpu_info *out, int max, int *count, hs_diag *d) {
  char et[HS_CUDRV_ERROR_TEXT];
  *count = 0;
  hs_probe_result r;
  result_init(&r);
  const hs_cudrv_api *cu = driver_ready(&r);
  if (!cu) return hs_diag_set(d, HS_ENOTFOUND, "%s", r.detail);
  int n = 0;
  cu->cuDeviceGetCount(&n);
  if (n > max) n = max;
  for (int i = 0; i < n; i++) {
    hs_gpu_info *g = &out[i];
    memset(g, 0, sizeof *g);
    g->index = i;
    CUdevice dev;
    CUresult e = cu->cuDeviceGet(&dev, i);
    CUuuid uuid;
    size_t mem = 0;
    if (e == CUDA_SUCCESS) e = cu->cuDeviceGetName(g->name, (int)sizeof g->name, dev);
    if (e == CUDA_SUCCESS) e = cu->cuDeviceGetUuid(&uuid, dev);
    if (e == CUDA_SUCCESS) e = cu->cuDeviceTotalMem(&mem, dev);
    struct {
      CUdevice_attribute a;
      int *to;
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &g->cc_major},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &g->cc_minor},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &g->sms},
        {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &g->clock_khz},
        {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &g->memory_clock_khz},
        {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &g->memory_bus_bits},
    };
    for (size_t k = 0; k < sizeof attrs / sizeof attrs[0] && e == CUDA_SUCCESS; k++)
      e = cu->cuDeviceGetAttribute(attrs[k].to, attrs[k].a, dev);
    if (e != CUDA_SUCCESS)
      return hs_diag_set(d, HS_ERUNTIME, "GPU %d: %s", i, hs_cudrv_error_text(cu, e, et, sizeof et));
    g->memory_bytes = (int64_t)mem;
    const unsigned char *u = (const unsigned char *)uuid.bytes;
    snprintf(g->uuid, sizeof g->uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  }
  *count = n;
  return 0;
}

/* Device buffers of one probe, freed together. */
#define PROBE_MAX_BUFS 8
typedef struct probe_mem {
  void *p[PROBE_MAX_BUFS];
  int n;
} probe_mem;

static void *probe_alloc(probe_mem *m, size_t bytes, hs_probe_result *r) {
  void *p = NULL;
  cudaError_t e = m->n < PROBE_MAX_BUFS ? cudaMalloc(&p, bytes) : cudaErrorMemoryAllocation;
  if (e != cudaSuccess) {
    result_set(r, HS_PROBE_FAILED, "cudaMalloc(%zu bytes): %s", bytes, cudaGetErrorString(e));
    return NULL;
  }
  m->p[m->n++] = p;
  return p;
}

static void probe_free(probe_mem *m) {
  for (int i = 0; i < m->n; i++) cudaFree(m->p[i]);
  m->n = 0;
}

static int copy_to(void *dst, const void *src, size_t bytes, hs_probe_result *r) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) result_set(r, HS_PROBE_FAILED, "cudaMemcpy: %s", cudaGetErrorString(e));
  return e == cudaSuccess;
}

static int copy_from(void *dst, const void *src, size_t bytes, hs_probe_result *r) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) result_set(r, HS_PROBE_FAILED, "cudaMemcpy: %s", cudaGetErrorString(e));
  return e == cudaSuccess;
}

/* Tolerance for fp32 results of short sums against a double CPU reference. TF32 tensor cores
 * would exceed it; the probes ask for plain fp32 math. */
#define PROBE_TOL 1e-3

#if HETSIM_HAVE_CUDNN
#define CONV_N 2
#define CONV_C 3
#define CONV_H 8
#define CONV_W 8
#define CONV_K 4
#define CONV_R 3

/* x[n][c][i][j] with zero padding of 1 around the 8x8 image. */
static double conv_x(const float *x, int n, int c, int i, int j) {
  if (i < 0 || i >= CONV_H || j < 0 || j >= CONV_W) return 0;
  return x[((n * CONV_C + c) * CONV_H + i) * CONV_W + j];
}

/* CPU references of the three directions of a 3x3 convolution with padding 1, stride 1:
 * y = conv(x, w); dx from (w, dy); dw from (x, dy). */
static void conv_reference(const float *x, const float *w, const float *dy, double *y, double *dx, double *dw) {
  enum { NX = CONV_N * CONV_C * CONV_H * CONV_W, NW = CONV_K * CONV_C * CONV_R * CONV_R };
  for (int i = 0; i < NX; i++) dx[i] = 0;
  for (int i = 0; i < NW; i++) dw[i] = 0;
  for (int n = 0; n < CONV_N; n++)
    for (int k = 0; k < CONV_K; k++)
      for (int i = 0; i < CONV_H; i++)
        for (int j = 0; j < CONV_W; j++) {
          double acc = 0, g = dy[((n * CONV_K + k) * CONV_H + i) * CONV_W + j];
          for (int c = 0; c < CONV_C; c++)
            for (int u = 0; u < CONV_R; u++)
              for (int v = 0; v < CONV_R; v++) {
                int wi = ((k * CONV_C + c) * CONV_R + u) * CONV_R + v, yi = i + u - 1, xj = j + v - 1;
                acc += conv_x(x, n, c, yi, xj) * w[wi];
                dw[wi] += g * conv_x(x, n, c, yi, xj);
                if (yi >= 0 && yi < CONV_H && xj >= 0 && xj < CONV_W)
                  dx[((n * CONV_C + c) * CONV_H + yi) * CONV_W + xj] += g * w[wi];
              }
          y[((n * CONV_K + k) * CONV_H + i) * CONV_W + j] = acc;
        }
}

static double max_err(const double *ref, const float *got, int n) {
  double err = 0;
  for (int i = 0; i < n; i++) {
    double e = fabs(ref[i] - got[i]);
    if (!(e <= err)) err = e; /* also catches NaN */
  }
  return err;
}

/* The three directions through cuDNN's graph API, with the plan building the cuda nets use
 * (nn_cuda_plan.h, strict math), against the CPU. */
void hs_probe_cudnn_conv(hs_probe_result *r) {
  result_init(r);
  hs_diag d = {0};
  const hs_cudnn_api *dnn = hs_cudnn_api_get(&d);
  if (!dnn) {
    result_set(r, HS_PROBE_MISSING, "%s", d.msg);
    return;
  }
  if (!driver_ready(r)) return;
  enum { NX = CONV_N * CONV_C * CONV_H * CONV_W, NW = CONV_K * CONV_C * CONV_R * CONV_R,
         NY = CONV_N * CONV_K * CONV_H * CONV_W };
  float x[NX], w[NW], dy[NY], out[NX > NY ? NX : NY];
  double ry[NY], rdx[NX], rdw[NW];
  for (int i = 0; i < NX; i++) x[i] = pattern(i, 1);
  for (int i = 0; i < NW; i++) w[i] = pattern(i, 2);
  for (int i = 0; i < NY; i++) dy[i] = pattern(i, 6);
  conv_reference(x, w, dy, ry, rdx, rdw);
  cudnnHandle_t h = NULL;
  hs_cuplan plans[HS_CUPLAN_DIRS];
  memset(plans, 0, sizeof plans);
  probe_mem m = {0};
  cudnnStatus_t s = dnn->cudnnCreate(&h);
  if (s != CUDNN_STATUS_SUCCESS) {
    result_set(r, HS_PROBE_FAILED, "cudnnCreate: %s", dnn->cudnnGetErrorString(s));
    return;
  }
  const hs_cuplan_conv g = {.batch = CONV_N, .in_c = CONV_C, .in_h = CONV_H, .in_w = CONV_W, .out_c = CONV_K,
                            .out_h = CONV_H, .out_w = CONV_W, .kernel = CONV_R, .stride = 1, .pad = 1, .groups = 1,
                            .w_align = 16};
  const hs_cuplan_target t = {.dnn = dnn, .handle = h, .math = HS_CUDA_MATH_STRICT};
  int64_t ws = 0;
  for (int dir = 0; dir < HS_CUPLAN_DIRS; dir++) {
    if (hs_cuplan_build(&t, &g, (hs_cuplan_dir)dir, &plans[dir], &d)) {
      result_set(r, HS_PROBE_FAILED, "%s", d.msg);
      goto done;
    }
    if (plans[dir].workspace > ws) ws = plans[dir].workspace;
  }
  float *dx = probe_alloc(&m, sizeof x, r), *dw = dx ? probe_alloc(&m, sizeof w, r) : NULL;
  float *ddy = dw ? probe_alloc(&m, sizeof dy, r) : NULL, *dout = ddy ? probe_alloc(&m, sizeof out, r) : NULL;
  void *dws = dout && ws ? probe_alloc(&m, (size_t)ws, r) : NULL;
  if (!dout || (ws && !dws)) goto done;
  if (!copy_to(dx, x, sizeof x, r) || !copy_to(dw, w, sizeof w, r) || !copy_to(ddy, dy, sizeof dy, r)) goto done;
  /* Each direction writes dout; its operands are the other buffers. */
  void *operands[HS_CUPLAN_DIRS][3] = {[HS_CUPLAN_FWD] = {dx, dw, dout},
                                        [HS_CUPLAN_DGRAD] = {dout, dw, ddy},
                                        [HS_CUPLAN_WGRAD] = {dx, dout, ddy}};
  const double *refs[HS_CUPLAN_DIRS] = {ry, rdx, rdw};
  const int counts[HS_CUPLAN_DIRS] = {NY, NX, NW};
  double err[HS_CUPLAN_DIRS], worst = 0;
  for (int dir = 0; dir < HS_CUPLAN_DIRS; dir++) {
    if (hs_cuplan_execute(dnn, h, &plans[dir], operands[dir][0], operands[dir][1], operands[dir][2], dws, &d)) {
      result_set(r, HS_PROBE_FAILED, "%s %s", hs_cuplan_dir_name((hs_cuplan_dir)dir), d.msg);
      goto done;
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      result_set(r, HS_PROBE_FAILED, "%s: %s", hs_cuplan_dir_name((hs_cuplan_dir)dir), cudaGetErrorString(e));
      goto done;
    }
    if (!copy_from(out, dout, (size_t)counts[dir] * sizeof(float), r)) goto done;
    err[dir] = max_err(refs[dir], out, counts[dir]);
    if (!(err[dir] <= worst)) worst = err[dir];
  }
  r->value = worst;
  r->expected = 0;
  if (!(worst <= PROBE_TOL))
    result_set(r, HS_PROBE_FAILED, "convolution differs from the CPU: forward %.3g, backward-data %.3g, "
               "backward-filter %.3g (engines %lld, %lld, %lld)", err[0], err[1], err[2], (long long)plans[0].engine,
               (long long)plans[1].engine, (long long)plans[2].engine);
  else
    result_set(r, HS_PROBE_OK, "graph API, strict fp32: forward, backward-data and backward-filter of "
               "%dx%dx%dx%d * %dx%dx%dx%d (engines %lld, %lld, %lld): max error %.2g vs CPU", CONV_N, CONV_C,
               CONV_H, CONV_W, CONV_K, CONV_C, CONV_R, CONV_R, (long long)plans[0].engine,
               (long long)plans[1].engine, (long long)plans[2].engine, worst);
done:
  probe_free(&m);
  for (int dir = 0; dir < HS_CUPLAN_DIRS; dir++) hs_cuplan_free(dnn, &plans[dir]);
  if (h) dnn->cudnnDestroy(h);
}
int hs_probe_cudnn_deviceprop(int ordinal, char **json, hs_diag *d) {
  *json = NULL;
  hs_diag why = {0};
  const hs_cudnn_api *dnn = hs_cudnn_api_get(&why);
  if (!dnn) return hs_diag_set(d, HS_ENOTFOUND, "%s", why.msg);
  hs_probe_result r;
  result_init(&r);
  if (!driver_ready(&r)) return hs_diag_set(d, HS_ENOTFOUND, "%s", r.detail);
  cudnnBackendDescriptor_t dp = NULL;
  int rc = hs_cuplan_deviceprop_gpu(dnn, ordinal, &dp, d);
  if (!rc) rc = hs_cuplan_deviceprop_serialize(dnn, dp, json, d);
  if (dp) (void)dnn->cudnnBackendDestroyDescriptor(dp);
  if (rc) hs_diag_prefix(d, "GPU %d", ordinal);
  return rc;
}
#else
void hs_probe_cudnn_conv(hs_probe_result *r) {
  result_init(r);
  result_set(r, HS_PROBE_MISSING, "built without cuDNN headers");
}

int hs_probe_cudnn_deviceprop(int ordinal, char **json, hs_diag *d) {
  (void)ordinal;
  *json = NULL;
  return hs_diag_set(d, HS_ENOTFOUND, "built without cuDNN headers");
}
#endif /* HETSIM_HAVE_CUDNN */

#define GEMM_N 64

void hs_probe_cublas_gemm(hs_probe_result *r) {
  result_init(r);
  hs_diag d = {0};
  const hs_cublas_api *bl = hs_cublas_api_get(&d);
  if (!bl) {
    result_set(r, HS_PROBE_MISSING, "%s", d.msg);
    return;
  }
  if (!driver_ready(r)) return;
  enum { NN = GEMM_N * GEMM_N };
  float *a = malloc(3 * NN * sizeof *a);
  if (!a) {
    result_set(r, HS_PROBE_FAILED, "out of memory");
    return;
  }
  float *b = a + NN, *c = b + NN;
  for (int i = 0; i < NN; i++) a[i] = pattern(i, 3), b[i] = pattern(i, 4);
  probe_mem m = {0};
  cublasHandle_t h = NULL;
  cublasStatus_t s = bl->cublasCreate(&h);
  if (s != CUBLAS_STATUS_SUCCESS) {
    result_set(r, HS_PROBE_FAILED, "cublasCreate: %s", bl->cublasGetStatusString(s));
    goto done;
  }
  float *da = probe_alloc(&m, NN * sizeof *a, r), *db = da ? probe_alloc(&m, NN * sizeof *a, r) : NULL;
  float *dc = db ? probe_alloc(&m, NN * sizeof *a, r) : NULL;
  if (!dc || !copy_to(da, a, NN * sizeof *a, r) || !copy_to(db, b, NN * sizeof *a, r)) goto done;
  const float one = 1.0f, zero = 0.0f;
  /* Column-major C = A * B. */
  s = bl->cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, da, GEMM_N, db,
                      GEMM_N, &zero, dc, GEMM_N);
  if (s != CUBLAS_STATUS_SUCCESS) {
    result_set(r, HS_PROBE_FAILED, "cublasSgemm: %s", bl->cublasGetStatusString(s));
    goto done;
  }
  if (!copy_from(c, dc, NN * sizeof *c, r)) goto done;
  double err = 0;
  for (int j = 0; j < GEMM_N; j++)
    for (int i = 0; i < GEMM_N; i++) {
      double ref = 0;
      for (int k = 0; k < GEMM_N; k++) ref += (double)a[k * GEMM_N + i] * b[j * GEMM_N + k];
      double e = fabs(ref - c[j * GEMM_N + i]);
      if (!(e <= err)) err = e;
    }
  r->value = err;
  r->expected = 0;
  if (!(err <= PROBE_TOL))
    result_set(r, HS_PROBE_FAILED, "SGEMM differs from the CPU by %.3g", err);
  else
    result_set(r, HS_PROBE_OK, "SGEMM %dx%dx%d: max error %.2g vs CPU", GEMM_N, GEMM_N, GEMM_N, err);
done:
  probe_free(&m);
  if (h) bl->cublasDestroy(h);
  free(a);
}

#if HETSIM_HAVE_NCCL
#define NCCL_COUNT 1024
#define NCCL_MAX_RANKS 2
/* How long the probe waits for its all-reduce. */
#define NCCL_PROBE_WAIT_S 30.0

void hs_probe_nccl_allreduce(int ranks, hs_probe_result *r) {
  result_init(r);
  if (ranks < 1 || ranks > NCCL_MAX_RANKS) {
    result_set(r, HS_PROBE_FAILED, "NCCL probe: %d ranks asked, 1 or %d supported", ranks, NCCL_MAX_RANKS);
    return;
  }
  /* NCCL reads its environment when first initialised; set this before any NCCL call. */
  if (!getenv("NCCL_MULTI_RANK_GPU_ENABLE")) setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);
  hs_diag d = {0};
  const hs_nccl_api *nc = hs_nccl_api_get(&d);
  if (!nc) {
    result_set(r, HS_PROBE_MISSING, "%s", d.msg);
    return;
  }
  const hs_cudalib_status *st = hs_cudalib_status_get(HS_CUDALIB_NCCL);
  r->value = st->version;
  if (!driver_ready(r)) return;
  ncclComm_t comms[NCCL_MAX_RANKS] = {0};
  cudaStream_t streams[NCCL_MAX_RANKS] = {0};
  int stuck = 0;
  float *buf[NCCL_MAX_RANKS] = {0};
  int devs[NCCL_MAX_RANKS] = {0};
  probe_mem m = {0};
  ncclResult_t e = nc->ncclCommInitAll(comms, ranks, devs);
  if (e != ncclSuccess) {
    const char *last = nc->ncclGetLastError(NULL);
    /* NCCL before 2.30 refuses two ranks on one GPU ("duplicate GPU"): a missing feature. */
    int too_old = ranks > 1 && st->version < 23000;
    result_set(r, too_old ? HS_PROBE_MISSING : HS_PROBE_FAILED, "ncclCommInitAll(%d ranks on GPU 0): %s%s%s%s",
               ranks, nc->ncclGetErrorString(e), last && last[0] ? " (" : "", last ? last : "",
               last && last[0] ? ")" : "");
    if (too_old)
      snprintf(r->detail + strlen(r->detail), sizeof r->detail - strlen(r->detail),
               "; NCCL %s is older than 2.30, which allows it with NCCL_MULTI_RANK_GPU_ENABLE=1",
               st->version_str);
    for (int i = 0; i < ranks; i++) comms[i] = NULL; /* not initialised on failure */
    return;
  }
  float host[NCCL_COUNT];
  for (int i = 0; i < ranks; i++) {
    cudaError_t ce = cudaStreamCreate(&streams[i]);
    if (ce != cudaSuccess) {
      result_set(r, HS_PROBE_FAILED, "cudaStreamCreate: %s", cudaGetErrorString(ce));
      goto done;
    }
    if (!(buf[i] = probe_alloc(&m, sizeof host, r))) goto done;
    for (int k = 0; k < NCCL_COUNT; k++) host[k] = (float)(i + 1) * pattern(k, 5);
    if (!copy_to(buf[i], host, sizeof host, r)) goto done;
  }
  e = nc->ncclGroupStart();
  for (int i = 0; i < ranks && e == ncclSuccess; i++)
    e = nc->ncclAllReduce(buf[i], buf[i], NCCL_COUNT, ncclFloat, ncclSum, comms[i], streams[i]);
  ncclResult_t e2 = nc->ncclGroupEnd();
  if (e == ncclSuccess) e = e2;
  /* Polled, so that an all-reduce that never ends (ranks sharing a GPU wait for each other)
   * fails the probe instead of hanging doctor: its communicators are then aborted, and what
   * the streams may still use is left to the process's exit. */
  for (int i = 0; i < ranks && e == ncclSuccess; i++) {
    if (!hs_cuda_stream_drained(streams[i], NCCL_PROBE_WAIT_S)) {
      stuck = 1;
      result_set(r, HS_PROBE_FAILED, "all-reduce: not done within %.0f s", NCCL_PROBE_WAIT_S);
      goto done;
    }
    cudaError_t ce = cudaStreamSynchronize(streams[i]); /* drained: its status at once */
    if (ce != cudaSuccess) {
      result_set(r, HS_PROBE_FAILED, "all-reduce: %s", cudaGetErrorString(ce));
      goto done;
    }
  }
  if (e != ncclSuccess) {
    /* Part of the group may be queued already: ncclCommDestroy would wait for it (blocking
     * communicators), ncclCommAbort stops it. */
    stuck = 1;
    result_set(r, HS_PROBE_FAILED, "ncclAllReduce: %s", nc->ncclGetErrorString(e));
    goto done;
  }
  /* Rank i holds (i+1)*p; the sum over ranks is p * ranks(ranks+1)/2 on every rank. */
  double err = 0, factor = ranks * (ranks + 1) / 2.0;
  for (int i = 0; i < ranks; i++) {
    if (!copy_from(host, buf[i], sizeof host, r)) goto done;
    for (int k = 0; k < NCCL_COUNT; k++) {
      double ef = fabs(host[k] - factor * pattern(k, 5));
      if (!(ef <= err)) err = ef;
    }
  }
  if (!(err <= PROBE_TOL))
    result_set(r, HS_PROBE_FAILED, "all-reduce result differs from the CPU by %.3g", err);
  else
    result_set(r, HS_PROBE_OK, "all-reduce of %d floats, %d rank%s on GPU 0: max error %.2g (NCCL %s)",
               NCCL_COUNT, ranks, ranks > 1 ? "s" : "", err, st->version_str);
done:
  if (stuck) {
    for (int i = 0; i < ranks; i++)
      if (comms[i]) nc->ncclCommAbort(comms[i]);
    return;
  }
  probe_free(&m);
  for (int i = 0; i < ranks; i++) {
    if (comms[i]) nc->ncclCommDestroy(comms[i]);
    if (streams[i]) cudaStreamDestroy(streams[i]);
  }
}
#else
void hs_probe_nccl_allreduce(int ranks, hs_probe_result *r) {
  result_init(r);
  result_set(r, HS_PROBE_MISSING, "built without NCCL headers");
}
#endif /* HETSIM_HAVE_NCCL */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define SPIN_THREADS 256
#define SPIN_ITERS (1 << 18)
#define SPIN_REPS 3

/* Runs the spin kernel in one green context and returns its median time in seconds, or a
 * negative value with r set. */
static double time_partition(const hs_cudrv_api *cu, CUdevice dev, CUdevResource *res, int blocks,
                             hs_probe_result *r) {
  char et[HS_CUDRV_ERROR_TEXT];
  CUdevResourceDesc desc;
  CUgreenCtx green = NULL;
  CUstream stream = NULL;
  CUcontext ctx = NULL;
  const char *step = "cuDevResourceGenerateDesc";
  double t = -1;
  CUresult e = cu->cuDevResourceGenerateDesc(&desc, res, 1);
  if (e == CUDA_SUCCESS) step = "cuGreenCtxCreate", e = cu->cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
  if (e == CUDA_SUCCESS) step = "cuCtxFromGreenCtx", e = cu->cuCtxFromGreenCtx(&ctx, green);
  if (e == CUDA_SUCCESS) step = "cuCtxSetCurrent", e = cu->cuCtxSetCurrent(ctx);
  if (e == CUDA_SUCCESS) step = "cuGreenCtxStreamCreate", e = cu->cuGreenCtxStreamCreate(&stream, green, CU_STREAM_NON_BLOCKING, 0);
  if (e != CUDA_SUCCESS) {
    result_set(r, HS_PROBE_FAILED, "%s (%u SMs): %s", step, res->sm.smCount, hs_cudrv_error_text(cu, e, et, sizeof et));
    goto done;
  }
  probe_mem m = {0};
  float *out = probe_alloc(&m, (size_t)blocks * SPIN_THREADS * sizeof(float), r);
  if (!out) goto done;
  double ts[SPIN_REPS + 1];
  for (int k = 0; k <= SPIN_REPS; k++) { /* run 0 warms up (module load in this context) */
    double t0 = now_s();
    int le = hs_probe_spin_launch(stream, out, blocks, SPIN_THREADS, SPIN_ITERS);
    e = le == 0 ? cu->cuStreamSynchronize(stream) : CUDA_SUCCESS;
    if (le != 0 || e != CUDA_SUCCESS) {
      result_set(r, HS_PROBE_FAILED, "kernel on %u SMs: %s", res->sm.smCount,
                 le ? cudaGetErrorString((cudaError_t)le) : hs_cudrv_error_text(cu, e, et, sizeof et));
      probe_free(&m);
      goto done;
    }
    ts[k] = now_s() - t0;
  }
  probe_free(&m);
  /* Median of the timed runs. */
  for (int i = 1; i <= SPIN_REPS; i++)
    for (int j = i + 1; j <= SPIN_REPS; j++)
      if (ts[j] < ts[i]) {
        double x = ts[i];
        ts[i] = ts[j];
        ts[j] = x;
      }
  t = ts[1 + SPIN_REPS / 2];
done:
  if (stream) cu->cuStreamDestroy(stream);
  /* No thread may keep a destroyed context current (nn_cuda_part.h): this one is made current
   * above, so it is let go first (hs_probe_green_ctx restores the caller's at its end). */
  if (ctx) cu->cuCtxSetCurrent(NULL);
  if (green) cu->cuGreenCtxDestroy(green);
  return t;
}

void hs_probe_green_ctx(hs_probe_result *r) {
  char et[HS_CUDRV_ERROR_TEXT];
  result_init(r);
  const hs_cudrv_api *cu = driver_ready(r);
  if (!cu) return;
  CUcontext saved = NULL;
  cu->cuCtxGetCurrent(&saved);
  CUdevice dev;
  CUdevResource all, small[1], large[1];
  memset(&all, 0, sizeof all);
  unsigned int nb = 1;
  CUresult e = cu->cuDeviceGet(&dev, 0);
  if (e == CUDA_SUCCESS) e = cu->cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM);
  if (e != CUDA_SUCCESS) {
    result_set(r, HS_PROBE_FAILED, "cuDeviceGetDevResource: %s", hs_cudrv_error_text(cu, e, et, sizeof et));
    return;
  }
  unsigned g = hs_cudrv_sm_granule(&all);
  /* Partitions of g and 2g SMs, or g and 3g where the GPU has room, so the ratio is clear. */
  unsigned want_small = g, want_large = all.sm.smCount >= 4 * g ? 3 * g : 2 * g;
  if (all.sm.smCount < want_small + want_large) {
    result_set(r, HS_PROBE_MISSING, "GPU 0 has %u SMs, too few for partitions of %u and %u SMs",
               all.sm.smCount, want_small, want_large);
    return;
  }
  /* Both partitions are split from the whole GPU's resource: a split's results (the remainder
   * included) cannot be split again without making a green context first (cuda.h). They may
   * overlap, which does not matter: they run one after the other. */
  e = cu->cuDevSmResourceSplitByCount(small, &nb, &all, NULL, 0, want_small);
  if (e == CUDA_SUCCESS && nb >= 1) {
    nb = 1;
    e = cu->cuDevSmResourceSplitByCount(large, &nb, &all, NULL, 0, want_large);
  }
  if (e != CUDA_SUCCESS || nb < 1) {
    result_set(r, HS_PROBE_FAILED, "cuDevSmResourceSplitByCount(%u, %u of %u SMs): %s", want_small,
               want_large, all.sm.smCount, e != CUDA_SUCCESS ? hs_cudrv_error_text(cu, e, et, sizeof et) : "no group");
    return;
  }
  unsigned sm_small = small[0].sm.smCount, sm_large = large[0].sm.smCount;
  /* The same work on both: enough blocks to fill the whole GPU many times over. */
  int blocks = 16 * (int)all.sm.smCount;
  double t_small = time_partition(cu, dev, &small[0], blocks, r);
  double t_large = t_small > 0 ? time_partition(cu, dev, &large[0], blocks, r) : -1;
  cu->cuCtxSetCurrent(saved);
  if (t_small <= 0 || t_large <= 0) return;
  double sm_ratio = (double)sm_large / sm_small, speed_ratio = t_small / t_large;
  r->value = speed_ratio;
  r->expected = sm_ratio;
  if (speed_ratio < 1 + 0.5 * (sm_ratio - 1))
    result_set(r, HS_PROBE_FAILED, "partitions of %u and %u SMs: speed ratio %.2f, SM ratio %.2f "
               "(the partitions do not isolate)", sm_small, sm_large, speed_ratio, sm_ratio);
  else
    result_set(r, HS_PROBE_OK, "partitions of %u and %u SMs: speed ratio %.2f, SM ratio %.2f "
               "(%.1f ms and %.1f ms)", sm_small, sm_large, speed_ratio, sm_ratio, 1e3 * t_small, 1e3 * t_large);
}

#else /* !HETSIM_HAVE_CUDA */

int hs_probe_cuda_runtime_version(int *version, hs_diag *d) {
  *version = 0;
  return hs_diag_set(d, HS_EUNSUPPORTED, "built without CUDA");
}

int hs_probe_gpus(hs_gpu_info *out, int max, int *count, hs_diag *d) {
  *count = 0;
  return hs_diag_set(d, HS_ENOTFOUND, "built without CUDA");
}

static void not_built(hs_probe_result *r) {
  result_init(r);
  result_set(r, HS_PROBE_MISSING, "built without CUDA");
}

void hs_probe_cudnn_conv(hs_probe_result *r) { not_built(r); }
int hs_probe_cudnn_deviceprop(int ordinal, char **json, hs_diag *d) {
  (void)ordinal;
  *json = NULL;
  return hs_diag_set(d, HS_ENOTFOUND, "built without CUDA");
}
void hs_probe_cublas_gemm(hs_probe_result *r) { not_built(r); }
void hs_probe_nccl_allreduce(int ranks, hs_probe_result *r) { not_built(r); }
void hs_probe_green_ctx(hs_probe_result *r) { not_built(r); }

#endif /* HETSIM_HAVE_CUDA */
