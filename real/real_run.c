/* The real runtime: see real_run.h for the contract and the numerics. */
#define _GNU_SOURCE
#include "real/real_run.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_affinity.h"
#include "nn/nn_eval.h"
#include "nn/nn_net.h"
#include "real/real_worker.h"
#include "runtime/rt_model.h"
#include "runtime/rt_runtime.h"

typedef enum item_kind {
  IT_COMPUTE = 0,
  IT_LOCAL = 1,
  IT_ALLREDUCE = 2,
  IT_PUSH = 3,       /* worker: send its update to the server */
  IT_PULL = 4,       /* worker: receive the global model */
  IT_SRV_PUSH = 5,   /* server: receive a push and apply or accumulate it */
  IT_SRV_PULL = 6,   /* server: send the global model */
  IT_SRV_APPLY = 7   /* server: apply the accumulated pushes */
} item_kind;

/* One communication the policy issued; shared by the items of every lane it involves. */
typedef struct rop {
  uint64_t id;
  hs_comm_kind kind;
  hs_comm_what what;
  hs_ps_mode ps_mode;
  int worker;
  int n;                   /* all-reduce participants */
  int *ws;
  double *wts;             /* normalised weights */
  int left;                /* participants still to finish */
  int global_done;         /* the first participant has claimed the global update */
  int global_applied;      /* ... and finished it */
  double lr;
  double weight;           /* push: the server scales the update by it (hs_comm_opts.weight) */
  int batch;               /* push: the pushing worker's last batch */
  uint64_t version;        /* push: worker's version at issue; pull: global version sent;
                              all-reduce: the global version its update applied to */
  int64_t step;            /* push: the pushing worker's step */
  double start;            /* s */
  uint64_t tag;
  struct rop *next;        /* the runtime's list of live operations */
} rop;

typedef struct item {
  item_kind kind;
  int batch;
  uint64_t tag;
  rop *op;
  struct item *next;
} item;

typedef struct lane {
  pthread_t th;
  pthread_cond_t cv;       /* the lane's own wake-up: work queued, or the end of the run */
  int started, busy;
  item *head, *tail;
} lane;

typedef struct rworker {
  lane ln;
  hs_real_worker tw;       /* its net, its shard, its batch buffers (real_worker.h) */
  float *host, *base;      /* P floats each: scratch, and the model at the last sync */
  double slowdown, lr;
  int active, computing, in_step, last_batch; /* computing: a step is queued or running */
  uint64_t version;
  /* net_synced: the net's parameters are the global model of `version` (taken, pulled or
   * updated in place since, no local update), so a host-buffer all-reduce of gradients can
   * apply the update to them in place instead of copying the global model in. base_stale:
   * `base` (the model at the last sync) is the net's parameters, not yet copied out; it is
   * copied before they change or are read as the base. */
  int net_synced, base_stale;
  /* the open step record */
  int rec_open;
  hs_step_row rec;
  double rec_comm, prev_end;
  int64_t steps, samples;
  int initial_batch;
  double busy, comm, joined_at, left_at;
} rworker;

typedef struct pending_eval {
  double time_s;
  int64_t step;
  float *model;
  struct pending_eval *next;
} pending_eval;

typedef struct real {
  hs_runtime rt;           /* first member: the policy sees only this */
  const hs_real_config *cfg;
  hs_diag diag;
  pthread_mutex_t mu;
  pthread_cond_t cv;       /* waits for global_busy to clear */
  /* The calling thread's (watch): timers, online evaluations, a stall, the end. Its own, so
   * that the lanes' traffic does not wake it: woken at every item a lane finished, it was a
   * third thread on the workers' CPUs several times per round. */
  pthread_cond_t watch_cv;
  hs_real_comm *comm;
  int n;
  int64_t P;               /* parameters */
  rworker *w;
  lane srv;
  float *srv_buf;
  hs_runtime_model gm;     /* the global model and the server's accumulator (rt_model.h) */
  int global_busy;         /* an all-reduce's first participant updates `global` outside mu */
  double global_lr;
  uint64_t version, next_op;
  int64_t iterations, samples, last_eval;
  double samples_target, t0, end;
  int done, failed, stalled;
  void *pstate;
  rop *ops;
  hs_runtime_timers timers;
  pending_eval *evals, *evals_tail;
  int64_t n_evals;         /* queued evaluations */
  hs_net *eval_net;
  double last_loss, last_acc, target_time;
  double probe_t0, probe_k;
  hs_cpus cpus;            /* the CPUs the run may use; worker i's lane is pinned to the i-th */
  int pin;                 /* hs_real_pins */
} real;

static real *R(hs_runtime *rt) { return (real *)rt; }
static int all_idle(const real *s);

/* Waits while an all-reduce's first participant updates the global model outside the lock
 * (mu held): everything that reads or writes `global` under mu calls it first. */
static void global_wait(real *s) {
  while (s->global_busy) pthread_cond_wait(&s->cv, &s->mu);
}

/* Queued models beyond this many bytes are evaluated during the run. */
static const double EVAL_DEFER_BYTES = 256.0 * 1024 * 1024;

/* Whether the watcher evaluates queued models during the run (mu held). An evaluation only
 * reads the model copied at its update, so its result and time stamp do not depend on when it
 * runs: it is deferred to the end of the run, where it does not take a core from the workers,
 * unless a target loss needs it now or the queued copies grow too large. */
static int eval_online(const real *s) {
  return s->cfg->target_loss > 0 || s->cfg->target_accuracy > 0 || (double)s->n_evals * (double)s->P * sizeof(float) > EVAL_DEFER_BYTES;
}

static double mono(void) { return hs_real_mono(); }

static double now_of(const real *s) { return mono() - s->t0; }

static int fail(real *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(real *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hs_diag_vset(&s->diag, code, fmt, ap);
  va_end(ap);
  return code;
}

/* Ends the run (with mu held): wakes every lane and every communication wait. */
static void finish_run(real *s) {
  if (!s->done) {
    s->done = 1;
    s->end = now_of(s);
  }
  pthread_cond_broadcast(&s->cv);
  pthread_cond_signal(&s->watch_cv);
  for (int i = 0; s->w && i < s->n; i++) pthread_cond_signal(&s->w[i].ln.cv);
  pthread_cond_signal(&s->srv.cv);
  if (s->comm) s->cfg->comm->abort(s->comm);
}

/* Records the first failure (with mu held) and ends the run. An error that only reports the
 * abort of an already finished run is not a failure. */
static void lane_failed(real *s, int rc, const hs_diag *d) {
  if (s->done && rc == HS_EINTR) return;
  if (!s->failed) {
    s->failed = 1;
    s->diag = *d;
    s->diag.code = rc;
  }
  finish_run(s);
}

/* --- records ------------------------------------------------------------------------------- */

static int flush_record(real *s, int w) {
  rworker *x = &s->w[w];
  if (!x->rec_open) return 0;
  x->rec_open = 0;
  hs_step_row row = x->rec;
  hs_runtime_close_row(&row, &x->prev_end, x->rec_comm);
  if (!s->cfg->sink) return 0;
  int rc = s->cfg->sink(s->cfg->sink_ctx, &row, &s->diag);
  if (rc && !s->diag.msg[0]) fail(s, rc, "could not store step %lld of worker %d", (long long)row.step, w);
  return rc;
}

/* --- policy delivery (mu held) ----------------------------------------------------------- */

static int policy_rc(real *s, int rc) {
  if (rc >= 0) return 0;
  hs_runtime_policy_failed(&s->diag, s->cfg->policy->name, rc);
  s->failed = 1;
  s->diag.code = rc;
  finish_run(s);
  return rc;
}

static void deliver_comm(real *s, hs_comm_kind kind, int w, double start, int stale, uint64_t tag) {
  if (s->done || !s->cfg->policy->on_comm) return;
  hs_comm_obs o = {.kind = kind, .worker = w, .start = start, .end = now_of(s),
                   .version = s->version, .staleness = stale, .tag = tag};
  policy_rc(s, s->cfg->policy->on_comm(s->pstate, &s->rt, &o));
}

/* One update of the global model (mu held): counts it, queues an evaluation when one is due,
 * and checks the stop conditions. */
static void global_update(real *s) {
  s->version++;
  s->iterations++;
  const hs_real_config *c = s->cfg;
  double t = now_of(s);
  if (c->test && c->eval_every > 0 && s->iterations % c->eval_every == 0) {
    pending_eval *e = calloc(1, sizeof *e);
    if (e) e->model = malloc((size_t)s->P * sizeof *e->model);
    if (!e || !e->model) {
      if (e) free(e);
      fail(s, HS_ENOMEM, "out of memory for an evaluation");
      s->failed = 1;
      finish_run(s);
      return;
    }
    memcpy(e->model, s->gm.global, (size_t)s->P * sizeof *e->model);
    e->time_s = t;
    e->step = s->iterations;
    if (s->evals_tail) s->evals_tail->next = e;
    else s->evals = e;
    s->evals_tail = e;
    s->n_evals++;
    if (eval_online(s)) pthread_cond_signal(&s->watch_cv);
  }
  if (hs_runtime_limit_reached(c->max_iterations, s->iterations, s->samples_target, s->samples, c->max_time, t))
    finish_run(s);
}

/* --- rop list -------------------------------------------------------------------------------- */

static rop *op_new(real *s, hs_comm_kind kind, const hs_comm_opts *o) {
  rop *op = calloc(1, sizeof *op);
  if (!op) {
    fail(s, HS_ENOMEM, "out of memory for a communication record");
    return NULL;
  }
  op->id = ++s->next_op;
  op->kind = kind;
  op->what = o ? o->what : HS_COMM_GRAD;
  op->ps_mode = o ? o->ps_mode : HS_PS_APPLY;
  op->tag = o ? o->tag : 0;
  op->weight = o && o->weight > 0 ? o->weight : 1.0;
  op->start = now_of(s);
  op->next = s->ops;
  s->ops = op;
  return op;
}

static void op_free(real *s, rop *op) {
  for (rop **p = &s->ops; *p; p = &(*p)->next)
    if (*p == op) {
      *p = op->next;
      break;
    }
  free(op->ws);
  free(op->wts);
  free(op);
}

static int enqueue(real *s, lane *l, item_kind kind, int batch, uint64_t tag, rop *op) {
  item *it = calloc(1, sizeof *it);
  if (!it) return fail(s, HS_ENOMEM, "out of memory for a queued action");
  it->kind = kind;
  it->batch = batch;
  it->tag = tag;
  it->op = op;
  if (l->tail) l->tail->next = it;
  else l->head = it;
  l->tail = it;
  pthread_cond_signal(&l->cv);
  return 0;
}

/* --- runtime operations (called by the policy, mu held) ----------------------------------- */

static double rt_now(hs_runtime *rt) { return now_of(R(rt)); }
static int rt_n_workers(hs_runtime *rt) { return R(rt)->n; }
static int rt_active(hs_runtime *rt, int w) {
  real *s = R(rt);
  return w >= 0 && w < s->n && s->w[w].active;
}
static int64_t rt_global_batch(hs_runtime *rt) { return R(rt)->cfg->global_batch; }
static double rt_predict(hs_runtime *rt, int w, int batch) {
  real *s = R(rt);
  return w >= 0 && w < s->n ? hs_runtime_predict(s->cfg->perf, s->probe_t0, s->probe_k, s->w[w].slowdown, batch)
                            : NAN;
}
static uint64_t rt_version(hs_runtime *rt) { return R(rt)->version; }
static uint64_t rt_worker_version(hs_runtime *rt, int w) {
  real *s = R(rt);
  return w >= 0 && w < s->n ? s->w[w].version : 0;
}
static uint64_t rt_seed(hs_runtime *rt) { return R(rt)->cfg->seed; }
static hs_diag *rt_diag(hs_runtime *rt) { return &R(rt)->diag; }

/* The checks of rt_runtime.h write the runtime's diagnostic directly, as fail() does. */
static int check_worker(real *s, int w, const char *what) {
  return hs_runtime_check_worker(&s->diag, s->cfg->policy->name, what, w, s->n);
}

static int rt_compute(hs_runtime *rt, int w, int batch, uint64_t tag) {
  real *s = R(rt);
  int rc = check_worker(s, w, "compute");
  if (rc) return rc;
  rworker *x = &s->w[w];
  if ((rc = hs_runtime_check_compute(&s->diag, s->cfg->policy->name, w, x->active, x->computing, batch)))
    return rc;
  x->computing = 1;
  x->last_batch = batch;
  return enqueue(s, &x->ln, IT_COMPUTE, batch, tag, NULL);
}

static int rt_local_update(hs_runtime *rt, int w) {
  real *s = R(rt);
  int rc = check_worker(s, w, "local update");
  return rc ? rc : enqueue(s, &s->w[w].ln, IT_LOCAL, 0, 0, NULL);
}

static int rt_allreduce(hs_runtime *rt, const int *ws, int n, const double *weights, const hs_comm_opts *o) {
  real *s = R(rt);
  const char *name = s->cfg->policy->name;
  int rc = hs_runtime_check_allreduce(&s->diag, name, n);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    if ((rc = check_worker(s, ws[i], "all-reduce"))) return rc;
    double v = weights ? weights[i] : (double)s->w[ws[i]].last_batch;
    if ((rc = hs_runtime_check_weight(&s->diag, name, i, v))) return rc;
  }
  rop *op = op_new(s, HS_OP_ALLREDUCE, o);
  if (!op) return HS_ENOMEM;
  op->worker = -1;
  op->n = op->left = n;
  op->ws = malloc((size_t)n * sizeof *op->ws);
  op->wts = malloc((size_t)n * sizeof *op->wts);
  if (!op->ws || !op->wts) return fail(s, HS_ENOMEM, "out of memory for an all-reduce");
  for (int i = 0; i < n; i++) {
    op->ws[i] = ws[i];
    op->wts[i] = weights ? weights[i] : (double)s->w[ws[i]].last_batch;
  }
  hs_runtime_weights(op->wts, n);
  op->lr = s->w[ws[0]].lr;
  for (int i = 0; i < n; i++)
    if ((rc = enqueue(s, &s->w[ws[i]].ln, IT_ALLREDUCE, 0, 0, op))) return rc;
  return 0;
}

static int rt_push(hs_runtime *rt, int w, const hs_comm_opts *o) {
  real *s = R(rt);
  int rc = check_worker(s, w, "push");
  if (rc) return rc;
  rop *op = op_new(s, HS_OP_PUSH, o);
  if (!op) return HS_ENOMEM;
  rworker *x = &s->w[w];
  op->worker = w;
  op->lr = x->lr;
  op->batch = x->last_batch > 0 ? x->last_batch : 1;
  op->version = x->version;
  op->step = x->steps;
  if ((rc = enqueue(s, &x->ln, IT_PUSH, 0, 0, op))) return rc;
  return enqueue(s, &s->srv, IT_SRV_PUSH, 0, 0, op);
}

static int rt_pull(hs_runtime *rt, int w, const hs_comm_opts *o) {
  real *s = R(rt);
  int rc = check_worker(s, w, "pull");
  if (rc) return rc;
  rop *op = op_new(s, HS_OP_PULL, o);
  if (!op) return HS_ENOMEM;
  op->worker = w;
  if ((rc = enqueue(s, &s->srv, IT_SRV_PULL, 0, 0, op))) return rc;
  return enqueue(s, &s->w[w].ln, IT_PULL, 0, 0, op);
}

static int rt_apply(hs_runtime *rt, const hs_comm_opts *o) {
  real *s = R(rt);
  rop *op = op_new(s, HS_OP_APPLY, o);
  if (!op) return HS_ENOMEM;
  op->worker = -1;
  op->lr = s->global_lr;
  return enqueue(s, &s->srv, IT_SRV_APPLY, 0, 0, op);
}

static int add_timer(real *s, double at, int cluster_event, uint64_t tag) {
  int rc = hs_runtime_timers_add(&s->timers, at, cluster_event, tag, &s->diag);
  if (!rc) pthread_cond_signal(&s->watch_cv);
  return rc;
}

static int rt_timer(hs_runtime *rt, double delay, uint64_t tag) {
  real *s = R(rt);
  int rc = hs_runtime_check_timer(&s->diag, s->cfg->policy->name, delay);
  return rc ? rc : add_timer(s, now_of(s) + delay, -1, tag);
}

static int rt_set_lr(hs_runtime *rt, int w, double lr) {
  real *s = R(rt);
  int rc = hs_runtime_check_lr(&s->diag, s->cfg->policy->name, w, s->n, lr);
  if (rc) return rc;
  if (w == -1) {
    s->global_lr = lr;
    for (int i = 0; i < s->n; i++) s->w[i].lr = lr;
  } else {
    s->w[w].lr = lr;
  }
  return 0;
}

static const hs_runtime_ops real_ops = {
    .version = HS_RUNTIME_VERSION,
    .now = rt_now,
    .n_workers = rt_n_workers,
    .active = rt_active,
    .global_batch = rt_global_batch,
    .max_batch = hs_runtime_no_max_batch,
    .predict_compute = rt_predict,
    .model_version = rt_version,
    .worker_version = rt_worker_version,
    .seed = rt_seed,
    .compute = rt_compute,
    .local_update = rt_local_update,
    .allreduce = rt_allreduce,
    .push = rt_push,
    .apply = rt_apply,
    .pull = rt_pull,
    .timer = rt_timer,
    .set_lr = rt_set_lr,
    .diag = rt_diag,
};

/* --- lane work ------------------------------------------------------------------------------ */

/* Whether a worker's emulated-slowdown sleep should end early: the run ended (its --time, a
 * failure elsewhere) or the stop flag (SIGINT) is up. */
static int run_stopped(void *ctx) {
  real *s = ctx;
  if (s->cfg->stop && *s->cfg->stop) return 1;
  pthread_mutex_lock(&s->mu);
  int done = s->done;
  pthread_mutex_unlock(&s->mu);
  return done;
}

static int do_compute(real *s, int w, const item *it, hs_diag *d) {
  rworker *x = &s->w[w];
  pthread_mutex_lock(&s->mu);
  int rc = flush_record(s, w);
  double slow = x->slowdown > 1 ? x->slowdown : 1.0;
  double start = now_of(s);
  x->rec_open = 1;
  x->rec = (hs_step_row){.worker = w, .step = x->steps, .batch = it->batch, .start_s = start,
                         .model_version = (int64_t)x->version, .loss = NAN};
  x->rec_comm = 0;
  x->in_step = 1;
  if (!x->initial_batch) x->initial_batch = it->batch;
  pthread_mutex_unlock(&s->mu);
  if (rc) return hs_diag_set(d, rc, "%s", s->diag.msg);
  double loss = NAN;
  double t0 = mono();
  if ((rc = hs_real_worker_step(&x->tw, s->cfg->train, it->batch, &loss, d))) return rc;
  double tc = mono() - t0;
  /* The emulated slowdown: the step lasts slow * tc. */
  double timeout = s->cfg->timeout_s > 0 ? s->cfg->timeout_s : 60;
  if ((rc = hs_real_sleep(slow, (slow - 1.0) * tc, timeout, run_stopped, s, d))) return rc;
  pthread_mutex_lock(&s->mu);
  double end = now_of(s);
  x->computing = 0;
  x->in_step = 0;
  x->rec.compute_end_s = end;
  x->rec.comm_end_s = end;
  x->rec.loss = loss;
  x->busy += end - start;
  x->steps++;
  x->samples += it->batch;
  s->samples += it->batch;
  if (!s->done && s->cfg->policy->on_compute) {
    hs_step_obs o = {.worker = w, .batch = it->batch, .start = start, .end = end,
                     .duration = end - start, .loss = loss, .tag = it->tag};
    policy_rc(s, s->cfg->policy->on_compute(s->pstate, &s->rt, &o));
  }
  pthread_mutex_unlock(&s->mu);
  return 0;
}

/* Copies the net's parameters out as the base when they stand for it (lane thread, before
 * they change or the base is read). */
static int settle_base(rworker *x, hs_diag *d) {
  if (!x->base_stale) return 0;
  x->base_stale = 0;
  return hs_net_get_params(x->tw.net, x->base, d);
}

static int do_local(real *s, int w, hs_diag *d) {
  rworker *x = &s->w[w];
  int rc = settle_base(x, d);
  if (rc) return rc;
  pthread_mutex_lock(&s->mu);
  hs_sgd opt = {.lr = x->lr, .momentum = 0, .weight_decay = 0};
  x->net_synced = 0;
  pthread_mutex_unlock(&s->mu);
  return hs_net_update(x->tw.net, &opt, d);
}

/* Marks the communication time of a worker's open record (mu held). */
static void comm_done(real *s, rworker *x, double start, double end) {
  x->comm += end - start;
  if (x->rec_open) {
    x->rec_comm += end - start;
    x->rec.comm_end_s = end;
  }
  (void)s;
}

/* The worker takes the global model (mu held); the net's parameters then stand for the base. */
static int take_global(real *s, rworker *x, hs_diag *d) {
  global_wait(s);
  int rc = hs_net_set_params(x->tw.net, s->gm.global, d);
  if (rc) return rc;
  x->version = s->version;
  x->net_synced = 1;
  x->base_stale = 1;
  return 0;
}

static int do_allreduce(real *s, int w, rop *op, hs_diag *d) {
  rworker *x = &s->w[w];
  int me = 0;
  while (op->ws[me] != w) me++;
  const hs_real_comm_ops *cm = s->cfg->comm;
  double start = now_of(s);
  float *buf = op->what == HS_COMM_GRAD ? hs_net_grads(x->tw.net) : hs_net_params(x->tw.net);
  int rc = cm->allreduce(s->comm, op->id, w, buf, s->P, op->ws, op->n, op->wts, d);
  if (rc) return rc;
  /* The reduced vector, in host memory: a host backend's buffer is the net's own (read in
   * place, no copy); a device backend's is copied out. */
  const float *red = buf;
  if (cm->device_buffers) {
    rc = op->what == HS_COMM_GRAD ? hs_net_get_grads(x->tw.net, x->host, d) : hs_net_get_params(x->tw.net, x->host, d);
    if (rc) return rc;
    red = x->host;
  }
  /* A host net that holds the model the update applies to updates its own parameters with it
   * instead of copying the global model in (`own`). */
  int host_grad = op->what == HS_COMM_GRAD && !cm->device_buffers;
  float *own = hs_net_params(x->tw.net);
  pthread_mutex_lock(&s->mu);
  int updated = 0;
  if (!op->global_done) {
    /* The first participant updates the global model, outside the lock (global_busy keeps
     * every other reader and writer of it waiting), and its own parameters in the same pass
     * when they hold the same model; the others go on to their own in-place update meanwhile
     * instead of waiting for the lock. */
    global_wait(s); /* another operation's update */
    op->global_done = 1;
    op->version = s->version; /* the version the update applies to */
    int fuse = host_grad && x->net_synced && x->version == s->version;
    s->global_busy = 1;
    pthread_mutex_unlock(&s->mu);
    /* rt_model's one expression, so that the global model and every net updated in place
     * round alike and stay bit-identical. */
    hs_runtime_model_allreduced(&s->gm, op->what, red, op->lr, fuse ? own : NULL);
    pthread_mutex_lock(&s->mu);
    s->global_busy = 0;
    op->global_applied = 1;
    pthread_cond_broadcast(&s->cv);
    global_update(s);
    if (fuse) {
      x->version = s->version;
      x->base_stale = 1; /* as take_global: the updated parameters stand for the base */
      updated = 1;
    }
  }
  /* The update applies to version op->version; no other may have come since (the first
   * participant's own is counted once it is applied). */
  int in_place = !updated && host_grad && x->net_synced && x->version == op->version &&
                 s->version == op->version + (op->global_applied ? 1 : 0);
  if (in_place) {
    x->base_stale = 1;
    pthread_mutex_unlock(&s->mu);
    hs_runtime_vec_sgd(own, NULL, red, (float)op->lr, s->P);
    pthread_mutex_lock(&s->mu);
    /* The worker's version moves past the global one only once that one is there (a policy
     * may read both; staleness is their difference). global_done is set, so global_busy
     * clear means the first participant's update is applied. */
    global_wait(s);
    x->version = op->version + 1;
  } else if (!updated) {
    /* hs_comm_opts.keep_local (x_i <- avg + (x_i - x_i at begin)) needs no arithmetic here:
     * the lane runs nothing else between taking this worker's model and this point, so its
     * progress since the operation began is zero and the average is the result. */
    rc = take_global(s, x, d);
  }
  comm_done(s, x, start, now_of(s));
  if (!rc && --op->left == 0) {
    double first = op->start;
    uint64_t tag = op->tag;
    op_free(s, op);
    deliver_comm(s, HS_OP_ALLREDUCE, -1, first, 0, tag);
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static int do_push(real *s, int w, rop *op, hs_diag *d) {
  rworker *x = &s->w[w];
  int rc = 0;
  const float *msg = x->host;
  if (op->what == HS_COMM_GRAD) {
    /* A host net's gradient is sent from where it is. */
    if (s->cfg->comm->device_buffers) rc = hs_net_get_grads(x->tw.net, x->host, d);
    else msg = hs_net_grads(x->tw.net);
  } else {
    /* The progress since the last sync or push; the base moves to the model sent. */
    rc = settle_base(x, d);
    if (!rc) rc = hs_net_get_params(x->tw.net, x->host, d);
    if (!rc) hs_runtime_model_delta(x->host, x->host, x->base, s->P);
  }
  if (rc) return rc;
  double start = now_of(s);
  rc = s->cfg->comm->send(s->comm, w, s->n, op->id, msg, s->P, d);
  pthread_mutex_lock(&s->mu);
  comm_done(s, x, start, now_of(s));
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static int do_srv_push(real *s, rop *op, hs_diag *d) {
  int rc = s->cfg->comm->recv(s->comm, s->n, op->worker, op->id, s->srv_buf, s->P, d);
  if (rc) return rc;
  /* The pass over the parameters runs outside the lock, so that the workers' lanes do not
   * wait for it to record a step or start one: global_busy keeps every other reader and
   * writer of the global model waiting meanwhile, as during an all-reduce's update, and the
   * accumulator is the server lane's alone (every IT_SRV_* item runs on that lane). */
  pthread_mutex_lock(&s->mu);
  global_wait(s);
  int stale = 0, apply = op->ps_mode == HS_PS_APPLY;
  if (apply) {
    stale = (int)(s->version - op->version);
    s->global_busy = 1;
  }
  pthread_mutex_unlock(&s->mu);
  hs_runtime_model_push(&s->gm, op->what, op->ps_mode, s->srv_buf, (double)op->batch, op->weight, op->lr);
  pthread_mutex_lock(&s->mu);
  if (apply) {
    s->global_busy = 0;
    pthread_cond_broadcast(&s->cv);
    global_update(s);
  }
  rworker *x = &s->w[op->worker];
  double now = now_of(s);
  if (x->rec_open && x->rec.step == op->step) {
    x->rec.comm_end_s = now;
    x->rec.staleness = stale;
  }
  int w = op->worker;
  double start = op->start;
  uint64_t tag = op->tag;
  op_free(s, op);
  deliver_comm(s, HS_OP_PUSH, w, start, stale, tag);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

static int do_srv_pull(real *s, rop *op, hs_diag *d) {
  /* The global model is sent from where it is, outside the lock: global_busy keeps every
   * writer (and reader) of it waiting meanwhile, as during an all-reduce's update. A send is
   * done with its buffer when it returns (real_comm.h), so the model may change after. */
  pthread_mutex_lock(&s->mu);
  global_wait(s);
  op->version = s->version;
  s->global_busy = 1;
  pthread_mutex_unlock(&s->mu);
  int rc = s->cfg->comm->send(s->comm, s->n, op->worker, op->id, s->gm.global, s->P, d);
  pthread_mutex_lock(&s->mu);
  s->global_busy = 0;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static int do_pull(real *s, int w, rop *op, hs_diag *d) {
  rworker *x = &s->w[w];
  double start = now_of(s);
  /* A host net receives the model straight into its parameters, which then stand for the base. */
  int host = !s->cfg->comm->device_buffers;
  int rc = s->cfg->comm->recv(s->comm, w, s->n, op->id, host ? hs_net_params(x->tw.net) : x->host, s->P, d);
  if (!rc && !host) rc = hs_net_set_params(x->tw.net, x->host, d);
  if (rc) return rc;
  pthread_mutex_lock(&s->mu);
  x->version = op->version;
  x->net_synced = 1;
  x->base_stale = 1;
  comm_done(s, x, start, now_of(s));
  double first = op->start;
  uint64_t tag = op->tag;
  op_free(s, op);
  deliver_comm(s, HS_OP_PULL, w, first, 0, tag);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

static int do_srv_apply(real *s, rop *op) {
  /* Outside the lock under global_busy, as do_srv_push's pass. */
  pthread_mutex_lock(&s->mu);
  global_wait(s);
  s->global_busy = 1;
  pthread_mutex_unlock(&s->mu);
  hs_runtime_model_apply(&s->gm, op->lr);
  pthread_mutex_lock(&s->mu);
  s->global_busy = 0;
  pthread_cond_broadcast(&s->cv);
  global_update(s);
  double start = op->start;
  uint64_t tag = op->tag;
  op_free(s, op);
  deliver_comm(s, HS_OP_APPLY, -1, start, 0, tag);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

typedef struct lane_arg {
  real *s;
  int rank; /* worker index, or n for the server */
} lane_arg;

static void *lane_main(void *p) {
  lane_arg *a = p;
  real *s = a->s;
  int rank = a->rank;
  lane *l = rank < s->n ? &s->w[rank].ln : &s->srv;
  if (s->pin && rank < s->n) hs_pin_self(&s->cpus, rank); /* the server's lane floats */
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!l->head && !s->done) pthread_cond_wait(&l->cv, &s->mu);
    if (s->done) break;
    item *it = l->head;
    l->head = it->next;
    if (!l->head) l->tail = NULL;
    l->busy = 1;
    pthread_mutex_unlock(&s->mu);
    hs_diag d = {0};
    int rc = 0;
    switch (it->kind) {
    case IT_COMPUTE: rc = do_compute(s, rank, it, &d); break;
    case IT_LOCAL: rc = do_local(s, rank, &d); break;
    case IT_ALLREDUCE: rc = do_allreduce(s, rank, it->op, &d); break;
    case IT_PUSH: rc = do_push(s, rank, it->op, &d); break;
    case IT_PULL: rc = do_pull(s, rank, it->op, &d); break;
    case IT_SRV_PUSH: rc = do_srv_push(s, it->op, &d); break;
    case IT_SRV_PULL: rc = do_srv_pull(s, it->op, &d); break;
    case IT_SRV_APPLY: rc = do_srv_apply(s, it->op); break;
    }
    free(it);
    pthread_mutex_lock(&s->mu);
    l->busy = 0;
    if (rc) {
      /* hs_diag_prefix adds the ": " itself. */
      if (rank < s->n) hs_diag_prefix(&d, "worker %d", rank);
      else hs_diag_prefix(&d, "parameter server");
      lane_failed(s, rc, &d);
    }
    if (all_idle(s)) pthread_cond_signal(&s->watch_cv); /* a stall, unless a timer is due */
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* --- evaluation, timers, cluster events (calling thread) ------------------------------------ */

/* Stores an evaluation and checks the target (mu held). */
static int record_eval(real *s, double t, int64_t step, double loss, double acc) {
  s->last_eval = step;
  s->last_loss = loss;
  s->last_acc = acc;
  const hs_real_config *c = s->cfg;
  if (c->eval_sink) {
    int rc = c->eval_sink(c->eval_ctx, t, step, loss, acc, &s->diag);
    if (rc) {
      if (!s->diag.msg[0]) fail(s, rc, "could not store the evaluation at step %lld", (long long)step);
      return rc;
    }
  }
  if (hs_runtime_target_met(c->target_loss, c->target_accuracy, loss, acc) && isnan(s->target_time)) {
    s->target_time = t;
    finish_run(s);
  }
  return 0;
}

static int on_cluster_event(real *s, int idx) {
  const hs_event_spec *e = &s->cfg->cluster->events[idx];
  if (e->worker < 0 || e->worker >= s->n) return fail(s, HS_EINVAL, "event %d: no worker %d", idx, e->worker);
  rworker *x = &s->w[e->worker];
  hs_cluster_obs o = {.worker = e->worker, .comm_slowdown = 1.0};
  if (e->kind == HS_EVENT_SLOWDOWN) {
    if (e->slowdown >= 0) x->slowdown = e->slowdown;
    o.kind = HS_CHANGE_SLOWDOWN;
  } else {
    if (!x->active) return 0;
    x->active = 0;
    x->left_at = now_of(s);
    o.kind = HS_CHANGE_LEAVE;
  }
  o.slowdown = x->slowdown;
  if (s->done || !s->cfg->policy->on_cluster) return 0;
  return policy_rc(s, s->cfg->policy->on_cluster(s->pstate, &s->rt, &o));
}

/* Fires due timers in (time, sequence) order (mu held). Returns the next due time or INFINITY. */
static double fire_timers(real *s) {
  for (;;) {
    if (s->done) return INFINITY;
    hs_runtime_timer t;
    double next;
    if (!hs_runtime_timers_pop(&s->timers, now_of(s), &t, &next)) return next;
    if (t.cluster_event >= 0) {
      int rc = on_cluster_event(s, t.cluster_event);
      if (rc) {
        s->failed = 1;
        finish_run(s);
      }
    } else if (s->cfg->policy->on_timer) {
      policy_rc(s, s->cfg->policy->on_timer(s->pstate, &s->rt, t.tag));
    }
  }
}

static int all_idle(const real *s) {
  if (s->srv.busy || s->srv.head || s->timers.n || (s->evals && eval_online(s))) return 0;
  for (int i = 0; i < s->n; i++)
    if (s->w[i].ln.busy || s->w[i].ln.head) return 0;
  return 1;
}

/* The calling thread's loop: timers, evaluations, the stop flag, stalls. */
static void watch(real *s) {
  pthread_mutex_lock(&s->mu);
  while (!s->done) {
    double next = fire_timers(s);
    if (s->done) break;
    if (s->cfg->max_time > 0 && now_of(s) >= s->cfg->max_time) {
      finish_run(s);
      break;
    }
    if (s->cfg->stop && *s->cfg->stop) break;
    if (s->evals && eval_online(s)) {
      pending_eval *e = s->evals;
      s->evals = e->next;
      if (!s->evals) s->evals_tail = NULL;
      s->n_evals--;
      pthread_mutex_unlock(&s->mu);
      double loss = NAN, acc = NAN;
      hs_diag d = {0};
      int rc = hs_net_evaluate_params(s->eval_net, e->model, s->cfg->test, &loss, &acc, &d);
      pthread_mutex_lock(&s->mu);
      if (rc) lane_failed(s, rc, &d);
      else if (record_eval(s, e->time_s, e->step, loss, acc)) {
        s->failed = 1;
        finish_run(s);
      }
      free(e->model);
      free(e);
      continue;
    }
    if (all_idle(s)) {
      s->stalled = 1;
      finish_run(s);
      break;
    }
    /* Wake at the next timer, and at least every 50 ms for the stop flag. */
    double t = now_of(s), wake = fmin(next, t + 0.05);
    if (s->cfg->max_time > 0) wake = fmin(wake, s->cfg->max_time);
    struct timespec ts;
    double abs_t = s->t0 + wake;
    ts.tv_sec = (time_t)abs_t;
    ts.tv_nsec = (long)((abs_t - floor(abs_t)) * 1e9);
    pthread_cond_timedwait(&s->watch_cv, &s->mu, &ts);
  }
  if (!s->done) finish_run(s); /* interrupted */
  pthread_mutex_unlock(&s->mu);
}

/* --- set-up and the run ---------------------------------------------------------------------- */

static int setup(real *s, const hs_real_config *cfg, hs_shards *sh) {
  const hs_cluster_spec *spec = cfg->cluster;
  s->rt.ops = &real_ops;
  s->cfg = cfg;
  s->last_eval = -1;
  s->last_loss = s->last_acc = s->target_time = NAN;
  s->probe_t0 = s->probe_k = NAN;
  s->global_lr = cfg->lr;
  s->n = spec ? spec->n_workers : cfg->n_workers;
  if (s->n < 1) return fail(s, HS_EINVAL, "a real run needs at least one worker");
  if (cfg->global_batch < s->n)
    return fail(s, HS_EINVAL, "--global-batch %lld is smaller than the %d workers", (long long)cfg->global_batch, s->n);
  if (cfg->max_iterations <= 0 && cfg->max_epochs <= 0 && cfg->max_time <= 0 && !(cfg->target_loss > 0) &&
      !(cfg->target_accuracy > 0))
    return fail(s, HS_EINVAL, "no stop condition: give --iterations, --epochs, --time, --target-loss or --target-accuracy");
  if ((cfg->target_loss > 0 || cfg->target_accuracy > 0) && !cfg->test)
    return fail(s, HS_EINVAL, "a target loss or accuracy needs evaluations (a test set)");
  if (spec)
    for (int i = 0; i < spec->n_events; i++)
      if (spec->events[i].kind == HS_EVENT_JOIN)
        return fail(s, HS_EUNSUPPORTED, "%s:%d: a join event: workers joining mid-run are not supported in real mode yet",
                    spec->path, spec->events[i].pos.line);
  s->w = calloc((size_t)s->n, sizeof *s->w);
  if (!s->w) return fail(s, HS_ENOMEM, "out of memory for %d workers", s->n);
  for (int i = 0; i < s->n; i++) pthread_cond_init(&s->w[i].ln.cv, NULL);
  hs_net_options no = {.seed = cfg->seed, .max_batch = 0, .threads = 1};
  int rc;
  for (int i = 0; i < s->n; i++) {
    rworker *x = &s->w[i];
    x->active = 1;
    x->left_at = NAN;
    x->lr = cfg->lr;
    x->slowdown = spec ? spec->workers[i].slowdown : 1.0;
    const char *dev = cfg->worker_devices && cfg->worker_devices[i] ? cfg->worker_devices[i] : cfg->device;
    if ((rc = hs_net_open(&x->tw.net, dev, cfg->model, &no, &s->diag))) return rc;
    if (i == 0) s->P = hs_net_param_count(x->tw.net);
    x->host = malloc((size_t)s->P * sizeof *x->host);
    x->base = malloc((size_t)s->P * sizeof *x->base);
    if (!x->host || !x->base) return fail(s, HS_ENOMEM, "out of memory for worker %d's buffers", i);
    if ((rc = hs_data_iter_init(&x->tw.it, cfg->train, sh, i, 0, &s->diag))) return rc;
  }
  if ((rc = hs_runtime_model_open(&s->gm, s->P, &s->diag))) return rc;
  s->srv_buf = malloc((size_t)s->P * sizeof *s->srv_buf);
  if (!s->srv_buf) return fail(s, HS_ENOMEM, "out of memory for the parameter server's buffer");
  if ((rc = hs_net_get_params(s->w[0].tw.net, s->gm.global, &s->diag))) return rc;
  for (int i = 0; i < s->n; i++) memcpy(s->w[i].base, s->gm.global, (size_t)s->P * sizeof *s->gm.global);
  if (cfg->test && (rc = hs_net_open(&s->eval_net, cfg->device, cfg->model, &no, &s->diag))) return rc;
  s->samples_target = cfg->max_epochs > 0 ? cfg->max_epochs * (double)hs_data_count(cfg->train) : 0;
  if (!cfg->perf) {
    /* The probe restarts worker 0's iterator on the shards it was given. */
    if ((rc = hs_real_worker_probe(&s->w[0].tw, cfg->train, cfg->global_batch / s->n, &s->probe_t0, &s->probe_k,
                                   &s->diag)))
      return rc;
    if ((rc = hs_data_iter_init(&s->w[0].tw.it, cfg->train, sh, 0, 0, &s->diag))) return rc;
  }
  hs_real_comm_config cc = {.world = s->n + 1, .n = s->P, .timeout_s = cfg->timeout_s, .device = cfg->device};
  if ((rc = cfg->comm->open(&s->comm, &cc, &s->diag))) return rc;
  if (spec)
    for (int i = 0; i < spec->n_events; i++)
      if ((rc = add_timer(s, spec->events[i].at, i, 0))) return rc;
  s->pstate = calloc(1, cfg->policy->state_size ? cfg->policy->state_size : 1);
  if (!s->pstate) return fail(s, HS_ENOMEM, "out of memory for the policy's state");
  return 0;
}

static void teardown(real *s) {
  if (s->pstate && s->cfg->policy->fini) s->cfg->policy->fini(s->pstate, &s->rt);
  free(s->pstate);
  for (int i = 0; s->w && i < s->n; i++) {
    rworker *x = &s->w[i];
    while (x->ln.head) {
      item *it = x->ln.head;
      x->ln.head = it->next;
      free(it);
    }
    pthread_cond_destroy(&x->ln.cv);
    hs_net_close(x->tw.net);
    hs_real_worker_free(&x->tw);
    free(x->host);
    free(x->base);
  }
  while (s->srv.head) {
    item *it = s->srv.head;
    s->srv.head = it->next;
    free(it);
  }
  while (s->ops) op_free(s, s->ops);
  while (s->evals) {
    pending_eval *e = s->evals;
    s->evals = e->next;
    free(e->model);
    free(e);
  }
  if (s->comm) s->cfg->comm->close(s->comm);
  hs_net_close(s->eval_net);
  free(s->w);
  hs_runtime_model_close(&s->gm);
  free(s->srv_buf);
  hs_runtime_timers_free(&s->timers);
}

static int fill_result(real *s, hs_real_result *res) {
  double end = s->end;
  res->n_workers = s->n;
  res->probe_t0 = s->probe_t0;
  res->probe_k = s->probe_k;
  res->workers = calloc((size_t)s->n, sizeof *res->workers);
  if (!res->workers) return fail(s, HS_ENOMEM, "out of memory");
  double life_sum = 0, wait_sum = 0;
  int64_t steps = 0;
  for (int i = 0; i < s->n; i++) {
    rworker *x = &s->w[i];
    if (x->rec_open && !x->in_step) {
      int rc = flush_record(s, i);
      if (rc) return rc;
    }
    double until = isnan(x->left_at) ? end : fmin(end, x->left_at);
    double wait = until - x->busy - x->comm;
    if (wait < 0) wait = 0;
    life_sum += until;
    wait_sum += wait;
    steps += x->steps;
    res->workers[i] = (hs_real_worker_stats){.joined_at = 0, .left_at = x->left_at,
                                             .initial_batch = x->initial_batch, .steps = x->steps,
                                             .samples = x->samples, .busy_s = x->busy,
                                             .comm_s = x->comm, .wait_s = wait};
  }
  hs_summary *m = &res->summary;
  hs_runtime_summary(m, s->n, s->iterations, steps, s->samples, end);
  m->wait_fraction = life_sum > 0 ? fmin(1.0, wait_sum / life_sum) : NAN;
  m->final_loss = s->last_loss;
  m->final_accuracy = s->last_acc;
  m->time_to_target_s = s->target_time;
  return 0;
}

int hs_real_pins(const hs_real_config *cfg, int workers, hs_cpus *cpus) {
  if (cfg->pin != HS_PIN_AUTO || !cfg->device || strcmp(cfg->device, "cpu")) return 0;
  return hs_cpus_allowed(cpus) >= workers && workers > 1;
}

int hs_real_run(const hs_real_config *cfg, hs_real_result *res, hs_diag *d) {
  memset(res, 0, sizeof *res);
  real *s = calloc(1, sizeof *s);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  pthread_mutex_init(&s->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_cond_init(&s->watch_cv, &ca);
  pthread_cond_init(&s->srv.cv, NULL);
  pthread_condattr_destroy(&ca);
  hs_shards *sh = NULL;
  int rc = 0;
  int n = cfg->cluster ? cfg->cluster->n_workers : cfg->n_workers;
  if (!cfg->train) rc = fail(s, HS_EINVAL, "a real run needs a training set");
  else if (n >= 1) rc = hs_shards_open(&sh, hs_data_count(cfg->train), n, NULL, cfg->seed, &s->diag);
  if (!rc) rc = setup(s, cfg, sh);
  lane_arg *args = NULL;
  int started = 0;
  if (!rc && !(args = calloc((size_t)s->n + 1, sizeof *args))) rc = fail(s, HS_ENOMEM, "out of memory");
  if (!rc) {
    s->pin = hs_real_pins(cfg, s->n, &s->cpus);
    s->t0 = mono();
    for (int i = 0; i <= s->n && !rc; i++) {
      args[i] = (lane_arg){.s = s, .rank = i};
      lane *l = i < s->n ? &s->w[i].ln : &s->srv;
      if (pthread_create(&l->th, NULL, lane_main, &args[i])) rc = fail(s, HS_ERUNTIME, "could not start thread %d", i);
      else l->started = 1, started++;
    }
  }
  if (!rc) {
    pthread_mutex_lock(&s->mu);
    if (cfg->policy->init) rc = policy_rc(s, cfg->policy->init(s->pstate, &s->rt, cfg->params));
    if (!rc && cfg->policy->start) rc = policy_rc(s, cfg->policy->start(s->pstate, &s->rt));
    pthread_mutex_unlock(&s->mu);
    if (!rc) watch(s);
  }
  if (started) {
    pthread_mutex_lock(&s->mu);
    finish_run(s);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i <= s->n; i++) {
      lane *l = i < s->n ? &s->w[i].ln : &s->srv;
      if (l->started) pthread_join(l->th, NULL);
    }
  }
  free(args);
  if (!rc && s->failed) rc = s->diag.code ? s->diag.code : HS_ERUNTIME;
  res->status = s->stalled ? HS_REAL_STALLED : (cfg->stop && *cfg->stop) ? HS_REAL_INTERRUPTED : HS_REAL_COMPLETE;
  /* Evaluations deferred to the end, or queued before it and not yet reached, also after an
   * interruption: they are of models the run reached (the lanes are joined: no lock needed). */
  while (!rc && s->evals) {
    pending_eval *e = s->evals;
    s->evals = e->next;
    if (!s->evals) s->evals_tail = NULL;
    s->n_evals--;
    double loss, acc;
    if (!(rc = hs_net_evaluate_params(s->eval_net, e->model, cfg->test, &loss, &acc, &s->diag)) &&
        record_eval(s, e->time_s, e->step, loss, acc))
      rc = s->diag.code ? s->diag.code : HS_EDB;
    free(e->model);
    free(e);
  }
  if (!rc && cfg->test && s->eval_net && s->last_eval != s->iterations && res->status != HS_REAL_INTERRUPTED) {
    /* The final model is evaluated at the end unless the last update just was. */
    double loss, acc;
    if (!(rc = hs_net_evaluate_params(s->eval_net, s->gm.global, cfg->test, &loss, &acc, &s->diag)) &&
        record_eval(s, s->end, s->iterations, loss, acc))
      rc = s->diag.code ? s->diag.code : HS_EDB;
  }
  if (!rc || s->iterations > 0) {
    int frc = fill_result(s, res);
    if (!rc) rc = frc;
  }
  if (rc) {
    if (d) *d = s->diag;
    if (d && !d->msg[0]) hs_diag_set(d, rc, "real run failed (%s)", hs_strerror(rc));
    if (d) d->code = rc;
  }
  teardown(s);
  hs_shards_close(sh);
  pthread_cond_destroy(&s->cv);
  pthread_cond_destroy(&s->watch_cv);
  pthread_cond_destroy(&s->srv.cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
  return rc;
}

void hs_real_result_free(hs_real_result *res) {
  free(res->workers);
  res->workers = NULL;
}
