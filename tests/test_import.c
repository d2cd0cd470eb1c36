/* test_import: `hetsim calib import` as a library (calib/cal_import.h) on the profiles in
 * tests/data/: what a good profile stores and fits, that a second import changes nothing, that
 * every kind of bad document names its JSON path and stores nothing, that one import inside a
 * caller's transaction rolls back with it, and that a model outside the zoo becomes simulable:
 * a one-worker SSGD run at an imported batch size takes exactly that batch's measured step
 * median per iteration. */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/cal_import.h"
#include "core/core_config.h"
#include "core/core_perfmodel.h"
#include "policies/pol_registry.h"
#include "sim/sim_run.h"
#include "tests/hs_test.h"

static const char *data_path(const char *file, char *buf, size_t n) {
  const char *src = getenv("HETSIM_SOURCE_DIR");
  snprintf(buf, n, "%s/tests/data/%s", src ? src : ".", file);
  return buf;
}

static char *slurp(const char *file, size_t *len) {
  char path[1024];
  char *text = NULL;
  hs_diag d = {0};
  if (hs_cal_import_read(data_path(file, path, sizeof path), &text, len, &d)) HS_FAIL_AT("%s", d.msg);
  return text;
}

static hs_store *fresh_store(char *path, size_t n, const char *tag) {
  snprintf(path, n, "/tmp/hs-test-import-%s-%d.db", tag, (int)getpid());
  hs_test_unlink_db(path);
  hs_store *s = NULL;
  hs_diag d = {0};
  if (hs_store_open(&s, path, 0, &d)) HS_FAIL_AT("%s", d.msg);
  return s;
}

static void drop_store(hs_store *s, const char *path) {
  hs_store_close(s);
  hs_test_unlink_db(path);
}

static int64_t scalar(hs_store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(hs_store_db(s), sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  else HS_FAIL_AT("%s: %s", sql, sqlite3_errmsg(hs_store_db(s)));
  sqlite3_finalize(st);
  return v;
}

/* A fingerprint of everything an import may write: row counts and the largest ids. */
static void snapshot(hs_store *s, int64_t out[8]) {
  static const char *const sql[8] = {
      "SELECT count(*) FROM device", "SELECT count(*) FROM model", "SELECT count(*) FROM calib_sample",
      "SELECT count(*) FROM perf_model", "SELECT count(*) FROM comm_sample", "SELECT count(*) FROM comm_model",
      "SELECT coalesce(max(id), 0) FROM perf_model", "SELECT coalesce(max(id), 0) FROM comm_model",
  };
  for (int i = 0; i < 8; i++) out[i] = scalar(s, sql[i]);
}

static void assert_same(const int64_t a[8], const int64_t b[8]) {
  for (int i = 0; i < 8; i++)
    if (a[i] != b[i]) HS_FAIL_AT("fingerprint %d changed: %lld -> %lld", i, (long long)a[i], (long long)b[i]);
}

static void test_good(void) {
  char path[256];
  hs_store *s = fresh_store(path, sizeof path, "good");
  if (!s) return;
  hs_cal_import_info info;
  hs_diag d = {0};
  char file[1024];
  ASSERT_EQ(hs_cal_import_file(s, data_path("profile-tinynet.json", file, sizeof file), &info, &d), 0);
  ASSERT_STR(info.device, "Test GPU T1");
  ASSERT_STR(info.model, "tinynet");
  ASSERT_EQ(info.unchanged, 0);
  ASSERT_EQ(info.model_added, 1);
  ASSERT_EQ(info.model_in_zoo, 0);
  ASSERT_EQ(info.samples, 7);        /* 3 steps, 3 phases at batch 64 and the step summed from them */
  ASSERT_EQ(info.derived_steps, 1);
  ASSERT_EQ(info.batches, 4);
  ASSERT_EQ(info.comm_samples, 4);
  ASSERT_EQ(info.oom_batch, 128);
  ASSERT_EQ(info.max_batch, 64);
  ASSERT_EQ(info.fitted[HS_CAL_STEP], 1);
  ASSERT_EQ(info.fitted[HS_CAL_FORWARD], 0); /* one batch size only */
  ASSERT_CONTAINS(info.fit_notes, "forward: too few batch sizes");
  ASSERT_EQ(info.n_comm, 2);
  ASSERT_EQ(info.fits, 2); /* the step phase and the gloo all-reduce */
  ASSERT_STR(info.comm[0].op, "allreduce");
  ASSERT_EQ(info.comm[0].fitted, 1);
  ASSERT_EQ(info.comm[0].sizes, 3);
  ASSERT_STR(info.comm[1].op, "p2p");
  ASSERT_EQ(info.comm[1].fitted, 0);
  ASSERT_CONTAINS(info.comm[1].why, "2 distinct message sizes");
  /* The step is 2 ms + 0.1 ms per sample exactly: the linear form is chosen and recovers it. */
  const hs_fit_set *fs = &info.fits_by_phase[HS_CAL_STEP];
  ASSERT_EQ(fs->chosen, HS_PERF_LINEAR);
  ASSERT_REL(fs->r[HS_PERF_LINEAR].model.p[0], 0.002, 1e-9);
  ASSERT_REL(fs->r[HS_PERF_LINEAR].model.p[1], 0.0001, 1e-9);
  /* What the database holds. */
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM device WHERE name = 'Test GPU T1' AND kind = 'cuda' AND host = "
                      "'testhost' AND memory_bytes = 17179869184 AND sm_count = 40 AND compute_capability = '7.5'"),
            1);
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM device WHERE source LIKE 'profile %s (hand-written test profile, "
                            "2026-11-25T12:00:00Z; plain, world size 1, 1 concurrent, float32%%'", info.hash);
  ASSERT_EQ(scalar(s, sql), 1);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM model WHERE name = 'tinynet' AND params = 1000000 AND grad_bytes = "
                      "4000000 AND flops_per_sample = 6e6 AND source LIKE 'profile % on Test GPU T1, built as tests:tinynet'"),
            1);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM calib_sample WHERE batch = 64 AND phase = 'step' AND abs(median_s - 0.0084) "
                      "< 1e-15 AND p10_s IS NULL AND count = 20"),
            1);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM calib_sample WHERE batch = 32 AND phase = 'step' AND p10_s IS NULL AND count = 25"), 1);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM perf_model WHERE phase = 'step' AND chosen = 1 AND form = 'linear' AND "
                      "max_batch = 64 AND heldout_rel_error IS NOT NULL"),
            1);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM perf_model WHERE phase <> 'step'"), 0);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM comm_sample WHERE backend = 'gloo'"), 4);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM comm_model WHERE backend = 'gloo' AND op = 'allreduce' AND world_size = 2 "
                      "AND alpha_s > 0 AND beta_bytes_per_s > 0"),
            1);
  /* The fit the simulator loads: the measured medians at their batches, the fit between. */
  hs_perf_model pm;
  ASSERT_EQ(hs_perf_load(s, "Test GPU T1", "tinynet", &pm, NULL, &d), 0);
  ASSERT_EQ(pm.max_batch, 64);
  ASSERT_EQ(pm.n_points, 4);
  ASSERT_NEAR(hs_perf_eval(&pm, 32), 0.0052, 1e-15);
  ASSERT_NEAR(hs_perf_eval(&pm, 64), 0.0084, 1e-15);
  ASSERT_REL(hs_perf_eval(&pm, 48), 0.0068, 1e-9);
  drop_store(s, path);
}

static void test_twice(void) {
  char path[256];
  hs_store *s = fresh_store(path, sizeof path, "twice");
  if (!s) return;
  size_t len;
  char *text = slurp("profile-tinynet.json", &len);
  hs_cal_import_info info;
  hs_diag d = {0};
  int64_t a[8], b[8];
  ASSERT_EQ(hs_cal_import_text(s, "t.json", text, len, &info, &d), 0);
  int64_t dev = info.device_id;
  snapshot(s, a);
  ASSERT_EQ(hs_cal_import_text(s, "t-again.json", text, len, &info, &d), 0);
  ASSERT_EQ(info.unchanged, 1);
  ASSERT_EQ(info.device_id, dev);
  ASSERT_EQ(info.samples, 0);
  ASSERT_EQ(info.model_added, 0);
  snapshot(s, b);
  assert_same(a, b);
  /* The same document under another device name is another device. */
  hs_cal_import_opts o = {.device_name = "Renamed T1"};
  ASSERT_EQ(hs_cal_import_text_opts(s, "t.json", text, len, &o, &info, &d), 0);
  ASSERT_EQ(info.unchanged, 0);
  ASSERT_STR(info.device, "Renamed T1");
  ASSERT_EQ(info.model_added, 0); /* the model row is kept */
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM device"), 2);
  /* A changed document (one median) is a new measurement: a new device row, the newest wins. */
  char *changed = malloc(len + 1);
  memcpy(changed, text, len);
  changed[len] = '\0';
  char *at = strstr(changed, "\"median_s\": 0.0052");
  ASSERT(at);
  if (at) memcpy(at, "\"median_s\": 0.0053", 18);
  ASSERT_EQ(hs_cal_import_text(s, "t2.json", changed, len, &info, &d), 0);
  ASSERT_EQ(info.unchanged, 0);
  ASSERT(info.device_id > dev);
  hs_perf_model pm;
  ASSERT_EQ(hs_perf_load(s, "Test GPU T1", "tinynet", &pm, NULL, &d), 0);
  ASSERT_NEAR(hs_perf_eval(&pm, 32), 0.0053, 1e-15);
  /* A zoo model measured by 2 concurrent processes: "NAME (2 workers)", the zoo's row. */
  size_t ml;
  char *mlp = slurp("profile-mlp-2workers.json", &ml);
  ASSERT_EQ(hs_cal_import_text(s, "m.json", mlp, ml, &info, &d), 0);
  ASSERT_STR(info.device, "Test CPU C1 (2 workers)");
  ASSERT_EQ(info.model_in_zoo, 1);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM model WHERE name = 'mlp' AND source IS NULL AND params = 203530"), 1);
  free(mlp);
  free(changed);
  free(text);
  drop_store(s, path);
}

/* Replaces the first occurrence of from in text by to, into a fresh string. */
static char *replace(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  if (!at) {
    HS_FAIL_AT("the test profile lacks \"%s\"", from);
    return NULL;
  }
  size_t n = strlen(text) - strlen(from) + strlen(to);
  char *out = malloc(n + 1);
  size_t head = (size_t)(at - text);
  memcpy(out, text, head);
  strcpy(out + head, to);
  strcat(out, at + strlen(from));
  return out;
}

/* An allreduce_step entry of gloo over 2 ranks, to insert at the head of $.comm; more: its last
 * key. */
#define STEP_ENTRY(bytes, mean, more)                                                                  \
  "{\"backend\": \"gloo\", \"op\": \"allreduce_step\", \"world_size\": 2, \"bytes\": " bytes \
  ", \"median_s\": 0.00045, \"p10_s\": 0.0004, \"p90_s\": 0.005, \"count\": 50, \"mean_s\": " mean ", " more "},\n"

typedef struct bad_case {
  const char *from, *to; /* the edit of profile-tinynet.json */
  const char *want;      /* in the message, after "bad.json: " */
} bad_case;

static void test_bad(void) {
  static const bad_case cases[] = {
      /* syntax */
      {"\"version\": 1,", "\"version\": 1,,", "bad.json:3:16: expected a key in double quotes"},
      /* format and version */
      {"\"hetsim-profile\"", "\"other\"", "$.format: expected \"hetsim-profile\", got \"other\""},
      {"\"version\": 1", "\"version\": 2", "$.version: expected 1 (the profile version this hetsim reads), got 2; a newer hetsim may read it"},
      {"\"version\": 1,", "", "$.version: missing (required)"},
      /* a missing field, a null required one */
      {"\"tool\": \"hand-written test profile\",", "", "$.tool: missing (required)"},
      {"\"name\": \"Test GPU T1\"", "\"name\": null", "$.device.name: required, got null"},
      {"\"params\": 1000000,", "", "$.model.params: missing (required)"},
      {"\"dtype\": \"float32\"", "\"dtyp\": \"float32\"", "$.execution.dtyp: unknown key; expected one of mode, world_size"},
      /* unknown keys: typos are caught */
      {"\"sm_count\": 40", "\"sm_cnt\": 40", "$.device.sm_cnt: unknown key; expected one of name, kind"},
      {"\"oom_batch\": 128", "\"oom\": 128", "$.oom: unknown key"},
      /* wrong units, negative or zero times */
      {"\"median_s\": 0.0036", "\"median_s\": \"3.6ms\"",
       "$.compute[1].median_s: expected a positive number of seconds, got \"3.6ms\" (numbers are plain JSON numbers"},
      {"\"median_s\": 0.0036", "\"median_s\": -0.0036", "$.compute[1].median_s: expected a positive number of seconds, got -0.0036"},
      {"\"median_s\": 0.0025", "\"median_s\": 0", "$.compute[3].median_s: expected a positive number of seconds, got 0"},
      {"\"median_s\": 0.0323", "\"median_s\": -1", "$.comm[2].median_s: expected a positive number of seconds, got -1"},
      {"\"memory_bytes\": 17179869184", "\"memory_bytes\": \"16GiB\"", "$.device.memory_bytes: expected a non-negative integer of bytes, got \"16GiB\""},
      {"\"bytes\": 4096", "\"bytes\": -4096", "$.comm[0].bytes: expected a non-negative integer (message bytes), got -4096"},
      {"\"count\": 30,\n     \"peak", "\"count\": 0,\n     \"peak", "$.compute[0].count: expected a positive integer (timed repetitions), got 0"},
      {"\"batch\": 16", "\"batch\": 16.5", "$.compute[1].batch: expected a positive integer (samples), got 16.5"},
      {"\"flops_per_sample\": 6.0e6", "\"flops_per_sample\": -1", "$.model.flops_per_sample: expected a positive number of FLOP"},
      /* what a pooled timing was pooled from (hetsim_profile.py --rounds, --concurrent) */
      {"\"count\": 30,\n     \"peak", "\"count\": 30, \"processes\": 0,\n     \"peak",
       "$.compute[0].processes: expected a positive integer (processes pooled), got 0"},
      {"\"count\": 30,\n     \"peak", "\"count\": 30, \"process_medians_s\": [],\n     \"peak",
       "$.compute[0].process_medians_s: expected a non-empty array of positive numbers of seconds, got []"},
      {"\"count\": 30,\n     \"peak", "\"count\": 30, \"process_medians_s\": [0.0028, -1],\n     \"peak",
       "$.compute[0].process_medians_s[1]: expected a positive number of seconds, got -1"},
      /* inconsistent numbers */
      {"\"p10_s\": 0.0027", "\"p10_s\": 0.0029", "$.compute[0].p10_s: expected at most median_s (0.0028), got 0.0029"},
      {"\"p90_s\": 0.0038", "\"p90_s\": 0.0030", "$.compute[1].p90_s: expected at least median_s (0.0036), got 0.003"},
      {"\"oom_batch\": 128", "\"oom_batch\": 64", "$.oom_batch: expected a batch above every timed one"},
      {"{\"batch\": 16, \"phase\": \"step\"", "{\"batch\": 8, \"phase\": \"step\"", "$.compute[1]: batch 8, phase step is timed twice (also $.compute[0])"},
      {"\"phase\": \"update\"", "\"phase\": \"forward\"", "$.compute[5]: batch 64, phase forward is timed twice (also $.compute[3])"},
      {"{\"batch\": 64, \"phase\": \"backward\"", "{\"batch\": 100, \"phase\": \"backward\"",
       "$.compute[3]: batch 64 has no \"step\" timing and not all of forward, backward and update to sum one from"},
      {"{\"batch\": 32, \"phase\": \"step\"", "{\"batch\": 16, \"phase\": \"step\"", "$.compute[2]: batch 16, phase step is timed twice (also $.compute[1])"},
      {"\"bytes\": 65536", "\"bytes\": 4096, \"op\": \"x\"", "the key \"op\" is repeated in one object"},
      /* enums */
      {"\"kind\": \"cuda\"", "\"kind\": \"tpu\"", "$.device.kind: expected one of \"cuda\", \"cpu\", got \"tpu\""},
      {"\"phase\": \"step\"", "\"phase\": \"total\"", "$.compute[0].phase: expected one of \"forward\", \"backward\", \"update\", \"step\", got \"total\""},
      {"\"backend\": \"gloo\"", "\"backend\": \"mpi\"", "$.comm[0].backend: expected one of \"nccl\", \"gloo\", got \"mpi\""},
      {"\"mode\": \"plain\"", "\"mode\": \"fsdp\"", "$.execution.mode: expected one of \"plain\", \"ddp\", got \"fsdp\""},
      {"\"world_size\": 2, \"bytes\": 4096", "\"world_size\": 1, \"bytes\": 4096", "$.comm[0].world_size: expected an integer of at least 2"},
      /* types and shapes */
      {"\"created_at\": \"2026-11-25T12:00:00Z\"", "\"created_at\": \"25/11/2026\"", "$.created_at: expected an ISO-8601 UTC time"},
      {"{\"notes\": \"numbers chosen for tests/test_import.c: step = 2 ms + 0.1 ms per sample\"}", "\"gavel\"",
       "$.source: expected an object, got \"gavel\""},
      {"\"compute\": [", "\"compute\": [[], ", "$.compute[0]: expected an object, got an array"},
      {"\"name\": \"tinynet\"", "\"name\": \"tiny net\"", "$.model.name: expected a name of letters, digits and \"._+-\""},
      {"\"name\": \"tinynet\"", "\"name\": \"mlp\"", "$.model.params: expected 203530, the parameters of the zoo's mlp"},
      {"\"concurrent\": 1", "\"concurrent\": 0", "$.execution.concurrent: expected an integer from 1 to 1024"},
      /* the all-reduce as DDP issues it (op allreduce_step) and means */
      {"\"op\": \"p2p\"", "\"op\": \"allreduce_step\"", "$.comm[3].mean_s: missing (required)"},
      {"\"bytes\": 65536,", "\"bytes\": 65536, \"mean_s\": -0.0001,",
       "$.comm[3].mean_s: expected a positive number of seconds, got -0.0001"},
      {"\"bytes\": 65536,", "\"bytes\": 65536, \"mean_s\": \"1ms\",", "$.comm[3].mean_s: expected a positive number of seconds"},
      {"\"bytes\": 4096,", "\"bytes\": 4096, \"batch\": 32,",
       "$.comm[0].batch: unknown key; expected one of backend, op, world_size, bytes, median_s, p10_s, p90_s, count, mean_s"},
      {"\"bytes\": 4096,", "\"bytes\": 4096, \"buckets\": 1,", "$.comm[0].buckets: unknown key"},
      {"\"comm\": [", "\"comm\": [" STEP_ENTRY("4000000", "0.002", "\"batch\": 0"),
       "$.comm[0].batch: expected a positive integer (samples per rank), got 0"},
      {"\"comm\": [", "\"comm\": [" STEP_ENTRY("4000000", "0.002", "\"buckets\": 1.5"),
       "$.comm[0].buckets: expected a positive integer (DDP's gradient buckets), got 1.5"},
      {"\"comm\": [", "\"comm\": [" STEP_ENTRY("4000000", "0.002", "\"peak\": 1"), "$.comm[0].peak: unknown key"},
      {"\"comm\": [", "\"comm\": [" STEP_ENTRY("0", "0.002", "\"batch\": 32"),
       "$.comm[0].bytes: expected a positive integer (the gradient's bytes), got 0"},
      {"\"comm\": [", "\"comm\": [" STEP_ENTRY("4000000", "0.002", "\"batch\": 32") STEP_ENTRY("8000000", "0.003", "\"batch\": 32"),
       "$.comm[1]: gloo allreduce_step over 2 ranks at 8000000 bytes, and at 4000000 bytes in $.comm[0]: expected one per "
       "backend and world size"},
      {"\"comm\": [", "\"comm\": [" STEP_ENTRY("4000000", "0.002", "\"batch\": 32") STEP_ENTRY("4000000", "0.003", "\"batch\": 32"),
       "$.comm[1]: gloo allreduce_step over 2 ranks at 4000000 bytes is timed twice (also $.comm[0])"},
  };
  char path[256];
  hs_store *s = fresh_store(path, sizeof path, "bad");
  if (!s) return;
  size_t len;
  char *good = slurp("profile-tinynet.json", &len);
  if (!good) return;
  /* A database that already holds something, which a refused document must not touch. */
  size_t ml;
  char *mlp = slurp("profile-mlp-2workers.json", &ml);
  hs_cal_import_info info;
  hs_diag d = {0};
  ASSERT_EQ(hs_cal_import_text(s, "m.json", mlp, ml, &info, &d), 0);
  int64_t before[8], after[8];
  snapshot(s, before);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *bad = replace(good, cases[i].from, cases[i].to);
    if (!bad) continue;
    hs_diag_clear(&d);
    int rc = hs_cal_import_text(s, "bad.json", bad, strlen(bad), &info, &d);
    if (rc != HS_EINVAL) HS_FAIL_AT("case %zu (%s): expected HS_EINVAL, got %d (%s)", i, cases[i].to, rc, d.msg);
    if (!strstr(d.msg, cases[i].want)) HS_FAIL_AT("case %zu: message \"%s\" lacks \"%s\"", i, d.msg, cases[i].want);
    if (strncmp(d.msg, "bad.json", 8)) HS_FAIL_AT("case %zu: message \"%s\" does not name the file first", i, d.msg);
    /* The same verdict without a database. */
    hs_diag cd = {0};
    if (hs_cal_import_check("bad.json", bad, strlen(bad), NULL, &info, &cd) != HS_EINVAL || strcmp(cd.msg, d.msg))
      HS_FAIL_AT("case %zu: hs_cal_import_check said \"%s\"", i, cd.msg);
    free(bad);
  }
  snapshot(s, after);
  assert_same(before, after);
  /* Fewer than three batch sizes with a step time. */
  static const char two[] =
      "{\"format\": \"hetsim-profile\", \"version\": 1, \"created_at\": \"2026-11-25T12:00:00Z\", \"tool\": \"t\",\n"
      " \"device\": {\"name\": \"D\", \"kind\": \"cpu\"},\n"
      " \"model\": {\"name\": \"two\", \"params\": 10, \"grad_bytes\": 40},\n"
      " \"execution\": {\"mode\": \"plain\", \"world_size\": 1, \"concurrent\": 1, \"dtype\": \"float32\"},\n"
      " \"compute\": [{\"batch\": 8, \"phase\": \"step\", \"median_s\": 0.001, \"count\": 3},\n"
      "             {\"batch\": 16, \"phase\": \"step\", \"median_s\": 0.002, \"count\": 3}]}";
  ASSERT_EQ(hs_cal_import_text(s, "bad.json", two, strlen(two), &info, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "bad.json: $.compute: step times at 2 batch sizes; fitting t(b) and judging it on held-out batch sizes needs at least 3");
  char *none = replace(two, "[{\"batch\": 8", "[], \"extra\": [{\"batch\": 8");
  if (none) {
    ASSERT_EQ(hs_cal_import_text(s, "bad.json", none, strlen(none), &info, &d), HS_EINVAL);
    ASSERT_CONTAINS(d.msg, "bad.json: $.compute: expected at least one timing, got an empty array");
    free(none);
  }
  snapshot(s, after);
  assert_same(before, after);
  /* Another network under the name of an imported one: refused inside the transaction. */
  ASSERT_EQ(hs_cal_import_text(s, "t.json", good, len, &info, &d), 0);
  snapshot(s, before);
  char *other = replace(good, "\"params\": 1000000", "\"params\": 999999");
  char *other2 = other ? replace(other, "\"Test GPU T1\"", "\"Test GPU T2\"") : NULL;
  if (other2) {
    ASSERT_EQ(hs_cal_import_text(s, "other.json", other2, strlen(other2), &info, &d), HS_EINVAL);
    ASSERT_CONTAINS(d.msg, "other.json: $.model.params: expected 1000000, the parameters of the model \"tinynet\" already in");
    ASSERT_EQ(hs_cal_import_check("other.json", other2, strlen(other2), NULL, &info, &d), 0); /* only the database knows */
  }
  snapshot(s, after);
  assert_same(before, after);
  /* --as: a name too long. */
  char longname[HS_CAL_IMPORT_NAME_MAX + 2];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  hs_cal_import_opts o = {.device_name = longname};
  ASSERT_EQ(hs_cal_import_text_opts(s, "t.json", good, len, &o, &info, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "--as: expected a device name of 1 to 100 characters");
  /* A file that is not there. */
  ASSERT_EQ(hs_cal_import_file(s, "/nonexistent/p.json", &info, &d), HS_EIO);
  ASSERT_CONTAINS(d.msg, "/nonexistent/p.json: cannot open");
  free(other), free(other2);
  free(mlp);
  free(good);
  drop_store(s, path);
}

/* The ring time of a link over n ranks at m bytes, as the simulator charges an all-reduce. */
static double ring_time(const hs_link_spec *l, int n, double m) {
  return 2.0 * (n - 1) * (l->latency + m / (n * l->bandwidth));
}

/* An allreduce_step entry (the whole gradient's all-reduce as DDP issues it) is stored with its
 * mean, reported and not fitted; a mean on a plain entry is stored too. A link {calib: NAME} of
 * the device then takes the step's mean at the run's gradient (within 1%), and the sweep's
 * interpolated time elsewhere. */
static void test_step(void) {
  char path[256];
  hs_store *s = fresh_store(path, sizeof path, "step");
  if (!s) return;
  size_t len;
  char *good = slurp("profile-tinynet.json", &len);
  char *a = good ? replace(good, "\"comm\": [", "\"comm\": [" STEP_ENTRY("4000000", "0.002", "\"batch\": 32, \"buckets\": 1")) : NULL;
  char *text = a ? replace(a, "\"bytes\": 65536,", "\"bytes\": 65536, \"mean_s\": 0.00012,") : NULL;
  if (!text) return;
  hs_cal_import_info info;
  hs_diag d = {0};
  ASSERT_EQ(hs_cal_import_text(s, "step.json", text, strlen(text), &info, &d), 0);
  ASSERT_EQ(info.comm_samples, 5);
  ASSERT_EQ(info.n_comm, 3);
  ASSERT_EQ(info.fits, 2); /* the step phase and the gloo all-reduce, as without the entry */
  ASSERT_STR(info.comm[1].op, "allreduce_step");
  ASSERT_EQ(info.comm[1].sizes, 1);
  ASSERT_EQ(info.comm[1].fitted, 0);
  ASSERT_EQ(info.comm[1].bytes, 4000000);
  ASSERT_NEAR(info.comm[1].mean_s, 0.002, 0);
  ASSERT_CONTAINS(info.comm[1].why, "the all-reduce as DDP issues it, used at its size (4000000 bytes) by its mean (0.002 s of 50 steps, batch 32 per rank, 1 bucket)");
  ASSERT(isnan(info.comm[0].mean_s));
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM comm_sample WHERE op = 'allreduce_step' AND backend = 'gloo' AND world_size = 2"
                      " AND bytes = 4000000 AND median_s = 0.00045 AND p10_s = 0.0004 AND p90_s = 0.005 AND count = 50"
                      " AND mean_s = 0.002"), 1);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM comm_sample WHERE op = 'p2p' AND mean_s = 0.00012"), 1);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM comm_sample WHERE op = 'allreduce' AND mean_s IS NULL"), 3);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM comm_model WHERE op = 'allreduce_step'"), 0);
  /* Twice: nothing changes. */
  int64_t before[8], after[8];
  snapshot(s, before);
  ASSERT_EQ(hs_cal_import_text(s, "step.json", text, strlen(text), &info, &d), 0);
  ASSERT_EQ(info.unchanged, 1);
  snapshot(s, after);
  assert_same(before, after);

  /* The link: a ring of 2 takes the step's mean at the gradient, 4,000,000 bytes, and at a size
   * 0.9% away; 2% away it takes the sweep's log-log interpolation between 1 MiB (2.3 ms) and 16
   * MiB (32.3 ms), as a file without the entry. */
  hs_link_spec l;
  char how[256];
  ASSERT_EQ(hs_comm_link_load(s, "Test GPU T1", NULL, 2, 4e6, &l, how, sizeof how, &d), 0);
  ASSERT_REL(ring_time(&l, 2, 4e6), 0.002, 1e-12);
  ASSERT_STR(how, "gloo allreduce_step, world size 2: the gradient's all-reduce as DDP issues it, its mean over 50 steps, at the run's message size");
  ASSERT_EQ(hs_comm_link_load(s, "Test GPU T1", NULL, 2, 4e6 * 1.009, &l, how, sizeof how, &d), 0);
  ASSERT_REL(ring_time(&l, 2, 4e6 * 1.009), 0.002, 1e-12);
  double m = 4e6 * 1.02, sweep = 0.0023 * pow(0.0323 / 0.0023, log(m / 1048576) / log(16.0));
  ASSERT_EQ(hs_comm_link_load(s, "Test GPU T1", NULL, 2, m, &l, how, sizeof how, &d), 0);
  ASSERT_REL(ring_time(&l, 2, m), sweep, 1e-12);
  ASSERT_STR(how, "gloo allreduce, world size 2, beta at the run's message size");
  /* Another world size: the step was not measured there. */
  ASSERT_EQ(hs_comm_link_load(s, "Test GPU T1", NULL, 4, 4e6, &l, how, sizeof how, &d), 0);
  ASSERT_STR(how, "gloo allreduce, world size 2, beta at the run's message size");
  free(text);
  free(a);
  free(good);
  drop_store(s, path);
}

/* Inside a caller's transaction an import is a savepoint: rolling the caller's transaction back
 * takes the import with it, and a failed import leaves the caller's earlier work in place. */
static void test_transaction(void) {
  char path[256];
  hs_store *s = fresh_store(path, sizeof path, "tx");
  if (!s) return;
  size_t len, ml;
  char *good = slurp("profile-tinynet.json", &len), *mlp = slurp("profile-mlp-2workers.json", &ml);
  hs_cal_import_info info;
  hs_diag d = {0};
  int64_t empty[8], now[8];
  snapshot(s, empty);
  int nested = -1;
  ASSERT_EQ(hs_cal_tx_begin(s, &nested, &d), 0);
  ASSERT_EQ(nested, 0);
  ASSERT_EQ(hs_cal_import_text(s, "m.json", mlp, ml, &info, &d), 0);
  char *bad = replace(good, "\"median_s\": 0.0036", "\"median_s\": -1");
  ASSERT_EQ(hs_cal_import_text(s, "bad.json", bad, strlen(bad), &info, &d), HS_EINVAL);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM calib_sample"), 4); /* m.json's, still in the transaction */
  hs_cal_tx_rollback(s, nested);
  snapshot(s, now);
  assert_same(empty, now);
  free(bad);
  free(good);
  free(mlp);
  drop_store(s, path);
}

/* A model outside the zoo, imported, drives a simulation: one worker, SSGD, at an imported
 * batch size, costs exactly that batch's measured step median per iteration (no communication
 * with one worker; docs/cli.md, "Calibrated device types in hetsim sim"). */
static void test_simulable(void) {
  char path[256];
  hs_store *s = fresh_store(path, sizeof path, "sim");
  if (!s) return;
  hs_cal_import_info info;
  hs_diag d = {0};
  char file[1024];
  ASSERT_EQ(hs_cal_import_file(s, data_path("profile-tinynet.json", file, sizeof file), &info, &d), 0);
  hs_cal_model_row row;
  ASSERT_EQ(hs_cal_load_model(s, "tinynet", &row, &d), 0);
  ASSERT_EQ(row.grad_bytes, 4000000);
  ASSERT_EQ(hs_cal_load_model(s, "nosuch", &row, &d), HS_ENOTFOUND);
  char names[128];
  hs_cal_imported_models(s, names, sizeof names);
  ASSERT_STR(names, "tinynet");
  ASSERT_EQ(hs_cal_load_model(s, "tinynet", &row, &d), 0);

  char yaml[300];
  snprintf(yaml, sizeof yaml, "/tmp/hs-test-import-%d.yaml", (int)getpid());
  FILE *f = fopen(yaml, "w");
  ASSERT(f);
  if (!f) return;
  fputs("name: one\nnetwork: {bandwidth: 10Gbps, latency: 20us}\n"
        "device_types:\n  t1: {memory: 16GiB, compute: {calib: \"Test GPU T1\"}}\n"
        "nodes:\n  - name: n0\n    devices: [{type: t1}]\n", f);
  fclose(f);
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  ASSERT_EQ(hs_cluster_load(&spec, yaml, &d), 0);
  unlink(yaml);
  hs_perf_model pm;
  ASSERT_EQ(hs_perf_load(s, spec.types[0].compute.calib, "tinynet", &pm, NULL, &d), 0);
  const hs_policy *pol = NULL;
  hs_params params;
  ASSERT_EQ(hs_policy_parse("ssgd", &pol, &params, &d), 0);
  static const int batches[] = {8, 16, 32, 64};
  static const double medians[] = {0.0028, 0.0036, 0.0052, 0.0084};
  for (int i = 0; i < 4 && pol; i++) {
    hs_sim_config cfg = {.cluster = &spec, .model = "tinynet", .grad_bytes = (double)row.grad_bytes,
                         .param_bytes = 4.0 * (double)row.params, .global_batch = batches[i], .policy = pol,
                         .params = &params, .seed = 1, .max_iterations = 10, .perf = &pm};
    hs_sim_result res;
    memset(&res, 0, sizeof res);
    if (hs_sim_run(&cfg, &res, &d)) HS_FAIL_AT("batch %d: %s", batches[i], d.msg);
    else ASSERT_NEAR(res.summary.mean_iteration_s, medians[i], 1e-12);
    hs_sim_result_free(&res);
  }
  hs_cluster_spec_free(&spec);
  drop_store(s, path);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"good", test_good}, {"twice", test_twice}, {"bad", test_bad},
      {"transaction", test_transaction}, {"simulable", test_simulable}, {"step", test_step}, {NULL, NULL},
  };
  return hs_test_main("import", cases, argc, argv);
}
