/* The simulated runtime: see sim_run.h for the contract. */
#include "sim/sim_run.h"

#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_rng.h"
#include "nn/nn_zoo.h"
#include "policies/pol_compress.h"
#include "runtime/rt_runtime.h"
#include "sim/sim_conv.h"
#include "sim/sim_event.h"
#include "sim/sim_net.h"

enum ev_kind {
  EV_COMPUTE = 1,    /* worker's step finished */
  EV_COLL = 2,       /* collective op `arg` finished */
  EV_FLOW_START = 3, /* op `arg`'s latency has passed: its bytes start to flow */
  EV_LINK = 4,       /* shared link `worker` (0 in, 1 out) may have a finished flow; arg = epoch */
  EV_APPLY = 5,      /* the server finished applying op `arg` */
  EV_TIMER = 6,      /* policy timer, arg = tag */
  EV_CLUSTER = 7,    /* cluster-file event number `arg` */
  EV_JOIN_READY = 8  /* joining worker holds the model */
};

#define NO_WORKER UINT32_MAX

typedef struct sim_worker {
  int type, node;
  double slowdown;            /* compute multiplier */
  char active, computing, joining;
  int pending_comm;           /* communications in flight */
  double joined_at, left_at;  /* s */
  gsl_rng *rng;
  int max_batch;              /* 0 = no limit */
  uint64_t version;           /* model version this worker computes on */
  /* The open step record: opened when a step starts, written when the next one starts. */
  int rec_open;
  int rec_batch, rec_stale;
  int64_t rec_step;
  double rec_start, rec_cend, rec_commend, rec_comm; /* s */
  uint64_t rec_version;
  double rec_loss;            /* the convergence model's loss of the step, NaN without one */
  double prev_end;            /* s, end of the previous record */
  uint64_t cur_tag;
  int64_t steps, samples;
  int initial_batch;
  double busy, comm;          /* s */
  double trace_cursor;        /* s, end of the last slice written for this worker */
} sim_worker;

typedef struct sim_op {
  int in_use;
  hs_comm_kind kind;
  hs_comm_what what;
  hs_ps_mode ps_mode;
  int worker;
  int64_t step;               /* push: the pushing worker's step */
  double start, bytes;
  uint64_t tag, version;
  /* collectives */
  int n, nb;
  int *ws;
  double *bstart, *bend;      /* bucket intervals */
  int next_free;
  int conv_begun;             /* the convergence model has seen its begin */
} sim_op;

/* A device type's compute for the run's model (hs_cluster_compute_for): calibrated, or
 * t(b) = t0 + per_sample * b. */
typedef struct sim_compute {
  int calib;
  double t0, per_sample;      /* s, s per sample */
} sim_compute;

typedef struct sim {
  hs_runtime rt;              /* first member: the policy sees only this */
  const hs_sim_config *cfg;
  const hs_cluster_spec *spec;
  hs_engine *eng;
  hs_netm net;
  hs_diag diag;
  int n, cap;
  sim_worker *w;
  hs_netm_peer *peers;
  sim_compute *compute;       /* per device type */
  sim_op *ops;
  int n_ops, cap_ops, free_op;
  hs_shared_link link[2];     /* the server's inbound (pushes) and outbound (pulls) links */
  double server_free;         /* s, when the server has applied everything queued */
  uint64_t version;
  int64_t iterations, samples;
  double samples_target;
  int done;
  double end;
  void *pstate;
  /* convergence */
  void *conv;                 /* the model's state, NULL without one */
  int conv_ready;             /* init succeeded: fini is due */
  int64_t eval_every, last_eval; /* iterations */
  double last_loss, last_acc, target_time; /* target_time s, NaN until met */
} sim;

static sim *S(hs_runtime *rt) { return (sim *)rt; }

static int fail(sim *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(sim *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hs_diag_vset(&s->diag, code, fmt, ap);
  va_end(ap);
  return code;
}

int hs_sim_max_batch(const hs_device_type *t, double param_bytes, double act_bytes_per_sample) {
  if (t->max_batch > 0) return t->max_batch;
  if (t->memory <= 0 || act_bytes_per_sample <= 0) return 0;
  double room = t->memory - 4.0 * param_bytes;
  if (room < act_bytes_per_sample) return -1; /* cannot hold even one sample */
  double b = floor(room / act_bytes_per_sample);
  return b > 1e9 ? 1000000000 : (int)b;
}

static double predict(const sim *s, int w, int batch) {
  int type = s->w[w].type;
  const sim_compute *c = &s->compute[type];
  if (c->calib) return hs_perf_eval(&s->cfg->perf[type], (double)batch) * s->w[w].slowdown;
  return (c->t0 + c->per_sample * (double)batch) * s->w[w].slowdown;
}

/* --- schedule helpers ------------------------------------------------------------------- */

static int at(sim *s, double t, uint32_t kind, uint32_t worker, int64_t arg) {
  return hs_engine_schedule(s->eng, t, kind, worker, arg, &s->diag);
}

static int op_new(sim *s) {
  if (s->free_op < 0) {
    if (s->n_ops == s->cap_ops) {
      int nc = s->cap_ops ? 2 * s->cap_ops : 64;
      sim_op *o = realloc(s->ops, (size_t)nc * sizeof *o);
      if (!o) return fail(s, HS_ENOMEM, "out of memory for communication records");
      s->ops = o;
      s->cap_ops = nc;
    }
    s->ops[s->n_ops].next_free = -1;
    s->free_op = s->n_ops++;
  }
  int id = s->free_op;
  s->free_op = s->ops[id].next_free;
  memset(&s->ops[id], 0, sizeof s->ops[id]);
  s->ops[id].in_use = 1;
  return id;
}

static void op_free(sim *s, int id) {
  sim_op *o = &s->ops[id];
  free(o->ws);
  free(o->bstart);
  free(o->bend);
  o->ws = NULL;
  o->bstart = o->bend = NULL;
  o->in_use = 0;
  o->next_free = s->free_op;
  s->free_op = id;
}

/* --- trace and step records ------------------------------------------------------------- */

static void trace_slice(sim *s, int w, const char *name, const char *cat, double t0, double t1) {
  if (!s->cfg->trace) return;
  sim_worker *x = &s->w[w];
  if (t0 < x->trace_cursor) t0 = x->trace_cursor;
  if (t1 <= t0) return;
  if (t0 > x->trace_cursor) hs_trace_slice(s->cfg->trace, w, "wait", "wait", x->trace_cursor, t0 - x->trace_cursor);
  hs_trace_slice(s->cfg->trace, w, name, cat, t0, t1 - t0);
  x->trace_cursor = t1;
}

/* Writes worker w's open record, which must be finished. */
static int flush_record(sim *s, int w) {
  sim_worker *x = &s->w[w];
  if (!x->rec_open) return 0;
  x->rec_open = 0;
  hs_step_row row = {
      .worker = w,
      .step = x->rec_step,
      .batch = x->rec_batch,
      .start_s = x->rec_start,
      .compute_end_s = x->rec_cend,
      .comm_end_s = x->rec_commend,
      .wait_s = 0, /* closed below */
      .model_version = (int64_t)x->rec_version,
      .staleness = x->rec_stale,
      .loss = x->rec_loss,
  };
  hs_runtime_close_row(&row, &x->prev_end, x->rec_comm);
  if (!s->cfg->sink) return 0;
  int rc = s->cfg->sink(s->cfg->sink_ctx, &row, &s->diag);
  if (rc && !s->diag.msg[0]) fail(s, rc, "could not store step %lld of worker %d", (long long)row.step, w);
  return rc;
}

/* --- policy callbacks ------------------------------------------------------------------- */

static int policy_rc(sim *s, int rc) {
  if (rc >= 0) return 0;
  hs_runtime_policy_failed(&s->diag, s->cfg->policy->name, rc);
  return rc;
}

static int deliver_comm(sim *s, hs_comm_kind kind, int w, double start, int stale, uint64_t tag) {
  if (s->done || !s->cfg->policy->on_comm) return 0;
  hs_comm_obs o = {.kind = kind, .worker = w, .start = start, .end = hs_engine_now(s->eng),
                   .version = s->version, .staleness = stale, .tag = tag};
  return policy_rc(s, s->cfg->policy->on_comm(s->pstate, &s->rt, &o));
}

static int deliver_cluster(sim *s, hs_cluster_change kind, int w) {
  if (s->done || !s->cfg->policy->on_cluster) return 0;
  hs_cluster_obs o = {.kind = kind, .worker = w, .slowdown = s->w[w].slowdown,
                      .comm_slowdown = s->peers[w].comm_slowdown};
  return policy_rc(s, s->cfg->policy->on_cluster(s->pstate, &s->rt, &o));
}

/* --- convergence ------------------------------------------------------------------------- */

static int conv_rc(sim *s, int rc) {
  if (rc >= 0) return 0;
  if (!s->diag.msg[0]) fail(s, rc, "convergence model %s failed (%s)", s->cfg->conv->name, hs_strerror(rc));
  if (!s->diag.code) s->diag.code = rc;
  return rc;
}

/* Tells the convergence model that operation id was issued. */
static int conv_begin(sim *s, int id, const hs_conv_op *op) {
  if (!s->conv) return 0;
  int rc = conv_rc(s, s->cfg->conv->begin(s->conv, id, op, &s->diag));
  if (!rc) s->ops[id].conv_begun = 1;
  return rc;
}

static int conv_end(sim *s, int id, int staleness) {
  if (!s->conv || !s->ops[id].conv_begun) return 0;
  s->ops[id].conv_begun = 0;
  return conv_rc(s, s->cfg->conv->end(s->conv, id, staleness, &s->diag));
}

/* Evaluates the global model at time now, hands the evaluation to the sink and checks the
 * targets. */
static int conv_eval(sim *s, double now) {
  const hs_sim_config *c = s->cfg;
  double loss, acc;
  int rc = conv_rc(s, c->conv->evaluate(s->conv, &loss, &acc, &s->diag));
  if (rc) return rc;
  s->last_eval = s->iterations;
  s->last_loss = loss;
  s->last_acc = acc;
  if (c->eval_sink && (rc = c->eval_sink(c->eval_ctx, now, s->iterations, loss, acc, &s->diag))) {
    if (!s->diag.msg[0]) fail(s, rc, "could not store the evaluation at step %lld", (long long)s->iterations);
    return rc;
  }
  int has = c->target_loss > 0 || c->target_accuracy > 0;
  int met = (!(c->target_loss > 0) || loss <= c->target_loss) &&
            (!(c->target_accuracy > 0) || acc >= c->target_accuracy);
  if (has && met && isnan(s->target_time)) {
    s->target_time = now;
    s->done = 1;
    s->end = now;
  }
  return 0;
}

/* One update of the global model: counts an iteration, evaluates when due and checks the stop
 * conditions. */
static int global_update(sim *s) {
  s->version++;
  s->iterations++;
  const hs_sim_config *c = s->cfg;
  /* No time limit here: a run with --sim-time ends at that time, in the event loop. */
  if (hs_runtime_limit_reached(c->max_iterations, s->iterations, s->samples_target, s->samples, 0, 0)) {
    s->done = 1;
    s->end = hs_engine_now(s->eng);
  }
  if (s->conv && s->iterations % s->eval_every == 0) return conv_eval(s, hs_engine_now(s->eng));
  return 0;
}

/* --- runtime operations ----------------------------------------------------------------- */

static double rt_now(hs_runtime *rt) { return hs_engine_now(S(rt)->eng); }
static int rt_n_workers(hs_runtime *rt) { return S(rt)->n; }
static int rt_active(hs_runtime *rt, int w) {
  sim *s = S(rt);
  return w >= 0 && w < s->n && s->w[w].active;
}
static int64_t rt_global_batch(hs_runtime *rt) { return S(rt)->cfg->global_batch; }
static int rt_max_batch(hs_runtime *rt, int w) {
  sim *s = S(rt);
  return w >= 0 && w < s->n ? s->w[w].max_batch : 0;
}
static double rt_predict(hs_runtime *rt, int w, int batch) {
  sim *s = S(rt);
  return w >= 0 && w < s->n ? predict(s, w, batch) : NAN;
}
static uint64_t rt_version(hs_runtime *rt) { return S(rt)->version; }
static uint64_t rt_worker_version(hs_runtime *rt, int w) {
  sim *s = S(rt);
  return w >= 0 && w < s->n ? s->w[w].version : 0;
}
static uint64_t rt_seed(hs_runtime *rt) { return S(rt)->cfg->seed; }
static hs_diag *rt_diag(hs_runtime *rt) { return &S(rt)->diag; }

/* The checks of pol_runtime.h write the runtime's diagnostic directly: a failed one is a
 * failed run, as fail() makes it. */
static int check_worker(sim *s, int w, const char *what) {
  return hs_runtime_check_worker(&s->diag, s->cfg->policy->name, what, w, s->n);
}

static int rt_compute(hs_runtime *rt, int w, int batch, uint64_t tag) {
  sim *s = S(rt);
  int rc = check_worker(s, w, "compute");
  if (rc) return rc;
  sim_worker *x = &s->w[w];
  if ((rc = hs_runtime_check_compute(&s->diag, s->cfg->policy->name, w, x->active, x->computing, batch)))
    return rc;
  if (x->max_batch > 0 && batch > x->max_batch)
    return fail(s, HS_EINVAL, "worker %d (%s) cannot hold a batch of %d samples of %s: its memory "
                "limit is %d", w, s->spec->types[x->type].name, batch, s->cfg->model, x->max_batch);
  if ((rc = flush_record(s, w))) return rc;
  double loss = NAN;
  if (s->conv && (rc = conv_rc(s, s->cfg->conv->step(s->conv, w, batch, &loss, &s->diag)))) return rc;
  double now = hs_engine_now(s->eng);
  double dur = predict(s, w, batch) * hs_rng_lognormal_unit(x->rng, s->spec->jitter_cv);
  x->computing = 1;
  x->cur_tag = tag;
  x->rec_open = 1;
  x->rec_batch = batch;
  x->rec_step = x->steps;
  x->rec_start = now;
  x->rec_cend = now + dur;
  x->rec_commend = now + dur;
  x->rec_comm = 0;
  x->rec_version = x->version;
  x->rec_stale = 0;
  x->rec_loss = loss;
  if (!x->initial_batch) x->initial_batch = batch;
  return at(s, now + dur, EV_COMPUTE, (uint32_t)w, 0);
}

static int rt_local_update(hs_runtime *rt, int w) {
  /* A local update's time is part of the step's compute model; nothing to schedule. */
  sim *s = S(rt);
  int rc = check_worker(s, w, "local update");
  if (rc || !s->conv) return rc;
  return conv_rc(s, s->cfg->conv->local_update(s->conv, w, &s->diag));
}

/* A compressed gradient's bytes follow the compressor's wire format, its n = M/4 floats viewed
 * as one near-square matrix (the simulator knows no layer shapes; see pol_compress.h). */
static double op_bytes(const sim *s, const hs_comm_opts *o) {
  double m = s->cfg->grad_bytes;
  if (o->compressor && o->ratio > 0) {
    hs_block b = hs_compress_flat_block(m / 4.0);
    m = hs_compress_bytes(o->compressor, &b, 1, o->ratio);
  }
  return m;
}

/* Compression and decompression time (the compressor's cost model on its reference device),
 * scaled by the slowest participant's compute slowdown; added before the bytes flow. */
static double op_compress_time(const sim *s, const hs_comm_opts *o, const int *ws, int n) {
  if (!o->compressor || !(o->ratio > 0)) return 0;
  hs_block b = hs_compress_flat_block(s->cfg->grad_bytes / 4.0);
  double slow = 0;
  for (int i = 0; i < n; i++)
    if (s->w[ws[i]].slowdown > slow) slow = s->w[ws[i]].slowdown;
  return hs_compress_seconds(o->compressor, &b, 1, o->ratio) * slow;
}

static double coll_time(sim *s, const sim_op *op, double m, hs_ar_algo algo) {
  return algo == HS_AR_HIER ? hs_netm_hier_time(&s->net, s->peers, op->ws, op->n, m)
                            : hs_netm_ring_time(&s->net, s->peers, op->ws, op->n, m);
}

static int rt_allreduce(hs_runtime *rt, const int *ws, int n, const double *weights,
                        const hs_comm_opts *o) {
  sim *s = S(rt);
  const char *name = s->cfg->policy->name;
  int rc = hs_runtime_check_allreduce(&s->diag, name, n);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    if ((rc = hs_runtime_check_worker(&s->diag, name, "all-reduce", ws[i], s->n))) return rc;
    if (weights && !isfinite(weights[i]))
      return fail(s, HS_ERUNTIME, "policy %s: all-reduce weight %d is not finite", name, i);
  }
  int id = op_new(s);
  if (id < 0) return id;
  sim_op *op = &s->ops[id];
  op->kind = HS_OP_ALLREDUCE;
  op->what = o->what;
  op->worker = -1;
  op->tag = o->tag;
  op->n = n;
  op->bytes = op_bytes(s, o);
  op->start = hs_engine_now(s->eng);
  op->ws = malloc((size_t)n * sizeof *op->ws);
  int overlap = o->overlap && o->what == HS_COMM_GRAD;
  double bucket = o->bucket_bytes > 0 ? o->bucket_bytes : 25.0 * 1024 * 1024;
  int nb = overlap ? (int)ceil(op->bytes / bucket) : 1;
  if (nb < 1) nb = 1;
  op->nb = nb;
  op->bstart = malloc((size_t)nb * sizeof *op->bstart);
  op->bend = malloc((size_t)nb * sizeof *op->bend);
  if (!op->ws || !op->bstart || !op->bend) return fail(s, HS_ENOMEM, "out of memory for an all-reduce");
  memcpy(op->ws, ws, (size_t)n * sizeof *ws);

  double now = op->start, ct = op_compress_time(s, o, ws, n);
  if (!overlap) {
    /* The ring starts when the last participant is ready. */
    double start = now;
    for (int i = 0; i < n; i++) {
      const sim_worker *x = &s->w[ws[i]];
      if (x->computing && x->rec_cend > start) start = x->rec_cend;
    }
    op->bstart[0] = start;
    op->bend[0] = start + ct + coll_time(s, op, op->bytes, o->algo);
  } else {
    /* Bucket k's gradients exist on worker i once the forward pass and the share of the
     * backward pass that produces the first (k+1) buckets are done; buckets are reduced one
     * after another, each when every participant has it. */
    double f = o->fwd_fraction > 0 ? o->fwd_fraction : 1.0 / 3.0;
    double prev_end = now, done_bytes = 0;
    for (int k = 0; k < nb; k++) {
      double mk = k < nb - 1 ? bucket : op->bytes - bucket * (double)(nb - 1);
      done_bytes += mk;
      double g = f + (1.0 - f) * done_bytes / op->bytes, ready = now;
      for (int i = 0; i < n; i++) {
        const sim_worker *x = &s->w[ws[i]];
        if (!x->computing) continue;
        double r = x->rec_start + (x->rec_cend - x->rec_start) * g;
        if (r > ready) ready = r;
      }
      op->bstart[k] = ready > prev_end ? ready : prev_end;
      op->bend[k] = op->bstart[k] + ct * mk / op->bytes + coll_time(s, op, mk, o->algo);
      prev_end = op->bend[k];
    }
  }
  for (int i = 0; i < n; i++) s->w[ws[i]].pending_comm++;
  hs_conv_op co = {.kind = HS_OP_ALLREDUCE, .what = o->what, .worker = -1, .ws = ws, .n = n,
                   .weights = weights, .compressor = o->compressor, .ratio = o->ratio,
                   .keep_local = o->what == HS_COMM_MODEL && o->keep_local};
  if ((rc = conv_begin(s, id, &co))) return rc;
  return at(s, op->bend[nb - 1], EV_COLL, NO_WORKER, id);
}

static int start_flow(sim *s, hs_comm_kind kind, int w, const hs_comm_opts *o) {
  int rc = check_worker(s, w, kind == HS_OP_PUSH ? "push" : "pull");
  if (rc) return rc;
  int id = op_new(s);
  if (id < 0) return id;
  sim_op *op = &s->ops[id];
  op->kind = kind;
  op->what = o->what;
  op->ps_mode = o->ps_mode;
  op->worker = w;
  op->step = s->w[w].rec_step;
  op->tag = o->tag;
  op->start = hs_engine_now(s->eng);
  /* Models travel uncompressed; gradients may be compressed. */
  op->bytes = kind == HS_OP_PULL ? s->cfg->grad_bytes : op_bytes(s, o);
  op->version = kind == HS_OP_PULL ? s->version : s->w[w].rec_version;
  s->w[w].pending_comm++;
  hs_conv_op co = {.kind = kind, .what = o->what, .ps_mode = o->ps_mode, .worker = w,
                   .compressor = kind == HS_OP_PUSH ? o->compressor : NULL, .ratio = o->ratio,
                   .weight = kind == HS_OP_PUSH ? o->weight : 0};
  if ((rc = conv_begin(s, id, &co))) return rc;
  double ct = kind == HS_OP_PUSH ? op_compress_time(s, o, &w, 1) : 0;
  return at(s, op->start + s->spec->ps.link.latency + ct, EV_FLOW_START, (uint32_t)w, id);
}

static int rt_push(hs_runtime *rt, int w, const hs_comm_opts *o) { return start_flow(S(rt), HS_OP_PUSH, w, o); }
static int rt_pull(hs_runtime *rt, int w, const hs_comm_opts *o) { return start_flow(S(rt), HS_OP_PULL, w, o); }

static int rt_apply(hs_runtime *rt, const hs_comm_opts *o) {
  sim *s = S(rt);
  int id = op_new(s);
  if (id < 0) return id;
  sim_op *op = &s->ops[id];
  op->kind = HS_OP_APPLY;
  op->worker = -1;
  op->tag = o->tag;
  op->start = hs_engine_now(s->eng);
  double t = (s->server_free > op->start ? s->server_free : op->start) + s->spec->ps.update_time;
  s->server_free = t;
  hs_conv_op co = {.kind = HS_OP_APPLY, .what = o->what, .worker = -1};
  int rc = conv_begin(s, id, &co);
  if (rc) return rc;
  return at(s, t, EV_APPLY, NO_WORKER, id);
}

static int rt_timer(hs_runtime *rt, double delay, uint64_t tag) {
  sim *s = S(rt);
  int rc = hs_runtime_check_timer(&s->diag, s->cfg->policy->name, delay);
  if (rc) return rc;
  return at(s, hs_engine_now(s->eng) + delay, EV_TIMER, NO_WORKER, (int64_t)tag);
}

static int rt_set_lr(hs_runtime *rt, int w, double lr) {
  /* The learning rate changes no time in the simulator; the convergence models read it. */
  sim *s = S(rt);
  int rc = hs_runtime_check_lr(&s->diag, s->cfg->policy->name, w, s->n, lr);
  if (rc || !s->conv) return rc;
  return conv_rc(s, s->cfg->conv->set_lr(s->conv, w, lr, &s->diag));
}

static const hs_runtime_ops sim_ops = {
    .version = HS_RUNTIME_VERSION,
    .now = rt_now,
    .n_workers = rt_n_workers,
    .active = rt_active,
    .global_batch = rt_global_batch,
    .max_batch = rt_max_batch,
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

/* --- event handlers --------------------------------------------------------------------- */

static int on_compute_done(sim *s, int w) {
  sim_worker *x = &s->w[w];
  double now = hs_engine_now(s->eng);
  x->computing = 0;
  x->busy += x->rec_cend - x->rec_start;
  x->steps++;
  x->samples += x->rec_batch;
  s->samples += x->rec_batch;
  trace_slice(s, w, "compute", "compute", x->rec_start, now);
  if (!s->cfg->policy->on_compute) return 0;
  hs_step_obs o = {.worker = w, .batch = x->rec_batch, .start = x->rec_start, .end = now,
                   .duration = now - x->rec_start, .loss = x->rec_loss, .tag = x->cur_tag};
  return policy_rc(s, s->cfg->policy->on_compute(s->pstate, &s->rt, &o));
}

/* The part of a communication that a worker spends after its own compute has ended: that is
 * time the worker is communicating rather than waiting or computing. */
static double exposed(const sim_op *op, double cend) {
  double t = 0;
  for (int k = 0; k < op->nb; k++) {
    double a = op->bstart[k] > cend ? op->bstart[k] : cend;
    if (op->bend[k] > a) t += op->bend[k] - a;
  }
  return t;
}

static int on_coll_done(sim *s, int id) {
  sim_op *op = &s->ops[id];
  double now = hs_engine_now(s->eng);
  double first = op->bstart[0];
  int rc = conv_end(s, id, 0);
  if (rc || (rc = global_update(s))) return rc;
  for (int i = 0; i < op->n; i++) {
    sim_worker *x = &s->w[op->ws[i]];
    double e = exposed(op, x->rec_cend);
    x->pending_comm--;
    x->comm += e;
    x->rec_comm += e;
    x->rec_commend = now;
    x->version = s->version;
    if (s->cfg->trace) trace_slice(s, op->ws[i], "allreduce", "comm", now - e, now);
  }
  uint64_t tag = op->tag;
  op_free(s, id);
  return deliver_comm(s, HS_OP_ALLREDUCE, -1, first, 0, tag);
}

static int link_reschedule(sim *s, int l) {
  double now = hs_engine_now(s->eng);
  double t = hs_shared_link_rates(&s->link[l], now);
  if (!isfinite(t)) return 0;
  return at(s, t, EV_LINK, (uint32_t)l, (int64_t)s->link[l].epoch);
}

static int on_flow_start(sim *s, int id) {
  sim_op *op = &s->ops[id];
  int l = op->kind == HS_OP_PUSH ? 0 : 1;
  double now = hs_engine_now(s->eng);
  /* The worker's side of the transfer: the network, slowed by its comm_slowdown. */
  double cap = s->spec->network.bandwidth / s->peers[op->worker].comm_slowdown;
  hs_shared_link_advance(&s->link[l], now);
  if (hs_shared_link_add(&s->link[l], id, op->bytes, cap))
    return fail(s, HS_ENOMEM, "out of memory for a flow");
  return link_reschedule(s, l);
}

/* A flow's bytes have arrived. */
static int flow_done(sim *s, int id) {
  sim_op *op = &s->ops[id];
  int w = op->worker;
  sim_worker *x = &s->w[w];
  double now = hs_engine_now(s->eng);
  double t = now - op->start;
  x->comm += t;
  if (x->rec_open && x->rec_step == op->step) x->rec_comm += t;
  if (s->cfg->trace) trace_slice(s, w, op->kind == HS_OP_PUSH ? "push" : "pull", "comm", op->start, now);
  if (op->kind == HS_OP_PUSH && op->ps_mode == HS_PS_APPLY) {
    /* The server applies pushes one at a time, in arrival order. */
    double ta = (s->server_free > now ? s->server_free : now) + s->spec->ps.update_time;
    s->server_free = ta;
    return at(s, ta, EV_APPLY, (uint32_t)w, id);
  }
  x->pending_comm--;
  if (x->rec_open) x->rec_commend = now;
  int rc = conv_end(s, id, 0);
  if (rc) return rc;
  uint64_t tag = op->tag;
  hs_comm_kind kind = op->kind;
  int stale = 0;
  if (kind == HS_OP_PULL) x->version = op->version;
  else stale = (int)(s->version - op->version);
  op_free(s, id);
  return deliver_comm(s, kind, w, now - t, stale, tag);
}

static int on_link(sim *s, int l, uint64_t epoch) {
  if (epoch != s->link[l].epoch) return 0; /* the rates changed since; a newer event stands */
  double now = hs_engine_now(s->eng);
  hs_shared_link_advance(&s->link[l], now);
  int64_t done[64];
  int got, rc;
  while ((got = hs_shared_link_reap(&s->link[l], done, 64)) > 0) {
    for (int i = 0; i < got; i++)
      if ((rc = flow_done(s, (int)done[i]))) return rc;
    if (s->done) return 0;
  }
  return link_reschedule(s, l);
}

static int on_apply(sim *s, uint32_t worker, int id) {
  sim_op *op = &s->ops[id];
  double start = op->start;
  uint64_t tag = op->tag;
  int rc;
  if (worker == NO_WORKER) { /* an apply of accumulated pushes */
    if ((rc = conv_end(s, id, 0)) || (rc = global_update(s))) return rc;
    op_free(s, id);
    return deliver_comm(s, HS_OP_APPLY, -1, start, 0, tag);
  }
  int w = (int)worker;
  sim_worker *x = &s->w[w];
  int stale = (int)(s->version - op->version);
  if ((rc = conv_end(s, id, stale)) || (rc = global_update(s))) return rc;
  x->pending_comm--;
  if (x->rec_open && x->rec_step == op->step) {
    x->rec_commend = hs_engine_now(s->eng);
    x->rec_stale = stale;
  }
  op_free(s, id);
  return deliver_comm(s, HS_OP_PUSH, w, start, stale, tag);
}

static int add_worker(sim *s, int type, int node, double slow, double comm_slow, double t) {
  if (s->n == s->cap) {
    int nc = s->cap ? 2 * s->cap : 16;
    sim_worker *w = realloc(s->w, (size_t)nc * sizeof *w);
    if (w) s->w = w;
    hs_netm_peer *p = realloc(s->peers, (size_t)nc * sizeof *p);
    if (p) s->peers = p;
    if (!w || !p) return fail(s, HS_ENOMEM, "out of memory for %d workers", nc);
    s->cap = nc;
  }
  int i = s->n;
  sim_worker *x = &s->w[i];
  memset(x, 0, sizeof *x);
  x->type = type;
  x->node = node;
  x->slowdown = slow;
  x->joined_at = t;
  x->left_at = NAN;
  x->prev_end = t;
  x->trace_cursor = t;
  x->rng = hs_rng_stream(s->cfg->seed, (uint64_t)i);
  if (!x->rng) return fail(s, HS_ENOMEM, "out of memory for worker %d's random stream", i);
  x->max_batch = hs_sim_max_batch(&s->spec->types[type], s->cfg->param_bytes, s->cfg->act_bytes_per_sample);
  /* A calibrated limit (the first batch that ran out of memory) tightens a derived one; a
   * max_batch written in the cluster file wins. */
  int cal_max = s->compute[type].calib ? s->cfg->perf[type].max_batch : 0;
  if (cal_max > 0 && !s->spec->types[type].max_batch && x->max_batch >= 0 && (!x->max_batch || cal_max < x->max_batch))
    x->max_batch = cal_max;
  if (x->max_batch < 0) {
    /* Not counted in s->n yet, so teardown would not free its stream. */
    gsl_rng_free(x->rng);
    x->rng = NULL;
    return fail(s, HS_EINVAL, "device type %s (%.3g GiB) cannot hold %s: its weights, gradients and "
                "optimizer state alone need more memory", s->spec->types[type].name,
                s->spec->types[type].memory / 1073741824.0, s->cfg->model);
  }
  s->peers[i] = (hs_netm_peer){.node = node, .comm_slowdown = comm_slow};
  s->n++;
  if (s->cfg->trace) {
    char name[192];
    snprintf(name, sizeof name, "worker %d (%s, %s)", i, s->spec->types[type].name, s->spec->nodes[node].name);
    hs_trace_thread_name(s->cfg->trace, i, name);
  }
  return i;
}

static int on_cluster_event(sim *s, int idx) {
  const hs_event_spec *e = &s->spec->events[idx];
  double now = hs_engine_now(s->eng);
  switch (e->kind) {
  case HS_EVENT_SLOWDOWN:
    if (e->worker < 0 || e->worker >= s->n) return fail(s, HS_EINVAL, "event %d: no worker %d", idx, e->worker);
    if (e->slowdown >= 0) s->w[e->worker].slowdown = e->slowdown;
    if (e->comm_slowdown >= 0) s->peers[e->worker].comm_slowdown = e->comm_slowdown;
    return deliver_cluster(s, HS_CHANGE_SLOWDOWN, e->worker);
  case HS_EVENT_JOIN: {
    int w = add_worker(s, e->type, e->node, 1.0, 1.0, now);
    if (w < 0) return w;
    s->w[w].joining = 1;
    /* A newcomer first fetches the current model over the network. */
    double fetch = s->spec->network.latency + s->cfg->grad_bytes / s->spec->network.bandwidth;
    return at(s, now + fetch, EV_JOIN_READY, (uint32_t)w, 0);
  }
  case HS_EVENT_LEAVE: {
    if (e->worker < 0 || e->worker >= s->n) return fail(s, HS_EINVAL, "event %d: no worker %d", idx, e->worker);
    sim_worker *x = &s->w[e->worker];
    int was_active = x->active;
    x->active = 0;
    x->joining = 0;
    if (isnan(x->left_at)) x->left_at = now;
    return was_active ? deliver_cluster(s, HS_CHANGE_LEAVE, e->worker) : 0;
  }
  }
  return 0;
}

static int on_join_ready(sim *s, int w) {
  sim_worker *x = &s->w[w];
  if (!x->joining) return 0; /* it left before it was ready */
  x->joining = 0;
  x->active = 1;
  x->version = s->version;
  double now = hs_engine_now(s->eng);
  x->prev_end = now;
  int rc;
  if (s->conv && (rc = conv_rc(s, s->cfg->conv->add_worker(s->conv, w, &s->diag)))) return rc;
  return deliver_cluster(s, HS_CHANGE_JOIN, w);
}

static int dispatch(sim *s, const hs_event *ev) {
  switch (ev->kind) {
  case EV_COMPUTE: return on_compute_done(s, (int)ev->worker);
  case EV_COLL: return on_coll_done(s, (int)ev->arg);
  case EV_FLOW_START: return on_flow_start(s, (int)ev->arg);
  case EV_LINK: return on_link(s, (int)ev->worker, (uint64_t)ev->arg);
  case EV_APPLY: return on_apply(s, ev->worker, (int)ev->arg);
  case EV_TIMER:
    if (s->done || !s->cfg->policy->on_timer) return 0;
    return policy_rc(s, s->cfg->policy->on_timer(s->pstate, &s->rt, (uint64_t)ev->arg));
  case EV_CLUSTER: return on_cluster_event(s, (int)ev->arg);
  case EV_JOIN_READY: return on_join_ready(s, (int)ev->worker);
  default: return fail(s, HS_ERUNTIME, "internal error: unknown event kind %u", ev->kind);
  }
}

/* --- the run ---------------------------------------------------------------------------- */

static int setup(sim *s, const hs_sim_config *cfg) {
  const hs_cluster_spec *spec = cfg->cluster;
  s->rt.ops = &sim_ops;
  s->cfg = cfg;
  s->spec = spec;
  s->free_op = -1;
  /* Each device type's compute for this model; a roofline is charged the model's FLOPs. */
  double flops = cfg->train_flops_per_sample;
  hs_model_stats zs;
  if (!(flops > 0) && cfg->model && !hs_zoo_stats(cfg->model, &zs, NULL)) flops = zs.train_flops_per_sample;
  if (!(s->compute = calloc((size_t)spec->n_types, sizeof *s->compute)))
    return fail(s, HS_ENOMEM, "out of memory");
  for (int t = 0; t < spec->n_types; t++) {
    hs_compute_spec cs;
    int rc = hs_cluster_compute_for(spec, t, cfg->model ? cfg->model : "", flops, &cs, &s->diag);
    if (rc) return rc;
    if (cs.kind != HS_COMPUTE_INLINE && cs.kind != HS_COMPUTE_CALIB)
      return fail(s, HS_EINVAL, "%s: device_types.%s.compute: the profile (%s) was not imported; "
                  "the caller imports profiles (hetsim sim does)", spec->path, spec->types[t].name,
                  cs.profile);
    if (cs.kind == HS_COMPUTE_CALIB && !cfg->perf)
      return fail(s, HS_EINVAL, "%s: device_types.%s.compute: the calibrated model (calib: \"%s\") "
                  "was not resolved; give a calibration database (--calib DB)",
                  spec->path, spec->types[t].name, cs.calib);
    s->compute[t] = (sim_compute){.calib = cs.kind == HS_COMPUTE_CALIB, .t0 = cs.t0,
                                  .per_sample = cs.per_sample};
  }
  if (cfg->global_batch < 1) return fail(s, HS_EINVAL, "--global-batch must be at least 1");
  int targets = cfg->conv && (cfg->target_loss > 0 || cfg->target_accuracy > 0);
  if (!cfg->conv && (cfg->target_loss > 0 || cfg->target_accuracy > 0))
    return fail(s, HS_EINVAL, "a target loss or accuracy needs a convergence model (--convergence analytic|proxy)");
  if (cfg->max_iterations <= 0 && cfg->max_epochs <= 0 && cfg->max_sim_time <= 0 && !targets)
    return fail(s, HS_EINVAL, "no stop condition: give --iterations, --epochs, --sim-time, --target-loss or --target-accuracy");
  int rc = hs_engine_open(&s->eng, cfg->max_events, &s->diag);
  if (rc) return rc;
  if (hs_netm_open(&s->net, spec)) return fail(s, HS_ENOMEM, "out of memory");
  double ps_bw = spec->ps.link.bandwidth > 0 ? spec->ps.link.bandwidth : spec->network.bandwidth;
  hs_shared_link_init(&s->link[0], ps_bw);
  hs_shared_link_init(&s->link[1], ps_bw);
  s->samples_target = cfg->max_epochs > 0 ? cfg->max_epochs * (double)cfg->dataset_size : 0;
  for (int i = 0; i < spec->n_workers; i++) {
    const hs_worker_spec *w = &spec->workers[i];
    int r = add_worker(s, w->type, w->node, w->slowdown, w->comm_slowdown, 0.0);
    if (r < 0) return r;
    s->w[r].active = 1;
  }
  for (int i = 0; i < spec->n_events; i++)
    if ((rc = at(s, spec->events[i].at, EV_CLUSTER, NO_WORKER, i))) return rc;
  s->target_time = s->last_loss = s->last_acc = NAN;
  s->last_eval = -1;
  if (cfg->conv) {
    const hs_model_info *mi = hs_zoo_find(cfg->model);
    hs_conv_config cc = {.model = cfg->model, .dataset_size = cfg->dataset_size,
                         .classes = mi ? mi->classes : 10, .global_batch = cfg->global_batch,
                         .n_workers = s->n, .seed = cfg->seed, .params = cfg->conv_params};
    double every = hs_params_get(cfg->conv_params, "eval_every");
    s->eval_every = every >= 1 ? (int64_t)every : 1;
    s->conv = calloc(1, cfg->conv->state_size ? cfg->conv->state_size : 1);
    if (!s->conv) return fail(s, HS_ENOMEM, "out of memory for the convergence model");
    s->conv_ready = 1;
    if ((rc = conv_rc(s, cfg->conv->init(s->conv, &cc, &s->diag)))) return rc;
    for (int i = 0; i < s->n; i++)
      if ((rc = conv_rc(s, cfg->conv->add_worker(s->conv, i, &s->diag)))) return rc;
  }
  s->pstate = calloc(1, cfg->policy->state_size ? cfg->policy->state_size : 1);
  if (!s->pstate) return fail(s, HS_ENOMEM, "out of memory for the policy's state");
  if (cfg->policy->init && (rc = policy_rc(s, cfg->policy->init(s->pstate, &s->rt, cfg->params))))
    return rc;
  return 0;
}

static void teardown(sim *s) {
  if (s->pstate && s->cfg->policy->fini) s->cfg->policy->fini(s->pstate, &s->rt);
  free(s->pstate);
  if (s->conv_ready) s->cfg->conv->fini(s->conv);
  free(s->conv);
  for (int i = 0; i < s->n; i++) gsl_rng_free(s->w[i].rng);
  for (int i = 0; i < s->n_ops; i++)
    if (s->ops[i].in_use) op_free(s, i);
  free(s->ops);
  free(s->w);
  free(s->peers);
  free(s->compute);
  hs_shared_link_free(&s->link[0]);
  hs_shared_link_free(&s->link[1]);
  hs_netm_close(&s->net);
  if (s->eng) hs_engine_close(s->eng);
}

static double progress_of(const sim *s) {
  const hs_sim_config *c = s->cfg;
  double p = 0, now = hs_engine_now(s->eng);
  if (c->max_iterations > 0) p = fmax(p, (double)s->iterations / (double)c->max_iterations);
  if (s->samples_target > 0) p = fmax(p, (double)s->samples / s->samples_target);
  if (c->max_sim_time > 0) p = fmax(p, now / c->max_sim_time);
  return p;
}

/* Closes the books at time `end`: writes finished records and fills the result. */
static int finish(sim *s, hs_sim_result *res) {
  double end = s->end;
  double life_sum = 0, wait_sum = 0;
  res->n_workers = s->n;
  res->workers = calloc((size_t)(s->n > 0 ? s->n : 1), sizeof *res->workers);
  if (!res->workers) return fail(s, HS_ENOMEM, "out of memory");
  for (int i = 0; i < s->n; i++) {
    sim_worker *x = &s->w[i];
    if (x->rec_open && !x->computing && x->pending_comm == 0) {
      int rc = flush_record(s, i);
      if (rc) return rc;
    }
    double busy = x->busy;
    if (x->computing && x->rec_start < end) busy += end - x->rec_start;
    double until = isnan(x->left_at) ? end : fmin(end, x->left_at);
    double life = until > x->joined_at ? until - x->joined_at : 0;
    double wait = life - busy - x->comm;
    if (wait < 0) wait = 0;
    life_sum += life;
    wait_sum += wait;
    res->workers[i] = (hs_sim_worker_stats){
        .type = x->type, .node = x->node, .joined_at = x->joined_at, .left_at = x->left_at,
        .initial_batch = x->initial_batch, .steps = x->steps, .samples = x->samples,
        .busy_s = busy, .comm_s = x->comm, .wait_s = wait};
  }
  hs_summary *m = &res->summary;
  hs_runtime_summary(m, s->n, s->iterations, (int64_t)hs_engine_processed(s->eng), s->samples, end);
  m->wait_fraction = life_sum > 0 ? wait_sum / life_sum : NAN;
  if (s->conv) {
    /* The final model is evaluated at the end unless the last update just was. */
    if (s->last_eval != s->iterations) {
      int rc = conv_eval(s, end);
      if (rc) return rc;
    }
    m->final_loss = s->last_loss;
    m->final_accuracy = s->last_acc;
    m->time_to_target_s = s->target_time;
  }
  return 0;
}

int hs_sim_run(const hs_sim_config *cfg, hs_sim_result *res, hs_diag *d) {
  memset(res, 0, sizeof *res);
  sim *s = calloc(1, sizeof *s);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  int rc = setup(s, cfg);
  if (!rc && cfg->policy->start) rc = policy_rc(s, cfg->policy->start(s->pstate, &s->rt));
  res->status = HS_SIM_STALLED;
  hs_event ev;
  uint64_t count = 0;
  while (!rc && hs_engine_pop(s->eng, &ev)) {
    if (cfg->stop && *cfg->stop) {
      res->status = HS_SIM_INTERRUPTED;
      s->end = s->end > 0 ? s->end : hs_engine_now(s->eng);
      break;
    }
    if (cfg->max_sim_time > 0 && ev.time > cfg->max_sim_time) {
      s->done = 1;
      s->end = cfg->max_sim_time;
      break;
    }
    s->end = ev.time;
    rc = dispatch(s, &ev);
    if (s->done) break;
    if (cfg->progress && (++count & 4095) == 0) hs_progress_update(cfg->progress, progress_of(s));
  }
  if (!rc) {
    if (s->done) res->status = HS_SIM_COMPLETE;
    else if (res->status == HS_SIM_STALLED && cfg->max_sim_time > 0) {
      /* Nothing left to do before the time limit: the run simply idles until it. */
      res->status = HS_SIM_COMPLETE;
      s->end = cfg->max_sim_time;
    }
    rc = finish(s, res);
  }
  if (cfg->progress) hs_progress_finish(cfg->progress);
  if (rc) {
    if (d) *d = s->diag;
    if (d && !d->msg[0]) hs_diag_set(d, rc, "simulation failed (%s)", hs_strerror(rc));
    if (d) d->code = rc;
  }
  teardown(s);
  free(s);
  return rc;
}

void hs_sim_result_free(hs_sim_result *res) {
  free(res->workers);
  res->workers = NULL;
}
