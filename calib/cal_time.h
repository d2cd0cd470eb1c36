/* cal_time: summary statistics of repeated timings, the rule that decides when a series of
 * repetitions is precise enough to stop, and the interleaved schedule of a sweep's repetitions.
 *
 * Stopping rule (hs_cal_stable), with n samples so far, sampling stops when
 *   n >= max_reps, or
 *   n >= min_reps and the distribution-free 95% confidence interval of the median (order
 *   statistics x_(j) and x_(n+1-j), j the largest index with P(Binomial(n, 1/2) < j) <= 2.5%)
 *   lies within rel_tol (relative) of the median on both sides.
 * The interval needs n >= 6 (below that no pair of order statistics covers the median with 95%
 * confidence), so with min_reps < 6 a series still runs to 6 samples unless max_reps is smaller.
 *
 * Bimodal samples (hs_cal_bimodal): the best split of the sorted samples into a lower and an
 * upper group (least within-group squared error, each group at least a quarter of the samples
 * and at least 3) separates two modes when Ashman's D = sqrt(2) |m2 - m1| / sqrt(s1^2 + s2^2)
 * >= HS_CAL_BIMODAL_D and the upper group's mean exceeds the lower's by more than
 * max(2 rel_tol, HS_CAL_BIMODAL_GAP) relative; needs n >= 8. That is what a preemption or a
 * change of clock frequency during part of a point's samples leaves behind.
 *
 * Interleaved sweep (hs_cal_sweep): the repetitions of n points (e.g. batch sizes) are taken in
 * passes over the points in increasing order, `HS_CAL_CHUNK` samples per visit, rather than all
 * of one point's samples and then the next point's, so that a slow period of the machine spreads
 * over every point instead of biasing one. After each visit the point is judged on its key
 * phase: stable (rule above) and not bimodal -> done; bimodal when it would otherwise stop ->
 * its samples are discarded and it is measured again, at most HS_CAL_REMEASURE times (then it is
 * done with what it has); at max_reps -> done. A point can be dropped (with every later point,
 * e.g. the batch sizes from the first that ran out of memory). The caller does the timing: it
 * asks for the next visit, times `count` samples of that point (after its warm-up: the full
 * one on a point's first visit, a shorter one after switching points), adds them, and judges.
 *
 * Contract: pure functions, no I/O; inputs are not modified; the sweep owns its arrays
 * (hs_cal_sweep_free). Units: seconds. */
#ifndef HS_CAL_TIME_H
#define HS_CAL_TIME_H

#include "core/core_error.h"

#define HS_CAL_CI_LEVEL 0.95  /* confidence of the median's interval */
#define HS_CAL_BIMODAL_D 5.0  /* Ashman's D between the two groups */
#define HS_CAL_BIMODAL_GAP 0.05 /* relative distance of the group means, at least */
#define HS_CAL_CHUNK 2        /* timed samples per visit of a point */
#define HS_CAL_REMEASURE 2    /* times a bimodal point is measured again, at most */

typedef struct hs_cal_stats {
  double median_s, p10_s, p90_s; /* s */
  int count;                     /* samples summarised */
} hs_cal_stats;

typedef struct hs_cal_rule {
  int min_reps, max_reps; /* 1 <= min_reps <= max_reps */
  double rel_tol;         /* e.g. 0.02: the median's 95% interval within +-2% */
} hs_cal_rule;

/* Median, 10th and 90th percentile (linear interpolation between order statistics, as
 * gsl_stats_quantile_from_sorted_data) of x[0..n), n >= 1. HS_EINVAL for n < 1,
 * HS_ENOMEM when no scratch memory is left. */
int hs_cal_stats_of(const double *x, int n, hs_cal_stats *out, hs_diag *d);
/* The distribution-free `level` confidence interval [*lo, *hi] of the median of x[0..n) (see
 * above) and the median itself. 1 when it exists, 0 when n is too small for the level (then
 * *lo, *hi are the extremes), negative on bad input or out of memory. */
int hs_cal_median_ci(const double *x, int n, double level, double *median, double *lo,
                     double *hi, hs_diag *d);
/* 1 when the series x[0..n) may stop under the rule (see above), 0 when it needs more, or a
 * negative code (rule out of range, out of memory). */
int hs_cal_stable(const double *x, int n, const hs_cal_rule *rule, hs_diag *d);
/* 1 when x[0..n) has two separated modes (see above), 0 when not, negative when out of memory.
 * rel_tol is the rule's: modes closer than 2 rel_tol are not worth measuring again. */
int hs_cal_bimodal(const double *x, int n, double rel_tol, hs_diag *d);
/* Checks a rule: HS_EINVAL with a message naming the option when out of range. */
int hs_cal_rule_check(const hs_cal_rule *rule, hs_diag *d);

enum { HS_CAL_ACTIVE = 0, HS_CAL_DONE = 1, HS_CAL_DROPPED = 2 };

typedef struct hs_cal_sweep {
  int n_points, n_phases, key; /* key: the phase the rule judges */
  hs_cal_rule rule;
  double *samples;             /* [point][phase][max_reps] */
  int *reps;                   /* samples kept, per point */
  int *visits;                 /* visits so far, per point */
  int *remeasured;             /* times the point's samples were discarded as bimodal */
  int *state;                  /* HS_CAL_ACTIVE | HS_CAL_DONE | HS_CAL_DROPPED */
  int cursor;                  /* the point the next visit starts looking from */
} hs_cal_sweep;

int hs_cal_sweep_init(hs_cal_sweep *s, int n_points, int n_phases, int key,
                      const hs_cal_rule *rule, hs_diag *d);
void hs_cal_sweep_free(hs_cal_sweep *s);
/* The next visit in the interleaved order: 1 with *point, *count (samples to time, >= 1) and
 * *first (1: the point's first visit), or 0 when every point is done or dropped. */
int hs_cal_sweep_next(hs_cal_sweep *s, int *point, int *count, int *first);
/* Adds one sample t[0..n_phases) (s) to an active point; HS_EINVAL past max_reps. */
int hs_cal_sweep_add(hs_cal_sweep *s, int point, const double *t, hs_diag *d);
/* Judges a point after a visit: 1 when it is done now (hs_cal_sweep_stats may be read), 0 when
 * it needs more (its samples possibly discarded as bimodal), negative on error. */
int hs_cal_sweep_judge(hs_cal_sweep *s, int point, hs_diag *d);
/* Drops `point` and every later one (they will not be visited again). */
void hs_cal_sweep_drop(hs_cal_sweep *s, int point);
/* Statistics of every phase of a point's kept samples: st[0..n_phases). */
int hs_cal_sweep_stats(const hs_cal_sweep *s, int point, hs_cal_stats *st, hs_diag *d);
/* Points finished (done or dropped) plus the fraction of max_reps the others have, for a
 * progress display; in points. */
double hs_cal_sweep_progress(const hs_cal_sweep *s);

#endif
