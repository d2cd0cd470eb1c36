/* nn_cuda: the cuda compute backend behind nn_net.h (the table hs_net_backend_cuda).
 *
 * What runs where:
 * - Convolutions (forward, backward data, backward filter; grouped and depthwise through the
 *   filter's channel count) use cuDNN's graph (backend) API through nn_cuda_plan.h: one
 *   operation graph per (layer, direction, batch), engine configurations from heuristics mode A
 *   (then the fallback list), filtered by the math mode; the first whose execution plan
 *   finalises and whose workspace fits is kept. Plans are cached per (layer, batch) for the
 *   life of the net; variant packs are built per call.
 * - Linear layers use cuBLAS SGEMM.
 * - Math (HETSIM_CUDA_MATH, read at open; nn_cuda_plan.h): strict (default) keeps cuDNN to full
 *   fp32, deterministic engines; fast lets cuDNN pick TF32 tensor-core and non-deterministic
 *   engines, as PyTorch does for convolutions by default. cuBLAS stays full fp32 in both, as
 *   PyTorch's matmul default.
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
 * "cuda:I/sm=N" that stream belongs to a green context on SM groups no other net of the process
 * holds (nn_cuda.h), made current with the stream so that the cuDNN and cuBLAS handles, events and
 * kernels live in it; cuDNN's heuristics and cuBLAS are told the partition's granted SM count.
 * Every entry point makes the net's context current on the calling thread. A partition's net
 * gives the thread the context it had back before it returns (after open, the device's primary
 * context, which open makes current first), so a net may move between threads (one at a time, as
 * nn_net.h says) and no thread keeps a green context that another may need. A whole-GPU net makes
 * its device's primary context current (cudaSetDevice) and leaves it so, as the CUDA runtime
 * does. */
#include "nn/nn_cuda.h"

#include "core/core_buildinfo.h"

#if HETSIM_HAVE_CUDA

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "core/core_deadline.h"
#include "nn/nn_backend.h"
#include "nn/nn_cuda_kernels.h"
#include "nn/nn_cuda_part.h"
#include "nn/nn_cuda_plan.h"
#include "nn/nn_cuda_wait.h"
#include "nn/nn_cudalib.h"

#if HETSIM_HAVE_CUDNN

/* cuBLAS workspace: set explicitly so that no call allocates inside a CUDA graph capture (the
 * size NVIDIA recommends for Hopper). */
#define CU_BLAS_WORKSPACE ((size_t)32 << 20)

enum { CONV_FWD = HS_CUPLAN_FWD, CONV_DGRAD = HS_CUPLAN_DGRAD, CONV_WGRAD = HS_CUPLAN_WGRAD,
       CONV_DIRS = HS_CUPLAN_DIRS };

typedef struct cu_layer {
  float *y, *dy;   /* output and its gradient (batch capacity); a view for flatten; NULL for the
                      input's gradient */
  int owner;       /* the layer whose buffers y/dy are (itself, or a flatten's source) */
  int acc[2];      /* backward: add into in[s]'s gradient (1) or write it (0) */
  int need_dx[2];  /* backward: in[s]'s gradient is needed (not the data batch) */
  int orphan;      /* no layer reads this output: backward starts its gradient at zero */
  float *bn;       /* batchnorm: running mean, running var, saved mean, saved 1/std (4 x C) */
  hs_cuplan *plans[CONV_DIRS];
  int n_plans[CONV_DIRS], cap_plans[CONV_DIRS];
} cu_layer;

typedef struct cu_net {
  const hs_cudrv_api *drv;
  const hs_cublas_api *blas;
  const hs_cudnn_api *dnn;
  const hs_net *net;  /* the net this is the state of (for the process-wide table) */
  struct cu_net *next_open; /* the process-wide list of open cuda nets */
  int device;
  hs_cuda_math math;
  hs_cuda_part part;  /* "cuda:I/sm=N": its SM groups, green context and stream (nn_cuda_part.h) */
  CUcontext ctx;      /* the green context as a context; NULL for the whole GPU */
  CUcontext caller;   /* what the opening thread had current, given back when open ends */
  int sm_count;       /* SMs granted (a partition) or the whole GPU's */
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
  double wait_s;          /* the longest one wait for the device (hs_net_options.wait_s) */
  int wedged;             /* a wait ran out: the device may still use the net's memory */
} cu_net;

/* --- error reporting ---------------------------------------------------------------------- */

static int cuda_err(cudaError_t e, const char *what, hs_diag *d) {
  if (e == cudaSuccess) return 0;
  /* A failed runtime call stays behind as the thread's last error, which our kernel launchers
   * read (cudaGetLastError) and would later report as their own failure: clear it. A sticky
   * error (a fault on the device) comes back from every later call regardless. */
  (void)cudaGetLastError();
  if (e == cudaErrorMemoryAllocation)
    return hs_diag_set(d, HS_ENOMEM, "CUDA: %s: %s", what, cudaGetErrorString(e));
  return hs_diag_set(d, HS_ERUNTIME, "CUDA: %s: %s (%s)", what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

static int blas_err(const cu_net *cn, cublasStatus_t s, const char *what, hs_diag *d) {
  if (s == CUBLAS_STATUS_SUCCESS) return 0;
  return hs_diag_set(d, s == CUBLAS_STATUS_ALLOC_FAILED ? HS_ENOMEM : HS_ERUNTIME,
                     "cuBLAS: %s: %s", what, cn->blas->cublasGetStatusString(s));
}

static int dnn_err(const cu_net *cn, cudnnStatus_t s, const char *what, hs_diag *d) {
  return hs_cuplan_dnn_err(cn->dnn, s, what, d);
}

/* Makes the net's context current on this thread (entry points may come from any thread), the
 * thread's own context kept in *prev for unbind. A green context may be current to only one
 * thread at a time (cuda.h, cuGreenCtxCreate): every entry point that binds unbinds before it
 * returns, so that the next call, from whichever thread, finds it free. A net on the whole GPU
 * uses the device's primary context, which any thread may hold. */
static int bind(const cu_net *cn, CUcontext *prev, hs_diag *d) {
  *prev = cn->ctx; /* nothing to give back until the net's context is made current below */
  if (cn->wedged)
    return hs_diag_set(d, HS_ERUNTIME,
                       "cuda net: an earlier wait for the device ran out (%.3g s); the net is "
                       "unusable",
                       cn->wait_s);
  if (!cn->ctx) return cuda_err(cudaSetDevice(cn->device), "cudaSetDevice", d);
  CUcontext cur = NULL;
  int rc = hs_cudrv_err(cn->drv, cn->drv->cuCtxGetCurrent(&cur), "cuCtxGetCurrent", d);
  if (!rc) rc = hs_cudrv_err(cn->drv, cn->drv->cuCtxSetCurrent(cn->ctx), "cuCtxSetCurrent", d);
  if (!rc) *prev = cur;
  return rc;
}

/* Gives the thread back the context bind found current (for a green net that bind made current;
 * nothing otherwise). */
static void unbind(const cu_net *cn, CUcontext prev) {
  if (cn->ctx && prev != cn->ctx) (void)cn->drv->cuCtxSetCurrent(prev);
}

/* Waits for the net's stream (ev NULL) or one of its events, at most wait_s. A wait that runs
 * out leaves work queued that may still read or write the net's memory: the net is wedged, every
 * later call fails (bind), and close frees nothing the device may still use. */
static int net_wait(cu_net *cn, cudaEvent_t ev, const char *what, hs_diag *d) {
  cudaError_t e = hs_cuda_poll_done(cn->stream, ev, cn->wait_s);
  if (e != cudaErrorNotReady) return cuda_err(e, what, d);
  cn->wedged = 1;
  hs_cuda_mark_wedged(cn->device);
  return hs_diag_set(d, HS_ERUNTIME,
                     "CUDA: %s: the device did not finish within %.3g s (hs_net_options.wait_s); "
                     "the net is unusable",
                     what, cn->wait_s);
}

/* Before a copy between the device and pageable host memory, which "might be synchronous with
 * respect to host" (cuda_runtime_api.h): inside the call, beyond any bound. Waiting (bounded)
 * until the stream is idle first leaves the copy nothing to wait for but itself. */
static int idle(cu_net *cn, const char *copy_of, hs_diag *d) {
  char what[96];
  snprintf(what, sizeof what, "waiting for the stream (before copying %s)", copy_of);
  return net_wait(cn, NULL, what, d);
}

static int dev_alloc(void **p, size_t bytes, const char *what, hs_diag *d) {
  *p = NULL;
  if (bytes == 0) return 0;
  return cuda_err(cudaMalloc(p, bytes), what, d);
}

static void dev_free(void *p) {
  if (p) (void)cudaFree(p);
}

/* --- process-wide: open nets --------------------------------------------------------------- */

/* The open cuda nets, so that a communication backend holding only a device pointer can find the
 * net (and stream) it belongs to (hs_net_cuda_record_owner). The SM groups of the partitions are
 * nn_cuda_part.c's. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static cu_net *open_nets;

static void net_list_add(cu_net *cn) {
  pthread_mutex_lock(&reg_mu);
  cn->next_open = open_nets;
  open_nets = cn;
  pthread_mutex_unlock(&reg_mu);
}

static void net_list_remove(cu_net *cn) {
  pthread_mutex_lock(&reg_mu);
  for (cu_net **p = &open_nets; *p; p = &(*p)->next_open)
    if (*p == cn) {
      *p = cn->next_open;
      break;
    }
  pthread_mutex_unlock(&reg_mu);
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

/* --- cuDNN plans (nn_cuda_plan.h) --------------------------------------------------------- */

/* Grows the shared workspace to `bytes` (a plan's workspace callback). A captured step refers to
 * the workspace it was recorded with, so growing it destroys the captured step: replaying then
 * answers "capture again" instead of running on freed memory. */
static int workspace_reserve(void *ctx, int64_t bytes, hs_diag *d) {
  cu_net *cn = ctx;
  if (bytes <= cn->ws_bytes) return 0;
  void *p;
  int rc = dev_alloc(&p, (size_t)bytes, "cudaMalloc (cuDNN workspace)", d);
  /* No queued convolution may still use the old one: cudaFree "may" synchronize, no more
   * (cuda_runtime_api.h), so the stream is waited for first. */
  if (!rc) rc = net_wait(cn, NULL, "waiting for the stream (before a new workspace)", d);
  if (rc) {
    dev_free(p);
    return rc;
  }
  if (cn->step) {
    (void)cudaGraphExecDestroy(cn->step);
    cn->step = NULL;
  }
  dev_free(cn->workspace);
  cn->workspace = p;
  cn->ws_bytes = bytes;
  return 0;
}

static hs_cuplan_conv conv_geometry(const hs_layer *l, int64_t w_off, int batch) {
  hs_cuplan_conv g = {.batch = batch, .in_c = l->in_c, .in_h = l->in_h, .in_w = l->in_w, .out_c = l->out_c,
                      .out_h = l->out_h, .out_w = l->out_w, .kernel = l->kernel, .stride = l->stride,
                      .pad = l->pad, .groups = l->groups, .w_align = ptr_align(w_off)};
  return g;
}

/* Builds the plan of one convolution direction at one batch into *p, for this net's GPU (or
 * partition) and math. */
static int plan_build(cu_net *cn, const hs_layer *l, int64_t w_off, int dir, int batch, hs_cuplan *p,
                      hs_diag *d) {
  hs_cuplan_target t = {.dnn = cn->dnn, .handle = cn->cudnn, .sm_count = cn->ctx ? cn->sm_count : 0,
                        .math = cn->math, .workspace_fits = workspace_reserve, .ctx = cn};
  hs_cuplan_conv g = conv_geometry(l, w_off, batch);
  return hs_cuplan_build(&t, &g, (hs_cuplan_dir)dir, p, d);
}

/* The cached plan of layer i in direction dir at batch, built on first use. */
static int plan_get(cu_net *cn, const hs_net *n, int i, int dir, int batch, hs_cuplan **out,
                    hs_diag *d) {
  cu_layer *L = &cn->layers[i];
  for (int j = 0; j < L->n_plans[dir]; j++)
    if (L->plans[dir][j].batch == batch) {
      *out = &L->plans[dir][j];
      return 0;
    }
  if (L->n_plans[dir] == L->cap_plans[dir]) {
    int cap = L->cap_plans[dir] ? 2 * L->cap_plans[dir] : 4;
    hs_cuplan *grown = realloc(L->plans[dir], (size_t)cap * sizeof *grown);
    if (!grown) return hs_diag_set(d, HS_ENOMEM, "out of host memory for cuDNN plans");
    L->plans[dir] = grown;
    L->cap_plans[dir] = cap;
  }
  hs_cuplan *p = &L->plans[dir][L->n_plans[dir]];
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
  hs_cuplan *p;
  int rc = plan_get(cn, n, i, dir, batch, &p, d);
  if (!rc) rc = hs_cuplan_execute(cn->dnn, cn->cudnn, p, x, w, y, cn->workspace, d);
  if (rc) hs_diag_prefix(d, "layer %d", i);
  return rc;
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

/* Frees the batch-sized buffers the net holds; the caller has waited for the work using them. */
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
  /* The old buffers go once no queued work uses them (cudaFree need not wait). */
  if ((rc = net_wait(cn, NULL, "waiting for the stream (before new buffers)", d))) {
    bufs_free(&b, cn->n_layers);
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

/* Takes n->sm_partition SMs of the GPU for the net (nn_cuda_part.h: SM groups no other net of the
 * process holds, a green context on them and its stream) and makes the green context current.
 * cn->sm_count is what the driver granted: the request rounded up to whole groups. */
static int green_open(cu_net *cn, const hs_net *n, hs_diag *d) {
  const hs_cudrv_api *drv = cn->drv;
  int rc = hs_cuda_part_open(&cn->part, drv, n->ordinal, (unsigned)n->sm_partition, n->device, d);
  if (rc) return rc;
  cn->ctx = cn->part.ctx;
  cn->stream = (cudaStream_t)cn->part.stream; /* CUstream and cudaStream_t are the same type */
  cn->sm_count = cn->part.sm_count;
  rc = hs_cudrv_err(drv, drv->cuCtxGetCurrent(&cn->caller), "cuCtxGetCurrent", d);
  if (!rc) rc = hs_cudrv_err(drv, drv->cuCtxSetCurrent(cn->ctx), "cuCtxSetCurrent", d);
  if (rc) hs_diag_prefix(d, "%s", n->device);
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
    /* A copy from pageable memory "might" return before it has read it (the CUDA runtime's API
     * synchronization behaviour): the host array goes only once the stream is done. */
    if (!rc) rc = net_wait(cn, NULL, "waiting for the batchnorm statistics' copy", d);
    if (!cn->wedged) free(host); /* else the copy may still read it */
    if (rc) return rc;
    cn->fixed_bytes += (int64_t)(4 * c * sizeof(float));
  }
  return 0;
}

static int cuda_open_impl(hs_net *n, cu_net *cn, const float *init, hs_diag *d) {
  hs_diag why = {0};
  cn->wait_s = n->opts.wait_s; /* nn_net.c has set the default */
  int rc = hs_cuda_math_from_env(&cn->math, d);
  if (rc) return rc;
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
  rc = cuda_err(cudaSetDevice(cn->device), "cudaSetDevice", d);
  if (!rc) rc = cuda_err(cudaFree(NULL), "context creation", d);
  if (!rc) rc = cuda_err(cudaDeviceGetAttribute(&cn->sm_count, cudaDevAttrMultiProcessorCount, cn->device),
                         "cudaDeviceGetAttribute (SMs)", d);
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
  /* Linear layers stay full fp32 in both math modes, as PyTorch's default for matmul
   * (torch.backends.cuda.matmul.allow_tf32 is False): set explicitly, so that neither a
   * library default nor NVIDIA_TF32_OVERRIDE decides it. */
  if (!rc)
    rc = blas_err(cn, cn->blas->cublasSetMathMode(cn->cublas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
                  "cublasSetMathMode", d);
  /* On a partition, cuBLAS picks kernels for the SMs the partition has, not the whole GPU's. */
  if (!rc && cn->ctx)
    rc = blas_err(cn, cn->blas->cublasSetSmCountTarget(cn->cublas, cn->sm_count), "cublasSetSmCountTarget", d);
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
  if (!rc) rc = net_wait(cn, NULL, "waiting for the initial copies", d);
  return rc;
}

static int cuda_open(hs_net *n, const float *init, hs_diag *d) {
  cu_net *cn = calloc(1, sizeof *cn);
  if (!cn) return hs_diag_set(d, HS_ENOMEM, "out of host memory");
  n->impl = cn;
  cn->net = n;
  int rc = cuda_open_impl(n, cn, init, d);
  if (rc) {
    const hs_cudrv_api *drv = cn->ctx ? cn->drv : NULL;
    CUcontext caller = cn->caller;
    cuda_close(n);
    if (drv) (void)drv->cuCtxSetCurrent(caller);
    return rc;
  }
  net_list_add(cn);
  /* A green context may be current to only one thread at a time (cuda.h, cuGreenCtxCreate):
   * the opening thread gets its own context back, and every entry point binds the net's. */
  if (cn->ctx) (void)cn->drv->cuCtxSetCurrent(cn->caller);
  return 0;
}

/* How long close waits for the net's queued work to end. */
#define CLOSE_DRAIN_S 60.0

static void cuda_close(hs_net *n) {
  cu_net *cn = n->impl;
  if (!cn) return;
  net_list_remove(cn);
  CUcontext prev = NULL;
  if (cn->ctx) {
    (void)cn->drv->cuCtxGetCurrent(&prev);
    (void)cn->drv->cuCtxSetCurrent(cn->ctx);
  } else if (cn->stream) {
    (void)cudaSetDevice(cn->device);
  }
  /* A wedged net has waited its wait_s already: one more second, in case it has just ended. A
   * net on a device that another net or a backend left wedged frees nothing either: cudaFree
   * and cublasDestroy may wait for the whole device. */
  int drained = !cn->stream || hs_cuda_stream_drained(cn->stream, cn->wedged ? 1.0 : CLOSE_DRAIN_S);
  if (!drained) hs_cuda_mark_wedged(cn->device);
  if (!drained || hs_cuda_device_wedged(cn->device)) {
    /* The device never finished the work: the net's memory, handles, plans, context and SM
     * groups stay to the process's exit, since freeing any of them would wait for that work. */
    if (cn->ctx) (void)cn->drv->cuCtxSetCurrent(prev == cn->ctx ? NULL : prev);
    n->params = n->grads = NULL;
    n->impl = NULL;
    free(cn);
    return;
  }
  if (cn->step) (void)cudaGraphExecDestroy(cn->step);
  if (cn->layers) {
    for (int i = 0; i < cn->n_layers; i++) {
      cu_layer *L = &cn->layers[i];
      for (int dir = 0; dir < CONV_DIRS; dir++) {
        for (int j = 0; j < L->n_plans[dir]; j++) hs_cuplan_free(cn->dnn, &L->plans[dir][j]);
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
  if (cn->part.green || cn->part.n_groups) {
    /* The stream, the green context, then the SM groups (nn_cuda_part.h). */
    hs_cuda_part_close(&cn->part, cn->drv);
    /* The caller's context back, but never the destroyed one (NULL: the runtime then returns
     * to the primary context). */
    if (cn->ctx) (void)cn->drv->cuCtxSetCurrent(prev == cn->ctx ? NULL : prev);
  } else if (cn->stream) {
    (void)cudaStreamDestroy(cn->stream);
  }
  free(cn);
  n->impl = NULL;
}

static int cuda_load(hs_net *n, const float *x, const int32_t *y, int batch, hs_diag *d) {
  cu_net *cn = n->impl; /* nn_net.c has checked the batch and the labels */
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = ensure_capacity(cn, n, batch, d);
  size_t xb = (size_t)batch * (size_t)out_elems(hs_graph_layer(n->graph, 0)) * sizeof(float);
  if (!rc) rc = idle(cn, "the batch", d);
  if (!rc)
    rc = cuda_err(cudaMemcpyAsync(cn->x, x, xb, cudaMemcpyHostToDevice, cn->stream),
                  "cudaMemcpyAsync (input batch)", d);
  if (!rc)
    rc = cuda_err(cudaMemcpyAsync(cn->labels, y, (size_t)batch * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, cn->stream),
                  "cudaMemcpyAsync (labels)", d);
  /* Pageable sources: wait, so the caller may reuse its arrays as soon as we return. */
  if (!rc) rc = net_wait(cn, NULL, "waiting for the batch's copy", d);
  unbind(cn, prev);
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
  int rc = train ? hs_net_check_train_batch(n, B, d) : 0;
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
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = forward_layers(cn, n, train, d);
  unbind(cn, prev);
  cn->fwd_batch = rc ? 0 : cn->batch;
  cn->fwd_train = train;
  return rc;
}

static int cuda_backward(hs_net *n, hs_diag *d) {
  cu_net *cn = n->impl;
  if (cn->fwd_batch <= 0 || !cn->fwd_train || cn->fwd_batch != cn->batch)
    return hs_diag_set(d, HS_EINVAL, "backward: needs a training forward pass of the loaded batch");
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = backward_layers(cn, n, d);
  unbind(cn, prev);
  return rc;
}

static int cuda_update(hs_net *n, const hs_sgd *o, hs_diag *d) {
  cu_net *cn = n->impl;
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = update_params(cn, n, o, d);
  unbind(cn, prev);
  return rc;
}

static int cuda_result(hs_net *n, double *loss, int *correct, hs_diag *d) {
  cu_net *cn = n->impl;
  if (cn->fwd_batch <= 0) return hs_diag_set(d, HS_EINVAL, "result: no forward pass yet");
  hs_cuk_result r;
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = idle(cn, "the loss", d);
  if (!rc)
    rc = cuda_err(cudaMemcpyAsync(&r, cn->res, sizeof r, cudaMemcpyDeviceToHost, cn->stream),
                  "cudaMemcpyAsync (loss)", d);
  if (!rc) rc = net_wait(cn, NULL, "waiting for the loss", d);
  unbind(cn, prev);
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
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc && bytes) rc = idle(cn, to_host ? "to the host" : "to the device", d);
  if (!rc && bytes)
    rc = cuda_err(to_host ? cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, cn->stream)
                          : cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, cn->stream),
                  to_host ? "cudaMemcpyAsync (to host)" : "cudaMemcpyAsync (to device)", d);
  if (!rc) rc = net_wait(cn, NULL, "waiting for the copy", d);
  unbind(cn, prev);
  return rc;
}

static int cuda_zero_momentum(hs_net *n, hs_diag *d) {
  cu_net *cn = n->impl;
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc && n->n_params)
    rc = cuda_err(cudaMemsetAsync(cn->momentum, 0, (size_t)n->n_params * sizeof(float),
                                  cn->stream),
                  "cudaMemsetAsync (momentum)", d);
  unbind(cn, prev);
  return rc;
}

static int cuda_mark(hs_net *n, int slot, hs_diag *d) {
  cu_net *cn = n->impl; /* nn_net.c has checked the slot */
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = cuda_err(cudaEventRecord(cn->marks[slot], cn->stream), "cudaEventRecord", d);
  unbind(cn, prev);
  if (!rc) cn->marked[slot] = 1;
  return rc;
}

static int cuda_elapsed(hs_net *n, int from, int to, double *seconds, hs_diag *d) {
  cu_net *cn = n->impl; /* nn_net.c has checked the slots */
  if (!cn->marked[from] || !cn->marked[to])
    return hs_diag_set(d, HS_EINVAL, "elapsed: slot %d was never marked",
                       cn->marked[from] ? to : from);
  float ms = 0.0f;
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = net_wait(cn, cn->marks[to], "waiting for a mark", d);
  if (!rc) rc = net_wait(cn, cn->marks[from], "waiting for a mark", d);
  if (!rc)
    rc = cuda_err(cudaEventElapsedTime(&ms, cn->marks[from], cn->marks[to]),
                  "cudaEventElapsedTime", d);
  unbind(cn, prev);
  if (!rc) *seconds = (double)ms / 1000.0;
  return rc;
}

static int cuda_sync(hs_net *n, hs_diag *d) {
  cu_net *cn = n->impl;
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = net_wait(cn, NULL, "waiting for the stream", d);
  unbind(cn, prev);
  return rc;
}

static int64_t cuda_bytes(const hs_net *n) {
  const cu_net *cn = n->impl;
  return cn ? cn->fixed_bytes + cn->act_bytes + cn->ws_bytes : 0;
}

/* Every plan a training step of `batch` samples executes (forward, and both backward passes
 * where they run). */
static int prepare_plans(cu_net *cn, const hs_net *n, int batch, hs_diag *d) {
  for (int i = 1; i < cn->n_layers; i++) {
    const hs_layer *l = hs_graph_layer(n->graph, i);
    if (l->kind != HS_LAYER_CONV2D) continue;
    hs_cuplan *p;
    int rc = plan_get(cn, n, i, CONV_FWD, batch, &p, d);
    if (!rc) rc = plan_get(cn, n, i, CONV_WGRAD, batch, &p, d);
    if (!rc && cn->layers[i].need_dx[0]) rc = plan_get(cn, n, i, CONV_DGRAD, batch, &p, d);
    if (rc) return rc;
  }
  return 0;
}

static int cuda_prepare(hs_net *n, int batch, hs_diag *d) {
  cu_net *cn = n->impl;
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = ensure_capacity(cn, n, batch, d);
  if (!rc) rc = prepare_plans(cn, n, batch, d);
  unbind(cn, prev);
  return rc;
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
    .prepare = cuda_prepare,
};

/* --- captured step (nn_cuda.h) ------------------------------------------------------------ */

/* The capture, with the net's context current. */
static int capture_step(cu_net *cn, hs_net *n, const hs_sgd *opt, hs_diag *d) {
  int rc = prepare_plans(cn, n, cn->batch, d);
  if (!rc) rc = net_wait(cn, NULL, "waiting for the stream (before capture)", d);
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
    if (ended != cudaSuccess) (void)cudaGetLastError(); /* not left for the next launch check */
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

int hs_net_cuda_capture_step(hs_net *n, const hs_sgd *opt, hs_diag *d) {
  if (!n || n->be != &hs_net_backend_cuda || !n->impl)
    return hs_diag_set(d, HS_EUNSUPPORTED, "capture: %s is not a cuda net",
                       n ? n->device : "(null)");
  cu_net *cn = n->impl;
  if (cn->batch <= 0) return hs_diag_set(d, HS_EINVAL, "capture: no batch loaded");
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = capture_step(cn, n, opt, d);
  unbind(cn, prev);
  return rc;
}

int hs_net_cuda_replay_step(hs_net *n, hs_diag *d) {
  if (!n || n->be != &hs_net_backend_cuda || !n->impl)
    return hs_diag_set(d, HS_EUNSUPPORTED, "replay: %s is not a cuda net",
                       n ? n->device : "(null)");
  cu_net *cn = n->impl;
  if (!cn->step || cn->step_batch != cn->batch)
    return hs_diag_set(d, HS_EINVAL, "replay: no step captured at the loaded batch (%d)",
                       cn->batch);
  CUcontext prev;
  int rc = bind(cn, &prev, d);
  if (!rc) rc = cuda_err(cudaGraphLaunch(cn->step, cn->stream), "cudaGraphLaunch", d);
  unbind(cn, prev);
  if (rc) return rc;
  cn->fwd_batch = cn->batch;
  cn->fwd_train = 1;
  return 0;
}

int hs_net_cuda_sm_count(const hs_net *n) {
  if (!n || n->be != &hs_net_backend_cuda || !n->impl) return 0;
  return ((const cu_net *)n->impl)->sm_count;
}

const char *hs_net_cuda_math(const hs_net *n) {
  if (!n || n->be != &hs_net_backend_cuda || !n->impl) return NULL;
  return hs_cuda_math_name(((const cu_net *)n->impl)->math);
}

int hs_net_cuda_record_owner(const void *dev_ptr, void **event, hs_diag *d) {
  *event = NULL;
  const char *p = dev_ptr;
  pthread_mutex_lock(&reg_mu);
  cu_net *owner = NULL;
  for (cu_net *cn = open_nets; cn && !owner; cn = cn->next_open) {
    const hs_net *n = cn->net;
    const char *a = (const char *)n->params, *g = (const char *)n->grads;
    size_t bytes = (size_t)n->n_params * sizeof(float);
    if ((a && p >= a && p < a + bytes) || (g && p >= g && p < g + bytes)) owner = cn;
  }
  int rc = 0;
  if (!owner) {
    rc = hs_diag_set(d, HS_ENOTFOUND, "device pointer %p belongs to no open cuda net of this process (not a "
                     "net's parameters or gradients)", dev_ptr);
  } else {
    /* The event is made in the net's context and recorded on its one stream, which carries all
     * of the net's work: it completes when everything the net has enqueued so far is done. */
    cudaEvent_t ev = NULL;
    CUcontext prev;
    rc = bind(owner, &prev, d);
    if (!rc) rc = cuda_err(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate", d);
    if (!rc) rc = cuda_err(cudaEventRecord(ev, owner->stream), "cudaEventRecord (net's stream)", d);
    if (rc && ev) (void)cudaEventDestroy(ev);
    unbind(owner, prev);
    if (!rc) *event = ev;
    if (rc) hs_diag_prefix(d, "%s", owner->net->device);
  }
  pthread_mutex_unlock(&reg_mu);
  return rc;
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

int hs_net_cuda_sm_count(const hs_net *n) {
  (void)n;
  return 0;
}

const char *hs_net_cuda_math(const hs_net *n) {
  (void)n;
  return NULL;
}

int hs_net_cuda_record_owner(const void *dev_ptr, void **event, hs_diag *d) {
  (void)dev_ptr;
  *event = NULL;
  return hs_diag_set(d, HS_EUNSUPPORTED, "cuda nets: built without cuDNN");
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

int hs_net_cuda_sm_count(const hs_net *n) {
  (void)n;
  return 0;
}

const char *hs_net_cuda_math(const hs_net *n) {
  (void)n;
  return NULL;
}

int hs_net_cuda_record_owner(const void *dev_ptr, void **event, hs_diag *d) {
  (void)dev_ptr;
  *event = NULL;
  return hs_diag_set(d, HS_EUNSUPPORTED, "cuda nets: this hetsim was built without CUDA");
}

#endif /* HETSIM_HAVE_CUDA */
