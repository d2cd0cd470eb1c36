/* adsp: ADSP (Hu, Wu, Li, Wang, Zhang: "Distributed machine learning through heterogeneous edge
 * systems", AAAI 2020; code joapolarbear/adsp), on a parameter server.
 *
 * Every worker commits at the same rate: dC commits per `period`, so one commit every
 * I = period / dC seconds. Between commits a worker takes as many local steps (compute, local
 * update) as its speed allows: after each step it commits when the time since its last commit
 * ended is at least max(min_interval, I - o_i), o_i its last commit's duration (push of the
 * accumulated update as a MODEL push, the model change since the last pull, applied on arrival
 * as one global update scaled by 1/N, N the active workers, then pull), which is the
 * reference code's rule. Fast workers thus take more local steps per commit; no worker waits
 * for another.
 *
 * Commit-rate tuning (the reference code's online search): the "global loss" is the mean of the
 * active workers' latest training losses, sampled `samples` times per period. A search runs
 * at the first period boundary at which a loss is known, then every `research` seconds, and
 * whenever the loss at a period boundary is 30% above the previous boundary's. A search runs
 * the current dC for one period and then dC + 1, dC + 2, ... for one period each, as long as
 * each does better than the one before; the last better one is kept. "Better" is the reward of
 * hs_adsp_reward on the curve l(t) = 1/(a^2 t + b) + c fitted (GSL nonlinear least squares) to
 * the trial period's samples plus the last sample before it, for the target `target_loss`, or
 * when that is 0, for half of the loss at the search's start. Unlike the reference code the
 * workers are not paused between trials. With no loss reported (NaN: no convergence model)
 * there is no search and dC stays at `commits`. */
#include <gsl/gsl_blas.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>

#include "policies/pol_registry.h"
#include "policies/pol_semiasync.h"

/* --- the loss curve ---------------------------------------------------------------------- */

typedef struct fit_data {
  const double *t, *l;
  double t0;
  int n;
} fit_data;

/* In shifted time tau = t - t0: l = 1/(a^2 tau + b') + c. */
static int curve_f(const gsl_vector *x, void *params, gsl_vector *f) {
  const fit_data *d = params;
  double a = gsl_vector_get(x, 0), b = gsl_vector_get(x, 1), c = gsl_vector_get(x, 2);
  for (int i = 0; i < d->n; i++)
    gsl_vector_set(f, (size_t)i, 1.0 / (a * a * (d->t[i] - d->t0) + b) + c - d->l[i]);
  return GSL_SUCCESS;
}

static int curve_df(const gsl_vector *x, void *params, gsl_matrix *J) {
  const fit_data *d = params;
  double a = gsl_vector_get(x, 0), b = gsl_vector_get(x, 1);
  for (int i = 0; i < d->n; i++) {
    double tau = d->t[i] - d->t0, den = a * a * tau + b, den2 = den * den;
    gsl_matrix_set(J, (size_t)i, 0, -2.0 * a * tau / den2);
    gsl_matrix_set(J, (size_t)i, 1, -1.0 / den2);
    gsl_matrix_set(J, (size_t)i, 2, 1.0);
  }
  return GSL_SUCCESS;
}

int hs_adsp_fit(const double *t, const double *l, int n, double abc[3]) {
  if (n < 3) return HS_EINVAL;
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < n; i++) {
    if (!isfinite(t[i]) || !isfinite(l[i])) return HS_EINVAL;
    if (l[i] < lo) lo = l[i];
    if (l[i] > hi) hi = l[i];
  }
  fit_data d = {.t = t, .l = l, .t0 = t[0], .n = n};
  /* Start from a floor below the lowest point and the curve through the first and last. */
  double span = hi - lo > 1e-12 ? hi - lo : 1e-3 * (fabs(lo) + 1.0);
  double c0 = lo - span, b0 = 1.0 / (l[0] - c0), tau = t[n - 1] - t[0];
  double a2 = tau > 0 ? (1.0 / (l[n - 1] - c0) - b0) / tau : 0;
  double x0[3] = {sqrt(a2 > 1e-12 ? a2 : 1e-12), b0, c0};
  gsl_vector_view xv = gsl_vector_view_array(x0, 3);
  gsl_multifit_nlinear_fdf fdf = {.f = curve_f, .df = curve_df, .fvv = NULL, .n = (size_t)n, .p = 3, .params = &d};
  gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
  gsl_multifit_nlinear_workspace *w =
      gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, (size_t)n, 3);
  if (!w) return HS_ENOMEM;
  int info = 0, rc = gsl_multifit_nlinear_init(&xv.vector, &fdf, w);
  if (!rc) rc = gsl_multifit_nlinear_driver(500, 1e-12, 1e-12, 0.0, NULL, NULL, &info, w);
  const gsl_vector *x = gsl_multifit_nlinear_position(w);
  double a = fabs(gsl_vector_get(x, 0)), b = gsl_vector_get(x, 1), c = gsl_vector_get(x, 2);
  gsl_multifit_nlinear_free(w);
  /* GSL_EMAXITER still leaves the best point found; anything else is a failure. */
  if ((rc && rc != GSL_EMAXITER) || !isfinite(a) || !isfinite(b) || !isfinite(c)) return HS_ERUNTIME;
  abc[0] = a;
  abc[1] = b - a * a * d.t0; /* back to absolute time */
  abc[2] = c;
  return 0;
}

double hs_adsp_reward(const double abc[3], double target) {
  double a2 = abc[0] * abc[0], b = abc[1], c = abc[2];
  if (!(target > c)) return -c;
  double den = 1.0 / (target - c) - b;
  if (!(a2 > 0)) return -c;
  return den > 0 ? a2 / den : 1e300;
}

/* --- the policy ---------------------------------------------------------------------------- */

enum { P_PERIOD, P_COMMITS, P_MIN_INTERVAL, P_SAMPLES, P_TARGET, P_RESEARCH };

static const hs_param_spec adsp_params[] = {
    [P_PERIOD] = {"period", HS_PARAM_TIME, "60s", 1e-6, 1e12, NULL, "check period: commit rates are commits per period"},
    [P_COMMITS] = {"commits", HS_PARAM_INT, "1", 1, 1e9, NULL, "initial commits per period (dC)"},
    [P_MIN_INTERVAL] = {"min_interval", HS_PARAM_TIME, "10s", 0, 1e12, NULL,
                        "shortest time between a worker's commits (the reference code's 10 s)"},
    [P_SAMPLES] = {"samples", HS_PARAM_INT, "4", 2, 1000, NULL, "loss samples per period for the fit"},
    [P_TARGET] = {"target_loss", HS_PARAM_DOUBLE, "0", 0, 1e300, NULL,
                  "target loss of the search's reward; 0 = half the loss at the search's start"},
    [P_RESEARCH] = {"research", HS_PARAM_TIME, "1000s", 0, 1e12, NULL, "time between commit-rate searches"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef enum phase { PH_RUN = 0, PH_TRIAL_CUR = 1, PH_TRIAL_NEXT = 2 } phase;

#define ADSP_MAX_WINDOW 1001

typedef struct adsp_worker {
  double commit_end;    /* s, when its last commit ended (or it started) */
  double overhead;      /* s, its last commit's duration */
  double commit_start;  /* s */
  double loss;
  int64_t steps, commits;
} adsp_worker;

typedef struct adsp_state {
  double period, min_interval, target_param, research;
  int samples;
  int64_t dc, trial, dc_max;
  hs_pol_group g;
  int cap;
  adsp_worker *w;
  hs_comm_opts push, pull;
  phase ph;
  int64_t ticks;
  int timer_off;        /* the tick stopped when the last worker left */
  double last_check_loss, last_search, target, r_cur;
  int nwin;
  double wt[ADSP_MAX_WINDOW], wl[ADSP_MAX_WINDOW];
} adsp_state;

static int adsp_reserve(adsp_state *s, hs_runtime *rt) {
  int n = hs_rt_n_workers(rt);
  if (n <= s->cap) return 0;
  adsp_worker *w = realloc(s->w, (size_t)n * sizeof *w);
  if (!w) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  for (int i = s->cap; i < n; i++) w[i] = (adsp_worker){.loss = NAN, .commit_end = hs_rt_now(rt)};
  s->w = w;
  s->cap = n;
  return 0;
}

static int adsp_batch(const adsp_state *s, int w) {
  int i = w < s->g.cap ? s->g.slot[w] : -1;
  return i >= 0 ? s->g.batch[i] : 0;
}

static double adsp_interval(const adsp_state *s) {
  return s->period / (double)(s->ph == PH_RUN ? s->dc : s->trial);
}

static int adsp_start(void *state, hs_runtime *rt) {
  adsp_state *s = state;
  int rc = hs_pol_group_even(&s->g, rt);
  if (!rc) rc = adsp_reserve(s, rt);
  for (int i = 0; !rc && i < s->g.n; i++) rc = hs_rt_compute(rt, s->g.ws[i], s->g.batch[i], 0);
  if (!rc) rc = hs_rt_timer(rt, s->period / s->samples, 0);
  return rc;
}

static int adsp_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  adsp_state *s = state;
  int w = o->worker, rc = hs_rt_local_update(rt, w);
  if (rc) return rc;
  adsp_worker *x = &s->w[w];
  x->steps++;
  if (!isnan(o->loss)) x->loss = o->loss;
  double now = hs_rt_now(rt), wait = adsp_interval(s) - x->overhead;
  if (wait < s->min_interval) wait = s->min_interval;
  if (now - x->commit_end >= wait || !hs_rt_active(rt, w)) {
    x->commit_start = now;
    x->commits++;
    /* The server adds the commit divided by the number of workers (the reference code's
     * `parameters + new_l / worker_num`): N workers each committing its whole local progress
     * at full size would move the model N times too far. */
    s->push.weight = 1.0 / (s->g.n > 0 ? s->g.n : 1);
    return hs_rt_push(rt, w, &s->push);
  }
  return hs_rt_compute(rt, w, o->batch, 0);
}

static int adsp_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  adsp_state *s = state;
  int w = o->worker;
  if (!hs_rt_active(rt, w)) return 0;
  if (o->kind == HS_OP_PUSH) return hs_rt_pull(rt, w, &s->pull);
  if (o->kind != HS_OP_PULL) return 0;
  adsp_worker *x = &s->w[w];
  x->commit_end = o->end;
  x->overhead = o->end - x->commit_start;
  return hs_rt_compute(rt, w, adsp_batch(s, w), 0);
}

/* The global loss: the mean of the active workers' latest losses, NaN until all reported. */
static double adsp_loss(const adsp_state *s) {
  if (s->g.n == 0) return NAN;
  double sum = 0;
  for (int i = 0; i < s->g.n; i++) sum += s->w[s->g.ws[i]].loss;
  return sum / s->g.n;
}

static double adsp_trial_reward(adsp_state *s) {
  double abc[3];
  if (hs_adsp_fit(s->wt, s->wl, s->nwin, abc)) return -INFINITY;
  return hs_adsp_reward(abc, s->target);
}

/* A period ended with the loss l (finite): run the search's state machine. */
static void adsp_period(adsp_state *s, double now, double l) {
  double r;
  switch (s->ph) {
  case PH_RUN: {
    int rise = s->last_check_loss > 0 && (l - s->last_check_loss) / s->last_check_loss >= 0.3;
    s->last_check_loss = l;
    if (!(isnan(s->last_search) || now - s->last_search >= s->research || rise)) return;
    s->ph = PH_TRIAL_CUR;
    s->trial = s->dc;
    s->target = s->target_param > 0 ? s->target_param : 0.5 * l;
    break;
  }
  case PH_TRIAL_CUR:
    s->r_cur = adsp_trial_reward(s);
    s->trial = s->dc + 1;
    s->ph = s->trial <= s->dc_max ? PH_TRIAL_NEXT : PH_RUN;
    break;
  case PH_TRIAL_NEXT:
    r = adsp_trial_reward(s);
    if (r > s->r_cur) {
      s->dc = s->trial;
      s->r_cur = r;
      if (++s->trial <= s->dc_max) break;
    }
    s->ph = PH_RUN;
    break;
  }
  if (s->ph == PH_RUN) {
    s->last_search = now;
    s->last_check_loss = l;
  }
  /* The next window starts from this period's last point. */
  s->wt[0] = now;
  s->wl[0] = l;
  s->nwin = 1;
}

static int adsp_on_timer(void *state, hs_runtime *rt, uint64_t tag) {
  adsp_state *s = state;
  double now = hs_rt_now(rt), l = adsp_loss(s);
  s->ticks++;
  if (!isnan(l)) {
    if (s->nwin < ADSP_MAX_WINDOW) {
      s->wt[s->nwin] = now;
      s->wl[s->nwin++] = l;
    }
    if (s->ticks % s->samples == 0) adsp_period(s, now, l);
  }
  /* With nobody left the clock stops, so that the runtime sees the stall. */
  s->timer_off = s->g.n == 0;
  return s->timer_off ? 0 : hs_rt_timer(rt, s->period / s->samples, 0);
}

static int adsp_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  adsp_state *s = state;
  if (o->kind == HS_CHANGE_SLOWDOWN) return 0;
  int rc = hs_pol_group_even(&s->g, rt);
  if (!rc) rc = adsp_reserve(s, rt);
  if (rc || o->kind != HS_CHANGE_JOIN) return rc;
  s->w[o->worker] = (adsp_worker){.loss = NAN, .commit_end = hs_rt_now(rt)};
  if (s->timer_off) {
    s->timer_off = 0;
    if ((rc = hs_rt_timer(rt, s->period / s->samples, 0))) return rc;
  }
  return hs_rt_compute(rt, o->worker, adsp_batch(s, o->worker), 0);
}

static int adsp_init(void *state, hs_runtime *rt, const hs_params *p) {
  adsp_state *s = state;
  s->period = p->value[P_PERIOD];
  s->dc = (int64_t)p->value[P_COMMITS];
  s->min_interval = p->value[P_MIN_INTERVAL];
  s->samples = (int)p->value[P_SAMPLES];
  s->target_param = p->value[P_TARGET];
  s->research = p->value[P_RESEARCH];
  /* A rate above period / min_interval would only be clipped by min_interval. */
  double cap = s->min_interval > 0 ? floor(s->period / s->min_interval) : 1e9;
  s->dc_max = cap < 1 ? 1 : cap > 1e9 ? 1000000000 : (int64_t)cap;
  if (s->dc > s->dc_max) s->dc_max = s->dc;
  s->last_check_loss = s->last_search = NAN;
  s->push.what = HS_COMM_MODEL; /* the commit's local steps, not only its last gradient */
  s->push.ps_mode = HS_PS_APPLY;
  s->pull.what = HS_COMM_MODEL;
  return 0;
}

static void adsp_fini(void *state, hs_runtime *rt) {
  adsp_state *s = state;
  hs_pol_group_free(&s->g);
  free(s->w);
}

const hs_policy hs_policy_adsp = {
    .version = HS_POLICY_VERSION,
    .name = "adsp",
    .description = "ADSP: every worker commits at the same tuned rate, fast workers take more local steps between commits",
    .source = "Hu, Wu, Li, Wang, Zhang: Distributed machine learning through heterogeneous edge systems (AAAI 2020); code joapolarbear/adsp",
    .params = adsp_params,
    .state_size = sizeof(adsp_state),
    .init = adsp_init,
    .start = adsp_start,
    .on_compute = adsp_on_compute,
    .on_comm = adsp_on_comm,
    .on_timer = adsp_on_timer,
    .on_cluster = adsp_on_cluster,
    .fini = adsp_fini,
};
