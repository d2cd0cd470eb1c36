/* The proxy convergence model: the simulator really trains a small model (mlp or cnn) on
 * Fashion-MNIST on the nn cpu backend, following each simulated worker's schedule. See
 * sim_conv.h for the interface and docs/convergence.md for the semantics.
 *
 * State: the global model (what a parameter server or the last all-reduce holds), and per
 * worker the model it computes on, the gradient of its last step and, once it has applied a
 * local update, the model it last synchronised on (for model-delta pushes). One hs_net does
 * every forward and backward pass: a step loads the worker's model into it (unless the net
 * holds that model already), runs the worker's next batch of its shard, and has the net write
 * the gradient straight into the worker's buffer (hs_net_backward_into).
 *
 * A worker that took the global model and has not changed it since reads the global vector
 * itself (`on_global`): after an all-reduce, no participant copies the model. Before the
 * global model changes, every worker still reading it that does not take the new one at once
 * gets its own copy (release_global).
 *
 * Operations take their content when issued (begin) and apply it when they complete (end):
 *   all-reduce GRAD    global -= lr * sum_i w_i g_i; participants take the global model
 *   all-reduce MODEL   global = sum_i w_i x_i;       participants take the global model, or
 *                      with keep_local x_i = global + (x_i - x_i at begin)
 *   push GRAD          global -= lr * g_w            (applied on arrival, or accumulated)
 *   push MODEL         global += x_w - base_w        (the worker's progress since it synced)
 *   apply              global -= lr * (sum of accumulated b_i g_i) / (sum of b_i), or
 *                      global += mean of accumulated model deltas
 *   pull               the worker takes the global model as it was when the pull was issued
 * weights NULL = b_i / sum b over the participants' last steps; given weights are normalised
 * to sum 1. A gradient (or model delta) sent with a compressor goes through the compressor's
 * real round trip (pol_compress.h), with one context per worker (error feedback persists).
 * Optimiser: plain SGD (no momentum, no weight decay), so that a stale or averaged model is
 * exactly a vector. Deterministic: one thread, events in simulated-time order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_data.h"
#include "nn/nn_eval.h"
#include "nn/nn_net.h"
#include "nn/nn_zoo.h"
#include "policies/pol_compress.h"
#include "runtime/rt_model.h"
#include "sim/sim_conv.h"

/* One model vector, a gradient and a sync base per worker: mlp needs 2.4 MiB per worker, so
 * 256 workers stay under 700 MiB. */
#define HS_PROXY_MAX_WORKERS 256
#define EVAL_CHUNK 1000

static const hs_param_spec proxy_params[] = {
    {"lr", HS_PARAM_DOUBLE, "0.1", 0, 100, NULL, "SGD learning rate (policies may change it with set_lr)"},
    {"eval_every", HS_PARAM_INT, "20", 1, 1e9, NULL, "global updates between evaluations (and target checks)"},
    {"eval_samples", HS_PARAM_INT, "10000", 1, 10000, NULL, "test samples per evaluation (the first ones)"},
    {"train_samples", HS_PARAM_INT, "0", 0, 60000, NULL, "training samples sharded over the workers; 0 = all 60000"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef struct p_worker {
  float *x;                   /* its own model buffer; NULL until it enters. The model it
                                 computes on is model(p, x): the global one while on_global */
  int on_global;
  uint64_t stamp;             /* identifies x's content: equal stamps, equal vectors */
  float *g;                   /* gradient of its last step */
  float *base;                /* model at its last sync, valid when has_base */
  int has_base;
  int keep_pending;           /* a keep_local all-reduce took x into base and is in flight */
  uint64_t keep_stamp;        /* x's stamp when that all-reduce began */
  int last_batch;
  double lr;
  hs_data_iter it;
  hs_compress_slot cs;        /* the compressor state of its sent updates */
} p_worker;

typedef struct p_op {
  hs_comm_kind kind;
  hs_comm_what what;
  hs_ps_mode ps_mode;
  int worker;
  float *buf;                 /* content taken at issue */
  uint64_t stamp;             /* pull: the global model's stamp at issue */
  double samples;             /* pushed gradient: its batch */
  double weight;              /* push: hs_comm_opts.weight, applied by the server */
  double *wts;                /* all-reduce: the participants' normalised weights */
  int *ws;
  int n;
  int keep_local;             /* all-reduce MODEL: participants keep their progress since begin */
} p_op;

typedef struct proxy {
  hs_net *net;
  int64_t P;                  /* parameters */
  hs_dataset *train, *test;
  hs_shards *sh;
  int n_shards;
  hs_runtime_model gm;        /* the global model and the accumulated pushes (rt_model.h) */
  uint64_t global_stamp, next_stamp, net_stamp; /* net_stamp: what the net holds, 0 = unknown */
  double lr;                  /* of global updates */
  double lr0;
  int n, cap;
  p_worker *w;
  p_op *ops;
  int64_t cap_ops;
  float **pool;               /* free P-float buffers */
  int n_pool, cap_pool;
  float *bx;                  /* batch inputs */
  int32_t *by;
  int bcap;                   /* samples the batch buffers hold */
  float *cbuf;                /* a gradient padded to the compressor's matrix view */
  int64_t sample_size;
  int eval_n;
  uint64_t seed;
} proxy;

/* --- buffers ------------------------------------------------------------------------------ */

static float *buf_get(proxy *p) {
  if (p->n_pool > 0) return p->pool[--p->n_pool];
  return malloc((size_t)p->P * sizeof(float));
}

static void buf_put(proxy *p, float *b) {
  if (!b) return;
  if (p->n_pool == p->cap_pool) {
    int nc = p->cap_pool ? 2 * p->cap_pool : 8;
    float **np = realloc(p->pool, (size_t)nc * sizeof *np);
    if (!np) {
      free(b);
      return;
    }
    p->pool = np;
    p->cap_pool = nc;
  }
  p->pool[p->n_pool++] = b;
}

static int batch_room(proxy *p, int batch, hs_diag *d) {
  if (batch <= p->bcap) return 0;
  float *x = realloc(p->bx, (size_t)batch * (size_t)p->sample_size * sizeof *x);
  if (x) p->bx = x;
  int32_t *y = realloc(p->by, (size_t)batch * sizeof *y);
  if (y) p->by = y;
  if (!x || !y) return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory for a batch of %d", batch);
  p->bcap = batch;
  return 0;
}

/* --- workers ------------------------------------------------------------------------------ */

static int worker_slot(proxy *p, int w, hs_diag *d) {
  if (w < 0) return hs_diag_set(d, HS_ERUNTIME, "proxy convergence: worker %d", w);
  if (w >= HS_PROXY_MAX_WORKERS)
    return hs_diag_set(d, HS_ELIMIT, "--convergence proxy trains a real model per worker and "
                       "supports at most %d workers; worker %d is one too many (use "
                       "--convergence analytic for larger clusters)", HS_PROXY_MAX_WORKERS, w);
  if (w >= p->cap) {
    int nc = p->cap ? p->cap : 16;
    while (nc <= w) nc *= 2;
    p_worker *x = realloc(p->w, (size_t)nc * sizeof *x);
    if (!x) return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory for %d workers", nc);
    memset(x + p->cap, 0, (size_t)(nc - p->cap) * sizeof *x);
    p->w = x;
    p->cap = nc;
  }
  if (w >= p->n) p->n = w + 1;
  p_worker *x = &p->w[w];
  if (x->x) return 0;
  x->x = malloc((size_t)p->P * sizeof(float));
  x->g = calloc((size_t)p->P, sizeof(float));
  if (!x->x || !x->g) return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory for worker %d's model", w);
  x->on_global = 1;
  x->stamp = p->global_stamp;
  x->lr = p->lr;
  /* A worker beyond the shards made at the start (a join) reads the shard of w mod shards. */
  return hs_data_iter_init(&x->it, p->train, p->sh, w % p->n_shards, 0, d);
}

static const float *model(const proxy *p, const p_worker *x) {
  return x->on_global ? p->gm.global : x->x;
}

/* The worker gets its own copy of the model it reads, to change it or to keep it while the
 * global model changes. */
static void detach(proxy *p, p_worker *x) {
  if (!x->on_global) return;
  memcpy(x->x, p->gm.global, (size_t)p->P * sizeof(float));
  x->on_global = 0;
}

/* The global model is about to change: workers still reading it keep the old one, except the
 * n workers of ws (ws NULL, n 0: none), which take the new one right after. */
static void release_global(proxy *p, const int *ws, int n) {
  for (int i = 0; i < n; i++) p->w[ws[i]].on_global = 0; /* their stale copy is never read */
  for (int i = 0; i < p->n; i++)
    if (p->w[i].x && p->w[i].on_global) detach(p, &p->w[i]);
}

/* The worker takes model m (whose stamp is stamp): its base for later deltas is m too. The
 * global model is shared, not copied. */
static void worker_sync(proxy *p, int w, const float *m, uint64_t stamp) {
  p_worker *x = &p->w[w];
  if (m == p->gm.global) {
    x->on_global = 1;
  } else {
    memcpy(x->x, m, (size_t)p->P * sizeof(float));
    x->on_global = 0;
  }
  x->stamp = stamp;
  x->has_base = 0;
  x->keep_pending = 0; /* a keep_local all-reduce in flight has lost its snapshot */
}

/* The global model changed. */
static void global_changed(proxy *p) { p->global_stamp = ++p->next_stamp; }

/* Sends g (P floats, worker w's copy) through the compressor in place. The compressor views
 * the vector as one near-square matrix (hs_compress_flat_block), a few floats longer than P:
 * the padding is zero. */
static int compress(proxy *p, int w, const hs_conv_op *op, float *g, hs_diag *d) {
  if (!op->compressor) return 0;
  p_worker *x = &p->w[w];
  if (!p->cbuf) {
    hs_block b = hs_compress_flat_block((double)p->P);
    if (!(p->cbuf = calloc((size_t)(b.rows * b.cols), sizeof(float))))
      return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory");
  }
  return hs_compress_slot_send(&x->cs, op->compressor, op->ratio, g, p->P, p->cbuf, p->seed, (uint64_t)w, d);
}

/* --- the table ---------------------------------------------------------------------------- */

static int fashion_mnist_model(const char *model) {
  const hs_model_info *mi = model ? hs_zoo_find(model) : NULL;
  return mi && !strcmp(mi->dataset, "fashion-mnist");
}

int hs_conv_proxy_supports(const char *model, int n_workers) {
  return fashion_mnist_model(model) && n_workers <= HS_PROXY_MAX_WORKERS;
}

static int p_init(void *st, const hs_conv_config *c, hs_diag *d) {
  proxy *p = st;
  if (!fashion_mnist_model(c->model))
    return hs_diag_set(d, HS_EINVAL, "--convergence proxy trains mlp or cnn on Fashion-MNIST; "
                       "model %s is not supported (use --convergence analytic)", c->model);
  if (c->n_workers > HS_PROXY_MAX_WORKERS)
    return hs_diag_set(d, HS_EINVAL, "--convergence proxy trains a real model per worker and supports "
                       "at most %d workers; the cluster has %d (use --convergence analytic)",
                       HS_PROXY_MAX_WORKERS, c->n_workers);
  p->seed = c->seed;
  p->lr = p->lr0 = hs_params_get(c->params, "lr");
  p->eval_n = (int)hs_params_get(c->params, "eval_samples");
  int64_t ntrain = (int64_t)hs_params_get(c->params, "train_samples");
  hs_net_options no = {.seed = c->seed, .threads = 1};
  int rc = hs_net_open(&p->net, "cpu", c->model, &no, d);
  if (rc) return rc;
  p->P = hs_net_param_count(p->net);
  if ((rc = hs_data_fashion_mnist_first(&p->train, NULL, "train", ntrain, d)) ||
      (rc = hs_data_fashion_mnist_first(&p->test, NULL, "test", p->eval_n, d)))
    return rc;
  p->eval_n = (int)hs_data_count(p->test);
  p->sample_size = hs_data_sample_size(p->train);
  p->n_shards = c->n_workers > 0 ? c->n_workers : 1;
  if ((rc = hs_shards_open(&p->sh, hs_data_count(p->train), p->n_shards, NULL, c->seed, d))) return rc;
  if ((rc = hs_runtime_model_open(&p->gm, p->P, d))) return rc;
  global_changed(p);
  return hs_net_get_params(p->net, p->gm.global, d);
}

static void p_fini(void *st) {
  proxy *p = st;
  for (int i = 0; i < p->n; i++) {
    free(p->w[i].x);
    free(p->w[i].g);
    free(p->w[i].base);
    hs_compress_slot_close(&p->w[i].cs);
  }
  free(p->w);
  for (int64_t i = 0; i < p->cap_ops; i++) {
    free(p->ops[i].buf);
    free(p->ops[i].ws);
    free(p->ops[i].wts);
  }
  free(p->ops);
  for (int i = 0; i < p->n_pool; i++) free(p->pool[i]);
  free(p->pool);
  free(p->bx);
  free(p->by);
  free(p->cbuf);
  hs_runtime_model_close(&p->gm);
  hs_shards_close(p->sh);
  hs_data_close(p->train);
  hs_data_close(p->test);
  hs_net_close(p->net);
}

static int p_add_worker(void *st, int w, hs_diag *d) {
  proxy *p = st;
  int rc = worker_slot(p, w, d);
  if (!rc) worker_sync(p, w, p->gm.global, p->global_stamp);
  return rc;
}

static int p_step(void *st, int w, int batch, double *loss, hs_diag *d) {
  proxy *p = st;
  int rc, correct;
  if ((rc = worker_slot(p, w, d)) || (rc = batch_room(p, batch, d))) return rc;
  p_worker *x = &p->w[w];
  x->last_batch = batch;
  /* Workers that hold the same model (after an all-reduce, all of them) skip the copy. */
  if (x->stamp != p->net_stamp) {
    if ((rc = hs_net_set_params(p->net, model(p, x), d))) return rc;
    p->net_stamp = x->stamp;
  }
  if ((rc = hs_data_iter_next(&x->it, batch, p->bx, p->by, NULL, d)) ||
      (rc = hs_net_load(p->net, p->bx, p->by, batch, d)) || (rc = hs_net_forward(p->net, 1, d)) ||
      (rc = hs_net_backward_into(p->net, x->g, d)))
    return rc;
  return hs_net_result(p->net, loss, &correct, d);
}

static int p_local_update(void *st, int w, hs_diag *d) {
  proxy *p = st;
  int rc = worker_slot(p, w, d);
  if (rc) return rc;
  p_worker *x = &p->w[w];
  detach(p, x);
  if (!x->has_base) {
    if (!x->base && !(x->base = malloc((size_t)p->P * sizeof(float))))
      return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory for worker %d", w);
    memcpy(x->base, x->x, (size_t)p->P * sizeof(float));
    x->has_base = 1;
  }
  hs_runtime_vec_sgd(x->x, NULL, x->g, (float)x->lr, p->P);
  x->stamp = ++p->next_stamp;
  return 0;
}

static int p_set_lr(void *st, int w, double lr, hs_diag *d) {
  proxy *p = st;
  if (w < 0) {
    p->lr = lr;
    for (int i = 0; i < p->n; i++) p->w[i].lr = lr;
    return 0;
  }
  int rc = worker_slot(p, w, d);
  if (!rc) p->w[w].lr = lr;
  return rc;
}

/* keep_local all-reduce of models: at begin each participant's model is kept in its base (which
 * a MODEL push would also move to the model sent), at end it becomes
 * avg + (x - base) and its base the average, so that a later MODEL push sends only the
 * progress not yet averaged. A participant that took no local update meanwhile takes the
 * average as is (and shares its stamp). */
static int keep_begin(proxy *p, const int *ws, int n, hs_diag *d) {
  for (int i = 0; i < n; i++) {
    p_worker *x = &p->w[ws[i]];
    if (x->keep_pending)
      return hs_diag_set(d, HS_EUNSUPPORTED, "proxy convergence: worker %d is in two keep_local "
                         "all-reduces at once, which is not supported", ws[i]);
    if (!x->base && !(x->base = malloc((size_t)p->P * sizeof(float))))
      return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory for worker %d", ws[i]);
    memcpy(x->base, model(p, x), (size_t)p->P * sizeof(float));
    x->has_base = 1;
    x->keep_pending = 1;
    x->keep_stamp = x->stamp;
  }
  return 0;
}

static int keep_end(proxy *p, const int *ws, int n, hs_diag *d) {
  const float *g = p->gm.global;
  for (int i = 0; i < n; i++) {
    p_worker *x = &p->w[ws[i]];
    if (!x->keep_pending)
      return hs_diag_set(d, HS_EUNSUPPORTED, "proxy convergence: worker %d's model was replaced "
                         "while a keep_local all-reduce was in flight, which is not supported", ws[i]);
    x->keep_pending = 0;
    if (x->stamp == x->keep_stamp) {
      worker_sync(p, ws[i], g, p->global_stamp);
      continue;
    }
    float *m = x->x, *b = x->base;
    for (int64_t j = 0; j < p->P; j++) {
      float delta = m[j] - b[j];
      m[j] = g[j] + delta;
      b[j] = g[j];
    }
    x->stamp = ++p->next_stamp;
  }
  return 0;
}

static int p_begin(void *st, int64_t id, const hs_conv_op *op, hs_diag *d) {
  proxy *p = st;
  if (id < 0) return hs_diag_set(d, HS_ERUNTIME, "proxy convergence: operation id %lld", (long long)id);
  if (id >= p->cap_ops) {
    int64_t nc = p->cap_ops ? p->cap_ops : 64;
    while (nc <= id) nc *= 2;
    p_op *o = realloc(p->ops, (size_t)nc * sizeof *o);
    if (!o) return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory");
    memset(o + p->cap_ops, 0, (size_t)(nc - p->cap_ops) * sizeof *o);
    p->ops = o;
    p->cap_ops = nc;
  }
  p_op *o = &p->ops[id];
  buf_put(p, o->buf);
  o->buf = NULL;
  o->kind = op->kind;
  o->what = op->what;
  o->ps_mode = op->ps_mode;
  o->worker = op->worker;
  o->n = 0;
  o->samples = 0;
  o->weight = 0;
  o->keep_local = op->kind == HS_OP_ALLREDUCE && op->what == HS_COMM_MODEL && op->keep_local;
  if (op->kind == HS_OP_APPLY) return 0;
  if (!(o->buf = buf_get(p))) return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory");
  float *b = o->buf;
  int64_t P = p->P;
  int rc;
  switch (op->kind) {
  case HS_OP_ALLREDUCE: {
    int *ws = realloc(o->ws, (size_t)(op->n > 0 ? op->n : 1) * sizeof *ws);
    if (!ws) return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory");
    o->ws = ws;
    o->n = op->n;
    double *wts = realloc(o->wts, (size_t)(op->n > 0 ? op->n : 1) * sizeof *wts);
    if (!wts) return hs_diag_set(d, HS_ENOMEM, "proxy convergence: out of memory");
    o->wts = wts;
    for (int i = 0; i < op->n; i++) {
      if ((rc = worker_slot(p, op->ws[i], d))) return rc;
      ws[i] = op->ws[i];
      wts[i] = op->weights ? op->weights[i] : p->w[ws[i]].last_batch;
    }
    hs_runtime_weights(wts, op->n);
    if (op->n == 0) memset(b, 0, (size_t)P * sizeof *b);
    for (int i = 0; i < op->n; i++) {
      p_worker *x = &p->w[ws[i]];
      const float *src = model(p, x);
      if (op->what == HS_COMM_GRAD) {
        if ((rc = compress(p, ws[i], op, x->g, d))) return rc;
        src = x->g;
      }
      if (i == 0) hs_runtime_vec_scale(b, src, (float)wts[i], P);
      else hs_runtime_vec_axpy(b, src, (float)wts[i], P);
    }
    return o->keep_local ? keep_begin(p, ws, op->n, d) : 0;
  }
  case HS_OP_PUSH: {
    if ((rc = worker_slot(p, op->worker, d))) return rc;
    p_worker *x = &p->w[op->worker];
    if (op->what == HS_COMM_GRAD) {
      memcpy(b, x->g, (size_t)P * sizeof *b);
      o->samples = x->last_batch;
    } else {
      /* The worker's progress since it last synchronised; it goes on from where it is. */
      if (x->has_base) hs_runtime_model_delta(b, model(p, x), x->base, P);
      else memset(b, 0, (size_t)P * sizeof *b);
    }
    /* The server scales what arrives (after decompression) by the push's weight, at the end. */
    o->weight = op->weight;
    return compress(p, op->worker, op, b, d);
  }
  case HS_OP_PULL:
    memcpy(b, p->gm.global, (size_t)P * sizeof *b);
    o->stamp = p->global_stamp;
    return 0;
  case HS_OP_APPLY:
    return 0;
  }
  return hs_diag_set(d, HS_ERUNTIME, "proxy convergence: unknown operation %d", (int)op->kind);
}

static int p_end(void *st, int64_t id, int staleness, hs_diag *d) {
  proxy *p = st;
  if (id < 0 || id >= p->cap_ops)
    return hs_diag_set(d, HS_ERUNTIME, "proxy convergence: no operation %lld in flight", (long long)id);
  p_op *o = &p->ops[id];
  switch (o->kind) {
  case HS_OP_ALLREDUCE:
    if (o->keep_local) release_global(p, NULL, 0);
    else release_global(p, o->ws, o->n);
    hs_runtime_model_allreduced(&p->gm, o->what, o->buf, p->lr, NULL);
    global_changed(p);
    if (o->keep_local) {
      int rc = keep_end(p, o->ws, o->n, d);
      if (rc) return rc;
    } else {
      for (int i = 0; i < o->n; i++) worker_sync(p, o->ws[i], p->gm.global, p->global_stamp);
    }
    break;
  case HS_OP_PUSH:
    if (o->ps_mode != HS_PS_ACCUMULATE) release_global(p, NULL, 0);
    hs_runtime_model_push(&p->gm, o->what, o->ps_mode, o->buf, o->samples, o->weight, p->lr);
    if (o->ps_mode != HS_PS_ACCUMULATE) global_changed(p);
    break;
  case HS_OP_PULL:
    /* unchanged since the pull was issued: the worker shares the global model */
    if (o->worker >= 0 && o->worker < p->n && p->w[o->worker].x)
      worker_sync(p, o->worker, o->stamp == p->global_stamp ? p->gm.global : o->buf, o->stamp);
    break;
  case HS_OP_APPLY:
    release_global(p, NULL, 0);
    hs_runtime_model_apply(&p->gm, p->lr);
    global_changed(p);
    break;
  }
  buf_put(p, o->buf);
  o->buf = NULL;
  return 0;
}

static int p_evaluate(void *st, double *loss, double *accuracy, hs_diag *d) {
  proxy *p = st;
  int rc = hs_net_set_params(p->net, p->gm.global, d);
  if (rc || (rc = batch_room(p, EVAL_CHUNK, d))) return rc;
  p->net_stamp = p->global_stamp;
  return hs_net_evaluate(p->net, p->test, p->eval_n, EVAL_CHUNK, p->bx, p->by, loss, accuracy, d);
}

const hs_conv_model hs_conv_proxy = {
    .version = HS_CONV_VERSION,
    .name = "proxy",
    .description = "really train mlp or cnn on Fashion-MNIST (nn cpu backend) with each "
                   "simulated worker's batches, stale models, local steps and compression",
    .params = proxy_params,
    .state_size = sizeof(proxy),
    .init = p_init,
    .fini = p_fini,
    .add_worker = p_add_worker,
    .step = p_step,
    .local_update = p_local_update,
    .set_lr = p_set_lr,
    .begin = p_begin,
    .end = p_end,
    .evaluate = p_evaluate,
};
