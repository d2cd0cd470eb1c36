/* The simulation driver of the runtime core: see sim_run.h for the contract. */
#include "sim/sim_run.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_rng.h"
#include "nn/nn_zoo.h"
#include "policies/pol_compress.h"
#include "runtime/rt_core.h"
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
  EV_JOIN_READY = 8, /* joining worker holds the model */
  EV_PULL_READY = 9, /* pull op `arg` waited for the updates queued before it (pull: after_updates) */
  EV_ACCUMULATED = 10 /* the server added push op `arg` into its accumulator (accumulate_time) */
};

#define NO_WORKER UINT32_MAX

/* What the simulator keeps per worker beyond the core's worker table (rt_core.h): 32 bytes, what
 * a step's start reads (the type, the jitter stream) and the trace's cursor. The count of
 * communications in flight is an array of its own (sim.pending): an all-reduce's start and end
 * pass over every participant's, and at 10^6 workers such a pass streams 4 MB instead of 40. */
typedef struct sim_worker {
  int type, node;
  hs_rng rng;                 /* its compute jitter stream (core_rng.h), inline */
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

/* The kinds of slice the simulator traces: name and category of each (tk_names). */
enum { TK_WAIT, TK_COMPUTE, TK_ALLREDUCE, TK_PUSH, TK_PULL, TK_COUNT };

typedef struct sim {
  hs_rt_core core;            /* first member: the runtime core (the policy sees its hs_runtime) */
  const hs_sim_config *cfg;
  const hs_cluster_spec *spec;
  hs_engine *eng;
  hs_netm net;
  int cap;                    /* slots of w, pending and peers */
  sim_worker *w;
  int *pending;               /* per worker: communications in flight */
  hs_netm_peer *peers;
  sim_compute *compute;       /* per device type */
  sim_op *ops;
  int n_ops, cap_ops, free_op;
  hs_shared_link link[2];     /* the server's inbound (pushes) and outbound (pulls) links */
  double server_free;         /* s, when the server has applied everything queued */
  /* Nodes with fewer compute slots than workers (hs_node_spec.compute_slots): node i's slots
   * are slot_free[slot_at[i] .. slot_at[i + 1]), each the time it frees (s); NULL without. */
  int *slot_at;
  double *slot_free;
  /* convergence */
  void *conv;                 /* the model's state, NULL without one */
  int conv_ready;             /* init succeeded: fini is due */
  int tk[TK_COUNT];           /* the trace's slice kinds (hs_trace_kind; -1: none) */
} sim;

static sim *S(hs_rt_core *c) { return (sim *)c; }

/* The most gradient buckets an overlapped all-reduce is cut into. */
#define SIM_MAX_BUCKETS (1 << 20)

static int fail(sim *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(sim *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hs_diag_vset(&s->core.diag, code, fmt, ap);
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
  if (c->calib) return hs_perf_eval(&s->cfg->perf[type], (double)batch) * s->core.w[w].slowdown;
  return (c->t0 + c->per_sample * (double)batch) * s->core.w[w].slowdown;
}

/* --- schedule helpers ------------------------------------------------------------------- */

/* The simulated now: the time of the event being handled, which the event loop writes into
 * core.clock before it dispatches the event (and 0 before the first, as the engine's clock);
 * one load where hs_engine_now is a call. */
static inline double now_of(const sim *s) { return s->core.clock; }

static int at(sim *s, double t, uint32_t kind, uint32_t worker, int64_t arg) {
  return hs_engine_schedule(s->eng, t, kind, worker, arg, &s->core.diag);
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

static const char *const tk_names[TK_COUNT][2] = {
    [TK_WAIT] = {"wait", "wait"}, [TK_COMPUTE] = {"compute", "compute"},
    [TK_ALLREDUCE] = {"allreduce", "comm"}, [TK_PUSH] = {"push", "comm"}, [TK_PULL] = {"pull", "comm"}};

/* Each kind's record text up to its tid, made once when the run starts (hs_trace_kind); a
 * writer with no room for one takes its names at each slice instead. */
static void trace_kinds(sim *s) {
  for (int k = 0; k < TK_COUNT; k++) s->tk[k] = hs_trace_kind(s->cfg->trace, tk_names[k][0], tk_names[k][1]);
}

static inline void trace_put(sim *s, int w, int k, double t0, double dur) {
  if (s->tk[k] >= 0) hs_trace_slice_kind(s->cfg->trace, w, s->tk[k], t0, dur);
  else hs_trace_slice_static(s->cfg->trace, w, tk_names[k][0], tk_names[k][1], t0, dur);
}

static inline void trace_slice(sim *s, int w, int k, double t0, double t1) {
  if (!s->cfg->trace) return;
  sim_worker *x = &s->w[w];
  if (t0 < x->trace_cursor) t0 = x->trace_cursor;
  if (t1 <= t0) return;
  if (t0 > x->trace_cursor) trace_put(s, w, TK_WAIT, x->trace_cursor, t0 - x->trace_cursor);
  trace_put(s, w, k, t0, t1 - t0);
  x->trace_cursor = t1;
}

/* --- policy callbacks ------------------------------------------------------------------- */

static int deliver_comm(sim *s, hs_comm_kind kind, int w, double start, int stale, uint64_t tag) {
  return hs_rt_core_comm_done(&s->core, kind, w, start, now_of(s), stale, tag);
}

/* --- convergence ------------------------------------------------------------------------- */

static int conv_rc(sim *s, int rc) {
  if (rc >= 0) return 0;
  if (!s->core.diag.msg[0]) fail(s, rc, "convergence model %s failed (%s)", s->cfg->conv->name, hs_strerror(rc));
  if (!s->core.diag.code) s->core.diag.code = rc;
  return rc;
}

/* Tells the convergence model that operation id was issued. */
static int conv_begin(sim *s, int id, const hs_conv_op *op) {
  if (!s->conv) return 0;
  int rc = conv_rc(s, s->cfg->conv->begin(s->conv, id, op, &s->core.diag));
  if (!rc) s->ops[id].conv_begun = 1;
  return rc;
}

static int conv_end(sim *s, int id, int staleness) {
  if (!s->conv || !s->ops[id].conv_begun) return 0;
  s->ops[id].conv_begun = 0;
  return conv_rc(s, s->cfg->conv->end(s->conv, id, staleness, &s->core.diag));
}

/* The driver's snapshot: the convergence model evaluates the global model at once, and the
 * core stores the evaluation and checks the targets. */
static int conv_eval(sim *s, double now) {
  const hs_conv_model *m = s->cfg->conv;
  double loss, acc, chance = NAN;
  int rc = conv_rc(s, m->evaluate(s->conv, &loss, &acc, &s->core.diag));
  if (rc) return rc;
  if (m->target_chance && (s->cfg->target_loss > 0 || s->cfg->target_accuracy > 0))
    chance = m->target_chance(s->conv, loss, acc, s->cfg->target_loss, s->cfg->target_accuracy);
  return hs_rt_core_eval_chance(&s->core, now, s->core.iterations, loss, acc, chance);
}

static int drv_snapshot(hs_rt_core *c, double now) { return conv_eval(S(c), now); }

/* One update of the global model (the core counts it, asks for an evaluation when one is due
 * and checks the stop conditions; the time limit is the event loop's). */
static int global_update(sim *s) { return hs_rt_core_update(&s->core, now_of(s)); }

/* --- the driver table (rt_core.h): what the core asks of the simulator --------------------- */

static double drv_predict(hs_rt_core *c, int w, int batch) { return predict(S(c), w, batch); }

/* When a step of dur seconds asked for at `now` on node nd starts: at once where the node has
 * no fewer slots than workers, else on the slot that frees first, when it does (first come,
 * first served, each step holding its slot to its compute's end: a step shorter than the
 * scheduler's time slice runs to its end once it has a CPU). A node's slots are a binary
 * min-heap of their free times: the first to free is the root, which the step's end replaces
 * (never earlier than it), then sifts down: O(log K) a step. */
static double slot_take(sim *s, int nd, double now, double dur) {
  double *f = s->slot_free + s->slot_at[nd];
  int n = s->slot_at[nd + 1] - s->slot_at[nd];
  if (n == 0) return now;
  double start = f[0] > now ? f[0] : now, end = start + dur;
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && f[c + 1] < f[c]) c++;
    if (!(f[c] < end)) break;
    f[i] = f[c];
    i = c;
  }
  f[i] = end;
  return start;
}

/* The compute slots of the nodes that have fewer than the workers they will hold (joiners
 * included); none allocated where no node has. */
static int slots_open(sim *s) {
  const hs_cluster_spec *spec = s->spec;
  int any = 0;
  for (int i = 0; i < spec->n_nodes; i++) any |= spec->nodes[i].compute_slots > 0;
  if (!any) return 0;
  int *held = calloc((size_t)spec->n_nodes, sizeof *held);
  if (!held || !(s->slot_at = calloc((size_t)spec->n_nodes + 1, sizeof *s->slot_at))) {
    free(held);
    return fail(s, HS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < spec->n_workers; i++) held[spec->workers[i].node]++;
  for (int e = 0; e < spec->n_events; e++)
    if (spec->events[e].kind == HS_EVENT_JOIN) held[spec->events[e].node]++;
  for (int i = 0; i < spec->n_nodes; i++) {
    int k = spec->nodes[i].compute_slots;
    s->slot_at[i + 1] = s->slot_at[i] + (k > 0 && k < held[i] ? k : 0);
  }
  free(held);
  if (s->slot_at[spec->n_nodes] == 0) {
    free(s->slot_at);
    s->slot_at = NULL;
    return 0;
  }
  if (!(s->slot_free = calloc((size_t)s->slot_at[spec->n_nodes], sizeof *s->slot_free)))
    return fail(s, HS_ENOMEM, "out of memory");
  return 0;
}

/* The core has checked the call and marked the worker computing. The step's record is opened
 * at once: its compute end is known (on a node short of compute slots, after its wait for one:
 * the wait is the worker's idle time before the step, as a thread waiting for a CPU has not
 * begun its step). */
static int drv_compute(hs_rt_core *c, int w, int batch) {
  sim *s = S(c);
  hs_rt_worker *x = &s->core.w[w];
  int rc;
  if (x->max_batch > 0 && batch > x->max_batch)
    return fail(s, HS_EINVAL, "worker %d (%s) cannot hold a batch of %d samples of %s: its memory "
                "limit is %d", w, s->spec->types[s->w[w].type].name, batch, s->cfg->model, x->max_batch);
  if ((rc = hs_rt_core_flush(c, w))) return rc;
  double loss = NAN;
  if (s->conv && (rc = conv_rc(s, s->cfg->conv->step(s->conv, w, batch, &loss, &s->core.diag)))) return rc;
  double now = now_of(s);
  /* Without jitter (cv 0) the factor is exactly 1 and draws nothing: skip the call. */
  double dur = predict(s, w, batch);
  if (s->spec->jitter_cv != 0) dur *= hs_rng_lognormal(&s->w[w].rng, s->spec->jitter_cv);
  if (s->slot_at) now = slot_take(s, s->w[w].node, now, dur);
  x->rec_open = 1;
  x->rec.batch = batch;
  x->rec.step = x->steps;
  x->rec.start_s = now;
  x->rec.compute_end_s = now + dur;
  x->rec.comm_end_s = now + dur;
  x->rec_comm = 0;
  x->rec.model_version = (int64_t)x->version;
  x->rec.staleness = 0;
  x->rec.loss = loss;
  return at(s, now + dur, EV_COMPUTE, (uint32_t)w, 0);
}

static int drv_local_update(hs_rt_core *c, int w) {
  /* A local update's time is part of the step's compute model; nothing to schedule. */
  sim *s = S(c);
  if (!s->conv) return 0;
  return conv_rc(s, s->cfg->conv->local_update(s->conv, w, &s->core.diag));
}

/* A compressed gradient's bytes follow the compressor's wire format, its n = M/4 floats viewed
 * as one near-square matrix (the simulator knows no layer shapes; see pol_compress.h), unless
 * the run replicates a real one, which sends them as fp32 (dense_wire). */
static double op_bytes(const sim *s, const hs_comm_opts *o) {
  double m = s->cfg->grad_bytes;
  if (o->compressor && o->ratio > 0 && !s->cfg->dense_wire) {
    hs_block b = hs_compress_flat_block(m / 4.0);
    m = hs_compress_bytes(o->compressor, &b, 1, o->ratio);
  }
  return m;
}

/* Compression and decompression time (the compressor's cost model on its reference device),
 * scaled by the slowest participant's compute slowdown, or for a real run's replica by the
 * calibrated compress_scale alone; added before the bytes flow. */
static double op_compress_time(const sim *s, const hs_comm_opts *o, const int *ws, int n) {
  if (!o->compressor || !(o->ratio > 0)) return 0;
  hs_block b = hs_compress_flat_block(s->cfg->grad_bytes / 4.0);
  if (s->cfg->compress_scale > 0) return hs_compress_seconds(o->compressor, &b, 1, o->ratio) * s->cfg->compress_scale;
  double slow = 0;
  for (int i = 0; i < n; i++)
    if (s->core.w[ws[i]].slowdown > slow) slow = s->core.w[ws[i]].slowdown;
  return hs_compress_seconds(o->compressor, &b, 1, o->ratio) * slow;
}

static double coll_time(sim *s, const sim_op *op, double m, hs_ar_algo algo) {
  return algo == HS_AR_HIER ? hs_netm_hier_time(&s->net, s->peers, op->ws, op->n, m)
                            : hs_netm_ring_time(&s->net, s->peers, op->ws, op->n, m);
}

static int drv_allreduce(hs_rt_core *c, const int *ws, int n, const double *weights, const hs_comm_opts *o) {
  sim *s = S(c);
  int rc, id = op_new(s);
  if (id < 0) return id;
  sim_op *op = &s->ops[id];
  op->kind = HS_OP_ALLREDUCE;
  op->what = o->what;
  op->worker = -1;
  op->tag = o->tag;
  op->n = n;
  op->bytes = op_bytes(s, o);
  op->start = now_of(s);
  op->ws = malloc((size_t)n * sizeof *op->ws);
  int overlap = o->overlap && o->what == HS_COMM_GRAD;
  double bucket = o->bucket_bytes > 0 ? o->bucket_bytes : 25.0 * 1024 * 1024;
  /* A bucket of a few bytes on a large gradient would cut it into more buckets than an int
   * counts, or memory holds: at most SIM_MAX_BUCKETS. */
  double nbd = overlap ? ceil(op->bytes / bucket) : 1;
  if (nbd > SIM_MAX_BUCKETS)
    return fail(s, HS_EINVAL, "%s: overlap cuts the %.17g-byte gradient into %.3g buckets of %.17g bytes; at most %d "
                "(a larger bucket)", s->cfg->policy->name, op->bytes, nbd, bucket, SIM_MAX_BUCKETS);
  int nb = nbd < 1 ? 1 : (int)nbd;
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
      const hs_rt_worker *x = &s->core.w[ws[i]];
      if (x->computing && x->rec.compute_end_s > start) start = x->rec.compute_end_s;
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
        const hs_rt_worker *x = &s->core.w[ws[i]];
        if (!x->computing) continue;
        double r = x->rec.start_s + (x->rec.compute_end_s - x->rec.start_s) * g;
        if (r > ready) ready = r;
      }
      op->bstart[k] = ready > prev_end ? ready : prev_end;
      op->bend[k] = op->bstart[k] + ct * mk / op->bytes + coll_time(s, op, mk, o->algo);
      prev_end = op->bend[k];
    }
  }
  for (int i = 0; i < n; i++) s->pending[ws[i]]++;
  hs_conv_op co = {.kind = HS_OP_ALLREDUCE, .what = o->what, .worker = -1, .ws = ws, .n = n,
                   .weights = weights, .compressor = o->compressor, .ratio = o->ratio,
                   .keep_local = o->what == HS_COMM_MODEL && o->keep_local};
  if ((rc = conv_begin(s, id, &co))) return rc;
  return at(s, op->bend[nb - 1], EV_COLL, NO_WORKER, id);
}

/* Pull op `id`, asked at op->start, leaves the server now with the global model as it is (a
 * pull never carries a compressor). */
static int pull_serve(sim *s, int id) {
  sim_op *op = &s->ops[id];
  op->version = s->core.version;
  hs_conv_op co = {.kind = HS_OP_PULL, .what = op->what, .ps_mode = op->ps_mode, .worker = op->worker};
  int rc = conv_begin(s, id, &co);
  if (rc) return rc;
  return at(s, now_of(s) + s->spec->ps.link.latency, EV_FLOW_START, (uint32_t)op->worker, id);
}

static int start_flow(sim *s, hs_comm_kind kind, int w, const hs_comm_opts *o) {
  int rc, id = op_new(s);
  if (id < 0) return id;
  sim_op *op = &s->ops[id];
  op->kind = kind;
  op->what = o->what;
  op->ps_mode = o->ps_mode;
  op->worker = w;
  op->step = s->core.w[w].rec.step;
  op->tag = o->tag;
  op->start = now_of(s);
  /* Models travel uncompressed; gradients may be compressed. */
  op->bytes = kind == HS_OP_PULL ? s->cfg->grad_bytes : op_bytes(s, o);
  s->pending[w]++;
  /* A server that serves in arrival order (pull: after_updates) sends the model once the
   * updates queued before the pull are applied: the pull waits until then. */
  if (kind == HS_OP_PULL)
    return s->spec->ps.pull == HS_PS_PULL_AFTER_UPDATES && s->server_free > op->start
               ? at(s, s->server_free, EV_PULL_READY, (uint32_t)w, id)
               : pull_serve(s, id);
  op->version = (uint64_t)s->core.w[w].rec.model_version;
  hs_conv_op co = {.kind = kind, .what = o->what, .ps_mode = o->ps_mode, .worker = w,
                   .compressor = o->compressor, .ratio = o->ratio, .weight = o->weight};
  if ((rc = conv_begin(s, id, &co))) return rc;
  double ct = op_compress_time(s, o, &w, 1);
  return at(s, op->start + s->spec->ps.link.latency + ct, EV_FLOW_START, (uint32_t)w, id);
}

static int drv_push(hs_rt_core *c, int w, const hs_comm_opts *o) { return start_flow(S(c), HS_OP_PUSH, w, o); }
static int drv_pull(hs_rt_core *c, int w, const hs_comm_opts *o) { return start_flow(S(c), HS_OP_PULL, w, o); }

/* The server takes dt of work once it is free, from `from` on, one piece at a time in the order
 * given: when that piece is done. */
static double server_take(sim *s, double from, double dt) {
  s->server_free = (s->server_free > from ? s->server_free : from) + dt;
  return s->server_free;
}

static int drv_apply(hs_rt_core *c, const hs_comm_opts *o) {
  sim *s = S(c);
  int id = op_new(s);
  if (id < 0) return id;
  sim_op *op = &s->ops[id];
  op->kind = HS_OP_APPLY;
  op->worker = -1;
  op->tag = o->tag;
  op->start = now_of(s);
  /* The server starts the apply once its command has come (apply_latency, 0 by default) and
   * the work queued before it is done. */
  double t = server_take(s, op->start + s->spec->ps.apply_latency, s->spec->ps.update_time);
  hs_conv_op co = {.kind = HS_OP_APPLY, .what = o->what, .worker = -1};
  int rc = conv_begin(s, id, &co);
  if (rc) return rc;
  return at(s, t, EV_APPLY, NO_WORKER, id);
}

/* Timers and cluster events go into the event queue, in its (time, sequence) order. */
static int drv_wake_at(hs_rt_core *c, double t, hs_rt_wake_kind kind, int64_t arg) {
  return at(S(c), t, kind == HS_RT_WAKE_TIMER ? EV_TIMER : EV_CLUSTER, NO_WORKER, arg);
}

static int drv_set_lr(hs_rt_core *c, int w, double lr) {
  /* The learning rate changes no time in the simulator; the convergence models read it. */
  sim *s = S(c);
  return s->conv ? conv_rc(s, s->cfg->conv->set_lr(s->conv, w, lr, &s->core.diag)) : 0;
}

/* The network model reads the communication slowdown from the peers. */
static void drv_slowdown(hs_rt_core *c, int w) { S(c)->peers[w].comm_slowdown = c->w[w].comm_slowdown; }

static int drv_join(hs_rt_core *c, const hs_event_spec *e);

static const hs_rt_driver sim_driver = {
    .version = HS_RT_DRIVER_VERSION,
    .name = "simulated",
    .compute = drv_compute,
    .local_update = drv_local_update,
    .allreduce = drv_allreduce,
    .push = drv_push,
    .pull = drv_pull,
    .apply = drv_apply,
    .snapshot = drv_snapshot,
    .wake_at = drv_wake_at,
    .now = NULL, /* the event loop sets core.clock to each event's time */
    .predict = drv_predict,
    .set_lr = drv_set_lr,
    .slowdown = drv_slowdown,
    .join = drv_join,
    .caps = HS_SIM_CAPS,
};

/* --- event handlers --------------------------------------------------------------------- */

static int on_compute_done(sim *s, int w) {
  hs_rt_worker *x = &s->core.w[w];
  double now = now_of(s); /* the step's compute end: the event's time */
  if (s->cfg->trace) trace_slice(s, w, TK_COMPUTE, x->rec.start_s, now);
  return hs_rt_core_compute_done(&s->core, w, x->rec.batch, x->rec.start_s, now, x->rec.loss);
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
  double now = now_of(s);
  double first = op->bstart[0];
  int rc = conv_end(s, id, 0);
  if (rc || (rc = global_update(s))) return rc;
  for (int i = 0; i < op->n; i++) {
    hs_rt_worker *x = &s->core.w[op->ws[i]];
    double e = exposed(op, x->rec.compute_end_s);
    s->pending[op->ws[i]]--;
    x->comm += e;
    x->rec_comm += e;
    x->rec.comm_end_s = now;
    x->version = s->core.version;
    if (s->cfg->trace) trace_slice(s, op->ws[i], TK_ALLREDUCE, now - e, now);
  }
  uint64_t tag = op->tag;
  op_free(s, id);
  return deliver_comm(s, HS_OP_ALLREDUCE, -1, first, 0, tag);
}

static int link_reschedule(sim *s, int l) {
  double now = now_of(s);
  double t = hs_shared_link_rates(&s->link[l], now);
  if (!isfinite(t)) return 0;
  return at(s, t, EV_LINK, (uint32_t)l, (int64_t)s->link[l].epoch);
}

static int on_flow_start(sim *s, int id) {
  sim_op *op = &s->ops[id];
  int l = op->kind == HS_OP_PUSH ? 0 : 1;
  double now = now_of(s);
  /* The worker's side of the transfer: the network, slowed by its comm_slowdown. */
  double cap = s->spec->network.bandwidth / s->peers[op->worker].comm_slowdown;
  hs_shared_link_advance(&s->link[l], now);
  if (hs_shared_link_add(&s->link[l], id, op->bytes, cap))
    return fail(s, HS_ENOMEM, "out of memory for a flow");
  return link_reschedule(s, l);
}

static int flow_finish(sim *s, int id, double now);

/* A flow's bytes have arrived. */
static int flow_done(sim *s, int id) {
  sim_op *op = &s->ops[id];
  int w = op->worker;
  hs_rt_worker *x = &s->core.w[w];
  double now = now_of(s);
  double t = now - op->start;
  x->comm += t;
  if (x->rec_open && x->rec.step == op->step) x->rec_comm += t;
  if (s->cfg->trace) trace_slice(s, w, op->kind == HS_OP_PUSH ? TK_PUSH : TK_PULL, op->start, now);
  if (op->kind == HS_OP_PUSH && op->ps_mode == HS_PS_APPLY) {
    /* The server applies pushes one at a time, in arrival order. */
    return at(s, server_take(s, now, s->spec->ps.update_time), EV_APPLY, (uint32_t)w, id);
  }
  if (op->kind == HS_OP_PUSH && op->ps_mode == HS_PS_ACCUMULATE && s->spec->ps.accumulate_time > 0) {
    /* ... and adds accumulated ones into its accumulator the same way (none charged when 0). */
    return at(s, server_take(s, now, s->spec->ps.accumulate_time), EV_ACCUMULATED, (uint32_t)w, id);
  }
  return flow_finish(s, id, now);
}

/* A transfer is over for its worker (at now): counted, recorded and delivered. */
static int flow_finish(sim *s, int id, double now) {
  sim_op *op = &s->ops[id];
  int w = op->worker;
  hs_rt_worker *x = &s->core.w[w];
  double t = now - op->start;
  s->pending[w]--;
  if (x->rec_open) x->rec.comm_end_s = now;
  int rc = conv_end(s, id, 0);
  if (rc) return rc;
  uint64_t tag = op->tag;
  hs_comm_kind kind = op->kind;
  int stale = 0;
  if (kind == HS_OP_PULL) x->version = op->version;
  else stale = (int)(s->core.version - op->version);
  op_free(s, id);
  return deliver_comm(s, kind, w, now - t, stale, tag);
}

static int on_link(sim *s, int l, uint64_t epoch) {
  if (epoch != s->link[l].epoch) return 0; /* the rates changed since; a newer event stands */
  double now = now_of(s);
  hs_shared_link_advance(&s->link[l], now);
  int64_t done[64];
  int got, rc;
  while ((got = hs_shared_link_reap(&s->link[l], done, 64)) > 0) {
    for (int i = 0; i < got; i++)
      if ((rc = flow_done(s, (int)done[i]))) return rc;
    if (s->core.done) return 0;
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
  hs_rt_worker *x = &s->core.w[w];
  int stale = (int)(s->core.version - op->version);
  if ((rc = conv_end(s, id, stale)) || (rc = global_update(s))) return rc;
  s->pending[w]--;
  if (x->rec_open && x->rec.step == op->step) {
    x->rec.comm_end_s = now_of(s);
    x->rec.staleness = stale;
  }
  op_free(s, id);
  return deliver_comm(s, HS_OP_PUSH, w, start, stale, tag);
}

static int add_worker(sim *s, int type, int node, double slow, double comm_slow, double t) {
  if (s->core.n == s->cap) {
    int nc = s->cap ? 2 * s->cap : 16;
    sim_worker *w = realloc(s->w, (size_t)nc * sizeof *w);
    if (w) s->w = w;
    int *pc = realloc(s->pending, (size_t)nc * sizeof *pc);
    if (pc) s->pending = pc;
    hs_netm_peer *p = realloc(s->peers, (size_t)nc * sizeof *p);
    if (p) s->peers = p;
    if (!w || !pc || !p) return fail(s, HS_ENOMEM, "out of memory for %d workers", nc);
    s->cap = nc;
  }
  int i = s->core.n;
  sim_worker *x = &s->w[i];
  memset(x, 0, sizeof *x);
  x->type = type;
  x->node = node;
  x->trace_cursor = t;
  hs_rng_init(&x->rng, s->cfg->seed, (uint64_t)i);
  s->pending[i] = 0;
  int max_batch = hs_sim_max_batch(&s->spec->types[type], s->cfg->param_bytes, s->cfg->act_bytes_per_sample);
  /* A calibrated limit (the first batch that ran out of memory) tightens a derived one; a
   * max_batch written in the cluster file wins. */
  int cal_max = s->compute[type].calib ? s->cfg->perf[type].max_batch : 0;
  if (cal_max > 0 && !s->spec->types[type].max_batch && max_batch >= 0 && (!max_batch || cal_max < max_batch))
    max_batch = cal_max;
  int rc = max_batch < 0 ? fail(s, HS_EINVAL, "device type %s (%.3g GiB) cannot hold %s: its weights, gradients "
                                "and optimizer state alone need more memory", s->spec->types[type].name,
                                s->spec->types[type].memory / 1073741824.0, s->cfg->model)
                         : hs_rt_core_add_worker(&s->core, slow, comm_slow, 0.0, t);
  if (rc < 0) return rc;
  s->core.w[i].max_batch = max_batch;
  s->peers[i] = (hs_netm_peer){.node = node, .comm_slowdown = comm_slow};
  if (s->cfg->trace) {
    char name[192];
    snprintf(name, sizeof name, "worker %d (%s, %s)", i, s->spec->types[type].name, s->spec->nodes[node].name);
    hs_trace_thread_name(s->cfg->trace, i, name);
  }
  return i;
}

/* A join event: the newcomer first fetches the current model over the network. */
static int drv_join(hs_rt_core *c, const hs_event_spec *e) {
  sim *s = S(c);
  double now = now_of(s);
  int w = add_worker(s, e->type, e->node, 1.0, 1.0, now);
  if (w < 0) return w;
  s->core.w[w].joining = 1;
  double fetch = s->spec->network.latency + s->cfg->grad_bytes / s->spec->network.bandwidth;
  return at(s, now + fetch, EV_JOIN_READY, (uint32_t)w, 0);
}

static int on_join_ready(sim *s, int w) {
  if (!s->core.w[w].joining) return 0; /* it left before it was ready */
  int rc;
  if (s->conv && (rc = conv_rc(s, s->cfg->conv->add_worker(s->conv, w, &s->core.diag)))) return rc;
  return hs_rt_core_joined(&s->core, w, now_of(s));
}

static int dispatch(sim *s, const hs_event *ev) {
  switch (ev->kind) {
  case EV_COMPUTE: return on_compute_done(s, (int)ev->worker);
  case EV_COLL: return on_coll_done(s, (int)ev->arg);
  case EV_FLOW_START: return on_flow_start(s, (int)ev->arg);
  case EV_LINK: return on_link(s, (int)ev->worker, (uint64_t)ev->arg);
  case EV_APPLY: return on_apply(s, ev->worker, (int)ev->arg);
  case EV_ACCUMULATED: return flow_finish(s, (int)ev->arg, now_of(s));
  case EV_TIMER: return hs_rt_core_wake(&s->core, HS_RT_WAKE_TIMER, ev->arg);
  case EV_CLUSTER: return hs_rt_core_wake(&s->core, HS_RT_WAKE_CLUSTER, ev->arg);
  case EV_JOIN_READY: return on_join_ready(s, (int)ev->worker);
  case EV_PULL_READY: return pull_serve(s, (int)ev->arg);
  default: return fail(s, HS_ERUNTIME, "internal error: unknown event kind %u", ev->kind);
  }
}

/* --- the run ---------------------------------------------------------------------------- */

static int setup(sim *s, const hs_sim_config *cfg) {
  const hs_cluster_spec *spec = cfg->cluster;
  hs_rt_core *c = &s->core;
  hs_rt_core_init(c, &sim_driver);
  /* max_time 0: the event loop ends the run at max_sim_time itself; eval_every: below, with the
   * convergence model. */
  hs_rt_core_set_job(c, &(hs_rt_core_job){
      .policy = cfg->policy, .params = cfg->params, .cluster = spec, .global_batch = cfg->global_batch,
      .seed = cfg->seed, .max_iterations = cfg->max_iterations,
      .samples_target = cfg->max_epochs > 0 ? cfg->max_epochs * (double)cfg->dataset_size : 0,
      .target_loss = cfg->target_loss, .target_accuracy = cfg->target_accuracy, .sink = cfg->sink,
      .sink_ctx = cfg->sink_ctx, .eval_sink = cfg->eval_sink, .eval_ctx = cfg->eval_ctx});
  s->cfg = cfg;
  if (cfg->trace) trace_kinds(s);
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
    int rc = hs_cluster_compute_for(spec, t, cfg->model ? cfg->model : "", flops, &cs, &s->core.diag);
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
  int rc = hs_engine_open(&s->eng, cfg->max_events, &s->core.diag);
  if (rc) return rc;
  if (hs_netm_open(&s->net, spec)) return fail(s, HS_ENOMEM, "out of memory");
  double ps_bw = spec->ps.link.bandwidth > 0 ? spec->ps.link.bandwidth : spec->network.bandwidth;
  hs_shared_link_init(&s->link[0], ps_bw);
  hs_shared_link_init(&s->link[1], ps_bw);
  if ((rc = slots_open(s))) return rc;
  for (int i = 0; i < spec->n_workers; i++) {
    const hs_worker_spec *w = &spec->workers[i];
    int r = add_worker(s, w->type, w->node, w->slowdown, w->comm_slowdown, 0.0);
    if (r < 0) return r;
    s->core.w[r].active = 1;
  }
  if (cfg->conv) {
    const hs_model_info *mi = hs_zoo_find(cfg->model);
    hs_conv_config cc = {.model = cfg->model, .dataset_size = cfg->dataset_size,
                         .classes = mi ? mi->classes : 10, .global_batch = cfg->global_batch,
                         .n_workers = s->core.n, .seed = cfg->seed, .params = cfg->conv_params};
    double every = hs_params_get(cfg->conv_params, "eval_every");
    s->core.eval_every = every >= 1 ? (int64_t)every : 1;
    s->conv = calloc(1, cfg->conv->state_size ? cfg->conv->state_size : 1);
    if (!s->conv) return fail(s, HS_ENOMEM, "out of memory for the convergence model");
    s->conv_ready = 1;
    if ((rc = conv_rc(s, cfg->conv->init(s->conv, &cc, &s->core.diag)))) return rc;
    for (int i = 0; i < s->core.n; i++)
      if ((rc = conv_rc(s, cfg->conv->add_worker(s->conv, i, &s->core.diag)))) return rc;
  }
  /* The core asks for the cluster events (nothing before has scheduled an event) and runs the
   * policy's init. */
  return hs_rt_core_open(c);
}

static void teardown(sim *s) {
  hs_rt_core_close(&s->core);
  if (s->conv_ready) s->cfg->conv->fini(s->conv);
  free(s->conv);
  for (int i = 0; i < s->n_ops; i++)
    if (s->ops[i].in_use) op_free(s, i);
  free(s->ops);
  free(s->w);
  free(s->pending);
  free(s->peers);
  free(s->compute);
  free(s->slot_at);
  free(s->slot_free);
  hs_shared_link_free(&s->link[0]);
  hs_shared_link_free(&s->link[1]);
  hs_netm_close(&s->net);
  if (s->eng) hs_engine_close(s->eng);
}

static double progress_of(const sim *s) {
  const hs_sim_config *c = s->cfg;
  double p = 0, now = hs_engine_now(s->eng);
  if (c->max_iterations > 0) p = fmax(p, (double)s->core.iterations / (double)c->max_iterations);
  if (s->core.samples_target > 0) p = fmax(p, (double)s->core.samples / s->core.samples_target);
  if (c->max_sim_time > 0) p = fmax(p, now / c->max_sim_time);
  return p;
}

/* Closes the books at time `end`: writes finished records and fills the result. */
static int finish(sim *s, hs_sim_result *res) {
  double end = s->core.end;
  double life_sum = 0, wait_sum = 0;
  res->n_workers = s->core.n;
  res->workers = calloc((size_t)(s->core.n > 0 ? s->core.n : 1), sizeof *res->workers);
  if (!res->workers) return fail(s, HS_ENOMEM, "out of memory");
  for (int i = 0; i < s->core.n; i++) {
    hs_rt_worker *x = &s->core.w[i];
    if (x->rec_open && !x->computing && s->pending[i] == 0) {
      int rc = hs_rt_core_flush(&s->core, i);
      if (rc) return rc;
    }
    double busy, life, wait;
    hs_rt_core_worker_time(&s->core, i, end, &busy, &life, &wait);
    life_sum += life;
    wait_sum += wait;
    res->workers[i] = (hs_sim_worker_stats){
        .type = s->w[i].type, .node = s->w[i].node, .joined_at = x->joined_at, .left_at = x->left_at,
        .initial_batch = x->initial_batch, .steps = x->steps, .samples = x->samples,
        .busy_s = busy, .comm_s = x->comm, .wait_s = wait};
  }
  hs_summary *m = &res->summary;
  hs_runtime_summary(m, s->core.n, s->core.iterations, (int64_t)hs_engine_processed(s->eng), s->core.samples, end);
  m->wait_fraction = life_sum > 0 ? wait_sum / life_sum : NAN;
  if (s->conv) {
    /* The final model is evaluated at the end unless the last update just was. */
    if (s->core.last_eval != s->core.iterations) {
      int rc = conv_eval(s, end);
      if (rc) return rc;
    }
    m->final_loss = s->core.last_loss;
    m->final_accuracy = s->core.last_acc;
    m->time_to_target_s = s->core.target_time;
  }
  return 0;
}

int hs_sim_run(const hs_sim_config *cfg, hs_sim_result *res, hs_diag *d) {
  memset(res, 0, sizeof *res);
  sim *s = calloc(1, sizeof *s);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  int rc = setup(s, cfg);
  if (!rc) rc = hs_rt_core_start(&s->core);
  res->status = HS_SIM_STALLED;
  hs_event ev;
  uint64_t count = 0;
  while (!rc && hs_engine_pop(s->eng, &ev)) {
    if (cfg->stop && *cfg->stop) {
      res->status = HS_SIM_INTERRUPTED;
      s->core.end = s->core.end > 0 ? s->core.end : hs_engine_now(s->eng);
      break;
    }
    if (cfg->max_sim_time > 0 && ev.time > cfg->max_sim_time) {
      s->core.done = 1;
      s->core.end = cfg->max_sim_time;
      break;
    }
    s->core.end = s->core.clock = ev.time;
    /* Many workers' steps end at one time (an SSGD iteration's, per device type), in an order
     * the hardware cannot guess (by device type, not by worker): ask for the part of the
     * worker record that a step's end reads, for the event a few pops ahead. */
    uint32_t aw = hs_engine_ahead_worker(s->eng, 8);
    if (aw < (uint32_t)s->core.n) {
      const hs_rt_worker *x = &s->core.w[aw];
      __builtin_prefetch(&x->rec.batch);
      __builtin_prefetch(&x->rec.loss);
      __builtin_prefetch(&x->samples);
    }
    rc = dispatch(s, &ev);
    if (s->core.done) break;
    if (cfg->progress && (++count & 4095) == 0) hs_progress_update(cfg->progress, progress_of(s));
  }
  if (!rc) {
    if (s->core.done) res->status = HS_SIM_COMPLETE;
    else if (res->status == HS_SIM_STALLED && cfg->max_sim_time > 0) {
      /* Nothing left to do before the time limit: the run simply idles until it. */
      res->status = HS_SIM_COMPLETE;
      s->core.end = cfg->max_sim_time;
    }
    rc = finish(s, res);
  }
  if (cfg->progress) hs_progress_finish(cfg->progress);
  if (rc) {
    if (d) *d = s->core.diag;
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
