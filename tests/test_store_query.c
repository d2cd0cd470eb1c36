/* The printing commands' readers (core_store_query.h) and the sim and validate run options
 * (core_runopts.h): a user's statement refused for each reason, its limits, the cursor's
 * values, the tables' rows, and the options' exact text and round trip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_runopts.h"
#include "core/core_store.h"
#include "core/core_store_query.h"
#include "tests/hs_test.h"

/* A database with one complete run, two step rows and an evaluation. */
static hs_store *make_db(const char *name, int64_t *run) {
  const char *p = hs_test_tmp(name);
  unlink(p);
  hs_store *s = NULL;
  hs_diag d;
  hs_diag_clear(&d);
  if (hs_store_open(&s, p, 0, &d)) {
    HS_FAIL_AT("%s", d.msg);
    return NULL;
  }
  hs_run_info info = {.kind = "sim", .policy = "ssgd", .params = "", .cluster_name = "c", .model = "mlp",
                      .global_batch = 32, .seed = 1, .options_json = "{\"store\":\"steps\"}"};
  ASSERT_EQ(hs_store_run_begin(s, &info, run, &d), 0);
  ASSERT_EQ(hs_store_steps_begin(s, *run, &d), 0);
  hs_step_row r0 = {.worker = 0, .step = 0, .batch = 16, .start_s = 0, .compute_end_s = 1, .comm_end_s = NAN, .loss = NAN};
  hs_step_row r1 = {.worker = 1, .step = 0, .batch = 16, .start_s = 0, .compute_end_s = 2, .comm_end_s = 2.5, .loss = 0.5};
  ASSERT_EQ(hs_store_step_add(s, &r0, &d), 0);
  ASSERT_EQ(hs_store_step_add(s, &r1, &d), 0);
  ASSERT_EQ(hs_store_steps_end(s, &d), 0);
  ASSERT_EQ(hs_store_eval_add(s, *run, 2.5, 1, 0.25, NAN, &d), 0);
  hs_summary sum = {.workers = 2, .iterations = 1, .sim_time_s = 2.5, .mean_iteration_s = 2.5,
                    .final_loss = NAN, .final_accuracy = NAN, .time_to_target_s = NAN};
  ASSERT_EQ(hs_store_run_finish(s, *run, "complete", &sum, NULL, &d), 0);
  return s;
}

static void test_sql_refusals(void) {
  int64_t run;
  hs_store *s = make_db("q-refuse.db", &run);
  if (!s) return;
  static const struct {
    const char *sql;
    hs_sql_refusal why;
  } cases[] = {
      {"", HS_SQL_EMPTY},          {"-- only a comment", HS_SQL_EMPTY},
      {"SELEC 1", HS_SQL_BAD},     {"SELECT 1; SELECT 2", HS_SQL_MANY},
      {"DELETE FROM run", HS_SQL_WRITES},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    hs_rows *r = (hs_rows *)1;
    hs_sql_refusal why = HS_SQL_ACCEPTED;
    hs_diag d;
    hs_diag_clear(&d);
    ASSERT_EQ(hs_store_sql_open(s, cases[k].sql, NULL, &r, &why, &d), HS_EINVAL);
    ASSERT_EQ(why, cases[k].why);
    ASSERT(r == NULL);
  }
  /* ATTACH counts as reading for SQLite: it parses, and fails when it runs (no file may be
   * attached). */
  hs_rows *r = NULL;
  hs_sql_refusal why;
  hs_diag d;
  hs_diag_clear(&d);
  ASSERT_EQ(hs_store_sql_open(s, "ATTACH 'x.db' AS x", NULL, &r, &why, &d), 0);
  if (r) {
    ASSERT_EQ(hs_rows_next(r, &d), HS_EDB);
    ASSERT_CONTAINS(d.msg, "too many attached databases");
    hs_rows_close(r);
  }
  ASSERT(access("x.db", F_OK) != 0);
  /* A value longer than the limit fails when it is made. */
  hs_sql_limits lim = {.max_value_bytes = 100};
  ASSERT_EQ(hs_store_sql_open(s, "SELECT randomblob(1000)", &lim, &r, &why, &d), 0);
  if (r) {
    ASSERT_EQ(hs_rows_next(r, &d), HS_ELIMIT);
    hs_rows_close(r);
  }
  /* A statement that runs past the time limit is stopped. */
  lim = (hs_sql_limits){.time_s = 0.05};
  ASSERT_EQ(hs_store_sql_open(s, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                 "SELECT count(*) FROM c", &lim, &r, &why, &d), 0);
  if (r) {
    ASSERT_EQ(hs_rows_next(r, &d), HS_EINTR);
    hs_rows_close(r);
  }
  /* After it, the connection has no handler left: a long statement runs on. */
  ASSERT_EQ(hs_store_sql_open(s, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                                 "LIMIT 200000) SELECT count(*) FROM c", NULL, &r, &why, &d), 0);
  if (r) {
    ASSERT_EQ(hs_rows_next(r, &d), 1);
    ASSERT_EQ(hs_rows_int(r, 0), 200000);
    hs_rows_close(r);
  }
  hs_store_close(s);
}

static void test_values(void) {
  int64_t run;
  hs_store *s = make_db("q-values.db", &run);
  if (!s) return;
  hs_rows *r = NULL;
  hs_sql_refusal why;
  hs_diag d;
  hs_diag_clear(&d);
  ASSERT_EQ(hs_store_sql_open(s, "SELECT NULL AS n, 7 AS i, 0.5 AS x, 'a' || char(0) || 'b' AS t, x'00ff' AS b",
                              NULL, &r, &why, &d), 0);
  if (!r) return;
  ASSERT_EQ(hs_rows_columns(r), 5);
  ASSERT_STR(hs_rows_name(r, 3), "t");
  ASSERT_EQ(hs_rows_next(r, &d), 1);
  ASSERT_EQ(hs_rows_type(r, 0), HS_VALUE_NULL);
  ASSERT(isnan(hs_rows_real_or_nan(r, 0)));
  ASSERT(hs_rows_text(r, 0, NULL) == NULL);
  ASSERT_EQ(hs_rows_type(r, 1), HS_VALUE_INT);
  ASSERT_EQ(hs_rows_int(r, 1), 7);
  ASSERT_EQ(hs_rows_type(r, 2), HS_VALUE_REAL);
  ASSERT(hs_rows_real(r, 2) == 0.5);
  size_t len = 0;
  const char *t = hs_rows_text(r, 3, &len);
  ASSERT_EQ(len, 3);
  ASSERT(t && memcmp(t, "a\0b", 3) == 0);
  const unsigned char *b = hs_rows_blob(r, 4, &len);
  ASSERT_EQ(len, 2);
  ASSERT(b && b[0] == 0 && b[1] == 0xff);
  ASSERT_EQ(hs_rows_next(r, &d), 0);
  hs_rows_close(r);
  hs_store_close(s);
}

static void test_tables(void) {
  int64_t run;
  hs_store *s = make_db("q-tables.db", &run);
  if (!s) return;
  hs_diag d;
  hs_diag_clear(&d);
  ASSERT_EQ(hs_store_run_exists(s, run, &d), 1);
  ASSERT_EQ(hs_store_run_exists(s, run + 1, &d), 0);
  hs_rows *r = NULL;
  ASSERT_EQ(hs_store_run_table_open(s, HS_TABLE_STEP, run, &r, &d), 0);
  int n = 0;
  while (r && hs_rows_next(r, &d) == 1) n++;
  ASSERT_EQ(n, 2);
  hs_rows_close(r);
  ASSERT_EQ(hs_store_steps_open(s, run, 1, &r, &d), 0);
  n = 0;
  while (r && hs_rows_next(r, &d) == 1) n++;
  ASSERT_EQ(n, 1);
  hs_rows_close(r);
  hs_run_filter f = {.policy = "lbb"};
  ASSERT_EQ(hs_store_runs_open(s, &f, &r, &d), 0);
  ASSERT_EQ(r ? hs_rows_next(r, &d) : -1, 0);
  hs_rows_close(r);
  int64_t nc = -1;
  ASSERT_EQ(hs_store_runs_not_complete(s, NULL, &nc, &d), 0);
  ASSERT_EQ(nc, 0);
  int64_t ids[3] = {run, run, run};
  ASSERT_EQ(hs_store_compare_open(s, ids, 3, &r, &d), 0);
  if (r) {
    ASSERT_EQ(hs_rows_columns(r), 6); /* metric, 3 runs, 2 ratios */
    ASSERT_EQ(hs_rows_next(r, &d), 1);
    ASSERT_STR(hs_rows_text(r, 0, NULL), "workers");
    ASSERT(hs_rows_real(r, 4) == 1.0);
  }
  hs_rows_close(r);
  ASSERT_EQ(hs_store_report_open(s, HS_REPORT_TIMELINE_BOUNDS, run, 32, &r, &d), 0);
  if (r) {
    ASSERT_EQ(hs_rows_next(r, &d), 1);
    ASSERT_EQ(hs_rows_int(r, 0), 2);  /* rows */
    ASSERT_EQ(hs_rows_int(r, 1), 2);  /* workers */
    ASSERT(hs_rows_real(r, 3) == 2.5); /* last end */
  }
  hs_rows_close(r);
  hs_store_close(s);
}

/* The sim options' text as `hetsim sim` has always written it, and back. */
static void test_sim_options(void) {
  hs_sim_options o;
  memset(&o, 0, sizeof o); /* padding too: the round trip compares the bytes */
  o.iterations = 20, o.epochs = 0.5, o.target_loss = 0.1, o.store_steps = 1;
  o.grad_bytes = 44730368, o.convergence_fit_id = 3;
  snprintf(o.convergence, sizeof o.convergence, "analytic");
  snprintf(o.convergence_params, sizeof o.convergence_params, "a=1,b=2");
  snprintf(o.events_csv, sizeof o.events_csv, "ev \"1\".csv");
  snprintf(o.convergence_source, sizeof o.convergence_source, "fit 3");
  char buf[8192];
  hs_diag d;
  hs_diag_clear(&d);
  ASSERT_EQ(hs_sim_options_format(&o, buf, sizeof buf, &d), 0);
  ASSERT_STR(buf, "{\"iterations\":20,\"epochs\":0.5,\"sim_time_s\":0,\"store\":\"steps\",\"convergence\":\"analytic\","
                  "\"convergence_params\":\"a=1,b=2\",\"target_loss\":0.10000000000000001,\"target_accuracy\":0,"
                  "\"events_csv\":\"ev \\\"1\\\".csv\",\"grad_bytes\":44730368,\"convergence_source\":\"fit 3\","
                  "\"convergence_fit_id\":3}");
  hs_sim_options back;
  ASSERT_EQ(hs_sim_options_parse(buf, &back, &d), 0);
  ASSERT(memcmp(&o, &back, sizeof o) == 0);
  hs_sim_options none = {.iterations = 5};
  snprintf(none.convergence, sizeof none.convergence, "none");
  ASSERT_EQ(hs_sim_options_format(&none, buf, sizeof buf, &d), 0);
  ASSERT_STR(buf, "{\"iterations\":5,\"epochs\":0,\"sim_time_s\":0,\"store\":\"summary\",\"convergence\":\"none\","
                  "\"convergence_params\":\"\",\"target_loss\":0,\"target_accuracy\":0,\"events_csv\":null,"
                  "\"grad_bytes\":0,\"convergence_source\":null,\"convergence_fit_id\":null}");
  char small[40];
  ASSERT_EQ(hs_sim_options_format(&none, small, sizeof small, &d), HS_EINVAL);
  ASSERT_STR(small, "");
  ASSERT_EQ(hs_sim_options_parse("[1]", &back, &d), HS_EINVAL);
}

static void test_validate_options(void) {
  hs_validate_options o;
  memset(&o, 0, sizeof o);
  o.validates = 7, o.iterations = 30, o.target_loss = 0.3, o.grad_bytes = 1000;
  snprintf(o.convergence, sizeof o.convergence, "proxy");
  snprintf(o.validation_key, sizeof o.validation_key, "0123456789abcdef");
  char buf[1024];
  hs_diag d;
  hs_diag_clear(&d);
  ASSERT_EQ(hs_validate_options_format(&o, buf, sizeof buf, &d), 0);
  ASSERT_STR(buf, "{\"validates\":7,\"iterations\":30,\"convergence\":\"proxy\",\"target_loss\":0.29999999999999999,"
                  "\"grad_bytes\":1000,\"validation_key\":\"0123456789abcdef\"}");
  hs_validate_options back;
  ASSERT_EQ(hs_validate_options_parse(buf, &back, &d), 0);
  ASSERT(memcmp(&o, &back, sizeof o) == 0);
  o.target_loss = NAN;
  snprintf(o.convergence, sizeof o.convergence, "none");
  ASSERT_EQ(hs_validate_options_format(&o, buf, sizeof buf, &d), 0);
  ASSERT_CONTAINS(buf, "\"convergence\":\"none\",\"target_loss\":null,");
  ASSERT_EQ(hs_validate_options_parse(buf, &back, &d), 0);
  ASSERT(isnan(back.target_loss));
}

static const hs_test_case cases[] = {
    {"sql_refusals", test_sql_refusals},
    {"values", test_values},
    {"tables", test_tables},
    {"sim_options", test_sim_options},
    {"validate_options", test_validate_options},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("store_query", cases, argc, argv); }
