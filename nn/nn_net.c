/* nn_net: the front end of nn_net.h shared by the compute backends. See nn_net.h and
 * nn_backend.h.
 *
 * This file parses the device string, builds the graph, lays out the flat parameter vector,
 * draws the initial parameters on the host, checks every argument a caller passes, and then
 * hands the call to the backend's table. Backends can therefore assume valid arguments: a slot
 * in range, a batch >= 1, labels in [0, classes), non-NULL buffers. */
#include "nn/nn_backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_rng.h"
#include "nn/nn_zoo.h"

/* --- device strings ------------------------------------------------------------------------ */

/* Parses a non-negative decimal integer that fills [s, end); -1 when it is not one. */
static int parse_uint(const char *s, const char *end) {
  if (s == end || end - s > 6) return -1;
  int v = 0;
  for (const char *p = s; p < end; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

/* "cpu" -> ordinal -1; "cuda:I" -> I; "cuda:I/sm=N" -> I and N (N >= 1). */
static int parse_device(const char *dev, int *ordinal, int *sm, hs_diag *d) {
  *ordinal = -1;
  *sm = 0;
  if (strcmp(dev, "cpu") == 0) return 0;
  if (strncmp(dev, "cuda:", 5) == 0) {
    const char *p = dev + 5;
    const char *slash = strchr(p, '/');
    const char *end = slash ? slash : p + strlen(p);
    int ord = parse_uint(p, end);
    if (ord >= 0) {
      if (!slash) {
        *ordinal = ord;
        return 0;
      }
      if (strncmp(slash, "/sm=", 4) == 0) {
        int n = parse_uint(slash + 4, slash + strlen(slash));
        if (n >= 1) {
          *ordinal = ord;
          *sm = n;
          return 0;
        }
      }
    }
  }
  return hs_diag_set(d, HS_EINVAL, "device: expected \"cpu\", \"cuda:I\" or \"cuda:I/sm=N\" "
                     "(I a GPU index, N >= 1 SMs), got \"%s\"", dev);
}

/* --- parameters ---------------------------------------------------------------------------- */

/* Inputs that feed one output of a conv or linear layer: PyTorch's fan_in. */
static int64_t fan_in(const hs_layer *l) {
  if (l->kind == HS_LAYER_CONV2D) return (int64_t)(l->in_c / l->groups) * l->kernel * l->kernel;
  return (int64_t)l->in_c; /* linear */
}

int hs_net_init_params(const hs_graph *g, const int64_t *param_off, uint64_t seed, float *host,
                       hs_diag *d) {
  for (int i = 0; i < hs_graph_count(g); i++) {
    const hs_layer *l = hs_graph_layer(g, i);
    int64_t np = hs_layer_params(l);
    if (np == 0) continue;
    float *p = host + param_off[i];
    if (l->kind == HS_LAYER_BATCHNORM2D) {
      for (int c = 0; c < l->in_c; c++) p[c] = 1.0f;
      for (int c = 0; c < l->in_c; c++) p[l->in_c + c] = 0.0f;
      continue;
    }
    /* PyTorch's default for Conv2d and Linear: kaiming_uniform_(a = sqrt(5)) on the weight,
     * which is uniform in +-1/sqrt(fan_in), and the bias uniform in the same bound. One stream
     * per layer index, so a layer's weights depend on (seed, layer) alone. */
    gsl_rng *r = hs_rng_stream(seed, (uint64_t)i);
    if (!r) return hs_diag_set(d, HS_ENOMEM, "init: out of memory for a random stream");
    double bound = 1.0 / sqrt((double)fan_in(l));
    for (int64_t k = 0; k < np; k++) p[k] = (float)(bound * (2.0 * gsl_rng_uniform(r) - 1.0));
    gsl_rng_free(r);
  }
  return 0;
}

/* --- open / close -------------------------------------------------------------------------- */

int hs_net_open_graph(hs_net **out, const char *device, hs_graph *g, const hs_net_options *o,
                      hs_diag *d) {
  hs_net_options opts = {0};
  if (o) opts = *o;
  int ordinal, sm;
  int rc = 0;
  hs_net *n = NULL;
  float *init = NULL;
  *out = NULL;
  if (!g) return hs_diag_set(d, HS_EINVAL, "net: no graph");
  if ((rc = hs_graph_status(g)) != 0) {
    hs_diag_set(d, rc, "%s", hs_graph_diag(g)->msg);
    goto fail;
  }
  if (!device) {
    rc = hs_diag_set(d, HS_EINVAL, "net: no device given");
    goto fail;
  }
  if ((rc = parse_device(device, &ordinal, &sm, d)) != 0) goto fail;
  if (strlen(device) >= sizeof n->device || strlen(hs_graph_name(g)) >= sizeof n->model) {
    rc = hs_diag_set(d, HS_EINVAL, "net: device \"%s\" or model \"%s\" name too long", device,
                     hs_graph_name(g));
    goto fail;
  }
  if (opts.max_batch < 0 || opts.threads < 0 || opts.threads > 1024) {
    rc = hs_diag_set(d, HS_EINVAL, "net: options: expected max_batch >= 0 and threads in "
                     "[0, 1024], got max_batch %d, threads %d", opts.max_batch, opts.threads);
    goto fail;
  }
  if (opts.threads == 0) opts.threads = 1;
  if (!(opts.wait_s >= 0.0) || opts.wait_s > HS_NET_WAIT_MAX_S) { /* NaN too */
    rc = hs_diag_set(d, HS_EINVAL, "net: options: expected wait_s in [0, %g] s, got %g",
                     HS_NET_WAIT_MAX_S, opts.wait_s);
    goto fail;
  }
  if (opts.wait_s == 0.0) opts.wait_s = HS_NET_WAIT_DEFAULT_S;
  if (hs_graph_count(g) < 2) {
    rc = hs_diag_set(d, HS_EINVAL, "net: graph \"%s\" has no layer after its input",
                     hs_graph_name(g));
    goto fail;
  }

  const struct hs_net_backend *be = &hs_net_backend_cpu;
  if (ordinal >= 0) {
#if HETSIM_HAVE_CUDA
    be = &hs_net_backend_cuda;
#else
    rc = hs_diag_set(d, HS_EUNSUPPORTED, "device \"%s\": this build has no CUDA support "
                     "(no CUDA toolkit was found at configure time); use --device cpu", device);
    goto fail;
#endif
  }

  n = calloc(1, sizeof *n);
  int count = hs_graph_count(g);
  if (n) n->param_off = malloc((size_t)count * sizeof *n->param_off);
  if (!n || !n->param_off) {
    rc = hs_diag_set(d, HS_ENOMEM, "net: out of memory");
    goto fail;
  }
  n->be = be;
  n->graph = g;
  snprintf(n->device, sizeof n->device, "%s", device);
  snprintf(n->model, sizeof n->model, "%s", hs_graph_name(g));
  n->ordinal = ordinal;
  n->sm_partition = sm;
  n->opts = opts;
  int64_t off = 0;
  for (int i = 0; i < count; i++) {
    int64_t np = hs_layer_params(hs_graph_layer(g, i));
    n->param_off[i] = np ? off : -1;
    off += np;
  }
  n->n_params = off;
  const hs_layer *last = hs_graph_layer(g, hs_graph_last(g));
  int64_t classes = (int64_t)last->out_c * last->out_h * last->out_w;
  if (classes < 2 || classes > (1 << 20)) {
    rc = hs_diag_set(d, HS_EINVAL, "net: graph \"%s\": the last layer gives %lld logits; "
                     "expected between 2 and %d classes", n->model, (long long)classes, 1 << 20);
    goto fail;
  }
  n->classes = (int)classes;

  init = malloc((size_t)(n->n_params > 0 ? n->n_params : 1) * sizeof *init);
  if (!init) {
    rc = hs_diag_set(d, HS_ENOMEM, "net: out of memory for %lld initial parameters",
                     (long long)n->n_params);
    goto fail;
  }
  if ((rc = hs_net_init_params(g, n->param_off, opts.seed, init, d)) != 0) goto fail;
  if ((rc = be->open(n, init, d)) != 0) {
    n->be = NULL; /* the backend cleaned up after itself */
    goto fail;
  }
  free(init);
  *out = n;
  return 0;

fail:
  free(init);
  if (n) {
    free(n->param_off);
    free(n);
  }
  hs_graph_close(g);
  return rc;
}

int hs_net_open(hs_net **out, const char *device, const char *model, const hs_net_options *o,
                hs_diag *d) {
  if (!out) return hs_diag_set(d, HS_EINVAL, "net: no place for the result");
  *out = NULL;
  if (!model) return hs_diag_set(d, HS_EINVAL, "net: no model given");
  hs_graph *g = NULL;
  int rc = hs_zoo_build(model, &g, d);
  if (rc) return rc;
  return hs_net_open_graph(out, device, g, o, d);
}

void hs_net_close(hs_net *n) {
  if (!n) return;
  if (n->be) n->be->close(n);
  hs_graph_close(n->graph);
  free(n->param_off);
  free(n);
}

/* --- queries ------------------------------------------------------------------------------- */

const char *hs_net_device(const hs_net *n) { return n->device; }
const char *hs_net_backend(const hs_net *n) { return n->be->name; }
const char *hs_net_model(const hs_net *n) { return n->model; }
int64_t hs_net_param_count(const hs_net *n) { return n->n_params; }
int hs_net_classes(const hs_net *n) { return n->classes; }
float *hs_net_params(hs_net *n) { return n->params; }
float *hs_net_grads(hs_net *n) { return n->grads; }
int64_t hs_net_bytes(const hs_net *n) { return n->be->bytes(n); }

void hs_net_input_shape(const hs_net *n, int *c, int *h, int *w) {
  const hs_layer *in = hs_graph_layer(n->graph, 0);
  if (c) *c = in->out_c;
  if (h) *h = in->out_h;
  if (w) *w = in->out_w;
}

/* --- training calls ------------------------------------------------------------------------ */

int hs_net_prepare(hs_net *n, int batch, hs_diag *d) {
  if (batch < 1)
    return hs_diag_set(d, HS_EINVAL, "%s: prepare: expected a batch >= 1, got %d", n->model, batch);
  return n->be->prepare ? n->be->prepare(n, batch, d) : 0;
}

int hs_net_load(hs_net *n, const float *x, const int32_t *y, int batch, hs_diag *d) {
  if (batch < 1)
    return hs_diag_set(d, HS_EINVAL, "%s: load: expected a batch >= 1, got %d", n->model, batch);
  if (!x || !y) return hs_diag_set(d, HS_EINVAL, "%s: load: no inputs or no labels", n->model);
  for (int i = 0; i < batch; i++) {
    if (y[i] < 0 || y[i] >= n->classes)
      return hs_diag_set(d, HS_EINVAL, "%s: load: label of sample %d: expected a class in "
                         "[0, %d), got %d", n->model, i, n->classes, (int)y[i]);
  }
  return n->be->load(n, x, y, batch, d);
}

int hs_net_check_train_batch(const hs_net *n, int batch, hs_diag *d) {
  for (int i = 1; i < hs_graph_count(n->graph); i++) {
    const hs_layer *l = hs_graph_layer(n->graph, i);
    if (l->kind == HS_LAYER_BATCHNORM2D && (int64_t)l->in_h * l->in_w * batch < 2)
      return hs_diag_set(d, HS_EINVAL, "%s: batchnorm layer %d: training needs more than one "
                         "value per channel (batch %d of %dx%d maps), as PyTorch does",
                         n->model, i, batch, l->in_h, l->in_w);
  }
  return 0;
}

int hs_net_forward(hs_net *n, int train, hs_diag *d) {
  return n->be->forward(n, train ? 1 : 0, d);
}

int hs_net_backward(hs_net *n, hs_diag *d) { return n->be->backward(n, d); }

int hs_net_backward_into(hs_net *n, float *grads, hs_diag *d) {
  if (!grads) return hs_diag_set(d, HS_EINVAL, "%s: backward: no gradient buffer", n->model);
  if (n->be->backward_into) return n->be->backward_into(n, grads, d);
  int rc = n->be->backward(n, d);
  return rc ? rc : n->be->copy(n, HS_NET_GRADS, 1, grads, d);
}

int hs_net_update(hs_net *n, const hs_sgd *opt, hs_diag *d) {
  if (!opt) return hs_diag_set(d, HS_EINVAL, "%s: update: no optimizer settings", n->model);
  /* torch.optim.SGD rejects the same values. */
  if (!(opt->lr >= 0) || !isfinite(opt->lr) || !(opt->momentum >= 0) ||
      !isfinite(opt->momentum) || !(opt->weight_decay >= 0) || !isfinite(opt->weight_decay))
    return hs_diag_set(d, HS_EINVAL, "%s: update: expected finite lr, momentum and "
                       "weight_decay >= 0, got lr %g, momentum %g, weight_decay %g", n->model,
                       opt->lr, opt->momentum, opt->weight_decay);
  return n->be->update(n, opt, d);
}

int hs_net_result(hs_net *n, double *loss, int *correct, hs_diag *d) {
  double l = 0.0;
  int c = 0;
  int rc = n->be->result(n, &l, &c, d);
  if (rc) return rc;
  if (loss) *loss = l;
  if (correct) *correct = c;
  return 0;
}

static int copy_vec(hs_net *n, hs_net_vec which, int to_host, float *host, hs_diag *d) {
  if (!host)
    return hs_diag_set(d, HS_EINVAL, "%s: %s %s: no host buffer", n->model,
                       to_host ? "get" : "set", which == HS_NET_PARAMS ? "params" : "grads");
  return n->be->copy(n, which, to_host, host, d);
}

int hs_net_get_params(hs_net *n, float *host, hs_diag *d) {
  return copy_vec(n, HS_NET_PARAMS, 1, host, d);
}
int hs_net_set_params(hs_net *n, const float *host, hs_diag *d) {
  /* The table takes one non-const pointer for both directions; set only reads it. */
  return copy_vec(n, HS_NET_PARAMS, 0, (float *)(uintptr_t)host, d);
}
int hs_net_get_grads(hs_net *n, float *host, hs_diag *d) {
  return copy_vec(n, HS_NET_GRADS, 1, host, d);
}
int hs_net_set_grads(hs_net *n, const float *host, hs_diag *d) {
  return copy_vec(n, HS_NET_GRADS, 0, (float *)(uintptr_t)host, d);
}

int hs_net_zero_momentum(hs_net *n, hs_diag *d) { return n->be->zero_momentum(n, d); }

/* --- timing -------------------------------------------------------------------------------- */

static int check_slot(const hs_net *n, int slot, hs_diag *d) {
  if (slot < 0 || slot >= HS_NET_MARKS)
    return hs_diag_set(d, HS_EINVAL, "%s: mark slot: expected 0..%d, got %d", n->model,
                       HS_NET_MARKS - 1, slot);
  return 0;
}

int hs_net_mark(hs_net *n, int slot, hs_diag *d) {
  int rc = check_slot(n, slot, d);
  return rc ? rc : n->be->mark(n, slot, d);
}

int hs_net_elapsed(hs_net *n, int from, int to, double *seconds, hs_diag *d) {
  int rc = check_slot(n, from, d);
  if (!rc) rc = check_slot(n, to, d);
  if (rc) return rc;
  if (!seconds) return hs_diag_set(d, HS_EINVAL, "%s: elapsed: no place for the result", n->model);
  return n->be->elapsed(n, from, to, seconds, d);
}

int hs_net_sync(hs_net *n, hs_diag *d) { return n->be->sync(n, d); }
