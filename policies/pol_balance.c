/* pol_balance: the balance solver, line fits, the synchronous loop with per-worker batches and
 * LBB's tuner. See pol_balance.h for the contract. */
#include "policies/pol_balance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_stats.h"

/* --- 1. the solver ---------------------------------------------------------------------- */

static int cap_of(const hs_bal_problem *p, int i) {
  int64_t c = p->cap && p->cap[i] > 0 ? p->cap[i] : p->total;
  return (int)(c < p->total ? c : p->total);
}

/* The largest b in [1, cap] with t_i(b) <= T, or 0 when even one sample takes longer. */
static int fit_under(const hs_bal_problem *p, int i, double T) {
  int hi = cap_of(p, i);
  if (p->time(p->ctx, i, 1) > T) return 0;
  int lo = 1; /* t(lo) <= T */
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (p->time(p->ctx, i, mid) <= T) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static int64_t placed_under(const hs_bal_problem *p, double T) {
  int64_t sum = 0;
  for (int i = 0; i < p->n; i++) sum += fit_under(p, i, T);
  return sum;
}

int hs_bal_solve(const hs_bal_problem *p, int *b, hs_diag *d) {
  if (p->n < 1) return hs_diag_set(d, HS_EINVAL, "no worker to place a batch on");
  if (p->total < p->n)
    return hs_diag_set(d, HS_EINVAL, "global batch %lld is smaller than the %d workers",
                       (long long)p->total, p->n);
  int64_t room = 0;
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < p->n; i++) {
    room += cap_of(p, i);
    double t1 = p->time(p->ctx, i, 1), tc = p->time(p->ctx, i, cap_of(p, i));
    if (!isfinite(t1) || !isfinite(tc))
      return hs_diag_set(d, HS_EINVAL, "worker %d: predicted step time is not finite", i);
    if (t1 < lo) lo = t1;
    if (tc > hi) hi = tc;
  }
  if (room < p->total)
    return hs_diag_set(d, HS_EINVAL, "the workers' memory limits hold %lld samples in all, less "
                       "than the global batch %lld", (long long)room, (long long)p->total);
  /* Invariant: fewer than total samples fit under lo, at least total fit under hi. */
  lo = nextafter(lo, -INFINITY);
  for (int it = 0; it < 200; it++) {
    double mid = lo + (hi - lo) / 2;
    if (!(mid > lo && mid < hi)) break;
    if (placed_under(p, mid) >= p->total) hi = mid;
    else lo = mid;
  }
  int64_t sum = 0;
  for (int i = 0; i < p->n; i++) {
    b[i] = fit_under(p, i, lo);
    if (b[i] < 1) b[i] = 1;
    sum += b[i];
  }
  /* The remainder: each sample where it finishes first (ties: the lowest index). */
  while (sum < p->total) {
    int best = -1;
    double bt = INFINITY;
    for (int i = 0; i < p->n; i++) {
      if (b[i] >= cap_of(p, i)) continue;
      double t = p->time(p->ctx, i, b[i] + 1);
      if (t < bt) bt = t, best = i;
    }
    if (best < 0) break; /* cannot happen: room >= total */
    b[best]++;
    sum++;
  }
  /* Giving every worker its one sample may overshoot: take back from the slowest. */
  while (sum > p->total) {
    int worst = -1;
    double wt = -INFINITY;
    for (int i = 0; i < p->n; i++) {
      if (b[i] <= 1) continue;
      double t = p->time(p->ctx, i, b[i]);
      if (t > wt) wt = t, worst = i;
    }
    if (worst < 0) break; /* cannot happen: total >= n */
    b[worst]--;
    sum--;
  }
  return 0;
}

static double prop_time(const void *ctx, int i, int b) { return (double)b / ((const double *)ctx)[i]; }

int hs_bal_proportional(int n, int64_t total, const double *speed, const int *cap, int *b,
                        hs_diag *d) {
  for (int i = 0; i < n; i++)
    if (!(speed[i] > 0) || !isfinite(speed[i]))
      return hs_diag_set(d, HS_EINVAL, "worker %d: speed %g is not a positive number", i, speed[i]);
  hs_bal_problem p = {.n = n, .total = total, .cap = cap, .time = prop_time, .ctx = speed};
  return hs_bal_solve(&p, b, d);
}

/* --- 2. lines --------------------------------------------------------------------------- */

double hs_bal_line_time(const void *ctx, int i, int b) {
  const hs_bal_line *l = (const hs_bal_line *)ctx + i;
  return l->t0 + l->k * (double)b;
}

int hs_bal_fit_line(const int *b, const double *t, int n, hs_bal_line *out) {
  if (n < 2) return HS_EINVAL;
  double mb = 0, mt = 0;
  for (int j = 0; j < n; j++) mb += b[j], mt += t[j];
  mb /= n;
  mt /= n;
  double sbb = 0, sbt = 0;
  for (int j = 0; j < n; j++) {
    sbb += (b[j] - mb) * (b[j] - mb);
    sbt += (b[j] - mb) * (t[j] - mt);
  }
  if (!(sbb > 0)) return HS_EINVAL;
  double k = sbt / sbb;
  if (!(k > 1e-12)) k = 1e-12;
  out->k = k;
  out->t0 = mt - k * mb;
  return 0;
}

double hs_bal_slope_rel_error(const int *b, const double *t, int n, const hs_bal_line *fit) {
  if (n < 3) return INFINITY;
  double mb = 0;
  for (int j = 0; j < n; j++) mb += b[j];
  mb /= n;
  double sbb = 0, ssr = 0;
  for (int j = 0; j < n; j++) {
    double r = t[j] - hs_bal_line_time(fit, 0, b[j]);
    sbb += (b[j] - mb) * (b[j] - mb);
    ssr += r * r;
  }
  if (!(sbb > 0)) return INFINITY;
  return sqrt(ssr / (n - 2) / sbb) / fit->k;
}

/* --- 3. the synchronous loop ------------------------------------------------------------ */

int hs_bal_grow(void **arr, int *cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int nc = *cap ? *cap : 4;
  while (nc < need) nc *= 2;
  char *p = realloc(*arr, (size_t)nc * elem);
  if (!p) return HS_ENOMEM;
  memset(p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
  *arr = p;
  *cap = nc;
  return 0;
}

int hs_bal_sync_members(hs_bal_sync *s, hs_runtime *rt) {
  int total = hs_rt_n_workers(rt), need = total > 0 ? total : 1;
  hs_pol_group *g = &s->g;
  if (need > g->cap) {
    int c = g->cap, c2 = g->cap, c3 = g->cap, c4 = g->cap, c5 = g->cap, c6 = g->cap;
    if (hs_bal_grow((void **)&g->ws, &c, need, sizeof *g->ws) ||
        hs_bal_grow((void **)&g->batch, &c2, need, sizeof *g->batch) ||
        hs_bal_grow((void **)&g->slot, &c3, need, sizeof *g->slot) ||
        hs_bal_grow((void **)&s->weight, &c4, need, sizeof *s->weight) ||
        hs_bal_grow((void **)&s->dur, &c5, need, sizeof *s->dur) ||
        hs_bal_grow((void **)&s->cap, &c6, need, sizeof *s->cap))
      return hs_rt_fail(rt, HS_ENOMEM, "out of memory for %d workers", total);
    g->cap = c;
  }
  g->n = hs_pol_active_list(rt, g->ws, total);
  for (int w = 0; w < total; w++) g->slot[w] = -1;
  for (int i = 0; i < g->n; i++) {
    g->slot[g->ws[i]] = i;
    g->batch[i] = 0;
    s->cap[i] = hs_rt_max_batch(rt, g->ws[i]);
  }
  return 0;
}

int hs_bal_sync_round(hs_bal_sync *s, hs_runtime *rt) {
  s->done = 0;
  int64_t B = hs_rt_global_batch(rt), sum = 0;
  for (int i = 0; i < s->g.n; i++) {
    int b = s->g.batch[i];
    if (b < 1 || (s->cap[i] > 0 && b > s->cap[i]))
      return hs_rt_fail(rt, HS_ERUNTIME, "internal error: batch %d for worker %d (limit %d)", b,
                        s->g.ws[i], s->cap[i]);
    sum += b;
  }
  if (s->g.n > 0 && sum != B)
    return hs_rt_fail(rt, HS_ERUNTIME, "internal error: batches sum to %lld, not the global "
                      "batch %lld", (long long)sum, (long long)B);
  for (int i = 0; i < s->g.n; i++) {
    s->weight[i] = (double)s->g.batch[i] / (double)B;
    s->dur[i] = NAN;
    int rc = hs_rt_compute(rt, s->g.ws[i], s->g.batch[i], s->iter);
    if (rc) return rc;
  }
  return 0;
}

int hs_bal_sync_step(hs_bal_sync *s, hs_runtime *rt, const hs_step_obs *o) {
  int i = o->worker >= 0 && o->worker < s->g.cap ? s->g.slot[o->worker] : -1;
  if (i < 0) return 0; /* a step from before a membership change */
  s->dur[i] = o->duration;
  if (++s->done < s->g.n) return 0;
  int rc = hs_rt_allreduce(rt, s->g.ws, s->g.n, s->weight, &s->opts);
  return rc ? rc : 1;
}

void hs_bal_sync_free(hs_bal_sync *s) {
  hs_pol_group_free(&s->g);
  free(s->weight);
  free(s->dur);
  free(s->cap);
  s->weight = s->dur = NULL;
  s->cap = NULL;
}

int hs_pol_sync_start(hs_bal_sync *s, hs_runtime *rt, hs_pol_place_fn *place, void *state) {
  int rc = place(state, rt);
  return rc ? rc : hs_bal_sync_round(s, rt);
}

int hs_pol_sync_on_comm(hs_bal_sync *s, hs_runtime *rt, hs_pol_place_fn *place, void *state) {
  s->iter++;
  if (s->changed) {
    s->changed = 0;
    int rc = place(state, rt);
    if (rc) return rc;
  }
  return hs_bal_sync_round(s, rt);
}

void hs_pol_sync_on_cluster(hs_bal_sync *s, const hs_cluster_obs *o) {
  if (o->kind != HS_CHANGE_SLOWDOWN) s->changed = 1;
}

/* --- 4. LBB's tuner --------------------------------------------------------------------- */

static int lbb_reserve(hs_lbb *l, hs_runtime *rt) {
  int total = hs_rt_n_workers(rt);
  int old = l->cap_w;
  if (hs_bal_grow((void **)&l->w, &l->cap_w, total > 0 ? total : 1, sizeof *l->w))
    return hs_rt_fail(rt, HS_ENOMEM, "out of memory for %d workers", total);
  int win = l->p.window > 0 ? l->p.window : 1, sm = l->p.smooth > 1 ? l->p.smooth : 0;
  for (int w = old; w < l->cap_w; w++) {
    l->w[w].b = malloc((size_t)win * sizeof *l->w[w].b);
    l->w[w].t = malloc((size_t)win * sizeof *l->w[w].t);
    if (sm) l->w[w].rel = malloc((size_t)sm * sizeof *l->w[w].rel);
    if (!l->w[w].b || !l->w[w].t || (sm && !l->w[w].rel))
      return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  }
  if (sm && !l->scratch && !(l->scratch = malloc((size_t)(sm > win ? sm : win) * sizeof *l->scratch)))
    return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  return 0;
}

/* LBB's warm-up: step times at batches 2, 4, ..., 256 from the performance model. */
static int lbb_profile(hs_lbb *l, hs_runtime *rt, int w, int cap) {
  int bs[9], n = 0;
  double ts[9];
  int64_t B = hs_rt_global_batch(rt);
  int top = cap > 0 ? cap : 256;
  if (top > B) top = (int)B;
  for (int b = 2; b <= 256 && b <= top; b *= 2) bs[n++] = b;
  bs[n++] = 1;
  for (int j = 0; j < n; j++) ts[j] = hs_rt_predict(rt, w, bs[j]);
  hs_lbb_worker *x = &l->w[w];
  if (n < 2 || hs_bal_fit_line(bs, ts, n, &x->line)) {
    /* A worker that holds one sample only: a line through the origin and that point. */
    x->line.t0 = 0;
    x->line.k = ts[0] > 1e-12 ? ts[0] : 1e-12;
  }
  if (!isfinite(x->line.t0) || !isfinite(x->line.k))
    return hs_rt_fail(rt, HS_EINVAL, "worker %d: the performance model gives no finite step "
                      "time to profile", w);
  x->have_line = 1;
  return 0;
}

static int lbb_resolve(hs_lbb *l, hs_runtime *rt, hs_pol_group *g, const int *cap) {
  hs_bal_line *lines = malloc((size_t)(g->n > 0 ? g->n : 1) * sizeof *lines);
  if (!lines) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  for (int i = 0; i < g->n; i++) lines[i] = l->w[g->ws[i]].line;
  hs_bal_problem p = {.n = g->n, .total = hs_rt_global_batch(rt), .cap = cap,
                      .time = hs_bal_line_time, .ctx = lines};
  hs_diag d = {0};
  int rc = hs_bal_solve(&p, g->batch, &d);
  free(lines);
  if (rc) return hs_rt_fail(rt, rc, "lbb: %s", d.msg);
  return 0;
}

int hs_lbb_solve(hs_lbb *l, hs_runtime *rt, hs_pol_group *g, const int *cap) {
  int rc = lbb_reserve(l, rt);
  if (rc) return rc;
  if (g->n == 0) return 0;
  for (int i = 0; i < g->n; i++)
    if (!l->w[g->ws[i]].have_line && (rc = lbb_profile(l, rt, g->ws[i], cap[i]))) return rc;
  l->n_rel = l->rel_head = 0;
  return lbb_resolve(l, rt, g, cap);
}

int hs_lbb_observe(hs_lbb *l, hs_runtime *rt, int w, int batch, double duration) {
  int rc = lbb_reserve(l, rt);
  if (rc) return rc;
  hs_lbb_worker *x = &l->w[w];
  int win = l->p.window > 0 ? l->p.window : 1;
  x->b[x->head] = batch;
  x->t[x->head] = duration;
  x->head = (x->head + 1) % win;
  if (x->n < win) x->n++;
  return 0;
}

/* Rapid-tune refit of one worker: least squares over its window when the window's batches
 * span at least min_spread samples and the points determine the slope to max_slope_error
 * (fine-tuning moves one sample per iteration, so a window spans a few samples; under step
 * noise of a few percent its least-squares slope can come out anywhere, even negative, and
 * a flat line would draw the whole global batch to one worker); otherwise the current line
 * scaled so that it passes through the latest measurement (a uniform slowdown multiplies the
 * whole line). */
static void lbb_refit(hs_lbb *l, hs_lbb_worker *x) {
  if (x->n == 0) return;
  int win = l->p.window > 0 ? l->p.window : 1;
  int bmin = x->b[0], bmax = x->b[0];
  for (int j = 1; j < x->n; j++) {
    if (x->b[j] < bmin) bmin = x->b[j];
    if (x->b[j] > bmax) bmax = x->b[j];
  }
  hs_bal_line fit;
  if (bmax - bmin >= l->p.min_spread && bmax > bmin && !hs_bal_fit_line(x->b, x->t, x->n, &fit) &&
      fit.t0 + fit.k > 0 &&
      hs_bal_slope_rel_error(x->b, x->t, x->n, &fit) <= l->p.max_slope_error) {
    x->line = fit;
  } else {
    /* Through the latest measurement, or (smooth > 1) through the window's median ratio of
     * measured to predicted time, which one outlying step does not move. */
    double f = NAN;
    if (l->p.smooth > 1) {
      int m = 0;
      for (int j = 0; j < x->n; j++) {
        double pred = hs_bal_line_time(&x->line, 0, x->b[j]);
        if (pred > 0 && x->t[j] > 0) l->scratch[m++] = x->t[j] / pred;
      }
      if (m > 0) f = hs_median_inplace(l->scratch, (size_t)m);
    } else {
      int last = (x->head + win - 1) % win;
      double pred = hs_bal_line_time(&x->line, 0, x->b[last]);
      if (pred > 0 && x->t[last] > 0) f = x->t[last] / pred;
    }
    if (isfinite(f)) {
      x->line.t0 *= f;
      x->line.k *= f;
    }
  }
  x->n = x->head = 0; /* the next refit sees only measurements made under the new batches */
}

int hs_lbb_tune(hs_lbb *l, hs_runtime *rt, hs_pol_group *g, const int *cap, const double *dur,
                uint64_t iter) {
  l->last_action = HS_LBB_NONE;
  if (!l->p.dynamic || g->n < 2) return 0;
  double mean = 0;
  for (int i = 0; i < g->n; i++) {
    if (!isfinite(dur[i])) return 0; /* a step is missing: no decision this time */
    mean += dur[i];
  }
  mean /= g->n;
  /* What decides: this iteration's step times, or (smooth > 1) each worker's median over the
   * last `smooth` iterations at the current batches of its step time over the iteration's
   * mean; no decision before there are that many. */
  int sm = l->p.smooth, slow = 0, fast = 0;
  double vslow = dur[0], vfast = dur[0], vmean = mean;
  if (sm > 1) {
    if (!(mean > 0)) return 0;
    for (int i = 0; i < g->n; i++) l->w[g->ws[i]].rel[l->rel_head] = dur[i] / mean;
    l->rel_head = (l->rel_head + 1) % sm;
    if (l->n_rel < sm) l->n_rel++;
    if (l->n_rel < sm) return 0;
    vmean = 0;
    for (int i = 0; i < g->n; i++) {
      memcpy(l->scratch, l->w[g->ws[i]].rel, (size_t)sm * sizeof *l->scratch);
      double v = hs_median_inplace(l->scratch, (size_t)sm);
      vmean += v / g->n;
      if (i == 0 || v > vslow) slow = i, vslow = v;
      if (i == 0 || v < vfast) fast = i, vfast = v;
    }
  } else {
    for (int i = 1; i < g->n; i++) {
      if (dur[i] > vslow) slow = i, vslow = dur[i];
      if (dur[i] < vfast) fast = i, vfast = dur[i];
    }
  }
  double se = vmean > 0 ? (vslow - vfast) / vmean : 0;
  l->last_se = se;
  if (se >= l->p.se_high && iter - l->last_solve >= (uint64_t)l->p.rapid_every) {
    for (int i = 0; i < g->n; i++) lbb_refit(l, &l->w[g->ws[i]]);
    int rc = lbb_resolve(l, rt, g, cap);
    if (rc) return rc;
    l->last_solve = iter;
    l->last_action = HS_LBB_RAPID;
    l->n_rapid++;
    l->n_rel = l->rel_head = 0;
    return 0;
  }
  /* Between rapid-tunes a large imbalance is still fine-tuned, one sample per iteration (with
   * smooth > 1, one per `smooth` iterations: each decision sees only the batches it judges). */
  if (se >= l->p.se_low && g->batch[slow] > 1 && (cap[fast] <= 0 || g->batch[fast] < cap[fast])) {
    g->batch[slow]--;
    g->batch[fast]++;
    l->last_action = HS_LBB_FINE;
    l->n_fine++;
    l->n_rel = l->rel_head = 0;
  }
  return 0;
}

void hs_lbb_free(hs_lbb *l) {
  for (int w = 0; w < l->cap_w; w++) {
    free(l->w[w].b);
    free(l->w[w].t);
    free(l->w[w].rel);
  }
  free(l->w);
  free(l->scratch);
  l->w = NULL;
  l->scratch = NULL;
  l->cap_w = 0;
}
