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

/* Prints "hetsim CMD: MESSAGE" on stderr, then, when help is set, a line pointing to
 * `hetsim CMD --help`; returns 2, the exit status for bad usage or bad input. */
int hs_cli_usage(const char *cmd, int help, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Parses all of s as a decimal integer >= min into *out; returns 0, or -1 (out untouched). */
int hs_cli_parse_int64(const char *s, int64_t min, int64_t *out);

/* "hetsim ARGV..." into buf (truncated to len), for the run's `command` column. */
void hs_cli_join_argv(int argc, char **argv, char *buf, size_t len);

/* Evaluations of a run in progress, kept in memory because the store takes only step rows
 * while their bulk insert is open, and written when the run ends. */
struct hs_store;
struct hs_diag;
typedef struct hs_cli_eval {
  double time_s, loss, accuracy;
  int64_t step;
} hs_cli_eval;
typedef struct hs_cli_evals {
  int64_t n, cap;
  hs_cli_eval *r;
} hs_cli_evals;
/* An eval sink for hs_sim_config / hs_real_config; ctx is an hs_cli_evals. */
int hs_cli_eval_sink(void *ctx, double time_s, int64_t step, double loss, double accuracy,
                     struct hs_diag *d);
/* Adds every buffered evaluation to run `run`; stops at the first failure. */
int hs_cli_evals_store(const hs_cli_evals *e, struct hs_store *s, int64_t run, struct hs_diag *d);
void hs_cli_evals_free(hs_cli_evals *e);

/* Writes every row of a prepared statement as RFC 4180 CSV (a header row, CRLF line ends,
 * NULL as an empty field, reals in their shortest exact form) and returns an exit status.
 * Shared by `query --csv` and `export`, so the two cannot drift apart. */
struct sqlite3_stmt;
int hs_query_write_csv(struct sqlite3_stmt *st, FILE *out);

#endif
