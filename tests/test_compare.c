/* sim_compare: the Wasserstein-1 distance between two empirical distributions and the paired
 * comparison of iteration times that `hetsim validate` stores, against hand computations
 * (compare-1.x distance, compare-2.x paired times). */
#include <stdlib.h>

#include "sim/sim_compare.h"
#include "tests/hs_test.h"

static double w1(const double *a, size_t na, const double *b, size_t nb) {
  double w = NAN;
  hs_diag d = {0};
  if (hs_wasserstein1(a, na, b, nb, &w, &d)) HS_FAIL_AT("hs_wasserstein1: %s", d.msg);
  return w;
}

/* compare-1.1: equal sizes: the mean distance between the sorted values. {3, 1, 2} sorted is
 * {1, 2, 3}, {6, 2, 4} is {2, 4, 6}: (1 + 2 + 3) / 3 = 2, whatever the order given. */
static void test_equal_sizes(void) {
  const double a[] = {3, 1, 2}, b[] = {6, 2, 4};
  ASSERT_NEAR(w1(a, 3, b, 3), 2.0, 1e-15);
  ASSERT_NEAR(w1(b, 3, a, 3), 2.0, 1e-15); /* symmetric */
  ASSERT_NEAR(w1(a, 3, a, 3), 0.0, 0);     /* a distribution is at distance 0 from itself */
  /* A shift by c moves every quantile by c: W1 = |c|. */
  const double s[] = {3.5, 1.5, 2.5};
  ASSERT_NEAR(w1(a, 3, s, 3), 0.5, 1e-15);
  /* Crossing CDFs: {0, 10} against {4, 6}: |0 - 4|/2 + |10 - 6|/2 = 4 (a mean-only comparison
   * sees no difference: both means are 5). */
  const double x[] = {0, 10}, y[] = {4, 6};
  ASSERT_NEAR(w1(x, 2, y, 2), 4.0, 1e-15);
}

/* compare-1.2: unequal sizes, by the CDFs: a = {0, 1} (F_a = 1/2 on [0, 1)), b = {0, 0.5, 1}
 * (F_b = 1/3 on [0, 0.5), 2/3 on [0.5, 1)): |1/2 - 1/3| * 0.5 + |1/2 - 2/3| * 0.5 = 1/6. */
static void test_unequal_sizes(void) {
  const double a[] = {1, 0}, b[] = {0.5, 1, 0};
  ASSERT_NEAR(w1(a, 2, b, 3), 1.0 / 6.0, 1e-15);
  ASSERT_NEAR(w1(b, 3, a, 2), 1.0 / 6.0, 1e-15);
  /* One point against several: the mean absolute deviation from it. {2} against {1, 2, 6}:
   * (1 + 0 + 4) / 3. */
  const double p[] = {2}, q[] = {1, 2, 6};
  ASSERT_NEAR(w1(p, 1, q, 3), 5.0 / 3.0, 1e-15);
  /* A list repeated is the same distribution: {1, 2} against {1, 1, 2, 2} is 0. */
  const double r[] = {1, 2}, rr[] = {2, 1, 2, 1};
  ASSERT_NEAR(w1(r, 2, rr, 4), 0.0, 1e-15);
}

/* compare-1.3: bad input is an error, not a number. */
static void test_bad_input(void) {
  const double a[] = {1, NAN}, b[] = {1, 2};
  double w = 0;
  hs_diag d = {0};
  ASSERT_EQ(hs_wasserstein1(a, 2, b, 2, &w, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "not finite");
  ASSERT(isnan(w));
  ASSERT_EQ(hs_wasserstein1(b, 0, b, 2, &w, NULL), HS_EINVAL);
}

/* compare-2.1: paired iteration times. ref = {10, 20, 30, 40}, cmp = {11, 18, 30, 48}:
 * errors 0.1, 0.1, 0, 0.2 -> sorted 0, 0.1, 0.1, 0.2: median 0.1, p95 the 4th (ceil 3.8) = 0.2;
 * means 25 and 26.75: mean error 0.07; sorted cmp {11, 18, 30, 48} against {10, 20, 30, 40}:
 * W1 = (1 + 2 + 0 + 8) / 4 = 2.75, over the mean 25: 0.11. */
static void test_paired(void) {
  const double ref[] = {10, 20, 30, 40}, cmp[] = {11, 18, 30, 48};
  hs_iter_compare c;
  hs_diag d = {0};
  ASSERT_EQ(hs_iter_compare_times(ref, cmp, 4, &c, &d), 0);
  ASSERT_EQ(c.n, 4);
  ASSERT_NEAR(c.median_error, 0.1, 1e-15);
  ASSERT_NEAR(c.p95_error, 0.2, 1e-15);
  ASSERT_NEAR(c.ref_mean, 25, 1e-12);
  ASSERT_NEAR(c.cmp_mean, 26.75, 1e-12);
  ASSERT_NEAR(c.mean_error, 0.07, 1e-12);
  ASSERT_NEAR(c.wasserstein, 2.75, 1e-12);
  ASSERT_NEAR(c.wasserstein_rel, 0.11, 1e-12);
  /* The pairing does not matter to the distance, only to the per-interval errors: the same
   * times with cmp's order reversed give the same W1 and means, larger errors. */
  const double rev[] = {48, 30, 18, 11};
  hs_iter_compare r;
  ASSERT_EQ(hs_iter_compare_times(ref, rev, 4, &r, &d), 0);
  ASSERT_NEAR(r.wasserstein, c.wasserstein, 1e-12);
  ASSERT_NEAR(r.mean_error, c.mean_error, 1e-12);
  ASSERT(r.median_error > c.median_error);
}

/* compare-2.2: intervals whose reference time is not positive are left out of every figure;
 * none left: NaN and n = 0, not an error. */
static void test_paired_skips(void) {
  const double ref[] = {0, 10, -1, 20}, cmp[] = {5, 12, 7, 20};
  hs_iter_compare c;
  ASSERT_EQ(hs_iter_compare_times(ref, cmp, 4, &c, NULL), 0);
  ASSERT_EQ(c.n, 2);
  ASSERT_NEAR(c.median_error, 0.1, 1e-15); /* errors 0.2 and 0 */
  ASSERT_NEAR(c.mean_error, 32.0 / 30.0 - 1, 1e-15);
  ASSERT_NEAR(c.wasserstein, 1.0, 1e-15);  /* {10, 20} against {12, 20} */
  const double z[] = {0, 0};
  ASSERT_EQ(hs_iter_compare_times(z, z, 2, &c, NULL), 0);
  ASSERT_EQ(c.n, 0);
  ASSERT(isnan(c.median_error) && isnan(c.mean_error) && isnan(c.wasserstein_rel));
  const double bad[] = {1, INFINITY};
  ASSERT_EQ(hs_iter_compare_times(bad, bad, 2, &c, NULL), HS_EINVAL);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"equal_sizes", test_equal_sizes},
      {"unequal_sizes", test_unequal_sizes},
      {"bad_input", test_bad_input},
      {"paired", test_paired},
      {"paired_skips", test_paired_skips},
      {NULL, NULL},
  };
  return hs_test_main("compare", cases, argc, argv);
}
