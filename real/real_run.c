/* The threads driver of the runtime core: see real_run.h for the contract and the numerics. */
#define _GNU_SOURCE
#include "real/real_run.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_affinity.h"
#include "core/core_deadline.h"
#include "nn/nn_eval.h"
#include "nn/nn_net.h"
#include "real/real_worker.h"
#include "runtime/rt_core.h"
#include "runtime/rt_evals.h"
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
  IT_SRV_APPLY = 7,  /* server: apply the accumulated pushes */
  IT_JOIN = 8        /* worker: take the global model, then join (a join event) */
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
  const hs_compressor *compressor; /* what is sent goes through it (hs_comm_opts), or NULL */
  double ratio;
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
  /* its step is running (the core's `computing`: queued or running); still set when it
   * finished after the end of the run: it was in progress then (rt_core.h's summary) */
  int in_step;
  /* net_synced: the net's parameters are the global model of the core's version of this
   * worker (taken, pulled or updated in place since, no local update), so a host-buffer
   * all-reduce of gradients can apply the update to them in place instead of copying the
   * global model in. base_stale: `base` (the model at the last sync) is the net's parameters,
   * not yet copied out; it is copied before they change or are read as the base. */
  int net_synced, base_stale;
  /* s, s/sample: the pre-run fit of its device (NaN when the config has perf); workers on
   * one device share the fit of the first of them (probe_devices) */
  double probe_t0, probe_k;
} rworker;

typedef struct real {
  hs_rt_core core;         /* first member: the runtime core (the policy sees its hs_runtime) */
  const hs_real_config *cfg;
  pthread_mutex_t mu;      /* serialises the core, the policy and the sinks */
  pthread_cond_t cv;       /* waits for global_busy to clear */
  /* The calling thread's (watch): timers, online evaluations, a stall, the end. Its own, so
   * that the lanes' traffic does not wake it: woken at every item a lane finished, it was a
   * third thread on the workers' CPUs several times per round. */
  pthread_cond_t watch_cv;
  hs_real_comm *comm;
  int64_t P;               /* parameters */
  /* Every worker the run will have: the cluster file's and one per join event, numbered as
   * the core numbers them (hs_cluster_all_workers). Their nets, buffers, data iterators and
   * lanes are made before the run; a joiner's enters the core at its event. The server's rank
   * is n_all. The data is sharded over the n_start workers at the start, and worker w reads
   * shard w mod n_start (a joiner shares a shard, as the simulator's proxy's joiners do). */
  int n_all, n_start;
  rworker *w;              /* beside the core's worker table, n_all of them */
  lane srv;
  float *srv_buf;
  hs_runtime_model gm;     /* the global model and the server's accumulator (rt_model.h) */
  int global_busy;         /* an all-reduce's first participant updates `global` outside mu */
  uint64_t next_op;
  double t0;
  int ended, stalled;      /* ended: the lanes and waits were told (finish_run) */
  rop *ops;
  hs_runtime_timers timers;
  hs_rt_evals evals;       /* models of the updates due an evaluation (rt_evals.h) */
  hs_net *eval_net;
  hs_cpus cpus;            /* the CPUs the run may use; worker i's lane is pinned to the i-th */
  int pin;                 /* hs_real_pins */
} real;

static real *R(hs_rt_core *c) { return (real *)c; }
static int all_idle(const real *s);

/* Waits while an all-reduce's first participant updates the global model outside the lock
 * (mu held): everything that reads or writes `global` under mu calls it first. */
static void global_wait(real *s) {
  while (s->global_busy) pthread_cond_wait(&s->cv, &s->mu);
}

static double mono(void) { return hs_real_mono(); }

static double now_of(const real *s) { return mono() - s->t0; }

/* Ends the run (with mu held): wakes every lane and every communication wait. */
static void finish_run(real *s) {
  hs_rt_core_stop(&s->core, now_of(s));
  s->ended = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_cond_signal(&s->watch_cv);
  for (int i = 0; s->w && i < s->n_all; i++) pthread_cond_signal(&s->w[i].ln.cv);
  pthread_cond_signal(&s->srv.cv);
  if (s->comm) s->cfg->comm->abort(s->comm);
}

/* After a call into the core (mu held): a failure (rc != 0, the message in the core's diag)
 * fails the run, and a stop condition the core reached ends it. Returns rc. */
static int settle(real *s, int rc) {
  hs_rt_core_settle(&s->core, rc);
  if (s->core.done && !s->ended) finish_run(s);
  return rc;
}

/* Records the first failure (with mu held) and ends the run. An error that only reports the
 * abort of an already finished run is not a failure. */
static void lane_failed(real *s, int rc, const hs_diag *d) {
  if (s->core.done && rc == HS_EINTR) return;
  if (!s->core.failed) s->core.diag = *d;
  settle(s, rc);
}

/* --- reports to the core (mu held) ------------------------------------------------------- */

static void deliver_comm(real *s, hs_comm_kind kind, int w, double start, int stale, uint64_t tag) {
  settle(s, hs_rt_core_comm_done(&s->core, kind, w, start, now_of(s), stale, tag));
}

/* The driver's snapshot: the global model of the update just counted is copied and queued for
 * evaluation (after the run, or by the watcher during it: hs_rt_evals_online). */
static int drv_snapshot(hs_rt_core *c, double t) {
  real *s = R(c);
  int rc = hs_rt_evals_keep(&s->evals, s->gm.global, t, c->iterations, &c->diag);
  if (!rc && hs_rt_evals_online(&s->evals)) pthread_cond_signal(&s->watch_cv);
  return rc;
}

/* One update of the global model (mu held): the core counts it, asks for the evaluation that
 * is due and checks the stop conditions. */
static void global_update(real *s) { settle(s, hs_rt_core_update(&s->core, now_of(s))); }

/* --- rop list -------------------------------------------------------------------------------- */

static rop *op_new(real *s, hs_comm_kind kind, const hs_comm_opts *o) {
  rop *op = calloc(1, sizeof *op);
  if (!op) {
    hs_rt_core_fail(&s->core, HS_ENOMEM, "out of memory for a communication record");
    return NULL;
  }
  op->id = ++s->next_op;
  op->kind = kind;
  op->what = o ? o->what : HS_COMM_GRAD;
  op->ps_mode = o ? o->ps_mode : HS_PS_APPLY;
  op->tag = o ? o->tag : 0;
  op->weight = o && o->weight > 0 ? o->weight : 1.0;
  op->compressor = o && o->ratio > 0 ? o->compressor : NULL;
  op->ratio = o ? o->ratio : 0;
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
  if (!it) return hs_rt_core_fail(&s->core, HS_ENOMEM, "out of memory for a queued action");
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

/* --- the driver table (rt_core.h): what the core asks of the threads (mu held) ------------- */

static double drv_now(hs_rt_core *c) { return now_of(R(c)); }
static double drv_predict(hs_rt_core *c, int w, int batch) {
  real *s = R(c);
  const hs_perf_model *own = s->cfg->worker_perf && w >= 0 ? s->cfg->worker_perf[w] : NULL;
  return hs_runtime_predict(own ? own : s->cfg->perf, s->w[w].probe_t0, s->w[w].probe_k, c->w[w].slowdown, batch);
}

static int drv_compute(hs_rt_core *c, int w, int batch) {
  real *s = R(c);
  return enqueue(s, &s->w[w].ln, IT_COMPUTE, batch, c->w[w].cur_tag, NULL);
}

static int drv_local_update(hs_rt_core *c, int w) {
  real *s = R(c);
  return enqueue(s, &s->w[w].ln, IT_LOCAL, 0, 0, NULL);
}

static int drv_allreduce(hs_rt_core *c, const int *ws, int n, const double *weights, const hs_comm_opts *o) {
  real *s = R(c);
  int rc;
  rop *op = op_new(s, HS_OP_ALLREDUCE, o);
  if (!op) return HS_ENOMEM;
  op->worker = -1;
  op->n = op->left = n;
  op->ws = malloc((size_t)n * sizeof *op->ws);
  op->wts = malloc((size_t)n * sizeof *op->wts);
  if (!op->ws || !op->wts) return hs_rt_core_fail(&s->core, HS_ENOMEM, "out of memory for an all-reduce");
  memcpy(op->ws, ws, (size_t)n * sizeof *ws);
  hs_rt_core_weights(c, ws, n, weights, op->wts);
  op->lr = c->w[ws[0]].lr;
  for (int i = 0; i < n; i++)
    if ((rc = enqueue(s, &s->w[ws[i]].ln, IT_ALLREDUCE, 0, 0, op))) return rc;
  return 0;
}

static int drv_push(hs_rt_core *c, int w, const hs_comm_opts *o) {
  real *s = R(c);
  int rc;
  rop *op = op_new(s, HS_OP_PUSH, o);
  if (!op) return HS_ENOMEM;
  hs_rt_worker *cw = &c->w[w];
  op->worker = w;
  op->lr = cw->lr;
  op->batch = cw->last_batch > 0 ? cw->last_batch : 1;
  op->version = cw->version;
  op->step = hs_rt_core_record_step(c, w);
  if ((rc = enqueue(s, &s->w[w].ln, IT_PUSH, 0, 0, op))) return rc;
  return enqueue(s, &s->srv, IT_SRV_PUSH, 0, 0, op);
}

static int drv_pull(hs_rt_core *c, int w, const hs_comm_opts *o) {
  real *s = R(c);
  int rc;
  rop *op = op_new(s, HS_OP_PULL, o);
  if (!op) return HS_ENOMEM;
  op->worker = w;
  if ((rc = enqueue(s, &s->srv, IT_SRV_PULL, 0, 0, op))) return rc;
  return enqueue(s, &s->w[w].ln, IT_PULL, 0, 0, op);
}

static int drv_apply(hs_rt_core *c, const hs_comm_opts *o) {
  real *s = R(c);
  rop *op = op_new(s, HS_OP_APPLY, o);
  if (!op) return HS_ENOMEM;
  op->worker = -1;
  op->lr = s->core.global_lr;
  return enqueue(s, &s->srv, IT_SRV_APPLY, 0, 0, op);
}

/* A join event (mu held, the watcher's thread): the next worker of the numbering enters the
 * core, joining but not active, at the global learning rate; its lane takes the global model
 * and then reports it joined (do_join). Its net, buffers, shard and lane were made before the
 * run (setup). */
static int drv_join(hs_rt_core *c, const hs_event_spec *e) {
  real *s = R(c);
  int w = hs_rt_core_add_joiner(c, e, s->n_all);
  return w < 0 ? w : enqueue(s, &s->w[w].ln, IT_JOIN, 0, 0, NULL);
}

/* Timers and cluster events wait in the runtime's heap; the watcher fires them. */
static int drv_wake_at(hs_rt_core *c, double t, hs_rt_wake_kind kind, int64_t arg) {
  real *s = R(c);
  int rc = hs_rt_core_timer_add(c, &s->timers, t, kind, arg);
  if (!rc) pthread_cond_signal(&s->watch_cv);
  return rc;
}

static const hs_rt_driver threads_driver = {
    .version = HS_RT_DRIVER_VERSION,
    .name = "threaded real",
    .compute = drv_compute,
    .local_update = drv_local_update,
    .allreduce = drv_allreduce,
    .push = drv_push,
    .pull = drv_pull,
    .apply = drv_apply,
    .snapshot = drv_snapshot,
    .wake_at = drv_wake_at,
    .now = drv_now,
    .predict = drv_predict,
    .set_lr = NULL, /* the core keeps the global learning rate (core.global_lr) */
    .slowdown = hs_rt_core_slowdown_compute_only,
    .join = drv_join,
    .caps = HS_REAL_THREADS_CAPS,
};

/* --- lane work ------------------------------------------------------------------------------ */

/* Whether a worker's emulated-slowdown sleep should end early: the run ended (its --time, a
 * failure elsewhere) or the stop flag (SIGINT) is up. */
static int run_stopped(void *ctx) {
  real *s = ctx;
  if (s->cfg->stop && *s->cfg->stop) return 1;
  pthread_mutex_lock(&s->mu);
  int done = s->core.done;
  pthread_mutex_unlock(&s->mu);
  return done;
}

static int do_compute(real *s, int w, const item *it, hs_diag *d) {
  rworker *x = &s->w[w];
  hs_rt_worker *cw = &s->core.w[w];
  /* The batch's set-up before the step's clock (real_worker.h): a policy that moves batches
   * (lbb) is shown the step. */
  int rc = hs_real_worker_ready(&x->tw, it->batch, d);
  if (rc) return rc;
  pthread_mutex_lock(&s->mu);
  double slow = cw->slowdown > 1 ? cw->slowdown : 1.0;
  double start = now_of(s);
  rc = hs_rt_core_record_open(&s->core, w, it->batch, start);
  x->in_step = 1;
  pthread_mutex_unlock(&s->mu);
  if (rc) return hs_diag_set(d, rc, "%s", s->core.diag.msg);
  double loss = NAN;
  double t0 = mono();
  if ((rc = hs_real_worker_step(&x->tw, s->cfg->train, it->batch, &loss, d))) return rc;
  double tc = mono() - t0;
  /* The emulated slowdown: the step lasts slow * tc. */
  double timeout = hs_real_timeout(s->cfg->timeout_s);
  if ((rc = hs_real_sleep(slow, (slow - 1.0) * tc, timeout, run_stopped, s, d))) return rc;
  pthread_mutex_lock(&s->mu);
  double end = now_of(s);
  /* A step that ends after the run did was in progress at its end (rt_core.h's summary): its
   * time up to the end is busy time, its record is not written, and it counts no samples. */
  if (!s->core.done) {
    x->in_step = 0;
    hs_rt_core_record_end(&s->core, w, end, loss);
    settle(s, hs_rt_core_compute_done(&s->core, w, it->batch, start, end, loss));
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
  hs_rt_worker *cw = &s->core.w[w];
  int rc = settle_base(x, d);
  if (rc) return rc;
  pthread_mutex_lock(&s->mu);
  hs_sgd opt = {.lr = cw->lr, .momentum = 0, .weight_decay = 0};
  x->net_synced = 0;
  pthread_mutex_unlock(&s->mu);
  return hs_net_update(x->tw.net, &opt, d);
}

/* Marks the communication time of a worker's open record (mu held). */
static void comm_done(real *s, int w, double start, double end) { hs_rt_core_record_comm(&s->core, w, end - start, end); }

/* The worker takes the global model (mu held, released during the copy); the net's parameters
 * then stand for the base. The copy (into a GPU's memory, 45 MB for resnet18) runs outside the
 * lock under global_busy, as do_srv_pull's send: every other reader and writer of the global
 * model waits, and the rest of the run (steps recorded, timers) goes on. */
static int take_global(real *s, int w, hs_diag *d) {
  rworker *x = &s->w[w];
  global_wait(s);
  uint64_t version = s->core.version; /* the global model's, which nothing changes meanwhile */
  s->global_busy = 1;
  pthread_mutex_unlock(&s->mu);
  int rc = hs_net_set_params(x->tw.net, s->gm.global, d);
  pthread_mutex_lock(&s->mu);
  s->global_busy = 0;
  pthread_cond_broadcast(&s->cv);
  if (rc) return rc;
  s->core.w[w].version = version;
  x->net_synced = 1;
  x->base_stale = 1;
  return 0;
}

static int do_allreduce(real *s, int w, rop *op, hs_diag *d) {
  rworker *x = &s->w[w];
  hs_rt_worker *cw = &s->core.w[w];
  int me = 0;
  while (op->ws[me] != w) me++;
  const hs_real_comm_ops *cm = s->cfg->comm;
  double start = now_of(s);
  float *buf = op->what == HS_COMM_GRAD ? hs_net_grads(x->tw.net) : hs_net_params(x->tw.net);
  int rc = 0;
  /* A compressed gradient: what the others receive is what the compressor lets through. */
  if (op->what == HS_COMM_GRAD &&
      (rc = hs_real_worker_compress_grads(&x->tw, cm->device_buffers, x->host, op->compressor, op->ratio, s->P,
                                          s->cfg->seed, w, d)))
    return rc;
  rc = cm->allreduce(s->comm, op->id, w, buf, s->P, op->ws, op->n, op->wts, d);
  if (rc) return rc;
  /* The reduced vector, in host memory: a host backend's buffer is the net's own (read in
   * place, no copy); a device backend's is copied out by the one participant that updates the
   * global model with it (every participant's buffer holds the same), below. */
  const float *red = buf;
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
    op->version = s->core.version; /* the version the update applies to */
    int fuse = host_grad && x->net_synced && cw->version == s->core.version;
    s->global_busy = 1;
    pthread_mutex_unlock(&s->mu);
    if (cm->device_buffers) {
      rc = op->what == HS_COMM_GRAD ? hs_net_get_grads(x->tw.net, x->host, d) : hs_net_get_params(x->tw.net, x->host, d);
      red = x->host;
    }
    /* rt_model's one expression, so that the global model and every net updated in place
     * round alike and stay bit-identical. */
    if (!rc) hs_runtime_model_allreduced(&s->gm, op->what, red, op->lr, fuse ? own : NULL);
    pthread_mutex_lock(&s->mu);
    s->global_busy = 0;
    pthread_cond_broadcast(&s->cv);
    if (rc) { /* the copy out failed: the global model is as it was, and the run fails */
      pthread_mutex_unlock(&s->mu);
      return rc;
    }
    op->global_applied = 1;
    global_update(s);
    if (fuse) {
      cw->version = s->core.version;
      x->base_stale = 1; /* as take_global: the updated parameters stand for the base */
      updated = 1;
    }
  }
  /* The update applies to version op->version; no other may have come since (the first
   * participant's own is counted once it is applied). */
  int in_place = !updated && host_grad && x->net_synced && cw->version == op->version &&
                 s->core.version == op->version + (op->global_applied ? 1 : 0);
  if (in_place) {
    x->base_stale = 1;
    pthread_mutex_unlock(&s->mu);
    hs_runtime_vec_sgd(own, NULL, red, (float)op->lr, s->P);
    pthread_mutex_lock(&s->mu);
    /* The worker's version moves past the global one only once that one is there (a policy
     * may read both; staleness is their difference). global_done is set, so global_busy
     * clear means the first participant's update is applied. */
    global_wait(s);
    cw->version = op->version + 1;
  } else if (!updated) {
    /* hs_comm_opts.keep_local (x_i <- avg + (x_i - x_i at begin)) needs no arithmetic here:
     * the lane runs nothing else between taking this worker's model and this point, so its
     * progress since the operation began is zero and the average is the result. */
    global_wait(s); /* the first participant's update is applied (global_done is set) */
    if (op->what == HS_COMM_MODEL && cm->device_buffers && op->global_applied &&
        s->core.version == op->version + 1) {
      /* On device buffers the all-reduce left this net's parameters equal to the average, which
       * the global model now is (a copy of it, hs_runtime_model_allreduced) with nothing since:
       * copying it back in would change nothing. */
      cw->version = s->core.version;
      x->net_synced = 1;
      x->base_stale = 1;
    } else {
      rc = take_global(s, w, d);
    }
  }
  comm_done(s, w, start, now_of(s));
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
  float *msg = x->host;
  if (op->what == HS_COMM_GRAD) {
    /* A host net's gradient is sent from where it is. */
    if (s->cfg->comm->device_buffers) rc = hs_net_get_grads(x->tw.net, x->host, d);
    else msg = hs_net_grads(x->tw.net);
  } else {
    /* The progress since the last sync or push; the base moves to the model sent. */
    rc = settle_base(x, d);
    if (!rc) rc = hs_real_worker_model_delta(&x->tw, x->host, x->base, s->P, d);
  }
  /* A compressed update (gradient or model delta): the server receives what the compressor
   * lets through, as in the simulator's proxy model. */
  if (!rc) rc = hs_real_worker_compress(&x->tw, op->compressor, op->ratio, msg, s->P, s->cfg->seed, w, d);
  if (rc) return rc;
  double start = now_of(s);
  rc = s->cfg->comm->send(s->comm, w, s->n_all, op->id, msg, s->P, d);
  pthread_mutex_lock(&s->mu);
  comm_done(s, w, start, now_of(s));
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static int do_srv_push(real *s, rop *op, hs_diag *d) {
  int rc = s->cfg->comm->recv(s->comm, s->n_all, op->worker, op->id, s->srv_buf, s->P, d);
  if (rc) return rc;
  /* The pass over the parameters runs outside the lock, so that the workers' lanes do not
   * wait for it to record a step or start one: global_busy keeps every other reader and
   * writer of the global model waiting meanwhile, as during an all-reduce's update, and the
   * accumulator is the server lane's alone (every IT_SRV_* item runs on that lane). */
  pthread_mutex_lock(&s->mu);
  global_wait(s);
  int stale = 0, apply = op->ps_mode == HS_PS_APPLY;
  if (apply) {
    stale = (int)(s->core.version - op->version);
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
  int w = op->worker;
  hs_rt_core_record_push(&s->core, w, op->step, now_of(s), stale);
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
  op->version = s->core.version;
  s->global_busy = 1;
  pthread_mutex_unlock(&s->mu);
  int rc = s->cfg->comm->send(s->comm, s->n_all, op->worker, op->id, s->gm.global, s->P, d);
  pthread_mutex_lock(&s->mu);
  s->global_busy = 0;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static int do_pull(real *s, int w, rop *op, hs_diag *d) {
  rworker *x = &s->w[w];
  hs_rt_worker *cw = &s->core.w[w];
  double start = now_of(s);
  /* A host net receives the model straight into its parameters, which then stand for the base. */
  int host = !s->cfg->comm->device_buffers;
  int rc = s->cfg->comm->recv(s->comm, w, s->n_all, op->id, host ? hs_net_params(x->tw.net) : x->host, s->P, d);
  if (!rc && !host) rc = hs_net_set_params(x->tw.net, x->host, d);
  if (rc) return rc;
  pthread_mutex_lock(&s->mu);
  cw->version = op->version;
  x->net_synced = 1;
  x->base_stale = 1;
  comm_done(s, w, start, now_of(s));
  double first = op->start;
  uint64_t tag = op->tag;
  op_free(s, op);
  deliver_comm(s, HS_OP_PULL, w, first, 0, tag);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

/* A joining worker's lane: it takes the global model, and then the core marks it active and
 * tells the policy (hs_rt_core_joined), as the simulator's joiner does once it has fetched the
 * model. One that left meanwhile (not joining any more) stays out. */
static int do_join(real *s, int w, hs_diag *d) {
  pthread_mutex_lock(&s->mu);
  int rc = 0;
  if (!s->core.done && s->core.w[w].joining) rc = take_global(s, w, d);
  if (!rc && !s->core.done && s->core.w[w].joining) settle(s, hs_rt_core_joined(&s->core, w, now_of(s)));
  pthread_mutex_unlock(&s->mu);
  return rc;
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
  lane *l = rank < s->n_all ? &s->w[rank].ln : &s->srv;
  if (s->pin && rank < s->n_all) hs_pin_self(&s->cpus, rank); /* the server's lane floats */
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!l->head && !s->core.done) pthread_cond_wait(&l->cv, &s->mu);
    if (s->core.done) break;
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
    case IT_JOIN: rc = do_join(s, rank, &d); break;
    }
    free(it);
    pthread_mutex_lock(&s->mu);
    l->busy = 0;
    if (rc) {
      /* hs_diag_prefix adds the ": " itself. */
      if (rank < s->n_all) hs_diag_prefix(&d, "worker %d", rank);
      else hs_diag_prefix(&d, "parameter server");
      lane_failed(s, rc, &d);
    }
    if (all_idle(s)) pthread_cond_signal(&s->watch_cv); /* a stall, unless a timer is due */
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* --- evaluation, timers, cluster events (calling thread) ------------------------------------ */

static int all_idle(const real *s) {
  if (s->srv.busy || s->srv.head || s->timers.n || hs_rt_evals_online(&s->evals)) return 0;
  for (int i = 0; i < s->core.n; i++)
    if (s->w[i].ln.busy || s->w[i].ln.head) return 0;
  return 1;
}

/* The calling thread's loop: timers, evaluations, the stop flag, stalls. */
static void watch(real *s) {
  pthread_mutex_lock(&s->mu);
  while (!s->core.done) {
    double next;
    settle(s, hs_rt_core_timer_fire(&s->core, &s->timers, &next));
    if (s->core.done) break;
    if (s->cfg->max_time > 0 && now_of(s) >= s->cfg->max_time) {
      finish_run(s);
      break;
    }
    if (s->cfg->stop && *s->cfg->stop) break;
    if (hs_rt_evals_online(&s->evals)) {
      /* Evaluated outside the lock: it reads only the copy and the evaluation net. */
      hs_rt_eval *e = hs_rt_evals_pop(&s->evals);
      pthread_mutex_unlock(&s->mu);
      double loss, acc;
      hs_diag d = {0};
      int rc = hs_rt_evals_measure(&s->evals, e->model, &loss, &acc, &d);
      pthread_mutex_lock(&s->mu);
      settle(s, hs_rt_evals_store(&s->core, e->time_s, e->step, rc, loss, acc, &d));
      hs_rt_eval_free(e);
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
  if (!s->core.done) finish_run(s); /* interrupted */
  pthread_mutex_unlock(&s->mu);
}

/* --- set-up and the run ---------------------------------------------------------------------- */

/* What a real run asks of the runtime core, from its config: for both real drivers. */
void hs_real_job(const hs_real_config *cfg, hs_rt_core_job *j) {
  *j = (hs_rt_core_job){.policy = cfg->policy, .params = cfg->params, .cluster = cfg->cluster,
                        .global_batch = cfg->global_batch, .seed = cfg->seed, .max_iterations = cfg->max_iterations,
                        .samples_target = cfg->max_epochs > 0 && cfg->train
                                              ? cfg->max_epochs * (double)hs_data_count(cfg->train)
                                              : 0,
                        .max_time = cfg->max_time, .target_loss = cfg->target_loss,
                        .target_accuracy = cfg->target_accuracy, .eval_every = cfg->test ? cfg->eval_every : 0,
                        .sink = cfg->sink, .sink_ctx = cfg->sink_ctx, .eval_sink = cfg->eval_sink,
                        .eval_ctx = cfg->eval_ctx, .lr = cfg->lr};
}

int hs_real_check(const hs_real_config *cfg, int n, int evaluates, hs_diag *d) {
  if (n < 1) return hs_diag_set(d, HS_EINVAL, "a real run needs at least one worker");
  if (!cfg->train) return hs_diag_set(d, HS_EINVAL, "a real run needs a training set");
  if (cfg->global_batch < n)
    return hs_diag_set(d, HS_EINVAL, "--global-batch %lld is smaller than the %d workers", (long long)cfg->global_batch,
                       n);
  if (cfg->max_iterations <= 0 && cfg->max_epochs <= 0 && cfg->max_time <= 0 && !(cfg->target_loss > 0) &&
      !(cfg->target_accuracy > 0))
    return hs_diag_set(d, HS_EINVAL, "no stop condition: give --iterations, --epochs, --time, --target-loss or "
                       "--target-accuracy");
  if (evaluates && (cfg->target_loss > 0 || cfg->target_accuracy > 0) && !cfg->test)
    return hs_diag_set(d, HS_EINVAL, "a target loss or accuracy needs evaluations (a test set)");
  return 0;
}

const char *hs_real_worker_device(const hs_real_config *cfg, int w) {
  return cfg->worker_devices && cfg->worker_devices[w] ? cfg->worker_devices[w] : cfg->device;
}

int hs_real_first_on_device(const hs_real_config *cfg, int w) {
  const char *dev = hs_real_worker_device(cfg, w);
  for (int i = 0; i < w; i++)
    if (!strcmp(hs_real_worker_device(cfg, i), dev)) return i;
  return w;
}

/* Without a calibrated step model: a linear fit of steps timed before the run, one per distinct
 * device (hs_real_worker_device), so that workers on partitions of different sizes are
 * predicted apart; the workers on one device share the fit of the first of them, timed on its
 * net (joiners too: theirs is timed before the run). A probe restarts that worker's iterator on
 * the shards it was given. */
static int probe_devices(real *s, const hs_shards *sh) {
  const hs_real_config *cfg = s->cfg;
  for (int i = 0; i < s->n_all; i++) {
    rworker *x = &s->w[i];
    int first = hs_real_first_on_device(cfg, i);
    if (first < i) {
      x->probe_t0 = s->w[first].probe_t0;
      x->probe_k = s->w[first].probe_k;
      continue;
    }
    int rc = hs_real_worker_probe(&x->tw, cfg->train, cfg->global_batch / s->n_start, &x->probe_t0, &x->probe_k,
                                  &s->core.diag);
    if (rc || (rc = hs_data_iter_init(&x->tw.it, cfg->train, sh, i % s->n_start, 0, &s->core.diag))) return rc;
  }
  return 0;
}

/* After hs_real_check. */
static int setup(real *s, const hs_real_config *cfg, hs_shards *sh) {
  const hs_cluster_spec *spec = cfg->cluster;
  hs_rt_core *c = &s->core; /* hs_rt_core_init: by hs_real_run */
  hs_rt_core_job job;
  hs_real_job(cfg, &job);
  hs_rt_core_set_job(c, &job);
  s->cfg = cfg;
  int n = spec ? spec->n_workers : cfg->n_workers;
  int rc;
  if ((rc = hs_runtime_check_caps(cfg->policy, cfg->params, spec, HS_REAL_THREADS_CAPS, "threaded real", &c->diag)))
    return rc;
  s->n_start = n;
  s->n_all = spec ? hs_cluster_all_workers(spec) : n;
  s->w = calloc((size_t)s->n_all, sizeof *s->w);
  if (!s->w) return hs_rt_core_fail(&s->core, HS_ENOMEM, "out of memory for %d workers", s->n_all);
  for (int i = 0; i < s->n_all; i++) {
    pthread_cond_init(&s->w[i].ln.cv, NULL);
    s->w[i].probe_t0 = s->w[i].probe_k = NAN;
  }
  /* The joiners' slots too: a lane keeps a pointer into the core's table across its waits. */
  if ((rc = hs_rt_core_reserve(c, s->n_all))) return rc;
  for (int i = 0; i < n; i++) {
    int r = hs_rt_core_add_worker(c, spec ? spec->workers[i].slowdown : 1.0, 1.0, cfg->lr, 0.0);
    if (r < 0) return r;
    c->w[r].active = 1;
  }
  hs_net_options no = hs_real_net_options(cfg->seed, cfg->timeout_s);
  for (int i = 0; i < s->n_all; i++) {
    rworker *x = &s->w[i];
    const char *dev = hs_real_worker_device(cfg, i);
    if ((rc = hs_net_open(&x->tw.net, dev, cfg->model, &no, &s->core.diag)) ||
        (rc = hs_real_worker_prepare(&x->tw, cfg->global_batch, n, &s->core.diag)))
      return rc;
    if (i == 0) s->P = hs_net_param_count(x->tw.net);
    x->host = malloc((size_t)s->P * sizeof *x->host);
    x->base = malloc((size_t)s->P * sizeof *x->base);
    if (!x->host || !x->base) return hs_rt_core_fail(&s->core, HS_ENOMEM, "out of memory for worker %d's buffers", i);
    hs_touch_pages(x->host, (size_t)s->P * sizeof *x->host); /* the base: by the copy below */
    if ((rc = hs_data_iter_init(&x->tw.it, cfg->train, sh, i % n, 0, &s->core.diag))) return rc;
  }
  if ((rc = hs_runtime_model_open(&s->gm, s->P, &s->core.diag))) return rc;
  s->srv_buf = malloc((size_t)s->P * sizeof *s->srv_buf);
  if (!s->srv_buf) return hs_rt_core_fail(&s->core, HS_ENOMEM, "out of memory for the parameter server's buffer");
  hs_touch_pages(s->srv_buf, (size_t)s->P * sizeof *s->srv_buf);
  if ((rc = hs_net_get_params(s->w[0].tw.net, s->gm.global, &s->core.diag))) return rc;
  for (int i = 0; i < s->n_all; i++) memcpy(s->w[i].base, s->gm.global, (size_t)s->P * sizeof *s->gm.global);
  if (cfg->test && (rc = hs_net_open(&s->eval_net, cfg->device, cfg->model, &no, &s->core.diag))) return rc;
  hs_rt_evals_init(&s->evals, s->eval_net, cfg->test, s->P, cfg->target_loss > 0 || cfg->target_accuracy > 0);
  if (!cfg->perf && (rc = probe_devices(s, sh))) return rc;
  hs_real_comm_config cc = {.world = s->n_all + 1, .n = s->P, .timeout_s = cfg->timeout_s, .device = cfg->device};
  if ((rc = cfg->comm->open(&s->comm, &cc, &s->core.diag))) return rc;
  return 0; /* the core schedules the cluster events and runs the policy's init (hs_rt_core_open) */
}

static void teardown(real *s) {
  int n = s->n_all;
  hs_rt_core_close(&s->core); /* the policy's fini */
  /* The backend first: the local one's reduction stream reads and writes the nets' buffers, so
   * it drains (or, wedged, keeps them) before the nets free them. */
  if (s->comm) s->cfg->comm->close(s->comm);
  s->comm = NULL;
  for (int i = 0; s->w && i < n; i++) {
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
  hs_rt_evals_clear(&s->evals);
  hs_net_close(s->eval_net);
  free(s->w);
  hs_runtime_model_close(&s->gm);
  free(s->srv_buf);
  hs_runtime_timers_free(&s->timers);
}

/* Writes the records of finished steps (a step in progress at the end keeps its record open,
 * unwritten) and fills the result by the core's rule (rt_core.h). */
static int fill_result(real *s, hs_real_result *res) {
  res->n_workers = s->core.n;
  res->workers = calloc((size_t)s->core.n, sizeof *res->workers);
  if (!s->cfg->perf) res->fits = calloc((size_t)s->core.n, sizeof *res->fits);
  if (!res->workers || (!s->cfg->perf && !res->fits)) return hs_rt_core_fail(&s->core, HS_ENOMEM, "out of memory");
  for (int i = 0; res->fits && i < s->core.n; i++) res->fits[i] = (hs_real_fit){s->w[i].probe_t0, s->w[i].probe_k};
  int64_t steps = 0;
  for (int i = 0; i < s->core.n; i++) {
    int rc = s->w[i].in_step ? 0 : hs_rt_core_flush(&s->core, i);
    if (rc) return rc;
    steps += s->core.w[i].steps;
  }
  hs_rt_core_summary(&s->core, steps, &res->summary, res->workers);
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
  hs_rt_core_init(&s->core, &threads_driver);
  pthread_mutex_init(&s->mu, NULL);
  hs_cond_init_monotonic(&s->cv);
  hs_cond_init_monotonic(&s->watch_cv);
  pthread_cond_init(&s->srv.cv, NULL);
  hs_shards *sh = NULL;
  int n = cfg->cluster ? cfg->cluster->n_workers : cfg->n_workers;
  int rc = hs_real_check(cfg, n, 1, &s->core.diag);
  if (!rc) rc = hs_shards_open(&sh, hs_data_count(cfg->train), n, NULL, cfg->seed, &s->core.diag);
  if (!rc) rc = setup(s, cfg, sh);
  lane_arg *args = NULL;
  int started = 0;
  if (!rc && !(args = calloc((size_t)s->n_all + 1, sizeof *args))) rc = hs_rt_core_fail(&s->core, HS_ENOMEM, "out of memory");
  if (!rc) {
    s->pin = hs_real_pins(cfg, s->n_all, &s->cpus);
    s->t0 = mono();
    for (int i = 0; i <= s->n_all && !rc; i++) {
      args[i] = (lane_arg){.s = s, .rank = i};
      lane *l = i < s->n_all ? &s->w[i].ln : &s->srv;
      if (pthread_create(&l->th, NULL, lane_main, &args[i])) rc = hs_rt_core_fail(&s->core, HS_ERUNTIME, "could not start thread %d", i);
      else l->started = 1, started++;
    }
  }
  if (!rc) {
    pthread_mutex_lock(&s->mu);
    rc = settle(s, hs_rt_core_open(&s->core));
    if (!rc) rc = settle(s, hs_rt_core_start(&s->core));
    pthread_mutex_unlock(&s->mu);
    if (!rc) watch(s);
  }
  if (started) {
    pthread_mutex_lock(&s->mu);
    finish_run(s);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i <= s->n_all; i++) {
      lane *l = i < s->n_all ? &s->w[i].ln : &s->srv;
      if (l->started) pthread_join(l->th, NULL);
    }
  }
  free(args);
  if (!rc) rc = hs_rt_core_outcome(&s->core);
  res->status = s->stalled ? HS_REAL_STALLED : (cfg->stop && *cfg->stop) ? HS_REAL_INTERRUPTED : HS_REAL_COMPLETE;
  /* Evaluations deferred to the end, or queued before it and not yet reached, also after an
   * interruption or a failure: they are of models the run reached (the lanes are joined: no
   * lock needed); then the final model's, unless the run was interrupted or failed. */
  int erc = hs_rt_evals_drain(&s->evals, &s->core, rc || res->status == HS_REAL_INTERRUPTED ? NULL : s->gm.global);
  if (!rc) rc = erc;
  if (!rc || s->core.iterations > 0) {
    int frc = fill_result(s, res);
    if (!rc) rc = frc;
  }
  if (rc) {
    if (d) *d = s->core.diag;
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
  free(res->fits);
  res->workers = NULL;
  res->fits = NULL;
}
