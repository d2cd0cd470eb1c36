/* Balance solver tests: LBB's static solve against a brute-force answer, memory limits,
 * proportional shares, bad inputs, and line fits. */
#include "core/core_rng.h"
#include "policies/pol_balance.h"
#include "tests/hs_test.h"

/* The lbb-4gpu cluster's models, in ms: 2x GTX 1070, M40, GTX 750. */
static const hs_bal_line LBB4[4] = {{3, 0.52}, {3, 0.52}, {3, 0.50}, {5, 3.1}};

static double max_time(const hs_bal_line *l, const int *b, int n) {
  double m = 0;
  for (int i = 0; i < n; i++) m = fmax(m, hs_bal_line_time(l, i, b[i]));
  return m;
}

/* No single sample moved from one worker to another lowers the slowest time. */
static int within_one_sample(const hs_bal_line *l, const int *b, const int *cap, int n) {
  double T = max_time(l, b, n);
  for (int j = 0; j < n; j++) {
    if (cap && cap[j] > 0 && b[j] >= cap[j]) continue;
    if (hs_bal_line_time(l, j, b[j] + 1) < T - 1e-12) return 0;
  }
  return 1;
}

static void test_lbb_4gpu_static_solve(void) {
  int b[4];
  hs_diag d = {0};
  hs_bal_problem p = {.n = 4, .total = 512, .time = hs_bal_line_time, .ctx = LBB4};
  ASSERT_EQ(hs_bal_solve(&p, b, &d), 0);
  /* Brute force over all splits of 512 (by hand-written script): the least slowest time is
   * 86.2 ms, reached by [160, 160, 166, 26]. */
  ASSERT_EQ(b[0], 160);
  ASSERT_EQ(b[1], 160);
  ASSERT_EQ(b[2], 166);
  ASSERT_EQ(b[3], 26);
  ASSERT_NEAR(max_time(LBB4, b, 4), 86.2, 1e-9);
  ASSERT(within_one_sample(LBB4, b, NULL, 4));
  /* The times are equal within one sample of the slowest worker's per-sample cost. */
  double lo = 1e9;
  for (int i = 0; i < 4; i++) lo = fmin(lo, hs_bal_line_time(LBB4, i, b[i]));
  ASSERT(max_time(LBB4, b, 4) - lo <= 3.1);
}

static void test_memory_limits(void) {
  int cap[4] = {0, 0, 100, 0}, b[4];
  hs_diag d = {0};
  hs_bal_problem p = {.n = 4, .total = 512, .cap = cap, .time = hs_bal_line_time, .ctx = LBB4};
  ASSERT_EQ(hs_bal_solve(&p, b, &d), 0);
  ASSERT_EQ(b[2], 100);
  ASSERT_EQ(b[0] + b[1] + b[2] + b[3], 512);
  ASSERT(within_one_sample(LBB4, b, cap, 4));
  /* Too little room in all. */
  int small[4] = {100, 100, 100, 100};
  p.cap = small;
  ASSERT_EQ(hs_bal_solve(&p, b, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "hold 400 samples");
  /* Fewer samples than workers. */
  p.cap = NULL;
  p.total = 3;
  ASSERT_EQ(hs_bal_solve(&p, b, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "smaller than the 4 workers");
  /* Exactly one each: the slow worker still gets its sample. */
  p.total = 4;
  ASSERT_EQ(hs_bal_solve(&p, b, &d), 0);
  for (int i = 0; i < 4; i++) ASSERT_EQ(b[i], 1);
}

static void test_proportional(void) {
  double s[3] = {1, 2, 3};
  int b[3];
  hs_diag d = {0};
  ASSERT_EQ(hs_bal_proportional(3, 60, s, NULL, b, &d), 0);
  ASSERT_EQ(b[0], 10);
  ASSERT_EQ(b[1], 20);
  ASSERT_EQ(b[2], 30);
  /* 61: the extra sample goes where it finishes first (b/s smallest after adding). */
  ASSERT_EQ(hs_bal_proportional(3, 61, s, NULL, b, &d), 0);
  ASSERT_EQ(b[0] + b[1] + b[2], 61);
  ASSERT_EQ(b[2], 31);
  int cap[3] = {0, 0, 25};
  ASSERT_EQ(hs_bal_proportional(3, 60, s, cap, b, &d), 0);
  ASSERT_EQ(b[2], 25);
  ASSERT_EQ(b[0] + b[1], 35);
  ASSERT(abs(b[1] - 2 * b[0]) <= 2);
  s[1] = 0;
  ASSERT_EQ(hs_bal_proportional(3, 60, s, NULL, b, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "worker 1");
}

static void test_many_workers_random(void) {
  /* 300 random lines: the solve is balanced within one sample and sums to B. */
  enum { N = 300 };
  hs_bal_line l[N];
  int b[N], cap[N];
  for (int i = 0; i < N; i++) {
    uint64_t r = hs_rng_mix(7, (uint64_t)i);
    l[i].t0 = 1 + (double)(r % 1000) / 100.0;
    l[i].k = 0.1 + (double)((r >> 20) % 1000) / 200.0;
    cap[i] = (r >> 40) % 3 == 0 ? 20 : 0;
  }
  hs_diag d = {0};
  hs_bal_problem p = {.n = N, .total = 30000, .cap = cap, .time = hs_bal_line_time, .ctx = l};
  ASSERT_EQ(hs_bal_solve(&p, b, &d), 0);
  long sum = 0;
  for (int i = 0; i < N; i++) {
    sum += b[i];
    ASSERT(b[i] >= 1);
    if (cap[i]) ASSERT(b[i] <= cap[i]);
  }
  ASSERT_EQ(sum, 30000);
  ASSERT(within_one_sample(l, b, cap, N));
}

static void test_fit_line(void) {
  int b[4] = {2, 4, 8, 16};
  double t[4];
  for (int i = 0; i < 4; i++) t[i] = 0.003 + 0.00052 * b[i];
  hs_bal_line l;
  ASSERT_EQ(hs_bal_fit_line(b, t, 4, &l), 0);
  ASSERT_NEAR(l.t0, 0.003, 1e-15);
  ASSERT_NEAR(l.k, 0.00052, 1e-15);
  /* Least squares through noisy points: (1,1), (2,3), (3,2) -> t = 1 + 0.5 b. */
  int b2[3] = {1, 2, 3};
  double t2[3] = {1, 3, 2};
  ASSERT_EQ(hs_bal_fit_line(b2, t2, 3, &l), 0);
  ASSERT_NEAR(l.k, 0.5, 1e-12);
  ASSERT_NEAR(l.t0, 1.0, 1e-12);
  /* The slope's standard error: residuals -0.5, 1, -0.5 (1.5 over 1 degree of freedom),
   * sum of squares of b about its mean 2: sqrt(1.5 / 2) = 0.866, over the slope 0.5. */
  ASSERT_NEAR(hs_bal_slope_rel_error(b2, t2, 3, &l), sqrt(0.75) / 0.5, 1e-12);
  ASSERT_EQ(hs_bal_fit_line(b, t, 4, &l), 0);
  ASSERT(hs_bal_slope_rel_error(b, t, 4, &l) < 1e-9);
  ASSERT(isinf(hs_bal_slope_rel_error(b, t, 2, &l))); /* two points: nothing to judge by */
  int same[2] = {5, 5};
  ASSERT_EQ(hs_bal_fit_line(same, t, 2, &l), HS_EINVAL);
  ASSERT_EQ(hs_bal_fit_line(b, t, 1, &l), HS_EINVAL);
}

static const hs_test_case cases[] = {
    {"lbb_4gpu_static_solve", test_lbb_4gpu_static_solve},
    {"memory_limits", test_memory_limits},
    {"proportional", test_proportional},
    {"many_workers_random", test_many_workers_random},
    {"fit_line", test_fit_line},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  hs_gsl_init();
  return hs_test_main("pol_balance", cases, argc, argv);
}
