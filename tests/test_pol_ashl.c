/* ashl: the plan's closed forms (H_i, shares, SHL densities), scripted runs on a fake runtime
 * with fixed times (profiling, AHL local steps, the switch to SHL at the loss threshold, SHL's
 * per-worker compression and its staleness bound), and a run through the simulator on the
 * 3-worker slowed cluster. */
#include <stdlib.h>

#include "core/core_config.h"
#include "core/core_rng.h"
#include "policies/pol_semiasync.h"
#include "sim/sim_run.h"
#include "tests/hs_fake_rt.h"
#include "tests/hs_test.h"
#include "tests/test_util.h"

static void test_plan_closed_forms(void) {
  /* K c + comm = 1.2, 1.8, 2.4: H = (2.4-0.4)/0.1, (2.4-0.6)/0.15, (2.4-0.8)/0.2. */
  double c[3] = {0.1, 0.15, 0.2}, comm[3] = {0.4, 0.6, 0.8};
  int H[3];
  hs_ashl_local_steps(3, c, comm, 8, H);
  ASSERT_EQ(H[0], 20);
  ASSERT_EQ(H[1], 12);
  ASSERT_EQ(H[2], 8);
  ASSERT_NEAR(hs_ashl_round_time(3, c, comm, H), 2.4, 1e-12);
  /* A slow link can make the fast-computing worker the bottleneck: 2c + comm = 2.1, 5.2. */
  double c2[2] = {1.0, 0.1}, comm2[2] = {0.1, 5.0};
  hs_ashl_local_steps(2, c2, comm2, 2, H);
  ASSERT_EQ(H[0], 5);
  ASSERT_EQ(H[1], 2);
  /* Density: uncompressed when the push fits, else what fits, never below d0. */
  ASSERT_NEAR(hs_ashl_density(1.0, 0.1, 5, 0.2, 0.2, 0.1, 0.1, 2), 1.0, 0);
  ASSERT_NEAR(hs_ashl_density(0.93, 0.1, 6, 0.2, 0.2, 0.09, 0.1, 2), 0.2, 1e-12);
  ASSERT_NEAR(hs_ashl_density(0.5, 0.1, 6, 0.2, 0.2, 0.09, 0.1, 2), 0.1, 0);
}

/* The scripted cluster: steps 0.1/0.15/0.2 s, uploads and downloads 0.2/0.3/0.4 s, top-k
 * compression 0.05 s. */
static void setup(fake_rt *f) {
  const double c[3] = {0.1, 0.15, 0.2}, m[3] = {0.2, 0.3, 0.4};
  for (int w = 0; w < 3; w++) {
    f->c[w] = c[w];
    f->up[w] = f->down[w] = m[w];
    f->cm[w] = 0.05;
  }
}

/* Local steps of each push of worker w in stage `stage` (the compute tag), in order. */
static int rounds_of(const fake_rt *f, int w, uint64_t stage, int *H, double *ratio, int cap) {
  int n = 0, steps = 0;
  for (int i = 0; i < f->n_log; i++) {
    const fake_log *l = &f->log[i];
    if (l->w != w) continue;
    if (l->kind == FK_COMPUTE && l->done) steps++;
    if (l->kind == FK_PUSH && !l->done) {
      if (l->tag == stage && n < cap) {
        H[n] = steps;
        ratio[n++] = l->ratio;
      }
      steps = 0;
    }
  }
  return n;
}

static void test_profile_then_ahl(void) {
  fake_rt f;
  ASSERT_EQ(fake_open(&f, 3, "ashl:profile=2,density=0.1"), 0);
  setup(&f);
  ASSERT_EQ(fake_run(&f, 60, 1000000), 0);
  int H[256];
  double r[256];
  const int want[3] = {20, 12, 8};
  for (int w = 0; w < 3; w++) {
    /* Profiling: 2 plain rounds of one step, then one compressed at the base density. */
    int n = rounds_of(&f, w, 0, H, r, 256);
    ASSERT_EQ(n, 3);
    ASSERT(H[0] == 1 && H[1] == 1 && H[2] == 1);
    ASSERT(r[0] == 0 && r[1] == 0);
    ASSERT_NEAR(r[2], 0.1, 0);
    /* AHL: every round is the plan's H_i uncompressed; no loss, so no switch. */
    n = rounds_of(&f, w, 1, H, r, 256);
    ASSERT(n >= 10);
    for (int i = 0; i < n; i++) {
      ASSERT_EQ(H[i], want[w]);
      ASSERT(r[i] == 0);
    }
    ASSERT_EQ(rounds_of(&f, w, 2, H, r, 256), 0);
  }
  /* AHL rounds all last 2.4 s: the workers' pushes keep pace (shares 0.5/0.3/0.2). */
  ASSERT_NEAR((double)f.pushes[0], (double)f.pushes[2], 1);
  fake_close(&f);
}

static double loss_after_40(fake_rt *f, int w) { return f->version < 40 ? 1.0 : 0.3; }

static void test_switch_to_shl_at_loss(void) {
  fake_rt f;
  ASSERT_EQ(fake_open(&f, 3, "ashl:profile=2,density=0.1,switch_loss=0.5"), 0);
  setup(&f);
  f.loss_fn = loss_after_40;
  ASSERT_EQ(fake_run(&f, 60, 1000000), 0);
  /* SHL plan (hand-computed): compressed push 0.2*up*... = up*2*0.1 + 0.05 = 0.09/0.11/0.13,
   * comm = 0.29/0.41/0.53, 2c + comm = 0.49/0.71/0.93, H = 6/3/2, T = 0.93, slack
   * T - cH - down = 0.13/0.18/0.13, densities (slack - 0.05)/(2 up) = 0.2/0.2167/0.1. */
  const int want[3] = {6, 3, 2};
  const double dens[3] = {0.2, 0.13 / 0.6, 0.1};
  int H[512];
  double r[512];
  uint64_t first_shl_version = UINT64_MAX;
  for (int i = 0; i < f.n_log; i++)
    if (f.log[i].kind == FK_PUSH && f.log[i].tag == 2 && f.log[i].version < first_shl_version)
      first_shl_version = f.log[i].version;
  ASSERT(first_shl_version >= 40 && first_shl_version < 60);
  for (int w = 0; w < 3; w++) {
    int n = rounds_of(&f, w, 2, H, r, 512);
    ASSERT(n >= 20);
    for (int i = 0; i < n; i++) {
      ASSERT_EQ(H[i], want[w]);
      ASSERT_NEAR(r[i], dens[w], 1e-6); /* wire ratio 2(1 + 2e-6): flat-view padding */
    }
  }
  fake_close(&f);
}

/* The switch's rule is fl(sum of the latest losses in worker order / n) < switch_loss, which
 * the policy evaluates from a running sum and, near the threshold, from the ordered sum. Losses
 * 1.0 until update 40, then 0.1, 0.2, 0.05: a threshold equal to the ordered mean never
 * switches, the next double up does. (The running sum 3 + (l_i - 1) + ... differs from the
 * ordered sum in its last bits whatever order the workers report in, so a rule read off the
 * running sum alone would get one of the two wrong.) */
static const double late_loss[3] = {0.1, 0.2, 0.05};
static double loss_drop_40(fake_rt *f, int w) { return f->version < 40 ? 1.0 : late_loss[w]; }

static int shl_pushes_at(double threshold) {
  fake_rt f;
  char spec[128];
  snprintf(spec, sizeof spec, "ashl:profile=1,switch_loss=%.17g", threshold);
  if (fake_open(&f, 3, spec)) return -1;
  setup(&f);
  f.loss_fn = loss_drop_40;
  int n = 0;
  if (fake_run(&f, 60, 1000000)) n = -1;
  for (int i = 0; n >= 0 && i < f.n_log; i++) n += f.log[i].kind == FK_PUSH && f.log[i].tag == 2;
  fake_close(&f);
  return n;
}

static void test_switch_threshold_exact(void) {
  double mean = (late_loss[0] + late_loss[1] + late_loss[2]) / 3;
  ASSERT_EQ(shl_pushes_at(mean), 0);
  ASSERT(shl_pushes_at(nextafter(mean, 1.0)) > 0);
  ASSERT(shl_pushes_at(0.5) > 0);
  ASSERT_EQ(shl_pushes_at(0.05), 0);
}

/* SHL clocks: SHL pushes per worker, checked at every push arrival. */
static void test_shl_staleness_bound(void) {
  fake_rt f;
  ASSERT_EQ(fake_open(&f, 3, "ashl:profile=1,switch_iter=1,staleness=3"), 0);
  setup(&f);
  fake_slowdown_at(&f, 5.0, 2, 10.0); /* worker 2 falls far behind after the plan */
  ASSERT_EQ(fake_run(&f, 60, 1000000), 0);
  int64_t clock[3] = {0, 0, 0};
  int64_t worst = 0;
  for (int i = 0; i < f.n_log; i++) {
    const fake_log *l = &f.log[i];
    if (l->kind != FK_PUSH || !l->done || l->tag != 2) continue;
    clock[l->w]++;
    int64_t lo = clock[0] < clock[1] ? clock[0] : clock[1];
    lo = lo < clock[2] ? lo : clock[2];
    for (int w = 0; w < 3; w++) worst = clock[w] - lo > worst ? clock[w] - lo : worst;
  }
  /* A worker pulls only within the bound, so it can be at most bound + 1 pushes ahead; and the
   * bound binds: the fast workers were held back. */
  ASSERT(worst <= 4);
  ASSERT_EQ(worst, 4);
  ASSERT(clock[2] >= 3);
  ASSERT(clock[0] - clock[2] <= 4);
  fake_close(&f);
}

static void test_sim_ashl_3worker(void) {
  hs_sim_result res;
  if (hs_test_sim_3worker("ashl:switch_iter=60", 120, 0, &res)) return;
  ASSERT_EQ(res.status, HS_SIM_COMPLETE);
  ASSERT_EQ(res.summary.iterations, 120);
  /* The fastest worker (slowdown 2) takes the most steps, the slowest (4) the fewest. */
  ASSERT(res.workers[0].steps > res.workers[1].steps);
  ASSERT(res.workers[1].steps > res.workers[2].steps);
  hs_sim_result_free(&res);
}

int main(int argc, char **argv) {
  hs_gsl_init();
  static const hs_test_case cases[] = {
      {"plan_closed_forms", test_plan_closed_forms},
      {"profile_then_ahl", test_profile_then_ahl},
      {"switch_to_shl_at_loss", test_switch_to_shl_at_loss},
      {"switch_threshold_exact", test_switch_threshold_exact},
      {"shl_staleness_bound", test_shl_staleness_bound},
      {"sim_ashl_3worker", test_sim_ashl_3worker},
      {NULL, NULL},
  };
  return hs_test_main("pol_ashl", cases, argc, argv);
}
