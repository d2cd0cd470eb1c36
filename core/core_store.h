/* core_store: the SQLite database where every run, calibration and validation lands.
 *
 * Contract:
 * - hs_store_open creates the file and brings its schema up to HS_STORE_SCHEMA_VERSION by
 *   applying the ordered migrations (each in its own transaction), unless HS_STORE_READONLY is
 *   given: then nothing is created or changed, and a missing file is HS_ENOTFOUND. A database
 *   whose schema is newer than this build knows is refused with HS_ESCHEMA and left untouched.
 * - The connection uses WAL, foreign keys and a busy timeout, so several processes (sweep ranks)
 *   may write one file; every write transaction starts with BEGIN IMMEDIATE.
 * - A run is inserted with status 'running' and committed at once; only hs_store_run_finish
 *   marks it complete, failed or interrupted, so a half-written run never looks complete.
 * - Step rows go through a buffered bulk insert that commits every HS_STORE_STEP_BATCH rows;
 *   an interrupted run keeps the rows of every committed batch, and hs_store_run_finish and
 *   hs_store_close commit the pending ones. During a step batch foreign keys are off on the
 *   store's connection (the run is checked once per batch instead), and the connection's
 *   automatic WAL checkpoint gives way to a checkpoint thread (core_store.c says why).
 * - Doubles that are NaN are stored as NULL. Times are seconds, sizes bytes, batches samples.
 * - Ownership: the caller owns every string it passes; the store copies what it keeps.
 * - Threading: one hs_store per thread; the handle is not shared. Between hs_store_steps_begin
 *   and hs_store_steps_end the store runs two threads of its own, which block all signals: one
 *   inserts the step rows with the store's connection, one checkpoints the WAL with a second
 *   connection. Both are joined by hs_store_steps_end, hs_store_run_finish or hs_store_close.
 * - Library code: errors go into hs_diag (with sqlite3_errmsg and the path), never to stdio. */
#ifndef HS_CORE_STORE_H
#define HS_CORE_STORE_H

#include <stdint.h>

#include "core/core_error.h"

struct sqlite3;

/* The newest schema this build knows; docs/schema.md describes it table by table. */
#define HS_STORE_SCHEMA_VERSION 6
/* Step rows per transaction in the bulk insert. */
#define HS_STORE_STEP_BATCH 100000
/* How long a writer waits for another process's transaction before giving up, in ms. */
#define HS_STORE_BUSY_TIMEOUT_MS 30000

typedef struct hs_store hs_store;
/* HS_STORE_EMPTY_OK, with HS_STORE_READONLY: an SQLite file without tables (empty, or a
 * database another process is creating, or one whose creation was killed) opens with schema
 * version 0 instead of failing; it holds nothing, and its tables must not be queried. */
enum { HS_STORE_READONLY = 1, HS_STORE_EMPTY_OK = 2 };

/* Opens (and unless READONLY creates and migrates) the database at path. On failure *out is
 * NULL and d says why: HS_ENOTFOUND (read-only, no such file), HS_EDB (not a database, I/O),
 * HS_ESCHEMA (schema newer than this build, or not a hetsim database). */
int hs_store_open(hs_store **out, const char *path, int flags, hs_diag *d);
/* Commits pending step rows and closes. NULL is allowed. */
void hs_store_close(hs_store *s);
struct sqlite3 *hs_store_db(hs_store *s);
const char *hs_store_path(const hs_store *s);
/* The schema version found in (or brought to) the file. */
int hs_store_schema_version(const hs_store *s);

typedef struct hs_run_info {
  const char *kind;          /* "sim" | "real" */
  const char *policy;        /* "ssgd" */
  const char *params;        /* canonical "k=v,k=v" of the policy's parameters */
  const char *cluster_name, *cluster_path, *cluster_text;  /* text = the whole YAML as given */
  const char *model;
  int64_t global_batch;      /* samples per global iteration */
  uint64_t seed;             /* stored as INTEGER (the bits cast to int64) */
  const char *options_json;  /* other run options, JSON object text; NULL = none */
  const char *versions_json; /* hetsim + library versions, JSON object text; NULL = none */
  const char *command;       /* the command line */
} hs_run_info;
/* Inserts a run with status 'running' and commits at once. */
int hs_store_run_begin(hs_store *s, const hs_run_info *info, int64_t *run_id, hs_diag *d);

typedef struct hs_worker_row {
  int index;                 /* worker number, file order from 0 */
  const char *device_type;
  const char *node;
  double joined_at_s, left_at_s;          /* s; left_at_s NaN = NULL (never left) */
  int initial_batch;         /* samples */
  int64_t steps, samples;
  double busy_s, wait_s, comm_s;          /* s */
} hs_worker_row;
/* Inserts n worker rows in one transaction. */
int hs_store_workers_add(hs_store *s, int64_t run, const hs_worker_row *rows, int n, hs_diag *d);

typedef struct hs_step_row {
  int32_t worker; int64_t step; int32_t batch;
  double start_s, compute_end_s, comm_end_s, wait_s;  /* s; comm_end_s NaN = NULL */
  int64_t model_version; int32_t staleness;
  double loss;                            /* NaN = NULL */
} hs_step_row;
/* Buffered bulk insert: rows are buffered and inserted in chunks by one prepared statement, in a
 * transaction committed every HS_STORE_STEP_BATCH rows so an interrupted run keeps consistent
 * rows. A run that does not exist is refused by hs_store_steps_begin (HS_ENOTFOUND), or at the
 * next batch when another process deleted it meanwhile. Because of the buffering, a bad row (a
 * duplicate key) is reported by a later hs_store_step_add or by hs_store_steps_end, with a
 * message naming its step and worker; the other rows still go in. hs_store_steps_end,
 * hs_store_run_finish and hs_store_close insert and commit the buffered rows. Between begin and
 * end the store may be used only for step rows (its connection belongs to the writer thread,
 * and other writes would land in the open batch). */
int hs_store_steps_begin(hs_store *s, int64_t run, hs_diag *d);
int hs_store_step_add(hs_store *s, const hs_step_row *row, hs_diag *d);
int hs_store_steps_end(hs_store *s, hs_diag *d);
/* loss and accuracy NaN = NULL; accuracy is a fraction in [0, 1]. */
int hs_store_eval_add(hs_store *s, int64_t run, double time_s, int64_t step, double loss,
                      double accuracy, hs_diag *d);
typedef struct hs_eval_row {
  double time_s, loss, accuracy;          /* s; loss and accuracy NaN = NULL */
  int64_t step;
} hs_eval_row;
/* Inserts n evaluations of run `run` in one transaction (a long run has 10^5 of them, each its
 * own commit otherwise); all or none. */
int hs_store_evals_add(hs_store *s, int64_t run, const hs_eval_row *rows, int64_t n, hs_diag *d);

typedef struct hs_summary {
  int64_t workers, iterations, events, samples;
  double sim_time_s, mean_iteration_s, samples_per_s, wait_fraction, wall_s;
  double final_loss, final_accuracy, time_to_target_s;   /* NaN = NULL */
} hs_summary;
/* status: "complete" | "failed" | "interrupted"; sum may be NULL; error may be NULL.
 * Commits pending step rows first, then sets the status, finished_at and the summary in one
 * transaction. An unknown run is HS_ENOTFOUND. */
int hs_store_run_finish(hs_store *s, int64_t run, const char *status, const hs_summary *sum,
                        const char *error, hs_diag *d);

/* ---- reading (the queries the commands need, typed) ----
 * Readers work on read-only stores too; none may run while a step batch is open. They return
 * 0 (or a count, or 1 found / 0 not found where said) and HS_EDB (or HS_ENOMEM) on failure. */

/* A stored run as `hetsim validate` needs it. */
typedef struct hs_run_record {
  char kind[8], status[16], policy[64], params[1024], model[64]; /* cut to fit */
  char *cluster_text;        /* owned; NULL when the run had no cluster file */
  char *options_json;        /* owned; NULL when none */
  int64_t global_batch;
  uint64_t seed;
  int64_t iterations;        /* summary.iterations; 0 without a summary */
  int64_t samples;           /* summary.samples; 0 without */
  double total_s;            /* summary.sim_time_s; NaN without */
  double last_loss;          /* the loss of the run's last evaluation (by step, then time); NaN */
} hs_run_record;
/* Reads run id into *out (hs_run_record_free frees it, also after a failure). 1 found, 0 not. */
int hs_store_run_get(hs_store *s, int64_t id, hs_run_record *out, hs_diag *d);
void hs_run_record_free(hs_run_record *r);

/* The device's newest fitted communication model (comm_model) of backend and op, nearest
 * world size first. 1 found (alpha in s, beta in bytes/s), 0 not. */
int hs_store_comm_fit(hs_store *s, const char *device, const char *backend, const char *op,
                      int world, double *alpha, double *beta, hs_diag *d);
/* The device's measured time of backend's op for a message of `bytes` (comm_sample medians
 * of the world size nearest `world`), log-log interpolated (hs_comm_time_interp, the nearest
 * two sizes at either end). 1 found, 0 not. */
int hs_store_comm_time_at(hs_store *s, const char *device, const char *backend, const char *op,
                          int world, double bytes, double *t, hs_diag *d);
/* The world size hs_store_comm_time_at reads for `world`: that of the device's comm_sample rows
 * of backend's op nearest it, into *got. 1 found, 0 not. */
int hs_store_comm_world(hs_store *s, const char *device, const char *backend, const char *op, int world,
                        int *got, hs_diag *d);
/* The device's newest non-negative median of backend's op (comm_sample) at the world size
 * nearest `world`: for ops measured at one size, such as "wake". 1 found, 0 not. */
int hs_store_comm_latest(hs_store *s, const char *device, const char *backend, const char *op,
                         int world, double *t, hs_diag *d);
/* The device's newest round trip of `compressor` (compress_sample, `hetsim calib`) on the vector
 * length nearest `elems`: its setting, that length and its median time (s); where the device
 * has none, a device's on the same host (the round trip runs on the host: a GPU device takes
 * the cpu's). 1 found, 0 not. */
int hs_store_compress_latest(hs_store *s, const char *device, const char *compressor, int64_t elems,
                             double *setting, int64_t *at_elems, double *t, hs_diag *d);
/* The median times of the device's calibration of `model` in `phase` (calib_sample), one per
 * timed batch size, ascending, at most cap. Returns the count. */
int hs_store_calib_medians(hs_store *s, const char *device, const char *model, const char *phase,
                           double *v, int cap, hs_diag *d);

/* Per model version of a run, the first start of a step computed on it: versions[i] and
 * times[i] ascending, malloc'd (the caller frees both, also after a failure). Returns the
 * count (>= 0). */
int64_t hs_store_version_starts(hs_store *s, int64_t run, int64_t **versions, double **times,
                                hs_diag *d);
/* A run's steps with a compute (compute end after start): worker, batch and compute time. */
typedef struct hs_step_compute {
  int worker;
  int batch;                 /* samples */
  double compute_s;          /* s */
} hs_step_compute;
/* The rows into a malloc'd *out (the caller frees it, also after a failure). Returns the count. */
int64_t hs_store_step_computes(hs_store *s, int64_t run, hs_step_compute **out, hs_diag *d);
/* Means over a run's steps that have a next step on the same worker, in s: part[0] compute
 * (start to compute end), part[1] communication (compute end to communication end), part[2]
 * idle (communication end to the worker's next start). 1 with the parts, 0 when there is no
 * such step (the parts NaN). */
int hs_store_step_parts(hs_store *s, int64_t run, double part[3], hs_diag *d);
/* A run's step rows and distinct model versions among them. */
int hs_store_step_version_counts(hs_store *s, int64_t run, int64_t *steps, int64_t *versions,
                                 hs_diag *d);
/* The mean staleness of a run's steps; NaN when it has none. */
int hs_store_step_mean_staleness(hs_store *s, int64_t run, double *mean, hs_diag *d);
/* A run's evaluations that have a loss, by step, into a malloc'd *out (the caller frees it,
 * also after a failure). Returns the count. */
int64_t hs_store_evals_get(hs_store *s, int64_t run, hs_eval_row **out, hs_diag *d);
/* The time of a run's first evaluation with loss <= max_loss. 1 found, 0 not. */
int hs_store_eval_first_below(hs_store *s, int64_t run, double max_loss, double *time_s,
                              hs_diag *d);

/* A calibrated device with one of its chosen step fits (one row per device and model; a
 * device without a fit has one row with model and form NULL). */
typedef struct hs_device_fit_row {
  int64_t device_id;
  const char *name, *kind, *host;
  const char *model, *form;  /* NULL without a fit */
  double heldout_rel_error;  /* NaN when NULL */
  int64_t max_batch;         /* samples; valid when has_max_batch */
  int has_max_batch;
  int64_t batches;           /* distinct batch sizes timed for the model's step */
  const char *source;        /* NULL: timed here by `hetsim calib` */
} hs_device_fit_row;
/* Calls fn for every row, by device id then model; the strings live until fn returns. A
 * non-zero return of fn stops and is returned. */
int hs_store_device_fits_each(hs_store *s, int (*fn)(void *ctx, const hs_device_fit_row *r),
                              void *ctx, hs_diag *d);

/* A model imported into the model table (`hetsim calib import`; the zoo's rows have no source). */
typedef struct hs_model_row {
  const char *name, *description, *source;
  int64_t params, grad_bytes;
  double flops_per_sample;   /* training FLOPs per sample; NaN when NULL */
} hs_model_row;
/* Calls fn for every imported model, by name; as hs_store_device_fits_each. */
int hs_store_imported_models_each(hs_store *s, int (*fn)(void *ctx, const hs_model_row *r),
                                  void *ctx, hs_diag *d);

/* A row of `validation`; the errors NaN = NULL. */
typedef struct hs_validation_row {
  int64_t run_id, sim_run_id;
  double median_iter_error, p95_iter_error, time_to_loss_error, mean_iter_error,
      total_time_error, iter_wasserstein;
} hs_validation_row;
int hs_store_validation_add(hs_store *s, const hs_validation_row *row, int64_t *id, hs_diag *d);
/* The newest validation of run `run` whose simulated run is complete and carries `key` as its
 * options' validation_key: 1 with its id, the simulated run's id, total time and time to the
 * target (NaN when NULL), 0 when there is none. */
int hs_store_validation_find(hs_store *s, int64_t run, const char *key, int64_t *id,
                             int64_t *sim_run_id, double *sim_total_s, double *sim_ttl_s,
                             hs_diag *d);

#endif
