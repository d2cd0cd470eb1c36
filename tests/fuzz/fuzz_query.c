/* fuzz_query: libFuzzer entry point for `hetsim query` (cli/cmd_query.c).
 *
 * A fixture database with two runs (one complete with a summary, workers, steps and
 * evaluations, one still 'running') is made once per process. Each input becomes a command
 * line for hs_cmd_query: when its first byte is even, the rest is split at NUL bytes into at
 * most 12 arguments (verbs, IDs, formats, options); when odd, the rest is one SQL statement for
 * the `sql` verb, with the format picked by the first byte. --db arguments are dropped so that
 * every input reads the fixture. The exit status must be 0, 1 or 2, and the fixture must be
 * unchanged (query opens read-only and refuses writes). stdout goes to /dev/null. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cli/cli.h"
#include "core/core_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fq_path[64];
static int64_t fq_changes;

static void fq_cleanup(void) {
  char p[80];
  unlink(fq_path);
  snprintf(p, sizeof p, "%s-wal", fq_path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", fq_path);
  unlink(p);
}

/* The fixture's total_changes-like fingerprint: row counts and the run statuses. */
static int64_t fq_fingerprint(void) {
  sqlite3 *db = NULL;
  int64_t v = -1;
  if (sqlite3_open_v2(fq_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT (SELECT count(*) FROM run) * 1000000 + (SELECT count(*) FROM"
                           " step) * 1000 + (SELECT count(*) FROM eval) * 10 +"
                           " (SELECT count(*) FROM run WHERE status = 'complete')",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
}

static void fq_setup(void) {
  snprintf(fq_path, sizeof fq_path, "/tmp/hs-fuzz-query-%ld.db", (long)getpid());
  fq_cleanup();
  hs_store *s = NULL;
  hs_diag d = {0};
  if (hs_store_open(&s, fq_path, 0, &d)) __builtin_trap();
  hs_run_info info = {.kind = "sim", .policy = "ssgd", .params = "overlap=0",
                      .cluster_name = "fuzz", .cluster_path = "fuzz.yaml",
                      .cluster_text = "name: fuzz\n", .model = "resnet18", .global_batch = 64,
                      .seed = 7, .options_json = "{\"iterations\":3}", .command = "hetsim sim"};
  int64_t run = 0, run2 = 0;
  if (hs_store_run_begin(s, &info, &run, &d)) __builtin_trap();
  hs_worker_row w[2] = {
      {.index = 0, .device_type = "a", .node = "n0", .left_at_s = 0.0 / 0.0, .initial_batch = 32,
       .steps = 3, .samples = 96, .busy_s = 1, .wait_s = 0.5, .comm_s = 0.25},
      {.index = 1, .device_type = "b\"'\n,x", .node = NULL, .left_at_s = 2.5,
       .initial_batch = 32, .steps = 3, .samples = 96, .busy_s = 2, .wait_s = 0, .comm_s = 0.25}};
  if (hs_store_workers_add(s, run, w, 2, &d)) __builtin_trap();
  if (hs_store_steps_begin(s, run, &d)) __builtin_trap();
  for (int k = 0; k < 6; k++) {
    hs_step_row r = {.worker = k % 2, .step = k / 2, .batch = 32, .start_s = k,
                     .compute_end_s = k + 0.5, .comm_end_s = k % 3 ? k + 0.75 : 0.0 / 0.0,
                     .wait_s = 0.1, .model_version = k / 2, .staleness = 0, .loss = 2.0 - 0.1 * k};
    if (hs_store_step_add(s, &r, &d)) __builtin_trap();
  }
  if (hs_store_steps_end(s, &d)) __builtin_trap();
  if (hs_store_eval_add(s, run, 1.5, 1, 1.9, 0.25, &d)) __builtin_trap();
  hs_summary sum = {.workers = 2, .iterations = 3, .events = 40, .samples = 192,
                    .sim_time_s = 3, .mean_iteration_s = 1, .samples_per_s = 64,
                    .wait_fraction = 0.1, .wall_s = 0.01, .final_loss = 1.5,
                    .final_accuracy = 0.0 / 0.0, .time_to_target_s = 0.0 / 0.0};
  if (hs_store_run_finish(s, run, "complete", &sum, NULL, &d)) __builtin_trap();
  info.policy = "ssp";
  info.params = "s=2";
  if (hs_store_run_begin(s, &info, &run2, &d)) __builtin_trap();
  hs_store_close(s);
  fq_changes = fq_fingerprint();
  if (fq_changes < 0) __builtin_trap();
  atexit(fq_cleanup);
  if (!freopen("/dev/null", "w", stdout)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!fq_path[0]) fq_setup();
  enum { MAXARG = 12 };
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  buf[size] = '\0';
  char *argv[MAXARG + 8];
  int argc = 0;
  argv[argc++] = "query";
  argv[argc++] = "--db";
  argv[argc++] = fq_path;
  if (size && (data[0] & 1)) {
    static char *const fmts[3] = {NULL, "--csv", "--json"};
    if (fmts[(data[0] >> 1) % 3]) argv[argc++] = fmts[(data[0] >> 1) % 3];
    argv[argc++] = "sql";
    argv[argc++] = buf + 1; /* up to the first NUL, as a shell would pass it */
  } else if (size) {
    char *p = buf + 1, *end = buf + size;
    while (p <= end && argc < MAXARG + 3) {
      size_t n = strlen(p);
      if (strncmp(p, "--db", 4) != 0) argv[argc++] = p;
      p += n + 1;
    }
  }
  argv[argc] = NULL;
  int rc = hs_cmd_query(argc, argv);
  if (rc < 0 || rc > 2) __builtin_trap();
  free(buf);
  if (fq_fingerprint() != fq_changes) __builtin_trap(); /* query must never write */
  return 0;
}
