/* Calibration: the stopping rule (the median's confidence interval), bimodality, the
 * interleaved sweep's order and its robustness on a simulated machine with a slow period and
 * preemptions, summary statistics, the store's
 * round trips (device, points, fits, comm), loading the chosen fit for the simulator, and
 * resume (a second run skips the stored points). */
#include <gsl/gsl_randist.h>
#include <math.h>
#include <unistd.h>

#include "calib/cal_comm.h"
#include "calib/cal_device.h"
#include "calib/cal_run.h"
#include "calib/cal_store.h"
#include "core/core_perfmodel.h"
#include "core/core_rng.h"
#include "real/real_launch.h"
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

static void test_median_ci(void) {
  /* Ranks of the 95% interval: none below 6 samples; [x(1), x(6)] at 6, [x(2), x(9)] at 10
   * (P(B <= 1) = 11/1024 <= 2.5% < P(B <= 2) = 56/1024), [x(6), x(15)] at 20. */
  double x[20];
  for (int i = 0; i < 20; i++) x[i] = (double)((i * 7) % 20 + 1); /* 1..20, shuffled */
  double med, lo, hi;
  hs_diag d = {0};
  ASSERT_EQ(hs_cal_median_ci(x, 5, 0.95, &med, &lo, &hi, &d), 0);
  double six[] = {6, 1, 5, 2, 4, 3};
  ASSERT_EQ(hs_cal_median_ci(six, 6, 0.95, &med, &lo, &hi, &d), 1);
  ASSERT_NEAR(med, 3.5, 0);
  ASSERT_NEAR(lo, 1, 0);
  ASSERT_NEAR(hi, 6, 0);
  double ten[] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  ASSERT_EQ(hs_cal_median_ci(ten, 10, 0.95, &med, &lo, &hi, &d), 1);
  ASSERT_NEAR(lo, 2, 0);
  ASSERT_NEAR(hi, 9, 0);
  ASSERT_EQ(hs_cal_median_ci(x, 20, 0.95, &med, &lo, &hi, &d), 1);
  ASSERT_NEAR(med, 10.5, 0);
  ASSERT_NEAR(lo, 6, 0);
  ASSERT_NEAR(hi, 15, 0);
  ASSERT_EQ(hs_cal_median_ci(x, 0, 0.95, &med, &lo, &hi, &d), HS_EINVAL);
}

static void test_stability_rule(void) {
  hs_cal_rule r = {.min_reps = 4, .max_reps = 30, .rel_tol = 0.01};
  hs_diag d = {0};
  double flat[] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
  ASSERT_EQ(hs_cal_stable(flat, 3, &r, &d), 0); /* below min_reps */
  ASSERT_EQ(hs_cal_stable(flat, 5, &r, &d), 0); /* no 95% interval of the median yet */
  ASSERT_EQ(hs_cal_stable(flat, 6, &r, &d), 1);
  /* A drifting series: the interval keeps spanning more than +-1%, never stable before max. */
  double drift[30];
  for (int i = 0; i < 30; i++) drift[i] = 1.0 + 0.01 * i;
  for (int n = 4; n < 30; n++) ASSERT_EQ(hs_cal_stable(drift, n, &r, &d), 0);
  ASSERT_EQ(hs_cal_stable(drift, 30, &r, &d), 1); /* max_reps */
  /* Outliers beyond the interval's order statistics do not keep a settled series going... */
  double outlier[] = {1.0, 1.002, 0.999, 1.001, 1.0, 5.0, 1.0, 0.2, 1.003, 0.998};
  ASSERT_EQ(hs_cal_stable(outlier, 10, &r, &d), 1);
  /* ...but at 6 samples the interval is [min, max], so one outlier does. */
  ASSERT_EQ(hs_cal_stable(outlier, 6, &r, &d), 0);
  /* Wide scatter (+-5%) needs many samples: not stable at 10. */
  double wide[] = {1.0, 1.05, 0.95, 1.04, 0.96, 1.03, 0.97, 1.02, 0.98, 1.01};
  ASSERT_EQ(hs_cal_stable(wide, 10, &r, &d), 0);
  hs_cal_rule badr = {.min_reps = 5, .max_reps = 2, .rel_tol = 0.01};
  ASSERT_EQ(hs_cal_stable(flat, 5, &badr, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "--max-reps");
}

static void test_bimodal(void) {
  hs_diag d = {0};
  /* Half the samples 30% slower (a slow period of the machine): two modes. */
  double two[] = {1.0, 1.3, 1.01, 1.31, 0.99, 1.29, 1.0, 1.3, 1.01, 1.3, 1.0, 1.31};
  ASSERT_EQ(hs_cal_bimodal(two, 12, 0.02, &d), 1);
  ASSERT_EQ(hs_cal_bimodal(two, 7, 0.02, &d), 0); /* too few samples to tell */
  /* Evenly spread, one mode. */
  double even[12];
  for (int i = 0; i < 12; i++) even[i] = 1.0 + 0.01 * i;
  ASSERT_EQ(hs_cal_bimodal(even, 12, 0.02, &d), 0);
  /* Two modes 3% apart: not worth measuring again (under max(2 rel_tol, 5%)). */
  double close[12];
  for (int i = 0; i < 12; i++) close[i] = i % 2 ? 1.03 : 1.0;
  ASSERT_EQ(hs_cal_bimodal(close, 12, 0.02, &d), 0);
  /* Two outliers are not a mode (a group needs a quarter of the samples). */
  double outl[] = {1.0, 1.0, 1.01, 0.99, 1.0, 2.0, 1.0, 1.01, 0.99, 1.0, 3.0, 1.0};
  ASSERT_EQ(hs_cal_bimodal(outl, 12, 0.02, &d), 0);
}

/* The interleaved order: passes over the points, HS_CAL_CHUNK samples per visit, the first
 * visit of each point flagged; dropped points are not visited again. */
static void test_sweep_order(void) {
  hs_cal_rule r = {.min_reps = 5, .max_reps = 5, .rel_tol = 0.01};
  hs_cal_sweep s;
  hs_diag d = {0};
  ASSERT_EQ(HS_CAL_CHUNK, 2);
  ASSERT_EQ(hs_cal_sweep_init(&s, 3, 2, 1, &r, &d), 0);
  const int want[][3] = {{0, 2, 1}, {1, 2, 1}, {2, 2, 1}, {0, 2, 0}, {1, 2, 0}, {2, 2, 0},
                         {0, 1, 0}, {1, 1, 0}, {2, 1, 0}};
  int point, count, first, v = 0;
  while (hs_cal_sweep_next(&s, &point, &count, &first)) {
    ASSERT(v < 9);
    if (v >= 9) break;
    ASSERT_EQ(point, want[v][0]);
    ASSERT_EQ(count, want[v][1]);
    ASSERT_EQ(first, want[v][2]);
    for (int k = 0; k < count; k++) {
      double t[2] = {0.5 * (point + 1), point + 1.0};
      ASSERT_EQ(hs_cal_sweep_add(&s, point, t, &d), 0);
    }
    ASSERT_EQ(hs_cal_sweep_judge(&s, point, &d), v >= 6); /* done at max_reps */
    v++;
  }
  ASSERT_EQ(v, 9);
  hs_cal_stats st[2];
  ASSERT_EQ(hs_cal_sweep_stats(&s, 2, st, &d), 0);
  ASSERT_NEAR(st[1].median_s, 3, 0);
  ASSERT_NEAR(st[0].median_s, 1.5, 0);
  ASSERT_EQ(st[1].count, 5);
  ASSERT_NEAR(hs_cal_sweep_progress(&s), 3, 0);
  hs_cal_sweep_free(&s);

  /* Dropping point 1 in the first pass drops 2 as well; 0 carries on alone. */
  ASSERT_EQ(hs_cal_sweep_init(&s, 3, 1, 0, &r, &d), 0);
  int seen[3] = {0};
  while (hs_cal_sweep_next(&s, &point, &count, &first)) {
    seen[point]++;
    if (point == 1) {
      hs_cal_sweep_drop(&s, 1);
      continue;
    }
    double t = 1;
    for (int k = 0; k < count; k++) ASSERT_EQ(hs_cal_sweep_add(&s, point, &t, &d), 0);
    ASSERT(hs_cal_sweep_judge(&s, point, &d) >= 0);
  }
  ASSERT_EQ(seen[0], 3);
  ASSERT_EQ(seen[1], 1);
  ASSERT_EQ(seen[2], 0);
  double t = 1;
  ASSERT_EQ(hs_cal_sweep_add(&s, 2, &t, &d), HS_EINVAL);
  hs_cal_sweep_free(&s);
}

/* A point whose samples are bimodal is measured again, at most HS_CAL_REMEASURE times. */
static void test_sweep_remeasures_bimodal(void) {
  hs_cal_rule r = {.min_reps = 10, .max_reps = 10, .rel_tol = 0.02};
  hs_cal_sweep s;
  hs_diag d = {0};
  ASSERT_EQ(hs_cal_sweep_init(&s, 1, 1, 0, &r, &d), 0);
  int point, count, first, rounds = 0, done = 0, i = 0;
  while (!done && hs_cal_sweep_next(&s, &point, &count, &first)) {
    for (int k = 0; k < count; k++, i++) {
      double t = i % 2 ? 1.5 : 1.0; /* every other sample in a slow period */
      ASSERT_EQ(hs_cal_sweep_add(&s, point, &t, &d), 0);
    }
    if (s.reps[0] == 10) rounds++;
    done = hs_cal_sweep_judge(&s, point, &d);
    ASSERT(done >= 0);
  }
  ASSERT_EQ(done, 1);
  ASSERT_EQ(rounds, 1 + HS_CAL_REMEASURE);
  ASSERT_EQ(s.remeasured[0], HS_CAL_REMEASURE);
  hs_cal_sweep_free(&s);
}

/* A simulated machine: the step time of batch b is t0 + k b with 1% noise, 5% of the samples
 * preempted (x3), and everything 1.6x slower for a stretch of wall time (a frequency change,
 * another job) during 30%..60% of the sweep. The interleaved sweep recovers t0 and k; timing
 * one batch size after the other does not (that is what the interleaving is for). */
typedef struct sim_machine {
  double clock, slow_from, slow_to;
  gsl_rng *r;
} sim_machine;

static const double SIM_T0 = 1e-3, SIM_K = 1e-4;
static const int sim_batches[] = {4, 8, 16, 24, 32, 48, 64, 96};
enum { SIM_N = 8, SIM_REPS = 20 };

static double sim_step(sim_machine *m, int point) {
  double t = (SIM_T0 + SIM_K * sim_batches[point]) * (1 + 0.01 * gsl_ran_gaussian(m->r, 1));
  if (m->clock >= m->slow_from && m->clock < m->slow_to) t *= 1.6;
  if (gsl_rng_uniform(m->r) < 0.05) t *= 3;
  m->clock += t;
  return t;
}

static void sim_machine_init(sim_machine *m, uint64_t seed) {
  double total = 0;
  for (int i = 0; i < SIM_N; i++) total += SIM_REPS * (SIM_T0 + SIM_K * sim_batches[i]);
  *m = (sim_machine){.slow_from = 0.3 * total, .slow_to = 0.6 * total, .r = hs_rng_stream(seed, 7)};
}

/* Worst relative error of the linear fit of the medians against the true line. */
static double sim_fit_error(const double *median, hs_perf_model *fit) {
  double b[SIM_N];
  for (int i = 0; i < SIM_N; i++) b[i] = sim_batches[i];
  hs_diag d = {0};
  if (hs_fit_form(HS_PERF_LINEAR, b, median, SIM_N, fit, NULL, &d)) return INFINITY;
  double worst = 0;
  for (int i = 0; i < SIM_N; i++) {
    double truth = SIM_T0 + SIM_K * b[i];
    worst = fmax(worst, fabs(median[i] - truth) / truth);
  }
  return worst;
}

static void test_sweep_slow_period(void) {
  hs_cal_rule r = {.min_reps = SIM_REPS, .max_reps = SIM_REPS, .rel_tol = 0.02};
  hs_diag d = {0};
  for (uint64_t seed = 1; seed <= 3; seed++) {
    sim_machine m;
    sim_machine_init(&m, seed);
    hs_cal_sweep s;
    double med[SIM_N] = {0};
    ASSERT_EQ(hs_cal_sweep_init(&s, SIM_N, 1, 0, &r, &d), 0);
    int point, count, first;
    while (hs_cal_sweep_next(&s, &point, &count, &first)) {
      for (int k = 0; k < count; k++) {
        double t = sim_step(&m, point);
        ASSERT_EQ(hs_cal_sweep_add(&s, point, &t, &d), 0);
      }
      int done = hs_cal_sweep_judge(&s, point, &d);
      ASSERT(done >= 0);
      hs_cal_stats st;
      if (done == 1 && !hs_cal_sweep_stats(&s, point, &st, &d)) med[point] = st.median_s;
    }
    hs_cal_sweep_free(&s);
    hs_perf_model fit;
    double err = sim_fit_error(med, &fit);
    if (!(err < 0.03)) HS_FAIL_AT("seed %llu: interleaved medians off by %.1f%%", (unsigned long long)seed, err * 100);
    ASSERT_REL(fit.p[0], SIM_T0, 0.05);
    ASSERT_REL(fit.p[1], SIM_K, 0.03);
    gsl_rng_free(m.r);

    /* The same machine timed one batch size after the other. */
    sim_machine_init(&m, seed);
    for (int i = 0; i < SIM_N; i++) {
      double x[SIM_REPS];
      int n = 0;
      do x[n] = sim_step(&m, i), n++;
      while (!hs_cal_stable(x, n, &r, &d));
      hs_cal_stats st;
      ASSERT_EQ(hs_cal_stats_of(x, n, &st, &d), 0);
      med[i] = st.median_s;
    }
    gsl_rng_free(m.r);
    err = sim_fit_error(med, &fit);
    if (!(err > 0.2)) HS_FAIL_AT("seed %llu: sequential medians only %.1f%% off: the slow period missed", (unsigned long long)seed, err * 100);
  }
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
  hs_test_unlink_db(path);
  hs_store *s = NULL;
  hs_diag d = {0};
  if (hs_store_open(&s, path, 0, &d)) fprintf(stderr, "%s\n", d.msg);
  return s;
}

static void drop_store(hs_store *s, const char *path) {
  hs_store_close(s);
  hs_test_unlink_db(path);
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
  ASSERT_EQ(m.n_points, 4);
  /* A batch the kernels tile badly, measured after the fit: at exactly that batch the
   * measurement, beside it and between batches the fit. */
  hs_cal_stats odd[HS_CAL_PHASES];
  for (int p = 0; p < HS_CAL_PHASES; p++) odd[p] = (hs_cal_stats){.median_s = 2e-2, .p10_s = NAN, .p90_s = NAN, .count = 5};
  ASSERT_EQ(hs_cal_store_point(s, id, "mlp", 63, odd, &d), 0);
  ASSERT_EQ(hs_perf_load(s, "test cpu", "mlp", &m, NULL, &d), 0);
  ASSERT_EQ(m.n_points, 5);
  ASSERT_REL(hs_perf_eval(&m, 63), 2e-2, 1e-12);
  ASSERT_REL(hs_perf_eval(&m, 62), 1e-3 + 62e-4, 1e-9);
  ASSERT_REL(hs_perf_eval(&m, 63.5), 1e-3 + 63.5e-4, 1e-9);
  ASSERT_REL(hs_perf_eval(&m, 64), 1e-3 + 64e-4, 1e-9);
  ASSERT_REL(hs_perf_eval(&m, 8), 1e-3 + 8e-4, 1e-9);
  m.n_points = 0;
  ASSERT_REL(hs_perf_eval(&m, 63), 1e-3 + 63e-4, 1e-9);
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

/* The hand-off latency: one sample per wake-up, positive (a woken thread runs after the signal
 * that woke it) and below a second; pinned and not; an interrupt and a bad rule say so. */
static void test_wake_timing(void) {
  for (int no_pin = 0; no_pin < 2; no_pin++) {
    hs_cal_comm_opts o = {.rule = {.min_reps = 5, .max_reps = 8, .rel_tol = 0.01}, .warmup = 2, .no_pin = no_pin};
    hs_cal_stats st = {0};
    hs_diag d = {0};
    ASSERT_EQ(hs_cal_time_wake(&o, &st, &d), 0);
    ASSERT(st.count >= 5 && st.count <= 8);
    ASSERT(st.p10_s > 0 && st.p10_s <= st.median_s && st.median_s <= st.p90_s && st.p90_s < 1);
  }
  volatile sig_atomic_t stop = 1;
  hs_cal_comm_opts o = {.rule = {.min_reps = 5, .max_reps = 8, .rel_tol = 0.01}, .stop = &stop};
  hs_cal_stats st;
  hs_diag d = {0};
  ASSERT_EQ(hs_cal_time_wake(&o, &st, &d), HS_EINTR);
  ASSERT_CONTAINS(d.msg, "interrupted");
  o = (hs_cal_comm_opts){.rule = {.min_reps = 5, .max_reps = 2, .rel_tol = 0.01}};
  ASSERT_EQ(hs_cal_time_wake(&o, &st, &d), HS_EINVAL);
}

/* The name of a calibration of N concurrent workers, as calib stores it and validate finds it. */
static void test_shared_name(void) {
  char buf[256], longname[300];
  ASSERT_STR(hs_cal_device_shared_name(buf, sizeof buf, "Intel(R) Xeon(R) Processor", 3),
             "Intel(R) Xeon(R) Processor (3 workers)");
  memset(longname, 'x', 299);
  longname[299] = 0;
  ASSERT_EQ((long)strlen(hs_cal_device_shared_name(buf, sizeof buf, longname, 2)), 255L);
  char small[8];
  ASSERT_STR(hs_cal_device_shared_name(small, sizeof small, "gpu", 12), "gpu (12");
}

/* hetsim real --calib with workers on devices of their own: each type with a device of its own
 * is predicted by that device's calibration, the others by --device's (NULL); a device the
 * store has not calibrated for the model is refused naming the type and the device. */
static void test_worker_perf(void) {
  char path[512];
  hs_store *s = fresh_store(path, sizeof path);
  ASSERT(s != NULL);
  if (!s) return;
  hs_diag d = {0};
  const char *names[2] = {"gpu (16 SMs)", "gpu (64 SMs)"};
  const double per[2] = {4e-4, 1e-4}; /* s per sample: the small partition 4x slower */
  ASSERT_EQ(hs_cal_store_model(s, "mlp", &d), 0);
  for (int k = 0; k < 2; k++) {
    hs_cal_device dev;
    hs_cal_device_parse("cpu", &dev, &d);
    snprintf(dev.name, sizeof dev.name, "%s", names[k]);
    snprintf(dev.host, sizeof dev.host, "h");
    int64_t id = 0;
    ASSERT_EQ(hs_cal_store_device(s, &dev, &id, &d), 0);
    const int batches[] = {8, 16, 32, 64};
    double b[4], t[4];
    for (int i = 0; i < 4; i++) {
      hs_cal_stats st[HS_CAL_PHASES];
      for (int p = 0; p < HS_CAL_PHASES; p++) {
        double v = 1e-3 + per[k] * batches[i];
        st[p] = (hs_cal_stats){.median_s = v, .p10_s = v * 0.9, .p90_s = v * 1.1, .count = 5};
      }
      ASSERT_EQ(hs_cal_store_point(s, id, "mlp", batches[i], st, &d), 0);
      b[i] = batches[i];
      t[i] = 1e-3 + per[k] * batches[i];
    }
    hs_fit_set fs;
    ASSERT_EQ(hs_fit_select(b, t, 4, &fs, &d), 0);
    ASSERT_EQ(hs_cal_store_fits(s, id, "mlp", HS_CAL_STEP, &fs, 64, &d), 0);
  }
  static const char yaml[] =
      "name: parts\n"
      "device_types:\n"
      "  small: {compute: {t0: 1ms, per_sample: 0.4ms}, real_device: cuda:0/sm=16}\n"
      "  big: {compute: {t0: 1ms, per_sample: 0.1ms}, real_device: cuda:0/sm=64}\n"
      "  plain: {compute: {t0: 1ms, per_sample: 0.2ms}}\n"
      "network: {bandwidth: 10Gbps, latency: 20us}\n"
      "nodes:\n"
      "  - name: n0\n"
      "    devices: [{type: small}, {type: big, count: 2}, {type: plain}]\n";
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  ASSERT_EQ(hs_cluster_parse(&spec, "parts.yaml", yaml, sizeof yaml - 1, &d), 0);
  hs_real_options ro;
  memset(&ro, 0, sizeof ro);
  ro.n_type_devices = 2;
  snprintf(ro.type_devices[0].type, sizeof ro.type_devices[0].type, "small");
  snprintf(ro.type_devices[0].device, sizeof ro.type_devices[0].device, "cuda:0/sm=16");
  snprintf(ro.type_devices[0].device_name, sizeof ro.type_devices[0].device_name, "%s", names[0]);
  snprintf(ro.type_devices[1].type, sizeof ro.type_devices[1].type, "big");
  snprintf(ro.type_devices[1].device, sizeof ro.type_devices[1].device, "cuda:0/sm=64");
  snprintf(ro.type_devices[1].device_name, sizeof ro.type_devices[1].device_name, "%s", names[1]);
  hs_perf_model *models = calloc(HS_REAL_MAX_TYPE_DEVICES, sizeof *models);
  const hs_perf_model *out[4] = {0};
  ASSERT_EQ(spec.n_workers, 4);
  if (models && spec.n_workers == 4) {
    ASSERT_EQ(hs_real_plan_worker_perf(&spec, &ro, s, "mlp", models, out, &d), 0);
    int small = 0, big = 0, plain = 0;
    for (int w = 0; w < 4; w++) {
      const char *type = spec.types[spec.workers[w].type].name;
      if (!strcmp(type, "plain")) {
        ASSERT(out[w] == NULL);
        plain++;
      } else {
        ASSERT(out[w] != NULL);
        if (!out[w]) continue;
        double want = 1e-3 + (strcmp(type, "small") ? 1e-4 : 4e-4) * 48;
        ASSERT_REL(hs_perf_eval(out[w], 48), want, 1e-9);
        small += !strcmp(type, "small");
        big += !strcmp(type, "big");
      }
    }
    ASSERT_EQ(small, 1);
    ASSERT_EQ(big, 2);
    ASSERT_EQ(plain, 1);
    /* A partition the store has not calibrated for the model. */
    snprintf(ro.type_devices[1].device_name, sizeof ro.type_devices[1].device_name, "gpu (32 SMs)");
    ASSERT_EQ(hs_real_plan_worker_perf(&spec, &ro, s, "mlp", models, out, &d), HS_ENOTFOUND);
    ASSERT_CONTAINS(d.msg, "device type big runs on cuda:0/sm=64 (gpu (32 SMs)): ");
  }
  free(models);
  hs_cluster_spec_free(&spec);
  hs_store_close(s);
  unlink(path);
}

int main(int argc, char **argv) {
  hs_gsl_init();
  static const hs_test_case cases[] = {
      {"stats", test_stats},
      {"shared_name", test_shared_name},
      {"median_ci", test_median_ci},
      {"stability_rule", test_stability_rule},
      {"bimodal", test_bimodal},
      {"sweep_order", test_sweep_order},
      {"sweep_remeasures_bimodal", test_sweep_remeasures_bimodal},
      {"sweep_slow_period", test_sweep_slow_period},
      {"device_parse", test_device_parse},
      {"store_roundtrip", test_store_roundtrip},
      {"worker_perf", test_worker_perf},
      {"resume_skips_stored_points", test_resume_skips_stored_points},
      {"comm_timing", test_comm_timing},
      {"wake_timing", test_wake_timing},
      {NULL, NULL},
  };
  return hs_test_main("calib", cases, argc, argv);
}
