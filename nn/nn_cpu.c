/* nn_cpu: the cpu compute backend of nn_net.h (host memory, OpenBLAS sgemm, plain C loops).
 *
 * Memory. Parameters, gradients, momentum and the batchnorm buffers are allocated once at
 * open. Everything that scales with the batch (the input copy, labels, each layer's output and
 * output gradient, max-pool arg-maxes, the im2col workspaces) lives in one arena laid out for
 * a batch capacity; a load with a larger batch lays out and allocates a new arena and frees the
 * old one only once the new one exists, so an allocation failure (HS_ENOMEM) leaves the net as
 * it was. No call after that allocates: a training step does no malloc.
 *
 * Graph execution. Forward runs the layers front to back; flatten and the input are views (no
 * copy). Backward runs back to front and computes the gradient of a layer's output only where
 * some parameter lies upstream (`need`), so that no work is spent on the gradient of the data
 * (the first linear layer of mlp skips its largest product). A layer read by several others
 * (a residual) receives the sum of their gradients: the reader that runs first in backward
 * writes the gradient, later ones add to it (`overwrite`), so no buffer is cleared per step.
 *
 * Layouts. Activations are batch-major (NCHW; [batch x features] for linear layers), except
 * that a linear layer whose output only reaches linear layers, directly or through a ReLU, keeps
 * its output and output gradient feature-major ([features x batch], `fm`). The choice is per
 * product, from timing OpenBLAS 0.3.21's SkylakeX sgemm on mlp's shapes (batch 128, 784 -> 256,
 * `bench_nn_cpu layouts`): the forward product as W X^T (NT, 256x128x784) took a median
 * 0.92-0.95 of the time of X W^T in the same rounds, the weight gradient from a stored dY^T (NN,
 * 256x784x128) 0.93-1.00 of the time from a batch-major dY (TN). The differences are small;
 * see docs/performance.md, "nn cpu backend".
 *
 * In-place activations. A ReLU (or ReLU6) whose input is a linear, conv or batchnorm layer that
 * nothing else reads works in that layer's buffers: its output overwrites the input (which that
 * layer's backward never reads) and its backward masks the shared gradient in place.
 *
 * Kernels. Linear layers are one sgemm each way; the bias is written into the output first and
 * sgemm adds the product to it (OpenBLAS clears the output for beta 0 anyway, so the bias costs
 * no pass of its own). The softmax cross-entropy of a training pass writes its gradient with
 * respect to the logits in the same pass (backward only reads it). Convolutions are im2col +
 * sgemm on chunks of samples (as many as keep the column buffer near HS_CPU_COL_BYTES), so that
 * small layers get one large product instead of one small product per sample; a 1x1 stride-1
 * unpadded conv reads its input directly. Depthwise convolutions (one input channel per group) use a direct loop.
 * Batchnorm keeps the per-channel batch mean and 1/std of the training pass for backward and
 * recomputes the normalised input from them. Max pooling keeps the arg-max of each window.
 *
 * Threads. OpenBLAS's thread count is global to the process: open sets it to opts.threads
 * (0 = 1) with openblas_set_num_threads. The loops of this file run on the calling thread. The
 * real runtime's cpu backend runs one worker thread per net with threads = 1, which this
 * setting serves; nets opened with different thread counts in one process share the count of
 * the last one opened.
 *
 * Timing: hs_net_mark reads CLOCK_MONOTONIC; the backend is synchronous, so sync is a no-op. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nn/nn_backend.h"

/* Target size of one conv's im2col buffer; chunks of samples are sized to stay near it. */
#define HS_CPU_COL_BYTES ((int64_t)256 << 10)
/* Every buffer in the arena starts on a 64-byte boundary (16 floats). */
#define HS_CPU_ALIGN 16

typedef struct cpu_layer {
  const hs_layer *l;
  int64_t in_elems, out_elems; /* per sample */
  int need;                    /* the gradient of this layer's output is needed */
  int consumers;               /* layers that read this one */
  int overwrite[2];            /* backward writes (1) or adds to (0) the gradient of in[k] */
  int alias_dout;              /* flatten, in-place act: shares its input's output gradient */
  int fm;                      /* output and its gradient are feature-major [out_elems x batch] */
  int inplace;                 /* relu/relu6: computes in its input's buffers */
  int direct;                  /* conv: depthwise, by a direct loop */
  int unit;                    /* conv: 1x1, stride 1, no padding: input is its own column */
  int chunk;                   /* conv: samples per im2col chunk at the arena's capacity */
  /* Offsets into the arena (in floats), -1 when unused; a view takes its input's. */
  int64_t off_out, off_dout, off_arg;
  float *out, *dout;  /* resolved after each arena layout */
  int32_t *arg;       /* max pool: arg-max index into the input plane, per output element */
  float *mean, *rstd; /* batchnorm: batch statistics of the last training pass (per channel) */
  float *run_mean, *run_var; /* batchnorm: running statistics */
} cpu_layer;

typedef struct cpu_net {
  cpu_layer *layers;
  int count;
  int cap;      /* batch capacity of the arena */
  int batch;    /* samples loaded; 0 before the first load */
  int fwd;      /* 0: no forward since the load; 1: evaluation; 2: training */
  double loss;  /* of the last forward */
  int correct;
  float *arena; /* batch-sized buffers (see the header) */
  int64_t arena_floats;
  float *x, *col, *tmp; /* in the arena */
  int32_t *labels;              /* in the arena */
  float *momentum;  /* n_params */
  float *bn_store;  /* the batchnorm buffers of every layer, 4 per channel */
  int64_t fixed_bytes; /* params, grads, momentum, batchnorm buffers, layer table */
  int64_t limit;       /* bytes; 0 = none */
  struct timespec marks[HS_NET_MARKS];
  int marked[HS_NET_MARKS];
} cpu_net;

static cpu_net *impl(hs_net *n) { return (cpu_net *)n->impl; }

static void *alloc_floats(int64_t count) {
  size_t bytes = (size_t)(count > 0 ? count : 1) * sizeof(float);
  bytes = (bytes + 63) & ~(size_t)63;
  return aligned_alloc(64, bytes);
}

/* --- arena layout -------------------------------------------------------------------------- */

static int64_t align_up(int64_t v) { return (v + HS_CPU_ALIGN - 1) / HS_CPU_ALIGN * HS_CPU_ALIGN; }

/* Floats of one conv chunk's column buffer per sample, and of its output-shaped buffer. */
static int64_t conv_col_per_sample(const hs_layer *l) {
  return (int64_t)(l->in_c / l->groups) * l->kernel * l->kernel * l->out_h * l->out_w;
}

static int conv_chunk(const hs_layer *l, int cap) {
  int64_t per = conv_col_per_sample(l);
  int64_t per_out = (int64_t)(l->out_c / l->groups) * l->out_h * l->out_w;
  if (per_out > per) per = per_out;
  int64_t c = HS_CPU_COL_BYTES / (int64_t)sizeof(float) / (per > 0 ? per : 1);
  if (c < 1) c = 1;
  if (c > cap) c = cap;
  return (int)c;
}

/* Lays out the arena for `cap` samples: fills the layers' offsets (and chunks) and returns the
 * floats needed, with *col_off, *tmp_off etc. set. Writes nothing but the layout fields. */
typedef struct arena_layout {
  int64_t x, labels, col, tmp, total;
} arena_layout;

static void layout(hs_net *n, int cap, arena_layout *a) {
  cpu_net *c = impl(n);
  int64_t off = 0;
  int64_t col_max = 0, tmp_max = 0;
  a->x = off;
  off += align_up(c->layers[0].out_elems * cap);
  a->labels = off;
  off += align_up(cap);
  for (int i = 0; i < c->count; i++) {
    cpu_layer *cl = &c->layers[i];
    const hs_layer *l = cl->l;
    cl->off_out = cl->off_dout = cl->off_arg = -1;
    if (i == 0 || l->kind == HS_LAYER_FLATTEN || cl->inplace) {
      /* views: resolved from the input in resolve() */
    } else {
      cl->off_out = off;
      off += align_up(cl->out_elems * cap);
    }
    if (cl->need && i > 0 && !cl->alias_dout) {
      cl->off_dout = off;
      off += align_up(cl->out_elems * cap);
    }
    if (l->kind == HS_LAYER_MAXPOOL2D) {
      cl->off_arg = off;
      off += align_up(cl->out_elems * cap);
    }
    if (l->kind == HS_LAYER_CONV2D && !cl->direct) {
      cl->chunk = conv_chunk(l, cap);
      int64_t col = cl->unit && cl->chunk == 1 ? 0 : conv_col_per_sample(l) * cl->chunk;
      int64_t tmp = (int64_t)(l->out_c / l->groups) * l->out_h * l->out_w * cl->chunk;
      if (col > col_max) col_max = col;
      if (cl->chunk > 1 && tmp > tmp_max) tmp_max = tmp;
    }
  }
  a->col = off;
  off += align_up(col_max);
  a->tmp = off;
  off += align_up(tmp_max);
  a->total = off;
}

/* Points every layer's buffers into the arena after layout(). */
static void resolve(hs_net *n, const arena_layout *a) {
  cpu_net *c = impl(n);
  float *base = c->arena;
  c->x = base + a->x;
  c->labels = (int32_t *)(void *)(base + a->labels);
  c->col = base + a->col;
  c->tmp = base + a->tmp;
  for (int i = 0; i < c->count; i++) {
    cpu_layer *cl = &c->layers[i];
    const cpu_layer *src = i > 0 ? &c->layers[cl->l->in[0]] : NULL;
    cl->out = i == 0 ? c->x : cl->off_out >= 0 ? base + cl->off_out : src->out;
    cl->dout = cl->off_dout >= 0 ? base + cl->off_dout : cl->alias_dout ? src->dout : NULL;
    cl->arg = cl->off_arg >= 0 ? (int32_t *)(void *)(base + cl->off_arg) : NULL;
  }
}

/* Physical memory, as the ceiling of what a load may ask for. */
static int64_t phys_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || size <= 0) return INT64_MAX;
  return (int64_t)pages * size;
}

/* Makes the arena hold `cap` samples. On failure the old arena and layout stay. */
static int grow(hs_net *n, int cap, hs_diag *d) {
  cpu_net *c = impl(n);
  arena_layout a;
  layout(n, cap, &a);
  int64_t bytes = a.total * (int64_t)sizeof(float);
  int64_t limit = c->limit > 0 ? c->limit : phys_bytes();
  float *arena = NULL;
  if (a.total < INT64_MAX / 8 && c->fixed_bytes + bytes <= limit) arena = alloc_floats(a.total);
  if (!arena) {
    if (c->cap > 0) {
      arena_layout old;
      layout(n, c->cap, &old); /* restore the offsets and chunks of the arena we keep */
    }
    return hs_diag_set(d, HS_ENOMEM, "%s on cpu: out of memory for a batch of %d: it needs "
                       "%.1f MiB of activations and workspace besides %.1f MiB of parameters%s",
                       n->model, cap, (double)bytes / 1048576.0,
                       (double)c->fixed_bytes / 1048576.0,
                       c->limit > 0 ? " (over the net's memory limit)" : "");
  }
  free(c->arena);
  c->arena = arena;
  c->arena_floats = a.total;
  c->cap = cap;
  resolve(n, &a);
  c->batch = 0;
  c->fwd = 0;
  return 0;
}

/* --- open / close -------------------------------------------------------------------------- */

static void cpu_close(hs_net *n) {
  cpu_net *c = impl(n);
  if (c) {
    free(c->arena);
    free(c->momentum);
    free(c->bn_store);
    free(c->layers);
    free(c);
  }
  free(n->params);
  free(n->grads);
  n->impl = NULL;
  n->params = n->grads = NULL;
}

static int is_act(hs_layer_kind k) { return k == HS_LAYER_RELU || k == HS_LAYER_RELU6; }

/* Layer j's readers, as far as they are known (layers j+1 ..): 1 when j is not the logits and
 * every reader is a linear layer or an activation (not the logits) read only by linear layers;
 * those are the layers that accept a feature-major input. */
static int feeds_only_linear(const cpu_net *c, int j) {
  int last = c->count - 1, readers = 0;
  if (j == last) return 0;
  for (int r = j + 1; r <= last; r++) {
    const hs_layer *l = c->layers[r].l;
    if (l->in[0] != j && (l->n_in < 2 || l->in[1] != j)) continue;
    readers++;
    if (l->kind == HS_LAYER_LINEAR) continue;
    if (!is_act(l->kind) || r == last) return 0;
    for (int r2 = r + 1; r2 <= last; r2++) {
      const hs_layer *l2 = c->layers[r2].l;
      int reads = l2->in[0] == r || (l2->n_in > 1 && l2->in[1] == r);
      if (reads && l2->kind != HS_LAYER_LINEAR) return 0;
    }
  }
  return readers > 0;
}

static int cpu_open(hs_net *n, const float *init, hs_diag *d) {
  int count = hs_graph_count(n->graph);
  cpu_net *c = calloc(1, sizeof *c);
  n->impl = c;
  if (!c) goto nomem;
  c->count = count;
  c->layers = calloc((size_t)count, sizeof *c->layers);
  n->params = alloc_floats(n->n_params);
  n->grads = alloc_floats(n->n_params);
  c->momentum = alloc_floats(n->n_params);
  if (!c->layers || !n->params || !n->grads || !c->momentum) goto nomem;
  memcpy(n->params, init, (size_t)n->n_params * sizeof(float));
  memset(n->grads, 0, (size_t)n->n_params * sizeof(float));
  memset(c->momentum, 0, (size_t)n->n_params * sizeof(float));

  int64_t bn_floats = 0;
  for (int i = 0; i < count; i++) {
    cpu_layer *cl = &c->layers[i];
    const hs_layer *l = hs_graph_layer(n->graph, i);
    cl->l = l;
    cl->in_elems = (int64_t)l->in_c * l->in_h * l->in_w;
    cl->out_elems = (int64_t)l->out_c * l->out_h * l->out_w;
    cl->need = hs_layer_params(l) > 0;
    for (int k = 0; k < l->n_in; k++) {
      cl->need |= c->layers[l->in[k]].need;
      c->layers[l->in[k]].consumers++;
    }
    if (l->kind == HS_LAYER_BATCHNORM2D) bn_floats += 4 * (int64_t)l->in_c;
    if (l->kind == HS_LAYER_CONV2D) {
      cl->direct = l->groups > 1 && l->in_c == l->groups;
      cl->unit = l->kernel == 1 && l->stride == 1 && l->pad == 0;
    }
  }
  /* A reader writes its input's gradient when no later layer reads that input (backward meets
   * it first); add(a, a) writes through its first slot and adds through the second. */
  for (int j = 1; j < count; j++) {
    const hs_layer *l = c->layers[j].l;
    for (int k = 0; k < l->n_in; k++) {
      int src = l->in[k], later = 0;
      for (int j2 = j + 1; j2 < count && !later; j2++) {
        const hs_layer *l2 = c->layers[j2].l;
        for (int k2 = 0; k2 < l2->n_in; k2++) later |= l2->in[k2] == src;
      }
      c->layers[j].overwrite[k] = !later && !(k == 1 && l->in[0] == l->in[1]);
    }
    /* flatten shares its input's gradient buffer when it is that input's only reader */
    c->layers[j].alias_dout = l->kind == HS_LAYER_FLATTEN && c->layers[l->in[0]].consumers == 1;
    if (is_act(l->kind) && l->in[0] > 0 && c->layers[l->in[0]].consumers == 1) {
      hs_layer_kind sk = c->layers[l->in[0]].l->kind;
      c->layers[j].inplace = sk == HS_LAYER_LINEAR || sk == HS_LAYER_CONV2D ||
                             sk == HS_LAYER_BATCHNORM2D;
      c->layers[j].alias_dout = c->layers[j].inplace;
    }
  }
  for (int j = 1; j < count; j++) {
    const hs_layer *l = c->layers[j].l;
    if (l->kind == HS_LAYER_LINEAR) c->layers[j].fm = feeds_only_linear(c, j);
    else if (is_act(l->kind)) c->layers[j].fm = c->layers[l->in[0]].fm;
  }
  c->bn_store = alloc_floats(bn_floats);
  if (!c->bn_store) goto nomem;
  float *bn = c->bn_store;
  for (int i = 0; i < count; i++) {
    cpu_layer *cl = &c->layers[i];
    if (cl->l->kind != HS_LAYER_BATCHNORM2D) continue;
    int ch = cl->l->in_c;
    cl->mean = bn;
    cl->rstd = bn + ch;
    cl->run_mean = bn + 2 * ch;
    cl->run_var = bn + 3 * ch;
    for (int k = 0; k < ch; k++) {
      cl->mean[k] = 0.0f;
      cl->rstd[k] = 1.0f;
      cl->run_mean[k] = 0.0f; /* PyTorch's initial running statistics */
      cl->run_var[k] = 1.0f;
    }
    bn += 4 * ch;
  }
  c->fixed_bytes = (3 * n->n_params + bn_floats) * (int64_t)sizeof(float) +
                   (int64_t)count * (int64_t)sizeof(cpu_layer) + (int64_t)sizeof *c;
  openblas_set_num_threads(n->opts.threads > 0 ? n->opts.threads : 1);
  int rc = grow(n, n->opts.max_batch > 0 ? n->opts.max_batch : 1, d);
  if (rc) {
    cpu_close(n);
    return rc;
  }
  return 0;

nomem:
  cpu_close(n);
  return hs_diag_set(d, HS_ENOMEM, "%s on cpu: out of memory for %lld parameters", n->model,
                     (long long)n->n_params);
}

static int cpu_prepare(hs_net *n, int batch, hs_diag *d) {
  return batch > impl(n)->cap ? grow(n, batch, d) : 0;
}

static int cpu_load(hs_net *n, const float *x, const int32_t *y, int batch, hs_diag *d) {
  cpu_net *c = impl(n);
  if (batch > c->cap) {
    int rc = grow(n, batch, d);
    if (rc) return rc;
  }
  memcpy(c->x, x, (size_t)(c->layers[0].out_elems * batch) * sizeof(float));
  memcpy(c->labels, y, (size_t)batch * sizeof(int32_t));
  c->batch = batch;
  c->fwd = 0;
  return 0;
}

/* --- convolution --------------------------------------------------------------------------- */

/* Column matrix of `nb` samples for group channels [c0, c0+cg): row (c, ki, kj), column
 * (sample j, output pixel); ld = nb * OH * OW. */
static void im2col(const hs_layer *l, const float *x, int nb, int c0, int cg, float *col) {
  int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
  int k = l->kernel, s = l->stride, p = l->pad;
  int64_t ohw = (int64_t)OH * OW, ld = ohw * nb;
  int64_t plane = (int64_t)H * W, sample = (int64_t)l->in_c * plane;
  for (int j = 0; j < nb; j++) {
    for (int c = 0; c < cg; c++) {
      const float *xc = x + j * sample + (int64_t)(c0 + c) * plane;
      for (int ki = 0; ki < k; ki++) {
        for (int kj = 0; kj < k; kj++) {
          float *row = col + ((int64_t)(c * k + ki) * k + kj) * ld + j * ohw;
          /* output columns whose input column is inside the image: [lo, hi) */
          int lo = p - kj > 0 ? (p - kj + s - 1) / s : 0;
          int hi = (W - 1 + p - kj) / s + 1;
          if (W - 1 + p - kj < 0) hi = 0;
          if (hi > OW) hi = OW;
          if (lo > hi) lo = hi;
          for (int oh = 0; oh < OH; oh++) {
            float *r = row + (int64_t)oh * OW;
            int ih = oh * s - p + ki;
            if (ih < 0 || ih >= H) {
              memset(r, 0, (size_t)OW * sizeof(float));
              continue;
            }
            const float *xr = xc + (int64_t)ih * W;
            int shift = kj - p; /* input column of output column ow: ow * s + shift */
            for (int ow = 0; ow < lo; ow++) r[ow] = 0.0f;
            if (s == 1) {
              /* rows are short (tens of pixels): a loop the compiler vectorises beats memcpy
               * (this file is built with -fvect-cost-model=dynamic: see CMakeLists.txt) */
              for (int ow = lo; ow < hi; ow++) r[ow] = xr[ow + shift];
            } else {
              for (int ow = lo; ow < hi; ow++) r[ow] = xr[ow * s + shift];
            }
            for (int ow = hi; ow < OW; ow++) r[ow] = 0.0f;
          }
        }
      }
    }
  }
}

/* Adds the column matrix back into the input-shaped gradient (the transpose of im2col). */
static void col2im(const hs_layer *l, const float *col, int nb, int c0, int cg, float *dx) {
  int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
  int k = l->kernel, s = l->stride, p = l->pad;
  int64_t ohw = (int64_t)OH * OW, ld = ohw * nb;
  int64_t plane = (int64_t)H * W, sample = (int64_t)l->in_c * plane;
  for (int j = 0; j < nb; j++) {
    for (int c = 0; c < cg; c++) {
      float *xc = dx + j * sample + (int64_t)(c0 + c) * plane;
      for (int ki = 0; ki < k; ki++) {
        for (int kj = 0; kj < k; kj++) {
          const float *row = col + ((int64_t)(c * k + ki) * k + kj) * ld + j * ohw;
          int lo = p - kj > 0 ? (p - kj + s - 1) / s : 0;
          int hi = (W - 1 + p - kj) / s + 1;
          if (W - 1 + p - kj < 0) hi = 0;
          if (hi > OW) hi = OW;
          for (int oh = 0; oh < OH; oh++) {
            int ih = oh * s - p + ki;
            if (ih < 0 || ih >= H) continue;
            const float *r = row + (int64_t)oh * OW;
            float *xr = xc + (int64_t)ih * W;
            int shift = kj - p;
            if (s == 1) {
              for (int ow = lo; ow < hi; ow++) xr[ow + shift] += r[ow];
            } else {
              for (int ow = lo; ow < hi; ow++) xr[ow * s + shift] += r[ow];
            }
          }
        }
      }
    }
  }
}

static void conv_forward_direct(const hs_layer *l, const float *x, const float *w, float *y,
                                int batch) {
  int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
  int k = l->kernel, s = l->stride, p = l->pad;
  int per_group = l->out_c / l->groups; /* output channels per input channel */
  for (int b = 0; b < batch; b++) {
    for (int oc = 0; oc < l->out_c; oc++) {
      const float *xc = x + ((int64_t)b * l->in_c + oc / per_group) * H * W;
      const float *wk = w + (int64_t)oc * k * k;
      float *yc = y + ((int64_t)b * l->out_c + oc) * OH * OW;
      for (int oh = 0; oh < OH; oh++) {
        for (int ow = 0; ow < OW; ow++) {
          float acc = 0.0f;
          for (int ki = 0; ki < k; ki++) {
            int ih = oh * s - p + ki;
            if (ih < 0 || ih >= H) continue;
            for (int kj = 0; kj < k; kj++) {
              int iw = ow * s - p + kj;
              if (iw < 0 || iw >= W) continue;
              acc += wk[ki * k + kj] * xc[ih * W + iw];
            }
          }
          yc[oh * OW + ow] = acc;
        }
      }
    }
  }
}

/* dW (written) and, when dx is not NULL, dx (added) of a depthwise conv. */
static void conv_backward_direct(const hs_layer *l, const float *x, const float *w,
                                 const float *dy, float *dw, float *dx, int batch) {
  int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
  int k = l->kernel, s = l->stride, p = l->pad;
  int per_group = l->out_c / l->groups;
  memset(dw, 0, (size_t)l->out_c * k * k * sizeof(float));
  for (int b = 0; b < batch; b++) {
    for (int oc = 0; oc < l->out_c; oc++) {
      int64_t xo = ((int64_t)b * l->in_c + oc / per_group) * H * W;
      const float *xc = x + xo;
      float *dxc = dx ? dx + xo : NULL;
      const float *wk = w + (int64_t)oc * k * k;
      float *dwk = dw + (int64_t)oc * k * k;
      const float *dyc = dy + ((int64_t)b * l->out_c + oc) * OH * OW;
      for (int oh = 0; oh < OH; oh++) {
        for (int ow = 0; ow < OW; ow++) {
          float g = dyc[oh * OW + ow];
          for (int ki = 0; ki < k; ki++) {
            int ih = oh * s - p + ki;
            if (ih < 0 || ih >= H) continue;
            for (int kj = 0; kj < k; kj++) {
              int iw = ow * s - p + kj;
              if (iw < 0 || iw >= W) continue;
              dwk[ki * k + kj] += g * xc[ih * W + iw];
              if (dxc) dxc[ih * W + iw] += g * wk[ki * k + kj];
            }
          }
        }
      }
    }
  }
}

static void conv_forward(cpu_net *c, cpu_layer *cl, const float *w, const float *bias,
                         int batch) {
  const hs_layer *l = cl->l;
  const float *x = c->layers[l->in[0]].out;
  float *y = cl->out;
  int64_t ohw = (int64_t)l->out_h * l->out_w;
  if (cl->direct) {
    conv_forward_direct(l, x, w, y, batch);
  } else {
    int G = l->groups, cg = l->in_c / G, ocg = l->out_c / G;
    int K = cg * l->kernel * l->kernel;
    for (int b0 = 0; b0 < batch; b0 += cl->chunk) {
      int nb = batch - b0 < cl->chunk ? batch - b0 : cl->chunk;
      const float *xb = x + (int64_t)b0 * cl->in_elems;
      for (int g = 0; g < G; g++) {
        const float *col = c->col;
        if (cl->unit && nb == 1) {
          col = xb + (int64_t)g * cg * ohw;
        } else {
          im2col(l, xb, nb, g * cg, cg, c->col);
        }
        const float *wg = w + (int64_t)g * ocg * K;
        if (nb == 1) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ocg, (int)ohw, K, 1.0f, wg, K,
                      col, (int)ohw, 0.0f, y + (int64_t)b0 * cl->out_elems + g * ocg * ohw,
                      (int)ohw);
          continue;
        }
        int n = (int)(nb * ohw);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ocg, n, K, 1.0f, wg, K, col, n,
                    0.0f, c->tmp, n);
        for (int j = 0; j < nb; j++)
          for (int oc = 0; oc < ocg; oc++)
            memcpy(y + (int64_t)(b0 + j) * cl->out_elems + (int64_t)(g * ocg + oc) * ohw,
                   c->tmp + (int64_t)oc * n + j * ohw, (size_t)ohw * sizeof(float));
      }
    }
  }
  if (bias) {
    for (int b = 0; b < batch; b++)
      for (int oc = 0; oc < l->out_c; oc++) {
        float *yc = y + ((int64_t)b * l->out_c + oc) * ohw;
        float bv = bias[oc];
        for (int64_t i = 0; i < ohw; i++) yc[i] += bv;
      }
  }
}

static void conv_backward(cpu_net *c, cpu_layer *cl, const float *w, float *dw, float *db,
                          int batch) {
  const hs_layer *l = cl->l;
  const cpu_layer *src = &c->layers[l->in[0]];
  const float *x = src->out, *dy = cl->dout;
  float *dx = src->need ? src->dout : NULL;
  int overwrite = cl->overwrite[0];
  int64_t ohw = (int64_t)l->out_h * l->out_w;
  if (db) {
    memset(db, 0, (size_t)l->out_c * sizeof(float));
    for (int b = 0; b < batch; b++)
      for (int oc = 0; oc < l->out_c; oc++) {
        const float *g = dy + ((int64_t)b * l->out_c + oc) * ohw;
        float s = 0.0f;
        for (int64_t i = 0; i < ohw; i++) s += g[i];
        db[oc] += s;
      }
  }
  if (cl->direct) {
    if (dx && overwrite) memset(dx, 0, (size_t)(cl->in_elems * batch) * sizeof(float));
    conv_backward_direct(l, x, w, dy, dw, dx, batch);
    return;
  }
  int G = l->groups, cg = l->in_c / G, ocg = l->out_c / G;
  int K = cg * l->kernel * l->kernel;
  for (int b0 = 0; b0 < batch; b0 += cl->chunk) {
    int nb = batch - b0 < cl->chunk ? batch - b0 : cl->chunk;
    int n = (int)(nb * ohw);
    const float *xb = x + (int64_t)b0 * cl->in_elems;
    float *dxb = dx ? dx + (int64_t)b0 * cl->in_elems : NULL;
    int direct_dx = cl->unit && nb == 1; /* dx of the group is a plain product */
    if (dxb && overwrite && !direct_dx)
      memset(dxb, 0, (size_t)(cl->in_elems * nb) * sizeof(float));
    for (int g = 0; g < G; g++) {
      const float *wg = w + (int64_t)g * ocg * K;
      float *dwg = dw + (int64_t)g * ocg * K;
      /* the output gradient of this chunk and group as [ocg, nb * ohw] */
      const float *dyg;
      if (nb == 1) {
        dyg = dy + (int64_t)b0 * cl->out_elems + g * ocg * ohw;
      } else {
        for (int j = 0; j < nb; j++)
          for (int oc = 0; oc < ocg; oc++)
            memcpy(c->tmp + (int64_t)oc * n + j * ohw,
                   dy + (int64_t)(b0 + j) * cl->out_elems + (int64_t)(g * ocg + oc) * ohw,
                   (size_t)ohw * sizeof(float));
        dyg = c->tmp;
      }
      const float *col = c->col;
      if (cl->unit && nb == 1) {
        col = xb + (int64_t)g * cg * ohw;
      } else {
        im2col(l, xb, nb, g * cg, cg, c->col);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ocg, K, n, 1.0f, dyg, n, col, n,
                  b0 == 0 ? 0.0f : 1.0f, dwg, K);
      if (!dxb) continue;
      if (direct_dx) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, n, ocg, 1.0f, wg, K, dyg, n,
                    overwrite ? 0.0f : 1.0f, dxb + (int64_t)g * cg * ohw, n);
      } else {
        /* the column buffer is free again once dW has it: reuse it for the column gradient */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, n, ocg, 1.0f, wg, K, dyg, n,
                    0.0f, c->col, n);
        col2im(l, c->col, nb, g * cg, cg, dxb);
      }
    }
  }
}

/* --- linear -------------------------------------------------------------------------------- */

/* C [M x N] = op(A) op(B) + beta C, every matrix row-major with a tight leading dimension: A is
 * stored [M x K], or [K x M] when ta; B is stored [K x N], or [N x K] when tb. */
static void gemm(int ta, int tb, int M, int N, int K, const float *A, const float *B, float beta,
                 float *C) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
              N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, beta, C, N);
}

/* Y = X W^T + b with X and Y each batch- or feature-major (see the header). */
static void linear_forward(cpu_net *c, cpu_layer *cl, const float *w, const float *bias,
                           int batch) {
  const hs_layer *l = cl->l;
  const cpu_layer *src = &c->layers[l->in[0]];
  int in = l->in_c, out = l->out_c;
  float *y = cl->out;
  if (bias) {
    if (cl->fm) {
      for (int o = 0; o < out; o++) {
        float *row = y + (int64_t)o * batch, bv = bias[o];
        for (int b = 0; b < batch; b++) row[b] = bv;
      }
    } else {
      for (int b = 0; b < batch; b++) memcpy(y + (int64_t)b * out, bias, (size_t)out * sizeof(float));
    }
  }
  float beta = bias ? 1.0f : 0.0f;
  if (cl->fm) {
    gemm(0, !src->fm, out, batch, in, w, src->out, beta, y); /* Y^T = W X^T */
  } else {
    gemm(src->fm, 1, batch, out, in, src->out, w, beta, y); /* Y = X W^T */
  }
}

static void linear_backward(cpu_net *c, cpu_layer *cl, const float *w, float *dw, float *db,
                            int batch) {
  const hs_layer *l = cl->l;
  const cpu_layer *src = &c->layers[l->in[0]];
  int in = l->in_c, out = l->out_c;
  const float *dy = cl->dout;
  gemm(!cl->fm, src->fm, out, in, batch, dy, src->out, 0.0f, dw); /* dW = dY^T X */
  if (db) {
    if (cl->fm) {
      /* row sums, each in batch order as the batch-major case adds them */
      for (int o = 0; o < out; o++) {
        const float *row = dy + (int64_t)o * batch;
        float s = 0.0f;
        for (int b = 0; b < batch; b++) s += row[b];
        db[o] = s;
      }
    } else {
      memset(db, 0, (size_t)out * sizeof(float));
      for (int b = 0; b < batch; b++) {
        const float *g = dy + (int64_t)b * out;
        for (int o = 0; o < out; o++) db[o] += g[o];
      }
    }
  }
  if (!src->need) return;
  float beta = cl->overwrite[0] ? 0.0f : 1.0f;
  if (src->fm) {
    gemm(1, !cl->fm, in, batch, out, w, dy, beta, src->dout); /* dX^T = W^T dY^T */
  } else {
    gemm(cl->fm, 0, batch, in, out, dy, w, beta, src->dout); /* dX = dY W */
  }
}

/* --- batchnorm ----------------------------------------------------------------------------- */

static void bn_forward(hs_net *n, cpu_layer *cl, const float *gamma, const float *beta,
                       int batch, int train) {
  cpu_net *c = impl(n);
  const hs_layer *l = cl->l;
  const float *x = c->layers[l->in[0]].out;
  float *y = cl->out;
  int C = l->in_c;
  int64_t hw = (int64_t)l->in_h * l->in_w, m = hw * batch; /* m >= 2 in training (cpu_forward) */
  for (int ch = 0; ch < C; ch++) {
    float mean, rstd;
    if (train) {
      double s = 0.0, s2 = 0.0;
      for (int b = 0; b < batch; b++) {
        const float *xc = x + ((int64_t)b * C + ch) * hw;
        for (int64_t i = 0; i < hw; i++) s += xc[i];
      }
      double mu = s / (double)m;
      for (int b = 0; b < batch; b++) {
        const float *xc = x + ((int64_t)b * C + ch) * hw;
        for (int64_t i = 0; i < hw; i++) {
          double t = xc[i] - mu;
          s2 += t * t;
        }
      }
      double var = s2 / (double)m; /* biased, to normalise */
      mean = (float)mu;
      rstd = (float)(1.0 / sqrt(var + l->eps));
      cl->mean[ch] = mean;
      cl->rstd[ch] = rstd;
      /* running statistics keep the unbiased variance, as PyTorch does */
      double mom = l->momentum;
      cl->run_mean[ch] = (float)((1.0 - mom) * cl->run_mean[ch] + mom * mu);
      cl->run_var[ch] =
          (float)((1.0 - mom) * cl->run_var[ch] + mom * var * (double)m / (double)(m - 1));
    } else {
      mean = cl->run_mean[ch];
      rstd = (float)(1.0 / sqrt((double)cl->run_var[ch] + l->eps));
    }
    float a = gamma[ch] * rstd, bsh = beta[ch] - mean * a;
    for (int b = 0; b < batch; b++) {
      const float *xc = x + ((int64_t)b * C + ch) * hw;
      float *yc = y + ((int64_t)b * C + ch) * hw;
      for (int64_t i = 0; i < hw; i++) yc[i] = xc[i] * a + bsh;
    }
  }
}

static void bn_backward(cpu_net *c, cpu_layer *cl, const float *gamma, float *dgamma,
                        float *dbeta, int batch) {
  const hs_layer *l = cl->l;
  const cpu_layer *src = &c->layers[l->in[0]];
  const float *x = src->out, *dy = cl->dout;
  float *dx = src->need ? src->dout : NULL;
  int overwrite = cl->overwrite[0];
  int C = l->in_c;
  int64_t hw = (int64_t)l->in_h * l->in_w, m = hw * batch;
  for (int ch = 0; ch < C; ch++) {
    float mean = cl->mean[ch], rstd = cl->rstd[ch];
    double sdy = 0.0, sdyx = 0.0;
    for (int b = 0; b < batch; b++) {
      const float *xc = x + ((int64_t)b * C + ch) * hw;
      const float *gc = dy + ((int64_t)b * C + ch) * hw;
      for (int64_t i = 0; i < hw; i++) {
        sdy += gc[i];
        sdyx += gc[i] * ((xc[i] - mean) * rstd);
      }
    }
    dgamma[ch] = (float)sdyx;
    dbeta[ch] = (float)sdy;
    if (!dx) continue;
    /* dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)) */
    float k = gamma[ch] * rstd;
    float mdy = (float)(sdy / (double)m), mdyx = (float)(sdyx / (double)m);
    for (int b = 0; b < batch; b++) {
      const float *xc = x + ((int64_t)b * C + ch) * hw;
      const float *gc = dy + ((int64_t)b * C + ch) * hw;
      float *dc = dx + ((int64_t)b * C + ch) * hw;
      for (int64_t i = 0; i < hw; i++) {
        float v = k * (gc[i] - mdy - (xc[i] - mean) * rstd * mdyx);
        dc[i] = overwrite ? v : dc[i] + v;
      }
    }
  }
}

/* --- pooling ------------------------------------------------------------------------------- */

static void maxpool_forward(cpu_net *c, cpu_layer *cl, int batch) {
  const hs_layer *l = cl->l;
  const float *x = c->layers[l->in[0]].out;
  int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
  int k = l->kernel, s = l->stride, p = l->pad;
  int64_t planes = (int64_t)batch * l->in_c;
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * H * W;
    float *yp = cl->out + pl * OH * OW;
    int32_t *ap = cl->arg + pl * OH * OW;
    for (int oh = 0; oh < OH; oh++) {
      int h0 = oh * s - p, h1 = h0 + k;
      if (h0 < 0) h0 = 0;
      if (h1 > H) h1 = H;
      for (int ow = 0; ow < OW; ow++) {
        int w0 = ow * s - p, w1 = w0 + k;
        if (w0 < 0) w0 = 0;
        if (w1 > W) w1 = W;
        /* padding is -inf: the window's maximum is over its pixels inside the image; the
         * first maximum in scan order wins, as in PyTorch */
        int best = h0 * W + w0;
        float bv = xp[best];
        for (int ih = h0; ih < h1; ih++)
          for (int iw = w0; iw < w1; iw++) {
            float v = xp[ih * W + iw];
            if (v > bv || isnan(v)) { /* PyTorch's rule: the last NaN of a window wins */
              bv = v;
              best = ih * W + iw;
            }
          }
        yp[oh * OW + ow] = bv;
        ap[oh * OW + ow] = best;
      }
    }
  }
}

static void maxpool_backward(cpu_net *c, cpu_layer *cl, int batch) {
  const hs_layer *l = cl->l;
  float *dx = c->layers[l->in[0]].dout;
  int64_t in_plane = (int64_t)l->in_h * l->in_w, out_plane = (int64_t)l->out_h * l->out_w;
  int64_t planes = (int64_t)batch * l->in_c;
  if (cl->overwrite[0]) memset(dx, 0, (size_t)(planes * in_plane) * sizeof(float));
  for (int64_t pl = 0; pl < planes; pl++) {
    float *dxp = dx + pl * in_plane;
    const float *dyp = cl->dout + pl * out_plane;
    const int32_t *ap = cl->arg + pl * out_plane;
    for (int64_t i = 0; i < out_plane; i++) dxp[ap[i]] += dyp[i];
  }
}

/* Average pooling; padding counts in the divisor (count_include_pad), so it is always k*k. */
static void avgpool_forward(cpu_net *c, cpu_layer *cl, int batch) {
  const hs_layer *l = cl->l;
  const float *x = c->layers[l->in[0]].out;
  int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
  int k = l->kernel, s = l->stride, p = l->pad;
  float inv = 1.0f / (float)(k * k);
  int64_t planes = (int64_t)batch * l->in_c;
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * H * W;
    float *yp = cl->out + pl * OH * OW;
    for (int oh = 0; oh < OH; oh++) {
      int h0 = oh * s - p, h1 = h0 + k;
      if (h0 < 0) h0 = 0;
      if (h1 > H) h1 = H;
      for (int ow = 0; ow < OW; ow++) {
        int w0 = ow * s - p, w1 = w0 + k;
        if (w0 < 0) w0 = 0;
        if (w1 > W) w1 = W;
        float acc = 0.0f;
        for (int ih = h0; ih < h1; ih++)
          for (int iw = w0; iw < w1; iw++) acc += xp[ih * W + iw];
        yp[oh * OW + ow] = acc * inv;
      }
    }
  }
}

static void avgpool_backward(cpu_net *c, cpu_layer *cl, int batch) {
  const hs_layer *l = cl->l;
  float *dx = c->layers[l->in[0]].dout;
  int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
  int k = l->kernel, s = l->stride, p = l->pad;
  float inv = 1.0f / (float)(k * k);
  int64_t planes = (int64_t)batch * l->in_c;
  if (cl->overwrite[0]) memset(dx, 0, (size_t)(planes * H * W) * sizeof(float));
  for (int64_t pl = 0; pl < planes; pl++) {
    float *dxp = dx + pl * H * W;
    const float *dyp = cl->dout + pl * OH * OW;
    for (int oh = 0; oh < OH; oh++) {
      int h0 = oh * s - p, h1 = h0 + k;
      if (h0 < 0) h0 = 0;
      if (h1 > H) h1 = H;
      for (int ow = 0; ow < OW; ow++) {
        int w0 = ow * s - p, w1 = w0 + k;
        if (w0 < 0) w0 = 0;
        if (w1 > W) w1 = W;
        float g = dyp[oh * OW + ow] * inv;
        for (int ih = h0; ih < h1; ih++)
          for (int iw = w0; iw < w1; iw++) dxp[ih * W + iw] += g;
      }
    }
  }
}

static void gap_forward(cpu_net *c, cpu_layer *cl, int batch) {
  const hs_layer *l = cl->l;
  const float *x = c->layers[l->in[0]].out;
  int64_t hw = (int64_t)l->in_h * l->in_w, planes = (int64_t)batch * l->in_c;
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * hw;
    float acc = 0.0f;
    for (int64_t i = 0; i < hw; i++) acc += xp[i];
    cl->out[pl] = acc / (float)hw;
  }
}

static void gap_backward(cpu_net *c, cpu_layer *cl, int batch) {
  const hs_layer *l = cl->l;
  float *dx = c->layers[l->in[0]].dout;
  int64_t hw = (int64_t)l->in_h * l->in_w, planes = (int64_t)batch * l->in_c;
  int overwrite = cl->overwrite[0];
  for (int64_t pl = 0; pl < planes; pl++) {
    float g = cl->dout[pl] / (float)hw;
    float *dxp = dx + pl * hw;
    if (overwrite) {
      for (int64_t i = 0; i < hw; i++) dxp[i] = g;
    } else {
      for (int64_t i = 0; i < hw; i++) dxp[i] += g;
    }
  }
}

/* --- element-wise -------------------------------------------------------------------------- */

/* GCC's -O2 vectorises a loop only when its trip count is a known multiple of the vector width
 * (the very-cheap cost model), so the loops over whole activations run in blocks of ACT_BLOCK
 * elements and finish the rest one by one. */
#define ACT_BLOCK 16

static float clamp_act(float v, float hi) {
  v = v > 0.0f ? v : 0.0f;
  return v < hi ? v : hi;
}

/* The gradient passes where the output lies strictly inside (0, hi): PyTorch's threshold and
 * hardtanh backward. */
static float pass_act(float y, float dy, float hi) {
  return (y > 0.0f) & (y < hi) ? dy : 0.0f; /* no short circuit: a branch keeps GCC from vectorising */
}

/* The kernels take restrict parameters: GCC does not vectorise the same loops over restrict
 * locals. */
static void clamp_inplace(float *y, int64_t n, float hi) {
  int64_t i = 0;
  for (; i + ACT_BLOCK <= n; i += ACT_BLOCK)
    for (int k = 0; k < ACT_BLOCK; k++) y[i + k] = clamp_act(y[i + k], hi);
  for (; i < n; i++) y[i] = clamp_act(y[i], hi);
}

static void clamp_copy(float *restrict y, const float *restrict x, int64_t n, float hi) {
  int64_t i = 0;
  for (; i + ACT_BLOCK <= n; i += ACT_BLOCK)
    for (int k = 0; k < ACT_BLOCK; k++) y[i + k] = clamp_act(x[i + k], hi);
  for (; i < n; i++) y[i] = clamp_act(x[i], hi);
}

static void mask_inplace(float *restrict g, const float *restrict y, int64_t n, float hi) {
  int64_t i = 0;
  for (; i + ACT_BLOCK <= n; i += ACT_BLOCK)
    for (int k = 0; k < ACT_BLOCK; k++) g[i + k] = pass_act(y[i + k], g[i + k], hi);
  for (; i < n; i++) g[i] = pass_act(y[i], g[i], hi);
}

static void mask_write(float *restrict dx, const float *restrict y, const float *restrict dy,
                       int64_t n, float hi) {
  int64_t i = 0;
  for (; i + ACT_BLOCK <= n; i += ACT_BLOCK)
    for (int k = 0; k < ACT_BLOCK; k++) dx[i + k] = pass_act(y[i + k], dy[i + k], hi);
  for (; i < n; i++) dx[i] = pass_act(y[i], dy[i], hi);
}

static void mask_add(float *restrict dx, const float *restrict y, const float *restrict dy,
                     int64_t n, float hi) {
  int64_t i = 0;
  for (; i + ACT_BLOCK <= n; i += ACT_BLOCK)
    for (int k = 0; k < ACT_BLOCK; k++) dx[i + k] += pass_act(y[i + k], dy[i + k], hi);
  for (; i < n; i++) dx[i] += pass_act(y[i], dy[i], hi);
}

static void act_forward(cpu_net *c, cpu_layer *cl, int batch, float hi) {
  int64_t n = cl->out_elems * batch;
  if (cl->inplace) clamp_inplace(cl->out, n, hi);
  else clamp_copy(cl->out, c->layers[cl->l->in[0]].out, n, hi);
}

static void act_backward(cpu_net *c, cpu_layer *cl, int batch, float hi) {
  int64_t n = cl->out_elems * batch;
  float *dx = c->layers[cl->l->in[0]].dout;
  if (cl->inplace) mask_inplace(cl->dout, cl->out, n, hi); /* cl->dout is dx */
  else if (cl->overwrite[0]) mask_write(dx, cl->out, cl->dout, n, hi);
  else mask_add(dx, cl->out, cl->dout, n, hi);
}

static void add_forward(cpu_net *c, cpu_layer *cl, int batch) {
  const float *a = c->layers[cl->l->in[0]].out, *b = c->layers[cl->l->in[1]].out;
  int64_t n = cl->out_elems * batch;
  for (int64_t i = 0; i < n; i++) cl->out[i] = a[i] + b[i];
}

static void add_backward(cpu_net *c, cpu_layer *cl, int batch) {
  int64_t n = cl->out_elems * batch;
  for (int k = 0; k < 2; k++) {
    const cpu_layer *src = &c->layers[cl->l->in[k]];
    if (!src->need) continue;
    if (cl->overwrite[k]) {
      memcpy(src->dout, cl->dout, (size_t)n * sizeof(float));
    } else {
      for (int64_t i = 0; i < n; i++) src->dout[i] += cl->dout[i];
    }
  }
}

/* flatten with its own gradient buffer (its input has other readers too) */
static void flatten_backward(cpu_net *c, cpu_layer *cl, int batch) {
  if (cl->alias_dout) return;
  float *dx = c->layers[cl->l->in[0]].dout;
  int64_t n = cl->out_elems * batch;
  if (cl->overwrite[0]) {
    memcpy(dx, cl->dout, (size_t)n * sizeof(float));
  } else {
    for (int64_t i = 0; i < n; i++) dx[i] += cl->dout[i];
  }
}

/* --- loss ---------------------------------------------------------------------------------- */

/* Softmax cross-entropy of the last layer's output. A training pass also writes the gradient
 * of the mean loss with respect to the logits, (softmax - one-hot) / batch, into the last
 * layer's output gradient, so that backward starts from it. */
static void loss_forward(hs_net *n, int train) {
  cpu_net *c = impl(n);
  cpu_layer *last = &c->layers[c->count - 1];
  const float *z = last->out;
  float *g = train ? last->dout : NULL;
  int K = n->classes;
  float inv_batch = 1.0f / (float)c->batch;
  double total = 0.0;
  int correct = 0;
  for (int b = 0; b < c->batch; b++) {
    const float *zb = z + (int64_t)b * K;
    int arg = 0;
    for (int k = 1; k < K; k++)
      if (zb[k] > zb[arg]) arg = k;
    float mx = zb[arg];
    double s = 0.0;
    int y = c->labels[b];
    if (g) {
      float *gb = g + (int64_t)b * K;
      for (int k = 0; k < K; k++) {
        gb[k] = expf(zb[k] - mx);
        s += gb[k];
      }
      float inv = (float)(1.0 / s);
      for (int k = 0; k < K; k++) gb[k] = gb[k] * inv * inv_batch;
      gb[y] -= inv_batch;
    } else {
      for (int k = 0; k < K; k++) s += expf(zb[k] - mx);
    }
    total += log(s) - (double)(zb[y] - mx);
    correct += arg == y;
  }
  c->loss = total / c->batch;
  c->correct = correct;
}

/* --- table callbacks ----------------------------------------------------------------------- */

static const float *param_ptr(hs_net *n, int i) {
  return n->param_off[i] >= 0 ? n->params + n->param_off[i] : NULL;
}

static int cpu_forward(hs_net *n, int train, hs_diag *d) {
  cpu_net *c = impl(n);
  if (c->batch == 0)
    return hs_diag_set(d, HS_EINVAL, "%s: forward: no batch loaded (call hs_net_load first)",
                       n->model);
  int batch = c->batch;
  int rc = train ? hs_net_check_train_batch(n, batch, d) : 0;
  if (rc) return rc;
  c->fwd = 0;
  for (int i = 1; i < c->count; i++) {
    cpu_layer *cl = &c->layers[i];
    const hs_layer *l = cl->l;
    const float *p = param_ptr(n, i);
    switch (l->kind) {
    case HS_LAYER_CONV2D: {
      int64_t nw = (int64_t)l->out_c * (l->in_c / l->groups) * l->kernel * l->kernel;
      conv_forward(c, cl, p, l->bias ? p + nw : NULL, batch);
      break;
    }
    case HS_LAYER_LINEAR:
      linear_forward(c, cl, p, l->bias ? p + (int64_t)l->in_c * l->out_c : NULL, batch);
      break;
    case HS_LAYER_BATCHNORM2D: bn_forward(n, cl, p, p + l->in_c, batch, train); break;
    case HS_LAYER_RELU: act_forward(c, cl, batch, INFINITY); break;
    case HS_LAYER_RELU6: act_forward(c, cl, batch, 6.0f); break;
    case HS_LAYER_MAXPOOL2D: maxpool_forward(c, cl, batch); break;
    case HS_LAYER_AVGPOOL2D: avgpool_forward(c, cl, batch); break;
    case HS_LAYER_GLOBAL_AVGPOOL: gap_forward(c, cl, batch); break;
    case HS_LAYER_ADD: add_forward(c, cl, batch); break;
    case HS_LAYER_FLATTEN: break; /* a view */
    case HS_LAYER_INPUT:
    case HS_LAYER_KIND_COUNT:
    default:
      return hs_diag_set(d, HS_EINVAL, "%s: layer %d: unexpected kind %s", n->model, i,
                         hs_layer_kind_name(l->kind));
    }
  }
  loss_forward(n, train);
  c->fwd = train ? 2 : 1;
  return 0;
}

/* Backward from the logits' gradient that the training forward pass left, writing the
 * parameters' gradients into grads (n_params floats). */
static int backward_to(hs_net *n, float *grads, hs_diag *d) {
  cpu_net *c = impl(n);
  if (c->fwd != 2)
    return hs_diag_set(d, HS_EINVAL, "%s: backward: needs a training forward pass "
                       "(hs_net_forward(n, 1, ...)) of the loaded batch first", n->model);
  int batch = c->batch;
  for (int i = c->count - 1; i >= 1; i--) {
    cpu_layer *cl = &c->layers[i];
    const hs_layer *l = cl->l;
    if (!cl->need) continue;
    if (cl->consumers == 0 && i != c->count - 1) /* a dead end: no gradient reaches it */
      memset(cl->dout, 0, (size_t)(cl->out_elems * batch) * sizeof(float));
    const float *p = param_ptr(n, i);
    float *g = n->param_off[i] >= 0 ? grads + n->param_off[i] : NULL;
    int src_need = c->layers[l->in[0]].need;
    switch (l->kind) {
    case HS_LAYER_CONV2D: {
      int64_t nw = (int64_t)l->out_c * (l->in_c / l->groups) * l->kernel * l->kernel;
      conv_backward(c, cl, p, g, l->bias ? g + nw : NULL, batch);
      break;
    }
    case HS_LAYER_LINEAR:
      linear_backward(c, cl, p, g, l->bias ? g + (int64_t)l->in_c * l->out_c : NULL, batch);
      break;
    case HS_LAYER_BATCHNORM2D: bn_backward(c, cl, p, g, g + l->in_c, batch); break;
    case HS_LAYER_RELU:
      if (src_need) act_backward(c, cl, batch, INFINITY);
      break;
    case HS_LAYER_RELU6:
      if (src_need) act_backward(c, cl, batch, 6.0f);
      break;
    case HS_LAYER_MAXPOOL2D:
      if (src_need) maxpool_backward(c, cl, batch);
      break;
    case HS_LAYER_AVGPOOL2D:
      if (src_need) avgpool_backward(c, cl, batch);
      break;
    case HS_LAYER_GLOBAL_AVGPOOL:
      if (src_need) gap_backward(c, cl, batch);
      break;
    case HS_LAYER_ADD: add_backward(c, cl, batch); break;
    case HS_LAYER_FLATTEN:
      if (src_need) flatten_backward(c, cl, batch);
      break;
    case HS_LAYER_INPUT:
    case HS_LAYER_KIND_COUNT:
    default:
      return hs_diag_set(d, HS_EINVAL, "%s: layer %d: unexpected kind %s", n->model, i,
                         hs_layer_kind_name(l->kind));
    }
  }
  return 0;
}

static int cpu_backward(hs_net *n, hs_diag *d) { return backward_to(n, n->grads, d); }

static int cpu_backward_into(hs_net *n, float *host, hs_diag *d) {
  return backward_to(n, host, d);
}

static int cpu_update(hs_net *n, const hs_sgd *o, hs_diag *d) {
  cpu_net *c = impl(n);
  float lr = (float)o->lr, mom = (float)o->momentum, wd = (float)o->weight_decay;
  float *restrict w = n->params, *restrict v = c->momentum;
  const float *restrict g = n->grads;
  int64_t np = n->n_params;
  /* torch.optim.SGD, dampening 0, not Nesterov: g += wd * w; v = mom * v + g; w -= lr * v */
  for (int64_t i = 0; i < np; i++) {
    float gi = g[i] + wd * w[i];
    float vi = mom * v[i] + gi;
    v[i] = vi;
    w[i] -= lr * vi;
  }
  return 0;
}

static int cpu_result(hs_net *n, double *loss, int *correct, hs_diag *d) {
  cpu_net *c = impl(n);
  if (c->fwd == 0)
    return hs_diag_set(d, HS_EINVAL, "%s: result: no forward pass since the last load",
                       n->model);
  *loss = c->loss;
  *correct = c->correct;
  return 0;
}

static int cpu_copy(hs_net *n, hs_net_vec which, int to_host, float *host, hs_diag *d) {
  float *v = which == HS_NET_PARAMS ? n->params : n->grads;
  size_t bytes = (size_t)n->n_params * sizeof(float);
  if (to_host) {
    memcpy(host, v, bytes);
  } else {
    memcpy(v, host, bytes);
  }
  return 0;
}

static int cpu_zero_momentum(hs_net *n, hs_diag *d) {
  memset(impl(n)->momentum, 0, (size_t)n->n_params * sizeof(float));
  return 0;
}

static int cpu_mark(hs_net *n, int slot, hs_diag *d) {
  cpu_net *c = impl(n);
  if (clock_gettime(CLOCK_MONOTONIC, &c->marks[slot]) != 0)
    return hs_diag_set(d, HS_ERUNTIME, "%s: mark: clock_gettime: %s", n->model, strerror(errno));
  c->marked[slot] = 1;
  return 0;
}

static int cpu_elapsed(hs_net *n, int from, int to, double *seconds, hs_diag *d) {
  cpu_net *c = impl(n);
  if (!c->marked[from] || !c->marked[to])
    return hs_diag_set(d, HS_EINVAL, "%s: elapsed: mark %d was never recorded", n->model,
                       c->marked[from] ? to : from);
  *seconds = (double)(c->marks[to].tv_sec - c->marks[from].tv_sec) +
             1e-9 * (double)(c->marks[to].tv_nsec - c->marks[from].tv_nsec);
  return 0;
}

static int cpu_sync(hs_net *n, hs_diag *d) { return 0; }

static int64_t cpu_bytes(const hs_net *n) {
  const cpu_net *c = (const cpu_net *)n->impl;
  return c->fixed_bytes + c->arena_floats * (int64_t)sizeof(float);
}

int hs_net_cpu_set_limit(hs_net *n, int64_t bytes, hs_diag *d) {
  if (n->be != &hs_net_backend_cpu)
    return hs_diag_set(d, HS_EINVAL, "%s: memory limit: only the cpu backend has one, this net "
                       "is on %s", n->model, n->device);
  if (bytes < 0)
    return hs_diag_set(d, HS_EINVAL, "%s: memory limit: expected bytes >= 0, got %lld",
                       n->model, (long long)bytes);
  impl(n)->limit = bytes;
  return 0;
}

const struct hs_net_backend hs_net_backend_cpu = {
  .version = HS_NET_BACKEND_VERSION,
  .name = "cpu",
  .open = cpu_open,
  .close = cpu_close,
  .load = cpu_load,
  .forward = cpu_forward,
  .backward = cpu_backward,
  .update = cpu_update,
  .result = cpu_result,
  .copy = cpu_copy,
  .zero_momentum = cpu_zero_momentum,
  .mark = cpu_mark,
  .elapsed = cpu_elapsed,
  .sync = cpu_sync,
  .bytes = cpu_bytes,
  .backward_into = cpu_backward_into,
  .prepare = cpu_prepare,
};
