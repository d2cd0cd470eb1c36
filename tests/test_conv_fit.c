/* Convergence parameters fitted to a model's own curves: the analytic model refuses a model
 * outside the zoo that has none, takes a stored fit in place of the model's defaults, and the
 * convergence_fit table round-trips a fit (once per source and parameters, newest first, beta0
 * scaled to the run's data set); and the line that says where parameters came from
 * (convfit-1.x parsing, convfit-2.x store, convfit-3.x source text). */
#include <stdlib.h>
#include <unistd.h>

#include "core/core_store.h"
#include "sim/sim_conv.h"
#include "sim/sim_conv_fit.h"
#include "tests/hs_test.h"

static void remove_db(const char *path) {
  char aux[600];
  unlink(path);
  snprintf(aux, sizeof aux, "%s-wal", path);
  unlink(aux);
  snprintf(aux, sizeof aux, "%s-shm", path);
  unlink(aux);
}

/* convfit-1.1: a model outside the zoo has no analytic parameters unless they are given. */
static void test_refuse_unknown_model(void) {
  const hs_conv_model *m;
  hs_params p;
  hs_diag d = {0};
  ASSERT_EQ(hs_conv_parse("analytic", "mynet", NULL, &m, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "no parameters for model \"mynet\", which is not in the zoo");
  ASSERT_CONTAINS(d.msg, "hetsim fit-convergence --curves FILE.csv --model mynet");
  /* Part of the curve is not enough; all of it is. */
  ASSERT_EQ(hs_conv_parse("analytic:beta0=2,beta1=1", "mynet", NULL, &m, &p, &d), HS_EINVAL);
  ASSERT_EQ(hs_conv_parse("analytic:beta0=2,beta1=1,beta2=0.3", "mynet", NULL, &m, &p, &d), 0);
  ASSERT_NEAR(hs_params_get(&p, "beta0"), 2, 0);
  /* Zoo models keep their defaults; NULL (the fit's starting point) is never refused. */
  ASSERT_EQ(hs_conv_parse("analytic", "resnet18", NULL, &m, &p, &d), 0);
  ASSERT_EQ(hs_conv_parse("analytic", NULL, NULL, &m, &p, &d), 0);
  ASSERT_NEAR(hs_params_get(&p, "beta0"), 3, 0); /* the table's */
  /* The proxy is not the analytic model's business here (it refuses such models itself). */
  ASSERT_EQ(hs_conv_parse("proxy", "mynet", NULL, &m, &p, &d), 0);
}

/* convfit-1.2: a fitted layer replaces the model's defaults, under the file and the spec. */
static void test_fitted_layer(void) {
  const hs_conv_model *m;
  hs_params p;
  hs_diag d = {0};
  ASSERT_EQ(hs_conv_parse_fitted("analytic:beta2=0.1", "mynet", "beta0=7,beta1=0.3,beta2=0.5", NULL, &m, &p, &d), 0);
  ASSERT_NEAR(hs_params_get(&p, "beta0"), 7, 0);
  ASSERT_NEAR(hs_params_get(&p, "beta1"), 0.3, 0);
  ASSERT_NEAR(hs_params_get(&p, "beta2"), 0.1, 0); /* the spec wins */
  /* For mlp the fit replaces the built-in fit where it has keys (phi stays mlp's 67.24). */
  ASSERT_EQ(hs_conv_parse_fitted("analytic", "mlp", "beta0=7", NULL, &m, &p, &d), 0);
  ASSERT_NEAR(hs_params_get(&p, "beta0"), 7, 0);
  ASSERT_NEAR(hs_params_get(&p, "phi"), 67.24, 1e-12);
  ASSERT_EQ(hs_conv_parse_fitted("analytic", "mlp", "beta0=-1", NULL, &m, &p, &d), HS_EINVAL);
  ASSERT_EQ(hs_conv_parse_fitted("proxy", "mlp", "beta0=7", NULL, &m, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "only analytic");
}

/* convfit-2.1: store, read back, once per source and parameters, the newest wins. */
static void test_store_round_trip(void) {
  const char *path = hs_test_tmp("convfit.db");
  remove_db(path);
  hs_store *s = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_store_open(&s, path, 0, &d), 0);
  if (!s) return;
  hs_conv_fit f;
  ASSERT_EQ(hs_conv_fit_newest(s, "mynet", 0, &f, &d), HS_ENOTFOUND);
  hs_conv_coef c = {.phi = 300, .b0 = 128, .beta0 = 5, .beta1 = 0.5, .beta2 = 0.3, .lambda_s = 0.2,
                    .lambda_tau = 0.05, .lambda_c = 0.1, .acc_max = 0.9, .acc_alpha = 1.5};
  const char *fitted[] = {"beta0", "beta1", "beta2", NULL};
  hs_conv_fit_row row = {.model = "mynet", .coef = &c, .dataset_size = 30000, .classes = 10, .fitted = fitted,
                         .accuracy_rmse = NAN, .source = "c.csv fnv1a64:0123456789abcdef", .points = 48, .rmse = 0.01};
  int64_t id = 0;
  int existed = -1;
  ASSERT_EQ(hs_conv_fit_store(s, &row, &id, &existed, &d), 0);
  ASSERT_EQ(id, 1);
  ASSERT_EQ(existed, 0);
  ASSERT_EQ(hs_conv_fit_store(s, &row, &id, &existed, &d), 0); /* the same again: kept once */
  ASSERT_EQ(id, 1);
  ASSERT_EQ(existed, 1);
  ASSERT_EQ(hs_conv_fit_newest(s, "mynet", 0, &f, &d), 0);
  ASSERT_EQ(f.id, 1);
  ASSERT_STR(f.source, "c.csv fnv1a64:0123456789abcdef");
  ASSERT_EQ(f.points, 48);
  ASSERT_NEAR(f.rmse, 0.01, 0);
  ASSERT_NEAR(f.dataset_size, 30000, 0);
  ASSERT_NEAR(f.beta0_scale, 1, 0);
  ASSERT_CONTAINS(f.params, "beta0=5,");
  /* The parameters parse back to the same coefficients. */
  const hs_conv_model *m;
  hs_params p;
  ASSERT_EQ(hs_conv_parse_fitted("analytic", "mynet", f.params, NULL, &m, &p, &d), 0);
  hs_conv_coef back;
  hs_conv_coef_from(&p, &back);
  ASSERT(!memcmp(&back, &c, sizeof c));
  /* A run counting epochs of 60,000 samples: beta0 doubles. */
  ASSERT_EQ(hs_conv_fit_newest(s, "mynet", 60000, &f, &d), 0);
  ASSERT_NEAR(f.beta0_scale, 2, 0);
  ASSERT_CONTAINS(f.params, "beta0=10,");
  /* Another fit (new parameters, same source) is stored and becomes the newest; A again then
   * is newer still, and is stored again. */
  hs_conv_coef c2 = c;
  c2.beta2 = 0.25;
  row.coef = &c2;
  ASSERT_EQ(hs_conv_fit_store(s, &row, &id, &existed, &d), 0);
  ASSERT_EQ(id, 2);
  ASSERT_EQ(existed, 0);
  ASSERT_EQ(hs_conv_fit_newest(s, "mynet", 0, &f, &d), 0);
  ASSERT_EQ(f.id, 2);
  ASSERT_CONTAINS(f.params, "beta2=0.25");
  row.coef = &c;
  ASSERT_EQ(hs_conv_fit_store(s, &row, &id, &existed, &d), 0);
  ASSERT_EQ(id, 3);
  ASSERT_EQ(existed, 0);
  /* Fits belong to their model. */
  ASSERT_EQ(hs_conv_fit_newest(s, "othernet", 0, &f, &d), HS_ENOTFOUND);
  /* A coefficient that is not finite is refused, nothing stored. */
  c2.phi = NAN;
  row.coef = &c2;
  ASSERT_EQ(hs_conv_fit_store(s, &row, &id, &existed, &d), HS_EINVAL);
  ASSERT_EQ(hs_conv_fit_newest(s, "mynet", 0, &f, &d), 0);
  ASSERT_EQ(f.id, 3);
  hs_store_close(s);
  remove_db(path);
}

/* convfit-3.1: where the parameters came from. */
static void test_source_text(void) {
  char buf[512];
  hs_conv_fit f = {.id = 4, .source = "c.csv fnv1a64:00000000000000ff", .points = 12, .rmse = 0.0125, .beta0_scale = 1};
  hs_conv_source_text(&hs_conv_analytic, "mynet", &f, NULL, "analytic", buf, sizeof buf);
  ASSERT_STR(buf, "convergence_fit 4: c.csv fnv1a64:00000000000000ff (12 points, loss rmse 0.0125)");
  f.beta0_scale = 2;
  hs_conv_source_text(&hs_conv_analytic, "mynet", &f, NULL, "analytic:phi=3,beta2=0.1", buf, sizeof buf);
  ASSERT_STR(buf, "convergence_fit 4: c.csv fnv1a64:00000000000000ff (12 points, loss rmse 0.0125, beta0 rescaled to "
                  "this data set); set in --convergence: phi beta2");
  hs_conv_source_text(&hs_conv_analytic, "mlp", &f, "p.conf", "analytic", buf, sizeof buf);
  ASSERT_STR(buf, "--convergence-params p.conf");
  hs_conv_source_text(&hs_conv_analytic, "mlp", NULL, NULL, "analytic", buf, sizeof buf);
  ASSERT_STR(buf, "built-in fit of mlp to proxy runs (docs/convergence.md)");
  hs_conv_source_text(&hs_conv_analytic, "vgg16", NULL, NULL, "analytic:", buf, sizeof buf);
  ASSERT_STR(buf, "illustrative defaults, not fitted to any run (docs/convergence.md)");
  hs_conv_source_text(&hs_conv_proxy, "mlp", NULL, NULL, "proxy:lr=0.05", buf, sizeof buf);
  ASSERT_STR(buf, "proxy: trained, no fitted parameters; set in --convergence: lr");
  char small[8];
  hs_conv_source_text(&hs_conv_analytic, "vgg16", NULL, NULL, "analytic", small, sizeof small);
  ASSERT_EQ(strlen(small), 7); /* truncated, terminated */
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"refuse_unknown_model", test_refuse_unknown_model},
      {"fitted_layer", test_fitted_layer},
      {"store_round_trip", test_store_round_trip},
      {"source_text", test_source_text},
      {NULL, NULL},
  };
  return hs_test_main("convfit", cases, argc, argv);
}
