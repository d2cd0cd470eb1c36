/* Calibration: the stability rule on synthetic timings, summary statistics, the store's
 * round trips (device, points, fits, comm), loading the chosen fit for the simulator, and
 * resume (a second run skips the stored points). */
#include <unistd.h>

#include "calib/cal_comm.h"
#include "calib/cal_run.h"
#include "calib/cal_store.h"
#include "core/core_perfmodel.h"
#include "core/core_rng.h"
#include "hs_test.h"

static void test_stats(void) {
  double x[] = {5, 1, 4, 2, 3};
  hs_cal_stats st;
  hs_diag d = {0};
  ASSERT_EQ(hs_cal_stats_of(x, 5, &st, &d), 0);
  ASSERT_NEAR(st.median_s, 3, 0);
  ASSERT_NEAR(st.p10_s, 1.4, 1e-12);
  ASSERT_NEAR(st.p90_s, 4.6, 1e-12);
  ASSERT_EQ(st.count, 5);
  ASSERT_EQ(hs_cal_stats_of(x, 0, &st, &d), HS_EINVAL);
}

static void test_stability_rule(void) {
  hs_cal_rule r = {.min_reps = 4, .max_reps = 10, .rel_tol = 0.01};
  hs_diag d = {0};
  double flat[] = {1.0, 1.0, 1.0, 1.0, 1.0};
  ASSERT_EQ(hs_cal_stable(flat, 3, &r, &d), 0); /* below min_reps */
  ASSERT_EQ(hs_cal_stable(flat, 4, &r, &d), 1);
  /* A drifting series keeps moving its median by 10% per step: never stable before max. */
  double drift[10];
  for (int i = 0; i < 10; i++) drift[i] = 1.0 + 0.1 * i;
  for (int n = 4; n < 10; n++) ASSERT_EQ(hs_cal_stable(drift, n, &r, &d), 0);
  ASSERT_EQ(hs_cal_stable(drift, 10, &r, &d), 1); /* max_reps */
  /* One outlier at the end does not move the median of a settled series. */
  double outlier[] = {1.0, 1.002, 0.999, 1.001, 1.0, 5.0};
  ASSERT_EQ(hs_cal_stable(outlier, 6, &r, &d), 1);
  /* Noisy start, then settled. */
  double settle[] = {2.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0};
  ASSERT_EQ(hs_cal_stable(settle, 4, &r, &d), 0);
  ASSERT_EQ(hs_cal_stable(settle, 7, &r, &d), 1);
  hs_cal_rule badr = {.min_reps = 5, .max_reps = 2, .rel_tol = 0.01};
  ASSERT_EQ(hs_cal_stable(flat, 5, &badr, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "--max-reps");
}

static void test_device_parse(void) {
  hs_cal_device dev;
  hs_diag d = {0};
  ASSERT_EQ(hs_cal_device_parse("cpu", &dev, &d), 0);
  ASSERT_STR(dev.kind, "cpu");
  ASSERT_EQ(dev.ordinal, -1);
  ASSERT_EQ(hs_cal_device_parse("cuda:1/sm=32", &dev, &d), 0);
  ASSERT_STR(dev.kind, "cuda");
  ASSERT_EQ(dev.ordinal, 1);
  ASSERT_EQ(dev.sm_partition, 32);
  const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:0/sm=", "cuda:0/sm=0", "cuda:0/x=3", "cpu0", "cuda:-1"};
  for (int i = 0; i < 8; i++) {
    ASSERT_EQ(hs_cal_device_parse(bad[i], &dev, &d), HS_EINVAL);
    ASSERT_CONTAINS(d.msg, "expected cpu, cuda:I or cuda:I/sm=N");
  }
  ASSERT_EQ(hs_cal_device_parse("cpu", &dev, &d), 0);
  ASSERT_EQ(hs_cal_device_discover(&dev, &d), 0);
  ASSERT(dev.sm_count > 0);
  ASSERT(dev.memory_bytes > 0);
  ASSERT_CONTAINS(dev.blas, "OpenBLAS");
}

static hs_store *fresh_store(char *path, size_t n) {
  snprintf(path, n, "/tmp/hs-test-calib-%d.db", (int)getpid());
  unlink(path);
  char side[600];
  snprintf(side, sizeof side, "%s-wal", path), unlink(side);
  snprintf(side, sizeof side, "%s-shm", path), unlink(side);
  hs_store *s = NULL;
  hs_diag d = {0};
  if (hs_store_open(&s, path, 0, &d)) fprintf(stderr, "%s\n", d.msg);
  return s;
}

static void drop_store(hs_store *s, const char *path) {
  hs_store_close(s);
  unlink(path);
  char side[600];
  snprintf(side, sizeof side, "%s-wal", path), unlink(side);
  snprintf(side, sizeof side, "%s-shm", path), unlink(side);
}

static void test_store_roundtrip(void) {
  char path[512];
  hs_store *s = fresh_store(path, sizeof path);
  ASSERT(s != NULL);
  if (!s) return;
  hs_diag d = {0};
  hs_cal_device dev;
  hs_cal_device_parse("cpu", &dev, &d);
  snprintf(dev.name, sizeof dev.name, "test cpu");
  snprintf(dev.host, sizeof dev.host, "h");
  int64_t id = 0, id2 = 0;
  ASSERT_EQ(hs_cal_store_device(s, &dev, &id, &d), 0);
  ASSERT_EQ(hs_cal_store_device(s, &dev, &id2, &d), 0);
  ASSERT_EQ(id, id2); /* reused */
  ASSERT_EQ(hs_cal_store_model(s, "mlp", &d), 0);
  ASSERT_EQ(hs_cal_store_model(s, "mlp", &d), 0);
  ASSERT_EQ(hs_cal_store_model(s, "nosuch", &d), HS_EINVAL);

  /* Points from a known linear model: t = 1 ms + 0.1 ms * b. */
  const int batches[] = {8, 16, 32, 64};
  for (int i = 0; i < 4; i++) {
    hs_cal_stats st[HS_CAL_PHASES];
    for (int p = 0; p < HS_CAL_PHASES; p++) {
      double t = (1e-3 + 1e-4 * batches[i]) * (p == HS_CAL_STEP ? 1.0 : 0.3);
      st[p] = (hs_cal_stats){.median_s = t, .p10_s = t * 0.9, .p90_s = t * 1.1, .count = 5};
    }
    ASSERT_EQ(hs_cal_store_point(s, id, "mlp", batches[i], st, &d), 0);
  }
  int stored = 0;
  ASSERT_EQ(hs_cal_point_stored(s, id, "mlp", 16, &stored, &d), 0);
  ASSERT_EQ(stored, 1);
  ASSERT_EQ(hs_cal_point_stored(s, id, "mlp", 128, &stored, &d), 0);
  ASSERT_EQ(stored, 0);
  double *b = NULL, *t = NULL;
  int n = 0;
  ASSERT_EQ(hs_cal_load_samples(s, id, "mlp", HS_CAL_STEP, &b, &t, &n, &d), 0);
  ASSERT_EQ(n, 4);
  hs_fit_set fs;
  if (n == 4) {
    ASSERT_NEAR(b[3], 64, 0);
    ASSERT_REL(t[3], 1e-3 + 64e-4, 1e-12);
    ASSERT_EQ(hs_fit_select(b, t, n, &fs, &d), 0);
    ASSERT_EQ(fs.chosen, HS_PERF_LINEAR);
    ASSERT_EQ(hs_cal_store_fits(s, id, "mlp", HS_CAL_STEP, &fs, 64, &d), 0);
    ASSERT_EQ(hs_cal_store_fits(s, id, "mlp", HS_CAL_STEP, &fs, 64, &d), 0); /* replaces */
  }
  free(b);
  free(t);

  /* The simulator's side: by name and by id; unknown device and model list the database. */
  hs_perf_model m;
  int64_t got = 0;
  ASSERT_EQ(hs_perf_load(s, "test cpu", "mlp", &m, &got, &d), 0);
  ASSERT_EQ(got, id);
  ASSERT_EQ(m.form, HS_PERF_LINEAR);
  ASSERT_EQ(m.max_batch, 64);
  ASSERT_REL(hs_perf_eval(&m, 100), 1e-3 + 1e-2, 1e-9);
  char idstr[32];
  snprintf(idstr, sizeof idstr, "%lld", (long long)id);
  ASSERT_EQ(hs_perf_load(s, idstr, "mlp", &m, NULL, &d), 0);
  ASSERT_EQ(hs_perf_load(s, "other", "mlp", &m, NULL, &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "\"test cpu\" (id 1: mlp)");
  ASSERT_EQ(hs_perf_load(s, "test cpu", "cnn", &m, NULL, &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "no calibrated step model for cnn");

  /* Communication rows. */
  hs_comm_key k = {.device = id, .backend = "cpu", .op = "allreduce", .world_size = 2};
  for (int i = 0; i < 3; i++) {
    double bytes = 4096.0 * (1 << (2 * i));
    hs_cal_stats st = {.median_s = 1e-5 + bytes / 1e9, .p10_s = NAN, .p90_s = NAN, .count = 3};
    ASSERT_EQ(hs_cal_store_comm_sample(s, &k, (int64_t)bytes, &st, &d), 0);
  }
  ASSERT_EQ(hs_cal_comm_stored(s, &k, 16384, &stored, &d), 0);
  ASSERT_EQ(stored, 1);
  ASSERT_EQ(hs_cal_load_comm(s, &k, &b, &t, &n, &d), 0);
  ASSERT_EQ(n, 3);
  double a = 0, beta = 0, r2 = 0;
  ASSERT_EQ(hs_fit_comm(b, t, n, &a, &beta, &r2, &d), 0);
  free(b);
  free(t);
  ASSERT_REL(beta, 1e9, 1e-6);
  ASSERT_EQ(hs_cal_store_comm_model(s, &k, a, beta, r2, &d), 0);
  ASSERT_EQ(hs_cal_forget(s, id, "mlp", &d), 0);
  ASSERT_EQ(hs_cal_point_stored(s, id, "mlp", 16, &stored, &d), 0);
  ASSERT_EQ(stored, 0);
  drop_store(s, path);
}

/* A real (tiny) sweep on the cpu backend, then the same again: everything is skipped. */
static void test_resume_skips_stored_points(void) {
  char path[512];
  hs_store *s = fresh_store(path, sizeof path);
  ASSERT(s != NULL);
  if (!s) return;
  hs_diag d = {0};
  hs_cal_device dev;
  hs_cal_device_parse("cpu", &dev, &d);
  ASSERT_EQ(hs_cal_device_discover(&dev, &d), 0);
  const char *models[] = {"mlp"};
  const int batches[] = {2, 4, 8};
  hs_cal_opts o = {.models = models, .n_models = 1, .batches = batches, .n_batches = 3,
                   .rule = {.min_reps = 3, .max_reps = 3, .rel_tol = 0.5}, .warmup = 0, .seed = 1};
  hs_cal_result r;
  int rc = hs_cal_run(s, &dev, &o, &r, &d);
  ASSERT_EQ(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", d.msg);
  if (!rc) {
    ASSERT_EQ(r.models[0].measured, 3);
    ASSERT_EQ(r.models[0].skipped, 0);
    ASSERT(r.models[0].fitted[HS_CAL_STEP]);
    ASSERT_CONTAINS(r.comm_note, "--no-comm");
  }
  hs_cal_result_free(&r);
  rc = hs_cal_run(s, &dev, &o, &r, &d);
  ASSERT_EQ(rc, 0);
  if (!rc) {
    ASSERT_EQ(r.models[0].measured, 0);
    ASSERT_EQ(r.models[0].skipped, 3);
    ASSERT(r.models[0].fitted[HS_CAL_STEP]);
  }
  hs_cal_result_free(&r);
  /* An interrupt before the first repetition keeps nothing new and says so. */
  volatile sig_atomic_t stop = 1;
  const int more[] = {2, 4, 8, 16};
  o.batches = more, o.n_batches = 4, o.stop = &stop;
  ASSERT_EQ(hs_cal_run(s, &dev, &o, &r, &d), HS_EINTR);
  ASSERT_CONTAINS(d.msg, "interrupted");
  hs_cal_result_free(&r);
  int stored = 1;
  ASSERT_EQ(hs_cal_point_stored(s, r.device_id ? r.device_id : 1, "mlp", 16, &stored, &d), 0);
  ASSERT_EQ(stored, 0);
  drop_store(s, path);
}

static void test_comm_timing(void) {
  hs_cal_comm_opts o = {.rule = {.min_reps = 2, .max_reps = 3, .rel_tol = 0.5}, .warmup = 1};
  hs_cal_stats st;
  hs_diag d = {0};
  ASSERT_EQ(hs_cal_time_allreduce(3, 65536, &o, &st, &d), 0);
  ASSERT(st.median_s > 0);
  ASSERT(st.count >= 2 && st.count <= 3);
  ASSERT_EQ(hs_cal_time_p2p(65536, &o, &st, &d), 0);
  ASSERT(st.median_s > 0);
  ASSERT_EQ(hs_cal_time_allreduce(1, 65536, &o, &st, &d), HS_EINVAL);
}

int main(int argc, char **argv) {
  hs_gsl_init();
  static const hs_test_case cases[] = {
      {"stats", test_stats},
      {"stability_rule", test_stability_rule},
      {"device_parse", test_device_parse},
      {"store_roundtrip", test_store_roundtrip},
      {"resume_skips_stored_points", test_resume_skips_stored_points},
      {"comm_timing", test_comm_timing},
      {NULL, NULL},
  };
  return hs_test_main("calib", cases, argc, argv);
}
