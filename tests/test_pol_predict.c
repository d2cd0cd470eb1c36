/* Speed predictor tests on synthetic series: closed forms for last, ema and Holt; the GRU
 * learns a pattern that `last` cannot follow, stays put on a constant series, and is
 * deterministic for a seed. */
#include "core/core_error.h"
#include "core/core_rng.h"
#include "policies/pol_predict.h"
#include "tests/hs_test.h"

typedef struct pred {
  const hs_predictor *p;
  void *st;
} pred;

static pred open_pred(const hs_predictor *p, hs_pred_params pp) {
  pred x = {p, calloc(1, p->state_size)};
  if (p->init(x.st, &pp)) HS_FAIL_AT("%s: init failed", p->name);
  return x;
}

static void close_pred(pred *x) {
  x->p->fini(x->st);
  free(x->st);
}

static const hs_pred_params PP = {.alpha = 0.5, .beta = 0.3, .hidden = 8, .bptt = 8, .lr = 0.05, .seed = 1};

static void test_registry_order(void) {
  const hs_predictor *const *l = hs_predictor_list();
  ASSERT_STR(l[0]->name, "last");
  ASSERT_STR(l[1]->name, "ema");
  ASSERT_STR(l[2]->name, "holt");
  ASSERT_STR(l[3]->name, "gru");
  ASSERT(l[4] == NULL);
}

static void test_last_and_ema(void) {
  pred a = open_pred(&hs_predictor_last, PP), e = open_pred(&hs_predictor_ema, PP);
  ASSERT(isnan(a.p->predict(a.st)));
  ASSERT(isnan(e.p->predict(e.st)));
  double ys[4] = {4, 8, 2, 6};
  for (int i = 0; i < 4; i++) {
    a.p->observe(a.st, ys[i]);
    e.p->observe(e.st, ys[i]);
  }
  ASSERT_NEAR(a.p->predict(a.st), 6, 0);
  /* 4 -> 0.5*8+0.5*4 = 6 -> 0.5*2+3 = 4 -> 0.5*6+2 = 5 */
  ASSERT_NEAR(e.p->predict(e.st), 5, 1e-15);
  close_pred(&a);
  close_pred(&e);
  hs_pred_params bad = PP;
  bad.alpha = 0;
  void *st = calloc(1, hs_predictor_ema.state_size);
  ASSERT_EQ(hs_predictor_ema.init(st, &bad), HS_EINVAL);
  free(st);
}

static void test_holt_linear_series(void) {
  /* On a straight line Holt is exact from the second value on, whatever alpha and beta. */
  pred h = open_pred(&hs_predictor_holt, PP);
  for (int i = 0; i < 20; i++) {
    h.p->observe(h.st, 10 + 2.5 * i);
    if (i >= 1) ASSERT_NEAR(h.p->predict(h.st), 10 + 2.5 * (i + 1), 1e-12);
  }
  /* A step: 2 values at 0 then 1 forever; hand-computed first prediction after the step:
   * l = 0.5*1 + 0.5*(0+0) = 0.5, b = 0.3*0.5 + 0.7*0 = 0.15, next = 0.65. */
  pred s = open_pred(&hs_predictor_holt, PP);
  s.p->observe(s.st, 0);
  s.p->observe(s.st, 0);
  s.p->observe(s.st, 1);
  ASSERT_NEAR(s.p->predict(s.st), 0.65, 1e-15);
  close_pred(&h);
  close_pred(&s);
}

/* Mean absolute error of one-step predictions over steps [from, n) of series f. */
static double mae(const hs_predictor *p, hs_pred_params pp, double (*f)(int), int n, int from) {
  pred x = open_pred(p, pp);
  double e = 0;
  for (int i = 0; i < n; i++) {
    if (i >= from) e += fabs(x.p->predict(x.st) - f(i));
    x.p->observe(x.st, f(i));
  }
  close_pred(&x);
  return e / (n - from);
}

/* A worker whose step alternates between 10 ms and 14 ms per sample (for instance a
 * co-located job on every other step). */
static double alternating(int i) { return i % 2 ? 0.014 : 0.010; }
static double constant(int i) { return 0.02; }

static void test_gru_learns_alternation(void) {
  double last = mae(&hs_predictor_last, PP, alternating, 3000, 2500);
  double gru = mae(&hs_predictor_gru, PP, alternating, 3000, 2500);
  ASSERT_NEAR(last, 0.004, 1e-12);
  /* The GRU must do far better than repeating the last value. */
  ASSERT(gru < 0.25 * last);
}

static void test_gru_constant_and_deterministic(void) {
  ASSERT(mae(&hs_predictor_gru, PP, constant, 400, 1) < 1e-4);
  pred a = open_pred(&hs_predictor_gru, PP), b = open_pred(&hs_predictor_gru, PP);
  hs_pred_params other = PP;
  other.seed = 2;
  pred c = open_pred(&hs_predictor_gru, other);
  int differ = 0;
  for (int i = 0; i < 200; i++) {
    double y = 0.01 * (1 + 0.3 * sin(0.7 * i));
    a.p->observe(a.st, y);
    b.p->observe(b.st, y);
    c.p->observe(c.st, y);
    double pa = a.p->predict(a.st), pb = b.p->predict(b.st), pc = c.p->predict(c.st);
    if (memcmp(&pa, &pb, sizeof pa)) HS_FAIL_AT("step %d: same seed, different predictions", i);
    ASSERT(isfinite(pa));
    differ |= pa != pc;
  }
  ASSERT(differ);
  close_pred(&a);
  close_pred(&b);
  close_pred(&c);
}

static const hs_test_case cases[] = {
    {"registry_order", test_registry_order},
    {"last_and_ema", test_last_and_ema},
    {"holt_linear_series", test_holt_linear_series},
    {"gru_learns_alternation", test_gru_learns_alternation},
    {"gru_constant_and_deterministic", test_gru_constant_and_deterministic},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  hs_gsl_init();
  return hs_test_main("pol_predict", cases, argc, argv);
}
