/* hs_fake_rt: a scripted runtime for policy tests. Every worker's step, push and pull take
 * fixed, test-chosen times (no contention, no jitter), so that a policy's decisions can be
 * checked against hand-computed values; losses come from a test callback. Header-only, for
 * tests only.
 *
 * - compute(w, b): c[w] * slow[w] seconds (the batch does not matter here); predict gives the
 *   same. Each finished step reports loss_fn(f, w) (NaN when no callback).
 * - push(w): up[w] seconds, or up[w] * wire + cm[w] when compressed (wire: the compressor's
 *   hs_compress_wire_ratio at the pushed ratio). An APPLY push makes one global update on
 *   arrival; its staleness is the updates applied since the worker's step read the model.
 * - pull(w): down[w] seconds; the worker then holds the version current when the pull started.
 * - apply(): apply_time seconds, then one global update.
 * - Scripted slowdowns at given times (on_cluster SLOWDOWN).
 * Every action and completion is appended to `log`. */
#ifndef HS_FAKE_RT_H
#define HS_FAKE_RT_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/pol_compress.h"
#include "policies/pol_registry.h"

#define FAKE_MAX 8

enum { FK_COMPUTE = 1, FK_PUSH, FK_PULL, FK_APPLY, FK_TIMER, FK_SLOW };

typedef struct fake_ev {
  double t;
  long seq;
  int kind, w;
  uint64_t tag;
  double x;       /* FK_SLOW: slowdown */
  int ps_mode;
} fake_ev;

/* One log line: an action issued (done = 0) or finished (done = 1). */
typedef struct fake_log {
  double t;
  int kind, w, done;
  uint64_t tag;       /* compute: the policy's tag; push: the tag of the worker's last step */
  double ratio;       /* push: compressor's setting, 0 when uncompressed */
  int staleness;      /* finished push */
  uint64_t version;   /* global version after the event */
} fake_log;

typedef struct fake_rt fake_rt;
typedef double fake_loss_fn(fake_rt *f, int w);
typedef void fake_push_hook(fake_rt *f, int w);

struct fake_rt {
  hs_runtime rt; /* first member */
  const hs_policy *pol;
  void *state;
  hs_params params;
  hs_diag diag;
  int n;
  int64_t global_batch;
  double c[FAKE_MAX], up[FAKE_MAX], down[FAKE_MAX], cm[FAKE_MAX], slow[FAKE_MAX];
  double apply_time;
  double now;
  uint64_t version, wver[FAKE_MAX], read_ver[FAKE_MAX], last_tag[FAKE_MAX];
  int computing[FAKE_MAX];
  int64_t steps[FAKE_MAX], local_updates[FAKE_MAX], pushes[FAKE_MAX], pulls[FAKE_MAX], applies;
  fake_loss_fn *loss_fn;
  fake_push_hook *push_hook;
  void *ctx;
  fake_ev *ev;
  int n_ev, cap_ev;
  long seq;
  fake_log *log;
  int n_log, cap_log;
  int error;
};

static inline void fake_event(fake_rt *f, double t, int kind, int w, uint64_t tag, double x, int ps_mode) {
  if (f->n_ev == f->cap_ev) {
    f->cap_ev = f->cap_ev ? 2 * f->cap_ev : 64;
    f->ev = realloc(f->ev, (size_t)f->cap_ev * sizeof *f->ev);
  }
  f->ev[f->n_ev++] = (fake_ev){.t = t, .seq = f->seq++, .kind = kind, .w = w, .tag = tag, .x = x, .ps_mode = ps_mode};
}

static inline void fake_note(fake_rt *f, int kind, int w, int done, uint64_t tag, double ratio, int stale) {
  if (f->n_log == f->cap_log) {
    f->cap_log = f->cap_log ? 2 * f->cap_log : 256;
    f->log = realloc(f->log, (size_t)f->cap_log * sizeof *f->log);
  }
  f->log[f->n_log++] = (fake_log){.t = f->now, .kind = kind, .w = w, .done = done, .tag = tag,
                                  .ratio = ratio, .staleness = stale, .version = f->version};
}

static fake_rt *F(hs_runtime *rt) { return (fake_rt *)rt; }
static inline double fk_now(hs_runtime *rt) { return F(rt)->now; }
static inline int fk_n_workers(hs_runtime *rt) { return F(rt)->n; }
static inline int fk_active(hs_runtime *rt, int w) { return w >= 0 && w < F(rt)->n; }
static inline int64_t fk_global_batch(hs_runtime *rt) { return F(rt)->global_batch; }
static inline int fk_max_batch(hs_runtime *rt, int w) { return 0; }
static inline double fk_predict(hs_runtime *rt, int w, int b) { return F(rt)->c[w] * F(rt)->slow[w]; }
static inline uint64_t fk_version(hs_runtime *rt) { return F(rt)->version; }
static inline uint64_t fk_worker_version(hs_runtime *rt, int w) { return F(rt)->wver[w]; }
static inline uint64_t fk_seed(hs_runtime *rt) { return 1; }
static hs_diag *fk_diag(hs_runtime *rt) { return &F(rt)->diag; }

static inline int fk_compute(hs_runtime *rt, int w, int b, uint64_t tag) {
  fake_rt *f = F(rt);
  if (w < 0 || w >= f->n || f->computing[w] || b < 1) return f->error = HS_ERUNTIME;
  f->computing[w] = 1;
  f->read_ver[w] = f->wver[w];
  fake_note(f, FK_COMPUTE, w, 0, tag, 0, 0);
  fake_event(f, f->now + f->c[w] * f->slow[w], FK_COMPUTE, w, tag, 0, 0);
  return 0;
}

static inline int fk_local_update(hs_runtime *rt, int w) {
  F(rt)->local_updates[w]++;
  return 0;
}

static inline int fk_allreduce(hs_runtime *rt, const int *ws, int n, const double *weights, const hs_comm_opts *o) {
  return F(rt)->error = HS_EUNSUPPORTED;
}

static inline int fk_push(hs_runtime *rt, int w, const hs_comm_opts *o) {
  fake_rt *f = F(rt);
  double d = f->up[w], ratio = 0;
  if (o->compressor && o->ratio > 0) {
    ratio = o->ratio;
    d = f->up[w] * hs_compress_wire_ratio(o->compressor, o->ratio) + f->cm[w];
  }
  f->pushes[w]++;
  fake_note(f, FK_PUSH, w, 0, f->last_tag[w], ratio, 0);
  fake_event(f, f->now + d, FK_PUSH, w, f->last_tag[w], ratio, (int)o->ps_mode);
  return 0;
}

static inline int fk_pull(hs_runtime *rt, int w, const hs_comm_opts *o) {
  fake_rt *f = F(rt);
  f->pulls[w]++;
  fake_note(f, FK_PULL, w, 0, 0, 0, 0);
  fake_event(f, f->now + f->down[w], FK_PULL, w, f->version, 0, 0);
  return 0;
}

static inline int fk_apply(hs_runtime *rt, const hs_comm_opts *o) {
  fake_rt *f = F(rt);
  fake_note(f, FK_APPLY, -1, 0, 0, 0, 0);
  fake_event(f, f->now + f->apply_time, FK_APPLY, -1, 0, 0, 0);
  return 0;
}

static inline int fk_timer(hs_runtime *rt, double delay, uint64_t tag) {
  fake_rt *f = F(rt);
  fake_event(f, f->now + delay, FK_TIMER, -1, tag, 0, 0);
  return 0;
}

static inline int fk_set_lr(hs_runtime *rt, int w, double lr) { return 0; }

static const hs_runtime_ops fake_ops = {
    .version = HS_RUNTIME_VERSION,
    .now = fk_now,
    .n_workers = fk_n_workers,
    .active = fk_active,
    .global_batch = fk_global_batch,
    .max_batch = fk_max_batch,
    .predict_compute = fk_predict,
    .model_version = fk_version,
    .worker_version = fk_worker_version,
    .seed = fk_seed,
    .compute = fk_compute,
    .local_update = fk_local_update,
    .allreduce = fk_allreduce,
    .push = fk_push,
    .apply = fk_apply,
    .pull = fk_pull,
    .timer = fk_timer,
    .set_lr = fk_set_lr,
    .diag = fk_diag,
};

/* A runtime of n workers with policy `spec` ("name:k=v"); set c/up/down/cm before fake_run. */
static inline int fake_open(fake_rt *f, int n, const char *spec) {
  memset(f, 0, sizeof *f);
  f->rt.ops = &fake_ops;
  f->n = n;
  f->global_batch = 32 * n;
  for (int w = 0; w < n; w++) f->slow[w] = 1.0;
  int rc = hs_policy_parse(spec, &f->pol, &f->params, &f->diag);
  if (rc) return rc;
  f->state = calloc(1, f->pol->state_size);
  return f->pol->init ? f->pol->init(f->state, &f->rt, &f->params) : 0;
}

static inline void fake_slowdown_at(fake_rt *f, double t, int w, double slow) { fake_event(f, t, FK_SLOW, w, 0, slow, 0); }

static inline int fake_pop(fake_rt *f, fake_ev *e) {
  if (f->n_ev == 0) return 0;
  int best = 0;
  for (int i = 1; i < f->n_ev; i++)
    if (f->ev[i].t < f->ev[best].t || (f->ev[i].t == f->ev[best].t && f->ev[i].seq < f->ev[best].seq)) best = i;
  *e = f->ev[best];
  f->ev[best] = f->ev[--f->n_ev];
  return 1;
}

/* Runs until time t_end, or max_version global updates, or an error. */
static inline int fake_run(fake_rt *f, double t_end, uint64_t max_version) {
  int rc = f->pol->start ? f->pol->start(f->state, &f->rt) : 0;
  fake_ev e;
  while (!rc && !f->error && f->version < max_version && fake_pop(f, &e)) {
    if (e.t > t_end) break;
    f->now = e.t;
    int w = e.w;
    switch (e.kind) {
    case FK_COMPUTE: {
      f->computing[w] = 0;
      f->steps[w]++;
      f->last_tag[w] = e.tag;
      fake_note(f, FK_COMPUTE, w, 1, e.tag, 0, 0);
      hs_step_obs o = {.worker = w, .batch = 32, .start = e.t - f->c[w] * f->slow[w], .end = e.t,
                       .duration = f->c[w] * f->slow[w], .loss = f->loss_fn ? f->loss_fn(f, w) : NAN,
                       .tag = e.tag};
      rc = f->pol->on_compute(f->state, &f->rt, &o);
      break;
    }
    case FK_PUSH: {
      int stale = (int)(f->version - f->read_ver[w]);
      if (e.ps_mode == HS_PS_APPLY) f->version++;
      if (f->push_hook) f->push_hook(f, w);
      fake_note(f, FK_PUSH, w, 1, e.tag, e.x, stale);
      double d = f->up[w];
      if (e.x > 0) d = f->up[w] * hs_compress_wire_ratio(&hs_compressor_topk, e.x) + f->cm[w];
      hs_comm_obs o = {.kind = HS_OP_PUSH, .worker = w, .start = e.t - d, .end = e.t,
                       .version = f->version, .staleness = stale};
      rc = f->pol->on_comm(f->state, &f->rt, &o);
      break;
    }
    case FK_PULL: {
      f->wver[w] = e.tag;
      fake_note(f, FK_PULL, w, 1, 0, 0, 0);
      hs_comm_obs o = {.kind = HS_OP_PULL, .worker = w, .start = e.t - f->down[w], .end = e.t,
                       .version = f->version};
      rc = f->pol->on_comm(f->state, &f->rt, &o);
      break;
    }
    case FK_APPLY: {
      f->version++;
      f->applies++;
      fake_note(f, FK_APPLY, -1, 1, 0, 0, 0);
      hs_comm_obs o = {.kind = HS_OP_APPLY, .worker = -1, .start = e.t - f->apply_time, .end = e.t,
                       .version = f->version};
      rc = f->pol->on_comm(f->state, &f->rt, &o);
      break;
    }
    case FK_TIMER:
      rc = f->pol->on_timer(f->state, &f->rt, e.tag);
      break;
    case FK_SLOW: {
      f->slow[w] = e.x;
      hs_cluster_obs o = {.kind = HS_CHANGE_SLOWDOWN, .worker = w, .slowdown = e.x, .comm_slowdown = 1};
      rc = f->pol->on_cluster ? f->pol->on_cluster(f->state, &f->rt, &o) : 0;
      break;
    }
    }
  }
  return rc ? rc : f->error;
}

static inline void fake_close(fake_rt *f) {
  if (f->pol && f->pol->fini) f->pol->fini(f->state, &f->rt);
  free(f->state);
  free(f->ev);
  free(f->log);
}

#endif
