/* sim_compare: how far one run's iteration times are from another's (a simulation of a real run
 * from the real run, or a rerun of a real run from the first). Used by `hetsim validate`
 * (cli/cmd_validate.c), which pairs the runs' per-round iteration times; the arithmetic lives
 * here so that it can be tested against hand computations (tests/test_compare.c).
 *
 * Contract: pure functions on caller-owned arrays, which they never modify (they sort copies).
 * They return 0 or a negative HS_E* code with the diag filled (d may be NULL). Units: whatever
 * the caller's times are in (seconds in hetsim); the errors are relative (0.05 = 5%). */
#ifndef HS_SIM_COMPARE_H
#define HS_SIM_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"

/* The Wasserstein-1 (earth mover's) distance between the empirical distributions of
 * a[0..na) and b[0..nb), each value weighing 1/na (1/nb):
 *   W1 = integral over x of |F_a(x) - F_b(x)| dx = integral over u in (0, 1) of |Q_a(u) - Q_b(u)| du
 * with F the empirical CDFs and Q their quantile functions; for na = nb = n it is the mean of
 * |a_(i) - b_(i)| over the values sorted. In the units of the values. HS_EINVAL when a list is
 * empty or holds a value that is not finite; HS_ENOMEM. */
int hs_wasserstein1(const double *a, size_t na, const double *b, size_t nb, double *out, hs_diag *d);

/* Per-interval times of a reference run (ref, e.g. the real run) and of the run compared with
 * it (cmp, e.g. its simulation), paired: ref[i] and cmp[i] are the same interval (the same
 * model versions) in both runs. */
typedef struct hs_iter_compare {
  int64_t n;               /* intervals with ref[i] > 0 (the others are left out of everything) */
  double median_error;     /* median over the intervals of |cmp[i] - ref[i]| / ref[i] */
  double p95_error;        /* its 95th percentile (nearest rank: the ceil(0.95 n)-th smallest) */
  double ref_mean, cmp_mean; /* means of the intervals' times */
  double mean_error;       /* cmp_mean / ref_mean - 1: signed, > 0 when cmp is slower */
  double wasserstein;      /* hs_wasserstein1 of the two lists of times */
  double wasserstein_rel;  /* wasserstein / ref_mean */
} hs_iter_compare;

/* Fills out from n paired times; with no interval where ref[i] > 0 every figure is NaN and
 * out->n = 0 (not an error). HS_EINVAL for a time that is not finite; HS_ENOMEM. */
int hs_iter_compare_times(const double *ref, const double *cmp, size_t n, hs_iter_compare *out, hs_diag *d);

#endif
