#include "calib/cal_time.h"

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

int hs_cal_stable(const double *x, int n, const hs_cal_rule *r, hs_diag *d) {
  int rc = hs_cal_rule_check(r, d);
  if (rc) return rc;
  if (n >= r->max_reps) return 1;
  if (n < r->min_reps || n < HS_CAL_STABLE_WINDOW) return 0;
  double now = 0;
  int stable = 1;
  for (int k = 0; k < HS_CAL_STABLE_WINDOW && stable; k++) {
    double *s = sorted_copy(x, n - k);
    if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory for %d timing samples", n);
    double m = gsl_stats_median_from_sorted_data(s, 1, (size_t)(n - k));
    free(s);
    if (k == 0) now = m;
    else stable = fabs(m - now) <= r->rel_tol * fabs(now);
  }
  return stable;
}
