/* core_store_query: the printing commands' rows as cursors over the store (core_store_query.h). */
#include "core/core_store_query.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct hs_rows {
  sqlite3_stmt *st;
  double time_limit;         /* s; 0 = none */
  double deadline;           /* CLOCK_MONOTONIC s */
  int timed_out;             /* the progress handler stopped the statement */
};

static int sqlite_fail(sqlite3 *db, hs_diag *d) {
  return hs_diag_set(d, HS_EDB, "%s", sqlite3_errmsg(db));
}

/* Prepares sql on the store's connection into a new cursor. */
static int rows_prepare(hs_store *s, const char *sql, hs_rows **out, hs_diag *d) {
  *out = NULL;
  sqlite3 *db = hs_store_db(s);
  hs_rows *r = calloc(1, sizeof *r);
  if (!r) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  if (sqlite3_prepare_v2(db, sql, -1, &r->st, NULL) != SQLITE_OK) {
    free(r);
    return sqlite_fail(db, d);
  }
  *out = r;
  return 0;
}

int hs_rows_next(hs_rows *r, hs_diag *d) {
  int rc = sqlite3_step(r->st);
  if (rc == SQLITE_ROW) return 1;
  if (rc == SQLITE_DONE) return 0;
  sqlite3 *db = sqlite3_db_handle(r->st);
  int code = r->timed_out ? HS_EINTR : sqlite3_errcode(db) == SQLITE_TOOBIG ? HS_ELIMIT : HS_EDB;
  return hs_diag_set(d, code, "%s", sqlite3_errmsg(db));
}

int hs_rows_columns(const hs_rows *r) { return sqlite3_column_count(r->st); }
const char *hs_rows_name(const hs_rows *r, int i) { return sqlite3_column_name(r->st, i); }

hs_value_type hs_rows_type(const hs_rows *r, int i) {
  switch (sqlite3_column_type(r->st, i)) {
  case SQLITE_INTEGER: return HS_VALUE_INT;
  case SQLITE_FLOAT: return HS_VALUE_REAL;
  case SQLITE_TEXT: return HS_VALUE_TEXT;
  case SQLITE_BLOB: return HS_VALUE_BLOB;
  default: return HS_VALUE_NULL;
  }
}

int64_t hs_rows_int(const hs_rows *r, int i) { return sqlite3_column_int64(r->st, i); }
double hs_rows_real(const hs_rows *r, int i) { return sqlite3_column_double(r->st, i); }

double hs_rows_real_or_nan(const hs_rows *r, int i) {
  return sqlite3_column_type(r->st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(r->st, i);
}

const char *hs_rows_text(const hs_rows *r, int i, size_t *len) {
  const char *t = (const char *)sqlite3_column_text(r->st, i);
  if (len) *len = t ? (size_t)sqlite3_column_bytes(r->st, i) : 0;
  return t;
}

const unsigned char *hs_rows_blob(const hs_rows *r, int i, size_t *len) {
  const unsigned char *b = sqlite3_column_blob(r->st, i);
  if (len) *len = (size_t)sqlite3_column_bytes(r->st, i);
  return b;
}

void hs_rows_close(hs_rows *r) {
  if (!r) return;
  if (r->time_limit > 0) sqlite3_progress_handler(sqlite3_db_handle(r->st), 0, NULL, NULL);
  sqlite3_finalize(r->st);
  free(r);
}

/* ---- runs ------------------------------------------------------------------------------- */

int hs_store_run_exists(hs_store *s, int64_t id, hs_diag *d) {
  hs_rows *r;
  int rc = rows_prepare(s, "SELECT 1 FROM run WHERE id = ?1", &r, d);
  if (rc) return rc;
  sqlite3_bind_int64(r->st, 1, id);
  rc = hs_rows_next(r, d);
  hs_rows_close(r);
  return rc;
}

static void bind_filter(sqlite3_stmt *st, const hs_run_filter *f) {
  const char *v[3] = {f ? f->policy : NULL, f ? f->kind : NULL, f ? f->status : NULL};
  for (int k = 0; k < 3; k++) {
    if (v[k]) sqlite3_bind_text(st, k + 1, v[k], -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, k + 1);
  }
}

#define RUN_FILTER_SQL \
  " WHERE (?1 IS NULL OR r.policy = ?1) AND (?2 IS NULL OR r.kind = ?2)" \
  " AND (?3 IS NULL OR r.status = ?3)"

int hs_store_runs_open(hs_store *s, const hs_run_filter *f, hs_rows **out, hs_diag *d) {
  int rc = rows_prepare(s,
      "SELECT r.id, r.kind, r.policy, r.params, r.cluster_name AS cluster, r.model,"
      " COALESCE(s.workers, NULLIF((SELECT count(*) FROM worker w WHERE w.run_id = r.id),"
      " 0)) AS workers, s.iterations, s.sim_time_s,"
      /* A 'running' run whose process is gone was cut short (core/core_store.c). */
      " CASE WHEN r.status = 'running' AND hs_run_alive(r.options) = 0"
      " THEN 'incomplete' ELSE r.status END AS status, r.started_at"
      " FROM run r LEFT JOIN summary s ON s.run_id = r.id" RUN_FILTER_SQL " ORDER BY r.id", out, d);
  if (!rc) bind_filter((*out)->st, f);
  return rc;
}

int hs_store_runs_not_complete(hs_store *s, const hs_run_filter *f, int64_t *n, hs_diag *d) {
  hs_rows *r;
  *n = 0;
  int rc = rows_prepare(s, "SELECT count(*) FROM run r" RUN_FILTER_SQL " AND r.status <> 'complete'", &r, d);
  if (rc) return rc;
  bind_filter(r->st, f);
  rc = hs_rows_next(r, d);
  if (rc == 1) *n = hs_rows_int(r, 0);
  hs_rows_close(r);
  return rc < 0 ? rc : 0;
}

int hs_store_run_table_open(hs_store *s, hs_run_table t, int64_t run, hs_rows **out, hs_diag *d) {
  static const char *const sql[] = {
      [HS_TABLE_RUN] = "SELECT * FROM run WHERE id = ?1",
      [HS_TABLE_SUMMARY] = "SELECT * FROM summary WHERE run_id = ?1",
      [HS_TABLE_WORKER] = "SELECT * FROM worker WHERE run_id = ?1 ORDER BY idx",
      [HS_TABLE_STEP] = "SELECT * FROM step WHERE run_id = ?1 ORDER BY step, worker",
      [HS_TABLE_EVAL] = "SELECT * FROM eval WHERE run_id = ?1 ORDER BY time_s, id",
      [HS_TABLE_VALIDATION] = "SELECT * FROM validation WHERE run_id = ?1 OR sim_run_id = ?1 ORDER BY id",
  };
  *out = NULL;
  if ((unsigned)t >= sizeof sql / sizeof sql[0]) return hs_diag_set(d, HS_EINVAL, "no such table (%d)", (int)t);
  int rc = rows_prepare(s, sql[t], out, d);
  if (!rc) sqlite3_bind_int64((*out)->st, 1, run);
  return rc;
}

static int open_limited(hs_store *s, const char *sql, int64_t run, int64_t limit, hs_rows **out, hs_diag *d) {
  int rc = rows_prepare(s, sql, out, d);
  if (rc) return rc;
  sqlite3_bind_int64((*out)->st, 1, run);
  sqlite3_bind_int64((*out)->st, 2, limit);
  return 0;
}

int hs_store_evals_open(hs_store *s, int64_t run, int64_t limit, hs_rows **out, hs_diag *d) {
  return open_limited(s, "SELECT time_s, step, loss, accuracy FROM eval WHERE run_id = ?1"
                         " ORDER BY time_s, id LIMIT ?2", run, limit, out, d);
}

int hs_store_steps_open(hs_store *s, int64_t run, int64_t limit, hs_rows **out, hs_diag *d) {
  return open_limited(s, "SELECT step, worker, batch, start_s, compute_end_s, comm_end_s, wait_s,"
                         " model_version, staleness, loss FROM step WHERE run_id = ?1"
                         " ORDER BY step, worker LIMIT ?2", run, limit, out, d);
}

/* ---- compare and groups ------------------------------------------------------------------ */

static const char *const compare_metrics[] = {
    "workers", "iterations", "events", "samples", "sim_time_s", "mean_iteration_s",
    "samples_per_s", "wait_fraction", "wall_s", "final_loss", "final_accuracy",
    "time_to_target_s", NULL};

/* Two runs: one UNION ALL arm per metric; the LEFT JOINs keep a row when a run has no summary
 * yet. */
static int compare2_open(hs_store *s, int64_t a, int64_t b, hs_rows **out, hs_diag *d) {
  char sql[8192];
  size_t o = 0;
  o += (size_t)snprintf(sql + o, sizeof sql - o,
                        "WITH sa AS (SELECT * FROM summary WHERE run_id = ?1),"
                        " sb AS (SELECT * FROM summary WHERE run_id = ?2) ");
  for (int k = 0; compare_metrics[k]; k++) {
    const char *m = compare_metrics[k];
    o += (size_t)snprintf(sql + o, sizeof sql - o,
                          "%sSELECT '%s' AS metric, sa.%s AS a, sb.%s AS b,"
                          " CAST(sb.%s AS REAL) / NULLIF(sa.%s, 0) AS ratio"
                          " FROM (SELECT 1) LEFT JOIN sa LEFT JOIN sb",
                          k ? " UNION ALL " : "", m, m, m, m, m);
  }
  int rc = rows_prepare(s, sql, out, d);
  if (rc) return rc;
  sqlite3_bind_int64((*out)->st, 1, a);
  sqlite3_bind_int64((*out)->st, 2, b);
  return 0;
}

int hs_store_compare_open(hs_store *s, const int64_t *ids, int n, hs_rows **out, hs_diag *d) {
  *out = NULL;
  if (n < 2) return hs_diag_set(d, HS_EINVAL, "compare: at least 2 runs");
  if (n == 2) return compare2_open(s, ids[0], ids[1], out, d);
  size_t cap = 65536, o = 0;
  char *sql = malloc(cap);
  if (!sql) return hs_diag_set(d, HS_ENOMEM, "out of memory");
#define ADD(...) (o += (size_t)snprintf(sql + o, o < cap ? cap - o : 0, __VA_ARGS__))
  for (int k = 0; compare_metrics[k]; k++) {
    const char *m = compare_metrics[k];
    ADD("%sSELECT '%s' AS metric", k ? " UNION ALL " : "", m);
    for (int i = 0; i < n; i++)
      ADD(", (SELECT %s FROM summary WHERE run_id = ?%d) AS \"run%lld\"", m, i + 1, (long long)ids[i]);
    for (int i = 1; i < n; i++)
      ADD(", CAST((SELECT %s FROM summary WHERE run_id = ?%d) AS REAL) / NULLIF((SELECT %s FROM"
          " summary WHERE run_id = ?1), 0) AS \"run%lld/run%lld\"",
          m, i + 1, m, (long long)ids[i], (long long)ids[0]);
  }
#undef ADD
  if (o >= cap) {
    free(sql);
    return hs_diag_set(d, HS_ELIMIT, "compare: too many runs");
  }
  int rc = rows_prepare(s, sql, out, d);
  free(sql);
  if (rc) return rc;
  for (int i = 0; i < n; i++) sqlite3_bind_int64((*out)->st, i + 1, ids[i]);
  return 0;
}

/* hs_stdev(x): the sample standard deviation of the non-null x (0 for one value, NULL for none),
 * by Welford's update; registered on the connection for groups, so it does not depend on
 * SQLite's optional math functions. */
typedef struct stdev_acc {
  int64_t n;
  double mean, m2;
} stdev_acc;

static void stdev_step(sqlite3_context *c, int argc, sqlite3_value **v) {
  (void)argc;
  if (sqlite3_value_type(v[0]) == SQLITE_NULL) return;
  stdev_acc *a = sqlite3_aggregate_context(c, sizeof *a);
  if (!a) return;
  double x = sqlite3_value_double(v[0]);
  a->n++;
  double delta = x - a->mean;
  a->mean += delta / (double)a->n;
  a->m2 += delta * (x - a->mean);
}

static void stdev_final(sqlite3_context *c) {
  stdev_acc *a = sqlite3_aggregate_context(c, 0);
  if (!a || a->n == 0) sqlite3_result_null(c);
  else sqlite3_result_double(c, a->n > 1 ? sqrt(a->m2 / (double)(a->n - 1)) : 0.0);
}

/* What a run is apart from its seed and the process that wrote it (pid, host, the sweep's
 * point key): runs with the same key differ only in their seed. Over `run r`. */
#define GROUP_KEY_SQL \
  "r.kind || char(31) || r.policy || char(31) || COALESCE(r.params, '') || char(31) ||" \
  " r.model || char(31) || r.global_batch || char(31) || COALESCE(r.cluster_text, '') ||" \
  " char(31) || CASE WHEN json_valid(r.options) THEN json_remove(r.options, '$.pid', '$.host'," \
  " '$.boot', '$.pid_start', '$.sweep_point', '$.sweep') ELSE COALESCE(r.options, '') END"

int hs_store_groups_open(hs_store *s, const hs_run_filter *f, hs_rows **out, hs_diag *d) {
  static const char *const metrics[] = {"time_to_target_s", "final_loss", "final_accuracy",
                                        "sim_time_s", "samples_per_s", "wait_fraction",
                                        "iterations", "mean_iteration_s", NULL};
  *out = NULL;
  sqlite3 *db = hs_store_db(s);
  if (sqlite3_create_function(db, "hs_stdev", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, NULL,
                              stdev_step, stdev_final) != SQLITE_OK)
    return sqlite_fail(db, d);
  char sql[8192];
  size_t o = 0;
  o += (size_t)snprintf(sql + o, sizeof sql - o,
      "WITH g AS (SELECT r.id, r.seed, r.kind, r.policy, r.params, r.cluster_name, r.model,"
      " r.global_batch, s.*, " GROUP_KEY_SQL " AS gk"
      " FROM run r LEFT JOIN summary s ON s.run_id = r.id"
      " WHERE (?1 IS NULL OR r.policy = ?1) AND (?2 IS NULL OR r.kind = ?2)"
      " AND (CASE WHEN r.status = 'running' AND hs_run_alive(r.options) = 0 THEN 'incomplete'"
      " ELSE r.status END) = COALESCE(?3, 'complete')) ");
  for (int k = 0; metrics[k]; k++)
    o += (size_t)snprintf(sql + o, sizeof sql - o,
        "%sSELECT min(id) AS \"group\", kind, policy, params, cluster_name AS cluster, model,"
        " global_batch, count(*) AS runs, group_concat(seed, ',') AS seeds,"
        " group_concat(id, ',') AS run_ids, '%s' AS metric, %d AS mi, count(%s) AS n,"
        " avg(%s) AS mean, hs_stdev(%s) AS sd, min(%s) AS min, max(%s) AS max"
        " FROM (SELECT * FROM g ORDER BY seed, id) GROUP BY gk",
        k ? " UNION ALL " : "", metrics[k], k, metrics[k], metrics[k], metrics[k], metrics[k],
        metrics[k]);
  o += (size_t)snprintf(sql + o, sizeof sql - o, " ORDER BY 1, mi");
  /* The metric's index only orders the rows; leave it out of what is returned. */
  char outer[9000];
  snprintf(outer, sizeof outer,
           "SELECT \"group\", kind, policy, params, cluster, model, global_batch, runs, seeds,"
           " run_ids, metric, n, mean, sd, min, max FROM (%s)", sql);
  int rc = rows_prepare(s, outer, out, d);
  if (!rc) bind_filter((*out)->st, f);
  return rc;
}

/* ---- a user's statement ------------------------------------------------------------------ */

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* SQLite's progress handler: a non-zero return stops the statement (SQLITE_INTERRUPT). */
static int on_progress(void *ctx) {
  hs_rows *r = ctx;
  if (mono_now() > r->deadline) {
    r->timed_out = 1;
    return 1;
  }
  return 0;
}

int hs_store_sql_open(hs_store *s, const char *sql, const hs_sql_limits *lim, hs_rows **out,
                      hs_sql_refusal *why, hs_diag *d) {
  *out = NULL;
  *why = HS_SQL_ACCEPTED;
  sqlite3 *db = hs_store_db(s);
  /* ATTACH counts as read-only for sqlite3_stmt_readonly; forbid it so that a statement cannot
   * reach other files. */
  sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
  /* One value may not pass the byte limit either: randomblob(1e9) fails when it is made, not
   * after a gigabyte was allocated. */
  int64_t maxv = lim ? lim->max_value_bytes : 0;
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH,
                (int)(maxv > 0 && maxv < HS_SQL_LENGTH_CEILING ? maxv : HS_SQL_LENGTH_CEILING));
  sqlite3_stmt *st = NULL;
  const char *tail = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, &tail) != SQLITE_OK) {
    *why = sqlite3_errcode(db) == SQLITE_TOOBIG ? HS_SQL_TOO_BIG : HS_SQL_BAD;
    hs_diag_set(d, HS_EINVAL, "%s", sqlite3_errmsg(db));
    return HS_EINVAL;
  }
  if (!st) {
    *why = HS_SQL_EMPTY;
    return hs_diag_set(d, HS_EINVAL, "no statement given");
  }
  /* A second statement would run unchecked by the read-only test below; refuse it. */
  sqlite3_stmt *more = NULL;
  if (tail && sqlite3_prepare_v2(db, tail, -1, &more, NULL) == SQLITE_OK && more) {
    sqlite3_finalize(more);
    sqlite3_finalize(st);
    *why = HS_SQL_MANY;
    return hs_diag_set(d, HS_EINVAL, "give one statement only");
  }
  if (!sqlite3_stmt_readonly(st)) {
    sqlite3_finalize(st);
    *why = HS_SQL_WRITES;
    return hs_diag_set(d, HS_EINVAL, "refusing a statement that writes");
  }
  hs_rows *r = calloc(1, sizeof *r);
  if (!r) {
    sqlite3_finalize(st);
    return hs_diag_set(d, HS_ENOMEM, "out of memory");
  }
  r->st = st;
  if (lim && lim->time_s > 0) {
    r->time_limit = lim->time_s;
    r->deadline = mono_now() + lim->time_s;
    sqlite3_progress_handler(db, 1000, on_progress, r);
  }
  *out = r;
  return 0;
}

/* ---- the report's rows ------------------------------------------------------------------- */

int hs_store_report_open(hs_store *s, hs_report_query q, int64_t run, int64_t n, hs_rows **out,
                         hs_diag *d) {
  static const char *const sql[] = {
      [HS_REPORT_RUN] =
          "SELECT r.kind, r.policy, r.params, r.cluster_name, r.model, r.status, r.error,"
          " r.global_batch, s.run_id IS NOT NULL, s.workers, s.iterations, s.samples,"
          " s.sim_time_s, s.mean_iteration_s, s.samples_per_s, s.wait_fraction,"
          " s.final_loss, s.final_accuracy, s.time_to_target_s,"
          " (SELECT count(*) FROM worker w WHERE w.run_id = r.id),"
          " (SELECT count(*) FROM step p WHERE p.run_id = r.id),"
          " (SELECT count(*) FROM eval e WHERE e.run_id = r.id),"
          " CASE WHEN json_valid(r.options) THEN json_extract(r.options, '$.store') END,"
          " CASE WHEN json_valid(r.options) THEN json_extract(r.options, '$.target_loss') END,"
          " CASE WHEN json_valid(r.options) THEN json_extract(r.options, '$.target_accuracy') END, "
          GROUP_KEY_SQL ", r.cluster_text"
          " FROM run r LEFT JOIN summary s ON s.run_id = r.id WHERE r.id = ?1",
      [HS_REPORT_PROGRESS] =
          "SELECT COALESCE(comm_end_s, compute_end_s) AS t, batch FROM step"
          " WHERE run_id = ?1 ORDER BY t",
      [HS_REPORT_COMPOSITION] =
          "SELECT COALESCE(node, '?'), COALESCE(device_type, '?'), count(*), min(idx), max(idx)"
          " FROM worker WHERE run_id = ?1 GROUP BY 1, 2 ORDER BY 4",
      [HS_REPORT_WORKER_NAMES] = "SELECT idx, device_type, node FROM worker WHERE run_id = ?1 AND idx < ?2",
      [HS_REPORT_BATCHES] =
          "SELECT worker, start_s, COALESCE(comm_end_s, compute_end_s), batch FROM step"
          " WHERE run_id = ?1 AND worker < ?2 ORDER BY step, worker",
      [HS_REPORT_WORKER_JOINS] = "SELECT idx, joined_at_s FROM worker WHERE run_id = ?1 AND idx < ?2",
      [HS_REPORT_SPANS] =
          "SELECT worker, start_s, compute_end_s, COALESCE(comm_end_s, compute_end_s), wait_s"
          " FROM step WHERE run_id = ?1 AND worker < ?2 ORDER BY step, worker",
      [HS_REPORT_TIMELINE_BOUNDS] =
          "SELECT sum(n), max(worker) + 1, min(t0), max(t1), max((t1 - t0) / n), max(n) FROM"
          " (SELECT worker, count(*) AS n, min(start_s) AS t0,"
          " max(COALESCE(comm_end_s, compute_end_s)) AS t1 FROM step"
          " WHERE run_id = ?1 AND worker < ?2 GROUP BY worker)",
      [HS_REPORT_CYCLES] =
          "SELECT nx - start_s FROM (SELECT start_s, LEAD(start_s) OVER (PARTITION BY worker ORDER BY"
          " step) AS nx FROM step WHERE run_id = ?1) WHERE nx IS NOT NULL LIMIT ?2",
      [HS_REPORT_STEP_MEANS] =
          "SELECT step, avg(nx - start_s) FROM (SELECT step, start_s, LEAD(start_s) OVER"
          " (PARTITION BY worker ORDER BY step) AS nx FROM step WHERE run_id = ?1)"
          " WHERE nx IS NOT NULL GROUP BY step ORDER BY step LIMIT ?2",
      [HS_REPORT_EVALS] = "SELECT time_s, loss, accuracy FROM eval WHERE run_id = ?1 ORDER BY time_s, step",
      [HS_REPORT_EVAL_COUNT] = "SELECT count(*) FROM eval WHERE run_id = ?1",
      [HS_REPORT_VALIDATIONS] =
          "SELECT id, run_id, sim_run_id, median_iter_error, p95_iter_error,"
          " time_to_loss_error, created_at FROM validation ORDER BY id",
  };
  *out = NULL;
  if ((unsigned)q >= sizeof sql / sizeof sql[0]) return hs_diag_set(d, HS_EINVAL, "no such query (%d)", (int)q);
  int rc = rows_prepare(s, sql[q], out, d);
  if (rc) return rc;
  sqlite3_stmt *st = (*out)->st;
  if (sqlite3_bind_parameter_count(st) >= 1) sqlite3_bind_int64(st, 1, run);
  if (sqlite3_bind_parameter_count(st) >= 2) sqlite3_bind_int64(st, 2, n);
  return 0;
}
