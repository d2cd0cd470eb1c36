/* cal_time: summary statistics of repeated timings and the rule that decides when a series of
 * repetitions is stable enough to stop.
 *
 * Stability rule: after each repetition, with n samples so far, sampling stops when
 *   n >= max_reps, or
 *   n >= min_reps and the medians of the first n, n-1 and n-2 samples all lie within
 *   rel_tol (relative) of the median of the first n,
 * i.e. the last HS_CAL_STABLE_WINDOW repetitions moved the median by less than rel_tol.
 * Contract: pure functions; inputs are not modified. Units: seconds. */
#ifndef HS_CAL_TIME_H
#define HS_CAL_TIME_H

#include "core/core_error.h"

#define HS_CAL_STABLE_WINDOW 3

typedef struct hs_cal_stats {
  double median_s, p10_s, p90_s; /* s */
  int count;                     /* samples summarised */
} hs_cal_stats;

typedef struct hs_cal_rule {
  int min_reps, max_reps; /* 1 <= min_reps <= max_reps */
  double rel_tol;         /* e.g. 0.02 */
} hs_cal_rule;

/* Median, 10th and 90th percentile (linear interpolation between order statistics, as
 * gsl_stats_quantile_from_sorted_data) of x[0..n), n >= 1. HS_EINVAL for n < 1,
 * HS_ENOMEM when no scratch memory is left. */
int hs_cal_stats_of(const double *x, int n, hs_cal_stats *out, hs_diag *d);
/* 1 when the series x[0..n) may stop under the rule (see above), 0 when it needs more, or a
 * negative code (rule out of range, out of memory). */
int hs_cal_stable(const double *x, int n, const hs_cal_rule *rule, hs_diag *d);
/* Checks a rule: HS_EINVAL with a message naming the option when out of range. */
int hs_cal_rule_check(const hs_cal_rule *rule, hs_diag *d);

#endif
