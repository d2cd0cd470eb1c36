/* Tests of the per-worker random streams. */
#include <math.h>

#include "core/core_rng.h"
#include "hs_test.h"

static void test_same_seed_same_numbers(void) {
  gsl_rng *a = hs_rng_stream(1, 3), *b = hs_rng_stream(1, 3);
  int same = 1;
  for (int i = 0; i < 1000; i++)
    if (gsl_rng_get(a) != gsl_rng_get(b)) same = 0;
  ASSERT(same);
  gsl_rng_free(a);
  gsl_rng_free(b);
}

static void test_streams_differ(void) {
  gsl_rng *a = hs_rng_stream(1, 0), *b = hs_rng_stream(1, 1), *c = hs_rng_stream(2, 0);
  int ab = 0, ac = 0;
  for (int i = 0; i < 100; i++) {
    unsigned long x = gsl_rng_get(a), y = gsl_rng_get(b), z = gsl_rng_get(c);
    ab += x == y;
    ac += x == z;
  }
  ASSERT(ab < 3);
  ASSERT(ac < 3);
  ASSERT(hs_rng_mix(1, 0) != hs_rng_mix(1, 1));
  ASSERT(hs_rng_mix(1, 0) != hs_rng_mix(0, 1));
  gsl_rng_free(a);
  gsl_rng_free(b);
  gsl_rng_free(c);
}

static void test_stream_independent_of_others(void) {
  gsl_rng *alone = hs_rng_stream(77, 5);
  unsigned long first[16];
  for (int i = 0; i < 16; i++) first[i] = gsl_rng_get(alone);
  gsl_rng *others[5];
  for (int k = 0; k < 5; k++) {
    others[k] = hs_rng_stream(77, (uint64_t)k);
    (void)gsl_rng_get(others[k]);
  }
  gsl_rng *again = hs_rng_stream(77, 5);
  int same = 1;
  for (int i = 0; i < 16; i++)
    if (gsl_rng_get(again) != first[i]) same = 0;
  ASSERT(same);
  for (int k = 0; k < 5; k++) gsl_rng_free(others[k]);
  gsl_rng_free(alone);
  gsl_rng_free(again);
}

static void test_lognormal_moments(void) {
  /* Fixed seed, so the result is deterministic; the tolerances are still ~10 standard errors
   * wide so that a change of generator would not make the test flaky. */
  const double cvs[] = {0.05, 0.2, 0.5};
  for (int c = 0; c < 3; c++) {
    gsl_rng *r = hs_rng_stream(2024, (uint64_t)c);
    const int n = 200000;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; i++) {
      double x = hs_rng_lognormal_unit(r, cvs[c]);
      sum += x;
      sum2 += x * x;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    double cv = sqrt(var) / mean;
    ASSERT_NEAR(mean, 1.0, 10.0 * cvs[c] / sqrt((double)n));
    ASSERT_REL(cv, cvs[c], 0.05);
    gsl_rng_free(r);
  }
}

static void test_cv_zero_is_one_without_drawing(void) {
  gsl_rng *a = hs_rng_stream(5, 5), *b = hs_rng_stream(5, 5);
  for (int i = 0; i < 10; i++) ASSERT(hs_rng_lognormal_unit(a, 0.0) == 1.0);
  ASSERT(gsl_rng_get(a) == gsl_rng_get(b)); /* a consumed nothing */
  ASSERT(isnan(hs_rng_lognormal_unit(a, -1.0)));
  gsl_rng_free(a);
  gsl_rng_free(b);
}

static void test_gsl_init(void) {
  hs_gsl_init();
  ASSERT(1);
}

static const hs_test_case cases[] = {
    {"same_seed_same_numbers", test_same_seed_same_numbers},
    {"streams_differ", test_streams_differ},
    {"stream_independent_of_others", test_stream_independent_of_others},
    {"lognormal_moments", test_lognormal_moments},
    {"cv_zero_is_one_without_drawing", test_cv_zero_is_one_without_drawing},
    {"gsl_init", test_gsl_init},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("rng", cases, argc, argv); }
