/* nn_graph: layer graph, shape inference and per-sample costs. See nn_graph.h. */
#include "nn/nn_graph.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct hs_graph {
  char name[64];     /* for messages only */
  hs_layer *layers;  /* topological order; layers[0] is the input */
  int count;         /* layers in use */
  int cap;           /* layers allocated */
  hs_diag err;       /* first failure; err.code is the sticky status */
};

const char *hs_layer_kind_name(hs_layer_kind kind) {
  switch (kind) {
#define HS_LAYER_KIND_STR(name, str) case HS_LAYER_##name: return str;
    HS_LAYER_KIND_MAP(HS_LAYER_KIND_STR)
#undef HS_LAYER_KIND_STR
  default: return "?";
  }
}

int hs_graph_open(hs_graph **out, const char *name, int c, int h, int w, hs_diag *d) {
  *out = NULL;
  if (c <= 0 || h <= 0 || w <= 0)
    return hs_diag_set(d, HS_EINVAL, "%s: input shape: expected positive (C,H,W), got (%d,%d,%d)",
                       name ? name : "graph", c, h, w);
  hs_graph *g = calloc(1, sizeof *g);
  if (!g) return hs_diag_set(d, HS_ENOMEM, "graph: out of memory");
  snprintf(g->name, sizeof g->name, "%s", name ? name : "graph");
  g->cap = 64; /* enough for the small models; resnet18 and the others grow once or twice */
  g->layers = calloc((size_t)g->cap, sizeof *g->layers);
  if (!g->layers) {
    free(g);
    return hs_diag_set(d, HS_ENOMEM, "graph: out of memory");
  }
  hs_layer *in = &g->layers[0];
  in->kind = HS_LAYER_INPUT;
  in->in[0] = in->in[1] = -1;
  in->out_c = in->in_c = c;
  in->out_h = in->in_h = h;
  in->out_w = in->in_w = w;
  in->groups = 1;
  g->count = 1;
  *out = g;
  return 0;
}

void hs_graph_close(hs_graph *g) {
  if (!g) return;
  free(g->layers);
  free(g);
}

int hs_graph_status(const hs_graph *g) { return g->err.code; }
const hs_diag *hs_graph_diag(const hs_graph *g) { return &g->err; }
int hs_graph_count(const hs_graph *g) { return g->count; }
int hs_graph_last(const hs_graph *g) { return g->count - 1; }
const char *hs_graph_name(const hs_graph *g) { return g->name; }

const hs_layer *hs_graph_layer(const hs_graph *g, int i) {
  if (i < 0 || i >= g->count) return NULL;
  return &g->layers[i];
}

/* Records the first failure, prefixed with the graph name and the index the failed layer would
 * have had, and returns its code so builders can `return fail(...)`. */
static int fail(hs_graph *g, int code, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(hs_graph *g, int code, const char *kind, const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return hs_diag_set(&g->err, code, "%s: layer %d (%s): %s", g->name, g->count, kind, what);
}

/* Starts a new layer reading `input`: checks the sticky status and the index, grows the array,
 * and fills the input shape. Returns the new layer or NULL with g->err set. */
static hs_layer *begin(hs_graph *g, hs_layer_kind kind, int input) {
  const char *kn = hs_layer_kind_name(kind);
  if (g->err.code) return NULL;
  if (input < 0 || input >= g->count) {
    fail(g, HS_EINVAL, kn, "input: expected a layer index in [0, %d], got %d", g->count - 1,
         input);
    return NULL;
  }
  if (g->count == g->cap) {
    if (g->cap > (1 << 24)) {
      fail(g, HS_ELIMIT, kn, "more than %d layers", g->cap);
      return NULL;
    }
    int cap = g->cap * 2;
    hs_layer *p = realloc(g->layers, (size_t)cap * sizeof *p);
    if (!p) {
      fail(g, HS_ENOMEM, kn, "out of memory growing the layer array to %d", cap);
      return NULL;
    }
    g->layers = p;
    g->cap = cap;
  }
  const hs_layer *src = &g->layers[input];
  hs_layer *l = &g->layers[g->count];
  memset(l, 0, sizeof *l);
  l->kind = kind;
  l->n_in = 1;
  l->in[0] = input;
  l->in[1] = -1;
  l->in_c = src->out_c;
  l->in_h = src->out_h;
  l->in_w = src->out_w;
  /* Shape-preserving by default; layers that change it overwrite these. */
  l->out_c = src->out_c;
  l->out_h = src->out_h;
  l->out_w = src->out_w;
  l->groups = 1;
  return l;
}

/* Commits the layer begin() prepared and returns its index. */
static int commit(hs_graph *g) { return g->count++; }

/* Output side of a sliding window, or -1 when the kernel does not fit the padded input. */
static int window_out(int in, int k, int stride, int pad) {
  if (in + 2 * pad < k) return -1;
  return (in + 2 * pad - k) / stride + 1;
}

/* Shared by conv and pooling: validates the window and sets the spatial output. */
static int set_window(hs_graph *g, hs_layer *l, int k, int stride, int pad) {
  const char *kn = hs_layer_kind_name(l->kind);
  if (k <= 0 || stride <= 0 || pad < 0)
    return fail(g, HS_EINVAL, kn, "expected kernel > 0, stride > 0, padding >= 0; got k=%d "
                "stride=%d pad=%d", k, stride, pad);
  /* PyTorch rejects this too: a window centred on padding alone would read no input. */
  if (pad > k / 2 && l->kind != HS_LAYER_CONV2D)
    return fail(g, HS_EINVAL, kn, "padding %d is more than half the kernel %d", pad, k);
  int oh = window_out(l->in_h, k, stride, pad);
  int ow = window_out(l->in_w, k, stride, pad);
  if (oh < 1 || ow < 1)
    return fail(g, HS_EINVAL, kn, "kernel %dx%d is larger than the padded input %dx%d "
                "(input %dx%d, padding %d)", k, k, l->in_h + 2 * pad, l->in_w + 2 * pad,
                l->in_h, l->in_w, pad);
  l->kernel = k;
  l->stride = stride;
  l->pad = pad;
  l->out_h = oh;
  l->out_w = ow;
  return 0;
}

int hs_graph_conv2d(hs_graph *g, int input, int out_c, int k, int stride, int pad, int groups,
                    int bias) {
  hs_layer *l = begin(g, HS_LAYER_CONV2D, input);
  if (!l) return g->err.code;
  if (out_c <= 0) return fail(g, HS_EINVAL, "conv2d", "out_channels: expected > 0, got %d", out_c);
  if (groups <= 0 || l->in_c % groups != 0 || out_c % groups != 0)
    return fail(g, HS_EINVAL, "conv2d", "groups: expected a divisor of in_channels %d and "
                "out_channels %d, got %d", l->in_c, out_c, groups);
  int rc = set_window(g, l, k, stride, pad);
  if (rc) return rc;
  l->out_c = out_c;
  l->groups = groups;
  l->bias = bias ? 1 : 0;
  return commit(g);
}

int hs_graph_batchnorm2d(hs_graph *g, int input) {
  hs_layer *l = begin(g, HS_LAYER_BATCHNORM2D, input);
  if (!l) return g->err.code;
  l->eps = 1e-5;
  l->momentum = 0.1;
  return commit(g);
}

int hs_graph_relu(hs_graph *g, int input) {
  if (!begin(g, HS_LAYER_RELU, input)) return g->err.code;
  return commit(g);
}

int hs_graph_relu6(hs_graph *g, int input) {
  if (!begin(g, HS_LAYER_RELU6, input)) return g->err.code;
  return commit(g);
}

static int pool(hs_graph *g, hs_layer_kind kind, int input, int k, int stride, int pad) {
  hs_layer *l = begin(g, kind, input);
  if (!l) return g->err.code;
  int rc = set_window(g, l, k, stride, pad);
  if (rc) return rc;
  return commit(g);
}

int hs_graph_maxpool2d(hs_graph *g, int input, int k, int stride, int pad) {
  return pool(g, HS_LAYER_MAXPOOL2D, input, k, stride, pad);
}

int hs_graph_avgpool2d(hs_graph *g, int input, int k, int stride, int pad) {
  return pool(g, HS_LAYER_AVGPOOL2D, input, k, stride, pad);
}

int hs_graph_global_avgpool(hs_graph *g, int input) {
  hs_layer *l = begin(g, HS_LAYER_GLOBAL_AVGPOOL, input);
  if (!l) return g->err.code;
  l->out_h = l->out_w = 1;
  return commit(g);
}

int hs_graph_linear(hs_graph *g, int input, int out_features, int bias) {
  hs_layer *l = begin(g, HS_LAYER_LINEAR, input);
  if (!l) return g->err.code;
  if (l->in_h != 1 || l->in_w != 1)
    return fail(g, HS_EINVAL, "linear", "input: expected a vector (C,1,1), got (%d,%d,%d); "
                "add a flatten or a global pool first", l->in_c, l->in_h, l->in_w);
  if (out_features <= 0)
    return fail(g, HS_EINVAL, "linear", "out_features: expected > 0, got %d", out_features);
  l->out_c = out_features;
  l->bias = bias ? 1 : 0;
  return commit(g);
}

int hs_graph_add(hs_graph *g, int a, int b) {
  hs_layer *l = begin(g, HS_LAYER_ADD, a);
  if (!l) return g->err.code;
  if (b < 0 || b >= g->count)
    return fail(g, HS_EINVAL, "add", "second input: expected a layer index in [0, %d], got %d",
                g->count - 1, b);
  const hs_layer *lb = &g->layers[b];
  if (lb->out_c != l->in_c || lb->out_h != l->in_h || lb->out_w != l->in_w)
    return fail(g, HS_EINVAL, "add", "inputs %d and %d: expected equal shapes, got (%d,%d,%d) "
                "and (%d,%d,%d)", a, b, l->in_c, l->in_h, l->in_w, lb->out_c, lb->out_h,
                lb->out_w);
  l->n_in = 2;
  l->in[1] = b;
  return commit(g);
}

int hs_graph_flatten(hs_graph *g, int input) {
  hs_layer *l = begin(g, HS_LAYER_FLATTEN, input);
  if (!l) return g->err.code;
  int64_t n = (int64_t)l->in_c * l->in_h * l->in_w;
  if (n > INT32_MAX)
    return fail(g, HS_ELIMIT, "flatten", "%lld features do not fit a channel count",
                (long long)n);
  l->out_c = (int)n;
  l->out_h = l->out_w = 1;
  return commit(g);
}

/* --- costs ------------------------------------------------------------------------------- */

static int64_t out_elems(const hs_layer *l) {
  return (int64_t)l->out_c * l->out_h * l->out_w;
}

int64_t hs_layer_params(const hs_layer *l) {
  switch (l->kind) {
  case HS_LAYER_CONV2D:
    return (int64_t)l->out_c * (l->in_c / l->groups) * l->kernel * l->kernel +
           (l->bias ? l->out_c : 0);
  case HS_LAYER_BATCHNORM2D:
    return 2 * (int64_t)l->in_c; /* gamma and beta; running stats are buffers */
  case HS_LAYER_LINEAR:
    return (int64_t)l->in_c * l->out_c + (l->bias ? l->out_c : 0);
  default:
    return 0;
  }
}

int64_t hs_layer_macs(const hs_layer *l) {
  switch (l->kind) {
  case HS_LAYER_CONV2D:
    return out_elems(l) * (l->in_c / l->groups) * l->kernel * l->kernel;
  case HS_LAYER_LINEAR:
    return (int64_t)l->in_c * l->out_c;
  default:
    return 0;
  }
}

double hs_layer_flops(const hs_layer *l) {
  double n = (double)out_elems(l);
  double kk = (double)l->kernel * l->kernel;
  switch (l->kind) {
  case HS_LAYER_CONV2D:
  case HS_LAYER_LINEAR:
    return 2.0 * (double)hs_layer_macs(l) + (l->bias ? n : 0.0);
  case HS_LAYER_BATCHNORM2D: return 2.0 * n;
  case HS_LAYER_RELU:
  case HS_LAYER_RELU6:
  case HS_LAYER_ADD: return n;
  case HS_LAYER_MAXPOOL2D: return (kk - 1.0) * n;
  case HS_LAYER_AVGPOOL2D: return kk * n;
  case HS_LAYER_GLOBAL_AVGPOOL: return (double)l->in_h * l->in_w * n;
  case HS_LAYER_INPUT:
  case HS_LAYER_FLATTEN:
  default: return 0.0;
  }
}

int64_t hs_layer_act_bytes(const hs_layer *l) {
  if (l->kind == HS_LAYER_INPUT || l->kind == HS_LAYER_FLATTEN) return 0;
  return 4 * out_elems(l); /* fp32 */
}

int64_t hs_graph_params(const hs_graph *g) {
  int64_t s = 0;
  for (int i = 0; i < g->count; i++) s += hs_layer_params(&g->layers[i]);
  return s;
}

int64_t hs_graph_macs(const hs_graph *g) {
  int64_t s = 0;
  for (int i = 0; i < g->count; i++) s += hs_layer_macs(&g->layers[i]);
  return s;
}

double hs_graph_flops(const hs_graph *g) {
  double s = 0;
  for (int i = 0; i < g->count; i++) s += hs_layer_flops(&g->layers[i]);
  return s;
}

int64_t hs_graph_act_bytes(const hs_graph *g) {
  int64_t s = 0;
  for (int i = 0; i < g->count; i++) s += hs_layer_act_bytes(&g->layers[i]);
  return s;
}

int hs_graph_print(const hs_graph *g, FILE *f) {
  fprintf(f, "# %s: %d layers\n", g->name, g->count);
  fprintf(f, "%4s %-15s %-9s %-24s %-15s %10s %14s\n", "idx", "kind", "inputs", "hyper",
          "out (C,H,W)", "params", "flops");
  for (int i = 0; i < g->count; i++) {
    const hs_layer *l = &g->layers[i];
    char ins[32] = "-", hyper[64] = "", shape[48];
    if (l->n_in == 1) snprintf(ins, sizeof ins, "%d", l->in[0]);
    if (l->n_in == 2) snprintf(ins, sizeof ins, "%d,%d", l->in[0], l->in[1]);
    if (l->kind == HS_LAYER_CONV2D)
      snprintf(hyper, sizeof hyper, "k%d s%d p%d g%d%s", l->kernel, l->stride, l->pad,
               l->groups, l->bias ? " bias" : "");
    else if (l->kind == HS_LAYER_MAXPOOL2D || l->kind == HS_LAYER_AVGPOOL2D)
      snprintf(hyper, sizeof hyper, "k%d s%d p%d", l->kernel, l->stride, l->pad);
    else if (l->kind == HS_LAYER_LINEAR)
      snprintf(hyper, sizeof hyper, "%d->%d%s", l->in_c, l->out_c, l->bias ? " bias" : "");
    snprintf(shape, sizeof shape, "(%d,%d,%d)", l->out_c, l->out_h, l->out_w);
    fprintf(f, "%4d %-15s %-9s %-24s %-15s %10lld %14.0f\n", i, hs_layer_kind_name(l->kind), ins,
            hyper, shape, (long long)hs_layer_params(l), hs_layer_flops(l));
  }
  fprintf(f, "# total: %lld params, %.0f flops, %lld macs, %lld activation bytes per sample\n",
          (long long)hs_graph_params(g), hs_graph_flops(g), (long long)hs_graph_macs(g),
          (long long)hs_graph_act_bytes(g));
  return ferror(f) ? HS_EIO : 0;
}
