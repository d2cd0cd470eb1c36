#include "calib/cal_time.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double *sorted_copy(const double *x, int n) {
  double *s = malloc((size_t)n * sizeof *s);
  if (!s) return NULL;
  memcpy(s, x, (size_t)n * sizeof *s);
  gsl_sort(s, 1, (size_t)n);
  return s;
}

int hs_cal_stats_of(const double *x, int n, hs_cal_stats *out, hs_diag *d) {
  if (n < 1) return hs_diag_set(d, HS_EINVAL, "no timing samples to summarise");
  double *s = sorted_copy(x, n);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory for %d timing samples", n);
  out->median_s = gsl_stats_median_from_sorted_data(s, 1, (size_t)n);
  out->p10_s = gsl_stats_quantile_from_sorted_data(s, 1, (size_t)n, 0.10);
  out->p90_s = gsl_stats_quantile_from_sorted_data(s, 1, (size_t)n, 0.90);
  out->count = n;
  free(s);
  return 0;
}

int hs_cal_rule_check(const hs_cal_rule *r, hs_diag *d) {
  if (r->min_reps < 1) return hs_diag_set(d, HS_EINVAL, "--min-reps: expected at least 1, got %d", r->min_reps);
  if (r->max_reps < r->min_reps)
    return hs_diag_set(d, HS_EINVAL, "--max-reps: expected at least --min-reps (%d), got %d", r->min_reps, r->max_reps);
  if (!(r->rel_tol > 0) || !isfinite(r->rel_tol))
    return hs_diag_set(d, HS_EINVAL, "--rel-tol: expected a positive number, got %g", r->rel_tol);
  return 0;
}

/* The largest j in 1..n/2 with P(Binomial(n, 1/2) <= j - 1) <= alpha / 2, or 0 when none:
 * [x_(j), x_(n+1-j)] then covers the median with confidence >= 1 - alpha. */
static int ci_rank(int n, double alpha) {
  int lo = 0, hi = n / 2; /* invariant: lo qualifies (0 trivially), answers lie in [lo, hi] */
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (gsl_cdf_binomial_P((unsigned)(mid - 1), 0.5, (unsigned)n) <= alpha / 2) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

int hs_cal_median_ci(const double *x, int n, double level, double *median, double *lo,
                     double *hi, hs_diag *d) {
  if (n < 1) return hs_diag_set(d, HS_EINVAL, "no timing samples to summarise");
  if (!(level > 0 && level < 1)) return hs_diag_set(d, HS_EINVAL, "confidence level must be in (0, 1), got %g", level);
  double *s = sorted_copy(x, n);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory for %d timing samples", n);
  int j = ci_rank(n, 1 - level);
  *median = gsl_stats_median_from_sorted_data(s, 1, (size_t)n);
  *lo = s[j > 0 ? j - 1 : 0];
  *hi = s[j > 0 ? n - j : n - 1];
  free(s);
  return j > 0;
}

int hs_cal_stable(const double *x, int n, const hs_cal_rule *r, hs_diag *d) {
  int rc = hs_cal_rule_check(r, d);
  if (rc) return rc;
  if (n >= r->max_reps) return 1;
  if (n < r->min_reps) return 0;
  double med, lo, hi;
  rc = hs_cal_median_ci(x, n, HS_CAL_CI_LEVEL, &med, &lo, &hi, d);
  if (rc <= 0) return rc;
  return lo >= med * (1 - r->rel_tol) && hi <= med * (1 + r->rel_tol);
}

int hs_cal_bimodal(const double *x, int n, double rel_tol, hs_diag *d) {
  if (n < 8) return 0;
  double *s = sorted_copy(x, n);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory for %d timing samples", n);
  /* Prefix sums for the within-group squared error of every split, in O(n). */
  double *sum = malloc((size_t)(n + 1) * 2 * sizeof *sum);
  if (!sum) {
    free(s);
    return hs_diag_set(d, HS_ENOMEM, "out of memory for %d timing samples", n);
  }
  double *sq = sum + n + 1;
  sum[0] = sq[0] = 0;
  for (int i = 0; i < n; i++) sum[i + 1] = sum[i] + s[i], sq[i + 1] = sq[i] + s[i] * s[i];
  int least = (n + 3) / 4 > 3 ? (n + 3) / 4 : 3;
  double best = INFINITY, m1 = 0, m2 = 0, v1 = 0, v2 = 0;
  for (int k = least; k <= n - least; k++) { /* lower group s[0..k), upper s[k..n) */
    double a = sum[k] / k, b = (sum[n] - sum[k]) / (n - k);
    double ssa = fmax(sq[k] - k * a * a, 0), ssb = fmax(sq[n] - sq[k] - (n - k) * b * b, 0);
    if (ssa + ssb < best) best = ssa + ssb, m1 = a, m2 = b, v1 = ssa / k, v2 = ssb / (n - k);
  }
  free(sum);
  free(s);
  if (!isfinite(best)) return 0;
  double gap = fmax(2 * rel_tol, HS_CAL_BIMODAL_GAP);
  if (!(m2 - m1 > gap * m1)) return 0;
  double spread = sqrt(v1 + v2);
  return spread == 0 || sqrt(2.0) * (m2 - m1) / spread >= HS_CAL_BIMODAL_D;
}

/* --- interleaved sweep ------------------------------------------------------------------- */

int hs_cal_sweep_init(hs_cal_sweep *s, int n_points, int n_phases, int key,
                      const hs_cal_rule *rule, hs_diag *d) {
  memset(s, 0, sizeof *s);
  int rc = hs_cal_rule_check(rule, d);
  if (rc) return rc;
  if (n_points < 0 || n_phases < 1 || key < 0 || key >= n_phases)
    return hs_diag_set(d, HS_EINVAL, "sweep: bad shape (%d points, %d phases, key %d)", n_points, n_phases, key);
  s->n_points = n_points, s->n_phases = n_phases, s->key = key, s->rule = *rule;
  size_t np = n_points > 0 ? (size_t)n_points : 1;
  s->samples = malloc(np * (size_t)n_phases * (size_t)rule->max_reps * sizeof *s->samples);
  s->reps = calloc(np, sizeof *s->reps);
  s->visits = calloc(np, sizeof *s->visits);
  s->remeasured = calloc(np, sizeof *s->remeasured);
  s->state = calloc(np, sizeof *s->state);
  if (!s->samples || !s->reps || !s->visits || !s->remeasured || !s->state) {
    hs_cal_sweep_free(s);
    return hs_diag_set(d, HS_ENOMEM, "out of memory for %d points of %d repetitions", n_points, rule->max_reps);
  }
  return 0;
}

void hs_cal_sweep_free(hs_cal_sweep *s) {
  free(s->samples);
  free(s->reps);
  free(s->visits);
  free(s->remeasured);
  free(s->state);
  memset(s, 0, sizeof *s);
}

static double *series(const hs_cal_sweep *s, int point, int phase) {
  return s->samples + ((size_t)point * (size_t)s->n_phases + (size_t)phase) * (size_t)s->rule.max_reps;
}

int hs_cal_sweep_next(hs_cal_sweep *s, int *point, int *count, int *first) {
  for (int k = 0; k < s->n_points; k++) {
    int p = (s->cursor + k) % s->n_points;
    if (s->state[p] != HS_CAL_ACTIVE) continue;
    int left = s->rule.max_reps - s->reps[p];
    *point = p;
    *count = left < HS_CAL_CHUNK ? (left > 0 ? left : 1) : HS_CAL_CHUNK;
    *first = s->visits[p] == 0;
    s->visits[p]++;
    s->cursor = (p + 1) % s->n_points;
    return 1;
  }
  return 0;
}

int hs_cal_sweep_add(hs_cal_sweep *s, int point, const double *t, hs_diag *d) {
  if (point < 0 || point >= s->n_points || s->state[point] != HS_CAL_ACTIVE)
    return hs_diag_set(d, HS_EINVAL, "sweep: point %d is not being measured", point);
  if (s->reps[point] >= s->rule.max_reps)
    return hs_diag_set(d, HS_EINVAL, "sweep: point %d already has --max-reps (%d) samples", point, s->rule.max_reps);
  for (int p = 0; p < s->n_phases; p++) series(s, point, p)[s->reps[point]] = t[p];
  s->reps[point]++;
  return 0;
}

int hs_cal_sweep_judge(hs_cal_sweep *s, int point, hs_diag *d) {
  if (point < 0 || point >= s->n_points) return hs_diag_set(d, HS_EINVAL, "sweep: no point %d", point);
  if (s->state[point] != HS_CAL_ACTIVE) return s->state[point] == HS_CAL_DONE;
  const double *x = series(s, point, s->key);
  int n = s->reps[point];
  int stable = n > 0 ? hs_cal_stable(x, n, &s->rule, d) : 0;
  if (stable <= 0) return stable;
  if (s->remeasured[point] < HS_CAL_REMEASURE) {
    int bi = hs_cal_bimodal(x, n, s->rule.rel_tol, d);
    if (bi < 0) return bi;
    if (bi) { /* measured through a change of the machine's speed: again, interleaved */
      s->remeasured[point]++;
      s->reps[point] = 0;
      return 0;
    }
  }
  s->state[point] = HS_CAL_DONE;
  return 1;
}

void hs_cal_sweep_drop(hs_cal_sweep *s, int point) {
  for (int p = point < 0 ? 0 : point; p < s->n_points; p++) s->state[p] = HS_CAL_DROPPED;
}

int hs_cal_sweep_stats(const hs_cal_sweep *s, int point, hs_cal_stats *st, hs_diag *d) {
  if (point < 0 || point >= s->n_points) return hs_diag_set(d, HS_EINVAL, "sweep: no point %d", point);
  for (int p = 0; p < s->n_phases; p++) {
    int rc = hs_cal_stats_of(series(s, point, p), s->reps[point], &st[p], d);
    if (rc) return rc;
  }
  return 0;
}

double hs_cal_sweep_progress(const hs_cal_sweep *s) {
  double done = 0;
  for (int p = 0; p < s->n_points; p++)
    done += s->state[p] != HS_CAL_ACTIVE ? 1 : fmin(1, (double)s->reps[p] / s->rule.max_reps);
  return done;
}
