/* The runtime core: see rt_core.h for the contract. */
#include "runtime/rt_core.h"
#include "runtime/rt_model.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static hs_rt_core *C(hs_runtime *rt) { return (hs_rt_core *)rt; }

int hs_rt_core_fail(hs_rt_core *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hs_diag_vset(&c->diag, code, fmt, ap);
  va_end(ap);
  return code;
}

int hs_rt_core_policy_failed(hs_rt_core *c, int rc) {
  hs_runtime_policy_failed(&c->diag, c->policy->name, rc);
  return rc;
}

/* A NULL hs_comm_opts is the zeroed one: gradients, ring, apply on arrival, no compression. */
static const hs_comm_opts no_opts;
static const hs_comm_opts *opts_or_none(const hs_comm_opts *o) { return o ? o : &no_opts; }

/* --- the ops table ---------------------------------------------------------------------------- */

static double now_of(hs_rt_core *c) { return c->drv->now ? c->drv->now(c) : c->clock; }
static double rt_now(hs_runtime *rt) { return now_of(C(rt)); }
static int rt_n_workers(hs_runtime *rt) { return C(rt)->n; }
static int rt_active(hs_runtime *rt, int w) {
  hs_rt_core *c = C(rt);
  return w >= 0 && w < c->n && c->w[w].active;
}
static int64_t rt_global_batch(hs_runtime *rt) { return C(rt)->global_batch; }
static int rt_max_batch(hs_runtime *rt, int w) {
  hs_rt_core *c = C(rt);
  return w >= 0 && w < c->n ? c->w[w].max_batch : 0;
}
static double rt_predict(hs_runtime *rt, int w, int batch) {
  hs_rt_core *c = C(rt);
  return w >= 0 && w < c->n ? c->drv->predict(c, w, batch) : NAN;
}
static uint64_t rt_version(hs_runtime *rt) { return C(rt)->version; }
static uint64_t rt_worker_version(hs_runtime *rt, int w) {
  hs_rt_core *c = C(rt);
  return w >= 0 && w < c->n ? c->w[w].version : 0;
}
static uint64_t rt_seed(hs_runtime *rt) { return C(rt)->seed; }
static hs_diag *rt_diag(hs_runtime *rt) { return &C(rt)->diag; }

static int rt_compute(hs_runtime *rt, int w, int batch, uint64_t tag) {
  hs_rt_core *c = C(rt);
  int rc = hs_runtime_check_worker(&c->diag, c->policy->name, "compute", w, c->n);
  if (rc) return rc;
  hs_rt_worker *x = &c->w[w];
  if ((rc = hs_runtime_check_compute(&c->diag, c->policy->name, w, x->active, x->computing, batch))) return rc;
  x->computing = 1;
  x->cur_tag = tag;
  x->last_batch = batch;
  if (!x->initial_batch) x->initial_batch = batch;
  return c->drv->compute(c, w, batch);
}

static int rt_local_update(hs_runtime *rt, int w) {
  hs_rt_core *c = C(rt);
  int rc = hs_runtime_check_worker(&c->diag, c->policy->name, "local update", w, c->n);
  return rc ? rc : c->drv->local_update(c, w);
}

/* What the policy asks of a communication that the driver cannot do (caps): 0, or the run
 * fails with HS_EUNSUPPORTED. */
static int check_opts_caps(hs_rt_core *c, const hs_comm_opts *o, int allreduce, int n) {
  unsigned caps = c->drv->caps;
  const char *what = NULL;
  if (o->compressor && o->ratio > 0 && !(caps & HS_CAP_COMPRESSION)) what = "compression";
  else if (allreduce && o->overlap && o->what == HS_COMM_GRAD && !(caps & HS_CAP_OVERLAP)) what = "overlapped all-reduce";
  else if (allreduce && o->algo == HS_AR_HIER && !(caps & HS_CAP_ALGO)) what = "hierarchical all-reduce";
  else if (allreduce && n < c->n && !(caps & HS_CAP_SUBSET)) what = "an all-reduce over a subset of the workers";
  if (!what) return 0;
  return hs_rt_core_fail(c, HS_EUNSUPPORTED, "policy %s: %s is not supported by the %s runtime", c->policy->name, what,
                         c->drv->name);
}

static int rt_allreduce(hs_runtime *rt, const int *ws, int n, const double *weights, const hs_comm_opts *o) {
  hs_rt_core *c = C(rt);
  const char *name = c->policy->name;
  int rc = hs_runtime_check_allreduce(&c->diag, name, n);
  if (rc) return rc;
  if (c->drv->caps != HS_CAP_ALL && (rc = check_opts_caps(c, opts_or_none(o), 1, n))) return rc;
  /* Without given weights, the last batches are the weights: whole numbers of samples, never
   * negative, so only given weights need the weight check. */
  for (int i = 0; i < n; i++)
    if ((rc = hs_runtime_check_worker(&c->diag, name, "all-reduce", ws[i], c->n))) return rc;
  for (int i = 0; weights && i < n; i++)
    if ((rc = hs_runtime_check_weight(&c->diag, name, i, weights[i]))) return rc;
  return c->drv->allreduce(c, ws, n, weights, opts_or_none(o));
}

static int rt_push(hs_runtime *rt, int w, const hs_comm_opts *o) {
  hs_rt_core *c = C(rt);
  int rc = hs_runtime_check_worker(&c->diag, c->policy->name, "push", w, c->n);
  if (!rc && c->drv->caps != HS_CAP_ALL) rc = check_opts_caps(c, opts_or_none(o), 0, 1);
  return rc ? rc : c->drv->push(c, w, opts_or_none(o));
}

static int rt_pull(hs_runtime *rt, int w, const hs_comm_opts *o) {
  hs_rt_core *c = C(rt);
  int rc = hs_runtime_check_worker(&c->diag, c->policy->name, "pull", w, c->n);
  return rc ? rc : c->drv->pull(c, w, opts_or_none(o));
}

static int rt_apply(hs_runtime *rt, const hs_comm_opts *o) {
  hs_rt_core *c = C(rt);
  return c->drv->apply(c, opts_or_none(o));
}

static int rt_timer(hs_runtime *rt, double delay, uint64_t tag) {
  hs_rt_core *c = C(rt);
  int rc = hs_runtime_check_timer(&c->diag, c->policy->name, delay);
  return rc ? rc : c->drv->wake_at(c, now_of(c) + delay, HS_RT_WAKE_TIMER, (int64_t)tag);
}

static int rt_set_lr(hs_runtime *rt, int w, double lr) {
  hs_rt_core *c = C(rt);
  int rc = hs_runtime_check_lr(&c->diag, c->policy->name, w, c->n, lr);
  if (rc) return rc;
  if (w == -1) {
    for (int i = 0; i < c->n; i++) c->w[i].lr = lr;
    c->global_lr = lr;
  } else
    c->w[w].lr = lr;
  return c->drv->set_lr ? c->drv->set_lr(c, w, lr) : 0;
}

static const hs_runtime_ops core_ops = {
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

/* --- set-up ------------------------------------------------------------------------------------ */

void hs_rt_core_init(hs_rt_core *c, const hs_rt_driver *drv) {
  c->ops = core_ops;
  c->ops.caps = drv->caps;
  c->rt.ops = &c->ops;
  c->drv = drv;
  c->last_eval = -1;
  c->last_loss = c->last_acc = c->target_time = NAN;
  c->target_miss = 1;
}

int hs_rt_core_reserve(hs_rt_core *c, int n) {
  if (n <= c->cap) return 0;
  hs_rt_worker *w = realloc(c->w, (size_t)n * sizeof *w);
  if (!w) return hs_rt_core_fail(c, HS_ENOMEM, "out of memory for %d workers", n);
  c->w = w;
  c->cap = n;
  return 0;
}

int hs_rt_core_add_joiner(hs_rt_core *c, const hs_event_spec *e, int room) {
  if (c->n >= room)
    return hs_rt_core_fail(c, HS_EINVAL, "%s:%d: a join event beyond the %d workers the run was set up for",
                           c->cluster ? c->cluster->path : "cluster", e->pos.line, room);
  int w = hs_rt_core_add_worker(c, 1.0, 1.0, c->global_lr, now_of(c));
  if (w >= 0) c->w[w].joining = 1;
  return w;
}

int hs_rt_core_add_worker(hs_rt_core *c, double slowdown, double comm_slowdown, double lr, double t) {
  int rc;
  if (c->n == c->cap && (rc = hs_rt_core_reserve(c, c->cap ? 2 * c->cap : 16))) return rc;
  hs_rt_worker *x = &c->w[c->n];
  memset(x, 0, sizeof *x);
  x->slowdown = slowdown;
  x->comm_slowdown = comm_slowdown;
  x->lr = lr;
  x->joined_at = t;
  x->left_at = NAN;
  x->prev_end = t;
  return c->n++;
}

int hs_rt_core_has_stop(const hs_rt_core *c) {
  return c->max_iterations > 0 || c->samples_target > 0 || c->max_time > 0 ||
         ((c->target_loss > 0 || c->target_accuracy > 0) && (c->eval_every > 0 || c->drv->snapshot));
}

int hs_rt_core_open(hs_rt_core *c) {
  int rc;
  if (c->cluster)
    for (int i = 0; i < c->cluster->n_events; i++) {
      const hs_event_spec *e = &c->cluster->events[i];
      if (e->kind == HS_EVENT_JOIN && (!c->drv->join || !(c->drv->caps & HS_CAP_JOIN)))
        return hs_rt_core_fail(c, HS_EUNSUPPORTED, "%s:%d: a join event: workers joining mid-run are not "
                               "supported by the %s runtime", c->cluster->path, e->pos.line, c->drv->name);
    }
  c->pstate = calloc(1, c->policy->state_size ? c->policy->state_size : 1);
  if (!c->pstate) return hs_rt_core_fail(c, HS_ENOMEM, "out of memory for the policy's state");
  if (c->cluster)
    for (int i = 0; i < c->cluster->n_events; i++)
      if ((rc = c->drv->wake_at(c, c->cluster->events[i].at, HS_RT_WAKE_CLUSTER, i))) return rc;
  if (c->policy->init && (rc = hs_rt_core_policy_rc(c, c->policy->init(c->pstate, &c->rt, c->params)))) return rc;
  return 0;
}

int hs_rt_core_start(hs_rt_core *c) {
  return c->policy->start ? hs_rt_core_policy_rc(c, c->policy->start(c->pstate, &c->rt)) : 0;
}

void hs_rt_core_close(hs_rt_core *c) {
  if (c->pstate && c->policy->fini) c->policy->fini(c->pstate, &c->rt);
  free(c->pstate);
  c->pstate = NULL;
  free(c->w);
  c->w = NULL;
  c->n = c->cap = 0;
}

/* --- records ----------------------------------------------------------------------------------- */

int hs_rt_core_flush_open(hs_rt_core *c, int w) {
  hs_rt_worker *x = &c->w[w];
  x->rec_open = 0;
  hs_step_row row = x->rec;
  row.worker = w;
  row.wait_s = 0; /* closed below */
  hs_runtime_close_row(&row, &x->prev_end, x->rec_comm);
  if (!c->sink) return 0;
  int rc = hs_runtime_sink_rc(c->sink(c->sink_ctx, &row, &c->diag));
  if (rc && !c->diag.msg[0]) hs_rt_core_fail(c, rc, "could not store step %lld of worker %d", (long long)row.step, w);
  return rc;
}

/* --- reports from the driver ------------------------------------------------------------------ */

int hs_rt_core_comm_done(hs_rt_core *c, hs_comm_kind kind, int w, double start, double end, int stale,
                         uint64_t tag) {
  if (c->done || !c->policy->on_comm) return 0;
  hs_comm_obs o = {.kind = kind, .worker = w, .start = start, .end = end, .version = c->version,
                   .staleness = stale, .tag = tag};
  return hs_rt_core_policy_rc(c, c->policy->on_comm(c->pstate, &c->rt, &o));
}

static int deliver_cluster(hs_rt_core *c, hs_cluster_change kind, int w) {
  if (c->done || !c->policy->on_cluster) return 0;
  hs_cluster_obs o = {.kind = kind, .worker = w, .slowdown = c->w[w].slowdown,
                      .comm_slowdown = c->w[w].comm_slowdown};
  return hs_rt_core_policy_rc(c, c->policy->on_cluster(c->pstate, &c->rt, &o));
}

static int on_cluster_event(hs_rt_core *c, int idx) {
  const hs_event_spec *e = &c->cluster->events[idx];
  if (e->kind == HS_EVENT_JOIN) return c->drv->join(c, e);
  if (e->worker < 0 || e->worker >= c->n) return hs_rt_core_fail(c, HS_EINVAL, "event %d: no worker %d", idx, e->worker);
  hs_rt_worker *x = &c->w[e->worker];
  if (e->kind == HS_EVENT_SLOWDOWN) {
    if (e->slowdown >= 0) x->slowdown = e->slowdown;
    if (e->comm_slowdown >= 0) x->comm_slowdown = e->comm_slowdown;
    if (c->drv->slowdown) c->drv->slowdown(c, e->worker);
    return deliver_cluster(c, HS_CHANGE_SLOWDOWN, e->worker);
  }
  /* HS_EVENT_LEAVE: the worker takes no new work; what it has in flight still finishes. */
  int was_active = x->active;
  x->active = 0;
  x->joining = 0;
  if (isnan(x->left_at)) x->left_at = now_of(c);
  return was_active ? deliver_cluster(c, HS_CHANGE_LEAVE, e->worker) : 0;
}

int hs_rt_core_wake(hs_rt_core *c, hs_rt_wake_kind kind, int64_t arg) {
  if (kind == HS_RT_WAKE_CLUSTER) return on_cluster_event(c, (int)arg);
  if (c->done || !c->policy->on_timer) return 0;
  return hs_rt_core_policy_rc(c, c->policy->on_timer(c->pstate, &c->rt, (uint64_t)arg));
}

int hs_rt_core_joined(hs_rt_core *c, int w, double now) {
  hs_rt_worker *x = &c->w[w];
  x->joining = 0;
  x->active = 1;
  x->version = c->version;
  x->prev_end = now;
  return deliver_cluster(c, HS_CHANGE_JOIN, w);
}

/* --- iterations, evaluations, stop conditions ------------------------------------------------- */

int hs_rt_core_update(hs_rt_core *c, double now) {
  c->version++;
  c->iterations++;
  if (hs_runtime_limit_reached(c->max_iterations, c->iterations, c->samples_target, c->samples, c->max_time, now))
    hs_rt_core_stop(c, now);
  if (c->eval_every > 0 && c->drv->snapshot && c->iterations % c->eval_every == 0) return c->drv->snapshot(c, now);
  return 0;
}

int hs_rt_core_eval(hs_rt_core *c, double t, int64_t step, double loss, double acc) {
  return hs_rt_core_eval_chance(c, t, step, loss, acc, NAN);
}

int hs_rt_core_eval_chance(hs_rt_core *c, double t, int64_t step, double loss, double acc, double chance) {
  c->last_eval = step;
  c->last_loss = loss;
  c->last_acc = acc;
  if (c->eval_sink) {
    int rc = hs_runtime_sink_rc(c->eval_sink(c->eval_ctx, t, step, loss, acc, &c->diag));
    if (rc) {
      if (!c->diag.msg[0]) hs_rt_core_fail(c, rc, "could not store the evaluation at step %lld", (long long)step);
      return rc;
    }
  }
  int met;
  if (isnan(chance)) {
    met = hs_runtime_target_met(c->target_loss, c->target_accuracy, loss, acc);
  } else {
    c->target_miss *= 1 - fmin(fmax(chance, 0), 1);
    met = c->target_miss <= 0.5;
  }
  if (met && isnan(c->target_time)) {
    c->target_time = t;
    hs_rt_core_stop(c, t);
  }
  return 0;
}

/* --- the summary ------------------------------------------------------------------------------- */

void hs_rt_core_worker_time(const hs_rt_core *c, int w, double end, double *busy, double *life, double *wait) {
  const hs_rt_worker *x = &c->w[w];
  double b = x->busy;
  if (x->computing && x->rec_open && x->rec.start_s < end) b += end - x->rec.start_s;
  double until = isnan(x->left_at) ? end : fmin(end, x->left_at);
  double l = until > x->joined_at ? until - x->joined_at : 0;
  double wt = l - b - x->comm;
  *busy = b;
  *life = l;
  *wait = wt > 0 ? wt : 0;
}

/* --- capabilities ------------------------------------------------------------------------------ */

int hs_runtime_check_caps(const hs_policy *policy, const hs_params *params, const hs_cluster_spec *cluster,
                          unsigned caps, const char *runtime, hs_diag *d) {
  /* Every policy with an `algo` parameter means the all-reduce algorithm by it (pol_ssgd.c and
   * the policies built on it). `overlap` is not read: it means ssgd's bucketed all-reduce in one
   * policy and lbcal's overlap of model averaging with local steps in another; an overlapped
   * all-reduce is refused when the policy asks for one. */
  double algo = params && params->spec ? hs_params_get(params, "algo") : NAN;
  if (algo == (double)HS_AR_HIER && !(caps & HS_CAP_ALGO))
    return hs_diag_set(d, HS_EUNSUPPORTED, "policy %s: algo=hier (hierarchical all-reduce) is not supported by the %s "
                       "runtime", policy->name, runtime);
  for (int i = 0; cluster && i < cluster->n_events; i++) {
    const hs_event_spec *e = &cluster->events[i];
    unsigned need = e->kind == HS_EVENT_JOIN ? HS_CAP_JOIN : e->kind == HS_EVENT_LEAVE ? HS_CAP_LEAVE : 0;
    if (need && !(caps & need))
      return hs_diag_set(d, HS_EUNSUPPORTED, "%s:%d: a %s event: not supported by the %s runtime", cluster->path,
                         e->pos.line, e->kind == HS_EVENT_JOIN ? "join" : "leave", runtime);
  }
  return 0;
}

/* --- what every driver does alike around the hot path ----------------------------------------- */

void hs_rt_core_set_job(hs_rt_core *c, const hs_rt_core_job *j) {
  c->policy = j->policy;
  c->params = j->params;
  c->cluster = j->cluster;
  c->global_batch = j->global_batch;
  c->seed = j->seed;
  c->max_iterations = j->max_iterations;
  c->samples_target = j->samples_target;
  c->max_time = j->max_time;
  c->target_loss = j->target_loss;
  c->target_accuracy = j->target_accuracy;
  c->eval_every = j->eval_every;
  c->global_lr = j->lr;
  c->sink = j->sink;
  c->sink_ctx = j->sink_ctx;
  c->eval_sink = j->eval_sink;
  c->eval_ctx = j->eval_ctx;
}

int hs_rt_core_fail_run(hs_rt_core *c, int rc) {
  if (!c->failed) {
    c->failed = 1;
    c->diag.code = rc;
  }
  hs_rt_core_stop(c, now_of(c));
  return rc;
}

int hs_rt_core_abort(hs_rt_core *c, int code, const char *fmt, ...) {
  if (!c->failed) {
    va_list ap;
    va_start(ap, fmt);
    hs_diag_vset(&c->diag, code, fmt, ap);
    va_end(ap);
    c->failed = 1;
  }
  hs_rt_core_stop(c, now_of(c));
  return code;
}

int hs_rt_core_record_open(hs_rt_core *c, int w, int batch, double start) {
  int rc = hs_rt_core_flush(c, w);
  if (rc) return rc;
  hs_rt_worker *x = &c->w[w];
  x->rec_open = 1;
  x->rec = (hs_step_row){.worker = w, .step = x->steps, .batch = batch, .start_s = start, .compute_end_s = start,
                         .comm_end_s = start, .model_version = (int64_t)x->version, .loss = NAN};
  x->rec_comm = 0;
  return 0;
}

void hs_rt_core_record_end(hs_rt_core *c, int w, double end, double loss) {
  hs_rt_worker *x = &c->w[w];
  x->rec.compute_end_s = end;
  x->rec.comm_end_s = end;
  x->rec.loss = loss;
}

void hs_rt_core_record_comm(hs_rt_core *c, int w, double dur, double end) {
  hs_rt_worker *x = &c->w[w];
  x->comm += dur;
  if (x->rec_open) {
    x->rec_comm += dur;
    x->rec.comm_end_s = end;
  }
}

void hs_rt_core_record_push(hs_rt_core *c, int w, int64_t step, double end, int stale) {
  hs_rt_worker *x = &c->w[w];
  if (x->rec_open && x->rec.step == step) {
    x->rec.comm_end_s = end;
    x->rec.staleness = stale;
  }
}

void hs_rt_core_weights(const hs_rt_core *c, const int *ws, int n, const double *weights, double *out) {
  for (int i = 0; i < n; i++) out[i] = weights ? weights[i] : (double)c->w[ws[i]].last_batch;
  hs_runtime_weights(out, n);
}

void hs_rt_core_slowdown_compute_only(hs_rt_core *c, int w) { c->w[w].comm_slowdown = 1.0; }

int hs_rt_core_timer_add(hs_rt_core *c, hs_runtime_timers *q, double t, hs_rt_wake_kind kind, int64_t arg) {
  return hs_runtime_timers_add(q, t, kind == HS_RT_WAKE_CLUSTER ? (int)arg : -1,
                               kind == HS_RT_WAKE_TIMER ? (uint64_t)arg : 0, &c->diag);
}

int hs_rt_core_timer_fire(hs_rt_core *c, hs_runtime_timers *q, double *next) {
  for (;;) {
    hs_runtime_timer t;
    if (c->done) {
      *next = INFINITY;
      return 0;
    }
    if (!hs_runtime_timers_pop(q, now_of(c), &t, next)) return 0;
    int rc = t.cluster_event >= 0 ? hs_rt_core_wake(c, HS_RT_WAKE_CLUSTER, t.cluster_event)
                                  : hs_rt_core_wake(c, HS_RT_WAKE_TIMER, (int64_t)t.tag);
    if (rc) {
      *next = INFINITY;
      return hs_rt_core_settle(c, rc);
    }
  }
}

void hs_rt_core_summary(const hs_rt_core *c, int64_t events, hs_summary *m, hs_rt_worker_stats *ws) {
  double end = c->end, life_sum = 0, wait_sum = 0;
  for (int i = 0; i < c->n; i++) {
    const hs_rt_worker *x = &c->w[i];
    double busy, life, wait;
    hs_rt_core_worker_time(c, i, end, &busy, &life, &wait);
    life_sum += life;
    wait_sum += wait;
    ws[i] = (hs_rt_worker_stats){.joined_at = x->joined_at, .left_at = x->left_at, .initial_batch = x->initial_batch,
                                 .steps = x->steps, .samples = x->samples, .busy_s = busy, .comm_s = x->comm,
                                 .wait_s = wait};
  }
  hs_runtime_summary(m, c->n, c->iterations, events, c->samples, end);
  m->wait_fraction = life_sum > 0 ? fmin(1.0, wait_sum / life_sum) : NAN;
  m->final_loss = c->last_loss;
  m->final_accuracy = c->last_acc;
  m->time_to_target_s = c->target_time;
}
