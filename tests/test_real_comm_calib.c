/* real/real_comm_calib: a backend's all-reduce and send/recv timed through the backend and
 * stored as its calibration. Here on the cpu backend (host buffers, nets on the cpu); the local
 * backend needs a GPU, and without one the sweep must fail cleanly and store nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/cal_device.h"
#include "calib/cal_store.h"
#include "core/core_store.h"
#include "hs_test.h"
#include "real/real_comm_calib.h"

static hs_cal_comm_opts quick_timing(void) {
  return (hs_cal_comm_opts){.rule = {.min_reps = 3, .max_reps = 8, .rel_tol = 0.5}, .warmup = 1, .no_pin = 1};
}

static void test_time_allreduce_cpu(void) {
  enum { W = 3, N = 1000 };
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  hs_real_comm_config cfg = {.world = W, .n = N, .timeout_s = 30};
  ASSERT_EQ(hs_real_comm_cpu.open(&c, &cfg, &d), 0);
  if (!c) return;
  float *bufs[W];
  /* One float more than the backend was opened for: the failure case below. */
  for (int i = 0; i < W; i++) bufs[i] = calloc(N + 1, sizeof(float));
  hs_cal_comm_opts o = quick_timing();
  hs_cal_stats st = {0};
  ASSERT_EQ(hs_real_comm_time_allreduce(&hs_real_comm_cpu, c, bufs, W, N, &o, &st, &d), 0);
  ASSERT(st.count >= 3 && st.count <= 8);
  ASSERT(st.median_s > 0 && st.p10_s <= st.median_s && st.median_s <= st.p90_s);
  /* Each participant wrote rank + 1 before every repetition; weights 1/3: the mean, 2. */
  for (int i = 0; i < W; i++) {
    ASSERT_NEAR(bufs[i][0], 2.0, 1e-6);
    ASSERT_NEAR(bufs[i][N - 1], 2.0, 1e-6);
  }
  /* Bad input is refused before any thread starts. */
  ASSERT_EQ(hs_real_comm_time_allreduce(&hs_real_comm_cpu, c, bufs, 1, N, &o, &st, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "world size");
  hs_cal_comm_opts bad = o;
  bad.rule.min_reps = 0;
  ASSERT_EQ(hs_real_comm_time_allreduce(&hs_real_comm_cpu, c, bufs, W, N, &bad, &st, &d), HS_EINVAL);
  /* A failing participant (a message longer than the backend was opened for) aborts the others,
   * which return instead of waiting out the timeout, and its error is the one returned. */
  ASSERT(hs_real_comm_time_allreduce(&hs_real_comm_cpu, c, bufs, W, N + 1, &o, &st, &d) != 0);
  ASSERT_CONTAINS(d.msg, "all-reduce");
  hs_real_comm_cpu.close(c);
  for (int i = 0; i < W; i++) free(bufs[i]);
}

/* The cpu backend's mailbox (real_cpu.c): messages matched by tag, more of them in flight than
 * the buffers mapped at open, one longer than the size it was opened for, and buffers reused
 * after a receive carrying the new message's bytes, not an old one's. */
static void fill(float *b, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++) b[i] = v + (float)i;
}

static void test_cpu_mailbox(void) {
  enum { N = 3000, K = 5 };
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  hs_real_comm_config cfg = {.world = 2, .n = N, .timeout_s = 5};
  ASSERT_EQ(hs_real_comm_cpu.open(&c, &cfg, &d), 0);
  if (!c) return;
  float *out = malloc((N + 500) * sizeof *out), *in = malloc((N + 500) * sizeof *in);
  for (int round = 0; round < 2; round++) {
    for (int t = 0; t < K; t++) {
      fill(out, N, (float)(100 * round + t));
      ASSERT_EQ(hs_real_comm_cpu.send(c, 0, 1, (uint64_t)t, out, N, &d), 0);
    }
    fill(out, N + 500, -1.0f);
    ASSERT_EQ(hs_real_comm_cpu.send(c, 0, 1, K, out, N + 500, &d), 0);
    ASSERT_EQ(hs_real_comm_cpu.recv(c, 1, 0, K, in, N + 500, &d), 0);
    ASSERT_EQ(in[N + 499], N + 499 - 1.0f);
    for (int t = K - 1; t >= 0; t--) { /* by tag, in another order than sent */
      ASSERT_EQ(hs_real_comm_cpu.recv(c, 1, 0, (uint64_t)t, in, N, &d), 0);
      ASSERT_EQ(in[0], (float)(100 * round + t));
      ASSERT_EQ(in[N - 1], (float)(100 * round + t + N - 1));
    }
  }
  /* A short message into a longer receive is refused, and its buffer kept. */
  ASSERT_EQ(hs_real_comm_cpu.send(c, 0, 1, 7, out, 10, &d), 0);
  ASSERT_EQ(hs_real_comm_cpu.recv(c, 1, 0, 7, in, N, &d), HS_ERUNTIME);
  ASSERT_CONTAINS(d.msg, "10 floats from rank 0, expected 3000");
  hs_real_comm_cpu.abort(c);
  ASSERT_EQ(hs_real_comm_cpu.send(c, 0, 1, 8, out, N, &d), HS_EINTR);
  hs_real_comm_cpu.close(c);
  free(out);
  free(in);
}

static hs_store *fresh_store(char *path, size_t n, int64_t *dev_id) {
  snprintf(path, n, "/tmp/hs-test-real-comm-calib-%d.db", (int)getpid());
  hs_test_unlink_db(path);
  hs_store *s = NULL;
  hs_diag d = {0};
  if (hs_store_open(&s, path, 0, &d)) {
    fprintf(stderr, "%s\n", d.msg);
    return NULL;
  }
  hs_cal_device dev;
  hs_cal_device_parse("cpu", &dev, &d);
  snprintf(dev.name, sizeof dev.name, "test cpu");
  snprintf(dev.host, sizeof dev.host, "h");
  if (hs_cal_store_device(s, &dev, dev_id, &d)) fprintf(stderr, "%s\n", d.msg);
  return s;
}

static void drop_store(hs_store *s, const char *path) {
  hs_store_close(s);
  hs_test_unlink_db(path);
}

static int samples(hs_store *s, int64_t dev, const char *backend, const char *op, int world) {
  hs_comm_key k = {.device = dev, .backend = backend, .op = op, .world_size = world};
  double *b = NULL, *t = NULL;
  int n = 0;
  hs_diag d = {0};
  if (hs_cal_load_comm(s, &k, &b, &t, &n, &d)) return -1;
  free(b);
  free(t);
  return n;
}

static void test_calibrate_cpu(void) {
  char path[256];
  int64_t dev = 0;
  hs_store *s = fresh_store(path, sizeof path, &dev);
  ASSERT(s != NULL);
  if (!s) return;
  hs_diag d = {0};
  hs_real_comm_calib_opts o = {.backend = "cpu", .device = "cpu", .model = "mlp", .world = 2,
                               .max_bytes = 16384, .timeout_s = 30, .timing = quick_timing()};
  hs_cal_comm_result cr[2];
  int rc = hs_real_comm_calibrate(s, dev, &o, cr, &d);
  ASSERT_EQ(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", d.msg);
  /* 4 KiB, 16 KiB and mlp's gradient, for each op. */
  ASSERT_STR(cr[0].backend, "cpu");
  ASSERT_STR(cr[0].op, "allreduce");
  ASSERT_EQ(cr[0].world_size, 2);
  ASSERT_EQ(cr[0].measured, 3);
  ASSERT_EQ(cr[0].skipped, 0);
  ASSERT_EQ(cr[0].fitted, 1);
  ASSERT(cr[0].beta_bytes_per_s > 0 && cr[0].alpha_s >= 0);
  ASSERT_STR(cr[1].op, "p2p");
  ASSERT_EQ(cr[1].measured, 3);
  ASSERT_EQ(samples(s, dev, "cpu", "allreduce", 2), 3);
  ASSERT_EQ(samples(s, dev, "cpu", "p2p", 2), 3);
  /* Again: every size is stored, nothing is timed. */
  ASSERT_EQ(hs_real_comm_calibrate(s, dev, &o, cr, &d), 0);
  ASSERT_EQ(cr[0].measured, 0);
  ASSERT_EQ(cr[0].skipped, 3);
  ASSERT_EQ(cr[1].skipped, 3);
  ASSERT_EQ(samples(s, dev, "cpu", "allreduce", 2), 3);
  /* Refused: a world of one, an unknown backend, a model outside the zoo. */
  o.world = 1;
  ASSERT_EQ(hs_real_comm_calibrate(s, dev, &o, cr, &d), HS_EINVAL);
  o.world = 2;
  o.backend = "carrier-pigeon";
  ASSERT_EQ(hs_real_comm_calibrate(s, dev, &o, cr, &d), HS_EINVAL);
  o.backend = "cpu";
  o.model = "nosuch";
  ASSERT(hs_real_comm_calibrate(s, dev, &o, cr, &d) != 0);
  /* The local backend without a GPU (or without CUDA in the build): a clear error naming the
   * backend and the device, and nothing stored. */
  o.model = "mlp";
  o.backend = "local";
  o.device = "cuda:0";
  ASSERT(hs_real_comm_calibrate(s, dev, &o, cr, &d) != 0);
  ASSERT_CONTAINS(d.msg, "cuda:0");
  ASSERT_EQ(samples(s, dev, "local", "allreduce", 2), 0);
  ASSERT_EQ(samples(s, dev, "local", "p2p", 2), 0);
  drop_store(s, path);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"time_allreduce_cpu", test_time_allreduce_cpu},
      {"cpu_mailbox", test_cpu_mailbox},
      {"calibrate_cpu", test_calibrate_cpu},
      {NULL, NULL},
  };
  return hs_test_main("real_comm_calib", cases, argc, argv);
}
