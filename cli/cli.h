/* cli: the `hetsim` executable. One file per subcommand; each exposes one entry point with the
 * hs_cmd_fn signature and returns the process exit status (0 success, 1 runtime failure,
 * 2 bad usage or bad input). Only main() and these entry points decide exit statuses. */
#ifndef HS_CLI_H
#define HS_CLI_H

#include <stdint.h>
#include <stdio.h>

#define HS_DEFAULT_DB "hetsim.db"

typedef int hs_cmd_fn(int argc, char **argv);

typedef struct hs_cmd {
  const char *name;
  const char *summary; /* one line for `hetsim --help` */
  hs_cmd_fn *run;      /* argv[0] is the subcommand name */
} hs_cmd;

hs_cmd_fn hs_cmd_sim;
hs_cmd_fn hs_cmd_query;
hs_cmd_fn hs_cmd_report;
hs_cmd_fn hs_cmd_export;
hs_cmd_fn hs_cmd_policies;
hs_cmd_fn hs_cmd_models;
hs_cmd_fn hs_cmd_calib;
hs_cmd_fn hs_cmd_devices;
hs_cmd_fn hs_cmd_doctor;
hs_cmd_fn hs_cmd_real;
hs_cmd_fn hs_cmd_validate;
hs_cmd_fn hs_cmd_fit;
hs_cmd_fn hs_cmd_sweep;
hs_cmd_fn hs_cmd_advise;
/* `hetsim sweep ARGV`, for advise: *ran gets how many of the grid's points got a complete run
 * in this call (over all ranks in hetsim-mpi; this rank's alone otherwise), not counting those
 * complete before, in --db or in leftover shards. */
int hs_cmd_sweep_counted(int argc, char **argv, long *ran);

/* Prints "hetsim CMD: MESSAGE" on stderr, then, when help is set, a line pointing to
 * `hetsim CMD --help`; returns 2, the exit status for bad usage or bad input. */
int hs_cli_usage(const char *cmd, int help, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints "hetsim CMD: MESSAGE" on stderr, then a line "(see hetsim CMD --help)"; returns 2. The
 * form of the commands that parse their own arguments (query, export, report). */
int hs_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses all of s as a decimal integer >= min into *out; returns 0, or -1 (out untouched),
 * also for a number past the int64 range (never clamped). */
int hs_cli_parse_int64(const char *s, int64_t min, int64_t *out);
/* Parses a target accuracy: a fraction in (0, 1] or a percentage like "85%" into *out (a
 * fraction); returns 0, or -1 (out untouched). */
int hs_cli_parse_accuracy(const char *s, double *out);
/* Parses all of s as a decimal integer from 0 to 2^64 - 1 (digits only: no sign, no blanks);
 * returns 0, or -1 (out untouched). For seeds, which are full unsigned 64-bit values. */
int hs_cli_parse_uint64(const char *s, uint64_t *out);
/* The largest --global-batch: a worker's batch is an int, and one worker may get it all. */
#define HS_CLI_MAX_GLOBAL_BATCH 2147483647LL
/* Parses a --pin value (hetsim real, hetsim calib): "auto" sets *no_pin = 0, "none" 1; returns
 * 0, or -1 (no_pin untouched). */
int hs_cli_parse_pin(const char *s, int *no_pin);
/* Parses all of s as a run ID (a decimal integer > 0 that fits an int64) into *id; returns 0, or
 * -1 (id untouched). */
int hs_cli_parse_run_id(const char *s, int64_t *id);

/* Opens the store at path with hs_store_open's flags; on failure prints "hetsim CMD: MESSAGE" on
 * stderr and returns the exit status (2 for bad input, which includes a missing database when
 * flags has HS_STORE_READONLY, else 1); returns 0 once *s is open. */
struct hs_store;
int hs_cli_store_open(const char *cmd, struct hs_store **s, const char *path, int flags);

/* Prints "hetsim CMD: --model: unknown model "NAME"; valid: ..." on stderr. */
void hs_cli_unknown_model(const char *cmd, const char *model);

/* Prints one warning on stderr naming the device types of spec whose inline compute
 * {t0, per_sample} does not say which model it was measured for: their times are used for
 * `model` as they are (after hs_cluster_resolve_compute counted them). */
struct hs_cluster_spec;
void hs_cli_warn_unnamed_compute(const char *cmd, const struct hs_cluster_spec *spec,
                                 const char *model);

/* The file a `compute: {profile: NAME}` names: NAME itself when absolute; else NAME relative to
 * the cluster file's folder when that exists; else the bundled profile
 * $HETSIM_PROFILES/NAME[.json] (default HETSIM_PROFILES_DIR, the source tree's traces/profiles).
 * Returns 0 with the path in out, or -1 when none exists (out then holds the first candidate). */
int hs_cli_profile_path(const char *cluster_path, const char *name, char *out, size_t len);

/* --- the run's model (cli_model.c): sim and advise resolve it the same way ----------------- */

/* Imports the profiles that the cluster file names for `model` (`compute: {profile: FILE}`)
 * into a store in memory, *ps (opened at the first one), and turns those forms into `calib:`
 * forms of the imported device, marking their types in from_profile (spec->n_types bytes).
 * Returns 0, or the exit status after printing "hetsim CMD: ..." on stderr. */
int hs_cli_import_profiles(const char *cmd, const char *model, struct hs_cluster_spec *spec,
                           struct hs_store **ps, unsigned char *from_profile);

/* --model: a model of the zoo (*mi set), or one imported (`hetsim calib import`) into prof_store
 * (the cluster's profiles; may be NULL) or into the database at calib_path, whose row gives the
 * parameters, gradient bytes and FLOPs (*mi NULL; *from_calib, when given, 1 when it came from
 * calib_path). An imported model has no layer graph and no data set: a convergence model
 * (`conv`, NULL for none) other than analytic is refused for it. Returns 0, or the exit status
 * after printing why. */
struct hs_model_info;
struct hs_model_stats;
int hs_cli_resolve_model(const char *cmd, const char *model, const char *calib_path, struct hs_store *prof_store,
                         const char *conv, const struct hs_model_info **mi, struct hs_model_stats *ms,
                         int *from_calib);

/* 1 when a --convergence spec names the analytic model ("analytic", or "analytic:k=v,..."). */
int hs_cli_conv_analytic(const char *spec);

/* The newest convergence fit stored for `model` (`hetsim fit-convergence --curves`), from the
 * calib database, else the db one (either may be NULL; a database that does not exist yet, or
 * predates the table, has none), its beta0 scaled to dataset_size (hs_conv_fit_newest). Returns
 * 1 when found, 0 when not, or minus the exit status after printing "hetsim CMD: ..." (-2: a
 * file there that is not a database, -1: a database error). */
struct hs_conv_fit;
int hs_cli_find_conv_fit(const char *cmd, const char *model, const char *calib, const char *db,
                         int64_t dataset_size, struct hs_conv_fit *fit);

/* Opens a store in memory holding every bundled profile (traces/profiles/CARD/MODEL.json, or the
 * folder $HETSIM_PROFILES names, which *dir is set to) as `hetsim calib import` stores them, for
 * `devices --bundled` and `models --bundled`. Returns 0, or the exit status after printing
 * "hetsim CMD: ..." (1: a profile could not be read or imported). */
int hs_cli_open_bundled(const char *cmd, struct hs_store **s, const char **dir);

/* Monotonic wall-clock time in seconds, for the wall_s of a run. */
double hs_cli_wall_now(void);

/* Installs handler for signal sig (no extra signals blocked while it runs) and saves the one it
 * replaces in *old, for sigaction(sig, old, NULL) once the run is over. */
struct sigaction;
void hs_cli_catch_signal(int sig, void (*handler)(int), struct sigaction *old);

/* The library versions of this build as a JSON object, for the run's versions column. */
void hs_cli_versions_json(char *buf, size_t len);

/* The summary keys that `sim --json` and `real --json` share, from "workers" to "wall_s", then,
 * when conv is set, "final_loss", "final_accuracy" and "time_to_target_s"; the caller writes the
 * object's other keys before and after. */
struct hs_json;
struct hs_summary;
void hs_cli_json_summary(struct hs_json *j, const struct hs_summary *m, int conv);
/* A real run without a cluster file, by its backend: the cluster name it is stored under and
 * its workers' device type. cpu: "cpu-threads" and "cpu" (its multi-process runs too: the name
 * predates them); local: "cuda-threads" and "cuda"; nccl: "cuda-ranks" and "cuda". */
void hs_cli_real_cluster_name(const char *backend, const char **cluster, const char **type);
/* The convergence lines of a human summary on stdout: final loss, final accuracy (when it is a
 * number) and, when target is set, the time to the target or "not reached". */
void hs_cli_print_convergence(const struct hs_summary *m, int target);

/* "hetsim ARGV..." into buf (truncated to len), for the run's `command` column. */
void hs_cli_join_argv(int argc, char **argv, char *buf, size_t len);

/* Evaluations of a run in progress, kept in memory because the store takes only step rows
 * while their bulk insert is open, and written when the run ends. */
struct hs_diag;
typedef struct hs_eval_row hs_cli_eval;
typedef struct hs_cli_evals {
  int64_t n, cap;
  hs_cli_eval *r;
} hs_cli_evals;
/* An eval sink for hs_sim_config / hs_real_config; ctx is an hs_cli_evals. */
int hs_cli_eval_sink(void *ctx, double time_s, int64_t step, double loss, double accuracy,
                     struct hs_diag *d);
void hs_cli_evals_free(hs_cli_evals *e);

/* One stored run, the same for `sim`, `real` and `validate`: its row (begun before the run
 * starts, or at its first step), its step rows through the store's bulk insert, its
 * evaluations kept in memory (hs_cli_eval_sink on &evals), then at the end, in this order: the
 * step batch closed, the evaluations, the worker rows, the status and summary. */
struct hs_run_info;
struct hs_step_row;
struct hs_worker_row;
typedef struct hs_cli_run {
  struct hs_store *store;
  const struct hs_run_info *info;
  int store_steps;           /* 1: step rows are stored (else only the run's row, evals, workers) */
  int64_t max_rows;          /* the most step rows to store, 0 = no limit (HS_ELIMIT past it) */
  int64_t id;                /* the run's id once begun, else 0 */
  int64_t rows;              /* step rows stored */
  hs_cli_evals evals;
} hs_cli_run;
/* Writes the run's row (status running) and opens its step batch; nothing when already begun. */
int hs_cli_run_begin(hs_cli_run *r, struct hs_diag *d);
/* A step sink for hs_sim_config / hs_real_config; ctx is an hs_cli_run, begun here if not yet. */
int hs_cli_run_step_sink(void *ctx, const struct hs_step_row *row, struct hs_diag *d);
/* Ends the run (begun here if not yet): closes the step batch, stores the evaluations, the n
 * worker rows (none when rows is NULL) and the status, summary (may be NULL) and error (may be
 * NULL); stops at the first failure. */
int hs_cli_run_finish(hs_cli_run *r, const char *status, const struct hs_summary *sum,
                      const char *error, const struct hs_worker_row *rows, int n,
                      struct hs_diag *d);
void hs_cli_run_free(hs_cli_run *r);

/* Writes every row of a store's cursor (core_store_query.h) as RFC 4180 CSV (a header row,
 * CRLF line ends, NULL as an empty field, reals in their shortest exact form) and returns an
 * exit status. Shared by `query --csv` and `export`, so the two cannot drift apart. */
struct hs_rows;
int hs_query_write_csv(struct hs_rows *st, FILE *out);

#endif
