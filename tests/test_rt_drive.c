/* Tests of what the runtime core does for its drivers around the hot path (runtime/rt_core.h's
 * appended part, runtime/rt_evals.h): the job set in one call, failures (the first one stays),
 * step records, all-reduce weights, a wall-clock driver's timers, the summary's rule for a step
 * in progress at the end, and the deferred evaluations' queue. A fake driver whose clock is
 * the core's `clock` field stands for the threads and the ranks. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hs_test.h"
#include "runtime/rt_core.h"
#include "runtime/rt_evals.h"

typedef struct fake {
  hs_rt_core core; /* first member, as in every driver */
  hs_runtime_timers timers;
  uint64_t fired[8];
  int n_fired;
  hs_step_row rows[8];
  int n_rows;
} fake;

static int fake_wake_at(hs_rt_core *c, double t, hs_rt_wake_kind kind, int64_t arg) {
  return hs_rt_core_timer_add(c, &((fake *)c)->timers, t, kind, arg);
}

static const hs_rt_driver fake_driver = {
    .version = HS_RT_DRIVER_VERSION, .name = "fake", .wake_at = fake_wake_at, .caps = HS_CAP_ALL};

static int on_timer(void *state, hs_runtime *rt, uint64_t tag) {
  (void)state;
  fake *f = (fake *)rt; /* hs_runtime is the core's first member, the core the fake's */
  if (tag == 99) return hs_diag_set(&f->core.diag, HS_ERUNTIME, "timer 99 fails");
  if (f->n_fired < 8) f->fired[f->n_fired++] = tag;
  return 0;
}

static const hs_policy fake_policy = {.version = HS_POLICY_VERSION, .name = "fake", .on_timer = on_timer};

static int sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  (void)d;
  fake *f = ctx;
  if (f->n_rows < 8) f->rows[f->n_rows++] = *row;
  return 0;
}

/* A fake with n workers, each at learning rate 0.1, joined at 0. */
static fake *fake_open(int n) {
  fake *f = calloc(1, sizeof *f);
  hs_rt_core_init(&f->core, &fake_driver);
  hs_rt_core_set_job(&f->core, &(hs_rt_core_job){.policy = &fake_policy, .global_batch = 8, .max_iterations = 10,
                                                 .eval_every = 3, .sink = sink, .sink_ctx = f});
  for (int i = 0; i < n; i++) {
    int r = hs_rt_core_add_worker(&f->core, 1.0, 1.0, 0.1, 0.0);
    f->core.w[r].active = 1;
  }
  f->core.pstate = calloc(1, 1); /* as hs_rt_core_open would */
  return f;
}

static void fake_close(fake *f) {
  hs_rt_core_close(&f->core);
  hs_runtime_timers_free(&f->timers);
  free(f);
}

static void test_job_and_eval_due(void) {
  fake *f = fake_open(1);
  ASSERT(f->core.policy == &fake_policy);
  ASSERT_EQ(f->core.global_batch, 8);
  ASSERT_EQ(f->core.max_iterations, 10);
  ASSERT(f->core.sink == sink);
  ASSERT(!hs_rt_core_eval_due(&f->core, 2));
  ASSERT(hs_rt_core_eval_due(&f->core, 3));
  ASSERT(hs_rt_core_eval_due(&f->core, 6));
  ASSERT(hs_rt_core_final_eval_due(&f->core)); /* last_eval -1, iterations 0 */
  f->core.eval_every = 0;
  ASSERT(!hs_rt_core_eval_due(&f->core, 3));
  fake_close(f);
}

static void test_first_failure_stays(void) {
  fake *f = fake_open(1);
  f->core.clock = 2.5;
  ASSERT_EQ(hs_rt_core_outcome(&f->core), 0);
  ASSERT_EQ(hs_rt_core_settle(&f->core, 0), 0);
  ASSERT(!f->core.done);
  ASSERT_EQ(hs_rt_core_abort(&f->core, HS_EINVAL, "first %d", 1), HS_EINVAL);
  f->core.clock = 3.0;
  ASSERT_EQ(hs_rt_core_abort(&f->core, HS_ENOMEM, "second"), HS_ENOMEM);
  ASSERT_EQ(hs_rt_core_settle(&f->core, HS_ERUNTIME), HS_ERUNTIME);
  ASSERT_STR(f->core.diag.msg, "first 1");
  ASSERT_EQ(hs_rt_core_outcome(&f->core), HS_EINVAL);
  ASSERT(f->core.done);
  ASSERT_NEAR(f->core.end, 2.5, 0);
  fake_close(f);
}

static void test_records(void) {
  fake *f = fake_open(1);
  hs_rt_core *c = &f->core;
  /* Step 0: 1 s to 2 s, then 0.5 s of communication until 3 s; a push of step 0 answered at
   * 3 s with staleness 2. */
  ASSERT_EQ(hs_rt_core_record_open(c, 0, 4, 1.0), 0);
  hs_rt_core_record_end(c, 0, 2.0, 0.75);
  c->w[0].steps = 1;
  hs_rt_core_record_comm(c, 0, 0.5, 2.75);
  hs_rt_core_record_push(c, 0, 0, 3.0, 2);
  hs_rt_core_record_push(c, 0, 7, 9.0, 5); /* another step's: not this record's */
  ASSERT_EQ(f->n_rows, 0);
  ASSERT_EQ(hs_rt_core_record_open(c, 0, 4, 3.5), 0); /* writes step 0's */
  ASSERT_EQ(f->n_rows, 1);
  const hs_step_row *r = &f->rows[0];
  ASSERT_EQ(r->worker, 0);
  ASSERT_EQ(r->step, 0);
  ASSERT_EQ(r->batch, 4);
  ASSERT_EQ(r->staleness, 2);
  ASSERT_NEAR(r->start_s, 1.0, 0);
  ASSERT_NEAR(r->compute_end_s, 2.0, 0);
  ASSERT_NEAR(r->comm_end_s, 3.0, 0);
  ASSERT_NEAR(r->loss, 0.75, 0);
  /* since the previous end (0): 3 s, of which 1 computing and 0.5 communicating */
  ASSERT_NEAR(r->wait_s, 1.5, 1e-12);
  ASSERT_NEAR(c->w[0].comm, 0.5, 0);
  ASSERT_EQ(c->w[0].rec.step, 1);
  ASSERT(isnan(c->w[0].rec.loss));
  fake_close(f);
}

static void test_weights(void) {
  fake *f = fake_open(3);
  f->core.w[0].last_batch = 1;
  f->core.w[1].last_batch = 3;
  f->core.w[2].last_batch = 4;
  int ws[2] = {1, 2};
  double out[2];
  hs_rt_core_weights(&f->core, ws, 2, NULL, out);
  ASSERT_NEAR(out[0], 3.0 / 7.0, 1e-15);
  ASSERT_NEAR(out[1], 4.0 / 7.0, 1e-15);
  double given[2] = {1, 1};
  hs_rt_core_weights(&f->core, ws, 2, given, out);
  ASSERT_NEAR(out[0], 0.5, 0);
  ASSERT_NEAR(out[1], 0.5, 0);
  fake_close(f);
}

static void test_timers_fire_in_order(void) {
  fake *f = fake_open(1);
  hs_rt_core *c = &f->core;
  ASSERT_EQ(c->drv->wake_at(c, 2.0, HS_RT_WAKE_TIMER, 20), 0);
  ASSERT_EQ(c->drv->wake_at(c, 1.0, HS_RT_WAKE_TIMER, 10), 0);
  ASSERT_EQ(c->drv->wake_at(c, 2.0, HS_RT_WAKE_TIMER, 21), 0); /* same time: after 20 */
  ASSERT_EQ(c->drv->wake_at(c, 5.0, HS_RT_WAKE_TIMER, 50), 0);
  double next = 0;
  c->clock = 0.5;
  ASSERT_EQ(hs_rt_core_timer_fire(c, &f->timers, &next), 0);
  ASSERT_EQ(f->n_fired, 0);
  ASSERT_NEAR(next, 1.0, 0);
  c->clock = 2.0;
  ASSERT_EQ(hs_rt_core_timer_fire(c, &f->timers, &next), 0);
  ASSERT_EQ(f->n_fired, 3);
  ASSERT_EQ(f->fired[0], 10);
  ASSERT_EQ(f->fired[1], 20);
  ASSERT_EQ(f->fired[2], 21);
  ASSERT_NEAR(next, 5.0, 0);
  /* A failing timer fails the run; the rest wait no more. */
  ASSERT_EQ(c->drv->wake_at(c, 3.0, HS_RT_WAKE_TIMER, 99), 0);
  c->clock = 6.0;
  ASSERT_EQ(hs_rt_core_timer_fire(c, &f->timers, &next), HS_ERUNTIME);
  ASSERT(c->failed && c->done);
  ASSERT_STR(c->diag.msg, "timer 99 fails");
  ASSERT(isinf(next));
  ASSERT_EQ(f->n_fired, 3);
  fake_close(f);
}

static void test_summary_step_in_progress(void) {
  fake *f = fake_open(3);
  hs_rt_core *c = &f->core;
  /* Worker 0: a finished step of 4 samples, 0 to 1 s, then 0.5 s communicating. */
  c->w[0].computing = 1;
  ASSERT_EQ(hs_rt_core_record_open(c, 0, 4, 0.0), 0);
  hs_rt_core_record_end(c, 0, 1.0, NAN);
  ASSERT_EQ(hs_rt_core_compute_done(c, 0, 4, 0.0, 1.0, NAN), 0);
  hs_rt_core_record_comm(c, 0, 0.5, 1.5);
  /* Worker 1: a finished step 0 to 1 s, and one in progress since 2.5 s. */
  c->w[1].computing = 1;
  ASSERT_EQ(hs_rt_core_compute_done(c, 1, 4, 0.0, 1.0, NAN), 0);
  c->w[1].computing = 1;
  ASSERT_EQ(hs_rt_core_record_open(c, 1, 4, 2.5), 0);
  /* Worker 2: a step asked for but not started (no record): no busy time. */
  c->w[2].computing = 1;
  c->iterations = 2;
  c->end = 4.0;
  hs_rt_worker_stats ws[3];
  hs_summary m;
  hs_rt_core_summary(c, 2, &m, ws);
  ASSERT_NEAR(ws[0].busy_s, 1.0, 0);
  ASSERT_NEAR(ws[0].comm_s, 0.5, 0);
  ASSERT_NEAR(ws[0].wait_s, 2.5, 0);
  ASSERT_NEAR(ws[1].busy_s, 2.5, 0); /* 1 finished + 1.5 in progress */
  ASSERT_EQ(ws[1].steps, 1);          /* finished steps only */
  ASSERT_EQ(ws[1].samples, 4);
  ASSERT_NEAR(ws[1].wait_s, 1.5, 0);
  ASSERT_NEAR(ws[2].busy_s, 0, 0);
  ASSERT_NEAR(ws[2].wait_s, 4.0, 0);
  ASSERT_EQ(m.iterations, 2);
  ASSERT_EQ(m.samples, 8);
  ASSERT_EQ(m.events, 2);
  ASSERT_NEAR(m.samples_per_s, 2.0, 0);
  ASSERT_NEAR(m.wait_fraction, 8.0 / 12.0, 1e-15);
  ASSERT(isnan(m.final_loss));
  fake_close(f);
}

static void test_evals_queue(void) {
  hs_rt_evals q = {0};
  hs_rt_evals_init(&q, NULL, NULL, 4, 0);
  float model[4] = {1, 2, 3, 4};
  hs_diag d = {0};
  ASSERT(!hs_rt_evals_online(&q));
  ASSERT_EQ(hs_rt_evals_keep(&q, model, 1.5, 3, &d), 0);
  model[0] = 9; /* kept as it was */
  ASSERT_EQ(hs_rt_evals_keep(&q, model, 2.5, 6, &d), 0);
  ASSERT(!hs_rt_evals_online(&q)); /* deferred: no target, 32 bytes */
  q.targets = 1;
  ASSERT(hs_rt_evals_online(&q)); /* a target needs each answer now */
  q.targets = 0;
  hs_rt_eval *e = hs_rt_evals_pop(&q);
  ASSERT_EQ(e->step, 3);
  ASSERT_NEAR(e->time_s, 1.5, 0);
  ASSERT_NEAR(e->model[0], 1, 0);
  hs_rt_eval_free(e);
  ASSERT_EQ(q.n, 1);
  /* Past HS_RT_EVALS_DEFER_BYTES of waiting copies: evaluated during the run. A model size the
   * queue believes in is enough; take() does not copy. */
  q.P = (int64_t)(HS_RT_EVALS_DEFER_BYTES / sizeof(float) / 2);
  ASSERT(!hs_rt_evals_online(&q));
  ASSERT_EQ(hs_rt_evals_take(&q, calloc(4, sizeof(float)), 3.5, 9, &d), 0);
  ASSERT(!hs_rt_evals_online(&q)); /* exactly the bound */
  ASSERT_EQ(hs_rt_evals_take(&q, calloc(4, sizeof(float)), 4.5, 12, &d), 0);
  ASSERT(hs_rt_evals_online(&q));
  hs_rt_evals_clear(&q);
  ASSERT_EQ(q.n, 0);
  ASSERT(q.head == NULL && q.tail == NULL);
  ASSERT(!hs_rt_evals_online(&q));
}

static const hs_test_case cases[] = {
    {"job_and_eval_due", test_job_and_eval_due},
    {"first_failure_stays", test_first_failure_stays},
    {"records", test_records},
    {"weights", test_weights},
    {"timers_fire_in_order", test_timers_fire_in_order},
    {"summary_step_in_progress", test_summary_step_in_progress},
    {"evals_queue", test_evals_queue},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("rt_drive", cases, argc, argv); }
