#include "core/core_store.h"

#include "core/core_perfmodel.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Step rows buffered before they are handed to SQLite in one statement, "INSERT INTO step
 * SELECT ... FROM hs_step_feed", where hs_step_feed is a virtual table over the buffer. One
 * statement then carries the VDBE start and reset for 1,024 rows, and each row costs no
 * parameter binding, only a column read from C memory. bench/bench_store.c compared this with
 * one-row and 32-row multi-VALUES inserts. */
enum { STEP_CHUNK = 1024 };

typedef struct step_chunk {
  int n; /* rows in use */
  hs_step_row rows[STEP_CHUNK];
} step_chunk;

/* A virtual table over rows in C memory (feed_module, below): its columns (schema), and each
 * value given by column(aux, row, col, ctx) for the rows [*lo, *hi). */
typedef struct row_feed {
  const char *schema;  /* the "CREATE TABLE x(...)" the table declares */
  int estimate;        /* the rows xBestIndex reports */
  const int *lo, *hi;  /* the rows shown now */
  void (*column)(const void *aux, int i, int col, sqlite3_context *ctx);
  const void *aux;
} row_feed;

struct hs_store {
  sqlite3 *db;
  char *path;
  int flags;
  int version;             /* schema version in the file */
  sqlite3_stmt *step_ins1; /* one-row insert, for the rows of a chunk that failed */
  sqlite3_stmt *step_insn; /* the insert from hs_step_feed, prepared once */
  int64_t step_run;        /* run of the open step batch */
  int steps_open;          /* a step transaction is open */
  int step_fk_off;         /* foreign_keys was turned off for the step batch */
  struct ckpt_worker *ckpt; /* the step batch's checkpoint thread, or NULL */
  int64_t step_pending;    /* rows added since the last commit, buffered ones included */
  step_chunk *step_cur;    /* the chunk hs_store_step_add fills: step_own or the writer's */
  const hs_step_row *feed; /* the rows hs_step_feed shows, while the insert runs */
  int feed_n;
  row_feed step_feed;      /* hs_step_feed's description, for the connection's life */
  struct step_writer *writer; /* the step batch's writer thread, or NULL (rows go in inline) */
  step_chunk step_own;
};

/* The ordered migrations: migrations[i] brings the schema from version i to i + 1. Never edit
 * one that has shipped; append a new one. Each runs in its own transaction together with the
 * update of schema_version, so a crash leaves the file at a whole version. */
static const char *const migrations[] = {
    /* 1: runs and their records, calibration and validation tables. */
    "CREATE TABLE run ("
    "  id INTEGER PRIMARY KEY,"
    "  kind TEXT NOT NULL CHECK (kind IN ('sim', 'real')),"
    "  policy TEXT NOT NULL,"
    "  params TEXT NOT NULL DEFAULT '',"
    "  cluster_name TEXT,"
    "  cluster_path TEXT,"
    "  cluster_text TEXT,"
    "  model TEXT NOT NULL,"
    "  global_batch INTEGER NOT NULL CHECK (global_batch > 0),"
    "  seed INTEGER NOT NULL,"
    "  options TEXT CHECK (options IS NULL OR json_valid(options)),"
    "  versions TEXT CHECK (versions IS NULL OR json_valid(versions)),"
    "  command TEXT,"
    "  status TEXT NOT NULL DEFAULT 'running'"
    "    CHECK (status IN ('running', 'complete', 'failed', 'interrupted')),"
    "  error TEXT,"
    "  started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),"
    "  finished_at TEXT"
    ") STRICT;"
    "CREATE TABLE summary ("
    "  run_id INTEGER PRIMARY KEY REFERENCES run(id) ON DELETE CASCADE,"
    "  workers INTEGER, iterations INTEGER, events INTEGER, samples INTEGER,"
    "  sim_time_s REAL, mean_iteration_s REAL, samples_per_s REAL,"
    "  wait_fraction REAL CHECK (wait_fraction IS NULL OR (wait_fraction >= 0 AND wait_fraction <= 1)),"
    "  wall_s REAL, final_loss REAL, final_accuracy REAL, time_to_target_s REAL"
    ") STRICT;"
    "CREATE TABLE worker ("
    "  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL CHECK (idx >= 0),"
    "  device_type TEXT, node TEXT,"
    "  joined_at_s REAL NOT NULL DEFAULT 0, left_at_s REAL,"
    "  initial_batch INTEGER, steps INTEGER NOT NULL DEFAULT 0, samples INTEGER NOT NULL DEFAULT 0,"
    "  busy_s REAL, wait_s REAL, comm_s REAL,"
    "  PRIMARY KEY (run_id, idx)"
    ") STRICT;"
    /* WITHOUT ROWID: the primary key is the only b-tree, so an insert touches one tree instead
     * of a rowid table plus its unique index (bench/bench_store.c measures the difference). */
    "CREATE TABLE step ("
    "  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,"
    "  worker INTEGER NOT NULL, step INTEGER NOT NULL, batch INTEGER NOT NULL,"
    "  start_s REAL NOT NULL, compute_end_s REAL NOT NULL, comm_end_s REAL, wait_s REAL NOT NULL,"
    "  model_version INTEGER NOT NULL, staleness INTEGER NOT NULL, loss REAL,"
    "  PRIMARY KEY (run_id, step, worker)"
    ") STRICT, WITHOUT ROWID;"
    "CREATE TABLE eval ("
    "  id INTEGER PRIMARY KEY,"
    "  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,"
    "  time_s REAL NOT NULL, step INTEGER NOT NULL, loss REAL,"
    "  accuracy REAL CHECK (accuracy IS NULL OR (accuracy >= 0 AND accuracy <= 1))"
    ") STRICT;"
    "CREATE INDEX eval_run ON eval(run_id, time_s);"
    "CREATE TABLE device ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  uuid TEXT,"
    "  kind TEXT NOT NULL CHECK (kind IN ('cpu', 'cuda')),"
    "  ordinal INTEGER,"
    "  sm_count INTEGER CHECK (sm_count IS NULL OR sm_count > 0),"
    "  sm_partition INTEGER CHECK (sm_partition IS NULL OR sm_partition > 0),"
    "  memory_bytes INTEGER CHECK (memory_bytes IS NULL OR memory_bytes >= 0),"
    "  compute_capability TEXT,"
    "  clock_sm_mhz INTEGER, clock_mem_mhz INTEGER,"
    "  driver_version TEXT, cuda_version TEXT, cudnn_version TEXT, nccl_version TEXT,"
    "  blas TEXT, host TEXT,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "CREATE TABLE model ("
    "  name TEXT PRIMARY KEY,"
    "  params INTEGER NOT NULL CHECK (params > 0),"
    "  grad_bytes INTEGER NOT NULL CHECK (grad_bytes > 0),"
    "  flops_per_sample REAL,"
    "  description TEXT"
    ") STRICT;"
    "CREATE TABLE calib_sample ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER NOT NULL REFERENCES device(id) ON DELETE CASCADE,"
    "  model TEXT NOT NULL REFERENCES model(name),"
    "  batch INTEGER NOT NULL CHECK (batch > 0),"
    "  phase TEXT NOT NULL CHECK (phase IN ('forward', 'backward', 'update', 'step')),"
    "  median_s REAL NOT NULL, p10_s REAL, p90_s REAL,"
    "  count INTEGER NOT NULL CHECK (count > 0),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "CREATE INDEX calib_sample_key ON calib_sample(device_id, model, phase, batch);"
    "CREATE TABLE perf_model ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER NOT NULL REFERENCES device(id) ON DELETE CASCADE,"
    "  model TEXT NOT NULL REFERENCES model(name),"
    "  phase TEXT NOT NULL CHECK (phase IN ('forward', 'backward', 'update', 'step')),"
    "  form TEXT NOT NULL CHECK (form IN ('linear', 'cubic', 'piecewise', 'saturating')),"
    "  params TEXT NOT NULL CHECK (json_valid(params)),"
    "  r2 REAL, heldout_rel_error REAL,"
    "  max_batch INTEGER CHECK (max_batch IS NULL OR max_batch > 0),"
    "  chosen INTEGER NOT NULL DEFAULT 0 CHECK (chosen IN (0, 1)),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "CREATE INDEX perf_model_key ON perf_model(device_id, model, phase);"
    "CREATE TABLE comm_sample ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  bytes INTEGER NOT NULL CHECK (bytes >= 0),"
    "  median_s REAL NOT NULL, p10_s REAL, p90_s REAL,"
    "  count INTEGER NOT NULL CHECK (count > 0),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "CREATE INDEX comm_sample_key ON comm_sample(backend, op, device_id, bytes);"
    "CREATE TABLE comm_model ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  alpha_s REAL NOT NULL CHECK (alpha_s >= 0),"
    "  beta_bytes_per_s REAL NOT NULL CHECK (beta_bytes_per_s > 0),"
    "  r2 REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "CREATE TABLE validation ("
    "  id INTEGER PRIMARY KEY,"
    "  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,"
    "  sim_run_id INTEGER REFERENCES run(id) ON DELETE SET NULL,"
    "  median_iter_error REAL, p95_iter_error REAL, time_to_loss_error REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "CREATE INDEX validation_run ON validation(run_id);"
    "CREATE INDEX validation_sim_run ON validation(sim_run_id);",
    /* 2: comm_sample admits op 'wake', the cpu's thread hand-off latency (bytes 0; docs/
     * schema.md). SQLite cannot change a CHECK constraint in place, so the table is rebuilt
     * with the same columns, rows and index. */
    "CREATE TABLE comm_sample_v2 ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter',"
    "                                 'wake')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  bytes INTEGER NOT NULL CHECK (bytes >= 0),"
    "  median_s REAL NOT NULL, p10_s REAL, p90_s REAL,"
    "  count INTEGER NOT NULL CHECK (count > 0),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "INSERT INTO comm_sample_v2(id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s,"
    "                           count, created_at)"
    "  SELECT id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s, count, created_at"
    "  FROM comm_sample;"
    "DROP TABLE comm_sample;"
    "ALTER TABLE comm_sample_v2 RENAME TO comm_sample;"
    "CREATE INDEX comm_sample_key ON comm_sample(backend, op, device_id, bytes);",
    /* 3: measurements made elsewhere (docs/schema.md, docs/profile.md). device and model say
     * where their numbers come from; validation gains the errors of the mean iteration time, of
     * the total time and the distance between the iteration-time distributions; fitted
     * convergence parameters are stored per model; comm_sample and comm_model admit backend
     * 'gloo' (torch.distributed's cpu backend, measured by tools/hetsim_profile.py), rebuilt
     * as in migration 2 because SQLite cannot change a CHECK in place. */
    "ALTER TABLE device ADD COLUMN source TEXT;"
    "ALTER TABLE model ADD COLUMN source TEXT;"
    "ALTER TABLE validation ADD COLUMN mean_iter_error REAL;"
    "ALTER TABLE validation ADD COLUMN total_time_error REAL;"
    "ALTER TABLE validation ADD COLUMN iter_wasserstein REAL;"
    "CREATE TABLE convergence_fit ("
    "  id INTEGER PRIMARY KEY,"
    "  model TEXT NOT NULL,"
    "  params TEXT NOT NULL CHECK (json_valid(params)),"
    "  source TEXT NOT NULL,"
    "  points INTEGER NOT NULL CHECK (points > 0),"
    "  rmse REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "CREATE INDEX convergence_fit_model ON convergence_fit(model, id);"
    "CREATE TABLE comm_sample_v3 ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu', 'gloo')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter',"
    "                                 'wake')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  bytes INTEGER NOT NULL CHECK (bytes >= 0),"
    "  median_s REAL NOT NULL, p10_s REAL, p90_s REAL,"
    "  count INTEGER NOT NULL CHECK (count > 0),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "INSERT INTO comm_sample_v3(id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s,"
    "                           count, created_at)"
    "  SELECT id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s, count, created_at"
    "  FROM comm_sample;"
    "DROP TABLE comm_sample;"
    "ALTER TABLE comm_sample_v3 RENAME TO comm_sample;"
    "CREATE INDEX comm_sample_key ON comm_sample(backend, op, device_id, bytes);"
    "CREATE TABLE comm_model_v3 ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu', 'gloo')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  alpha_s REAL NOT NULL CHECK (alpha_s >= 0),"
    "  beta_bytes_per_s REAL NOT NULL CHECK (beta_bytes_per_s > 0),"
    "  r2 REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "INSERT INTO comm_model_v3(id, device_id, backend, op, world_size, alpha_s, beta_bytes_per_s, r2,"
    "                          created_at)"
    "  SELECT id, device_id, backend, op, world_size, alpha_s, beta_bytes_per_s, r2, created_at"
    "  FROM comm_model;"
    "DROP TABLE comm_model;"
    "ALTER TABLE comm_model_v3 RENAME TO comm_model;",
    /* 4: comm_sample admits op 'allreduce_step' (the whole gradient's all-reduce as DDP issues it
     * after each training step, measured by tools/hetsim_profile.py; docs/schema.md) and gains
     * mean_s, the mean of the timings where a profile gives it (NULL otherwise). Rebuilt as in
     * migration 2 because SQLite cannot change a CHECK in place. */
    "CREATE TABLE comm_sample_v4 ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu', 'gloo')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter',"
    "                                 'wake', 'allreduce_step')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  bytes INTEGER NOT NULL CHECK (bytes >= 0),"
    "  median_s REAL NOT NULL, p10_s REAL, p90_s REAL,"
    "  count INTEGER NOT NULL CHECK (count > 0),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),"
    "  mean_s REAL CHECK (mean_s IS NULL OR mean_s > 0)"
    ") STRICT;"
    "INSERT INTO comm_sample_v4(id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s,"
    "                           count, created_at)"
    "  SELECT id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s, count, created_at"
    "  FROM comm_sample;"
    "DROP TABLE comm_sample;"
    "ALTER TABLE comm_sample_v4 RENAME TO comm_sample;"
    "CREATE INDEX comm_sample_key ON comm_sample(backend, op, device_id, bytes);",
    /* 5: comm_sample and comm_model admit backend 'tcp': the cpu backend between processes, one
     * per worker (real/real_rank_tcp.h), timed by `hetsim calib` under a launcher (real/
     * real_comm_calib.h); its 'wake' is one control message from a process to another. Both
     * tables rebuilt with their rows, as in migration 2. */
    "CREATE TABLE comm_sample_v5 ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu', 'gloo', 'tcp')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter',"
    "                                 'wake', 'allreduce_step')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  bytes INTEGER NOT NULL CHECK (bytes >= 0),"
    "  median_s REAL NOT NULL, p10_s REAL, p90_s REAL,"
    "  count INTEGER NOT NULL CHECK (count > 0),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),"
    "  mean_s REAL CHECK (mean_s IS NULL OR mean_s > 0)"
    ") STRICT;"
    "INSERT INTO comm_sample_v5(id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s,"
    "                           count, created_at, mean_s)"
    "  SELECT id, device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s, count, created_at, mean_s"
    "  FROM comm_sample;"
    "DROP TABLE comm_sample;"
    "ALTER TABLE comm_sample_v5 RENAME TO comm_sample;"
    "CREATE INDEX comm_sample_key ON comm_sample(backend, op, device_id, bytes);"
    "CREATE TABLE comm_model_v5 ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER REFERENCES device(id) ON DELETE CASCADE,"
    "  backend TEXT NOT NULL CHECK (backend IN ('nccl', 'local', 'cpu', 'gloo', 'tcp')),"
    "  op TEXT NOT NULL CHECK (op IN ('allreduce', 'p2p', 'broadcast', 'allgather', 'reducescatter')),"
    "  world_size INTEGER NOT NULL DEFAULT 2 CHECK (world_size > 0),"
    "  alpha_s REAL NOT NULL CHECK (alpha_s >= 0),"
    "  beta_bytes_per_s REAL NOT NULL CHECK (beta_bytes_per_s > 0),"
    "  r2 REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "INSERT INTO comm_model_v5(id, device_id, backend, op, world_size, alpha_s, beta_bytes_per_s, r2,"
    "                          created_at)"
    "  SELECT id, device_id, backend, op, world_size, alpha_s, beta_bytes_per_s, r2, created_at"
    "  FROM comm_model;"
    "DROP TABLE comm_model;"
    "ALTER TABLE comm_model_v5 RENAME TO comm_model;",
    /* 6: compress_sample: a compressor's round trip (compress, then decompress, in place on the
     * host, as the real runtimes send an update through it) on a vector of `elems` floats at
     * its setting, timed by `hetsim calib` (calib/cal_compress.h), which `hetsim validate`
     * takes instead of the cost model's reference device. */
    "CREATE TABLE compress_sample ("
    "  id INTEGER PRIMARY KEY,"
    "  device_id INTEGER NOT NULL REFERENCES device(id) ON DELETE CASCADE,"
    "  compressor TEXT NOT NULL CHECK (compressor IN ('topk', 'qsgd', 'powersgd')),"
    "  setting REAL NOT NULL CHECK (setting > 0),"
    "  elems INTEGER NOT NULL CHECK (elems > 0),"
    "  median_s REAL NOT NULL, p10_s REAL, p90_s REAL,"
    "  count INTEGER NOT NULL CHECK (count > 0),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ") STRICT;"
    "CREATE INDEX compress_sample_key ON compress_sample(device_id, compressor, elems);",
};
enum { N_MIGRATIONS = (int)(sizeof migrations / sizeof migrations[0]) };
_Static_assert(N_MIGRATIONS == HS_STORE_SCHEMA_VERSION, "one migration per schema version");

static int db_fail(hs_store *s, hs_diag *d, const char *what) {
  return hs_diag_set(d, HS_EDB, "database %s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static int exec(hs_store *s, const char *sql, const char *what, hs_diag *d) {
  char *err = NULL;
  int rc = sqlite3_exec(s->db, sql, NULL, NULL, &err);
  if (rc == SQLITE_NOTADB) {
    sqlite3_free(err);
    return hs_diag_set(d, HS_EDB, "%s is not an SQLite database (%s)", s->path,
                       sqlite3_errstr(rc));
  }
  if (rc != SQLITE_OK) {
    hs_diag_set(d, HS_EDB, "database %s: %s: %s", s->path, what,
                err ? err : sqlite3_errmsg(s->db));
    sqlite3_free(err);
    return HS_EDB;
  }
  return 0;
}

/* Runs a query that yields one integer; *found says whether a row came back. */
static int query_int(hs_store *s, const char *sql, int64_t *val, int *found, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return db_fail(s, d, sql);
  int rc = sqlite3_step(st);
  *found = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW) *val = sqlite3_column_int64(st, 0);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    db_fail(s, d, sql);
    sqlite3_finalize(st);
    return HS_EDB;
  }
  sqlite3_finalize(st);
  return 0;
}

/* Reads the schema version: 0 for a file without hetsim tables. Also the first read of the
 * file, so a file that is not a database fails here with SQLITE_NOTADB. */
static int read_version(hs_store *s, int *version, hs_diag *d) {
  int64_t v = 0, n = 0;
  int found = 0;
  /* 1: hetsim's, 2: foreign, 0: empty. One statement, so one snapshot: with two queries,
   * another process creating the same file (sweep ranks) could commit schema_version between
   * them, and the second would take it for a foreign table. */
  int rc = query_int(s,
                     "SELECT CASE WHEN EXISTS (SELECT 1 FROM sqlite_master WHERE name ="
                     " 'schema_version') THEN 1 WHEN EXISTS (SELECT 1 FROM sqlite_master WHERE"
                     " name NOT LIKE 'sqlite_%') THEN 2 ELSE 0 END",
                     &n, &found, d);
  if (rc) {
    if (sqlite3_errcode(s->db) == SQLITE_NOTADB)
      return hs_diag_set(d, HS_EDB, "%s is not an SQLite database (%s)", s->path,
                         sqlite3_errmsg(s->db));
    return rc;
  }
  if (n == 2)
    return hs_diag_set(d, HS_ESCHEMA,
                       "%s is an SQLite database but not a hetsim one (no schema_version "
                       "table); use a new file",
                       s->path);
  if (n == 0) {
    *version = 0;
    return 0;
  }
  rc = query_int(s, "SELECT version FROM schema_version", &v, &found, d);
  if (rc) return rc;
  *version = found ? (int)v : 0;
  return 0;
}

static int newer_error(hs_store *s, int version, hs_diag *d) {
  return hs_diag_set(d, HS_ESCHEMA,
                     "database %s has schema version %d, this hetsim knows up to %d; upgrade "
                     "hetsim",
                     s->path, version, HS_STORE_SCHEMA_VERSION);
}

/* Applies the migrations the file lacks, each in its own IMMEDIATE transaction. The version is
 * read again inside each transaction because another process may have migrated meanwhile. */
static int migrate(hs_store *s, hs_diag *d) {
  int rc = exec(s,
                "CREATE TABLE IF NOT EXISTS schema_version ("
                "  id INTEGER PRIMARY KEY CHECK (id = 1),"
                "  version INTEGER NOT NULL,"
                "  updated_at TEXT NOT NULL"
                ") STRICT",
                "creating schema_version", d);
  if (rc) return rc;
  for (;;) {
    if ((rc = exec(s, "BEGIN IMMEDIATE", "starting a migration", d))) return rc;
    int v = 0;
    if ((rc = read_version(s, &v, d))) goto fail;
    if (v > HS_STORE_SCHEMA_VERSION) {
      rc = newer_error(s, v, d);
      goto fail;
    }
    if (v == HS_STORE_SCHEMA_VERSION) {
      s->version = v;
      return exec(s, "COMMIT", "committing", d);
    }
    char what[64];
    snprintf(what, sizeof what, "migration to schema version %d", v + 1);
    if ((rc = exec(s, migrations[v], what, d))) goto fail;
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT INTO schema_version(id, version, updated_at) VALUES (1, %d, "
             "strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', 'now')) ON CONFLICT(id) DO UPDATE SET "
             "version = excluded.version, updated_at = excluded.updated_at",
             v + 1);
    if ((rc = exec(s, sql, what, d))) goto fail;
    if ((rc = exec(s, "COMMIT", what, d))) goto fail;
  }
fail:
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

/* The feeds (row_feed, above): eponymous, read-only virtual tables whose rows are rows
 * [*lo, *hi) of an array in C memory, so that "INSERT ... SELECT * FROM FEED" reads them without
 * copying them through bound parameters. One module serves them all. */
typedef struct feed_vtab {
  sqlite3_vtab base;
  const row_feed *f;
} feed_vtab;

typedef struct feed_cursor {
  sqlite3_vtab_cursor base;
  int i; /* row of the feed's array */
} feed_cursor;

static const row_feed *feed_of(sqlite3_vtab_cursor *c) { return ((feed_vtab *)c->pVtab)->f; }

static int feed_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                        sqlite3_vtab **out, char **err) {
  (void)argc, (void)argv, (void)err;
  const row_feed *f = aux;
  int rc = sqlite3_declare_vtab(db, f->schema);
  if (rc != SQLITE_OK) return rc;
  feed_vtab *v = sqlite3_malloc(sizeof *v);
  if (!v) return SQLITE_NOMEM;
  memset(v, 0, sizeof *v);
  v->f = f;
  *out = &v->base;
  return SQLITE_OK;
}

static int feed_disconnect(sqlite3_vtab *v) {
  sqlite3_free(v);
  return SQLITE_OK;
}

static int feed_best_index(sqlite3_vtab *v, sqlite3_index_info *info) {
  info->estimatedCost = ((feed_vtab *)v)->f->estimate;
  info->estimatedRows = ((feed_vtab *)v)->f->estimate;
  return SQLITE_OK;
}

static int feed_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out) {
  (void)v;
  feed_cursor *c = sqlite3_malloc(sizeof *c);
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *out = &c->base;
  return SQLITE_OK;
}

static int feed_close(sqlite3_vtab_cursor *c) {
  sqlite3_free(c);
  return SQLITE_OK;
}

static int feed_filter(sqlite3_vtab_cursor *c, int idx_num, const char *idx_str, int argc,
                       sqlite3_value **argv) {
  (void)idx_num, (void)idx_str, (void)argc, (void)argv;
  ((feed_cursor *)c)->i = *feed_of(c)->lo;
  return SQLITE_OK;
}

static int feed_next(sqlite3_vtab_cursor *c) {
  ((feed_cursor *)c)->i++;
  return SQLITE_OK;
}

static int feed_eof(sqlite3_vtab_cursor *c) { return ((feed_cursor *)c)->i >= *feed_of(c)->hi; }

static int feed_column(sqlite3_vtab_cursor *c, sqlite3_context *ctx, int col) {
  const row_feed *f = feed_of(c);
  f->column(f->aux, ((feed_cursor *)c)->i, col, ctx);
  return SQLITE_OK;
}

static int feed_rowid(sqlite3_vtab_cursor *c, sqlite3_int64 *rowid) {
  *rowid = ((feed_cursor *)c)->i;
  return SQLITE_OK;
}

/* xCreate is NULL, so a feed is eponymous only: CREATE VIRTUAL TABLE cannot make one. */
static const sqlite3_module feed_module = {
    .iVersion = 0,
    .xCreate = NULL,
    .xConnect = feed_connect,
    .xBestIndex = feed_best_index,
    .xDisconnect = feed_disconnect,
    .xDestroy = feed_disconnect,
    .xOpen = feed_open,
    .xClose = feed_close,
    .xFilter = feed_filter,
    .xNext = feed_next,
    .xEof = feed_eof,
    .xColumn = feed_column,
    .xRowid = feed_rowid,
};

static void result_real(sqlite3_context *ctx, double v) {
  if (isnan(v)) sqlite3_result_null(ctx);
  else sqlite3_result_double(ctx, v);
}

/* hs_step_feed: the store's buffered step rows (s->feed[0 .. feed_n)), with run_id =
 * s->step_run; registered on the store's own connection (its row_feed is s->step_feed). */
enum {
  FEED_RUN_ID, FEED_WORKER, FEED_STEP, FEED_BATCH, FEED_START_S, FEED_COMPUTE_END_S,
  FEED_COMM_END_S, FEED_WAIT_S, FEED_MODEL_VERSION, FEED_STALENESS, FEED_LOSS
};

#define STEP_FEED_SCHEMA                                                                   \
  "CREATE TABLE x(run_id INTEGER, worker INTEGER, step INTEGER, batch INTEGER, start_s REAL," \
  " compute_end_s REAL, comm_end_s REAL, wait_s REAL, model_version INTEGER, staleness INTEGER," \
  " loss REAL)"

static const int feed_from_0 = 0;

static void step_column(const void *aux, int i, int col, sqlite3_context *ctx) {
  const hs_store *s = aux;
  const hs_step_row *r = &s->feed[i];
  switch (col) {
  case FEED_RUN_ID: sqlite3_result_int64(ctx, s->step_run); break;
  case FEED_WORKER: sqlite3_result_int(ctx, r->worker); break;
  case FEED_STEP: sqlite3_result_int64(ctx, r->step); break;
  case FEED_BATCH: sqlite3_result_int(ctx, r->batch); break;
  case FEED_START_S: sqlite3_result_double(ctx, r->start_s); break;
  case FEED_COMPUTE_END_S: sqlite3_result_double(ctx, r->compute_end_s); break;
  case FEED_COMM_END_S: result_real(ctx, r->comm_end_s); break;
  case FEED_WAIT_S: sqlite3_result_double(ctx, r->wait_s); break;
  case FEED_MODEL_VERSION: sqlite3_result_int64(ctx, r->model_version); break;
  case FEED_STALENESS: sqlite3_result_int(ctx, r->staleness); break;
  case FEED_LOSS: result_real(ctx, r->loss); break;
  default: sqlite3_result_null(ctx); break;
  }
}

/* ---- which process a run belongs to ----------------------------------------------------
 * A run is committed as 'running' before its work starts; a process killed with SIGKILL, or a
 * machine that lost power, never gets to change that. So that such a run can be told from one
 * still going, hs_store_run_begin records in the run's options the writer's pid, host name,
 * boot id and process start time (clock ticks after boot, /proc/PID/stat field 22, which pid
 * reuse changes), and every connection gets the SQL function hs_run_alive(options): 1 when that
 * process still runs, 0 when it is gone, NULL when this host cannot tell (another host, or no
 * such fields). `hetsim query runs` shows a 'running' run whose process is gone as
 * 'incomplete'. */

/* Start time of process pid in clock ticks after boot, or -1; *state gets its state letter
 * ('Z' for a zombie: killed, not yet reaped). */
static long long proc_start_ticks(long pid, char *state) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* The command name (field 2) may hold spaces and parentheses: count fields after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p) return -1;
  if (p[1] == ' ') *state = p[2];
  long long v = -1;
  for (int field = 2; p && *p; field++) {
    p = strchr(p + 1, ' ');
    if (p && field + 1 == 22) {
      v = strtoll(p + 1, NULL, 10);
      break;
    }
  }
  return v;
}

static void boot_id(char *buf, size_t len) {
  buf[0] = '\0';
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return;
  if (!fgets(buf, (int)len, f)) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
}

static void run_alive_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  sqlite3_stmt *st = NULL;
  /* json_extract through SQL keeps one JSON parser; the options column is small. */
  if (sqlite3_prepare_v2(db,
                         "SELECT json_extract(?1, '$.pid'), json_extract(?1, '$.host'),"
                         " json_extract(?1, '$.boot'), json_extract(?1, '$.pid_start')",
                         -1, &st, NULL) != SQLITE_OK) {
    sqlite3_result_null(ctx);
    return;
  }
  sqlite3_bind_value(st, 1, argv[0]);
  if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_type(st, 0) != SQLITE_INTEGER ||
      sqlite3_column_type(st, 1) != SQLITE_TEXT) {
    sqlite3_finalize(st);
    sqlite3_result_null(ctx);
    return;
  }
  long pid = (long)sqlite3_column_int64(st, 0);
  char host[256] = "", boot[64];
  int same_host = gethostname(host, sizeof host - 1) == 0 &&
                  strcmp(host, (const char *)sqlite3_column_text(st, 1)) == 0;
  boot_id(boot, sizeof boot);
  int rebooted = sqlite3_column_type(st, 2) == SQLITE_TEXT && boot[0] &&
                 strcmp(boot, (const char *)sqlite3_column_text(st, 2)) != 0;
  long long start = sqlite3_column_type(st, 3) == SQLITE_INTEGER ? sqlite3_column_int64(st, 3) : -1;
  sqlite3_finalize(st);
  if (!same_host || pid <= 0) {
    sqlite3_result_null(ctx);
    return;
  }
  int alive = !rebooted && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
  char state = '?';
  long long now_start = alive ? proc_start_ticks(pid, &state) : -1;
  if (state == 'Z' || state == 'X') alive = 0;              /* killed, not yet reaped */
  if (alive && start >= 0 && now_start != start) alive = 0; /* the pid was reused */
  sqlite3_result_int(ctx, alive);
}

/* Switches the file to WAL. The switch needs the file to itself and SQLite does not wait for
 * it with the busy handler, so processes that create one database at once (sweep ranks, the
 * concurrent-writer test) would fail with "database is locked": retry for as long as the
 * busy timeout, and skip the switch when another process has already made it. */
static int to_wal(hs_store *s, hs_diag *d) {
  for (int waited_ms = 0;; waited_ms += 5) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode", -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
      const char *mode = (const char *)sqlite3_column_text(st, 0);
      int wal = mode && strcmp(mode, "wal") == 0;
      sqlite3_finalize(st);
      if (wal) return 0;
    } else {
      sqlite3_finalize(st);
    }
    /* The pragma answers with the mode now in force: the old one when it could not switch. */
    st = NULL;
    rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    const char *now = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    /* An in-memory database (":memory:") has no WAL and no other process to wait for. */
    int wal = now && (strcmp(now, "wal") == 0 || strcmp(now, "memory") == 0);
    sqlite3_finalize(st);
    if (wal) return 0;
    if (rc == SQLITE_ROW) rc = SQLITE_BUSY; /* still another mode: someone held the file */
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || waited_ms >= HS_STORE_BUSY_TIMEOUT_MS)
      return rc == SQLITE_BUSY && waited_ms >= HS_STORE_BUSY_TIMEOUT_MS
                 ? hs_diag_set(d, HS_EDB, "database %s: switching to WAL: database is locked",
                               s->path)
                 : db_fail(s, d, "switching to WAL");
    usleep(5000);
  }
}

/* A read-only open of a WAL file needs its -shm file, which SQLite cannot create in a read-only
 * folder or file system, and the open would fail: such a file is opened as immutable instead
 * (nobody can be writing it there either, since a writer needs the same files), so that what
 * is stored stays readable. Returns the "file:...?immutable=1" URI to use, or NULL for the
 * plain path. */
static char *immutable_uri(const char *path) {
  char shm[4096], dir[4096];
  if ((size_t)snprintf(shm, sizeof shm, "%s-shm", path) >= sizeof shm || access(shm, F_OK) == 0)
    return NULL;
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
  else snprintf(dir, sizeof dir, ".");
  if (access(dir, W_OK) == 0 || (errno != EACCES && errno != EROFS)) return NULL;
  size_t n = strlen(path);
  char *uri = malloc(3 * n + 32);
  if (!uri) return NULL;
  char *o = uri + sprintf(uri, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
        strchr("/-._~", *p))
      *o++ = (char)*p;
    else
      o += sprintf(o, "%%%02X", *p);
  }
  strcpy(o, "?immutable=1");
  return uri;
}

int hs_store_open(hs_store **out, const char *path, int flags, hs_diag *d) {
  *out = NULL;
  /* SQLite takes "" for a private temporary database, which is never what a user meant. */
  if (!path || !*path) return hs_diag_set(d, HS_EINVAL, "the database file name is empty");
  int readonly = (flags & HS_STORE_READONLY) != 0;
  if (readonly && access(path, F_OK) != 0)
    return hs_diag_set(d, HS_ENOTFOUND, "database %s does not exist", path);
  hs_store *s = calloc(1, sizeof *s);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory opening %s", path);
  s->path = strdup(path);
  s->flags = flags;
  s->step_cur = &s->step_own;
  if (!s->path) {
    free(s);
    return hs_diag_set(d, HS_ENOMEM, "out of memory opening %s", path);
  }
  int oflags = readonly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc;
  char *uri = readonly ? immutable_uri(path) : NULL;
  if (uri) oflags |= SQLITE_OPEN_URI;
  int orc = sqlite3_open_v2(uri ? uri : path, &s->db, oflags | SQLITE_OPEN_NOMUTEX, NULL);
  free(uri);
  if (orc != SQLITE_OK) {
    rc = hs_diag_set(d, HS_EDB, "cannot open database %s: %s", path,
                     s->db ? sqlite3_errmsg(s->db) : "out of memory");
    goto fail;
  }
  sqlite3_extended_result_codes(s->db, 0);
  sqlite3_busy_timeout(s->db, HS_STORE_BUSY_TIMEOUT_MS);
  s->step_feed = (row_feed){.schema = STEP_FEED_SCHEMA, .estimate = STEP_CHUNK, .lo = &feed_from_0,
                            .hi = &s->feed_n, .column = step_column, .aux = s};
  if (sqlite3_create_function(s->db, "hs_run_alive", 1, SQLITE_UTF8, NULL, run_alive_fn, NULL,
                              NULL) != SQLITE_OK ||
      sqlite3_create_module(s->db, "hs_step_feed", &feed_module, &s->step_feed) != SQLITE_OK) {
    rc = db_fail(s, d, "registering the step feed");
    goto fail;
  }
  /* Settings that do not touch the file come first: a newer or foreign file must be left
   * exactly as it was found. */
  if ((rc = exec(s,
                 "PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;"
                 "PRAGMA cache_size = -65536",
                 "configuring the connection", d)))
    goto fail;
  int v = 0;
  if ((rc = read_version(s, &v, d))) goto fail;
  if (v > HS_STORE_SCHEMA_VERSION) {
    rc = newer_error(s, v, d);
    goto fail;
  }
  if (readonly) {
    if (v == 0 && !(flags & HS_STORE_EMPTY_OK)) {
      rc = hs_diag_set(d, HS_ESCHEMA, "%s is not a hetsim database (no schema)", path);
      goto fail;
    }
    s->version = v;
  } else {
    /* A new file gets 16 KiB pages (the size is fixed when the first page is written, here by
     * the switch to WAL; an existing file keeps its own): callgrind counts 5% fewer
     * instructions per step row in bench/bench_store.c than with the default 4 KiB. */
    if (v == 0 && (rc = exec(s, "PRAGMA page_size = 16384", "setting the page size", d)))
      goto fail;
    /* WAL lets readers run beside one writer, and with synchronous=NORMAL a commit costs no
     * fsync (only checkpoints do), which the bulk step insert needs. */
    if ((rc = to_wal(s, d))) goto fail;
    if ((rc = exec(s, "PRAGMA synchronous = NORMAL", "setting synchronous", d))) goto fail;
    if ((rc = migrate(s, d))) goto fail;
  }
  *out = s;
  return 0;
fail:
  sqlite3_close(s->db);
  free(s->path);
  free(s);
  return rc;
}

void hs_store_close(hs_store *s) {
  if (!s) return;
  if (s->steps_open) hs_store_steps_end(s, NULL);
  sqlite3_finalize(s->step_ins1);
  sqlite3_finalize(s->step_insn);
  sqlite3_close(s->db);
  free(s->path);
  free(s);
}

struct sqlite3 *hs_store_db(hs_store *s) { return s->db; }
const char *hs_store_path(const hs_store *s) { return s->path; }
int hs_store_schema_version(const hs_store *s) { return s->version; }

static int writable(hs_store *s, hs_diag *d) {
  if (s->flags & HS_STORE_READONLY)
    return hs_diag_set(d, HS_EINVAL, "database %s was opened read-only", s->path);
  return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
  else sqlite3_bind_null(st, i);
}

/* NaN means "no value" throughout the store API. */
static void bind_real(sqlite3_stmt *st, int i, double v) {
  if (isnan(v)) sqlite3_bind_null(st, i);
  else sqlite3_bind_double(st, i, v);
}

/* Steps a bound statement once and resets it: the common shape of every single-row write. */
static int step_once(hs_store *s, sqlite3_stmt *st, const char *what, hs_diag *d) {
  int rc = sqlite3_step(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    db_fail(s, d, what);
    sqlite3_reset(st);
    return HS_EDB;
  }
  sqlite3_reset(st);
  return 0;
}

static int check_steps_closed(hs_store *s, hs_diag *d) {
  if (s->steps_open)
    return hs_diag_set(d, HS_EINVAL,
                       "database %s: a step batch is open; call hs_store_steps_end first",
                       s->path);
  return 0;
}

int hs_store_run_begin(hs_store *s, const hs_run_info *info, int64_t *run_id, hs_diag *d) {
  int rc;
  if ((rc = writable(s, d)) || (rc = check_steps_closed(s, d))) return rc;
  static const char sql[] =
      "INSERT INTO run(kind, policy, params, cluster_name, cluster_path, cluster_text, model,"
      " global_batch, seed, options, versions, command, status)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
      " json_set(COALESCE(?10, '{}'), '$.pid', ?13, '$.host', ?14, '$.boot', ?15,"
      " '$.pid_start', ?16), ?11, ?12, 'running')";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, d, "preparing the run insert");
  bind_text(st, 1, info->kind);
  bind_text(st, 2, info->policy);
  bind_text(st, 3, info->params ? info->params : "");
  bind_text(st, 4, info->cluster_name);
  bind_text(st, 5, info->cluster_path);
  bind_text(st, 6, info->cluster_text);
  bind_text(st, 7, info->model);
  sqlite3_bind_int64(st, 8, info->global_batch);
  sqlite3_bind_int64(st, 9, (int64_t)info->seed);
  bind_text(st, 10, info->options_json);
  bind_text(st, 11, info->versions_json);
  bind_text(st, 12, info->command);
  /* Who writes the run, so that a crash can be recognised later (hs_run_alive above). */
  char host[256] = "", boot[64];
  gethostname(host, sizeof host - 1);
  boot_id(boot, sizeof boot);
  char state;
  long long start = proc_start_ticks((long)getpid(), &state);
  sqlite3_bind_int64(st, 13, (int64_t)getpid());
  sqlite3_bind_text(st, 14, host, -1, SQLITE_TRANSIENT);
  if (boot[0]) sqlite3_bind_text(st, 15, boot, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, 15);
  if (start >= 0) sqlite3_bind_int64(st, 16, start);
  else sqlite3_bind_null(st, 16);
  /* Autocommit: the row is durable (in WAL) as soon as the step returns. */
  rc = step_once(s, st, "inserting the run", d);
  sqlite3_finalize(st);
  if (rc) return rc;
  *run_id = sqlite3_last_insert_rowid(s->db);
  return 0;
}

/* The one-row worker INSERT, for finding the row of a chunk that fails. */
static int prepare_worker_insert1(hs_store *s, sqlite3_stmt **st, hs_diag *d) {
  if (sqlite3_prepare_v2(s->db,
                         "INSERT INTO worker(run_id, idx, device_type, node, joined_at_s, left_at_s,"
                         " initial_batch, steps, samples, busy_s, wait_s, comm_s)"
                         " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                         -1, st, NULL) != SQLITE_OK)
    return db_fail(s, d, "preparing the worker insert");
  return 0;
}

static void bind_worker(sqlite3_stmt *st, int64_t run, const hs_worker_row *w) {
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_int(st, 2, w->index);
  bind_text(st, 3, w->device_type);
  bind_text(st, 4, w->node);
  bind_real(st, 5, w->joined_at_s);
  bind_real(st, 6, w->left_at_s);
  sqlite3_bind_int(st, 7, w->initial_batch);
  sqlite3_bind_int64(st, 8, w->steps);
  sqlite3_bind_int64(st, 9, w->samples);
  bind_real(st, 10, w->busy_s);
  bind_real(st, 11, w->wait_s);
  bind_real(st, 12, w->comm_s);
}

/* hs_worker_feed: a feed (row_feed) of rows[lo .. hi) of the hs_store_workers_add call under
 * way, as the 12 columns of worker. Registered on the store's connection for that call only
 * (its aux is the call's worker_feed), so that "INSERT INTO worker SELECT * FROM
 * hs_worker_feed" reads the rows from C memory: no parameter binding (1,400 instructions a row
 * for 12 values), no multi-row VALUES program. */
typedef struct worker_feed {
  int64_t run;
  const hs_worker_row *rows;
  int lo, hi;
} worker_feed;

/* Rows per INSERT ... SELECT: a failing chunk is retried row by row to name the worker. */
#define WORKERS_PER_INSERT 4096

#define WORKER_FEED_SCHEMA                                                                    \
  "CREATE TABLE x(run_id INTEGER, idx INTEGER, device_type TEXT, node TEXT, joined_at_s REAL," \
  " left_at_s REAL, initial_batch INTEGER, steps INTEGER, samples INTEGER, busy_s REAL,"       \
  " wait_s REAL, comm_s REAL)"

static void result_text(sqlite3_context *ctx, const char *v) {
  if (v) sqlite3_result_text(ctx, v, -1, SQLITE_STATIC);
  else sqlite3_result_null(ctx);
}

/* The values bind_worker would bind, column for column. */
static void worker_column(const void *aux, int i, int col, sqlite3_context *ctx) {
  const worker_feed *f = aux;
  const hs_worker_row *w = &f->rows[i];
  switch (col) {
  case 0: sqlite3_result_int64(ctx, f->run); break;
  case 1: sqlite3_result_int(ctx, w->index); break;
  case 2: result_text(ctx, w->device_type); break;
  case 3: result_text(ctx, w->node); break;
  case 4: result_real(ctx, w->joined_at_s); break;
  case 5: result_real(ctx, w->left_at_s); break;
  case 6: sqlite3_result_int(ctx, w->initial_batch); break;
  case 7: sqlite3_result_int64(ctx, w->steps); break;
  case 8: sqlite3_result_int64(ctx, w->samples); break;
  case 9: result_real(ctx, w->busy_s); break;
  case 10: result_real(ctx, w->wait_s); break;
  case 11: result_real(ctx, w->comm_s); break;
  default: sqlite3_result_null(ctx); break;
  }
}

/* Inserts the feed's rows[lo .. hi) with st (the insert from hs_worker_feed); when it fails,
 * finds the row that fails by inserting them one at a time (the failed statement has left
 * nothing), for the message. */
static int insert_workers(hs_store *s, sqlite3_stmt *st, const worker_feed *f, hs_diag *d) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return 0;
  sqlite3_stmt *one = NULL;
  if (prepare_worker_insert1(s, &one, d)) {
    db_fail(s, d, "inserting a worker");
    hs_diag_prefix(d, "worker %d of run %lld", f->rows[f->lo].index, (long long)f->run);
    return HS_EDB;
  }
  int bad = 0;
  for (int i = f->lo; i < f->hi && !bad; i++) {
    bind_worker(one, f->run, &f->rows[i]);
    if ((bad = step_once(s, one, "inserting a worker", d)))
      hs_diag_prefix(d, "worker %d of run %lld", f->rows[i].index, (long long)f->run);
  }
  sqlite3_finalize(one);
  if (!bad) db_fail(s, d, "inserting workers");
  return HS_EDB;
}

int hs_store_workers_add(hs_store *s, int64_t run, const hs_worker_row *rows, int n, hs_diag *d) {
  int rc;
  if ((rc = writable(s, d)) || (rc = check_steps_closed(s, d))) return rc;
  /* A million-worker run stores a million rows here. Per row, a single-row INSERT costs the
   * statement's own start and end, and its foreign key (run_id -> run) a parent lookup with a
   * cursor opened and closed; so rows go WORKERS_PER_INSERT to a statement, read from C memory
   * through hs_worker_feed, and the run is checked once, inside the transaction (no other
   * process can delete it before the commit), with foreign keys off meanwhile. The pragma
   * changes only outside a transaction. */
  int fk_off = 0;
  if (sqlite3_get_autocommit(s->db)) {
    if ((rc = exec(s, "PRAGMA foreign_keys = OFF", "turning foreign keys off", d))) return rc;
    fk_off = 1;
  }
  worker_feed feed = {run, rows, 0, 0};
  row_feed rf = {.schema = WORKER_FEED_SCHEMA, .estimate = WORKERS_PER_INSERT, .lo = &feed.lo, .hi = &feed.hi,
                 .column = worker_column, .aux = &feed};
  sqlite3_stmt *ins = NULL, *chk = NULL;
  int module = 0;
  if (sqlite3_create_module(s->db, "hs_worker_feed", &feed_module, &rf) != SQLITE_OK) {
    rc = db_fail(s, d, "registering the worker feed");
    goto out;
  }
  module = 1;
  if (sqlite3_prepare_v2(s->db,
                         "INSERT INTO worker(run_id, idx, device_type, node, joined_at_s, left_at_s,"
                         " initial_batch, steps, samples, busy_s, wait_s, comm_s)"
                         " SELECT * FROM hs_worker_feed",
                         -1, &ins, NULL) != SQLITE_OK) {
    rc = db_fail(s, d, "preparing the worker insert");
    goto out;
  }
  if ((rc = exec(s, "BEGIN IMMEDIATE", "starting the worker insert", d))) goto out;
  if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM run WHERE id = ?1", -1, &chk, NULL) != SQLITE_OK) {
    rc = db_fail(s, d, "preparing the run check");
  } else {
    sqlite3_bind_int64(chk, 1, run);
    int r = sqlite3_step(chk);
    if (r == SQLITE_DONE)
      rc = hs_diag_set(d, HS_EDB, "database %s: FOREIGN KEY constraint failed: no run %lld for its "
                       "workers", s->path, (long long)run);
    else if (r != SQLITE_ROW)
      rc = db_fail(s, d, "checking the run of the workers");
  }
  for (int i = 0; i < n && !rc; i += WORKERS_PER_INSERT) {
    feed.lo = i;
    feed.hi = n - i > WORKERS_PER_INSERT ? i + WORKERS_PER_INSERT : n;
    rc = insert_workers(s, ins, &feed, d);
  }
  if (!rc) rc = exec(s, "COMMIT", "committing workers", d);
  if (rc && !sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
out:
  sqlite3_finalize(chk);
  sqlite3_finalize(ins);
  if (module) sqlite3_create_module(s->db, "hs_worker_feed", NULL, NULL);
  if (fk_off) {
    int r = exec(s, "PRAGMA foreign_keys = ON", "turning foreign keys back on", rc ? NULL : d);
    if (!rc) rc = r;
  }
  return rc;
}

/* OR FAIL keeps the rows a failed statement inserted before the bad one, so sqlite3_changes()
 * says which row failed and the rows after it can be retried one by one. */
#define STEP_INSERT                                                                           \
  "INSERT OR FAIL INTO step(run_id, worker, step, batch, start_s, compute_end_s, comm_end_s," \
  " wait_s, model_version, staleness, loss) "

static int prepare_step_insert(hs_store *s, const char *sql, sqlite3_stmt **st, hs_diag *d) {
  if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
    return db_fail(s, d, "preparing the step insert");
  return 0;
}

/* Binds row r to the 11 parameters that start at base (1-based). */
static void bind_step(sqlite3_stmt *st, int base, int64_t run, const hs_step_row *r) {
  sqlite3_bind_int64(st, base, run);
  sqlite3_bind_int(st, base + 1, r->worker);
  sqlite3_bind_int64(st, base + 2, r->step);
  sqlite3_bind_int(st, base + 3, r->batch);
  sqlite3_bind_double(st, base + 4, r->start_s);
  sqlite3_bind_double(st, base + 5, r->compute_end_s);
  bind_real(st, base + 6, r->comm_end_s);
  sqlite3_bind_double(st, base + 7, r->wait_s);
  sqlite3_bind_int64(st, base + 8, r->model_version);
  sqlite3_bind_int(st, base + 9, r->staleness);
  bind_real(st, base + 10, r->loss);
}

static int step_row_fail(hs_store *s, const hs_step_row *r, hs_diag *d) {
  return hs_diag_set(d, HS_EDB, "database %s: inserting step %lld of worker %d, run %lld: %s",
                     s->path, (long long)r->step, (int)r->worker, (long long)s->step_run,
                     sqlite3_errmsg(s->db));
}

/* Inserts rows one at a time, each independent of the others as the unbuffered store was: a
 * row that fails is reported (the first one in d) and the rest still go in. */
static int insert_rows_singly(hs_store *s, const hs_step_row *rows, int n, hs_diag *d) {
  int first = 0;
  for (int i = 0; i < n; i++) {
    sqlite3_stmt *st = s->step_ins1;
    bind_step(st, 1, s->step_run, &rows[i]);
    if (sqlite3_step(st) != SQLITE_DONE && !first) first = step_row_fail(s, &rows[i], d);
    sqlite3_reset(st);
  }
  return first;
}

/* Hands rows to SQLite in one statement; after a failure, the rows from the failed one on go
 * in one by one so that each bad row is named and the good ones are kept. */
static int flush_steps(hs_store *s, const hs_step_row *rows, int n, hs_diag *d) {
  if (n == 0) return 0;
  s->feed = rows;
  s->feed_n = n;
  int rc = sqlite3_step(s->step_insn);
  sqlite3_reset(s->step_insn);
  s->feed = NULL;
  s->feed_n = 0;
  /* An error at the end of the statement (a deferred constraint) undoes all its rows and
   * reports no changes; otherwise the rows before the failed one stay. */
  int done = rc == SQLITE_DONE ? n : sqlite3_changes(s->db);
  if (done < 0 || done > n) done = 0;
  return done == n ? 0 : insert_rows_singly(s, rows + done, n - done, d);
}

/* ---- checkpoints beside the step bulk insert --------------------------------------------
 * In WAL mode each committed page is written twice: into the WAL at commit, and into the
 * database file by a checkpoint, which also fsyncs both files (synchronous=NORMAL). SQLite's
 * automatic checkpoint runs in the committing thread, after each step batch's commit. During a
 * step batch the store turns it off, and a thread of its own, with its own connection, runs a
 * PASSIVE checkpoint after each batch commit instead, so that the copying and the fsyncs
 * overlap the next batch's inserts. A PASSIVE checkpoint neither waits for nor blocks the
 * writer, and is crash-safe like any checkpoint. When the thread or its connection cannot
 * start, the automatic checkpoint stays on, as before. */
typedef struct ckpt_worker {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;   /* signalled on a request, on stop, and when a checkpoint is done */
  sqlite3 *db;         /* the thread's connection */
  int64_t requested;   /* commits asking for a checkpoint so far */
  int64_t done;        /* of those, the ones the finished checkpoints covered */
  int wal_frames;      /* frames in the WAL at the last checkpoint */
  int stop;
} ckpt_worker;

/* The WAL restarts from its beginning only when a write transaction begins after a checkpoint
 * copied all of it. The thread's checkpoint of a batch finishes while the next batch is being
 * written, so the WAL keeps growing until the writer waits for a checkpoint before it begins:
 * it does so when the WAL holds more than this many frames (64 MiB with 16 KiB pages). */
enum { CKPT_WAIT_FRAMES = 4096 };

static void *ckpt_main(void *arg) {
  ckpt_worker *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (w->done == w->requested && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
    if (w->stop) break;
    int64_t upto = w->requested;
    pthread_mutex_unlock(&w->mu);
    /* A failed checkpoint loses nothing (the frames stay in the WAL); the next one, or the
     * one at close, copies them. */
    int frames = -1, copied = -1;
    sqlite3_wal_checkpoint_v2(w->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
    pthread_mutex_lock(&w->mu);
    w->done = upto;
    w->wal_frames = frames;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static void ckpt_start(hs_store *s) {
  /* An in-memory or temporary database has no file for a second connection. */
  const char *file = sqlite3_db_filename(s->db, "main");
  if (!file || !file[0] || !sqlite3_threadsafe()) return;
  ckpt_worker *w = calloc(1, sizeof *w);
  if (!w) return;
  /* A connection learns that the file is in WAL mode at its first read; until then its
   * checkpoints do nothing. */
  if (sqlite3_open_v2(file, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
          SQLITE_OK ||
      sqlite3_exec(w->db, "PRAGMA schema_version", NULL, NULL, NULL) != SQLITE_OK) {
    sqlite3_close(w->db);
    free(w);
    return;
  }
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  /* Signals (SIGINT above all) stay with the threads that handle them. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&w->thread, NULL, ckpt_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    sqlite3_close(w->db);
    free(w);
    return;
  }
  sqlite3_wal_autocheckpoint(s->db, 0);
  s->ckpt = w;
}

/* After a batch's commit: asks the thread for a checkpoint, and when the WAL has grown past
 * CKPT_WAIT_FRAMES waits for it, so that the next batch restarts the WAL. */
static void ckpt_after_commit(hs_store *s) {
  ckpt_worker *w = s->ckpt;
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  int64_t mine = ++w->requested;
  pthread_cond_broadcast(&w->cv);
  if (w->wal_frames > CKPT_WAIT_FRAMES)
    while (w->done < mine) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

/* Stops the thread (a checkpoint under way finishes first) and turns the automatic checkpoint
 * back on, which copies what is left at the next commit or at close. */
static void ckpt_stop(hs_store *s) {
  ckpt_worker *w = s->ckpt;
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  sqlite3_close(w->db);
  free(w);
  s->ckpt = NULL;
  sqlite3_wal_autocheckpoint(s->db, 1000); /* SQLite's default, in pages */
}

/* Whether run exists. Checked inside each batch's IMMEDIATE transaction, so no other process
 * can delete the run before that batch commits: the rows need no foreign-key check of their
 * own. */
static int check_run(hs_store *s, int64_t run, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM run WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, d, "preparing the run check");
  sqlite3_bind_int64(st, 1, run);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return 0;
  if (rc != SQLITE_DONE) return db_fail(s, d, "checking the run of the step rows");
  return hs_diag_set(d, HS_ENOTFOUND, "database %s: no run %lld for the step rows", s->path,
                     (long long)run);
}

/* Leaves the bulk mode of a step batch whose transaction is over: foreign keys back on and the
 * usual automatic checkpoints. */
static int bulk_leave(hs_store *s, hs_diag *d) {
  int rc = 0;
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  if (s->step_fk_off) {
    s->step_fk_off = 0;
    rc = exec(s, "PRAGMA foreign_keys = ON", "turning foreign keys back on", d);
  }
  ckpt_stop(s);
  return rc;
}

/* Commits the open batch when commit is set, then starts the next batch's transaction and
 * checks that its run is still there (another process may have deleted it between two
 * batches). On failure the caller closes the batch. */
static int batch_start(hs_store *s, int commit, hs_diag *d) {
  int rc = 0;
  if (commit && !(rc = exec(s, "COMMIT", "committing a step batch", d))) ckpt_after_commit(s);
  if (!rc) rc = exec(s, "BEGIN IMMEDIATE", "starting a step batch", d);
  if (!rc) rc = check_run(s, s->step_run, d);
  return rc;
}

/* Inserts a chunk of rows and, when commit is set, commits the batch and begins the next one.
 * The batch is committed even when one of its rows failed, as it was when rows went in one at
 * a time. When the commit or the new transaction fails, the bulk mode is left and *closed set:
 * the batch is over. Runs in the writer thread, or inline without one. */
static int step_job_run(hs_store *s, step_chunk *c, int commit, int *closed, hs_diag *d) {
  int rc = flush_steps(s, c->rows, c->n, d);
  c->n = 0;
  if (commit) {
    int crc = batch_start(s, 1, rc ? NULL : d);
    if (crc) {
      *closed = 1;
      bulk_leave(s, NULL);
      if (!rc) rc = crc;
    }
  }
  return rc;
}

/* ---- the writer thread ------------------------------------------------------------------
 * During a step batch the SQLite work runs in a thread of the store's own, so that it overlaps
 * the caller's (the simulation making the next rows). hs_store_step_add fills a chunk of
 * STEP_CHUNK rows and queues it (at most WRITER_QUEUE wait); the thread inserts the chunks in
 * order, with the store's connection, which nothing else uses until the batch ends. At each
 * HS_STORE_STEP_BATCH rows the caller waits until the thread has inserted everything queued and
 * committed, so that a batch is committed when hs_store_step_add returns, as without the
 * thread. A failed row or commit is recorded by the thread and reported by the next
 * hs_store_step_add that hands over a chunk, or by hs_store_steps_end. When the thread cannot
 * start, the rows go in inline. */
enum { WRITER_QUEUE = 8 };

typedef struct step_job {
  step_chunk *chunk;
  int commit;
} step_job;

typedef struct step_writer {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* signalled on every change below */
  hs_store *s;
  step_job queue[WRITER_QUEUE];
  int head, count;                       /* queued jobs, oldest at head */
  step_chunk *spare[WRITER_QUEUE + 1];   /* chunks free for the caller */
  int nspare;
  int busy;   /* the thread is running a job */
  int stop;   /* no more jobs will come */
  int closed; /* a commit failed: the batch is over; later jobs are dropped */
  int rc;     /* the first error not yet reported, and its message */
  hs_diag diag;
  /* One with the caller, WRITER_QUEUE queued, one with the thread. */
  step_chunk chunks[WRITER_QUEUE + 2];
} step_writer;

static void *writer_main(void *arg) {
  step_writer *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->count && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
    if (!w->count) break;
    step_job job = w->queue[w->head];
    w->head = (w->head + 1) % WRITER_QUEUE;
    w->count--;
    int skip = w->closed;
    w->busy = 1;
    pthread_mutex_unlock(&w->mu);
    hs_diag jd = {0};
    int closed = 0, rc = 0;
    if (skip) job.chunk->n = 0;
    else rc = step_job_run(w->s, job.chunk, job.commit, &closed, &jd);
    pthread_mutex_lock(&w->mu);
    w->spare[w->nspare++] = job.chunk;
    if (rc && !w->rc) {
      w->rc = rc;
      w->diag = jd;
    }
    if (closed) w->closed = 1;
    w->busy = 0;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static void writer_start(hs_store *s) {
  /* A library built without thread support cannot have its connection used by a thread. */
  if (!sqlite3_threadsafe()) return;
  step_writer *w = calloc(1, sizeof *w);
  if (!w) return;
  w->s = s;
  for (int i = 1; i < WRITER_QUEUE + 2; i++) w->spare[w->nspare++] = &w->chunks[i];
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  /* Signals (SIGINT above all) stay with the threads that handle them. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&w->thread, NULL, writer_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return;
  }
  s->writer = w;
  s->step_cur = &w->chunks[0];
}

/* Lets the thread finish what is queued, and ends it; the connection is the caller's again. */
static void writer_stop(hs_store *s) {
  step_writer *w = s->writer;
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
  s->writer = NULL;
  s->step_own.n = 0;
  s->step_cur = &s->step_own;
}

/* Hands the caller's chunk over (when it holds rows, or commit is set) and, when commit or
 * drain is set, waits until everything queued is in. Returns the first error the thread met
 * since the last report; when the batch is over, the thread is stopped and the batch closed. */
static int writer_submit(hs_store *s, int commit, int drain, hs_diag *d) {
  step_writer *w = s->writer;
  pthread_mutex_lock(&w->mu);
  if (s->step_cur->n || commit) {
    while (w->count == WRITER_QUEUE) pthread_cond_wait(&w->cv, &w->mu);
    w->queue[(w->head + w->count) % WRITER_QUEUE] = (step_job){s->step_cur, commit};
    w->count++;
    pthread_cond_broadcast(&w->cv);
    s->step_cur = w->spare[--w->nspare];
  }
  if (commit || drain)
    while (w->count || w->busy) pthread_cond_wait(&w->cv, &w->mu);
  int rc = w->rc;
  if (rc) {
    if (d) *d = w->diag;
    w->rc = 0;
  }
  int closed = w->closed;
  pthread_mutex_unlock(&w->mu);
  if (closed) {
    writer_stop(s);
    s->steps_open = 0;
    bulk_leave(s, NULL);
  }
  return rc;
}

/* Hands the filled chunk to SQLite: to the writer thread, or inline without one. */
static int submit_chunk(hs_store *s, int commit, int drain, hs_diag *d) {
  if (s->writer) return writer_submit(s, commit, drain, d);
  int closed = 0;
  int rc = step_job_run(s, s->step_cur, commit, &closed, d);
  if (closed) s->steps_open = 0;
  return rc;
}

int hs_store_steps_begin(hs_store *s, int64_t run, hs_diag *d) {
  int rc;
  if ((rc = writable(s, d)) || (rc = check_steps_closed(s, d))) return rc;
  if (!s->step_ins1 &&
      (rc = prepare_step_insert(s, STEP_INSERT "VALUES (?,?,?,?,?,?,?,?,?,?,?)", &s->step_ins1, d)))
    return rc;
  if (!s->step_insn &&
      (rc = prepare_step_insert(s, STEP_INSERT "SELECT * FROM hs_step_feed", &s->step_insn, d)))
    return rc;
  /* The rows' foreign key (run_id -> run) costs a parent lookup, a cursor opened and closed,
   * per row; batch_start checks the run once per batch instead. The pragma can change only
   * outside a transaction (it is a no-op inside one). */
  if (sqlite3_get_autocommit(s->db)) {
    if ((rc = exec(s, "PRAGMA foreign_keys = OFF", "turning foreign keys off", d))) return rc;
    s->step_fk_off = 1;
  }
  s->step_run = run;
  s->steps_open = 1;
  s->step_pending = 0;
  s->step_own.n = 0;
  s->step_cur = &s->step_own;
  ckpt_start(s);
  if ((rc = batch_start(s, 0, d))) {
    s->steps_open = 0;
    bulk_leave(s, NULL);
    return rc;
  }
  writer_start(s);
  return 0;
}

int hs_store_step_add(hs_store *s, const hs_step_row *r, hs_diag *d) {
  if (!s->steps_open)
    return hs_diag_set(d, HS_EINVAL, "database %s: hs_store_step_add outside a step batch",
                       s->path);
  step_chunk *c = s->step_cur;
  c->rows[c->n++] = *r;
  /* Committing in batches bounds the work lost to an interruption and lets other processes
   * that share the file get the write lock between batches. */
  int commit = ++s->step_pending >= HS_STORE_STEP_BATCH;
  if (c->n < STEP_CHUNK && !commit) return 0;
  if (commit) s->step_pending = 0;
  return submit_chunk(s, commit, 0, d);
}

int hs_store_steps_end(hs_store *s, hs_diag *d) {
  if (!s->steps_open) return 0;
  int rc = submit_chunk(s, 0, 1, d);
  writer_stop(s);
  if (!s->steps_open) return rc; /* the batch ended on an error */
  s->steps_open = 0;
  s->step_pending = 0;
  int crc = sqlite3_get_autocommit(s->db)
                ? 0
                : exec(s, "COMMIT", "committing the last step batch", rc ? NULL : d);
  int lrc = bulk_leave(s, rc || crc ? NULL : d);
  return rc ? rc : crc ? crc : lrc;
}

int hs_store_eval_add(hs_store *s, int64_t run, double time_s, int64_t step, double loss,
                      double accuracy, hs_diag *d) {
  int rc;
  if ((rc = writable(s, d)) || (rc = check_steps_closed(s, d))) return rc;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db,
                         "INSERT INTO eval(run_id, time_s, step, loss, accuracy)"
                         " VALUES (?1, ?2, ?3, ?4, ?5)",
                         -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, d, "preparing the eval insert");
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_double(st, 2, time_s);
  sqlite3_bind_int64(st, 3, step);
  bind_real(st, 4, loss);
  bind_real(st, 5, accuracy);
  rc = step_once(s, st, "inserting an evaluation", d);
  sqlite3_finalize(st);
  return rc;
}

int hs_store_evals_add(hs_store *s, int64_t run, const hs_eval_row *rows, int64_t n, hs_diag *d) {
  int rc;
  if ((rc = writable(s, d)) || (rc = check_steps_closed(s, d))) return rc;
  int tx = n > 1;
  if (tx && (rc = exec(s, "BEGIN IMMEDIATE", "storing the evaluations", d))) return rc;
  for (int64_t i = 0; !rc && i < n; i++)
    rc = hs_store_eval_add(s, run, rows[i].time_s, rows[i].step, rows[i].loss, rows[i].accuracy, d);
  if (tx && !rc) rc = exec(s, "COMMIT", "storing the evaluations", d);
  if (tx && rc) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

static int run_finish_once(hs_store *s, int64_t run, const char *status, const hs_summary *sum,
                           const char *error, hs_diag *d) {
  int rc;
  if ((rc = writable(s, d))) return rc;
  if (!status || (strcmp(status, "complete") && strcmp(status, "failed") &&
                  strcmp(status, "interrupted")))
    return hs_diag_set(d, HS_EINVAL,
                       "run status must be complete, failed or interrupted, got \"%s\"",
                       status ? status : "(null)");
  if ((rc = hs_store_steps_end(s, d))) return rc;
  if ((rc = exec(s, "BEGIN IMMEDIATE", "finishing the run", d))) return rc;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db,
                         "UPDATE run SET status = ?2, error = ?3,"
                         " finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = db_fail(s, d, "preparing the run update");
    goto fail;
  }
  sqlite3_bind_int64(st, 1, run);
  bind_text(st, 2, status);
  bind_text(st, 3, error);
  rc = step_once(s, st, "updating the run", d);
  sqlite3_finalize(st);
  st = NULL;
  if (rc) goto fail;
  if (sqlite3_changes(s->db) != 1) {
    rc = hs_diag_set(d, HS_ENOTFOUND, "database %s: no run %lld", s->path, (long long)run);
    goto fail;
  }
  if (sum) {
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO summary(run_id, workers, iterations, events,"
                           " samples, sim_time_s, mean_iteration_s, samples_per_s, wait_fraction,"
                           " wall_s, final_loss, final_accuracy, time_to_target_s)"
                           " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
                           -1, &st, NULL) != SQLITE_OK) {
      rc = db_fail(s, d, "preparing the summary insert");
      goto fail;
    }
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, sum->workers);
    sqlite3_bind_int64(st, 3, sum->iterations);
    sqlite3_bind_int64(st, 4, sum->events);
    sqlite3_bind_int64(st, 5, sum->samples);
    bind_real(st, 6, sum->sim_time_s);
    bind_real(st, 7, sum->mean_iteration_s);
    bind_real(st, 8, sum->samples_per_s);
    bind_real(st, 9, sum->wait_fraction);
    bind_real(st, 10, sum->wall_s);
    bind_real(st, 11, sum->final_loss);
    bind_real(st, 12, sum->final_accuracy);
    bind_real(st, 13, sum->time_to_target_s);
    rc = step_once(s, st, "inserting the summary", d);
    sqlite3_finalize(st);
    if (rc) goto fail;
  }
  return exec(s, "COMMIT", "finishing the run", d);
fail:
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

int hs_store_run_finish(hs_store *s, int64_t run, const char *status, const hs_summary *sum,
                        const char *error, hs_diag *d) {
  int rc = run_finish_once(s, run, status, sum, error, d);
  if (!rc || rc == HS_EINVAL || (!sum && status && !strcmp(status, "failed"))) return rc;
  /* The summary or the status could not be stored (a dropped summary table, a trigger that
   * aborts, a full disk): the run must still not stay 'running', so it is marked failed on
   * its own, saying why. The caller still gets the first error. */
  char why[sizeof d->msg + 64];
  snprintf(why, sizeof why, "the run ended (%s) but could not be recorded: %s", status,
           d && d->msg[0] ? d->msg : hs_strerror(rc));
  hs_diag d2 = {0};
  run_finish_once(s, run, "failed", NULL, why, &d2);
  return rc;
}

/* ---- reading ---- */

/* Prepares a read; a step batch owns the connection while it is open. */
static int prepare_read(hs_store *s, const char *sql, sqlite3_stmt **st, const char *what, hs_diag *d) {
  int rc;
  *st = NULL;
  if ((rc = check_steps_closed(s, d))) return rc;
  if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK) return db_fail(s, d, what);
  return 0;
}

/* Steps a read's first row: 1 a row, 0 none, HS_EDB after finalizing it. */
static int step_row(hs_store *s, sqlite3_stmt *st, const char *what, hs_diag *d) {
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) return 1;
  if (rc == SQLITE_DONE) return 0;
  db_fail(s, d, what);
  sqlite3_finalize(st);
  return HS_EDB;
}

static void column_copy(sqlite3_stmt *st, int i, char *buf, size_t len) {
  const unsigned char *t = sqlite3_column_text(st, i);
  snprintf(buf, len, "%s", t ? (const char *)t : "");
}

static char *column_dup(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? strdup((const char *)t) : NULL;
}

static double column_real(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

int hs_store_run_get(hs_store *s, int64_t id, hs_run_record *out, hs_diag *d) {
  static const char what[] = "reading a run";
  memset(out, 0, sizeof *out);
  out->total_s = out->last_loss = NAN;
  sqlite3_stmt *st;
  int rc = prepare_read(s,
      "SELECT run.kind, run.status, run.policy, run.params, run.model, run.cluster_text,"
      " run.global_batch, run.seed, run.options, summary.iterations,"
      " (SELECT loss FROM eval WHERE eval.run_id = run.id ORDER BY step DESC, time_s DESC LIMIT 1),"
      " summary.sim_time_s, summary.samples"
      " FROM run LEFT JOIN summary ON summary.run_id = run.id WHERE run.id = ?1", &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, id);
  if ((rc = step_row(s, st, what, d)) <= 0) {
    if (!rc) sqlite3_finalize(st);
    return rc;
  }
  column_copy(st, 0, out->kind, sizeof out->kind);
  column_copy(st, 1, out->status, sizeof out->status);
  column_copy(st, 2, out->policy, sizeof out->policy);
  column_copy(st, 3, out->params, sizeof out->params);
  column_copy(st, 4, out->model, sizeof out->model);
  out->cluster_text = column_dup(st, 5);
  out->global_batch = sqlite3_column_int64(st, 6);
  out->seed = (uint64_t)sqlite3_column_int64(st, 7);
  out->options_json = column_dup(st, 8);
  out->iterations = sqlite3_column_int64(st, 9);
  out->last_loss = column_real(st, 10);
  out->total_s = column_real(st, 11);
  out->samples = sqlite3_column_int64(st, 12);
  sqlite3_finalize(st);
  return 1;
}

void hs_run_record_free(hs_run_record *r) {
  if (!r) return;
  free(r->cluster_text);
  free(r->options_json);
  r->cluster_text = r->options_json = NULL;
}

/* Prepares a communication query whose parameters are ?1 the op, ?2 the device name, ?3 the
 * world size wanted and ?4 the backend. */
static int comm_query(hs_store *s, const char *sql, const char *device, const char *backend,
                      const char *op, int world, sqlite3_stmt **st, hs_diag *d) {
  int rc = prepare_read(s, sql, st, "reading the communication calibration", d);
  if (rc) return rc;
  sqlite3_bind_text(*st, 1, op, -1, SQLITE_STATIC);
  sqlite3_bind_text(*st, 2, device, -1, SQLITE_STATIC);
  sqlite3_bind_int(*st, 3, world);
  sqlite3_bind_text(*st, 4, backend, -1, SQLITE_STATIC);
  return 0;
}

int hs_store_comm_fit(hs_store *s, const char *device, const char *backend, const char *op,
                      int world, double *alpha, double *beta, hs_diag *d) {
  sqlite3_stmt *st;
  int rc = comm_query(s,
      "SELECT alpha_s, beta_bytes_per_s FROM comm_model JOIN device ON device.id = comm_model.device_id"
      " WHERE comm_model.backend = ?4 AND comm_model.op = ?1 AND device.name = ?2"
      " ORDER BY abs(comm_model.world_size - ?3), comm_model.id DESC LIMIT 1", device, backend, op, world, &st, d);
  if (rc) return rc;
  if ((rc = step_row(s, st, "reading a communication model", d)) < 0) return rc;
  if (rc) {
    *alpha = sqlite3_column_double(st, 0);
    *beta = sqlite3_column_double(st, 1);
  }
  sqlite3_finalize(st);
  return rc;
}

/* The world size of the device's comm_sample rows of backend's op nearest ?3 (op ?1, device ?2,
 * backend ?4): the one hs_store_comm_time_at reads and hs_store_comm_world reports. */
#define NEAREST_COMM_WORLD                                                                       \
  "(SELECT world_size FROM comm_sample JOIN device d2 ON d2.id = comm_sample.device_id"          \
  " WHERE backend = ?4 AND op = ?1 AND d2.name = ?2 ORDER BY abs(world_size - ?3) LIMIT 1)"

int hs_store_comm_time_at(hs_store *s, const char *device, const char *backend, const char *op,
                          int world, double bytes, double *t, hs_diag *d) {
  sqlite3_stmt *st;
  int rc = comm_query(s,
      "SELECT bytes, median_s FROM comm_sample JOIN device ON device.id = comm_sample.device_id"
      " WHERE comm_sample.backend = ?4 AND comm_sample.op = ?1 AND device.name = ?2 AND median_s > 0"
      " AND comm_sample.world_size = " NEAREST_COMM_WORLD " ORDER BY bytes, comm_sample.id DESC",
      device, backend, op, world, &st, d);
  if (rc) return rc;
  int found = hs_comm_time_interp(st, bytes, 1, t);
  sqlite3_finalize(st);
  return found;
}

int hs_store_comm_world(hs_store *s, const char *device, const char *backend, const char *op, int world,
                        int *got, hs_diag *d) {
  sqlite3_stmt *st;
  int rc = comm_query(s, "SELECT " NEAREST_COMM_WORLD, device, backend, op, world, &st, d);
  if (rc) return rc;
  if ((rc = step_row(s, st, "reading a communication sample", d)) < 0) return rc;
  if (rc && sqlite3_column_type(st, 0) != SQLITE_NULL) *got = sqlite3_column_int(st, 0);
  else rc = 0;
  sqlite3_finalize(st);
  return rc;
}

int hs_store_comm_latest(hs_store *s, const char *device, const char *backend, const char *op,
                         int world, double *t, hs_diag *d) {
  sqlite3_stmt *st;
  int rc = comm_query(s,
      "SELECT median_s FROM comm_sample JOIN device ON device.id = comm_sample.device_id"
      " WHERE comm_sample.backend = ?4 AND comm_sample.op = ?1 AND device.name = ?2 AND median_s >= 0"
      " ORDER BY abs(comm_sample.world_size - ?3), comm_sample.id DESC LIMIT 1",
      device, backend, op, world, &st, d);
  if (rc) return rc;
  if ((rc = step_row(s, st, "reading a communication sample", d)) < 0) return rc;
  if (rc) *t = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  return rc;
}

int hs_store_compress_latest(hs_store *s, const char *device, const char *compressor, int64_t elems,
                             double *setting, int64_t *at_elems, double *t, hs_diag *d) {
  sqlite3_stmt *st;
  int rc = prepare_read(s,
      "SELECT setting, elems, median_s FROM compress_sample JOIN device ON device.id = compress_sample.device_id"
      " WHERE (device.name = ?1 OR device.host = (SELECT host FROM device WHERE name = ?1 AND host IS NOT NULL"
      " ORDER BY id DESC LIMIT 1)) AND compress_sample.compressor = ?2 AND median_s > 0"
      " ORDER BY device.name = ?1 DESC, abs(compress_sample.elems - ?3), compress_sample.id DESC LIMIT 1",
      &st, "reading the compressors' calibration", d);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, compressor, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, elems);
  if ((rc = step_row(s, st, "reading the compressors' calibration", d)) < 0) return rc;
  if (rc) {
    *setting = sqlite3_column_double(st, 0);
    *at_elems = sqlite3_column_int64(st, 1);
    *t = sqlite3_column_double(st, 2);
  }
  sqlite3_finalize(st);
  return rc;
}

int hs_store_calib_medians(hs_store *s, const char *device, const char *model, const char *phase,
                           double *v, int cap, hs_diag *d) {
  sqlite3_stmt *st;
  int rc = prepare_read(s,
      "SELECT median_s FROM calib_sample JOIN device ON device.id = calib_sample.device_id"
      " WHERE device.name = ?1 AND calib_sample.model = ?2 AND calib_sample.phase = ?3"
      " AND median_s IS NOT NULL ORDER BY 1", &st, "reading the calibration", d);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, phase, -1, SQLITE_STATIC);
  int n = 0;
  while (n < cap && (rc = step_row(s, st, "reading the calibration", d)) == 1) v[n++] = sqlite3_column_double(st, 0);
  if (rc < 0) return rc;
  sqlite3_finalize(st);
  return n;
}

int64_t hs_store_version_starts(hs_store *s, int64_t run, int64_t **versions, double **times,
                                hs_diag *d) {
  static const char what[] = "reading the steps' versions";
  *versions = NULL;
  *times = NULL;
  sqlite3_stmt *st;
  int rc = prepare_read(s, "SELECT model_version, min(start_s) FROM step WHERE run_id = ?1"
                           " GROUP BY model_version ORDER BY model_version", &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run);
  int64_t n = 0, cap = 0;
  while ((rc = step_row(s, st, what, d)) == 1) {
    if (n == cap) {
      cap = cap ? 2 * cap : 256;
      int64_t *v = realloc(*versions, (size_t)cap * sizeof *v);
      if (v) *versions = v;
      double *t = realloc(*times, (size_t)cap * sizeof *t);
      if (t) *times = t;
      if (!v || !t) {
        sqlite3_finalize(st);
        return hs_diag_set(d, HS_ENOMEM, "out of memory for the steps' versions");
      }
    }
    (*versions)[n] = sqlite3_column_int64(st, 0);
    (*times)[n] = sqlite3_column_double(st, 1);
    n++;
  }
  if (rc < 0) return rc;
  sqlite3_finalize(st);
  return n;
}

int64_t hs_store_step_computes(hs_store *s, int64_t run, hs_step_compute **out, hs_diag *d) {
  static const char what[] = "reading the steps' computes";
  *out = NULL;
  sqlite3_stmt *st;
  int rc = prepare_read(s, "SELECT batch, compute_end_s - start_s, worker FROM step WHERE run_id = ?1"
                           " AND compute_end_s > start_s", &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run);
  int64_t n = 0, cap = 0;
  while ((rc = step_row(s, st, what, d)) == 1) {
    if (n == cap) {
      hs_step_compute *g = realloc(*out, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *g);
      if (!g) {
        sqlite3_finalize(st);
        return hs_diag_set(d, HS_ENOMEM, "out of memory for the steps' computes");
      }
      *out = g;
    }
    (*out)[n++] = (hs_step_compute){.batch = sqlite3_column_int(st, 0), .compute_s = sqlite3_column_double(st, 1),
                                    .worker = sqlite3_column_int(st, 2)};
  }
  if (rc < 0) return rc;
  sqlite3_finalize(st);
  return n;
}

int hs_store_step_parts(hs_store *s, int64_t run, double part[3], hs_diag *d) {
  static const char what[] = "reading the steps' parts";
  for (int i = 0; i < 3; i++) part[i] = NAN;
  sqlite3_stmt *st;
  int rc = prepare_read(s,
      "WITH x AS (SELECT compute_end_s - start_s c, comm_end_s - compute_end_s m,"
      " lead(start_s) OVER (PARTITION BY worker ORDER BY step) - comm_end_s g FROM step WHERE run_id = ?1)"
      " SELECT avg(c), avg(m), avg(g), count(*) FROM x WHERE g IS NOT NULL", &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run);
  if ((rc = step_row(s, st, what, d)) < 0) return rc;
  int found = rc && sqlite3_column_int64(st, 3) > 0;
  for (int i = 0; found && i < 3; i++) part[i] = sqlite3_column_double(st, i);
  sqlite3_finalize(st);
  return found;
}

int hs_store_step_version_counts(hs_store *s, int64_t run, int64_t *steps, int64_t *versions,
                                 hs_diag *d) {
  static const char what[] = "counting the steps' versions";
  *steps = *versions = 0;
  sqlite3_stmt *st;
  int rc = prepare_read(s, "SELECT count(*), count(DISTINCT model_version) FROM step WHERE run_id = ?1",
                        &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run);
  if ((rc = step_row(s, st, what, d)) < 0) return rc;
  if (rc) {
    *steps = sqlite3_column_int64(st, 0);
    *versions = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  return 0;
}

int hs_store_step_mean_staleness(hs_store *s, int64_t run, double *mean, hs_diag *d) {
  static const char what[] = "reading the steps' staleness";
  *mean = NAN;
  sqlite3_stmt *st;
  int rc = prepare_read(s, "SELECT avg(staleness) FROM step WHERE run_id = ?1", &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run);
  if ((rc = step_row(s, st, what, d)) < 0) return rc;
  if (rc) *mean = column_real(st, 0);
  sqlite3_finalize(st);
  return 0;
}

int64_t hs_store_evals_get(hs_store *s, int64_t run, hs_eval_row **out, hs_diag *d) {
  static const char what[] = "reading the evaluations";
  *out = NULL;
  sqlite3_stmt *st;
  int rc = prepare_read(s, "SELECT time_s, step, loss, accuracy FROM eval WHERE run_id = ?1 AND loss IS NOT NULL"
                           " ORDER BY step", &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run);
  int64_t n = 0, cap = 0;
  while ((rc = step_row(s, st, what, d)) == 1) {
    if (n == cap) {
      hs_eval_row *g = realloc(*out, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *g);
      if (!g) {
        sqlite3_finalize(st);
        return hs_diag_set(d, HS_ENOMEM, "out of memory for the evaluations");
      }
      *out = g;
    }
    (*out)[n++] = (hs_eval_row){.time_s = sqlite3_column_double(st, 0), .step = sqlite3_column_int64(st, 1),
                                .loss = sqlite3_column_double(st, 2), .accuracy = column_real(st, 3)};
  }
  if (rc < 0) return rc;
  sqlite3_finalize(st);
  return n;
}

int hs_store_eval_first_below(hs_store *s, int64_t run, double max_loss, double *time_s,
                              hs_diag *d) {
  static const char what[] = "reading the evaluations";
  sqlite3_stmt *st;
  int rc = prepare_read(s, "SELECT min(time_s) FROM eval WHERE run_id = ?1 AND loss <= ?2", &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_double(st, 2, max_loss);
  if ((rc = step_row(s, st, what, d)) < 0) return rc;
  int found = rc && sqlite3_column_type(st, 0) != SQLITE_NULL;
  if (found) *time_s = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  return found;
}

int hs_store_validation_add(hs_store *s, const hs_validation_row *row, int64_t *id, hs_diag *d) {
  int rc;
  if ((rc = writable(s, d)) || (rc = check_steps_closed(s, d))) return rc;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db,
                         "INSERT INTO validation(run_id, sim_run_id, median_iter_error, p95_iter_error,"
                         " time_to_loss_error, mean_iter_error, total_time_error, iter_wasserstein)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, d, "preparing the validation insert");
  sqlite3_bind_int64(st, 1, row->run_id);
  sqlite3_bind_int64(st, 2, row->sim_run_id);
  bind_real(st, 3, row->median_iter_error);
  bind_real(st, 4, row->p95_iter_error);
  bind_real(st, 5, row->time_to_loss_error);
  bind_real(st, 6, row->mean_iter_error);
  bind_real(st, 7, row->total_time_error);
  bind_real(st, 8, row->iter_wasserstein);
  rc = step_once(s, st, "storing the validation", d);
  sqlite3_finalize(st);
  if (!rc) *id = sqlite3_last_insert_rowid(s->db);
  return rc;
}

int hs_store_validation_find(hs_store *s, int64_t run, const char *key, int64_t *id,
                             int64_t *sim_run_id, double *sim_total_s, double *sim_ttl_s,
                             hs_diag *d) {
  static const char what[] = "reading the validations";
  sqlite3_stmt *st;
  int rc = prepare_read(s,
      "SELECT validation.id, validation.sim_run_id, summary.sim_time_s, summary.time_to_target_s"
      " FROM validation JOIN run ON run.id = validation.sim_run_id JOIN summary ON summary.run_id = run.id"
      " WHERE validation.run_id = ?1 AND run.status = 'complete'"
      " AND json_extract(run.options, '$.validation_key') = ?2 ORDER BY validation.id DESC LIMIT 1",
      &st, what, d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
  if ((rc = step_row(s, st, what, d)) < 0) return rc;
  if (rc) {
    *id = sqlite3_column_int64(st, 0);
    *sim_run_id = sqlite3_column_int64(st, 1);
    *sim_total_s = column_real(st, 2);
    *sim_ttl_s = column_real(st, 3);
  }
  sqlite3_finalize(st);
  return rc;
}

int hs_store_device_fits_each(hs_store *s, int (*fn)(void *ctx, const hs_device_fit_row *r),
                              void *ctx, hs_diag *d) {
  static const char what[] = "reading the devices";
  sqlite3_stmt *st;
  int rc = prepare_read(s,
      "SELECT d.id, d.name, d.kind, d.host, p.model, p.form, p.heldout_rel_error, p.max_batch,"
      " (SELECT count(DISTINCT batch) FROM calib_sample c WHERE c.device_id = d.id AND c.model ="
      " p.model AND c.phase = 'step') AS batches, d.source"
      " FROM device d LEFT JOIN perf_model p ON p.device_id = d.id AND p.phase = 'step' AND"
      " p.chosen = 1 ORDER BY d.id, p.model", &st, what, d);
  if (rc) return rc;
  while ((rc = step_row(s, st, what, d)) == 1) {
    hs_device_fit_row r = {
        .device_id = sqlite3_column_int64(st, 0), .name = (const char *)sqlite3_column_text(st, 1),
        .kind = (const char *)sqlite3_column_text(st, 2), .host = (const char *)sqlite3_column_text(st, 3),
        .model = (const char *)sqlite3_column_text(st, 4), .form = (const char *)sqlite3_column_text(st, 5),
        .heldout_rel_error = column_real(st, 6), .max_batch = sqlite3_column_int64(st, 7),
        .has_max_batch = sqlite3_column_type(st, 7) != SQLITE_NULL, .batches = sqlite3_column_int64(st, 8),
        .source = (const char *)sqlite3_column_text(st, 9)};
    if ((rc = fn(ctx, &r))) {
      sqlite3_finalize(st);
      return rc;
    }
  }
  if (rc < 0) return rc; /* step_row finalized it */
  sqlite3_finalize(st);
  return 0;
}

int hs_store_imported_models_each(hs_store *s, int (*fn)(void *ctx, const hs_model_row *r),
                                  void *ctx, hs_diag *d) {
  static const char what[] = "reading the models";
  sqlite3_stmt *st;
  int rc = prepare_read(s,
      "SELECT name, params, grad_bytes, flops_per_sample, description, source FROM model WHERE source IS NOT"
      " NULL ORDER BY name", &st, what, d);
  if (rc) return rc;
  while ((rc = step_row(s, st, what, d)) == 1) {
    hs_model_row r = {.name = (const char *)sqlite3_column_text(st, 0), .params = sqlite3_column_int64(st, 1),
                      .grad_bytes = sqlite3_column_int64(st, 2), .flops_per_sample = column_real(st, 3),
                      .description = (const char *)sqlite3_column_text(st, 4),
                      .source = (const char *)sqlite3_column_text(st, 5)};
    if ((rc = fn(ctx, &r))) {
      sqlite3_finalize(st);
      return rc;
    }
  }
  if (rc < 0) return rc;
  sqlite3_finalize(st);
  return 0;
}
