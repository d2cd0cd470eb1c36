/* hetsim export: one run's rows as CSV files for other tools (spreadsheets, pandas, R).
 *
 * One file per table — run, summary, worker, step, eval, validation — each with a header row
 * even when the run has no rows there, written by the same CSV printer as `query --csv`
 * (RFC 4180). The database is opened read-only. Each file is written to a temporary name and
 * renamed when complete (cli/report_file.h), so no file is ever seen half written. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/report_file.h"
#include "core/core_store.h"
#include "core/core_store_query.h"

static const char usage_text[] =
    "usage: hetsim export RUN --csv DIR [--db FILE]\n"
    "\n"
    "Writes run RUN of the results database as CSV files in DIR (created if missing; its\n"
    "parent must exist), one per table, each with a header row:\n"
    "  run.csv         the run's row\n"
    "  summary.csv     its totals (no data row while it has none)\n"
    "  worker.csv      one row per worker\n"
    "  step.csv        one row per worker step (ordered by step, then worker)\n"
    "  eval.csv        evaluations (loss, accuracy against time)\n"
    "  validation.csv  validations where RUN is the real or the simulated run\n"
    "Columns are those of docs/schema.md. CSV is RFC 4180: CRLF line ends, fields with commas,\n"
    "quotes or line breaks in double quotes, NULL as an empty field. Files already in DIR with\n"
    "these names are replaced; each appears only once complete.\n"
    "\n"
    "  --csv DIR        output folder\n"
    "  --db FILE        results database (default " HS_DEFAULT_DB "), opened read-only\n"
    "  -h, --help       this text\n"
    "\n"
    "exit status: 0 done; 1 runtime failure (database or write error); 2 bad usage (no run ID,\n"
    "one that is not a number or not in the database, no --csv, a missing database).\n";

#define usage_error(...) hs_cli_usage_error("export", __VA_ARGS__)

/* The files and the store's rows they hold (core_store_query.h says their order). */
static const struct table {
  const char *file;
  hs_run_table table;
} tables[] = {
    {"run.csv", HS_TABLE_RUN},       {"summary.csv", HS_TABLE_SUMMARY},
    {"worker.csv", HS_TABLE_WORKER}, {"step.csv", HS_TABLE_STEP},
    {"eval.csv", HS_TABLE_EVAL},     {"validation.csv", HS_TABLE_VALIDATION},
    {NULL, HS_TABLE_RUN},
};

static int export_table(hs_store *s, const struct table *t, int64_t id, const char *dir) {
  size_t n = strlen(dir) + strlen(t->file) + 2;
  char *path = malloc(n);
  if (!path) {
    fputs("hetsim export: out of memory\n", stderr);
    return 1;
  }
  snprintf(path, n, "%s/%s", dir, t->file);
  hs_diag d = {0};
  hs_rows *st = NULL;
  if (hs_store_run_table_open(s, t->table, id, &st, &d)) {
    fprintf(stderr, "hetsim export: %s: %s\n", t->file, d.msg);
    free(path);
    return 1;
  }
  hs_outfile of;
  int rc = hs_outfile_open(&of, path, &d);
  if (rc) {
    fprintf(stderr, "hetsim export: %s\n", d.msg);
    rc = 1;
  } else if ((rc = hs_query_write_csv(st, of.f)) != 0) {
    hs_outfile_abort(&of);
  } else if (hs_outfile_commit(&of, &d)) {
    fprintf(stderr, "hetsim export: %s\n", d.msg);
    rc = 1;
  } else {
    printf("%s\n", path);
  }
  hs_rows_close(st);
  free(path);
  return rc;
}

int hs_cmd_export(int argc, char **argv) {
  const char *db_path = HS_DEFAULT_DB, *dir = NULL, *run = NULL;
  int only_pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!only_pos && strcmp(a, "--") == 0) {
      only_pos = 1;
    } else if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
      fputs(usage_text, stdout);
      return 0;
    } else if (!only_pos && (strcmp(a, "--db") == 0 || strcmp(a, "--csv") == 0)) {
      if (i + 1 >= argc || !argv[i + 1][0]) return usage_error("%s needs a value", a);
      if (a[2] == 'd') db_path = argv[++i];
      else dir = argv[++i];
    } else if (!only_pos && a[0] == '-' && a[1] != '\0') {
      return usage_error("unknown option %s", a);
    } else if (run) {
      return usage_error("one run per export (got \"%s\" and \"%s\")", run, a);
    } else {
      run = a;
    }
  }
  if (!run) return usage_error("%s", "missing run ID (hetsim query runs lists them)");
  if (!dir) return usage_error("%s", "--csv DIR is required");
  int64_t id;
  if (hs_cli_parse_run_id(run, &id)) return usage_error("not a run ID: \"%s\"", run);

  hs_store *s = NULL;
  int rc = hs_cli_store_open("export", &s, db_path, HS_STORE_READONLY);
  if (rc) return rc;
  hs_diag d = {0};
  int found = hs_store_run_exists(s, id, &d);
  if (found <= 0) {
    if (found < 0) fprintf(stderr, "hetsim export: %s: %s\n", db_path, d.msg);
    else fprintf(stderr, "hetsim export: no run %lld in %s (hetsim query runs lists them)\n", (long long)id,
                 db_path);
    hs_store_close(s);
    return found < 0 ? 1 : 2;
  }
  /* A table's file must never replace the database it is read from. */
  for (const struct table *t = tables; t->file; t++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, t->file);
    if (hs_outfile_is_db(path, db_path)) {
      hs_store_close(s);
      return usage_error("--csv %s: %s would replace the database (--db %s); give another folder", dir,
                         t->file, db_path);
    }
  }
  /* The run exists, so the folder may now be made; nothing is created for bad input. */
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    int e = errno;
    fprintf(stderr, "hetsim export: %s: cannot create the folder: %s\n", dir, strerror(e));
    hs_store_close(s);
    return e == ENOENT || e == ENOTDIR ? 2 : 1;
  }
  rc = 0;
  for (const struct table *t = tables; t->file && !rc; t++) rc = export_table(s, t, id, dir);
  hs_store_close(s);
  return rc;
}
