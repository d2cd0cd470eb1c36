/* nn_cuda: the cuda compute backend behind nn_net.h (the table hs_net_backend_cuda).
 *
 * What runs where:
 * - Convolutions (forward, backward data, backward filter; grouped and depthwise through the
 *   filter's channel count) use cuDNN's graph (backend) API: one operation graph per
 *   (layer, direction, batch), engine configurations from heuristics mode A (then the fallback
 *   list), the first one whose execution plan finalises and whose workspace fits is kept. Plans
 *   are cached per (layer, batch) for the life of the net; variant packs are built per call.
 * - Linear layers use cuBLAS SGEMM (default math mode: full fp32, as PyTorch's default for
 *   matmul). Convolutions may use TF32 tensor cores where cuDNN picks them for fp32, as
 *   PyTorch's default for convolutions; NVIDIA_TF32_OVERRIDE=0 in the environment makes both
 *   libraries keep full fp32.
 * - Everything else is our own kernels (nn_cuda_kernels.cu): bias add and gradient, batch
 *   normalisation, ReLU/ReLU6, pooling, residual add, softmax cross-entropy, SGD. No legacy
 *   cuDNN call remains.
 *
 * Memory: parameters, gradients and momentum are three flat device vectors (nn_backend.h's
 * layout). Every layer but the input and flatten (a view) keeps its output and the gradient of
 * its output for the current batch capacity; a layer read by several layers receives the first
 * gradient written and the later ones added (backward runs back to front, so the consumer with
 * the highest index writes first). Growth allocates the new buffers before freeing the old ones,
 * so running out of device memory (HS_ENOMEM) leaves the net as it was.
 *
 * Streams and contexts: all work of a net is enqueued on its own non-blocking stream. On
 * "cuda:I/sm=N" that stream belongs to a green context of N SMs (driver API through
 * nn_cudalib.h), made current with the stream so that the cuDNN and cuBLAS handles, events and
 * kernels live in it; every entry point makes the net's context current on the calling thread,
 * so a net may move between threads (one at a time, as nn_net.h says). */
#include "nn/nn_cuda.h"

#include "core/core_buildinfo.h"

#if HETSIM_HAVE_CUDA

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "nn/nn_backend.h"
#include "nn/nn_cuda_kernels.h"
#include "nn/nn_cudalib.h"

#if HETSIM_HAVE_CUDNN

/* cuBLAS workspace: set explicitly so that no call allocates inside a CUDA graph capture (the
 * size NVIDIA recommends for Hopper). */
#define CU_BLAS_WORKSPACE ((size_t)32 << 20)

enum { CONV_FWD = 0, CONV_DGRAD = 1, CONV_WGRAD = 2, CONV_DIRS = 3 };
/* Tensor ids inside one convolution's operation graph: input, filter, output (or their
 * gradients, by direction). */
enum { UID_X = 1, UID_W = 2, UID_Y = 3 };
/* Descriptors a plan keeps alive: 3 tensors, convolution, operation, graph, heuristics,
 * engine configuration, plan. */
enum { PLAN_DESCS = 9 };

typedef struct cu_plan {
  int batch;
  int64_t workspace; /* bytes */
  cudnnBackendDescriptor_t desc[PLAN_DESCS]; /* desc[PLAN_DESCS - 1] is the execution plan */
} cu_plan;

typedef struct cu_layer {
  float *y, *dy;   /* output and its gradient (batch capacity); a view for flatten; NULL for the
                      input's gradient */
  int owner;       /* the layer whose buffers y/dy are (itself, or a flatten's source) */
  int acc[2];      /* backward: add into in[s]'s gradient (1) or write it (0) */
  int need_dx[2];  /* backward: in[s]'s gradient is needed (not the data batch) */
  int orphan;      /* no layer reads this output: backward starts its gradient at zero */
  float *bn;       /* batchnorm: running mean, running var, saved mean, saved 1/std (4 x C) */
  cu_plan *plans[CONV_DIRS];
  int n_plans[CONV_DIRS], cap_plans[CONV_DIRS];
} cu_layer;

typedef struct cu_net {
  const hs_cudrv_api *drv;
  const hs_cublas_api *blas;
  const hs_cudnn_api *dnn;
  int device;
  CUgreenCtx green;   /* NULL for the whole GPU */
  CUcontext ctx;      /* the green context as a context; NULL for the whole GPU */
  cudaStream_t stream;
  cudnnHandle_t cudnn;
  cublasHandle_t cublas;
  void *blas_ws;
  cudaEvent_t marks[HS_NET_MARKS];
  int marked[HS_NET_MARKS];
  float *momentum;
  double *scratch;        /* reductions (nn_cuda_kernels.h) */
  hs_cuk_result *res;     /* device: loss and top-1 of the last forward */
  void *workspace;        /* cuDNN plans' workspace, shared (one stream) */
  int64_t ws_bytes;
  cu_layer *layers;
  int n_layers;
  /* Buffers sized by the batch capacity. */
  int cap;
  float *x;               /* input batch */
  int32_t *labels;
  float *dscratch;        /* a convolution's input gradient before it is added in */
  int64_t dscratch_elems; /* per sample */
  int64_t act_bytes;      /* bytes of the capacity-sized buffers */
  int64_t fixed_bytes;    /* bytes of everything else */
  /* State of the step. */
  int batch;              /* loaded samples; 0 before the first load */
  int fwd_batch;          /* batch of the last forward; 0 when none */
  int fwd_train;
  cudaGraphExec_t step;   /* captured step, or NULL */
  int step_batch;
} cu_net;

/* --- error reporting ---------------------------------------------------------------------- */

static int cuda_err(cudaError_t e, const char *what, hs_diag *d) {
  if (e == cudaSuccess) return 0;
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError(); /* not sticky: clear it so later launch checks do not see it */
    return hs_diag_set(d, HS_ENOMEM, "CUDA: %s: %s", what, cudaGetErrorString(e));
  }
  return hs_diag_set(d, HS_ERUNTIME, "CUDA: %s: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

static int drv_err(const cu_net *cn, CUresult r, const char *what, hs_diag *d) {
  if (r == CUDA_SUCCESS) return 0;
  const char *s = NULL;
  if (cn->drv->cuGetErrorString(r, &s) != CUDA_SUCCESS || !s) s = "unknown driver error";
  return hs_diag_set(d, r == CUDA_ERROR_OUT_OF_MEMORY ? HS_ENOMEM : HS_ERUNTIME,
                     "CUDA driver: %s: %s", what, s);
}

static int blas_err(const cu_net *cn, cublasStatus_t s, const char *what, hs_diag *d) {
  if (s == CUBLAS_STATUS_SUCCESS) return 0;
  return hs_diag_set(d, s == CUBLAS_STATUS_ALLOC_FAILED ? HS_ENOMEM : HS_ERUNTIME,
                     "cuBLAS: %s: %s", what, cn->blas->cublasGetStatusString(s));
}

static int dnn_err(const cu_net *cn, cudnnStatus_t s, const char *what, hs_diag *d) {
  if (s == CUDNN_STATUS_SUCCESS) return 0;
  char last[512];
  last[0] = '\0';
  cn->dnn->cudnnGetLastErrorString(last, sizeof last);
  int code = (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
              s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
                 ? HS_ENOMEM
                 : HS_ERUNTIME;
  return hs_diag_set(d, code, "cuDNN: %s: %s%s%s%s", what, cn->dnn->cudnnGetErrorString(s),
                     last[0] ? " (" : "", last, last[0] ? ")" : "");
}

/* Makes the net's context current on this thread (entry points may come from any thread). */
static int bind(const cu_net *cn, hs_diag *d) {
  if (cn->ctx) return drv_err(cn, cn->drv->cuCtxSetCurrent(cn->ctx), "cuCtxSetCurrent", d);
  return cuda_err(cudaSetDevice(cn->device), "cudaSetDevice", d);
}

static int dev_alloc(void **p, size_t bytes, const char *what, hs_diag *d) {
  *p = NULL;
  if (bytes == 0) return 0;
  return cuda_err(cudaMalloc(p, bytes), what, d);
}

static void dev_free(void *p) {
  if (p) (void)cudaFree(p);
}

/* --- layer geometry ----------------------------------------------------------------------- */

static int64_t out_elems(const hs_layer *l) { return (int64_t)l->out_c * l->out_h * l->out_w; }
static int64_t in_elems(const hs_layer *l) { return (int64_t)l->in_c * l->in_h * l->in_w; }
static int64_t conv_wcount(const hs_layer *l) {
  return (int64_t)l->out_c * (l->in_c / l->groups) * l->kernel * l->kernel;
}

/* Byte alignment of params + off (the base is cudaMalloc-aligned), as cuDNN wants to know. */
static int64_t ptr_align(int64_t off_floats) {
  int64_t b = off_floats * 4;
  return (b % 16 == 0) ? 16 : (b % 8 == 0) ? 8 : 4;
}

/* --- cuDNN graph API: one convolution per operation graph ---------------------------------- */

typedef struct dnn_builder {
  const cu_net *cn;
  hs_diag *d;
  int rc;
} dnn_builder;

/* Sticky helpers: after the first failure they do nothing, so plan construction reads as
 * straight-line code checked once. */
static cudnnBackendDescriptor_t db_create(dnn_builder *b, cudnnBackendDescriptorType_t type,
                                          const char *what) {
  cudnnBackendDescriptor_t desc = NULL;
  if (b->rc) return NULL;
  b->rc = dnn_err(b->cn, b->cn->dnn->cudnnBackendCreateDescriptor(type, &desc), what, b->d);
  return b->rc ? NULL : desc;
}

static void db_set(dnn_builder *b, cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,
                   cudnnBackendAttributeType_t type, int64_t count, const void *elems,
                   const char *what) {
  if (b->rc) return;
  b->rc = dnn_err(b->cn, b->cn->dnn->cudnnBackendSetAttribute(desc, name, type, count, elems),
                  what, b->d);
}

static void db_finalize(dnn_builder *b, cudnnBackendDescriptor_t desc, const char *what) {
  if (b->rc) return;
  b->rc = dnn_err(b->cn, b->cn->dnn->cudnnBackendFinalize(desc), what, b->d);
}

static cudnnBackendDescriptor_t db_tensor(dnn_builder *b, int64_t uid, int64_t n, int64_t c,
                                          int64_t h, int64_t w, int64_t align) {
  const int64_t dims[4] = {n, c, h, w};
  const int64_t strides[4] = {c * h * w, h * w, w, 1};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t t = db_create(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
  db_set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor type");
  db_set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dims");
  db_set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "tensor strides");
  db_set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id");
  db_set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
  db_finalize(b, t, "tensor finalize");
  return t;
}

static void plan_free(const cu_net *cn, cu_plan *p) {
  for (int i = PLAN_DESCS - 1; i >= 0; i--)
    if (p->desc[i]) (void)cn->dnn->cudnnBackendDestroyDescriptor(p->desc[i]);
  memset(p->desc, 0, sizeof p->desc);
}

static int workspace_reserve(cu_net *cn, int64_t bytes, hs_diag *d) {
  if (bytes <= cn->ws_bytes) return 0;
  void *p;
  int rc = dev_alloc(&p, (size_t)bytes, "cudaMalloc (cuDNN workspace)", d);
  if (rc) return rc;
  /* cudaFree waits for the device, so no queued convolution still uses the old one. */
  dev_free(cn->workspace);
  cn->workspace = p;
  cn->ws_bytes = bytes;
  return 0;
}

/* Builds the plan of one convolution direction at one batch into *p. */
static int plan_build(cu_net *cn, const hs_layer *l, int64_t w_off, int dir, int batch, cu_plan *p,
                      hs_diag *d) {
  static const cudnnBackendDescriptorType_t op_type[CONV_DIRS] = {
      [CONV_FWD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
      [CONV_DGRAD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      [CONV_WGRAD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
  /* The attribute names of x, w, y, the convolution, alpha and beta for each direction. */
  static const cudnnBackendAttributeName_t attr[CONV_DIRS][6] = {
      [CONV_FWD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      [CONV_DGRAD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      [CONV_WGRAD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  memset(p, 0, sizeof *p);
  p->batch = batch;
  dnn_builder b = {.cn = cn, .d = d, .rc = 0};
  cudnnBackendDescriptor_t *k = p->desc;

  k[0] = db_tensor(&b, UID_X, batch, l->in_c, l->in_h, l->in_w, 16);
  k[1] = db_tensor(&b, UID_W, l->out_c, l->in_c / l->groups, l->kernel, l->kernel,
                   ptr_align(w_off));
  k[2] = db_tensor(&b, UID_Y, batch, l->out_c, l->out_h, l->out_w, 16);

  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2, dil[2] = {1, 1}, str[2] = {l->stride, l->stride},
                pad[2] = {l->pad, l->pad};
  k[3] = db_create(&b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution");
  db_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "comp type");
  db_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode,
         "conv mode");
  db_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial,
         "spatial dims");
  db_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "dilations");
  db_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str, "strides");
  db_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "pre-padding");
  db_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad,
         "post-padding");
  db_finalize(&b, k[3], "convolution finalize");

  const float alpha = 1.0f, beta = 0.0f;
  k[4] = db_create(&b, op_type[dir], "convolution operation");
  db_set(&b, k[4], attr[dir][0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[0], "operation x");
  db_set(&b, k[4], attr[dir][1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[1], "operation w");
  db_set(&b, k[4], attr[dir][2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[2], "operation y");
  db_set(&b, k[4], attr[dir][3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[3], "operation conv");
  db_set(&b, k[4], attr[dir][4], CUDNN_TYPE_FLOAT, 1, &alpha, "operation alpha");
  db_set(&b, k[4], attr[dir][5], CUDNN_TYPE_FLOAT, 1, &beta, "operation beta");
  db_finalize(&b, k[4], "convolution operation finalize");

  k[5] = db_create(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  db_set(&b, k[5], CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &cn->cudnn,
         "graph handle");
  db_set(&b, k[5], CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[4],
         "graph ops");
  db_finalize(&b, k[5], "operation graph finalize");
  if (b.rc) {
    plan_free(cn, p);
    return b.rc;
  }

  /* Heuristics A first, then the fallback list; keep the first configuration whose plan
   * finalises and whose workspace can be allocated. */
  static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  int last_rc = 0;
  for (int m = 0; m < 2 && !p->desc[PLAN_DESCS - 1]; m++) {
    b.rc = 0;
    cudnnBackendDescriptor_t heur =
        db_create(&b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
    db_set(&b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           &k[5], "heuristics graph");
    db_set(&b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m],
           "heuristics mode");
    db_finalize(&b, heur, "heuristics finalize");
    int64_t count = 0;
    if (!b.rc)
      b.rc = dnn_err(cn, cn->dnn->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                                           &count, NULL),
                     "heuristics result count", d);
    cudnnBackendDescriptor_t *cfgs = NULL;
    if (!b.rc && count > 0) {
      cfgs = calloc((size_t)count, sizeof *cfgs);
      if (!cfgs) b.rc = hs_diag_set(d, HS_ENOMEM, "out of host memory for cuDNN configurations");
      for (int64_t i = 0; i < count && !b.rc; i++)
        cfgs[i] = db_create(&b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration");
      int64_t got = 0;
      if (!b.rc)
        b.rc = dnn_err(cn, cn->dnn->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                             CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                             count, &got, cfgs),
                       "heuristics results", d);
      if (!b.rc && got < count) count = got;
    }
    int chosen = -1;
    for (int64_t i = 0; !b.rc && cfgs && i < count && chosen < 0; i++) {
      dnn_builder t = {.cn = cn, .d = d, .rc = 0};
      cudnnBackendDescriptor_t plan =
          db_create(&t, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
      db_set(&t, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &cn->cudnn,
             "plan handle");
      db_set(&t, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
             &cfgs[i], "plan configuration");
      db_finalize(&t, plan, "execution plan finalize");
      int64_t ws = 0, n_ws = 0;
      if (!t.rc)
        t.rc = dnn_err(cn, cn->dnn->cudnnBackendGetAttribute(
                               plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                               1, &n_ws, &ws),
                       "plan workspace size", d);
      if (!t.rc) t.rc = workspace_reserve(cn, ws, d);
      if (t.rc) {
        last_rc = t.rc; /* unsupported here, or its workspace does not fit: try the next */
        if (plan) (void)cn->dnn->cudnnBackendDestroyDescriptor(plan);
        continue;
      }
      chosen = (int)i;
      p->workspace = ws;
      p->desc[6] = heur;
      p->desc[7] = cfgs[i];
      p->desc[8] = plan;
    }
    if (cfgs) {
      for (int64_t i = 0; i < count; i++)
        if (cfgs[i] && i != chosen) (void)cn->dnn->cudnnBackendDestroyDescriptor(cfgs[i]);
      free(cfgs);
    }
    if (chosen < 0 && heur) (void)cn->dnn->cudnnBackendDestroyDescriptor(heur);
    if (b.rc) last_rc = b.rc;
  }
  if (!p->desc[PLAN_DESCS - 1]) {
    plan_free(cn, p);
    if (!last_rc)
      last_rc = hs_diag_set(d, HS_EUNSUPPORTED, "cuDNN: no engine supports this convolution");
    hs_diag_prefix(d, "conv2d %dx%d/%d (%d->%d channels, groups %d) at batch %d", l->kernel,
                   l->kernel, l->stride, l->in_c, l->out_c, l->groups, batch);
    return last_rc;
  }
  return 0;
}

/* The cached plan of layer i in direction dir at batch, built on first use. */
static int plan_get(cu_net *cn, const hs_net *n, int i, int dir, int batch, cu_plan **out,
                    hs_diag *d) {
  cu_layer *L = &cn->layers[i];
  for (int j = 0; j < L->n_plans[dir]; j++)
    if (L->plans[dir][j].batch == batch) {
      *out = &L->plans[dir][j];
      return 0;
    }
  if (L->n_plans[dir] == L->cap_plans[dir]) {
    int cap = L->cap_plans[dir] ? 2 * L->cap_plans[dir] : 4;
    cu_plan *grown = realloc(L->plans[dir], (size_t)cap * sizeof *grown);
    if (!grown) return hs_diag_set(d, HS_ENOMEM, "out of host memory for cuDNN plans");
    L->plans[dir] = grown;
    L->cap_plans[dir] = cap;
  }
  cu_plan *p = &L->plans[dir][L->n_plans[dir]];
  int rc = plan_build(cn, hs_graph_layer(n->graph, i), n->param_off[i], dir, batch, p, d);
  if (rc) return rc;
  L->n_plans[dir]++;
  *out = p;
  return 0;
}

/* Runs direction dir of convolution layer i: (x, w, y) are the input, filter and output for the
 * forward pass, (dx, w, dy) for backward data and (x, dw, dy) for backward filter. */
static int conv_run(cu_net *cn, const hs_net *n, int i, int dir, int batch, void *x, void *w,
                    void *y, hs_diag *d) {
  cu_plan *p;
  int rc = plan_get(cn, n, i, dir, batch, &p, d);
  if (rc) return rc;
  const int64_t uids[3] = {UID_X, UID_W, UID_Y};
  void *ptrs[3] = {x, w, y};
  void *ws = cn->workspace;
  dnn_builder b = {.cn = cn, .d = d, .rc = 0};
  cudnnBackendDescriptor_t pack = db_create(&b, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
                                            "variant pack");
  db_set(&b, pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids, "pack ids");
  db_set(&b, pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs,
         "pack pointers");
  db_set(&b, pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws,
         "pack workspace");
  db_finalize(&b, pack, "variant pack finalize");
  if (!b.rc)
    b.rc = dnn_err(cn, cn->dnn->cudnnBackendExecute(cn->cudnn, p->desc[PLAN_DESCS - 1], pack),
                   "convolution execute", d);
  if (pack) (void)cn->dnn->cudnnBackendDestroyDescriptor(pack);
  if (b.rc) hs_diag_prefix(d, "layer %d", i);
  return b.rc;
}

/* --- buffers ------------------------------------------------------------------------------ */

typedef struct cu_bufs {
  float *x;
  int32_t *labels;
  float *dscratch;
  float **y, **dy; /* per layer; NULL where a layer has none of its own */
} cu_bufs;

static void bufs_free(cu_bufs *b, int n_layers) {
  dev_free(b->x);
  dev_free(b->labels);
  dev_free(b->dscratch);
  for (int i = 0; i < n_layers; i++) {
    if (b->y) dev_free(b->y[i]);
    if (b->dy) dev_free(b->dy[i]);
  }
  free(b->y);
  free(b->dy);
  memset(b, 0, sizeof *b);
}

/* Frees the batch-sized buffers the net holds (cudaFree waits for queued work using them). */
static void held_free(cu_net *cn) {
  dev_free(cn->x);
  dev_free(cn->labels);
  dev_free(cn->dscratch);
  cn->x = cn->dscratch = NULL;
  cn->labels = NULL;
  for (int i = 1; i < cn->n_layers; i++) {
    cu_layer *L = &cn->layers[i];
    if (L->owner == i) {
      dev_free(L->y);
      dev_free(L->dy);
    }
    L->y = L->dy = NULL;
  }
}

/* Grows the batch-sized buffers to hold batch samples; on failure nothing changes. */
static int ensure_capacity(cu_net *cn, hs_net *n, int batch, hs_diag *d) {
  if (batch <= cn->cap) return 0;
  const size_t B = (size_t)batch;
  cu_bufs b = {0};
  int64_t bytes = 0;
  int rc = 0;
  b.y = calloc((size_t)cn->n_layers, sizeof *b.y);
  b.dy = calloc((size_t)cn->n_layers, sizeof *b.dy);
  if (!b.y || !b.dy) rc = hs_diag_set(d, HS_ENOMEM, "out of host memory");
  size_t xb = B * (size_t)out_elems(hs_graph_layer(n->graph, 0)) * sizeof(float);
  size_t lb = B * sizeof(int32_t);
  size_t sb = B * (size_t)cn->dscratch_elems * sizeof(float);
  if (!rc) rc = dev_alloc((void **)&b.x, xb, "cudaMalloc (input batch)", d);
  if (!rc) rc = dev_alloc((void **)&b.labels, lb, "cudaMalloc (labels)", d);
  if (!rc) rc = dev_alloc((void **)&b.dscratch, sb, "cudaMalloc (gradient scratch)", d);
  bytes += (int64_t)(xb + lb + sb);
  for (int i = 1; i < cn->n_layers && !rc; i++) {
    if (cn->layers[i].owner != i) continue;
    size_t ab = B * (size_t)out_elems(hs_graph_layer(n->graph, i)) * sizeof(float);
    rc = dev_alloc((void **)&b.y[i], ab, "cudaMalloc (activations)", d);
    if (!rc) rc = dev_alloc((void **)&b.dy[i], ab, "cudaMalloc (activation gradients)", d);
    bytes += 2 * (int64_t)ab;
  }
  if (rc) {
    bufs_free(&b, cn->n_layers);
    if (rc == HS_ENOMEM)
      hs_diag_prefix(d, "%s: batch %d does not fit (the net holds %d)", n->device, batch,
                     cn->cap);
    return rc;
  }
  held_free(cn);
  cn->x = b.x;
  cn->labels = b.labels;
  cn->dscratch = b.dscratch;
  /* Every layer points at its buffers; flatten at its source's (an earlier layer). */
  for (int i = 0; i < cn->n_layers; i++) {
    cu_layer *L = &cn->layers[i];
    if (i == 0) {
      L->y = cn->x;
      L->dy = NULL;
    } else if (L->owner != i) {
      L->y = cn->layers[L->owner].y;
      L->dy = cn->layers[L->owner].dy;
    } else {
      L->y = b.y[i];
      L->dy = b.dy[i];
    }
  }
  free(b.y);
  free(b.dy);
  cn->cap = batch;
  cn->act_bytes = bytes;
  /* What the last forward left went with the old buffers, which a captured step used. */
  cn->batch = 0;
  cn->fwd_batch = 0;
  if (cn->step) {
    (void)cudaGraphExecDestroy(cn->step);
    cn->step = NULL;
  }
  return 0;
}

/* --- the table ---------------------------------------------------------------------------- */

static void cuda_close(hs_net *n);

/* Creates the green context of n->sm_partition SMs and its stream, made current. */
static int green_open(cu_net *cn, const hs_net *n, hs_diag *d) {
  const hs_cudrv_api *drv = cn->drv;
  int rc = drv_err(cn, drv->cuInit(0), "cuInit", d);
  CUdevice dev;
  if (!rc) rc = drv_err(cn, drv->cuDeviceGet(&dev, n->ordinal), "cuDeviceGet", d);
  CUdevResource all, part;
  memset(&all, 0, sizeof all);
  memset(&part, 0, sizeof part);
  if (!rc)
    rc = drv_err(cn, drv->cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM),
                 "cuDeviceGetDevResource", d);
  if (rc) return rc;
  if ((unsigned)n->sm_partition > all.sm.smCount)
    return hs_diag_set(d, HS_EINVAL, "%s: GPU %d has %u SMs, fewer than the %d asked for",
                       n->device, n->ordinal, all.sm.smCount, n->sm_partition);
  unsigned groups = 1;
  rc = drv_err(cn, drv->cuDevSmResourceSplitByCount(&part, &groups, &all, NULL, 0,
                                                    (unsigned)n->sm_partition),
               "cuDevSmResourceSplitByCount", d);
  if (rc) return rc;
  if (groups < 1)
    return hs_diag_set(d, HS_EINVAL,
                       "%s: cannot make a partition of %d SMs on GPU %d (%u SMs, partitions of "
                       "at least %u in steps of %u)",
                       n->device, n->sm_partition, n->ordinal, all.sm.smCount,
                       all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment);
  CUdevResourceDesc desc;
  rc = drv_err(cn, drv->cuDevResourceGenerateDesc(&desc, &part, 1), "cuDevResourceGenerateDesc",
               d);
  if (!rc)
    rc = drv_err(cn, drv->cuGreenCtxCreate(&cn->green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM),
                 "cuGreenCtxCreate", d);
  if (!rc) rc = drv_err(cn, drv->cuCtxFromGreenCtx(&cn->ctx, cn->green), "cuCtxFromGreenCtx", d);
  if (!rc) rc = drv_err(cn, drv->cuCtxSetCurrent(cn->ctx), "cuCtxSetCurrent", d);
  CUstream s = NULL;
  if (!rc)
    rc = drv_err(cn, drv->cuGreenCtxStreamCreate(&s, cn->green, CU_STREAM_NON_BLOCKING, 0),
                 "cuGreenCtxStreamCreate", d);
  cn->stream = s; /* CUstream and cudaStream_t are the same type */
  return rc;
}

/* Backward bookkeeping: views, which inputs need a gradient, and write-or-add per input. */
static int layers_plan(cu_net *cn, const hs_net *n, hs_diag *d) {
  int L = cn->n_layers;
  char *written = calloc((size_t)L, 1);
  if (!written) return hs_diag_set(d, HS_ENOMEM, "out of host memory");
  int64_t max_c = 1;
  for (int i = 0; i < L; i++) {
    const hs_layer *l = hs_graph_layer(n->graph, i);
    cu_layer *cl = &cn->layers[i];
    cl->owner = (l->kind == HS_LAYER_FLATTEN) ? cn->layers[l->in[0]].owner : i;
    if (l->out_c > max_c) max_c = l->out_c;
  }
  /* The loss gradient is written into the logits' gradient first of all. */
  written[cn->layers[L - 1].owner] = 1;
  cn->dscratch_elems = 0;
  for (int i = L - 1; i >= 1; i--) {
    const hs_layer *l = hs_graph_layer(n->graph, i);
    cu_layer *cl = &cn->layers[i];
    if (l->kind == HS_LAYER_FLATTEN) continue; /* a view: its gradient is its source's */
    for (int s = 0; s < l->n_in; s++) {
      int j = cn->layers[l->in[s]].owner;
      cl->need_dx[s] = j != 0;
      if (!cl->need_dx[s]) continue;
      cl->acc[s] = written[j];
      written[j] = 1;
      if (l->kind == HS_LAYER_CONV2D && cl->acc[s] && in_elems(l) > cn->dscratch_elems)
        cn->dscratch_elems = in_elems(l);
    }
  }
  for (int j = 1; j < L; j++)
    cn->layers[j].orphan = cn->layers[j].owner == j && !written[j];
  free(written);
  cn->fixed_bytes += hs_cuk_scratch_doubles((int)max_c) * (int64_t)sizeof(double);
  return dev_alloc((void **)&cn->scratch,
                   (size_t)hs_cuk_scratch_doubles((int)max_c) * sizeof(double),
                   "cudaMalloc (reduction scratch)", d);
}

static int bn_buffers(cu_net *cn, const hs_net *n, hs_diag *d) {
  for (int i = 1; i < cn->n_layers; i++) {
    const hs_layer *l = hs_graph_layer(n->graph, i);
    if (l->kind != HS_LAYER_BATCHNORM2D) continue;
    size_t c = (size_t)l->out_c;
    float *host = malloc(4 * c * sizeof *host);
    if (!host) return hs_diag_set(d, HS_ENOMEM, "out of host memory");
    for (size_t k = 0; k < c; k++) {
      host[k] = 0.0f;         /* running mean */
      host[c + k] = 1.0f;     /* running variance */
      host[2 * c + k] = 0.0f; /* saved mean */
      host[3 * c + k] = 1.0f; /* saved 1/std */
    }
    int rc = dev_alloc((void **)&cn->layers[i].bn, 4 * c * sizeof(float),
                       "cudaMalloc (batchnorm statistics)", d);
    if (!rc)
      rc = cuda_err(cudaMemcpyAsync(cn->layers[i].bn, host, 4 * c * sizeof(float),
                                    cudaMemcpyHostToDevice, cn->stream),
                    "cudaMemcpyAsync (batchnorm statistics)", d);
    /* The source is pageable: the copy is staged before the call returns. */
    free(host);
    if (rc) return rc;
    cn->fixed_bytes += (int64_t)(4 * c * sizeof(float));
  }
  return 0;
}

static int cuda_open_impl(hs_net *n, cu_net *cn, const float *init, hs_diag *d) {
  hs_diag why = {0};
  cn->dnn = hs_cudnn_api_get(&why);
  if (cn->dnn) cn->blas = hs_cublas_api_get(&why);
  if (cn->blas && n->sm_partition > 0) cn->drv = hs_cudrv_api_get(&why);
  if (!cn->dnn || !cn->blas || (n->sm_partition > 0 && !cn->drv))
    return hs_diag_set(d, HS_EUNSUPPORTED, "%s: %s", n->device, why.msg);

  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return hs_diag_set(d, HS_EUNSUPPORTED, "%s: no CUDA GPU on this machine (%s)", n->device,
                       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  }
  if (n->ordinal < 0 || n->ordinal >= count)
    return hs_diag_set(d, HS_EINVAL, "%s: no GPU %d (this machine has %d: 0..%d)", n->device,
                       n->ordinal, count, count - 1);
  cn->device = n->ordinal;
  int rc = cuda_err(cudaSetDevice(cn->device), "cudaSetDevice", d);
  if (!rc) rc = cuda_err(cudaFree(NULL), "context creation", d);
  if (rc) return rc;

  if (n->sm_partition > 0) rc = green_open(cn, n, d);
  else rc = cuda_err(cudaStreamCreateWithFlags(&cn->stream, cudaStreamNonBlocking),
                     "cudaStreamCreate", d);
  if (rc) return rc;

  rc = dnn_err(cn, cn->dnn->cudnnCreate(&cn->cudnn), "cudnnCreate", d);
  if (!rc) rc = dnn_err(cn, cn->dnn->cudnnSetStream(cn->cudnn, cn->stream), "cudnnSetStream", d);
  if (!rc) rc = blas_err(cn, cn->blas->cublasCreate(&cn->cublas), "cublasCreate", d);
  if (!rc)
    rc = blas_err(cn, cn->blas->cublasSetStream(cn->cublas, cn->stream), "cublasSetStream", d);
  if (!rc) rc = dev_alloc(&cn->blas_ws, CU_BLAS_WORKSPACE, "cudaMalloc (cuBLAS workspace)", d);
  if (!rc)
    rc = blas_err(cn, cn->blas->cublasSetWorkspace(cn->cublas, cn->blas_ws, CU_BLAS_WORKSPACE),
                  "cublasSetWorkspace", d);
  cn->fixed_bytes += (int64_t)CU_BLAS_WORKSPACE;
  for (int s = 0; s < HS_NET_MARKS && !rc; s++)
    rc = cuda_err(cudaEventCreate(&cn->marks[s]), "cudaEventCreate", d);
  if (rc) return rc;

  size_t pb = (size_t)n->n_params * sizeof(float);
  rc = dev_alloc((void **)&n->params, pb, "cudaMalloc (parameters)", d);
  if (!rc) rc = dev_alloc((void **)&n->grads, pb, "cudaMalloc (gradients)", d);
  if (!rc) rc = dev_alloc((void **)&cn->momentum, pb, "cudaMalloc (momentum)", d);
  if (!rc) rc = dev_alloc((void **)&cn->res, sizeof *cn->res, "cudaMalloc (loss)", d);
  cn->fixed_bytes += 3 * (int64_t)pb + (int64_t)sizeof *cn->res;
  /* Initial contents go through the net's stream, which does not wait for the legacy default
   * stream, so that the first kernels see them; open waits for them at its end. */
  if (!rc && pb)
    rc = cuda_err(cudaMemcpyAsync(n->params, init, pb, cudaMemcpyHostToDevice, cn->stream),
                  "cudaMemcpyAsync (parameters)", d);
  if (!rc && pb)
    rc = cuda_err(cudaMemsetAsync(n->grads, 0, pb, cn->stream), "cudaMemsetAsync (gradients)", d);
  if (!rc && pb)
    rc = cuda_err(cudaMemsetAsync(cn->momentum, 0, pb, cn->stream), "cudaMemsetAsync (momentum)",
                  d);
  if (rc) return rc;

  cn->n_layers = hs_graph_count(n->graph);
  cn->layers = calloc((size_t)cn->n_layers, sizeof *cn->layers);
  if (!cn->layers) return hs_diag_set(d, HS_ENOMEM, "out of host memory");
  rc = layers_plan(cn, n, d);
  if (!rc) rc = bn_buffers(cn, n, d);
  if (!rc) rc = ensure_capacity(cn, n, n->opts.max_batch > 0 ? n->opts.max_batch : 1, d);
  if (!rc) rc = cuda_err(cudaStreamSynchronize(cn->stream), "cudaStreamSynchronize", d);
  return rc;
}

static int cuda_open(hs_net *n, const float *init, hs_diag *d) {
  cu_net *cn = calloc(1, sizeof *cn);
  if (!cn) return hs_diag_set(d, HS_ENOMEM, "out of host memory");
  n->impl = cn;
  int rc = cuda_open_impl(n, cn, init, d);
  if (rc) cuda_close(n);
  return rc;
}

static void cuda_close(hs_net *n) {
  cu_net *cn = n->impl;
  if (!cn) return;
  if (cn->ctx) (void)cn->drv->cuCtxSetCurrent(cn->ctx);
  else if (cn->stream) (void)cudaSetDevice(cn->device);
  if (cn->stream) (void)cudaStreamSynchronize(cn->stream);
  if (cn->step) (void)cudaGraphExecDestroy(cn->step);
  if (cn->layers) {
    for (int i = 0; i < cn->n_layers; i++) {
      cu_layer *L = &cn->layers[i];
      for (int dir = 0; dir < CONV_DIRS; dir++) {
        for (int j = 0; j < L->n_plans[dir]; j++) plan_free(cn, &L->plans[dir][j]);
        free(L->plans[dir]);
      }
      dev_free(L->bn);
    }
    held_free(cn);
    free(cn->layers);
  }
  dev_free(cn->workspace);
  dev_free(cn->scratch);
  dev_free(cn->res);
  dev_free(cn->momentum);
  dev_free(n->params);
  dev_free(n->grads);
  n->params = n->grads = NULL;
  for (int s = 0; s < HS_NET_MARKS; s++)
    if (cn->marks[s]) (void)cudaEventDestroy(cn->marks[s]);
  if (cn->cublas) (void)cn->blas->cublasDestroy(cn->cublas);
  dev_free(cn->blas_ws);
  if (cn->cudnn) (void)cn->dnn->cudnnDestroy(cn->cudnn);
  if (cn->green) {
    if (cn->stream) (void)cn->drv->cuStreamDestroy(cn->stream);
    (void)cn->drv->cuGreenCtxDestroy(cn->green);
    /* Leave no destroyed context current: the runtime then returns to the primary one. */
    (void)cn->drv->cuCtxSetCurrent(NULL);
  } else if (cn->stream) {
    (void)cudaStreamDestroy(cn->stream);
  }
  free(cn);
  n->impl = NULL;
}

static int cuda_load(hs_net *n, const float *x, const int32_t *y, int batch, hs_diag *d) {
  cu_net *cn = n->impl; /* nn_net.c has checked the batch and the labels */
  int rc = bind(cn, d);
  if (!rc) rc = ensure_capacity(cn, n, batch, d);
  if (rc) return rc;
  size_t xb = (size_t)batch * (size_t)out_elems(hs_graph_layer(n->graph, 0)) * sizeof(float);
  rc = cuda_err(cudaMemcpyAsync(cn->x, x, xb, cudaMemcpyHostToDevice, cn->stream),
                "cudaMemcpyAsync (input batch)", d);
  if (!rc)
    rc = cuda_err(cudaMemcpyAsync(cn->labels, y, (size_t)batch * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, cn->stream),
                  "cudaMemcpyAsync (labels)", d);
  /* Pageable sources: wait, so the caller may reuse its arrays as soon as we return. */
  if (!rc) rc = cuda_err(cudaStreamSynchronize(cn->stream), "cudaStreamSynchronize", d);
  if (rc) return rc;
  cn->batch = batch;
  cn->fwd_batch = 0; /* result and backward need a forward pass of this batch */
  return 0;
}

/* The launch status of one of our kernels, as an error naming the layer (when layer > 0). */
static int kern(cudaError_t e, int layer, const char *kind, hs_diag *d) {
  if (e == cudaSuccess) return 0;
  int rc = cuda_err(e, kind, d);
  if (layer > 0) hs_diag_prefix(d, "layer %d", layer);
  return rc;
}

static int sgemm(cu_net *cn, cublasOperation_t ta, cublasOperation_t tb, int m, int nn, int k,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
                 int layer, hs_diag *d) {
  const float one = 1.0f;
  int rc = blas_err(cn, cn->blas->cublasSgemm(cn->cublas, ta, tb, m, nn, k, &one, a, lda, b, ldb,
                                              &beta, c, ldc),
                    "cublasSgemm", d);
  if (rc) hs_diag_prefix(d, "layer %d", layer);
  return rc;
}

static hs_cuk_pool pool_of(const hs_layer *l, int batch) {
  hs_cuk_pool p = {.n = batch, .c = l->in_c, .h = l->in_h, .w = l->in_w, .oh = l->out_h,
                   .ow = l->out_w, .k = l->kernel, .stride = l->stride, .pad = l->pad};
  return p;
}

static int forward_layers(cu_net *cn, hs_net *n, int train, hs_diag *d) {
  const int B = cn->batch;
  cudaStream_t s = cn->stream;
  int rc = 0;
  for (int i = 1; i < cn->n_layers && !rc; i++) {
    const hs_layer *l = hs_graph_layer(n->graph, i);
    cu_layer *L = &cn->layers[i];
    const float *x = cn->layers[l->in[0]].y;
    float *y = L->y;
    float *w = n->params + (n->param_off[i] >= 0 ? n->param_off[i] : 0);
    int64_t count = (int64_t)B * out_elems(l);
    int hw = l->out_h * l->out_w;
    switch (l->kind) {
    case HS_LAYER_CONV2D:
      rc = conv_run(cn, n, i, CONV_FWD, B, (void *)x, w, y, d);
      if (!rc && l->bias)
        rc = kern(hs_cuk_bias_add(y, w + conv_wcount(l), B, l->out_c, hw, s), i, "bias", d);
      break;
    case HS_LAYER_BATCHNORM2D: {
      const int c = l->out_c;
      if (train)
        rc = kern(hs_cuk_bn_forward_train(x, y, w, w + c, L->bn, L->bn + c, L->bn + 2 * c,
                                          L->bn + 3 * c, cn->scratch, B, c, hw, l->eps,
                                          l->momentum, s),
                  i, "batchnorm", d);
      else
        rc = kern(hs_cuk_bn_forward_infer(x, y, w, w + c, L->bn, L->bn + c, B, c, hw, l->eps, s),
                  i, "batchnorm", d);
      break;
    }
    case HS_LAYER_RELU:
    case HS_LAYER_RELU6:
      rc = kern(hs_cuk_relu_forward(x, y, count, l->kind == HS_LAYER_RELU6 ? 6.0f : INFINITY, s),
                i, "relu", d);
      break;
    case HS_LAYER_MAXPOOL2D: {
      hs_cuk_pool p = pool_of(l, B);
      rc = kern(hs_cuk_maxpool_forward(x, y, &p, s), i, "maxpool", d);
      break;
    }
    case HS_LAYER_AVGPOOL2D: {
      hs_cuk_pool p = pool_of(l, B);
      rc = kern(hs_cuk_avgpool_forward(x, y, &p, s), i, "avgpool", d);
      break;
    }
    case HS_LAYER_GLOBAL_AVGPOOL:
      rc = kern(hs_cuk_gap_forward(x, y, B, l->in_c, l->in_h * l->in_w, s), i, "global_avgpool",
                d);
      break;
    case HS_LAYER_LINEAR: {
      /* Row-major Y[B][out] = X[B][in] W[out][in]^T is column-major Y^T = W^T' X^T. */
      int in = (int)in_elems(l), out = l->out_c;
      rc = sgemm(cn, CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, w, in, x, in, 0.0f, y, out, i, d);
      if (!rc && l->bias)
        rc = kern(hs_cuk_bias_add(y, w + (int64_t)out * in, B, out, 1, s), i, "bias", d);
      break;
    }
    case HS_LAYER_ADD:
      rc = kern(hs_cuk_add(x, cn->layers[l->in[1]].y, y, count, s), i, "add", d);
      break;
    case HS_LAYER_FLATTEN:
      break; /* a view of its input */
    case HS_LAYER_INPUT:
    case HS_LAYER_KIND_COUNT:
    default:
      rc = hs_diag_set(d, HS_EUNSUPPORTED, "layer %d: kind %s has no cuda kernel", i,
                       hs_layer_kind_name(l->kind));
      break;
    }
  }
  if (rc) return rc;
  const int last = cn->n_layers - 1;
  return kern(hs_cuk_xent_forward(cn->layers[last].y, cn->labels, B, n->classes, cn->res, s),
              last, "cross-entropy", d);
}

static int backward_layers(cu_net *cn, hs_net *n, hs_diag *d) {
  const int B = cn->batch;
  cudaStream_t s = cn->stream;
  const int last = cn->n_layers - 1;
  int rc = 0;
  for (int j = 1; j < last && !rc; j++)
    if (cn->layers[j].orphan)
      rc = cuda_err(cudaMemsetAsync(cn->layers[j].dy, 0,
                                    (size_t)B * (size_t)out_elems(hs_graph_layer(n->graph, j)) *
                                        sizeof(float),
                                    s),
                    "cudaMemsetAsync (unused output's gradient)", d);
  if (!rc)
    rc = kern(hs_cuk_xent_backward(cn->layers[last].y, cn->labels, B, n->classes,
                                   cn->layers[last].dy, s),
              last, "cross-entropy backward", d);
  for (int i = last; i >= 1 && !rc; i--) {
    const hs_layer *l = hs_graph_layer(n->graph, i);
    cu_layer *L = &cn->layers[i];
    if (l->kind == HS_LAYER_FLATTEN) continue;
    const cu_layer *in0 = &cn->layers[l->in[0]];
    const float *x = in0->y, *y = L->y, *dy = L->dy;
    float *dx = L->need_dx[0] ? in0->dy : NULL;
    int acc = L->acc[0];
    int64_t off = n->param_off[i] >= 0 ? n->param_off[i] : 0;
    float *w = n->params + off, *gw = n->grads + off;
    int64_t count = (int64_t)B * out_elems(l);
    int hw = l->out_h * l->out_w;
    switch (l->kind) {
    case HS_LAYER_CONV2D:
      rc = conv_run(cn, n, i, CONV_WGRAD, B, (void *)x, gw, (void *)dy, d);
      if (!rc && l->bias)
        rc = kern(hs_cuk_bias_grad(dy, gw + conv_wcount(l), cn->scratch, B, l->out_c, hw, s), i,
                  "bias gradient", d);
      if (!rc && dx) {
        /* cuDNN writes the input gradient; one that must be added in goes through scratch. */
        float *target = acc ? cn->dscratch : dx;
        rc = conv_run(cn, n, i, CONV_DGRAD, B, target, w, (void *)dy, d);
        if (!rc && acc)
          rc = kern(hs_cuk_accumulate(dx, cn->dscratch, (int64_t)B * in_elems(l), 1, s), i,
                    "gradient add", d);
      }
      break;
    case HS_LAYER_BATCHNORM2D: {
      const int c = l->out_c;
      rc = kern(hs_cuk_bn_backward(x, dy, dx, w, L->bn + 2 * c, L->bn + 3 * c, gw, gw + c,
                                   cn->scratch, B, c, hw, acc, s),
                i, "batchnorm backward", d);
      break;
    }
    case HS_LAYER_RELU:
    case HS_LAYER_RELU6:
      if (dx)
        rc = kern(hs_cuk_relu_backward(y, dy, dx, count,
                                       l->kind == HS_LAYER_RELU6 ? 6.0f : INFINITY, acc, s),
                  i, "relu backward", d);
      break;
    case HS_LAYER_MAXPOOL2D:
      if (dx) {
        hs_cuk_pool p = pool_of(l, B);
        rc = kern(hs_cuk_maxpool_backward(x, dy, dx, &p, acc, s), i, "maxpool backward", d);
      }
      break;
    case HS_LAYER_AVGPOOL2D:
      if (dx) {
        hs_cuk_pool p = pool_of(l, B);
        rc = kern(hs_cuk_avgpool_backward(dy, dx, &p, acc, s), i, "avgpool backward", d);
      }
      break;
    case HS_LAYER_GLOBAL_AVGPOOL:
      if (dx)
        rc = kern(hs_cuk_gap_backward(dy, dx, B, l->in_c, l->in_h * l->in_w, acc, s), i,
                  "global_avgpool backward", d);
      break;
    case HS_LAYER_LINEAR: {
      int in = (int)in_elems(l), out = l->out_c;
      /* dW[out][in] = dY^T X: column-major dW^T = X^T dY. */
      rc = sgemm(cn, CUBLAS_OP_N, CUBLAS_OP_T, in, out, B, x, in, dy, out, 0.0f, gw, in, i, d);
      if (!rc && l->bias)
        rc = kern(hs_cuk_bias_grad(dy, gw + (int64_t)out * in, cn->scratch, B, out, 1, s), i,
                  "bias gradient", d);
      /* dX[B][in] = dY W: column-major dX^T = W^T' dY^T, added in with beta = 1. */
      if (!rc && dx)
        rc = sgemm(cn, CUBLAS_OP_N, CUBLAS_OP_N, in, B, out, w, in, dy, out, acc ? 1.0f : 0.0f,
                   dx, in, i, d);
      break;
    }
    case HS_LAYER_ADD:
      for (int k = 0; k < 2 && !rc; k++) {
        if (!L->need_dx[k]) continue;
        rc = kern(hs_cuk_accumulate(cn->layers[l->in[k]].dy, dy, count, L->acc[k], s), i,
                  "add backward", d);
      }
      break;
    case HS_LAYER_FLATTEN:
    case HS_LAYER_INPUT:
    case HS_LAYER_KIND_COUNT:
    default:
      rc = hs_diag_set(d, HS_EUNSUPPORTED, "layer %d: kind %s has no cuda kernel", i,
                       hs_layer_kind_name(l->kind));
      break;
    }
  }
  return rc;
}

static int update_params(cu_net *cn, hs_net *n, const hs_sgd *o, hs_diag *d) {
  if (n->n_params == 0) return 0;
  return kern(hs_cuk_sgd(n->params, n->grads, cn->momentum, n->n_params, (float)o->lr,
                         (float)o->momentum, (float)o->weight_decay, cn->stream),
              0, "sgd", d);
}

static int cuda_forward(hs_net *n, int train, hs_diag *d) {
  cu_net *cn = n->impl;
  if (cn->batch <= 0) return hs_diag_set(d, HS_EINVAL, "forward: no batch loaded");
  int rc = bind(cn, d);
  if (!rc) rc = forward_layers(cn, n, train, d);
  cn->fwd_batch = rc ? 0 : cn->batch;
  cn->fwd_train = train;
  return rc;
}

static int cuda_backward(hs_net *n, hs_diag *d) {
  cu_net *cn = n->impl;
  if (cn->fwd_batch <= 0 || !cn->fwd_train || cn->fwd_batch != cn->batch)
    return hs_diag_set(d, HS_EINVAL, "backward: needs a training forward pass of the loaded batch");
  int rc = bind(cn, d);
  return rc ? rc : backward_layers(cn, n, d);
}

static int cuda_update(hs_net *n, const hs_sgd *o, hs_diag *d) {
  cu_net *cn = n->impl;
  int rc = bind(cn, d);
  return rc ? rc : update_params(cn, n, o, d);
}

static int cuda_result(hs_net *n, double *loss, int *correct, hs_diag *d) {
  cu_net *cn = n->impl;
  if (cn->fwd_batch <= 0) return hs_diag_set(d, HS_EINVAL, "result: no forward pass yet");
  hs_cuk_result r;
  int rc = bind(cn, d);
  if (!rc)
    rc = cuda_err(cudaMemcpyAsync(&r, cn->res, sizeof r, cudaMemcpyDeviceToHost, cn->stream),
                  "cudaMemcpyAsync (loss)", d);
  if (!rc) rc = cuda_err(cudaStreamSynchronize(cn->stream), "cudaStreamSynchronize", d);
  if (rc) return rc;
  if (r.bad_label)
    return hs_diag_set(d, HS_EINVAL, "result: %d labels outside [0, %d)", r.bad_label,
                       n->classes);
  if (loss) *loss = r.loss;
  if (correct) *correct = r.correct;
  return 0;
}

static int cuda_copy(hs_net *n, hs_net_vec which, int to_host, float *host, hs_diag *d) {
  cu_net *cn = n->impl;
  float *dev = which == HS_NET_GRADS ? n->grads : n->params;
  size_t bytes = (size_t)n->n_params * sizeof(float);
  int rc = bind(cn, d);
  if (!rc && bytes)
    rc = cuda_err(to_host ? cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, cn->stream)
                          : cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, cn->stream),
                  to_host ? "cudaMemcpyAsync (to host)" : "cudaMemcpyAsync (to device)", d);
  if (!rc) rc = cuda_err(cudaStreamSynchronize(cn->stream), "cudaStreamSynchronize", d);
  return rc;
}

static int cuda_zero_momentum(hs_net *n, hs_diag *d) {
  cu_net *cn = n->impl;
  int rc = bind(cn, d);
  if (!rc && n->n_params)
    rc = cuda_err(cudaMemsetAsync(cn->momentum, 0, (size_t)n->n_params * sizeof(float),
                                  cn->stream),
                  "cudaMemsetAsync (momentum)", d);
  return rc;
}

static int cuda_mark(hs_net *n, int slot, hs_diag *d) {
  cu_net *cn = n->impl; /* nn_net.c has checked the slot */
  int rc = bind(cn, d);
  if (!rc) rc = cuda_err(cudaEventRecord(cn->marks[slot], cn->stream), "cudaEventRecord", d);
  if (!rc) cn->marked[slot] = 1;
  return rc;
}

static int cuda_elapsed(hs_net *n, int from, int to, double *seconds, hs_diag *d) {
  cu_net *cn = n->impl; /* nn_net.c has checked the slots */
  if (!cn->marked[from] || !cn->marked[to])
    return hs_diag_set(d, HS_EINVAL, "elapsed: slot %d was never marked",
                       cn->marked[from] ? to : from);
  float ms = 0.0f;
  int rc = bind(cn, d);
  if (!rc) rc = cuda_err(cudaEventSynchronize(cn->marks[to]), "cudaEventSynchronize", d);
  if (!rc) rc = cuda_err(cudaEventSynchronize(cn->marks[from]), "cudaEventSynchronize", d);
  if (!rc)
    rc = cuda_err(cudaEventElapsedTime(&ms, cn->marks[from], cn->marks[to]),
                  "cudaEventElapsedTime", d);
  if (!rc) *seconds = (double)ms / 1000.0;
  return rc;
}

static int cuda_sync(hs_net *n, hs_diag *d) {
  cu_net *cn = n->impl;
  int rc = bind(cn, d);
  return rc ? rc : cuda_err(cudaStreamSynchronize(cn->stream), "cudaStreamSynchronize", d);
}

static int64_t cuda_bytes(const hs_net *n) {
  const cu_net *cn = n->impl;
  return cn ? cn->fixed_bytes + cn->act_bytes + cn->ws_bytes : 0;
}

const struct hs_net_backend hs_net_backend_cuda = {
    .version = HS_NET_BACKEND_VERSION,
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .load = cuda_load,
    .forward = cuda_forward,
    .backward = cuda_backward,
    .update = cuda_update,
    .result = cuda_result,
    .copy = cuda_copy,
    .zero_momentum = cuda_zero_momentum,
    .mark = cuda_mark,
    .elapsed = cuda_elapsed,
    .sync = cuda_sync,
    .bytes = cuda_bytes,
};

/* --- captured step (nn_cuda.h) ------------------------------------------------------------ */

/* Builds every plan the step at the loaded batch needs, outside the capture. */
static int prepare_plans(cu_net *cn, const hs_net *n, hs_diag *d) {
  for (int i = 1; i < cn->n_layers; i++) {
    const hs_layer *l = hs_graph_layer(n->graph, i);
    if (l->kind != HS_LAYER_CONV2D) continue;
    cu_plan *p;
    int rc = plan_get(cn, n, i, CONV_FWD, cn->batch, &p, d);
    if (!rc) rc = plan_get(cn, n, i, CONV_WGRAD, cn->batch, &p, d);
    if (!rc && cn->layers[i].need_dx[0]) rc = plan_get(cn, n, i, CONV_DGRAD, cn->batch, &p, d);
    if (rc) return rc;
  }
  return 0;
}

int hs_net_cuda_capture_step(hs_net *n, const hs_sgd *opt, hs_diag *d) {
  if (!n || n->be != &hs_net_backend_cuda || !n->impl)
    return hs_diag_set(d, HS_EUNSUPPORTED, "capture: %s is not a cuda net",
                       n ? n->device : "(null)");
  cu_net *cn = n->impl;
  if (cn->batch <= 0) return hs_diag_set(d, HS_EINVAL, "capture: no batch loaded");
  int rc = bind(cn, d);
  if (!rc) rc = prepare_plans(cn, n, d);
  if (!rc) rc = cuda_err(cudaStreamSynchronize(cn->stream), "cudaStreamSynchronize", d);
  if (rc) return rc;
  if (cn->step) {
    (void)cudaGraphExecDestroy(cn->step);
    cn->step = NULL;
  }
  rc = cuda_err(cudaStreamBeginCapture(cn->stream, cudaStreamCaptureModeThreadLocal),
                "cudaStreamBeginCapture", d);
  if (rc) return rc;
  int step_rc = forward_layers(cn, n, 1, d);
  if (!step_rc) step_rc = backward_layers(cn, n, d);
  if (!step_rc) step_rc = update_params(cn, n, opt, d);
  cudaGraph_t graph = NULL;
  cudaError_t ended = cudaStreamEndCapture(cn->stream, &graph);
  if (step_rc) { /* its message says what failed; the capture's end only echoes it */
    if (graph) (void)cudaGraphDestroy(graph);
    return step_rc;
  }
  rc = cuda_err(ended, "cudaStreamEndCapture", d);
  if (!rc) rc = cuda_err(cudaGraphInstantiate(&cn->step, graph, 0), "cudaGraphInstantiate", d);
  if (graph) (void)cudaGraphDestroy(graph);
  if (rc) {
    cn->step = NULL;
    return rc;
  }
  cn->step_batch = cn->batch;
  /* Capturing ran nothing: the buffers hold what they held before. */
  return 0;
}

int hs_net_cuda_replay_step(hs_net *n, hs_diag *d) {
  if (!n || n->be != &hs_net_backend_cuda || !n->impl)
    return hs_diag_set(d, HS_EUNSUPPORTED, "replay: %s is not a cuda net",
                       n ? n->device : "(null)");
  cu_net *cn = n->impl;
  if (!cn->step || cn->step_batch != cn->batch)
    return hs_diag_set(d, HS_EINVAL, "replay: no step captured at the loaded batch (%d)",
                       cn->batch);
  int rc = bind(cn, d);
  if (!rc) rc = cuda_err(cudaGraphLaunch(cn->step, cn->stream), "cudaGraphLaunch", d);
  if (rc) return rc;
  cn->fwd_batch = cn->batch;
  cn->fwd_train = 1;
  return 0;
}

#else /* HETSIM_HAVE_CUDA && !HETSIM_HAVE_CUDNN */

/* CUDA without cuDNN headers: the table exists (nn_backend.h declares it) and says why it cannot
 * open. */
static int cuda_open(hs_net *n, const float *init, hs_diag *d) {
  (void)init;
  return hs_diag_set(d, HS_EUNSUPPORTED, "%s: this hetsim was built without cuDNN headers",
                     n->device);
}

static void cuda_close(hs_net *n) { (void)n; }

const struct hs_net_backend hs_net_backend_cuda = {
    .version = HS_NET_BACKEND_VERSION,
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
};

int hs_net_cuda_capture_step(hs_net *n, const hs_sgd *opt, hs_diag *d) {
  (void)n;
  (void)opt;
  return hs_diag_set(d, HS_EUNSUPPORTED, "capture: built without cuDNN");
}

int hs_net_cuda_replay_step(hs_net *n, hs_diag *d) {
  (void)n;
  return hs_diag_set(d, HS_EUNSUPPORTED, "replay: built without cuDNN");
}

#endif /* HETSIM_HAVE_CUDNN */

#else /* !HETSIM_HAVE_CUDA */

int hs_net_cuda_capture_step(hs_net *n, const hs_sgd *opt, hs_diag *d) {
  (void)n;
  (void)opt;
  return hs_diag_set(d, HS_EUNSUPPORTED, "capture: this hetsim was built without CUDA");
}

int hs_net_cuda_replay_step(hs_net *n, hs_diag *d) {
  (void)n;
  return hs_diag_set(d, HS_EUNSUPPORTED, "replay: this hetsim was built without CUDA");
}

#endif /* HETSIM_HAVE_CUDA */
