/* Compressor tests: bytes accounting against the wire formats, the cost model, top-k keeping the
 * k largest, error feedback conserving the gradient's sum over steps, QSGD's unbiasedness over
 * many draws, PowerSGD exact on a matrix of rank r, the registry and bad settings. */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <stdlib.h>

#include "core/core_rng.h"
#include "policies/pol_compress.h"
#include "tests/hs_test.h"

static void test_bytes_accounting(void) {
  hs_block flat = {1000, 1};
  ASSERT_NEAR(hs_compress_bytes(&hs_compressor_topk, &flat, 1, 0.1), 8.0 * 100, 0);
  ASSERT_NEAR(hs_compress_bytes(&hs_compressor_topk, &flat, 1, 1e-6), 8.0, 0); /* at least one */
  ASSERT_NEAR(hs_compress_bytes(&hs_compressor_topk, &flat, 1, 0.1234), 8.0 * 124, 0);
  /* qsgd, s = 15: 1 sign + 4 level bits; two buckets of 512 need two norms. */
  ASSERT_NEAR(hs_compress_bytes(&hs_compressor_qsgd, &flat, 1, 15), 4.0 * 2 + 625, 0);
  ASSERT_NEAR(hs_compress_bytes(&hs_compressor_qsgd, &flat, 1, 1), 4.0 * 2 + 250, 0);
  /* powersgd r = 4: a 100 x 50 layer sends P and Q, a bias and a tiny 3 x 3 go as they are. */
  hs_block layers[] = {{100, 50}, {50, 1}, {3, 3}};
  ASSERT_NEAR(hs_compress_bytes(&hs_compressor_powersgd, layers, 3, 4), 4.0 * 4 * 150 + 4.0 * 50 + 4.0 * 9, 0);
  /* Flat views and wire ratios for policies. */
  hs_block sq = hs_compress_flat_block(1e6);
  ASSERT_EQ(sq.rows, 1000);
  ASSERT_EQ(sq.cols, 1000);
  hs_block odd = hs_compress_flat_block(10);
  ASSERT(odd.rows * odd.cols >= 10);
  ASSERT_REL(hs_compress_wire_ratio(&hs_compressor_topk, 0.01), 0.02, 1e-4); /* padding of the flat view */
  ASSERT_REL(hs_compress_wire_ratio(&hs_compressor_qsgd, 7), 4.0 / 32 + 4.0 / (512 * 4), 1e-4);
}

static void test_cost_model(void) {
  hs_block flat = {1000000, 1};
  ASSERT_REL(hs_compress_seconds(&hs_compressor_topk, &flat, 1, 0.01), 1e6 * 36.0 / 484e9, 1e-12);
  ASSERT_REL(hs_compress_seconds(&hs_compressor_qsgd, &flat, 1, 4), 1e6 * 14.0 / 484e9, 1e-12);
  hs_block m = {1000, 1000};
  ASSERT_REL(hs_compress_seconds(&hs_compressor_powersgd, &m, 1, 2),
             1e6 * (32.0 / 484e9 + 12.0 / 11.3e12), 1e-12);
  /* A vector is not compressed by PowerSGD and costs nothing. */
  ASSERT_NEAR(hs_compress_seconds(&hs_compressor_powersgd, &flat, 1, 2), 0, 0);
}

static void test_topk_keeps_largest(void) {
  enum { N = 1000, K = 37 };
  float x[N], scratch[N], val[K];
  int32_t idx[K];
  gsl_rng *r = hs_rng_stream(7, 0);
  for (int i = 0; i < N; i++) x[i] = (float)gsl_ran_gaussian(r, 1.0);
  hs_topk_select(x, N, K, scratch, idx, val);
  /* Every kept entry is at least as large as every dropped one; indices ascend. */
  float min_kept = INFINITY, max_dropped = 0;
  char kept[N] = {0};
  for (int i = 0; i < K; i++) {
    ASSERT(val[i] == x[idx[i]]);
    if (i) ASSERT(idx[i] > idx[i - 1]);
    kept[idx[i]] = 1;
    if (fabsf(val[i]) < min_kept) min_kept = fabsf(val[i]);
  }
  for (int i = 0; i < N; i++)
    if (!kept[i] && fabsf(x[i]) > max_dropped) max_dropped = fabsf(x[i]);
  ASSERT(min_kept >= max_dropped);
  /* Ties at the threshold go to the lowest indices. */
  float t[6] = {1, -2, 2, 2, 0.5f, -2};
  int32_t ti[3];
  float tv[3];
  hs_topk_select(t, 6, 3, scratch, ti, tv);
  ASSERT_EQ(ti[0], 1);
  ASSERT_EQ(ti[1], 2);
  ASSERT_EQ(ti[2], 3);
  float out[6];
  hs_topk_scatter(out, 6, ti, tv, 3);
  ASSERT(out[0] == 0 && out[1] == -2 && out[2] == 2 && out[3] == 2 && out[4] == 0 && out[5] == 0);
  gsl_rng_free(r);
}

/* Error feedback: after T steps, what was sent plus the residual is what was given, for top-k
 * and PowerSGD. */
static void check_error_feedback(const hs_compressor *c, double param, const hs_block *b, int nb) {
  hs_compress_ctx *x;
  hs_diag d;
  ASSERT_EQ(hs_compress_open(&x, c, param, b, nb, 3, 1, &d), 0);
  int64_t n = hs_compress_size(x);
  double *given = calloc((size_t)n, sizeof *given), *sent = calloc((size_t)n, sizeof *sent);
  float *g = malloc((size_t)n * sizeof *g);
  gsl_rng *r = hs_rng_stream(11, 0);
  for (int step = 0; step < 20; step++) {
    for (int64_t i = 0; i < n; i++) {
      g[i] = (float)gsl_ran_gaussian(r, 1.0);
      given[i] += g[i];
    }
    ASSERT_EQ(hs_compress_roundtrip(x, g, &d), 0);
    int64_t nz = 0;
    for (int64_t i = 0; i < n; i++) {
      sent[i] += g[i];
      nz += g[i] != 0;
    }
    if (c == &hs_compressor_topk) ASSERT_EQ(nz, hs_topk_count(n, param));
  }
  const float *e = hs_compress_residual(x);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(sent[i] + e[i] - given[i]));
  ASSERT(worst < 1e-3);
  free(given);
  free(sent);
  free(g);
  gsl_rng_free(r);
  hs_compress_close(x);
}

static void test_error_feedback_sums_to_original(void) {
  hs_block flat = {500, 1};
  check_error_feedback(&hs_compressor_topk, 0.05, &flat, 1);
  hs_block layers[] = {{30, 20}, {20, 1}};
  check_error_feedback(&hs_compressor_powersgd, 2, layers, 2);
}

static void test_qsgd_unbiased(void) {
  enum { N = 8, DRAWS = 40000 };
  const float x[N] = {0.3f, -1.2f, 0.05f, 0.0f, 2.0f, -0.7f, 0.9f, -0.01f};
  const int s = 2;
  gsl_rng *r = hs_rng_stream(5, 0);
  double mean[N] = {0};
  float norm, out[N];
  int32_t lev[N];
  double nn = 0;
  for (int i = 0; i < N; i++) nn += (double)x[i] * x[i];
  for (int k = 0; k < DRAWS; k++) {
    hs_qsgd_encode(x, N, s, r, &norm, lev);
    for (int i = 0; i < N; i++) ASSERT(lev[i] >= -s && lev[i] <= s);
    hs_qsgd_decode(&norm, lev, N, s, out);
    for (int i = 0; i < N; i++) mean[i] += out[i] / (double)DRAWS;
  }
  /* Each decoded value takes one of two neighbouring levels norm/s apart, so its standard
   * deviation is at most norm/(2s); the mean of DRAWS is within 5 of those sigmas. */
  double tol = 5.0 * sqrt(nn) / (2.0 * s) / sqrt((double)DRAWS);
  for (int i = 0; i < N; i++) ASSERT_NEAR(mean[i], x[i], tol);
  ASSERT(mean[3] == 0); /* a zero is never rounded away from zero */
  gsl_rng_free(r);

  /* The roundtrip is deterministic for a seed and stream. */
  hs_block b = {N, 1};
  hs_compress_ctx *a1, *a2;
  hs_diag d;
  ASSERT_EQ(hs_compress_open(&a1, &hs_compressor_qsgd, 4, &b, 1, 9, 2, &d), 0);
  ASSERT_EQ(hs_compress_open(&a2, &hs_compressor_qsgd, 4, &b, 1, 9, 2, &d), 0);
  float g1[N], g2[N];
  memcpy(g1, x, sizeof g1);
  memcpy(g2, x, sizeof g2);
  ASSERT_EQ(hs_compress_roundtrip(a1, g1, &d), 0);
  ASSERT_EQ(hs_compress_roundtrip(a2, g2, &d), 0);
  ASSERT(!memcmp(g1, g2, sizeof g1));
  ASSERT(hs_compress_residual(a1) == NULL);
  hs_compress_close(a1);
  hs_compress_close(a2);
}

static void test_powersgd_exact_on_rank_r(void) {
  enum { ROWS = 24, COLS = 15, R = 3 };
  gsl_rng *r = hs_rng_stream(21, 0);
  double a[ROWS][R], bm[COLS][R];
  for (int i = 0; i < ROWS; i++)
    for (int j = 0; j < R; j++) a[i][j] = gsl_ran_gaussian(r, 1.0);
  for (int i = 0; i < COLS; i++)
    for (int j = 0; j < R; j++) bm[i][j] = gsl_ran_gaussian(r, 1.0);
  float m[ROWS * COLS], orig[ROWS * COLS];
  double scale = 0;
  for (int i = 0; i < ROWS; i++)
    for (int k = 0; k < COLS; k++) {
      double v = 0;
      for (int j = 0; j < R; j++) v += a[i][j] * bm[k][j];
      m[i * COLS + k] = orig[i * COLS + k] = (float)v;
      scale = fmax(scale, fabs(v));
    }
  hs_block b = {ROWS, COLS};
  hs_compress_ctx *x;
  hs_diag d;
  ASSERT_EQ(hs_compress_open(&x, &hs_compressor_powersgd, R, &b, 1, 4, 0, &d), 0);
  ASSERT_EQ(hs_compress_roundtrip(x, m, &d), 0);
  const float *e = hs_compress_residual(x);
  for (int i = 0; i < ROWS * COLS; i++) {
    ASSERT_NEAR(m[i], orig[i], 1e-4 * scale);
    ASSERT_NEAR(e[i], 0, 1e-4 * scale);
  }
  hs_compress_close(x);
  /* At rank 1 the same matrix is not reproduced, and the residual holds the difference. */
  memcpy(m, orig, sizeof m);
  ASSERT_EQ(hs_compress_open(&x, &hs_compressor_powersgd, 1, &b, 1, 4, 0, &d), 0);
  ASSERT_EQ(hs_compress_roundtrip(x, m, &d), 0);
  e = hs_compress_residual(x);
  double err = 0;
  for (int i = 0; i < ROWS * COLS; i++) {
    err = fmax(err, fabs(m[i] - orig[i]));
    ASSERT_NEAR(m[i] + e[i], orig[i], 1e-4 * scale);
  }
  ASSERT(err > 1e-2 * scale);
  hs_compress_close(x);
  gsl_rng_free(r);
}

static void test_registry_and_bad_settings(void) {
  ASSERT(hs_compressor_find("topk") == &hs_compressor_topk);
  ASSERT(hs_compressor_find("qsgd") == &hs_compressor_qsgd);
  ASSERT(hs_compressor_find("powersgd") == &hs_compressor_powersgd);
  ASSERT(hs_compressor_find("zip") == NULL);
  char names[128];
  hs_compressor_names(names, sizeof names);
  ASSERT_STR(names, "topk, qsgd, powersgd");
  int n = 0;
  for (const hs_compressor *const *c = hs_compressor_list(); *c; c++) n++;
  ASSERT_EQ(n, 3);
  hs_diag d;
  hs_block b = {10, 1};
  hs_compress_ctx *x = (hs_compress_ctx *)&d;
  ASSERT_EQ(hs_compress_open(&x, &hs_compressor_topk, 1.5, &b, 1, 1, 0, &d), HS_EINVAL);
  ASSERT(x == NULL);
  ASSERT_CONTAINS(d.msg, "density");
  ASSERT_EQ(hs_compress_open(&x, &hs_compressor_qsgd, 2.5, &b, 1, 1, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "integer");
  hs_block bad = {0, 3};
  ASSERT_EQ(hs_compress_open(&x, &hs_compressor_powersgd, 1, &bad, 1, 1, 0, &d), HS_EINVAL);
  ASSERT_EQ(hs_compress_open(&x, &hs_compressor_powersgd, 1, &b, 0, 1, 0, &d), HS_EINVAL);
}

int main(int argc, char **argv) {
  hs_gsl_init();
  static const hs_test_case cases[] = {
      {"bytes_accounting", test_bytes_accounting},
      {"cost_model", test_cost_model},
      {"topk_keeps_largest", test_topk_keeps_largest},
      {"error_feedback_sums_to_original", test_error_feedback_sums_to_original},
      {"qsgd_unbiased", test_qsgd_unbiased},
      {"powersgd_exact_on_rank_r", test_powersgd_exact_on_rank_r},
      {"registry_and_bad_settings", test_registry_and_bad_settings},
      {NULL, NULL},
  };
  return hs_test_main("compress", cases, argc, argv);
}
