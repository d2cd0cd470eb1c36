/* nn_probe: what this machine's GPUs and GPU libraries can really do, for `hetsim doctor` and the
 * gpu tests. Every probe runs the thing it reports on — a cuDNN convolution, a cuBLAS GEMM, an
 * NCCL all-reduce, kernels on green-context SM partitions — and checks the result against the
 * CPU; none guesses from version numbers alone.
 *
 * Contract: a probe never exits or aborts; it fills an hs_probe_result whose status says ok,
 * missing (the library, the driver, a GPU or a feature is not there; detail says which and why)
 * or failed (it is there but the probe went wrong; detail has the library's error). Probes use
 * GPU 0 and allocate and free their own memory. The green-context probe leaves the calling
 * thread's current CUDA context as it found it; the probes through the CUDA runtime (cuDNN,
 * cuBLAS, NCCL) leave GPU 0's primary context current, as the runtime's own calls do. Call them
 * from one thread at a time. Builds without CUDA report every GPU
 * probe as missing with "built without CUDA". Units: bytes, kHz for clocks, seconds. */
#ifndef HS_NN_PROBE_H
#define HS_NN_PROBE_H

#include <stdint.h>

#include "core/core_error.h"

typedef enum hs_probe_status { HS_PROBE_OK = 0, HS_PROBE_MISSING = 1, HS_PROBE_FAILED = 2 } hs_probe_status;

typedef struct hs_probe_result {
  hs_probe_status status;
  char detail[1024]; /* ok: what ran and what was measured; otherwise why not */
  double value;      /* the probe's measurement (see each probe), NaN when none */
  double expected;   /* what value is compared with, NaN when nothing */
} hs_probe_result;

#define HS_PROBE_MAX_GPUS 64

typedef struct hs_gpu_info {
  int index;
  char name[256];
  char uuid[64];          /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it */
  int cc_major, cc_minor; /* compute capability */
  int sms;                /* streaming multiprocessors */
  int64_t memory_bytes;
  int clock_khz;          /* SM clock */
  int memory_clock_khz;
  int memory_bus_bits;
} hs_gpu_info;

/* "ok"/"missing"/"failed". */
const char *hs_probe_status_name(hs_probe_status s);

/* The version the statically linked CUDA runtime reports (cudaRuntimeGetVersion, 13000 for
 * 13.0); needs no GPU. HS_EUNSUPPORTED when built without CUDA. */
int hs_probe_cuda_runtime_version(int *version, hs_diag *d);

/* Lists the GPUs through the driver API. Returns 0 with *count set (0 to HS_PROBE_MAX_GPUS), or
 * HS_ENOTFOUND with d saying why there is none to list (no driver, no device, built without
 * CUDA). */
int hs_probe_gpus(hs_gpu_info *out, int max, int *count, hs_diag *d);

/* cuDNN convolution (2x3x8x8 input, 4 3x3 filters, padding 1) forward, backward-data and
 * backward-filter through the graph API and the plan building the cuda nets use
 * (nn_cuda_plan.h, strict math), each against a CPU reference; value = the largest absolute
 * error of the three. */
void hs_probe_cudnn_conv(hs_probe_result *r);
/* cuDNN's device-properties JSON of GPU `ordinal` (cuDNN 9.8+; what tests/test_deviceless_cudnn.c
 * builds plans from), malloc'ed in *json. HS_ENOTFOUND without a GPU or cuDNN, HS_EUNSUPPORTED
 * for a cuDNN too old. */
int hs_probe_cudnn_deviceprop(int ordinal, char **json, hs_diag *d);
/* cuBLAS SGEMM 64x64x64 against a CPU reference; value = the largest absolute error. */
void hs_probe_cublas_gemm(hs_probe_result *r);
/* NCCL all-reduce (sum of 1024 floats) among `ranks` communicators on GPU 0: ranks = 1 is the
 * plain single-rank case; ranks = 2 needs NCCL 2.30+ with NCCL_MULTI_RANK_GPU_ENABLE=1, which the
 * probe sets when it is unset, before NCCL's first call reads it. value = the NCCL version. */
void hs_probe_nccl_allreduce(int ranks, hs_probe_result *r);
/* Two green contexts (CUDA 12.4+ driver API) with SM partitions of different sizes run the same
 * kernel; value = measured speed ratio (large / small), expected = SM ratio. Failed when the
 * measured ratio shows less than half the expected gain (the partitions do not isolate). */
void hs_probe_green_ctx(hs_probe_result *r);
/* MPS: whether a control daemon answers on $CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps):
 * the folder exists, holds the `control` endpoint, and a connection to it is accepted (a socket
 * connects, or a FIFO has a reader). Sends nothing. Works in every build. */
void hs_probe_mps(hs_probe_result *r);

/* Internal to nn/: the green-context probe's kernel (nn_probe.cu). Enqueues blocks x threads
 * threads that each run `iters` dependent multiply-adds and write one float of out, on the CUDA
 * stream `stream` (a cudaStream_t); returns the launch status (a cudaError_t, 0 = success). */
#ifdef __cplusplus
extern "C"
#endif
int hs_probe_spin_launch(void *stream, float *out, int blocks, int threads, int iters);

#endif
