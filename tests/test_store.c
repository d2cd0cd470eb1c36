/* Tests for core_store: schema creation and migration, refusal of newer schemas and foreign
 * files, read-only opens, and round trips of runs, workers, steps and evaluations.
 *
 * With HETSIM_STORE_FIXTURE=PATH in the environment the program instead writes a small fixed
 * database to PATH and exits: tests/cli_query.sh uses it to test `hetsim query` without
 * depending on the simulator. */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core_affinity.h"
#include "core/core_runopts.h"
#include "core/core_store.h"
#include "core/core_sweep.h"
#include "tests/hs_test.h"

static void rm_db(const char *path) {
  char aux[600];
  unlink(path);
  snprintf(aux, sizeof aux, "%s-wal", path);
  unlink(aux);
  snprintf(aux, sizeof aux, "%s-shm", path);
  unlink(aux);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* One integer from a query, or -1 when the query fails or yields nothing. */
static int64_t q_int(hs_store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(hs_store_db(s), sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static double q_double(hs_store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  double v = NAN;
  if (sqlite3_prepare_v2(hs_store_db(s), sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  return v;
}

static const hs_run_info run_info = {
    .kind = "sim", .policy = "ssgd", .params = "", .cluster_name = "lbb-4gpu",
    .cluster_path = "traces/lbb-4gpu.yaml", .cluster_text = "name: lbb-4gpu\n",
    .model = "resnet18", .global_batch = 64, .seed = UINT64_C(0xfedcba9876543210),
    .options_json = "{\"iterations\":5}", .versions_json = "{\"hetsim\":\"0.1.0\"}",
    .command = "hetsim sim ..."};

/* The fixture most tests start from: a new database at the temporary file NAME (its path in
 * *path, any earlier file removed) opened for writing, and, when run is not NULL, one run of
 * run_info begun in it. Returns the store, or NULL (the failure recorded) when it cannot be
 * opened; a failed run_begin is recorded and the store still returned. */
static hs_store *new_store(const char *name, const char **path, hs_diag *d, int64_t *run) {
  *path = hs_test_tmp(name);
  rm_db(*path);
  hs_store *s = NULL;
  ASSERT_EQ(hs_store_open(&s, *path, 0, d), 0);
  if (s && run) ASSERT_EQ(hs_store_run_begin(s, &run_info, run, d), 0);
  return s;
}

static void test_open_migrate_reopen(void) {
  const char *p;
  hs_diag d = {0};
  hs_store *s = new_store("migrate.db", &p, &d, NULL);
  if (!s) return;
  ASSERT_EQ(hs_store_schema_version(s), HS_STORE_SCHEMA_VERSION);
  ASSERT_EQ(q_int(s, "SELECT version FROM schema_version"), HS_STORE_SCHEMA_VERSION);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM schema_version"), 1);
  ASSERT_EQ(q_int(s, "PRAGMA foreign_keys"), 1);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'"), 1);
  ASSERT(q_int(s, "PRAGMA busy_timeout") >= 10000);
  /* Every table of the contract exists and is STRICT. */
  static const char *const tables[] = {"run", "summary", "worker", "step", "eval", "device",
                                       "model", "calib_sample", "perf_model", "comm_sample",
                                       "comm_model", "validation", "schema_version", NULL};
  for (const char *const *t = tables; *t; t++) {
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT strict FROM pragma_table_list WHERE name = '%s'", *t);
    if (q_int(s, sql) != 1) HS_FAIL_AT("table %s missing or not STRICT", *t);
  }
  int64_t run = 0;
  ASSERT_EQ(hs_store_run_begin(s, &run_info, &run, &d), 0);
  hs_store_close(s);
  /* Reopening applies nothing and keeps the data. */
  s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, 0, &d), 0);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT version FROM schema_version"), HS_STORE_SCHEMA_VERSION);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM run"), 1);
  hs_store_close(s);
  rm_db(p);
}

/* Takes a file of the current schema back to version 2: migration 3's columns dropped, its table
 * gone, comm_model's backend CHECK without 'gloo' (comm_sample's is rebuilt by each test). */
static const char undo_v3[] =
    "ALTER TABLE device DROP COLUMN source;"
    "ALTER TABLE model DROP COLUMN source;"
    "ALTER TABLE validation DROP COLUMN mean_iter_error;"
    "ALTER TABLE validation DROP COLUMN total_time_error;"
    "ALTER TABLE validation DROP COLUMN iter_wasserstein;"
    "DROP TABLE convergence_fit;"
    "DROP TABLE comm_model;"
    "CREATE TABLE comm_model (id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  alpha_s REAL NOT NULL CHECK (alpha_s >= 0),"
    "  beta_bytes_per_s REAL NOT NULL CHECK (beta_bytes_per_s > 0), r2 REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) STRICT;";

/* Rebuilds comm_sample as an older schema had it: the CHECKs' lists of backends and ops, mean_s
 * only when ops admits 'allreduce_step' (both came with version 4), its index; no rows. */
static void old_comm_sample(hs_store *s, const char *backends, const char *ops) {
  char sql[1400];
  const char *mean = strstr(ops, "'allreduce_step'") ? ", mean_s REAL CHECK (mean_s IS NULL OR mean_s > 0)" : "";
  snprintf(sql, sizeof sql,
           "DROP TABLE comm_sample;"
           "CREATE TABLE comm_sample (id INTEGER PRIMARY KEY,"
           "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
           "  backend TEXT NOT NULL CHECK (backend IN (%s)),"
           "  op TEXT NOT NULL CHECK (op IN (%s)),"
           "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
           "  bytes INTEGER NOT NULL CHECK (bytes >= 0), median_s REAL NOT NULL, p10_s REAL, p90_s REAL,"
           "  count INTEGER NOT NULL CHECK (count > 0),"
           "  created_at TEXT NOT NULL DEFAULT (strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now'))%s) STRICT;"
           "CREATE INDEX comm_sample_key ON comm_sample(backend, op, device_id, bytes);",
           backends, ops, mean);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), sql, NULL, NULL, NULL), SQLITE_OK);
}

/* An older schema's file, the migration tests' common start: a new store NAME (its path in *p)
 * taken back by UNDO (NULL: nothing) and old_comm_sample(BACKENDS, OPS), given the rows of ROWS
 * (which also sets schema_version), with REFUSED refused as that version refused it; closed.
 * Returns 0 when the test has no failure yet. */
static int old_store(const char *name, const char **p, const char *undo, const char *backends, const char *ops,
                     const char *rows, const char *refused) {
  hs_diag d = {0};
  hs_store *s = new_store(name, p, &d, NULL);
  if (!s) return -1;
  /* Every version built here is older than migration 6's table. */
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "DROP TABLE compress_sample", NULL, NULL, NULL), SQLITE_OK);
  if (undo) ASSERT_EQ(sqlite3_exec(hs_store_db(s), undo, NULL, NULL, NULL), SQLITE_OK);
  old_comm_sample(s, backends, ops);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), rows, NULL, NULL, NULL), SQLITE_OK);
  ASSERT(sqlite3_exec(hs_store_db(s), refused, NULL, NULL, NULL) != SQLITE_OK);
  hs_store_close(s);
  return hs_test_failed_now ? -1 : 0;
}

/* Opens the file at P, which must come up at the current schema version with comm_sample's
 * index and STRICT kept through the migration; NULL (and a failure counted) otherwise. */
static hs_store *reopen_current(const char *p) {
  hs_diag d = {0};
  hs_store *s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, 0, &d), 0);
  if (!s) return NULL;
  ASSERT_EQ(hs_store_schema_version(s), HS_STORE_SCHEMA_VERSION);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'comm_sample_key'"), 1);
  ASSERT_EQ(q_int(s, "SELECT strict FROM pragma_table_list WHERE name = 'comm_sample'"), 1);
  return s;
}

/* A file at schema version 2 (built by undoing migration 3) is brought to the current version:
 * its comm rows stay, 'gloo' is admitted, the new columns and table exist. */
static void test_migrate_from_v2(void) {
  const char *p;
  if (old_store("v2.db", &p, undo_v3, "'nccl', 'local', 'cpu'",
                "'allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter', 'wake'",
                "INSERT INTO device(id, name, kind) VALUES (7, 'cpu0', 'cpu');"
                "INSERT INTO comm_sample(id, device_id, backend, op, world_size, bytes, median_s, count)"
                "  VALUES (3, 7, 'cpu', 'wake', 2, 0, 4e-5, 20);"
                "INSERT INTO comm_model(id, device_id, backend, op, world_size, alpha_s, beta_bytes_per_s)"
                "  VALUES (5, 7, 'cpu', 'allreduce', 2, 1e-5, 1e9);"
                "UPDATE schema_version SET version = 2;",
                "INSERT INTO comm_model(device_id, backend, op, alpha_s, beta_bytes_per_s)"
                " VALUES (7, 'gloo', 'allreduce', 0, 1e9)"))
    return;
  hs_store *s = reopen_current(p);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample WHERE id = 3 AND op = 'wake'"), 1);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_model WHERE id = 5 AND alpha_s = 1e-5"), 1);
  ASSERT_EQ(q_int(s, "SELECT strict FROM pragma_table_list WHERE name = 'comm_model'"), 1);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "INSERT INTO comm_model(device_id, backend, op, alpha_s,"
                         " beta_bytes_per_s) VALUES (7, 'gloo', 'allreduce', 0, 1e9);"
                         "INSERT INTO comm_sample(device_id, backend, op, bytes, median_s, count)"
                         " VALUES (7, 'gloo', 'allreduce', 64, 1e-4, 5);"
                         "UPDATE device SET source = 'test' WHERE id = 7;"
                         "INSERT INTO convergence_fit(model, params, source, points) VALUES ('m', '{}', 'x.csv', 3)",
                         NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM pragma_table_info('validation') WHERE name IN"
                     " ('mean_iter_error', 'total_time_error', 'iter_wasserstein')"), 3);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "DELETE FROM device WHERE id = 7", NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample") + q_int(s, "SELECT count(*) FROM comm_model"), 0);
  hs_store_close(s);
  rm_db(p);
}

/* A file at schema version 3 (comm_sample rebuilt as version 3 had it: no mean_s, no
 * 'allreduce_step') is brought to the current version: its rows stay with mean_s NULL, the index
 * and the cascade are back, and an 'allreduce_step' sample with its mean can be stored. */
static void test_migrate_from_v3(void) {
  const char *p;
  if (old_store("v3.db", &p, NULL, "'nccl', 'local', 'cpu', 'gloo'",
                "'allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter', 'wake'",
                "INSERT INTO device(id, name, kind) VALUES (7, 'cpu0', 'cpu');"
                "INSERT INTO comm_sample(id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s,"
                "                        count, created_at)"
                "  VALUES (3, 7, 'gloo', 'allreduce', 2, 4096, 2.5e-4, 2e-4, 3e-4, 20, '2026-01-01T00:00:00.000Z'),"
                "         (4, 7, 'cpu', 'wake', 2, 0, 4e-5, NULL, NULL, 10, '2026-01-02T00:00:00.000Z');"
                "UPDATE schema_version SET version = 3;",
                "INSERT INTO comm_sample(device_id, backend, op, bytes, median_s, count)"
                " VALUES (7, 'gloo', 'allreduce_step', 4096, 2e-3, 20)"))
    return;
  hs_store *s = reopen_current(p);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample WHERE id = 3 AND device_id = 7 AND backend = 'gloo'"
                     " AND op = 'allreduce' AND world_size = 2 AND bytes = 4096 AND median_s = 2.5e-4 AND p10_s = 2e-4"
                     " AND p90_s = 3e-4 AND count = 20 AND created_at LIKE '2026-01-01%' AND mean_s IS NULL"), 1);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample WHERE id = 4 AND op = 'wake' AND p10_s IS NULL"
                     " AND mean_s IS NULL"), 1);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "INSERT INTO comm_sample(device_id, backend, op, bytes, median_s,"
                         " count, mean_s) VALUES (7, 'gloo', 'allreduce_step', 4096, 4.5e-4, 20, 2e-3)",
                         NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample WHERE op = 'allreduce_step' AND mean_s = 2e-3"), 1);
  /* A mean is a positive time or nothing. */
  ASSERT(sqlite3_exec(hs_store_db(s), "INSERT INTO comm_sample(device_id, backend, op, bytes, median_s,"
                      " count, mean_s) VALUES (7, 'gloo', 'allreduce', 64, 1e-4, 5, -1)", NULL, NULL, NULL) != SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "DELETE FROM device WHERE id = 7", NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample"), 0);
  hs_store_close(s);
  rm_db(p);
}

/* Takes comm_model back to version 4's: its backend CHECK without 'tcp'. */
static const char undo_v5_model[] =
    "DROP TABLE comm_model;"
    "CREATE TABLE comm_model (id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu', 'gloo')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  alpha_s REAL NOT NULL CHECK (alpha_s >= 0),"
    "  beta_bytes_per_s REAL NOT NULL CHECK (beta_bytes_per_s > 0), r2 REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))) STRICT;";

/* A file at schema version 4 (neither table admits backend 'tcp') is brought to the current
 * version: its rows stay, mean_s with them, and 'tcp' rows can be stored in both tables. */
static void test_migrate_from_v4(void) {
  const char *p;
  if (old_store("v4.db", &p, undo_v5_model, "'nccl', 'local', 'cpu', 'gloo'",
                "'allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter', 'wake', 'allreduce_step'",
                "INSERT INTO device(id, name, kind) VALUES (7, 'cpu0', 'cpu');"
                "INSERT INTO comm_sample(id, device_id, backend, op, world_size, bytes, median_s, count, mean_s)"
                "  VALUES (3, 7, 'gloo', 'allreduce_step', 2, 4096, 2.5e-4, 20, 3e-4),"
                "         (4, 7, 'cpu', 'wake', 2, 0, 4e-5, 10, NULL);"
                "INSERT INTO comm_model(id, device_id, backend, op, world_size, alpha_s, beta_bytes_per_s, r2)"
                "  VALUES (5, 7, 'cpu', 'allreduce', 2, 1e-5, 1e9, 0.99);"
                "UPDATE schema_version SET version = 4;",
                "INSERT INTO comm_sample(device_id, backend, op, bytes, median_s, count)"
                " VALUES (7, 'tcp', 'allreduce', 4096, 1e-4, 5)"))
    return;
  hs_store *s = reopen_current(p);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample WHERE id = 3 AND backend = 'gloo' AND op = 'allreduce_step'"
                     " AND median_s = 2.5e-4 AND mean_s = 3e-4"), 1);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample WHERE id = 4 AND op = 'wake' AND mean_s IS NULL"), 1);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_model WHERE id = 5 AND alpha_s = 1e-5 AND r2 = 0.99"), 1);
  ASSERT_EQ(q_int(s, "SELECT strict FROM pragma_table_list WHERE name = 'comm_model'"), 1);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "INSERT INTO comm_sample(device_id, backend, op, bytes, median_s, count)"
                         " VALUES (7, 'tcp', 'allreduce', 4096, 1e-4, 5), (7, 'tcp', 'wake', 0, 3e-5, 9);"
                         "INSERT INTO comm_model(device_id, backend, op, alpha_s, beta_bytes_per_s)"
                         " VALUES (7, 'tcp', 'allreduce', 5e-5, 2e9)",
                         NULL, NULL, NULL), SQLITE_OK);
  /* Backends outside the list stay refused. */
  ASSERT(sqlite3_exec(hs_store_db(s), "INSERT INTO comm_model(device_id, backend, op, alpha_s, beta_bytes_per_s)"
                      " VALUES (7, 'udp', 'allreduce', 0, 1e9)", NULL, NULL, NULL) != SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "DELETE FROM device WHERE id = 7", NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample") + q_int(s, "SELECT count(*) FROM comm_model"), 0);
  hs_store_close(s);
  rm_db(p);
}

/* A file at schema version 5 (no compress_sample) is brought to the current version: its rows
 * stay, and a compressor's round trip can be stored (top-k, qsgd and powersgd; no other name),
 * deleted with its device. */
static void test_migrate_from_v5(void) {
  const char *p;
  if (old_store("v5.db", &p, NULL, "'nccl', 'local', 'cpu', 'gloo', 'tcp'",
                "'allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter', 'wake', 'allreduce_step'",
                "INSERT INTO device(id, name, kind, host) VALUES (7, 'cpu0', 'cpu', 'h1'), (8, 'gpu0', 'cuda', 'h1'),"
                "  (9, 'gpu1', 'cuda', 'h2');"
                "INSERT INTO comm_sample(id, device_id, backend, op, world_size, bytes, median_s, count)"
                "  VALUES (3, 7, 'tcp', 'wake', 2, 0, 3e-5, 9);"
                "UPDATE schema_version SET version = 5;",
                "INSERT INTO compress_sample(device_id, compressor, setting, elems, median_s, count)"
                " VALUES (7, 'topk', 0.1, 1000, 1e-4, 5)"))
    return;
  hs_store *s = reopen_current(p);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample WHERE id = 3 AND backend = 'tcp' AND op = 'wake'"), 1);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "INSERT INTO compress_sample(device_id, compressor, setting, elems, median_s,"
                         " count) VALUES (7, 'topk', 0.1, 203530, 1.8e-3, 8), (7, 'topk', 0.1, 61706, 5e-4, 8)",
                         NULL, NULL, NULL), SQLITE_OK);
  ASSERT(sqlite3_exec(hs_store_db(s), "INSERT INTO compress_sample(device_id, compressor, setting, elems, median_s,"
                      " count) VALUES (7, 'randk', 0.1, 1000, 1e-4, 5)", NULL, NULL, NULL) != SQLITE_OK);
  /* The newest round trip on the length nearest the one asked for. */
  hs_diag d = {0};
  double setting = 0, t = 0;
  int64_t elems = 0;
  ASSERT_EQ(hs_store_compress_latest(s, "cpu0", "topk", 200000, &setting, &elems, &t, &d), 1);
  ASSERT_EQ(elems, 203530);
  ASSERT(setting == 0.1 && t == 1.8e-3);
  ASSERT_EQ(hs_store_compress_latest(s, "cpu0", "qsgd", 200000, &setting, &elems, &t, &d), 0);
  ASSERT_EQ(hs_store_compress_latest(s, "gpu9", "topk", 200000, &setting, &elems, &t, &d), 0);
  /* A GPU's runs compress on the host: the host's cpu's round trip, none on another host. */
  elems = 0;
  ASSERT_EQ(hs_store_compress_latest(s, "gpu0", "topk", 60000, &setting, &elems, &t, &d), 1);
  ASSERT_EQ(elems, 61706);
  ASSERT_EQ(hs_store_compress_latest(s, "gpu1", "topk", 60000, &setting, &elems, &t, &d), 0);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "DELETE FROM device WHERE id = 7", NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM compress_sample"), 0);
  hs_store_close(s);
  rm_db(p);
}

/* A file at schema version 1 (comm_sample's op CHECK without 'wake'; built here by rebuilding
 * the table as version 1 had it) is brought to the current version on open: its rows stay, the
 * index is back, and a 'wake' sample can be stored. */
static void test_migrate_from_v1(void) {
  const char *p;
  if (old_store("v1.db", &p, undo_v3, "'nccl', 'local', 'cpu'",
                "'allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter'",
                "INSERT INTO device(id, name, kind) VALUES (7, 'cpu0', 'cpu');"
                "INSERT INTO comm_sample(id, device_id, backend, op, world_size, bytes, median_s, count, created_at)"
                "  VALUES (3, 7, 'cpu', 'p2p', 2, 4096, 1.5e-6, 20, '2026-01-01T00:00:00.000Z');"
                "UPDATE schema_version SET version = 1;",
                "INSERT INTO comm_sample(device_id, backend, op, bytes, median_s, count)"
                " VALUES (7, 'cpu', 'wake', 0, 4e-5, 20)"))
    return;
  hs_store *s = reopen_current(p);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample WHERE id = 3 AND device_id = 7 AND op = 'p2p'"
                     " AND bytes = 4096 AND median_s = 1.5e-6 AND created_at LIKE '2026-01-01%'"), 1);
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "INSERT INTO comm_sample(device_id, backend, op, bytes, median_s,"
                         " count) VALUES (7, 'cpu', 'wake', 0, 4e-5, 20)", NULL, NULL, NULL), SQLITE_OK);
  /* The device's deletion still cascades to its samples. */
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "DELETE FROM device WHERE id = 7", NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM comm_sample"), 0);
  hs_store_close(s);
  rm_db(p);
}

static void test_newer_schema_refused(void) {
  const char *p;
  hs_diag d = {0};
  int64_t run = 0;
  hs_store *s = new_store("newer.db", &p, &d, &run);
  if (!s) return;
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "UPDATE schema_version SET version = 999", NULL, NULL,
                         NULL),
            SQLITE_OK);
  hs_store_close(s);
  s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, 0, &d), HS_ESCHEMA);
  ASSERT(s == NULL);
  ASSERT_CONTAINS(d.msg, "schema version 999");
  ASSERT_CONTAINS(d.msg, "upgrade hetsim");
  ASSERT_CONTAINS(d.msg, p);
  ASSERT_EQ(hs_store_open(&s, p, HS_STORE_READONLY, &d), HS_ESCHEMA);
  /* The file was not touched: look with plain SQLite. */
  sqlite3 *db = NULL;
  ASSERT_EQ(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT (SELECT version FROM schema_version),"
                                   " (SELECT count(*) FROM run)", -1, &st, NULL),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  ASSERT_EQ(sqlite3_column_int(st, 0), 999);
  ASSERT_EQ(sqlite3_column_int(st, 1), 1);
  sqlite3_finalize(st);
  sqlite3_close(db);
  rm_db(p);
}

static void test_readonly(void) {
  const char *p = hs_test_tmp("ro.db");
  rm_db(p);
  hs_diag d = {0};
  hs_store *s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, HS_STORE_READONLY, &d), HS_ENOTFOUND);
  ASSERT(s == NULL);
  ASSERT_CONTAINS(d.msg, p);
  ASSERT_CONTAINS(d.msg, "does not exist");
  ASSERT(!file_exists(p));
  /* An empty file is a valid empty SQLite database but not a hetsim one; read-only must not
   * migrate it. */
  FILE *f = fopen(p, "w");
  ASSERT(f != NULL);
  if (f) fclose(f);
  ASSERT_EQ(hs_store_open(&s, p, HS_STORE_READONLY, &d), HS_ESCHEMA);
  struct stat st;
  ASSERT(stat(p, &st) == 0 && st.st_size == 0);
  rm_db(p);
  /* A real database opened read-only reads but refuses writes. */
  ASSERT_EQ(hs_store_open(&s, p, 0, &d), 0);
  int64_t run = 0;
  if (s) ASSERT_EQ(hs_store_run_begin(s, &run_info, &run, &d), 0);
  hs_store_close(s);
  s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, HS_STORE_READONLY, &d), 0);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM run"), 1);
  ASSERT_EQ(hs_store_run_begin(s, &run_info, &run, &d), HS_EINVAL);
  ASSERT(sqlite3_exec(hs_store_db(s), "DELETE FROM run", NULL, NULL, NULL) != SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM run"), 1);
  hs_store_close(s);
  rm_db(p);
}

static void test_not_a_database(void) {
  const char *p = hs_test_tmp("garbage.db");
  rm_db(p);
  FILE *f = fopen(p, "w");
  ASSERT(f != NULL);
  if (!f) return;
  for (int i = 0; i < 200; i++) fputs("this is not an sqlite database at all\n", f);
  fclose(f);
  hs_diag d = {0};
  hs_store *s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, 0, &d), HS_EDB);
  ASSERT(s == NULL);
  ASSERT_CONTAINS(d.msg, p);
  ASSERT_CONTAINS(d.msg, "not an SQLite database");
  ASSERT_EQ(hs_store_open(&s, p, HS_STORE_READONLY, &d), HS_EDB);
  ASSERT_CONTAINS(d.msg, "not an SQLite database");
  rm_db(p);
}

static void test_foreign_sqlite_file(void) {
  const char *p = hs_test_tmp("foreign.db");
  rm_db(p);
  sqlite3 *db = NULL;
  sqlite3_open(p, &db);
  sqlite3_exec(db, "CREATE TABLE run(x)", NULL, NULL, NULL);
  sqlite3_close(db);
  hs_diag d = {0};
  hs_store *s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, 0, &d), HS_ESCHEMA);
  ASSERT_CONTAINS(d.msg, "not a hetsim");
  rm_db(p);
}

static void test_run_lifecycle(void) {
  const char *p;
  hs_diag d = {0};
  hs_store *s = new_store("run.db", &p, &d, NULL);
  if (!s) return;
  int64_t a = 0, b = 0, c = 0;
  ASSERT_EQ(hs_store_run_begin(s, &run_info, &a, &d), 0);
  ASSERT_EQ(hs_store_run_begin(s, &run_info, &b, &d), 0);
  ASSERT_EQ(hs_store_run_begin(s, &run_info, &c, &d), 0);
  ASSERT(b == a + 1 && c == b + 1);
  char sql[400];
  snprintf(sql, sizeof sql, "SELECT status = 'running' AND finished_at IS NULL FROM run WHERE id = %lld",
           (long long)a);
  ASSERT_EQ(q_int(s, sql), 1);
  /* The seed keeps its 64 bits through the signed column. */
  snprintf(sql, sizeof sql, "SELECT seed FROM run WHERE id = %lld", (long long)a);
  ASSERT((uint64_t)q_int(s, sql) == run_info.seed);
  hs_summary sum = {.workers = 4, .iterations = 5, .events = 77, .samples = 320,
                    .sim_time_s = 0.5, .mean_iteration_s = 0.1, .samples_per_s = 640,
                    .wait_fraction = 0.25, .wall_s = 0.01, .final_loss = NAN,
                    .final_accuracy = NAN, .time_to_target_s = NAN};
  ASSERT_EQ(hs_store_run_finish(s, a, "complete", &sum, NULL, &d), 0);
  ASSERT_EQ(hs_store_run_finish(s, b, "failed", NULL, "worker 3 died", &d), 0);
  ASSERT_EQ(hs_store_run_finish(s, c, "bogus", NULL, NULL, &d), HS_EINVAL);
  ASSERT_EQ(hs_store_run_finish(s, 9999, "complete", NULL, NULL, &d), HS_ENOTFOUND);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM run r JOIN summary s ON s.run_id = r.id WHERE r.id = %lld AND "
           "r.status = 'complete' AND r.finished_at LIKE '____-__-__T__:__:__.___Z' AND "
           "s.iterations = 5 AND s.final_loss IS NULL AND s.time_to_target_s IS NULL",
           (long long)a);
  ASSERT_EQ(q_int(s, sql), 1);
  snprintf(sql, sizeof sql, "SELECT wait_fraction FROM summary WHERE run_id = %lld", (long long)a);
  ASSERT_NEAR(q_double(s, sql), 0.25, 0);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM run WHERE id = %lld AND status = 'failed' AND error = 'worker 3 died'",
           (long long)b);
  ASSERT_EQ(q_int(s, sql), 1);
  snprintf(sql, sizeof sql, "SELECT status FROM run WHERE id = %lld", (long long)c);
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(hs_store_db(s), sql, -1, &st, NULL);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  ASSERT_STR((const char *)sqlite3_column_text(st, 0), "running");
  sqlite3_finalize(st);
  /* A bad kind is refused by the schema's CHECK. */
  hs_run_info bad = run_info;
  bad.kind = "dream";
  int64_t x = 0;
  ASSERT_EQ(hs_store_run_begin(s, &bad, &x, &d), HS_EDB);
  ASSERT_CONTAINS(d.msg, "CHECK");
  hs_store_close(s);
  rm_db(p);
}

static void test_workers_and_eval(void) {
  const char *p;
  hs_diag d = {0};
  int64_t run = 0;
  hs_store *s = new_store("workers.db", &p, &d, &run);
  if (!s) return;
  hs_worker_row w[3] = {
      {.index = 0, .device_type = "gtx1070", .node = "server0", .joined_at_s = 0,
       .left_at_s = NAN, .initial_batch = 24, .steps = 5, .samples = 120, .busy_s = 0.4,
       .wait_s = 0.1, .comm_s = 0.05},
      {.index = 1, .device_type = "gtx1070", .node = "server0", .joined_at_s = 0,
       .left_at_s = 3.5, .initial_batch = 24, .steps = 5, .samples = 120, .busy_s = 0.4,
       .wait_s = 0.1, .comm_s = 0.05},
      {.index = 2, .device_type = "gtx750", .node = "server0", .joined_at_s = 1.0,
       .left_at_s = NAN, .initial_batch = 16, .steps = 5, .samples = 80, .busy_s = 0.5,
       .wait_s = 0.0, .comm_s = 0.05},
  };
  ASSERT_EQ(hs_store_workers_add(s, run, w, 3, &d), 0);
  char sql[400];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM worker WHERE run_id = %lld", (long long)run);
  ASSERT_EQ(q_int(s, sql), 3);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM worker WHERE left_at_s IS NULL"), 2);
  ASSERT_NEAR(q_double(s, "SELECT left_at_s FROM worker WHERE idx = 1"), 3.5, 0);
  /* A duplicate index fails and rolls the whole call back. */
  hs_worker_row dup[2] = {w[0], w[0]};
  dup[0].index = 7;
  ASSERT_EQ(hs_store_workers_add(s, run, dup, 2, &d), HS_EDB);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM worker"), 3);
  /* Foreign keys are enforced: no workers for a run that does not exist. */
  ASSERT_EQ(hs_store_workers_add(s, 424242, w, 1, &d), HS_EDB);
  ASSERT_CONTAINS(d.msg, "FOREIGN KEY");

  ASSERT_EQ(hs_store_eval_add(s, run, 1.5, 10, 2.1, 0.3, &d), 0);
  ASSERT_EQ(hs_store_eval_add(s, run, 3.0, 20, NAN, 0.45, &d), 0);
  ASSERT_EQ(hs_store_eval_add(s, run, 4.5, 30, 1.2, NAN, &d), 0);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM eval"), 3);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM eval WHERE loss IS NULL"), 1);
  ASSERT_EQ(q_int(s, "SELECT step FROM eval WHERE accuracy IS NULL"), 30);
  ASSERT_NEAR(q_double(s, "SELECT accuracy FROM eval WHERE step = 20"), 0.45, 0);
  ASSERT_EQ(hs_store_eval_add(s, run, 5.0, 40, 1.0, 1.5, &d), HS_EDB); /* accuracy > 1 */
  hs_store_close(s);
  rm_db(p);
}

/* Many workers go in chunks, read from C memory: every value comes back as stored one by one
 * (NULLs for NaN and NULL names included), across chunk boundaries; a bad row in a later chunk
 * is named and leaves nothing; the store works as before afterwards. */
static void test_many_workers(void) {
  const char *p;
  hs_diag d = {0};
  int64_t run = 0;
  hs_store *s = new_store("many_workers.db", &p, &d, &run);
  if (!s) return;
  enum { N = 10000 };
  hs_worker_row *w = calloc(N, sizeof *w);
  static const char *const types[] = {"v100", "a100", NULL};
  for (int i = 0; i < N; i++)
    w[i] = (hs_worker_row){.index = i, .device_type = types[i % 3], .node = i % 7 ? "n0" : NULL,
                           .joined_at_s = i % 11 ? 0.0 : 1.5 * i, .left_at_s = i % 5 ? NAN : 0.25 * i,
                           .initial_batch = 32 + i % 9, .steps = 1000000000LL * (i % 4) + i,
                           .samples = 7LL * i, .busy_s = i % 13 ? 0.001 * i : NAN,
                           .wait_s = 1e-9 * i, .comm_s = i % 17 ? 3.25 : NAN};
  ASSERT_EQ(hs_store_workers_add(s, run, w, N, &d), 0);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM worker"), N);
  /* Every value, against what the row says, with SQLite's own types. */
  char sql[1200];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM worker WHERE run_id = %lld AND"
           " device_type IS (CASE idx %% 3 WHEN 0 THEN 'v100' WHEN 1 THEN 'a100' END) AND"
           " node IS (CASE WHEN idx %% 7 THEN 'n0' END) AND"
           " joined_at_s = (CASE WHEN idx %% 11 THEN 0.0 ELSE 1.5 * idx END) AND"
           " left_at_s IS (CASE WHEN idx %% 5 THEN NULL ELSE 0.25 * idx END) AND"
           " initial_batch = 32 + idx %% 9 AND steps = 1000000000 * (idx %% 4) + idx AND"
           " samples = 7 * idx AND busy_s IS (CASE WHEN idx %% 13 THEN 0.001 * idx END) AND"
           " wait_s = 1e-9 * idx AND comm_s IS (CASE WHEN idx %% 17 THEN 3.25 END) AND"
           " typeof(joined_at_s) = 'real' AND typeof(steps) = 'integer'",
           (long long)run);
  ASSERT_EQ(q_int(s, sql), N);
  /* A second run whose row 9000 repeats an index: named, and nothing of the run stored. */
  int64_t run2 = 0;
  ASSERT_EQ(hs_store_run_begin(s, &run_info, &run2, &d), 0);
  w[9000].index = 8999;
  ASSERT_EQ(hs_store_workers_add(s, run2, w, N, &d), HS_EDB);
  ASSERT_CONTAINS(d.msg, "worker 8999 of run");
  ASSERT_CONTAINS(d.msg, "UNIQUE");
  snprintf(sql, sizeof sql, "SELECT count(*) FROM worker WHERE run_id = %lld", (long long)run2);
  ASSERT_EQ(q_int(s, sql), 0);
  w[9000].index = 9000;
  ASSERT_EQ(hs_store_workers_add(s, run2, w, N, &d), 0);
  ASSERT_EQ(q_int(s, sql), N);
  ASSERT_EQ(q_int(s, "PRAGMA foreign_keys"), 1);
  free(w);
  hs_store_close(s);
  rm_db(p);
}

enum { N_STEPS = 250000, N_WORKERS = 7 };

static hs_step_row make_step(int64_t i) {
  hs_step_row r = {.worker = (int32_t)(i % N_WORKERS), .step = i / N_WORKERS,
                   .batch = (int32_t)(8 + i % 5), .start_s = 0.001 * (double)i,
                   .compute_end_s = 0.001 * (double)i + 0.0004,
                   .comm_end_s = (i % 3) ? 0.001 * (double)i + 0.0007 : NAN,
                   .wait_s = 1e-5 * (double)(i % 11), .model_version = i / N_WORKERS,
                   .staleness = (int32_t)(i % 4), .loss = (i % 2) ? NAN : 2.5 - 1e-6 * (double)i};
  return r;
}

/* Adds the rows make_step(0) .. make_step(n - 1) to the open batch; stops at the first failure
 * and returns its code (0 when every row went in). */
static int add_steps(hs_store *s, int64_t n, hs_diag *d) {
  int rc = 0;
  for (int64_t i = 0; i < n && !rc; i++) {
    hs_step_row r = make_step(i);
    rc = hs_store_step_add(s, &r, d);
  }
  return rc;
}

static void test_steps_roundtrip(void) {
  const char *p;
  hs_diag d = {0};
  int64_t run = 0;
  hs_store *s = new_store("steps.db", &p, &d, &run);
  if (!s) return;
  ASSERT_EQ(hs_store_steps_begin(s, run, &d), 0);
  /* Other writes are refused while a batch is open. */
  ASSERT_EQ(hs_store_eval_add(s, run, 0, 0, 1, 0.5, &d), HS_EINVAL);
  int rc = add_steps(s, N_STEPS, &d);
  ASSERT_EQ(rc, 0);
  /* A duplicate key fails with a message naming the step, at the latest when the rows are
   * flushed by hs_store_steps_end (rows are buffered); the rows around it still go in. */
  hs_step_row dup = make_step(5);
  rc = hs_store_step_add(s, &dup, &d);
  hs_step_row next = make_step(N_STEPS);
  if (!rc) rc = hs_store_step_add(s, &next, &d);
  if (!rc) rc = hs_store_steps_end(s, &d);
  ASSERT_EQ(rc, HS_EDB);
  ASSERT_CONTAINS(d.msg, "step 0 of worker 5");
  ASSERT_EQ(hs_store_steps_end(s, &d), 0);
  ASSERT_EQ(hs_store_steps_end(s, &d), 0); /* idempotent */
  /* Foreign keys are off only while the batch is open. */
  ASSERT_EQ(q_int(s, "PRAGMA foreign_keys"), 1);
  ASSERT_EQ(q_int(s, "PRAGMA page_size"), 16384); /* a new file */
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM step"), N_STEPS + 1);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM step WHERE loss IS NULL"), (N_STEPS + 1) / 2);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM step WHERE comm_end_s IS NULL"), (N_STEPS + 3) / 3);
  ASSERT_EQ(q_int(s, "SELECT count(DISTINCT worker) FROM step"), N_WORKERS);
  int64_t batch_sum = 0;
  for (int64_t k = 0; k < 10; k++) batch_sum += make_step(k * N_WORKERS + 3).batch;
  ASSERT_EQ(q_int(s, "SELECT sum(batch) FROM step WHERE worker = 3 AND step < 10"), batch_sum);
  static const int64_t probes[] = {0, 1, 99999, 100000, 123456, N_STEPS - 1};
  for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
    hs_step_row e = make_step(probes[k]);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(hs_store_db(s),
                       "SELECT batch, start_s, compute_end_s, comm_end_s, wait_s, model_version,"
                       " staleness, loss FROM step WHERE run_id = ?1 AND worker = ?2 AND step = ?3",
                       -1, &st, NULL);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int(st, 2, e.worker);
    sqlite3_bind_int64(st, 3, e.step);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(st, 0), e.batch);
    ASSERT_NEAR(sqlite3_column_double(st, 1), e.start_s, 0);
    ASSERT_NEAR(sqlite3_column_double(st, 2), e.compute_end_s, 0);
    if (isnan(e.comm_end_s)) ASSERT_EQ(sqlite3_column_type(st, 3), SQLITE_NULL);
    else ASSERT_NEAR(sqlite3_column_double(st, 3), e.comm_end_s, 0);
    ASSERT_NEAR(sqlite3_column_double(st, 4), e.wait_s, 0);
    ASSERT_EQ(sqlite3_column_int64(st, 5), e.model_version);
    ASSERT_EQ(sqlite3_column_int(st, 6), e.staleness);
    if (isnan(e.loss)) ASSERT_EQ(sqlite3_column_type(st, 7), SQLITE_NULL);
    else ASSERT_NEAR(sqlite3_column_double(st, 7), e.loss, 0);
    sqlite3_finalize(st);
  }
  ASSERT_EQ(hs_store_run_finish(s, run, "complete", NULL, NULL, &d), 0);
  hs_store_close(s);
  rm_db(p);
}

/* Rows of committed batches survive a run that never finishes, and closing commits the rest;
 * the run stays 'running' so it never looks complete. */
static void test_steps_interrupted(void) {
  const char *p;
  hs_diag d = {0};
  int64_t run = 0;
  hs_store *s = new_store("interrupted.db", &p, &d, &run);
  if (!s) return;
  ASSERT_EQ(hs_store_steps_begin(s, run, &d), 0);
  for (int64_t i = 0; i < HS_STORE_STEP_BATCH + 10; i++) {
    hs_step_row r = make_step(i);
    hs_store_step_add(s, &r, &d);
  }
  /* A second connection sees exactly the committed batch. */
  hs_store *r = NULL;
  ASSERT_EQ(hs_store_open(&r, p, HS_STORE_READONLY, &d), 0);
  if (r) {
    ASSERT_EQ(q_int(r, "SELECT count(*) FROM step"), HS_STORE_STEP_BATCH);
    hs_store_close(r);
  }
  hs_store_close(s);
  s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, HS_STORE_READONLY, &d), 0);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM step"), HS_STORE_STEP_BATCH + 10);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM run WHERE status = 'running'"), 1);
  hs_store_close(s);
  rm_db(p);
}

/* The step rows need their run: an unknown run is refused at steps_begin (the rows themselves
 * go in without a foreign-key check), and foreign keys are back on afterwards. */
static void test_steps_need_run(void) {
  const char *p;
  hs_diag d = {0};
  hs_store *s = new_store("needrun.db", &p, &d, NULL);
  if (!s) return;
  ASSERT_EQ(hs_store_steps_begin(s, 42, &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "no run 42");
  ASSERT_EQ(q_int(s, "PRAGMA foreign_keys"), 1);
  ASSERT(sqlite3_get_autocommit(hs_store_db(s)));
  hs_step_row r0 = make_step(0);
  ASSERT_EQ(hs_store_step_add(s, &r0, &d), HS_EINVAL); /* no batch is open */
  ASSERT_EQ(hs_store_steps_end(s, &d), 0);
  int64_t run = 0;
  ASSERT_EQ(hs_store_run_begin(s, &run_info, &run, &d), 0);
  ASSERT_EQ(hs_store_steps_begin(s, run, &d), 0);
  ASSERT_EQ(q_int(s, "PRAGMA foreign_keys"), 0); /* off for the batch only */
  ASSERT_EQ(hs_store_step_add(s, &r0, &d), 0);
  hs_store_close(s); /* commits the row, foreign keys back on */
  s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, 0, &d), 0);
  if (!s) return;
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM step"), 1);
  ASSERT_EQ(q_int(s, "PRAGMA foreign_key_check"), -1); /* no orphan rows */
  /* Deleting the run cascades to its rows, as before. */
  ASSERT_EQ(sqlite3_exec(hs_store_db(s), "DELETE FROM run", NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM step"), 0);
  hs_store_close(s);
  rm_db(p);
}

/* A file made with another page size keeps it, and migrates and takes step rows as usual. */
static void test_existing_page_size(void) {
  const char *p = hs_test_tmp("pages.db");
  rm_db(p);
  sqlite3 *db = NULL;
  ASSERT_EQ(sqlite3_open(p, &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA page_size = 4096; PRAGMA journal_mode = WAL", NULL, NULL,
                         NULL),
            SQLITE_OK);
  sqlite3_close(db);
  hs_diag d = {0};
  hs_store *s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, 0, &d), 0);
  if (!s) return;
  ASSERT_EQ(q_int(s, "PRAGMA page_size"), 4096);
  ASSERT_EQ(hs_store_schema_version(s), HS_STORE_SCHEMA_VERSION);
  int64_t run = 0;
  ASSERT_EQ(hs_store_run_begin(s, &run_info, &run, &d), 0);
  ASSERT_EQ(hs_store_steps_begin(s, run, &d), 0);
  ASSERT_EQ(add_steps(s, 3 * HS_STORE_STEP_BATCH / 2, &d), 0);
  ASSERT_EQ(hs_store_run_finish(s, run, "complete", NULL, NULL, &d), 0);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM step"), 3 * HS_STORE_STEP_BATCH / 2);
  hs_store_close(s);
  /* Closing the last connection checkpointed the WAL into the file and removed it. */
  char wal[600];
  snprintf(wal, sizeof wal, "%s-wal", p);
  ASSERT(!file_exists(wal));
  s = NULL;
  ASSERT_EQ(hs_store_open(&s, p, HS_STORE_READONLY, &d), 0);
  if (s) {
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(hs_store_db(s), "PRAGMA integrity_check", -1, &st, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(strcmp((const char *)sqlite3_column_text(st, 0), "ok"), 0);
    sqlite3_finalize(st);
    hs_store_close(s);
  }
  rm_db(p);
}

/* Two handles on one file, as two processes of a sweep would have, interleave their writes. */
static void test_two_writers(void) {
  const char *p = hs_test_tmp("two.db");
  rm_db(p);
  hs_diag d = {0};
  hs_store *a = NULL, *b = NULL;
  ASSERT_EQ(hs_store_open(&a, p, 0, &d), 0);
  ASSERT_EQ(hs_store_open(&b, p, 0, &d), 0);
  if (!a || !b) return;
  int64_t ra = 0, rb = 0;
  ASSERT_EQ(hs_store_run_begin(a, &run_info, &ra, &d), 0);
  ASSERT_EQ(hs_store_run_begin(b, &run_info, &rb, &d), 0);
  ASSERT(ra != rb);
  ASSERT_EQ(hs_store_run_finish(b, rb, "interrupted", NULL, NULL, &d), 0);
  ASSERT_EQ(hs_store_run_finish(a, ra, "complete", NULL, NULL, &d), 0);
  ASSERT_EQ(q_int(a, "SELECT count(*) FROM run WHERE status != 'running'"), 2);
  hs_store_close(a);
  hs_store_close(b);
  rm_db(p);
}

/* The fixture for tests/cli_query.sh: two finished runs with known numbers, one running run,
 * and a text field that needs CSV quoting. */
static int write_fixture(const char *path) {
  rm_db(path);
  hs_diag d = {0};
  hs_store *s = NULL;
  int rc = hs_store_open(&s, path, 0, &d);
  if (rc) {
    fprintf(stderr, "fixture: %s\n", d.msg);
    return 1;
  }
  hs_run_info i1 = run_info, i2 = run_info, i3 = run_info;
  i1.params = "";
  i1.seed = 1;
  i2.params = "k=2,note=\"a, b\"";
  i2.policy = "lbb";
  i2.seed = 2;
  i3.kind = "real";
  int64_t r1 = 0, r2 = 0, r3 = 0;
  hs_summary s1 = {.workers = 4, .iterations = 5, .events = 100, .samples = 320,
                   .sim_time_s = 2.0, .mean_iteration_s = 0.4, .samples_per_s = 160,
                   .wait_fraction = 0.25, .wall_s = 0.01, .final_loss = NAN,
                   .final_accuracy = NAN, .time_to_target_s = NAN};
  hs_summary s2 = s1;
  s2.sim_time_s = 1.0;
  s2.mean_iteration_s = 0.2;
  s2.samples_per_s = 320;
  s2.wait_fraction = 0.0;
  s2.final_loss = 0.5;
  hs_worker_row w[2] = {
      {.index = 0, .device_type = "gtx1070", .node = "server0", .left_at_s = NAN,
       .initial_batch = 32, .steps = 5, .samples = 160, .busy_s = 1.5, .wait_s = 0.5,
       .comm_s = 0.1},
      {.index = 1, .device_type = "gtx750", .node = "server0", .left_at_s = NAN,
       .initial_batch = 32, .steps = 5, .samples = 160, .busy_s = 2.0, .wait_s = 0.0,
       .comm_s = 0.1},
  };
  if ((rc = hs_store_run_begin(s, &i1, &r1, &d)) || (rc = hs_store_workers_add(s, r1, w, 2, &d)) ||
      (rc = hs_store_run_finish(s, r1, "complete", &s1, NULL, &d)) ||
      (rc = hs_store_run_begin(s, &i2, &r2, &d)) || (rc = hs_store_workers_add(s, r2, w, 2, &d)) ||
      (rc = hs_store_run_finish(s, r2, "complete", &s2, NULL, &d)) ||
      (rc = hs_store_run_begin(s, &i3, &r3, &d)))
    fprintf(stderr, "fixture: %s\n", d.msg);
  hs_store_close(s);
  return rc ? 1 : 0;
}

/* The options of a real run: the writer's text is the one `hetsim real` has always stored (a
 * row of a database written before the writer existed), the reader reads it back, through the
 * store's json_set too, and reads what older hetsims wrote (keys missing) as zeros. */
static void test_real_options(void) {
  static const char stored[] =
      "{\"backend\":\"cpu\",\"device\":\"cpu\",\"device_name\":\"Intel(R) Xeon(R) Processor\",\"workers\":2,"
      "\"iterations\":30,\"epochs\":0,\"time_s\":0,\"target_loss\":0,\"lr\":0.10000000000000001,"
      "\"eval_every\":10,\"eval_samples\":300,\"train_samples\":1500,\"timeout_s\":60,\"launch\":\"none\","
      "\"pin\":\"auto\",\"pinned\":true}";
  hs_real_options o = {.workers = 2, .iterations = 30, .lr = 0.1, .eval_every = 10, .eval_samples = 300,
                       .train_samples = 1500, .timeout_s = 60, .pinned = 1};
  strcpy(o.backend, "cpu");
  strcpy(o.device, "cpu");
  strcpy(o.device_name, "Intel(R) Xeon(R) Processor");
  strcpy(o.launch, "none");
  strcpy(o.pin, "auto");
  char buf[2048];
  hs_diag d = {0};
  ASSERT_EQ(hs_real_options_format(&o, buf, sizeof buf, &d), 0);
  ASSERT_STR(buf, stored);
  char small[64];
  ASSERT_EQ(hs_real_options_format(&o, small, sizeof small, &d), HS_EINVAL);
  ASSERT_STR(small, "");

  /* Through the store (which adds pid, host, boot, pid_start) and back. */
  char path[] = "/tmp/hs_test_runopts_XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  close(fd);
  rm_db(path);
  hs_store *s = NULL;
  ASSERT_EQ(hs_store_open(&s, path, 0, &d), 0);
  hs_run_info info = run_info;
  info.kind = "real";
  info.options_json = buf;
  int64_t id = 0;
  ASSERT_EQ(hs_store_run_begin(s, &info, &id, &d), 0);
  sqlite3_stmt *st = NULL;
  ASSERT_EQ(sqlite3_prepare_v2(hs_store_db(s), "SELECT options FROM run WHERE id = ?", -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_int64(st, 1, id);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  hs_real_options back;
  ASSERT_EQ(hs_real_options_parse((const char *)sqlite3_column_text(st, 0), &back, &d), 0);
  sqlite3_finalize(st);
  ASSERT_STR(back.backend, "cpu");
  ASSERT_STR(back.device_name, "Intel(R) Xeon(R) Processor");
  ASSERT_EQ(back.workers, 2);
  ASSERT_EQ(back.iterations, 30);
  ASSERT(back.lr == 0.1);
  ASSERT_EQ(back.eval_every, 10);
  ASSERT_EQ(back.eval_samples, 300);
  ASSERT_EQ(back.train_samples, 1500);
  ASSERT(back.timeout_s == 60);
  ASSERT_STR(back.launch, "none");
  ASSERT_STR(back.pin, "auto");
  ASSERT_EQ(back.pinned, 1);
  hs_store_close(s);
  rm_db(path);

  /* An older run's options: keys missing, one of another type, one unknown. */
  ASSERT_EQ(hs_real_options_parse("{\"backend\":\"cpu\",\"device_name\":\"x \\\"y\\\"\",\"workers\":3.0,"
                                  "\"lr\":\"fast\",\"sweep_point\":\"00ff\"}", &back, &d), 0);
  ASSERT_STR(back.device_name, "x \"y\"");
  ASSERT_EQ(back.workers, 3);
  ASSERT(back.lr == 0);
  ASSERT_EQ(back.eval_every, 0);
  ASSERT_STR(back.pin, "");
  ASSERT_EQ(back.pinned, 0);
  ASSERT_EQ(hs_real_options_parse(NULL, &back, &d), 0);
  ASSERT_EQ(back.workers, 0);
  ASSERT_EQ(hs_real_options_parse("[1]", &back, &d), HS_EINVAL);
  ASSERT_EQ(hs_real_options_parse("{\"workers\":", &back, &d), HS_EINVAL);

  /* A string that needs escapes is written escaped, and reads back the same. */
  strcpy(o.device_name, "a\"b\\c");
  ASSERT_EQ(hs_real_options_format(&o, buf, sizeof buf, &d), 0);
  ASSERT_CONTAINS(buf, "\"device_name\":\"a\\\"b\\\\c\"");
  ASSERT_EQ(hs_real_options_parse(buf, &back, &d), 0);
  ASSERT_STR(back.device_name, "a\"b\\c");

  /* Per-worker devices (the cluster file's real_device): written last, only when there are
   * some, and read back per type. */
  ASSERT_EQ(back.n_type_devices, 0);
  o.n_type_devices = 2;
  strcpy(o.type_devices[0].type, "big");
  strcpy(o.type_devices[0].device, "cuda:0/sm=64");
  strcpy(o.type_devices[0].device_name, "NVIDIA H100 80GB HBM3 (64 SMs)");
  strcpy(o.type_devices[1].type, "small");
  strcpy(o.type_devices[1].device, "cuda:0/sm=16");
  strcpy(o.type_devices[1].device_name, "NVIDIA H100 80GB HBM3 (16 SMs)");
  ASSERT_EQ(hs_real_options_format(&o, buf, sizeof buf, &d), 0);
  ASSERT_CONTAINS(buf, "\"pinned\":true,\"type_devices\":{\"big\":{\"device\":\"cuda:0/sm=64\",\"device_name\":"
                       "\"NVIDIA H100 80GB HBM3 (64 SMs)\"},\"small\":{");
  ASSERT_EQ(hs_real_options_parse(buf, &back, &d), 0);
  ASSERT_EQ(back.n_type_devices, 2);
  ASSERT_STR(back.type_devices[1].type, "small");
  ASSERT_STR(back.type_devices[1].device, "cuda:0/sm=16");
  ASSERT_STR(back.type_devices[1].device_name, "NVIDIA H100 80GB HBM3 (16 SMs)");
  ASSERT_EQ(back.pinned, 1);
  ASSERT_EQ(back.cpus, 0);
  ASSERT_EQ(back.local_ranks, 0);

  /* The CPUs and the ranks on rank 0's machine (since 2026-11-29): written only when known,
   * before type_devices, and read back; a bad value reads as unknown, a huge one is bounded. */
  o.cpus = 2;
  o.local_ranks = 3;
  ASSERT_EQ(hs_real_options_format(&o, buf, sizeof buf, &d), 0);
  ASSERT_CONTAINS(buf, "\"pinned\":true,\"cpus\":2,\"local_ranks\":3,\"type_devices\":{");
  ASSERT_EQ(hs_real_options_parse(buf, &back, &d), 0);
  ASSERT_EQ(back.cpus, 2);
  ASSERT_EQ(back.local_ranks, 3);
  ASSERT_EQ(hs_real_options_parse("{\"cpus\":-4,\"local_ranks\":\"x\"}", &back, &d), 0);
  ASSERT_EQ(back.cpus, 0);
  ASSERT_EQ(back.local_ranks, 0);
  ASSERT_EQ(hs_real_options_parse("{\"cpus\":1e30}", &back, &d), 0);
  ASSERT_EQ(back.cpus, HS_CPUS_MAX);
}

static int list_device(void *ctx, const hs_device_fit_row *r) {
  int *n = ctx;
  n[0]++;
  if (!r->model && !r->form && isnan(r->heldout_rel_error) && !r->has_max_batch && r->batches == 0) n[1]++;
  return 0;
}

static int stop_listing(void *ctx, const hs_device_fit_row *r) {
  (void)ctx;
  (void)r;
  return 7;
}

static int count_model(void *ctx, const hs_model_row *r) {
  int *n = ctx;
  if (!strcmp(r->name, "tiny") && r->params == 10 && r->grad_bytes == 40 && isnan(r->flops_per_sample)) (*n)++;
  return 0;
}

/* The typed readers the commands use, on a run with known rows: each answer computed by hand. */
static void test_readers(void) {
  const char *p;
  hs_diag d = {0};
  int64_t run = 0;
  hs_store *s = new_store("readers.db", &p, &d, &run);
  if (!s) return;
  hs_run_record rec;
  ASSERT_EQ(hs_store_run_get(s, run + 99, &rec, &d), 0);
  hs_run_record_free(&rec);
  ASSERT_EQ(hs_store_run_get(s, run, &rec, &d), 1);
  ASSERT_STR(rec.kind, "sim");
  ASSERT_STR(rec.status, "running");
  ASSERT_STR(rec.model, "resnet18");
  ASSERT_STR(rec.cluster_text, "name: lbb-4gpu\n");
  ASSERT_CONTAINS(rec.options_json, "\"iterations\":5");
  ASSERT(rec.seed == UINT64_C(0xfedcba9876543210));
  ASSERT_EQ(rec.iterations, 0);
  ASSERT(isnan(rec.total_s) && isnan(rec.last_loss));
  hs_run_record_free(&rec);

  /* Two workers, versions 0 (both), 1 (both), 2 (worker 0): first starts 0, 1.0, 2.5. */
  ASSERT_EQ(hs_store_steps_begin(s, run, &d), 0);
  const hs_step_row rows[] = {
      {.worker = 0, .step = 0, .batch = 8, .start_s = 0.0, .compute_end_s = 0.4, .comm_end_s = 0.5, .model_version = 0},
      {.worker = 1, .step = 0, .batch = 8, .start_s = 0.1, .compute_end_s = 0.3, .comm_end_s = 0.9, .model_version = 0},
      {.worker = 0, .step = 1, .batch = 16, .start_s = 1.0, .compute_end_s = 1.2, .comm_end_s = 1.4, .model_version = 1},
      {.worker = 1, .step = 1, .batch = 16, .start_s = 1.1, .compute_end_s = 1.1, .comm_end_s = 1.6, .model_version = 1},
      {.worker = 0, .step = 2, .batch = 8, .start_s = 2.5, .compute_end_s = 2.6, .comm_end_s = 2.7, .model_version = 2},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    hs_step_row r = rows[i];
    r.loss = NAN;
    ASSERT_EQ(hs_store_step_add(s, &r, &d), 0);
  }
  int64_t *v = NULL;
  double *t = NULL;
  ASSERT_EQ(hs_store_version_starts(s, run, &v, &t, &d), HS_EINVAL); /* the batch is open */
  free(v);
  free(t);
  ASSERT_EQ(hs_store_steps_end(s, &d), 0);
  ASSERT_EQ(hs_store_version_starts(s, run, &v, &t, &d), 3);
  ASSERT(v && t && v[0] == 0 && v[1] == 1 && v[2] == 2 && t[0] == 0.0 && t[1] == 1.0 && t[2] == 2.5);
  free(v);
  free(t);
  hs_step_compute *c = NULL;
  ASSERT_EQ(hs_store_step_computes(s, run, &c, &d), 4); /* worker 1's step 1 computed nothing */
  double sum = 0;
  for (int i = 0; c && i < 4; i++) sum += c[i].compute_s * c[i].batch;
  ASSERT_NEAR(sum, 0.4 * 8 + 0.2 * 8 + 0.2 * 16 + 0.1 * 8, 1e-12);
  free(c);
  double part[3];
  /* Steps with a next one: worker 0 steps 0, 1; worker 1 step 0. */
  ASSERT_EQ(hs_store_step_parts(s, run, part, &d), 1);
  ASSERT_NEAR(part[0], (0.4 + 0.2 + 0.2) / 3, 1e-12);
  ASSERT_NEAR(part[1], (0.1 + 0.2 + 0.6) / 3, 1e-12);
  ASSERT_NEAR(part[2], (0.5 + 1.1 + 0.2) / 3, 1e-12);
  ASSERT_EQ(hs_store_step_parts(s, run + 99, part, &d), 0);
  ASSERT(isnan(part[0]));
  int64_t steps, versions;
  ASSERT_EQ(hs_store_step_version_counts(s, run, &steps, &versions, &d), 0);
  ASSERT_EQ(steps, 5);
  ASSERT_EQ(versions, 3);

  ASSERT_EQ(hs_store_eval_add(s, run, 1.0, 1, 2.0, NAN, &d), 0);
  ASSERT_EQ(hs_store_eval_add(s, run, 2.0, 2, 1.5, NAN, &d), 0);
  double tt = 0;
  ASSERT_EQ(hs_store_eval_first_below(s, run, 1.9, &tt, &d), 1);
  ASSERT(tt == 2.0);
  ASSERT_EQ(hs_store_eval_first_below(s, run, 1.0, &tt, &d), 0);
  ASSERT_EQ(hs_store_eval_add(s, run, 3.0, 3, NAN, 0.5, &d), 0); /* no loss: not read */
  hs_eval_row *ev = NULL;
  ASSERT_EQ(hs_store_evals_get(s, run, &ev, &d), 2);
  ASSERT(ev && ev[0].step == 1 && ev[0].loss == 2.0 && isnan(ev[0].accuracy) && ev[1].time_s == 2.0);
  free(ev);
  double stale = 0;
  ASSERT_EQ(hs_store_step_mean_staleness(s, run, &stale, &d), 0);
  ASSERT(stale == 0);
  ASSERT_EQ(hs_store_step_mean_staleness(s, run + 99, &stale, &d), 0);
  ASSERT(isnan(stale));
  hs_summary sum_row = {.workers = 2, .iterations = 3, .samples = 56, .sim_time_s = 2.7, .final_loss = NAN,
                        .final_accuracy = NAN, .time_to_target_s = NAN};
  ASSERT_EQ(hs_store_run_finish(s, run, "complete", &sum_row, NULL, &d), 0);
  ASSERT_EQ(hs_store_run_get(s, run, &rec, &d), 1);
  ASSERT_EQ(rec.iterations, 3);
  ASSERT_EQ(rec.samples, 56);
  ASSERT(rec.total_s == 2.7 && isnan(rec.last_loss)); /* the last evaluation has no loss */
  hs_run_record_free(&rec);

  /* The calibration: one device with a fit per world size and samples at two sizes. */
  sqlite3 *db = hs_store_db(s);
  ASSERT_EQ(sqlite3_exec(db,
      "INSERT INTO device(id, name, kind) VALUES (7, 'box', 'cpu');"
      "INSERT INTO comm_model(device_id, backend, op, world_size, alpha_s, beta_bytes_per_s) VALUES"
      " (7, 'cpu', 'allreduce', 2, 1e-5, 1e9), (7, 'cpu', 'allreduce', 4, 2e-5, 5e8), (7, 'nccl', 'allreduce', 3, 9, 9);"
      "INSERT INTO comm_sample(device_id, backend, op, world_size, bytes, median_s, count) VALUES"
      " (7, 'cpu', 'p2p', 2, 1000, 1e-6, 1), (7, 'cpu', 'p2p', 2, 100000, 1e-4, 1),"
      " (7, 'cpu', 'wake', 2, 0, 3e-6, 1), (7, 'cpu', 'wake', 2, 0, 4e-6, 1);"
      "INSERT INTO model(name, params, grad_bytes) VALUES ('tiny', 10, 40);"
      "INSERT INTO calib_sample(device_id, model, batch, phase, median_s, count) VALUES"
      " (7, 'tiny', 16, 'update', 3e-3, 1), (7, 'tiny', 8, 'update', 1e-3, 1), (7, 'tiny', 8, 'step', 9, 1);",
      NULL, NULL, NULL), SQLITE_OK);
  double a = 0, b = 0;
  ASSERT_EQ(hs_store_comm_fit(s, "box", "cpu", "allreduce", 3, &a, &b, &d), 1); /* a tie: the newest */
  ASSERT(a == 2e-5 && b == 5e8);
  ASSERT_EQ(hs_store_comm_fit(s, "box", "cpu", "allreduce", 2, &a, &b, &d), 1);
  ASSERT(a == 1e-5 && b == 1e9);
  ASSERT_EQ(hs_store_comm_fit(s, "box", "cpu", "p2p", 2, &a, &b, &d), 0);
  ASSERT_EQ(hs_store_comm_time_at(s, "box", "cpu", "p2p", 2, 10000, &tt, &d), 1);
  ASSERT_NEAR(tt, 1e-5, 1e-15); /* log-log between 1000 B -> 1 us and 100000 B -> 100 us */
  ASSERT_EQ(hs_store_comm_time_at(s, "nobox", "cpu", "p2p", 2, 10000, &tt, &d), 0);
  ASSERT_EQ(hs_store_comm_latest(s, "box", "cpu", "wake", 2, &tt, &d), 1);
  ASSERT(tt == 4e-6);
  double med[4];
  ASSERT_EQ(hs_store_calib_medians(s, "box", "tiny", "update", med, 4, &d), 2);
  ASSERT(med[0] == 1e-3 && med[1] == 3e-3);
  ASSERT_EQ(hs_store_calib_medians(s, "box", "tiny", "update", med, 1, &d), 1);

  /* The device listing: one row per device and chosen step fit, or one row without a fit. */
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO device(id, name, kind) VALUES (8, 'bare', 'cpu');", NULL, NULL, NULL), SQLITE_OK);
  int listed[2] = {0, 0};
  ASSERT_EQ(hs_store_device_fits_each(s, list_device, listed, &d), 0);
  ASSERT_EQ(listed[0], 2);
  ASSERT_EQ(listed[1], 2); /* neither has a chosen step fit */
  ASSERT_EQ(hs_store_device_fits_each(s, stop_listing, NULL, &d), 7); /* fn's answer stops it */
  int models = 0;
  ASSERT_EQ(hs_store_imported_models_each(s, count_model, &models, &d), 0);
  ASSERT_EQ(models, 0); /* 'tiny' has no source */
  ASSERT_EQ(sqlite3_exec(db, "UPDATE model SET source = 'profile x' WHERE name = 'tiny';", NULL, NULL, NULL), SQLITE_OK);
  ASSERT_EQ(hs_store_imported_models_each(s, count_model, &models, &d), 0);
  ASSERT_EQ(models, 1);

  /* A validation, found again by its simulated run's key once that run is complete. */
  hs_run_info si = run_info;
  si.options_json = "{\"validates\":1,\"validation_key\":\"00ab\"}";
  int64_t sim = 0, vid = 0, fid = 0, fsim = 0;
  ASSERT_EQ(hs_store_run_begin(s, &si, &sim, &d), 0);
  hs_validation_row vr = {.run_id = run, .sim_run_id = sim, .median_iter_error = 0.25, .p95_iter_error = NAN,
                          .time_to_loss_error = NAN, .mean_iter_error = -0.5, .total_time_error = 0.125,
                          .iter_wasserstein = 0.0625};
  ASSERT_EQ(hs_store_validation_add(s, &vr, &vid, &d), 0);
  ASSERT(vid > 0);
  double st_total = 0, st_ttl = 0;
  ASSERT_EQ(hs_store_validation_find(s, run, "00ab", &fid, &fsim, &st_total, &st_ttl, &d), 0); /* running */
  hs_summary ss = {.sim_time_s = 3.5, .final_loss = NAN, .final_accuracy = NAN, .time_to_target_s = NAN};
  ASSERT_EQ(hs_store_run_finish(s, sim, "complete", &ss, NULL, &d), 0);
  ASSERT_EQ(hs_store_validation_find(s, run, "00ab", &fid, &fsim, &st_total, &st_ttl, &d), 1);
  ASSERT_EQ(fid, vid);
  ASSERT_EQ(fsim, sim);
  ASSERT(st_total == 3.5 && isnan(st_ttl));
  ASSERT_EQ(hs_store_validation_find(s, run, "00ac", &fid, &fsim, &st_total, &st_ttl, &d), 0);
  ASSERT_EQ(q_int(s, "SELECT count(*) FROM validation WHERE p95_iter_error IS NULL AND median_iter_error = 0.25"), 1);
  hs_store_close(s);
  rm_db(p);
}

/* The runs a sweep tagged, read back with their summaries (core_sweep.h). */
static int count_sweep_run(void *ctx, const hs_sweep_run *r) {
  int *seen = ctx;
  if (!strcmp(r->key, "00000000000000aa") && r->complete && !r->error && r->final_loss == 0.5 &&
      isnan(r->time_to_target_s))
    seen[0]++;
  else if (!strcmp(r->key, "00000000000000bb") && !r->complete && r->error && isnan(r->final_loss))
    seen[1]++;
  else
    seen[2]++;
  return 0;
}

static void test_sweep_runs(void) {
  const char *p;
  hs_diag d = {0};
  hs_store *s = new_store("sweep_runs.db", &p, &d, NULL);
  if (!s) return;
  hs_run_info a = run_info, b = run_info, c = run_info;
  a.options_json = "{\"sweep_point\":\"00000000000000aa\"}";
  b.options_json = "{\"sweep_point\":\"00000000000000bb\"}";
  c.options_json = "{\"iterations\":5}";
  int64_t ia, ib, ic;
  ASSERT_EQ(hs_store_run_begin(s, &a, &ia, &d), 0);
  ASSERT_EQ(hs_store_run_begin(s, &b, &ib, &d), 0);
  ASSERT_EQ(hs_store_run_begin(s, &c, &ic, &d), 0);
  hs_summary sum = {.final_loss = 0.5, .final_accuracy = NAN, .time_to_target_s = NAN};
  ASSERT_EQ(hs_store_run_finish(s, ia, "complete", &sum, NULL, &d), 0);
  ASSERT_EQ(hs_store_run_finish(s, ib, "failed", NULL, "boom", &d), 0);
  int seen[3] = {0, 0, 0};
  ASSERT_EQ(hs_sweep_runs_each(s, count_sweep_run, seen, &d), 0);
  ASSERT_EQ(seen[0], 1);
  ASSERT_EQ(seen[1], 1);
  ASSERT_EQ(seen[2], 0);
  hs_store_close(s);
  rm_db(p);
}

/* A shard its sweep was killed while creating (an empty file, or SQLite's header without a
 * table) holds no point: loading its keys and merging it do nothing, without an error; a file
 * that is not SQLite is still refused. */
static void test_sweep_shard_killed_at_creation(void) {
  const char *p;
  hs_diag d = {0};
  hs_store *s = new_store("sweep_into.db", &p, &d, NULL);
  if (!s) return;
  const char *empty = hs_test_tmp("sweep_empty.db.rank1");
  const char *header = hs_test_tmp("sweep_header.db.rank2");
  const char *junk = hs_test_tmp("sweep_junk.db.rank3");
  rm_db(empty), rm_db(header), rm_db(junk);
  FILE *f = fopen(empty, "w");
  if (f) fclose(f);
  sqlite3 *db = NULL;
  ASSERT_EQ(sqlite3_open(header, &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA page_size = 16384; PRAGMA journal_mode = WAL", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  f = fopen(junk, "w");
  if (f) {
    fputs("not a database, and long enough to be read as one's header by SQLite ...........", f);
    fclose(f);
  }
  hs_sweep_keys ks = {0};
  ASSERT_EQ(hs_sweep_keys_load(&ks, empty, &d), 0);
  ASSERT_EQ(hs_sweep_keys_load(&ks, header, &d), 0);
  ASSERT_EQ(ks.n, 0);
  ASSERT(hs_sweep_keys_load(&ks, junk, &d) != 0);
  hs_sweep_keys_free(&ks);
  int merged = -1, skipped = -1;
  ASSERT_EQ(hs_sweep_merge(s, empty, &merged, &skipped, &d), 0);
  ASSERT_EQ(merged + skipped, 0);
  ASSERT_EQ(hs_sweep_merge(s, header, &merged, &skipped, &d), 0);
  ASSERT_EQ(merged + skipped, 0);
  ASSERT(hs_sweep_merge(s, junk, &merged, &skipped, &d) != 0);
  hs_store_close(s);
  rm_db(p), rm_db(empty), rm_db(header), rm_db(junk);
}

/* A shard whose sweep was killed after it committed a run: the commit is still in the shard's
 * write-ahead log (nothing checkpointed it), and its key is read from there. */
static void test_sweep_shard_killed_after_commit(void) {
  const char *p = hs_test_tmp("sweep_killed.db.rank1");
  rm_db(p);
  pid_t pid = fork();
  if (pid == 0) {
    hs_diag cd = {0};
    hs_store *s = NULL;
    hs_run_info r = run_info;
    r.options_json = "{\"sweep_point\":\"00000000000000cc\"}";
    int64_t id;
    hs_summary sum = {.final_loss = NAN, .final_accuracy = NAN, .time_to_target_s = NAN};
    int ok = !hs_store_open(&s, p, 0, &cd) && !hs_store_run_begin(s, &r, &id, &cd) &&
             !hs_store_run_finish(s, id, "complete", &sum, NULL, &cd);
    _exit(ok ? 0 : 1); /* killed, as it were: no close, no checkpoint */
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char wal[4200];
  snprintf(wal, sizeof wal, "%s-wal", p);
  ASSERT_EQ(access(wal, F_OK), 0);
  hs_diag d = {0};
  hs_sweep_keys ks = {0};
  ASSERT_EQ(hs_sweep_keys_load(&ks, p, &d), 0);
  ASSERT_EQ(ks.n, 1);
  ASSERT(hs_sweep_keys_has(&ks, "00000000000000cc"));
  hs_sweep_keys_free(&ks);
  rm_db(p);
}

static const hs_test_case cases[] = {
    {"open_migrate_reopen", test_open_migrate_reopen},
    {"migrate_from_v1", test_migrate_from_v1},
    {"migrate_from_v2", test_migrate_from_v2},
    {"migrate_from_v3", test_migrate_from_v3},
    {"migrate_from_v4", test_migrate_from_v4},
    {"migrate_from_v5", test_migrate_from_v5},
    {"newer_schema_refused", test_newer_schema_refused},
    {"readonly", test_readonly},
    {"not_a_database", test_not_a_database},
    {"foreign_sqlite_file", test_foreign_sqlite_file},
    {"run_lifecycle", test_run_lifecycle},
    {"workers_and_eval", test_workers_and_eval},
    {"many_workers", test_many_workers},
    {"steps_roundtrip", test_steps_roundtrip},
    {"steps_interrupted", test_steps_interrupted},
    {"steps_need_run", test_steps_need_run},
    {"existing_page_size", test_existing_page_size},
    {"two_writers", test_two_writers},
    {"real_options", test_real_options},
    {"readers", test_readers},
    {"sweep_shard_killed_at_creation", test_sweep_shard_killed_at_creation},
    {"sweep_shard_killed_after_commit", test_sweep_shard_killed_after_commit},
    {"sweep_runs", test_sweep_runs},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  const char *fixture = getenv("HETSIM_STORE_FIXTURE");
  if (fixture && *fixture) return write_fixture(fixture);
  return hs_test_main("store", cases, argc, argv);
}
