/* nn_cuda_plan: cuDNN graph-API execution plans for one 2-D fp32 convolution (forward, backward
 * data, backward filter), built for a GPU at hand or for a description of one.
 *
 * Why a module of its own: the same plan building serves the cuda nets (nn_cuda.c), doctor's
 * cuDNN probe (nn_probe.c) and a check that needs no GPU at all. cuDNN 9.8 and later run their
 * heuristics and finalize execution plans from a device-properties descriptor
 * (CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, made from a JSON description of the device) in place of
 * a cuDNN handle. A plan built that way cannot run, but it proves that the operation graph,
 * the engine filters and the finalization work for that device, and gives the workspace the
 * plan would need; tests/test_deviceless_cudnn.c does this for every convolution of the zoo
 * against notebooks-data/cudnn-devices/h100-sxm5.json.
 *
 * Target: plans are built for exactly one of
 *   - a cuDNN handle (a GPU): the handle goes into the operation graph and the plan
 *     (CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_ATTR_EXECUTION_PLAN_HANDLE), and the plan runs
 *     with hs_cuplan_execute;
 *   - a finalized device-properties descriptor (no GPU needed): it goes into the heuristics and
 *     the plan (CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP).
 * Everything else is the same code.
 *
 * Engine choice: heuristics mode A, then cuDNN's fallback list; the first engine configuration
 * that passes the math filter, whose plan finalizes and whose workspace the caller accepts is
 * kept. Math (hs_cuda_math):
 *   strict (the default): full fp32 and deterministic. Engines carrying a numerical note for
 *     tensor cores (TF32 on fp32 data), down-converted inputs, reduced-precision reduction,
 *     non-determinism, FFT or Winograd are skipped, so that two runs of a step give the same bits and the GPU
 *     agrees with the CPU backend to fp32 rounding. Calibration and tests use this.
 *   fast: cuDNN's own order, which for fp32 convolutions puts TF32 tensor-core and
 *     non-deterministic (atomic-add) engines first, as PyTorch does by default for
 *     convolutions (torch.backends.cudnn.allow_tf32 is True). Faster on Ampere and later; not
 *     bit-reproducible. Use it to compare with PyTorch's default speed.
 * The environment variable HETSIM_CUDA_MATH (strict|fast) chooses for the cuda nets
 * (hs_cuda_math_from_env); docs/gpu.md.
 *
 * SM partitions: sm_count > 0 asks the heuristics for configurations tuned to that many SMs
 * (CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET). Where no engine tuned that way passes the filter
 * (cuDNN 9.19 offers only tensor-core engines for an SM target), the search continues without
 * the target; hs_cuplan.sm_target says which held.
 *
 * Diagnostics: a configuration that fails is no error while a later one succeeds; d is written
 * only when the build fails, with the last reason.
 *
 * Threading: a plan belongs to one thread at a time; cuDNN descriptors are not shared. Units:
 * bytes, elements. Only in builds with CUDA and cuDNN headers. */
#ifndef HS_NN_CUDA_PLAN_H
#define HS_NN_CUDA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_buildinfo.h"
#include "core/core_error.h"

/* How fp32 convolutions may compute (see above). */
typedef enum hs_cuda_math { HS_CUDA_MATH_STRICT = 0, HS_CUDA_MATH_FAST = 1 } hs_cuda_math;

/* "strict" / "fast". */
const char *hs_cuda_math_name(hs_cuda_math m);
/* Parses "strict" or "fast"; HS_EINVAL naming `what` (an option or variable) otherwise. */
int hs_cuda_math_parse(const char *s, const char *what, hs_cuda_math *out, hs_diag *d);
/* HETSIM_CUDA_MATH when set (HS_EINVAL for a bad value), else strict. */
int hs_cuda_math_from_env(hs_cuda_math *out, hs_diag *d);

#if HETSIM_HAVE_CUDA && HETSIM_HAVE_CUDNN

#include "nn/nn_cudalib.h"

typedef enum hs_cuplan_dir {
  HS_CUPLAN_FWD = 0,   /* y = conv(x, w) */
  HS_CUPLAN_DGRAD = 1, /* dx from (w, dy) */
  HS_CUPLAN_WGRAD = 2, /* dw from (x, dy) */
  HS_CUPLAN_DIRS = 3
} hs_cuplan_dir;

/* "forward" / "backward-data" / "backward-filter". */
const char *hs_cuplan_dir_name(hs_cuplan_dir dir);

/* One convolution: NCHW fp32 tensors, square kernel, equal stride and padding on both axes,
 * `groups` groups (depthwise when groups == in_c). */
typedef struct hs_cuplan_conv {
  int batch;
  int in_c, in_h, in_w;
  int out_c, out_h, out_w;
  int kernel, stride, pad, groups;
  int64_t w_align; /* byte alignment of the filter's address: 4, 8 or 16 */
} hs_cuplan_conv;

/* Accepts (0) or refuses (an HS_E* code, with d set) a plan's workspace of `bytes`; a refused
 * configuration is skipped. The cuda nets allocate the workspace here. */
typedef int hs_cuplan_ws_fn(void *ctx, int64_t bytes, hs_diag *d);

typedef struct hs_cuplan_target {
  const hs_cudnn_api *dnn;
  cudnnHandle_t handle;                /* a GPU's handle, or NULL */
  cudnnBackendDescriptor_t deviceprop; /* finalized device properties, or NULL; exactly one */
  int sm_count;                        /* SMs the plans will run on; 0 = the whole device */
  hs_cuda_math math;
  hs_cuplan_ws_fn *workspace_fits;     /* NULL: any workspace */
  void *ctx;                           /* for workspace_fits */
} hs_cuplan_target;

/* Descriptors a plan keeps alive: 3 tensors, convolution, operation, graph, heuristics, engine
 * configuration, plan. */
#define HS_CUPLAN_DESCS 9

typedef struct hs_cuplan {
  int batch;
  int64_t workspace;  /* bytes the plan needs */
  int64_t engine;     /* cuDNN's global engine index */
  unsigned notes;     /* bit i set: the engine carries cudnnBackendNumericalNote_t i */
  unsigned behavior;  /* bit i set: the engine carries cudnnBackendBehaviorNote_t i (bit 0: its
                         kernels are compiled at run time, by NVRTC, when the plan is finalized) */
  int sm_target;      /* the SM count the heuristics tuned for; 0 = the whole device */
  cudnnBackendDescriptor_t desc[HS_CUPLAN_DESCS]; /* desc[HS_CUPLAN_DESCS - 1]: the plan */
} hs_cuplan;

/* Builds the plan of direction dir of convolution g into *p (zeroed first). On failure p holds
 * nothing to free and d says why (HS_EUNSUPPORTED when no engine qualifies, HS_EINVAL for a
 * bad target or geometry). */
int hs_cuplan_build(const hs_cuplan_target *t, const hs_cuplan_conv *g, hs_cuplan_dir dir,
                    hs_cuplan *p, hs_diag *d);
/* Destroys the plan's descriptors; p may be zeroed or already freed. */
void hs_cuplan_free(const hs_cudnn_api *dnn, hs_cuplan *p);

/* Runs a plan built for a handle on the handle's stream. Device pointers: for the forward pass
 * (x, w, y); backward data (dx, w, dy); backward filter (x, dw, dy). workspace holds at least
 * p->workspace bytes (may be NULL when that is 0). */
int hs_cuplan_execute(const hs_cudnn_api *dnn, cudnnHandle_t handle, const hs_cuplan *p, void *x,
                      void *w, void *y, void *workspace, hs_diag *d);

/* A finalized device-properties descriptor from its JSON (len bytes, as cuDNN writes it:
 * deviceVer, multiProcessorCount, ... every key cuDNN 9.19 reads must be present; other keys
 * are kept and ignored). HS_EUNSUPPORTED for a cuDNN older than 9.8, HS_EINVAL for JSON it
 * refuses (d has cuDNN's reason). Destroy with cudnnBackendDestroyDescriptor. */
int hs_cuplan_deviceprop_json(const hs_cudnn_api *dnn, const char *json, size_t len,
                              cudnnBackendDescriptor_t *out, hs_diag *d);
/* The same from GPU `ordinal` of this machine (needs the GPU). */
int hs_cuplan_deviceprop_gpu(const hs_cudnn_api *dnn, int ordinal, cudnnBackendDescriptor_t *out,
                             hs_diag *d);
/* The descriptor's JSON, malloc'ed and NUL-terminated, in *json. */
int hs_cuplan_deviceprop_serialize(const hs_cudnn_api *dnn, cudnnBackendDescriptor_t dp,
                                   char **json, hs_diag *d);

/* cuDNN's status as an hs_diag: the status string and cuDNN's last error message. */
int hs_cuplan_dnn_err(const hs_cudnn_api *dnn, cudnnStatus_t s, const char *what, hs_diag *d);

#endif /* HETSIM_HAVE_CUDA && HETSIM_HAVE_CUDNN */

#endif
