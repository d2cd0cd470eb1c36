/* Tests of rt_runtime (runtime/): the checks every runtime makes on a policy's calls (their exact words),
 * the timer queue's order, the closing of a step record and real mode's prediction of a step. */
#include <math.h>
#include <stdint.h>

#include "hs_test.h"
#include "runtime/rt_runtime.h"

static void test_check_worker(void) {
  hs_diag d = {0};
  ASSERT_EQ(hs_runtime_check_worker(&d, "ssgd", "compute", 0, 3), 0);
  ASSERT_EQ(hs_runtime_check_worker(&d, "ssgd", "compute", 2, 3), 0);
  ASSERT_STR(d.msg, "");
  ASSERT_EQ(hs_runtime_check_worker(&d, "ssgd", "push", 3, 3), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy ssgd: push on worker 3, which does not exist (3 workers)");
  ASSERT_EQ(d.code, HS_ERUNTIME);
  ASSERT_EQ(hs_runtime_check_worker(&d, "asp", "local update", -1, 2), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy asp: local update on worker -1, which does not exist (2 workers)");
}

static void test_check_compute(void) {
  hs_diag d = {0};
  ASSERT_EQ(hs_runtime_check_compute(&d, "lbb", 1, 1, 0, 1), 0);
  ASSERT_STR(d.msg, "");
  ASSERT_EQ(hs_runtime_check_compute(&d, "lbb", 1, 0, 1, 0), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy lbb: compute on worker 1, which is not in the cluster");
  ASSERT_EQ(hs_runtime_check_compute(&d, "lbb", 2, 1, 1, 0), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy lbb: compute on worker 2 while its step is running");
  ASSERT_EQ(hs_runtime_check_compute(&d, "lbb", 0, 1, 0, 0), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy lbb: batch 0 for worker 0");
}

static void test_check_allreduce_and_weights(void) {
  hs_diag d = {0};
  ASSERT_EQ(hs_runtime_check_allreduce(&d, "ssgd", 1), 0);
  ASSERT_EQ(hs_runtime_check_allreduce(&d, "ssgd", 0), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy ssgd: all-reduce over no worker");
  hs_diag_clear(&d);
  ASSERT_EQ(hs_runtime_check_weight(&d, "ssgd", 0, 0.0), 0);
  ASSERT_EQ(hs_runtime_check_weight(&d, "ssgd", 0, 32.0), 0);
  ASSERT_STR(d.msg, "");
  ASSERT_EQ(hs_runtime_check_weight(&d, "ssgd", 2, -1.0), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy ssgd: all-reduce weight 2 is -1");
  ASSERT_EQ(hs_runtime_check_weight(&d, "ssgd", 1, NAN), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy ssgd: all-reduce weight 1 is nan");
  ASSERT_EQ(hs_runtime_check_weight(&d, "ssgd", 1, INFINITY), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy ssgd: all-reduce weight 1 is inf");
}

static void test_check_timer_and_lr(void) {
  hs_diag d = {0};
  ASSERT_EQ(hs_runtime_check_timer(&d, "adsp", 0.0), 0);
  ASSERT_EQ(hs_runtime_check_timer(&d, "adsp", 2.5), 0);
  ASSERT_EQ(hs_runtime_check_timer(&d, "adsp", -1.0), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy adsp: timer with delay -1");
  ASSERT_EQ(hs_runtime_check_timer(&d, "adsp", NAN), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy adsp: timer with delay nan");
  ASSERT_EQ(hs_runtime_check_timer(&d, "adsp", INFINITY), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy adsp: timer with delay inf");
  hs_diag_clear(&d);
  ASSERT_EQ(hs_runtime_check_lr(&d, "lbcal", -1, 4, 0.1), 0);
  ASSERT_EQ(hs_runtime_check_lr(&d, "lbcal", 3, 4, 0.0), 0);
  ASSERT_STR(d.msg, "");
  ASSERT_EQ(hs_runtime_check_lr(&d, "lbcal", 0, 4, -0.5), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy lbcal: learning rate -0.5");
  ASSERT_EQ(hs_runtime_check_lr(&d, "lbcal", 9, 4, NAN), HS_ERUNTIME); /* the rate is judged first */
  ASSERT_STR(d.msg, "policy lbcal: learning rate nan");
  ASSERT_EQ(hs_runtime_check_lr(&d, "lbcal", 4, 4, 0.1), HS_ERUNTIME);
  ASSERT_STR(d.msg, "policy lbcal: set_lr on worker 4, which does not exist (4 workers)");
}

static void test_policy_failed(void) {
  hs_diag d = {0};
  hs_runtime_policy_failed(&d, "ksync", HS_ENOMEM);
  ASSERT_STR(d.msg, "policy ksync failed (out of memory)");
  ASSERT_EQ(d.code, HS_ENOMEM);
  /* A policy that said why keeps its own words. */
  hs_diag_set(&d, HS_EINVAL, "ksync: k must be at least 1");
  hs_runtime_policy_failed(&d, "ksync", HS_EINVAL);
  ASSERT_STR(d.msg, "ksync: k must be at least 1");
}

static void test_close_row(void) {
  /* Previous record ended at 1; compute 1.5..2.5, communication ends at 3.5 with 0.75 s of it
   * spent communicating: wait = (3.5 - 1) - 1 - 0.75 = 0.75. */
  hs_step_row row = {.start_s = 1.5, .compute_end_s = 2.5, .comm_end_s = 3.5};
  double prev = 1.0;
  hs_runtime_close_row(&row, &prev, 0.75);
  ASSERT_NEAR(row.comm_end_s, 3.5, 0);
  ASSERT_NEAR(row.wait_s, 0.75, 1e-15);
  ASSERT_NEAR(prev, 3.5, 0);
  /* No communication after the compute: the step ends with it; a negative wait is 0. */
  row = (hs_step_row){.start_s = 3.0, .compute_end_s = 4.0, .comm_end_s = 4.0};
  hs_runtime_close_row(&row, &prev, 0.2);
  ASSERT_NEAR(row.comm_end_s, 4.0, 0);
  ASSERT_NEAR(row.wait_s, 0.0, 0);
  ASSERT_NEAR(prev, 4.0, 0);
}

static void test_predict(void) {
  /* The probe's line, clamped at 0, times a slowdown that only slows. */
  ASSERT_NEAR(hs_runtime_predict(NULL, 0.01, 0.001, 1.0, 10), 0.02, 1e-15);
  ASSERT_NEAR(hs_runtime_predict(NULL, 0.01, 0.001, 2.0, 10), 0.04, 1e-15);
  ASSERT_NEAR(hs_runtime_predict(NULL, 0.01, 0.001, 0.5, 10), 0.02, 1e-15);
  ASSERT_NEAR(hs_runtime_predict(NULL, -0.5, 0.001, 1.0, 10), 0.0, 0);
  /* A calibrated model wins over the probe. */
  hs_perf_model m = {.form = HS_PERF_LINEAR, .p = {0.004, 0.0005}};
  ASSERT_NEAR(hs_runtime_predict(&m, 1.0, 1.0, 3.0, 8), 3.0 * hs_perf_eval(&m, 8), 1e-15);
}

static void test_limit_reached(void) {
  ASSERT(!hs_runtime_limit_reached(0, 1000, 0, 1000000, 0, 1e9)); /* no limit at all */
  ASSERT(!hs_runtime_limit_reached(10, 9, 0, 0, 0, 0));
  ASSERT(hs_runtime_limit_reached(10, 10, 0, 0, 0, 0));
  ASSERT(!hs_runtime_limit_reached(0, 0, 500.0, 499, 0, 0));
  ASSERT(hs_runtime_limit_reached(0, 0, 500.0, 500, 0, 0));
  ASSERT(!hs_runtime_limit_reached(0, 0, 0, 0, 2.0, 1.999));
  ASSERT(hs_runtime_limit_reached(0, 0, 0, 0, 2.0, 2.0));
  ASSERT(hs_runtime_limit_reached(100, 1, 1e9, 1, 2.0, 3.0)); /* any one of them */
}

static void test_summary(void) {
  hs_summary m;
  memset(&m, 0, sizeof m);
  m.wait_fraction = 0.25; /* the caller's */
  hs_runtime_summary(&m, 4, 10, 123, 640, 5.0);
  ASSERT_EQ(m.workers, 4);
  ASSERT_EQ(m.iterations, 10);
  ASSERT_EQ(m.events, 123);
  ASSERT_EQ(m.samples, 640);
  ASSERT_NEAR(m.sim_time_s, 5.0, 0);
  ASSERT_NEAR(m.mean_iteration_s, 0.5, 0);
  ASSERT_NEAR(m.samples_per_s, 128.0, 0);
  ASSERT_NEAR(m.wait_fraction, 0.25, 0);
  ASSERT(isnan(m.wall_s) && isnan(m.final_loss) && isnan(m.final_accuracy) && isnan(m.time_to_target_s));
  hs_runtime_summary(&m, 0, 0, 0, 0, 0.0);
  ASSERT(isnan(m.mean_iteration_s) && isnan(m.samples_per_s));
  ASSERT_EQ(hs_runtime_no_max_batch(NULL, 3), 0);
}

/* The queue against a plain scan for the earliest (at, seq), through interleaved adds and pops
 * with many equal times. */
static void test_timers_order(void) {
  hs_runtime_timers q = {0};
  hs_diag d = {0};
  struct { double at; uint64_t tag; int live; } ref[600];
  int nref = 0;
  uint64_t x = 12345;
  int mismatches = 0, pops = 0;
  for (int round = 0; round < 600; round++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    double at = (double)((x >> 33) % 40); /* few distinct times: ties everywhere */
    ASSERT_EQ(hs_runtime_timers_add(&q, at, round % 3 ? -1 : round, (uint64_t)round, &d), 0);
    ref[nref].at = at;
    ref[nref].tag = (uint64_t)round;
    ref[nref++].live = 1;
    if (round % 3 == 2) {
      /* Pop everything due at a moving "now". */
      double now = (double)(round % 40);
      for (;;) {
        int best = -1;
        for (int i = 0; i < nref; i++)
          if (ref[i].live && (best < 0 || ref[i].at < ref[best].at)) best = i; /* first added wins ties */
        hs_runtime_timer t;
        double next;
        int got = hs_runtime_timers_pop(&q, now, &t, &next);
        if (best < 0 || ref[best].at > now) {
          mismatches += got != 0 || next != (best < 0 ? INFINITY : ref[best].at);
          break;
        }
        mismatches += !got || t.tag != ref[best].tag || t.at != ref[best].at ||
                      t.cluster_event != ((int)t.tag % 3 ? -1 : (int)t.tag);
        ref[best].live = 0;
        pops++;
      }
    }
  }
  ASSERT_EQ(mismatches, 0);
  ASSERT(pops > 100);
  int live = 0;
  for (int i = 0; i < nref; i++) live += ref[i].live;
  ASSERT_EQ(q.n, live);
  hs_runtime_timers_free(&q);
  ASSERT_EQ(q.n, 0);
  hs_runtime_timer t;
  double next = 0;
  ASSERT_EQ(hs_runtime_timers_pop(&q, 1e9, &t, &next), 0);
  ASSERT(isinf(next));
}

static const hs_test_case cases[] = {
    {"check_worker", test_check_worker},
    {"check_compute", test_check_compute},
    {"check_allreduce_and_weights", test_check_allreduce_and_weights},
    {"check_timer_and_lr", test_check_timer_and_lr},
    {"policy_failed", test_policy_failed},
    {"close_row", test_close_row},
    {"predict", test_predict},
    {"limit_reached", test_limit_reached},
    {"summary", test_summary},
    {"timers_order", test_timers_order},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("pol_runtime", cases, argc, argv); }
