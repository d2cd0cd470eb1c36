/* Tests of the per-worker random streams. */
#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* The inline stream gives exactly the GSL stream's numbers: raw words, uniforms and lognormal
 * factors (their rejection loop included), over many seeds and streams, each compared bit for
 * bit, interleaved as a simulator would draw them. */
static void test_inline_stream_is_gsl_stream(void) {
  static const uint64_t seeds[] = {0, 1, 2, 42, 2024, 0xffffffffULL, 0x9E3779B97F4A7C15ULL,
                                   UINT64_MAX};
  static const double cvs[] = {0.0, 1e-6, 0.05, 0.2, 1.0, 3.0, 100.0};
  long compared = 0, mismatched = 0;
  for (size_t si = 0; si < sizeof seeds / sizeof seeds[0]; si++) {
    for (uint64_t k = 0; k < 300; k += (k < 20 ? 1 : 37)) {
      /* 28 streams, the last one UINT64_MAX. */
      uint64_t stream = k == 279 ? UINT64_MAX : k * 1000003ULL;
      gsl_rng *g = hs_rng_stream(seeds[si], stream);
      hs_rng r;
      hs_rng_init(&r, seeds[si], stream);
      for (int i = 0; i < 2000; i++) {
        switch (i % 3) {
        case 0:
          mismatched += gsl_rng_get(g) != (unsigned long)hs_rng_get(&r);
          break;
        case 1:
          mismatched += gsl_rng_uniform(g) != hs_rng_uniform(&r);
          break;
        default: {
          double cv = cvs[(size_t)i % (sizeof cvs / sizeof cvs[0])];
          double a = hs_rng_lognormal_unit(g, cv), b = hs_rng_lognormal(&r, cv);
          mismatched += memcmp(&a, &b, sizeof a) != 0;
        }
        }
        compared++;
      }
      gsl_rng_free(g);
    }
  }
  ASSERT_EQ(mismatched, 0);
  ASSERT(compared > 300000);
  /* And as hs_rng_lognormal_unit: cv 0 draws nothing, a negative cv is NaN. */
  hs_rng a, b;
  hs_rng_init(&a, 5, 5);
  hs_rng_init(&b, 5, 5);
  ASSERT(hs_rng_lognormal(&a, 0.0) == 1.0);
  ASSERT(isnan(hs_rng_lognormal(&a, -1.0)));
  ASSERT_EQ(hs_rng_get(&a), hs_rng_get(&b));
  ASSERT_EQ(sizeof(hs_rng), 12);
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
    {"inline_stream_is_gsl_stream", test_inline_stream_is_gsl_stream},
    {"gsl_init", test_gsl_init},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("rng", cases, argc, argv); }
