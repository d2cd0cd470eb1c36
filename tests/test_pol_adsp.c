/* adsp: the loss-curve fit and reward, equal commit rates with more local steps on fast workers
 * (fake runtime with fixed times, and the simulator), and the commit-rate search settling on
 * the best rate of a scripted loss whose progress peaks at 3 commits per period. */
#include <stdlib.h>

#include "core/core_config.h"
#include "core/core_rng.h"
#include "policies/pol_semiasync.h"
#include "sim/sim_run.h"
#include "tests/hs_fake_rt.h"
#include "tests/hs_test.h"
#include "tests/test_util.h"

static void test_fit_and_reward(void) {
  double t[7], l[7], abc[3];
  for (int i = 0; i < 7; i++) {
    t[i] = 100 + 10.0 * i;
    l[i] = 1.0 / (0.04 * t[i] + 2.0) + 0.3;
  }
  ASSERT_EQ(hs_adsp_fit(t, l, 7, abc), 0);
  ASSERT_REL(abc[0] * abc[0], 0.04, 1e-5);
  ASSERT_REL(abc[1], 2.0, 1e-4);
  ASSERT_REL(abc[2], 0.3, 1e-5);
  ASSERT_EQ(hs_adsp_fit(t, l, 2, abc), HS_EINVAL);
  l[3] = NAN;
  ASSERT_EQ(hs_adsp_fit(t, l, 7, abc), HS_EINVAL);
  /* Reward: the inverse time to the target, 0.04 / (1/(0.4 - 0.3) - 2) = 1/200. */
  double fit[3] = {0.2, 2.0, 0.3};
  ASSERT_REL(hs_adsp_reward(fit, 0.4), 1.0 / 200, 1e-12);
  /* A faster curve reaches it sooner; an unreachable target ranks by the floor. */
  double fast[3] = {0.3, 2.0, 0.3};
  ASSERT(hs_adsp_reward(fast, 0.4) > hs_adsp_reward(fit, 0.4));
  ASSERT_NEAR(hs_adsp_reward(fit, 0.2), -0.3, 0);
  ASSERT(hs_adsp_reward(fit, 0.4) > hs_adsp_reward(fit, 0.2));
}

/* Commits and local steps per commit of worker w. */
static int commits_of(const fake_rt *f, int w, int *steps, int cap) {
  int n = 0, k = 0;
  for (int i = 0; i < f->n_log; i++) {
    const fake_log *l = &f->log[i];
    if (l->w != w) continue;
    if (l->kind == FK_COMPUTE && l->done) k++;
    if (l->kind == FK_PUSH && !l->done) {
      if (n < cap) steps[n++] = k;
      k = 0;
    }
  }
  return n;
}

static void test_equal_commit_rates(void) {
  fake_rt f;
  ASSERT_EQ(fake_open(&f, 3, "adsp:period=6s,commits=3,min_interval=0"), 0);
  const double c[3] = {0.125, 0.25, 0.5}; /* binary fractions: exact sums */
  for (int w = 0; w < 3; w++) {
    f.c[w] = c[w];
    f.up[w] = f.down[w] = 0.0625;
  }
  ASSERT_EQ(fake_run(&f, 60, 1000000), 0);
  int s0[64], s1[64], s2[64];
  int n0 = commits_of(&f, 0, s0, 64), n1 = commits_of(&f, 1, s1, 64), n2 = commits_of(&f, 2, s2, 64);
  /* One commit every period / dC = 2 s for everybody, up to step granularity: a worker commits
   * at the first step end past the mark, so its cycle is ceil(1.875 / c) c + 0.125 = 2, 2.125
   * and 2.125 s here. */
  ASSERT_NEAR(n0, 60 / 2.0, 1);
  ASSERT_NEAR(n1, 60 / 2.125, 1);
  ASSERT_NEAR(n2, 60 / 2.125, 1);
  /* Between commits each worker steps until 2 s minus its commit's 0.125 s have passed since
   * the last commit ended: 1.875 s is 15, 7.5 and 3.75 steps, so 15, 8 and 4 (the first
   * interval has no overhead yet). */
  for (int i = 1; i < n0 && i < 25; i++) {
    ASSERT_EQ(s0[i], 15);
    ASSERT_EQ(s1[i], 8);
    ASSERT_EQ(s2[i], 4);
  }
  fake_close(&f);
}

/* Progress peaks at 3 commits per period: a commit after an interval I at rate x = period / I
 * adds I * x exp(-x/3) / N, and the loss is 1/(0.05 P + 1) + 0.1, the fitted family. */
typedef struct progress {
  double period, P, last[FAKE_MAX];
} progress;

static void on_push(fake_rt *f, int w) {
  progress *p = f->ctx;
  double I = f->now - p->last[w];
  p->last[w] = f->now;
  if (I <= 0) return;
  double x = p->period / I;
  p->P += I * x * exp(-x / 3.0) / f->n;
}

static double scripted_loss(fake_rt *f, int w) {
  progress *p = f->ctx;
  return 1.0 / (0.05 * p->P + 1.0) + 0.1;
}

static void test_search_finds_best_rate(void) {
  fake_rt f;
  ASSERT_EQ(fake_open(&f, 2, "adsp:period=10s,commits=1,min_interval=0,samples=4"), 0);
  for (int w = 0; w < 2; w++) {
    f.c[w] = 0.01 * (w + 1);
    f.up[w] = f.down[w] = 0.005;
  }
  progress p = {.period = 10};
  f.ctx = &p;
  f.push_hook = on_push;
  f.loss_fn = scripted_loss;
  ASSERT_EQ(fake_run(&f, 100, 1000000), 0);
  /* Search from t = 10: trials of dC = 1, 2, 3, 4 for one period each; 4 is worse than 3, so
   * from t = 50 on both workers commit 3 times per period. */
  int n = 0;
  for (int i = 0; i < f.n_log; i++)
    if (f.log[i].kind == FK_PUSH && !f.log[i].done && f.log[i].w == 0 && f.log[i].t >= 60) n++;
  ASSERT_NEAR(n, 12, 1);
  n = 0;
  for (int i = 0; i < f.n_log; i++)
    if (f.log[i].kind == FK_PUSH && !f.log[i].done && f.log[i].w == 0 && f.log[i].t >= 40 && f.log[i].t < 50) n++;
  ASSERT_NEAR(n, 4, 1); /* the trial of dC = 4 */
  fake_close(&f);
}

static void test_no_loss_keeps_rate(void) {
  fake_rt f;
  ASSERT_EQ(fake_open(&f, 2, "adsp:period=10s,commits=2,min_interval=0"), 0);
  for (int w = 0; w < 2; w++) {
    f.c[w] = 0.01;
    f.up[w] = f.down[w] = 0.005;
  }
  ASSERT_EQ(fake_run(&f, 100, 1000000), 0);
  ASSERT_NEAR((double)f.pushes[0], 20, 1);
  fake_close(&f);
}

/* The fake runtime's push, wrapped to record the weights the policy pushes with. */
typedef struct weights_seen {
  const hs_runtime_ops *inner;
  int n;
  double w[4096];
} weights_seen;

static int recording_push(hs_runtime *rt, int w, const hs_comm_opts *o) {
  weights_seen *ws = ((fake_rt *)rt)->ctx;
  if (ws->n < 4096) ws->w[ws->n++] = o->weight;
  return ws->inner->push(rt, w, o);
}

/* Every commit is applied divided by the number of workers (the reference code's
 * parameters + new_l / worker_num), so that N workers' whole local progress does not move the
 * model N times too far. */
static void test_commit_weight(void) {
  for (int n = 2; n <= 3; n++) {
    fake_rt f;
    ASSERT_EQ(fake_open(&f, n, "adsp:period=2s,commits=2,min_interval=0"), 0);
    for (int w = 0; w < n; w++) {
      f.c[w] = 0.125 * (w + 1);
      f.up[w] = f.down[w] = 0.0625;
    }
    weights_seen seen = {.inner = f.rt.ops};
    hs_runtime_ops ops = *f.rt.ops;
    ops.push = recording_push;
    f.rt.ops = &ops;
    f.ctx = &seen;
    ASSERT_EQ(fake_run(&f, 20, 1000000), 0);
    ASSERT(seen.n >= 10 * n);
    for (int i = 0; i < seen.n; i++) ASSERT_NEAR(seen.w[i], 1.0 / n, 0);
    f.rt.ops = seen.inner;
    fake_close(&f);
  }
}

static void test_sim_adsp_3worker(void) {
  hs_sim_result res;
  if (hs_test_sim_3worker("adsp:period=12s,commits=4,min_interval=0", 0, 120, &res)) return;
  /* 3 workers committing every 3 s for 120 s. */
  ASSERT_NEAR((double)res.summary.iterations, 120, 4);
  ASSERT(res.workers[0].steps > res.workers[1].steps);
  ASSERT(res.workers[1].steps > res.workers[2].steps);
  hs_sim_result_free(&res);
}

int main(int argc, char **argv) {
  hs_gsl_init();
  static const hs_test_case cases[] = {
      {"fit_and_reward", test_fit_and_reward},
      {"equal_commit_rates", test_equal_commit_rates},
      {"search_finds_best_rate", test_search_finds_best_rate},
      {"no_loss_keeps_rate", test_no_loss_keeps_rate},
      {"commit_weight", test_commit_weight},
      {"sim_adsp_3worker", test_sim_adsp_3worker},
      {NULL, NULL},
  };
  return hs_test_main("pol_adsp", cases, argc, argv);
}
