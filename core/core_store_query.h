/* core_store_query: the rows that the commands which print the database read (`hetsim query`,
 * `export`, `report`), behind the store's API, so that the CLI holds no SQL.
 *
 * Contract:
 * - Each reader opens an hs_rows cursor over one statement of the store: hs_rows_next steps it,
 *   the accessors read the current row's columns (names and values as SQLite gives them: a
 *   column's type is per value), hs_rows_close finalizes it. A cursor lives no longer than its
 *   store and at most one is open per store at a time, except where said.
 * - The columns of each cursor are part of the documented contract below (and, for the tables'
 *   own rows, docs/schema.md): `hetsim query` and `export` print them as they come.
 * - `hs_store_sql_open` runs one statement a user wrote: it must parse, be one statement and
 *   only read; attaching another file fails when the statement runs (no file may be attached);
 *   the limits below bound its run.
 * - Errors: the functions return 0 (or what is said) and a negative HS_E* code on failure,
 *   with SQLite's message alone in d (no path or context: the commands have always put it in
 *   their own words). Readers may run on read-only stores; none while a step batch is open.
 * - Ownership: strings and blobs a cursor returns live until the next hs_rows_next or
 *   hs_rows_close. Threading: as the store (one thread). */
#ifndef HS_CORE_STORE_QUERY_H
#define HS_CORE_STORE_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"
#include "core/core_store.h"

typedef struct hs_rows hs_rows;

typedef enum hs_value_type {
  HS_VALUE_NULL = 0,
  HS_VALUE_INT = 1,
  HS_VALUE_REAL = 2,
  HS_VALUE_TEXT = 3,
  HS_VALUE_BLOB = 4
} hs_value_type;

/* Steps to the next row: 1 a row, 0 no more, or on failure HS_EINTR (the time limit of
 * hs_store_sql_open stopped it), HS_ELIMIT (a value passed its length limit) or HS_EDB. */
int hs_rows_next(hs_rows *r, hs_diag *d);
int hs_rows_columns(const hs_rows *r);
const char *hs_rows_name(const hs_rows *r, int i);
hs_value_type hs_rows_type(const hs_rows *r, int i);
/* As SQLite converts: NULL reads as 0, a text as its leading number. */
int64_t hs_rows_int(const hs_rows *r, int i);
double hs_rows_real(const hs_rows *r, int i);
/* NaN for NULL, else hs_rows_real. */
double hs_rows_real_or_nan(const hs_rows *r, int i);
/* The value as text (NULL for NULL), its length in bytes in *len when len is not NULL (a text
 * may hold NUL bytes). */
const char *hs_rows_text(const hs_rows *r, int i, size_t *len);
const unsigned char *hs_rows_blob(const hs_rows *r, int i, size_t *len);
/* Finalizes the statement (and removes a time limit's handler). NULL is allowed. */
void hs_rows_close(hs_rows *r);

/* 1 when run `id` exists, 0 when not. */
int hs_store_run_exists(hs_store *s, int64_t id, hs_diag *d);

/* Filters of the run lists; NULL = any. */
typedef struct hs_run_filter {
  const char *policy, *kind, *status;
} hs_run_filter;

/* One row per run, by id: id, kind, policy, params, cluster, model, workers (the summary's,
 * else the count of worker rows, NULL for none), iterations, sim_time_s, status ("incomplete"
 * for a 'running' run whose process is gone), started_at. The status filter matches the stored
 * status. */
int hs_store_runs_open(hs_store *s, const hs_run_filter *f, hs_rows **out, hs_diag *d);
/* How many of the runs f selects are not complete (their stored status). */
int hs_store_runs_not_complete(hs_store *s, const hs_run_filter *f, int64_t *n, hs_diag *d);

/* A run's rows of one table, every column in the table's order (docs/schema.md): the run row,
 * its summary, its workers (by idx), steps (by step, worker), evaluations (by time, id),
 * validations where it is the real or the simulated run (by id). */
typedef enum hs_run_table {
  HS_TABLE_RUN = 0,
  HS_TABLE_SUMMARY,
  HS_TABLE_WORKER,
  HS_TABLE_STEP,
  HS_TABLE_EVAL,
  HS_TABLE_VALIDATION
} hs_run_table;
int hs_store_run_table_open(hs_store *s, hs_run_table t, int64_t run, hs_rows **out, hs_diag *d);

/* A run's evaluations: time_s, step, loss, accuracy (by time, id); at most limit (< 0: all). */
int hs_store_evals_open(hs_store *s, int64_t run, int64_t limit, hs_rows **out, hs_diag *d);
/* A run's steps: step, worker, batch, start_s, compute_end_s, comm_end_s, wait_s,
 * model_version, staleness, loss (by step, worker); at most limit (< 0: all). */
int hs_store_steps_open(hs_store *s, int64_t run, int64_t limit, hs_rows **out, hs_diag *d);

/* The summaries of n runs (2 to 64) side by side, one row per numeric summary column (metric):
 * for two runs the columns metric, a, b, ratio (b / a; NULL when a is 0 or either is NULL);
 * for more, metric, one column per run ("run3") and one per later run's ratio to the first
 * ("run4/run3"). HS_ELIMIT when the statement would be too long. */
int hs_store_compare_open(hs_store *s, const int64_t *ids, int n, hs_rows **out, hs_diag *d);

/* Runs that differ only in their seed (and in what names the process that wrote them), one row
 * per group and metric: group (its first run id), kind, policy, params, cluster, model,
 * global_batch, runs, seeds, run_ids (in seed order), metric, n, mean, sd (sample), min, max.
 * The status filter matches "incomplete" as hs_store_runs_open shows it; without one, complete
 * runs only. */
int hs_store_groups_open(hs_store *s, const hs_run_filter *f, hs_rows **out, hs_diag *d);

/* Bounds of a user's statement. */
typedef struct hs_sql_limits {
  double time_s;             /* s of wall time; 0 = none */
  int64_t max_value_bytes;   /* bytes of one value; 0 = SQLite's own ceiling (HS_SQL_LENGTH_CEILING) */
} hs_sql_limits;
/* SQLite's own ceiling on one value (SQLITE_MAX_LENGTH as built). */
#define HS_SQL_LENGTH_CEILING 1000000000LL

/* Why a user's statement was refused. */
typedef enum hs_sql_refusal {
  HS_SQL_ACCEPTED = 0,
  HS_SQL_BAD,                /* does not parse (d: SQLite's message) */
  HS_SQL_TOO_BIG,            /* a value passes the length limit already (d: SQLite's message) */
  HS_SQL_EMPTY,              /* no statement (blank, or a comment) */
  HS_SQL_MANY,               /* more than one statement */
  HS_SQL_WRITES              /* it would write (or attach a file) */
} hs_sql_refusal;
/* Opens the cursor of one read-only statement a user wrote. A refused statement: HS_EINVAL
 * with *why set (and nothing opened). The time limit counts from this call. */
int hs_store_sql_open(hs_store *s, const char *sql, const hs_sql_limits *lim, hs_rows **out,
                      hs_sql_refusal *why, hs_diag *d);

/* The rows `hetsim report` draws, each over one run (and a bound n where said). Columns: */
typedef enum hs_report_query {
  /* kind, policy, params, cluster_name, model, status, error, global_batch, has_summary (0/1),
   * the summary's workers, iterations, samples, sim_time_s, mean_iteration_s, samples_per_s,
   * wait_fraction, final_loss, final_accuracy, time_to_target_s, counts of worker, step and
   * eval rows, the options' store, target_loss and target_accuracy, the group key (what the run
   * is apart from its seed, as hs_store_groups_open groups), cluster_text. One row or none. */
  HS_REPORT_RUN = 0,
  /* t (a step's communication end, else compute end), batch; by t. */
  HS_REPORT_PROGRESS,
  /* node, device_type (each "?" when NULL), count, first idx, last idx; per node and type,
   * by first idx. */
  HS_REPORT_COMPOSITION,
  /* idx, device_type, node of workers idx < n. */
  HS_REPORT_WORKER_NAMES,
  /* worker, start_s, end (communication end, else compute end), batch of the steps of workers
   * < n; by step, worker. */
  HS_REPORT_BATCHES,
  /* idx, joined_at_s of workers idx < n. */
  HS_REPORT_WORKER_JOINS,
  /* worker, start_s, compute_end_s, end (as above), wait_s of the steps of workers < n; by
   * step, worker. */
  HS_REPORT_SPANS,
  /* Over the steps of workers < n, one row: rows, workers (highest worker + 1), first start,
   * last end, the largest per-worker mean time from first start to last end, the most steps of
   * one worker. */
  HS_REPORT_TIMELINE_BOUNDS,
  /* A worker's iteration time (a step's start to its next step's start), at most n values. */
  HS_REPORT_CYCLES,
  /* step, the mean over the workers of the iteration time starting at it; by step, at most n. */
  HS_REPORT_STEP_MEANS,
  /* time_s, loss, accuracy of the run's evaluations; by time, step. */
  HS_REPORT_EVALS,
  /* The run's evaluation count: one row. */
  HS_REPORT_EVAL_COUNT,
  /* Every validation (the run is not used): id, run_id, sim_run_id, median_iter_error,
   * p95_iter_error, time_to_loss_error, created_at; by id. */
  HS_REPORT_VALIDATIONS
} hs_report_query;
int hs_store_report_open(hs_store *s, hs_report_query q, int64_t run, int64_t n, hs_rows **out,
                         hs_diag *d);

#endif
