/* rt_core: the one implementation of the runtime that policies drive (hs_runtime_ops), over a
 * small driver table. A driver (the simulator, sim/sim_run.c; the threads, real/real_run.c;
 * the ranks' coordinator, real/real_rank.c) only moves time, compute and bytes; the core owns
 * what every runtime must do for a policy alike:
 *
 * - the ops table the policy calls, with the argument checks of rt_runtime.h, in one place and
 *   in the same words: a worker must exist, compute needs an idle worker in the cluster and a
 *   batch of at least one sample, an all-reduce needs participants whose weights (given, or
 *   their last batches) are finite and not negative, a timer's delay is finite and not
 *   negative, a learning rate is not negative; a NULL hs_comm_opts is the zeroed one;
 * - the worker table (membership, versions, batches, learning rates, slowdowns, the open step
 *   record and the time each worker spent computing and communicating);
 * - timers and cluster events: the driver wakes the core at their times (wake_at), in the
 *   driver's own (time, sequence) order; slowdown and leave events are the core's, join events
 *   the driver's (it creates the worker where it can, then calls hs_rt_core_joined);
 * - the one rule for counting iterations (hs_rt_core_update): an iteration is one update of the
 *   global model, counted once per operation when the global model holds it (an all-reduce's
 *   result has been made the global model, a push has been applied, an apply made), never per
 *   participant. Where one copy is the global model (the simulator, the threaded runtime's
 *   server and first all-reduce participant) that is when it is written; where every rank
 *   holds a replica (real/real_rank.c) it is when the last replica has it (the last
 *   participant's report); evaluations become due at every eval_every-th update (the driver's snapshot
 *   then evaluates, or keeps a copy to evaluate later, and reports with hs_rt_core_eval);
 * - stop conditions: max_iterations, a number of samples (epochs), the runtime clock
 *   (max_time), a target loss and a target accuracy (both at an evaluation);
 * - the step records (flushed to the sink) and the summary's arithmetic.
 *
 * The driver reports back through two calls: hs_rt_core_compute_done (a step finished) and
 * hs_rt_core_comm_done (a communication finished), plus hs_rt_core_wake for its wake-ups.
 *
 * Contract:
 * - A driver embeds hs_rt_core as the first member of its state and sets drv, the policy and
 *   the limits before hs_rt_core_start; it calls everything here from one thread at a time
 *   (the simulator is single-threaded; a threaded driver holds its lock).
 * - Functions returning int return 0, or a negative HS_E* code with the message in core->diag.
 * - The hot path (checks, counting, record fields) is inline or a direct call; the only
 *   indirect calls are the policy's (through hs_runtime_ops) and the core's one call into the
 *   driver per action.
 * Units: seconds, samples. */
#ifndef HS_RT_CORE_H
#define HS_RT_CORE_H

#include <math.h>
#include <stdint.h>

#include "core/core_config.h"
#include "core/core_error.h"
#include "core/core_store.h"
#include "policies/pol_policy.h"
#include "runtime/rt_runtime.h"

typedef struct hs_rt_core hs_rt_core;

/* Receives each finished step record; a non-zero return ends the run with that code. */
typedef int hs_rt_step_sink(void *ctx, const hs_step_row *row, hs_diag *d);
/* Receives each evaluation (time in s, step = global updates so far, accuracy a fraction or
 * NaN); a non-zero return ends the run with that code. */
typedef int hs_rt_eval_sink(void *ctx, double time_s, int64_t step, double loss, double accuracy, hs_diag *d);

/* What a wake-up is for. */
typedef enum hs_rt_wake_kind {
  HS_RT_WAKE_TIMER = 0,   /* a policy timer: arg is its tag */
  HS_RT_WAKE_CLUSTER = 1  /* cluster event number arg of the cluster file */
} hs_rt_wake_kind;

/* The driver table: what differs between the simulator, threads and ranks. Every action has
 * passed the core's checks when it is called; the core has already marked a computing worker
 * (computing, last_batch, initial_batch, cur_tag). */
typedef struct hs_rt_driver {
  int version; /* HS_RT_DRIVER_VERSION */
  const char *name;
  int (*compute)(hs_rt_core *c, int w, int batch);
  int (*local_update)(hs_rt_core *c, int w);
  /* wts: the participants' weights as the policy gave them, NULL for their last batches. */
  int (*allreduce)(hs_rt_core *c, const int *ws, int n, const double *wts, const hs_comm_opts *o);
  int (*push)(hs_rt_core *c, int w, const hs_comm_opts *o);
  int (*pull)(hs_rt_core *c, int w, const hs_comm_opts *o);
  int (*apply)(hs_rt_core *c, const hs_comm_opts *o);
  /* An evaluation of the global model is due at the update just counted (c->iterations, time
   * now): evaluate it now, or keep a copy for later; either way report with hs_rt_core_eval.
   * NULL: the driver evaluates nothing during the run. */
  int (*snapshot)(hs_rt_core *c, double now);
  /* Call hs_rt_core_wake(c, kind, arg) at time t (s, runtime clock). */
  int (*wake_at)(hs_rt_core *c, double t, hs_rt_wake_kind kind, int64_t arg);
  /* The runtime clock; NULL: c->clock, which the driver keeps (one load instead of a call). */
  double (*now)(hs_rt_core *c);
  /* The performance model's prediction of a step on w (no jitter, current slowdown). */
  double (*predict)(hs_rt_core *c, int w, int batch);
  /* Optional (NULL: nothing more to do): the learning rate of w (-1: all) has been set in the
   * worker table. */
  int (*set_lr)(hs_rt_core *c, int w, double lr);
  /* Optional: worker w's slowdowns have been changed by a cluster event. */
  void (*slowdown)(hs_rt_core *c, int w);
  /* A join event of the cluster file (NULL: the driver cannot; the core refuses it before the
   * run). The driver creates the worker (hs_rt_core_add_worker) and, once it holds the model,
   * calls hs_rt_core_joined. */
  int (*join)(hs_rt_core *c, const hs_event_spec *e);
  unsigned caps; /* HS_CAP_* (pol_policy.h): what it can do; the core refuses the rest */
} hs_rt_driver;

#define HS_RT_DRIVER_VERSION 1

typedef struct hs_rt_worker {
  /* The fields are in the order of their use, so that each phase of a step touches few cache
   * lines of the record (at 10^6 workers the table is far out of cache, and a simulated SSGD
   * iteration streams it four times): the open record and what a step's end updates first,
   * then what a step's start and an all-reduce's end read besides, the rest last. */
  /* The open step record: opened by the driver when a step starts, written when the next one
   * starts or at the end. */
  hs_step_row rec;
  int rec_open;
  char active, computing, joining;
  int last_batch;             /* samples of its last compute issued, 0 before */
  int initial_batch;          /* batch of its first step, 0 if none */
  uint64_t cur_tag;           /* the tag of the step it computes */
  double busy;                /* s computing (as the driver counts it) */
  int64_t steps, samples;
  double rec_comm;            /* s the worker spent communicating during this record */
  double comm;                /* s communicating (as the driver counts it) */
  double prev_end;            /* s, end of the previous record */
  uint64_t version;           /* global model version it computes on */
  double slowdown;
  int max_batch;              /* memory limit; 0 = none */
  double comm_slowdown, lr;
  double joined_at, left_at;  /* s; left_at NaN while in the cluster */
} hs_rt_worker;

struct hs_rt_core {
  hs_runtime rt;              /* first member: the policy sees only this */
  hs_runtime_ops ops;         /* the core's table, with the driver's caps */
  const hs_rt_driver *drv;
  hs_diag diag;
  /* the policy */
  const hs_policy *policy;
  const hs_params *params;
  void *pstate;
  /* the job */
  const hs_cluster_spec *cluster; /* may be NULL: no events */
  int64_t global_batch;
  uint64_t seed;
  /* limits: 0 = none */
  int64_t max_iterations;
  double samples_target;      /* samples (epochs times the data set) */
  double max_time;            /* s, checked at each update; a driver whose clock jumps from
                               * event to event ends the run at max_time itself and leaves 0 */
  double target_loss, target_accuracy; /* <= 0 = none; checked at evaluations */
  int64_t eval_every;         /* updates between evaluations; 0 = none during the run */
  hs_rt_step_sink *sink;      /* may be NULL */
  void *sink_ctx;
  hs_rt_eval_sink *eval_sink; /* may be NULL */
  void *eval_ctx;
  /* the workers */
  int n, cap;
  hs_rt_worker *w;
  /* the run */
  uint64_t version;
  int64_t iterations, samples;
  int64_t last_eval;          /* iterations at the last evaluation, -1 before */
  double last_loss, last_acc, target_time; /* target_time: s, NaN until met */
  double target_miss;         /* the chance that no evaluation so far met the targets, from the
                               * chances hs_rt_core_eval_chance was given (1 until one) */
  double clock;               /* s: the runtime clock of a driver without `now`, which sets it
                               * before every report (the simulator: each event's time) */
  int done;                   /* a stop condition was reached */
  int failed;                 /* the run failed (hs_rt_core_settle, hs_rt_core_abort) */
  double end;                 /* s, when */
  double global_lr;           /* the learning rate of the global model's updates (a server's, an
                               * all-reduce of gradients): the job's, then set_lr(-1, lr)'s */
};

/* Sets up the core's fields that the driver does not: ops table, counters, NaNs. Call first. */
void hs_rt_core_init(hs_rt_core *c, const hs_rt_driver *drv);
/* Appends a worker slot (inactive until the driver marks it or hs_rt_core_joined): its index,
 * or HS_ENOMEM. */
int hs_rt_core_add_worker(hs_rt_core *c, double slowdown, double comm_slowdown, double lr, double t);
/* Room for n workers in all, so that adding up to n does not move the worker table (a driver
 * whose threads keep pointers into it while workers join). 0 or HS_ENOMEM. */
int hs_rt_core_reserve(hs_rt_core *c, int n);
/* For a driver that set up `room` workers before the run, the joiners' included (the real
 * runtimes): the worker of join event e enters the table with the next number, joining (not
 * active until hs_rt_core_joined), at the global learning rate. Its index, or a failure
 * (HS_EINVAL naming the event when there is no room left). */
int hs_rt_core_add_joiner(hs_rt_core *c, const hs_event_spec *e, int room);
/* Allocates the policy's state, runs its init, and asks the driver to wake the core at every
 * cluster event; refuses join events when the driver has no join. */
int hs_rt_core_open(hs_rt_core *c);
/* The policy's start. */
int hs_rt_core_start(hs_rt_core *c);
/* The policy's fini; frees what the core allocated. */
void hs_rt_core_close(hs_rt_core *c);

/* --- reports from the driver ---------------------------------------------------------------- */

/* A communication finished (worker -1 for a collective or an apply): tells the policy, unless
 * the run is done. */
int hs_rt_core_comm_done(hs_rt_core *c, hs_comm_kind kind, int w, double start, double end, int stale,
                         uint64_t tag);
/* A wake-up asked for with wake_at is due. */
int hs_rt_core_wake(hs_rt_core *c, hs_rt_wake_kind kind, int64_t arg);
/* A joining worker holds the model and is idle: it enters the cluster at `now`. */
int hs_rt_core_joined(hs_rt_core *c, int w, double now);
/* One update of the global model at time now: counts the iteration, asks for an evaluation
 * when one is due, and checks the stop conditions. */
int hs_rt_core_update(hs_rt_core *c, double now);
/* An evaluation of the model of update `step` at time t: stored, and the targets checked. */
int hs_rt_core_eval(hs_rt_core *c, double t, int64_t step, double loss, double acc);
/* The same for an evaluation that stands for a noisy one (the analytic convergence model with
 * acc_noise): `chance` is the probability that a real evaluation here meets the targets, NaN to
 * let loss and acc decide as hs_rt_core_eval does. The targets count as met at the median first
 * passage: the first evaluation by which the chance that none has met them is at most 1/2,
 * evaluations taken as independent. */
int hs_rt_core_eval_chance(hs_rt_core *c, double t, int64_t step, double loss, double acc, double chance);
/* Writes worker w's open record (the sink's error is the run's); hs_rt_core_flush below. */
int hs_rt_core_flush_open(hs_rt_core *c, int w);
/* Says in diag that the policy failed with rc < 0, unless it said why; returns rc. */
int hs_rt_core_policy_failed(hs_rt_core *c, int rc);
/* Records why the run fails; returns code. */
int hs_rt_core_fail(hs_rt_core *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Marks the run done at time t (the first time only). */
static inline void hs_rt_core_stop(hs_rt_core *c, double t) {
  if (!c->done) {
    c->done = 1;
    c->end = t;
  }
}

/* --- the hot path, inline ------------------------------------------------------------------- */

/* A policy callback's rc: 0, or rc < 0 with the message in diag. */
static inline int hs_rt_core_policy_rc(hs_rt_core *c, int rc) {
  return HS_RUNTIME_LIKELY(rc >= 0) ? 0 : hs_rt_core_policy_failed(c, rc);
}

/* Writes worker w's open record, if any (the sink's error is the run's). */
static inline int hs_rt_core_flush(hs_rt_core *c, int w) {
  return c->w[w].rec_open ? hs_rt_core_flush_open(c, w) : 0;
}

/* Worker w's step of `batch` samples, started at start, finished at end with loss (NaN when
 * none): counts it and tells the policy, unless the run is done. */
static inline int hs_rt_core_compute_done(hs_rt_core *c, int w, int batch, double start, double end, double loss) {
  hs_rt_worker *x = &c->w[w];
  x->computing = 0;
  x->busy += end - start;
  x->steps++;
  x->samples += batch;
  c->samples += batch;
  if (c->done || !c->policy->on_compute) return 0;
  hs_step_obs o = {.worker = w, .batch = batch, .start = start, .end = end, .duration = end - start,
                   .loss = loss, .tag = x->cur_tag};
  return hs_rt_core_policy_rc(c, c->policy->on_compute(c->pstate, &c->rt, &o));
}

/* Worker w's part of the summary at `end`: its busy time (a step in progress counts up to
 * end), its life in the cluster and the rest of that life as its wait. */
void hs_rt_core_worker_time(const hs_rt_core *c, int w, double end, double *busy, double *life, double *wait);

/* Whether `runtime` (its name, for the message), which can do `caps`, can run `policy` with
 * params on cluster (NULL: none) as far as they show before the run: a policy parameter named
 * algo set to hier needs HS_CAP_ALGO, join and leave events HS_CAP_JOIN and HS_CAP_LEAVE. 0, or
 * HS_EUNSUPPORTED with the message in d. The CLI calls it before it opens a run, so that nothing
 * is stored; the runtimes call it too. What only the policy's calls show (a compressor, an
 * overlapped all-reduce, an all-reduce over a subset) is refused when asked, by the core's
 * checks (the run then fails with HS_EUNSUPPORTED). */
int hs_runtime_check_caps(const hs_policy *policy, const hs_params *params, const hs_cluster_spec *cluster,
                          unsigned caps, const char *runtime, hs_diag *d);

/* Whether a stop condition other than the clock can be reached: a limit, or a target with
 * evaluations. */
int hs_rt_core_has_stop(const hs_rt_core *c);

/* --- what every driver does alike around the hot path (appended: issue 18) ------------------ */

/* What a run asks of the core, as its driver's config says it: filled once per config type
 * (sim/sim_run.c, real/real_run.c's hs_real_job for both real drivers) and set in one call. */
typedef struct hs_rt_core_job {
  const hs_policy *policy;
  const hs_params *params;
  const hs_cluster_spec *cluster; /* may be NULL */
  int64_t global_batch;
  uint64_t seed;
  /* limits and targets: 0 = none (the fields of hs_rt_core of the same names) */
  int64_t max_iterations;
  double samples_target;      /* samples */
  double max_time;            /* s */
  double target_loss, target_accuracy;
  int64_t eval_every;         /* updates between evaluations */
  double lr;                  /* the initial learning rate of the global model's updates (0 in
                               * the simulator, whose drivers apply none) */
  hs_rt_step_sink *sink;
  void *sink_ctx;
  hs_rt_eval_sink *eval_sink;
  void *eval_ctx;
} hs_rt_core_job;

/* Copies the job into the core (after hs_rt_core_init, before hs_rt_core_open). */
void hs_rt_core_set_job(hs_rt_core *c, const hs_rt_core_job *j);

/* Whether the update numbered `iteration` (1, 2, ...) is evaluated during the run: every
 * eval_every-th. A driver that must keep a model before the core counts its update (the
 * ranks keep a replica at the operation that will make it) asks with the number it will get. */
static inline int hs_rt_core_eval_due(const hs_rt_core *c, int64_t iteration) {
  return c->eval_every > 0 && iteration % c->eval_every == 0;
}

/* Whether the final model still needs its evaluation at the end: the last update was not
 * evaluated. */
static inline int hs_rt_core_final_eval_due(const hs_rt_core *c) { return c->last_eval != c->iterations; }

/* --- failures -------------------------------------------------------------------------------- */

/* Fails the run with rc (the message, if any, already in diag): the first failure's
 * code stays the run's; the run is done at the driver's clock. Returns rc. */
int hs_rt_core_fail_run(hs_rt_core *c, int rc);
/* After a call into the core or the driver's own work: rc != 0 fails the run. Returns rc. */
static inline int hs_rt_core_settle(hs_rt_core *c, int rc) { return rc ? hs_rt_core_fail_run(c, rc) : 0; }
/* Fails the run with the message, unless it failed already (the first failure's message stays);
 * the run is done. Returns code. */
int hs_rt_core_abort(hs_rt_core *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The run's outcome: 0, or the failure's code (HS_ERUNTIME when none was given). */
static inline int hs_rt_core_outcome(const hs_rt_core *c) {
  return c->failed ? (c->diag.code ? c->diag.code : HS_ERUNTIME) : 0;
}

/* --- step records ----------------------------------------------------------------------------- */

/* Worker w starts a step of `batch` samples at `start` (when its compute really starts): its
 * previous record is written (the sink's error is the returned one, and the new record is then
 * not opened), and the new one opened: step = its steps so far, its model version, no loss, its
 * compute and communication ending at start until hs_rt_core_record_end says. */
int hs_rt_core_record_open(hs_rt_core *c, int w, int batch, double start);
/* Worker w's open step computed until `end` with loss (NaN when none). */
void hs_rt_core_record_end(hs_rt_core *c, int w, double end, double loss);
/* Worker w communicated for dur seconds, until `end`: its communication time, and its open
 * record's. */
void hs_rt_core_record_comm(hs_rt_core *c, int w, double dur, double end);
/* The server answered worker w's push, issued during its step `step`, at `end` with staleness:
 * that step's record, if it is still open, ends its communication then. */
void hs_rt_core_record_push(hs_rt_core *c, int w, int64_t step, double end, int stale);
/* The step of worker w's open record (the step a push it issues now belongs to: the core has
 * already counted it as finished), or -1 when none is open. */
static inline int64_t hs_rt_core_record_step(const hs_rt_core *c, int w) {
  return c->w[w].rec_open ? c->w[w].rec.step : -1;
}

/* --- all-reduce weights ------------------------------------------------------------------------ */

/* An all-reduce's normalised weights (rt_model.h's hs_runtime_weights) into out (n values):
 * the policy's, checked by the core, or the participants' last batches when weights is NULL. */
void hs_rt_core_weights(const hs_rt_core *c, const int *ws, int n, const double *weights, double *out);

/* A driver's `slowdown` for a driver that emulates compute slowdowns only (the threads, the
 * ranks): a communication slowdown is not emulated, so the policy is told the links run at
 * full speed. */
void hs_rt_core_slowdown_compute_only(hs_rt_core *c, int w);

/* --- timers of a driver on a wall clock ------------------------------------------------------ */

/* A driver whose clock runs by itself (the threads, the ranks) keeps its wake-ups in a timer
 * heap (rt_runtime.h) and fires them when due; its wake_at is hs_rt_core_timer_add. */
int hs_rt_core_timer_add(hs_rt_core *c, hs_runtime_timers *q, double t, hs_rt_wake_kind kind, int64_t arg);
/* Fires the wake-ups due at the driver's clock, in (time, sequence) order, until none is due,
 * the run is done or one fails (its rc, which fails the run, is returned; else 0). *next: the
 * next one's time, or INFINITY (also once the run is done). */
int hs_rt_core_timer_fire(hs_rt_core *c, hs_runtime_timers *q, double *next);

/* --- the summary -------------------------------------------------------------------------------- */

/* One worker's part of a run's result. */
typedef struct hs_rt_worker_stats {
  double joined_at, left_at;      /* s; left_at NaN while in the cluster */
  int initial_batch;
  int64_t steps, samples;         /* finished steps */
  double busy_s, comm_s, wait_s;  /* computing, communicating, the rest of its life */
} hs_rt_worker_stats;

/* The summary of a run that ended at c->end after `events` events, and each worker's stats
 * (ws: c->n entries), by one rule for every runtime (hs_rt_core_worker_time): a worker's busy
 * time is its finished steps' compute plus a step in progress at the end, counted from its
 * open record's start up to the end; its steps and samples count finished steps only; its wait
 * is the rest of its life in the cluster. A driver writes the records of finished steps first
 * (hs_rt_core_flush) and leaves the record of a step in progress open (it is not written). */
void hs_rt_core_summary(const hs_rt_core *c, int64_t events, hs_summary *m, hs_rt_worker_stats *ws);

#endif
