/* `hetsim query`: read the results database. Every verb is one or more SQL statements whose
 * rows go through one printer with three formats (aligned text, RFC 4180 CSV, JSON), so that
 * the formats cannot drift apart. The database is always opened read-only. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/core_json.h"
#include "core/core_store.h"
#include "core/core_units.h"

enum fmt { FMT_TEXT, FMT_CSV, FMT_JSON };

/* Longest text cell in a table, in bytes; longer ones are cut with "..." (use --csv or --json
 * for whole values). */
enum { TEXT_CELL_MAX = 60 };

/* The bounds of `sql` (a recursive CTE or randomblob(1e9) would otherwise run until killed):
 * wall time, rows, and bytes of the values returned (one value may not exceed them either). */
#define SQL_TIME_LIMIT 60.0                /* s */
#define SQL_MAX_ROWS 1000000LL
#define SQL_MAX_BYTES (256LL << 20)
/* SQLite's own ceiling on one value (SQLITE_MAX_LENGTH as built). */
#define SQL_LENGTH_CEILING 1000000000LL

typedef struct qlimits {
  double time_limit;                 /* s; 0 = none */
  long long max_rows, max_bytes;     /* 0 = none */
  double deadline;                   /* CLOCK_MONOTONIC s, set when the statement starts */
  int timed_out;                     /* the progress handler stopped the statement */
  long long rows, bytes;             /* counted so far */
} qlimits;

static const char usage_text[] =
    "usage: hetsim query [--db FILE] VERB [ARGS] [--csv | --json]\n"
    "\n"
    "Reads the results database (opened read-only; nothing is ever written).\n"
    "\n"
    "verbs:\n"
    "  runs             one row per run: id, kind, policy, params, cluster, model, workers,\n"
    "                   iterations, sim_time_s, status, started_at\n"
    "  run ID           the run's row, its summary and its per-worker table\n"
    "  groups           runs that differ only in their seed, one row per group and metric:\n"
    "                   group (its first run id), kind, policy, params, cluster, model,\n"
    "                   global_batch, runs, seeds, run_ids (in seed order), metric, n, mean,\n"
    "                   sd, min, max\n"
    "                   (complete runs only, unless --status says which)\n"
    "  compare A B      the summaries of runs A and B side by side: one row per numeric\n"
    "                   metric with columns metric, a, b, ratio (= b / a; null when a is 0\n"
    "                   or either value is null)\n"
    "  compare A B C... more runs (at most 64): a column per run (run3, run4, ...) and one\n"
    "                   per later run's ratio to the first (run4/run3, ...)\n"
    "  evals ID         the run's evaluations: time_s, step, loss, accuracy (none without a\n"
    "                   convergence model)\n"
    "  steps ID         the run's step rows, ordered by step then worker\n"
    "  sql \"SELECT ...\" any one read-only SQL statement; statements that write are refused\n"
    "\n"
    "options (before or after the verb):\n"
    "  --db FILE        database file (default " HS_DEFAULT_DB ")\n"
    "  --csv            RFC 4180 CSV with a header row; NULL is an empty field. `run ID`\n"
    "                   writes three CSV tables (run, summary, workers) separated by one\n"
    "                   empty line\n"
    "  --json           a JSON array of objects (column -> value; numbers as numbers, NULL as\n"
    "                   null). `run ID` writes one object {\"run\": {...}, \"summary\": {...}\n"
    "                   or null, \"workers\": [...]}\n"
    "  --policy NAME    runs, groups: only runs of this policy\n"
    "  --kind sim|real  runs, groups: only simulated or only real runs\n"
    "  --status S       runs, groups: only runs with status S (running, complete, failed,\n"
    "                   interrupted)\n"
    "  --limit N        evals, steps: at most N rows\n"
    "  --time-limit T   sql: stop a statement that runs longer than T (default 60s; 0 = none)\n"
    "  --max-rows N     sql: fail once the result passes N rows (default 1000000; 0 = none)\n"
    "  --max-bytes N    sql: fail once the result's values pass N bytes, or one value does\n"
    "                   (default 256MiB; 0 = none, up to SQLite's own 1e9 bytes per value)\n"
    "  -h, --help       this text\n"
    "Without --csv or --json the output is an aligned table for people: NULL shows as NULL,\n"
    "reals with 6 significant digits, long texts cut at 60 characters. `runs` then ends with a\n"
    "note when some runs are not complete: status running means still going or stopped without\n"
    "finishing (a crash, kill -9), interrupted stopped by SIGINT, failed ended with an error.\n"
    "\n"
    "The tables and their columns are described in docs/schema.md.\n"
    "\n"
    "exit status: 0 success; 1 runtime failure (database error); 2 bad usage (unknown verb,\n"
    "missing or extra arguments, an ID that is not a number or not a run, a statement that\n"
    "writes or does not parse, a database file that does not exist).\n";

/* Reports bad usage on stderr and returns exit status 2. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("hetsim query: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs("\n(see hetsim query --help)\n", stderr);
  return 2;
}

/* ---- values --------------------------------------------------------------------------- */

/* Shortest decimal form that reads back as the same double, so CSV stays exact and short. */
static void format_real(char *buf, size_t n, double v) {
  if (!isfinite(v)) {
    snprintf(buf, n, "%s", isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity"));
    return;
  }
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, n, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

static char *hex_of_blob(const unsigned char *p, int len) {
  char *s = malloc((size_t)len * 2 + 1);
  if (!s) return NULL;
  for (int i = 0; i < len; i++) snprintf(s + 2 * i, 3, "%02x", p[i]);
  s[2 * len] = '\0';
  return s;
}

/* The text of column i for people: control characters escaped so one row stays one line. */
static char *text_cell(sqlite3_stmt *st, int i, int cut) {
  char buf[64];
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL: return strdup("NULL");
  case SQLITE_INTEGER:
    snprintf(buf, sizeof buf, "%lld", (long long)sqlite3_column_int64(st, i));
    return strdup(buf);
  case SQLITE_FLOAT: snprintf(buf, sizeof buf, "%.6g", sqlite3_column_double(st, i)); return strdup(buf);
  case SQLITE_BLOB:
    return hex_of_blob(sqlite3_column_blob(st, i), sqlite3_column_bytes(st, i));
  default: break;
  }
  const unsigned char *t = sqlite3_column_text(st, i);
  size_t len = (size_t)sqlite3_column_bytes(st, i); /* NUL bytes included, shown as \x00 */
  char *out = malloc(len * 4 + 4);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t k = 0; k < len; k++) {
    if (cut && o >= TEXT_CELL_MAX) {
      memcpy(out + o, "...", 3);
      o += 3;
      break;
    }
    unsigned char c = t[k];
    if (c == '\n') out[o++] = '\\', out[o++] = 'n';
    else if (c == '\t') out[o++] = '\\', out[o++] = 't';
    else if (c == '\r') out[o++] = '\\', out[o++] = 'r';
    else if (c < 0x20) o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
    else out[o++] = (char)c;
  }
  out[o] = '\0';
  return out;
}

static int is_number(sqlite3_stmt *st, int i) {
  int t = sqlite3_column_type(st, i);
  return t == SQLITE_INTEGER || t == SQLITE_FLOAT;
}

static void csv_field(FILE *out, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void csv_value(FILE *out, sqlite3_stmt *st, int i) {
  char buf[64];
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL: break;
  case SQLITE_INTEGER: fprintf(out, "%lld", (long long)sqlite3_column_int64(st, i)); break;
  case SQLITE_FLOAT:
    format_real(buf, sizeof buf, sqlite3_column_double(st, i));
    fputs(buf, out);
    break;
  case SQLITE_BLOB: {
    char *h = hex_of_blob(sqlite3_column_blob(st, i), sqlite3_column_bytes(st, i));
    if (h) fputs(h, out);
    free(h);
    break;
  }
  default: csv_field(out, (const char *)sqlite3_column_text(st, i)); break;
  }
}

static void json_value(hs_json *j, sqlite3_stmt *st, int i) {
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL: hs_json_null(j); break;
  case SQLITE_INTEGER: hs_json_int(j, sqlite3_column_int64(st, i)); break;
  case SQLITE_FLOAT: hs_json_double(j, sqlite3_column_double(st, i)); break;
  case SQLITE_BLOB: {
    char *h = hex_of_blob(sqlite3_column_blob(st, i), sqlite3_column_bytes(st, i));
    hs_json_string(j, h ? h : "");
    free(h);
    break;
  }
  default: {
    /* The length, not strlen: a text may hold NUL bytes, which JSON writes as \u0000. */
    const char *t = (const char *)sqlite3_column_text(st, i);
    hs_json_string_len(j, t ? t : "", t ? (size_t)sqlite3_column_bytes(st, i) : 0);
    break;
  }
  }
}

static void json_row(hs_json *j, sqlite3_stmt *st) {
  hs_json_object_begin(j);
  for (int i = 0; i < sqlite3_column_count(st); i++) {
    hs_json_key(j, sqlite3_column_name(st, i));
    json_value(j, st, i);
  }
  hs_json_object_end(j);
}

/* ---- result sets ---------------------------------------------------------------------- */

/* Reports a failed sqlite3_step and returns exit status 1. */
static int step_failed(sqlite3 *db) {
  fprintf(stderr, "hetsim query: %s\n", sqlite3_errmsg(db));
  return 1;
}

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* SQLite's progress handler: a non-zero return stops the statement (SQLITE_INTERRUPT). */
static int on_progress(void *ctx) {
  qlimits *l = ctx;
  if (l->time_limit > 0 && mono_now() > l->deadline) {
    l->timed_out = 1;
    return 1;
  }
  return 0;
}

/* A failed step of a limited statement: the time limit's message, or SQLite's. */
static int limited_step_failed(sqlite3 *db, const qlimits *l) {
  if (l && l->timed_out) {
    fprintf(stderr, "hetsim query: sql: stopped after the time limit of %g s (--time-limit: give a "
            "longer one, or 0 for none)\n", l->time_limit);
    return 1;
  }
  if (l && sqlite3_errcode(db) == SQLITE_TOOBIG) {
    fprintf(stderr, "hetsim query: sql: %s: a value passed the limit of %lld bytes (--max-bytes: "
            "give a higher one)\n", sqlite3_errmsg(db), l->max_bytes > 0 ? l->max_bytes : SQL_LENGTH_CEILING);
    return 1;
  }
  return step_failed(db);
}

/* Counts one more row of st against the limits; 1 (with the message printed) when it passes
 * one of them. */
static int over_limit(qlimits *l, sqlite3_stmt *st) {
  if (!l) return 0;
  l->rows++;
  for (int i = 0; i < sqlite3_column_count(st); i++) {
    int t = sqlite3_column_type(st, i);
    l->bytes += t == SQLITE_TEXT || t == SQLITE_BLOB ? sqlite3_column_bytes(st, i) : t == SQLITE_NULL ? 0 : 8;
  }
  if (l->max_rows > 0 && l->rows > l->max_rows) {
    fprintf(stderr, "hetsim query: sql: the result passed the limit of %lld rows (--max-rows: give a "
            "higher one, or 0 for none; hetsim export writes whole tables)\n", l->max_rows);
    return 1;
  }
  if (l->max_bytes > 0 && l->bytes > l->max_bytes) {
    fprintf(stderr, "hetsim query: sql: the result passed the limit of %lld bytes (--max-bytes: give "
            "a higher one, or 0 for none)\n", l->max_bytes);
    return 1;
  }
  return 0;
}

/* An aligned table: every cell is buffered first because widths depend on all rows. */
static int print_text_table(sqlite3_stmt *st, FILE *out, qlimits *lim) {
  int nc = sqlite3_column_count(st);
  if (nc == 0) {
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {}
    return step == SQLITE_DONE ? 0 : limited_step_failed(sqlite3_db_handle(st), lim);
  }
  size_t cap = 64, nrows = 0;
  char **cells = malloc(cap * (size_t)nc * sizeof *cells);
  char *numeric = calloc((size_t)nc, 1); /* 1: right-align (every non-null value a number) */
  size_t *width = calloc((size_t)nc, sizeof *width);
  int rc = 0, step;
  if (!cells || !numeric || !width) {
    fputs("hetsim query: out of memory\n", stderr);
    rc = 1;
    goto done;
  }
  for (int i = 0; i < nc; i++) {
    width[i] = strlen(sqlite3_column_name(st, i));
    numeric[i] = 2; /* unknown until a non-null value is seen */
  }
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if (over_limit(lim, st)) {
      rc = 1;
      goto done; /* nothing printed: a cut table would pass for the whole one */
    }
    if (nrows == cap) {
      char **bigger = realloc(cells, cap * 2 * (size_t)nc * sizeof *cells);
      if (!bigger) {
        fputs("hetsim query: out of memory\n", stderr);
        rc = 1;
        goto done;
      }
      cells = bigger;
      cap *= 2;
    }
    for (int i = 0; i < nc; i++) {
      char *c = text_cell(st, i, 1);
      cells[nrows * (size_t)nc + (size_t)i] = c;
      if (c && strlen(c) > width[i]) width[i] = strlen(c);
      if (sqlite3_column_type(st, i) != SQLITE_NULL)
        numeric[i] = (char)(numeric[i] != 0 && is_number(st, i));
    }
    nrows++;
  }
  if (step != SQLITE_DONE) {
    rc = limited_step_failed(sqlite3_db_handle(st), lim);
    if (lim) goto done;
  }
  for (int i = 0; i < nc; i++) {
    const char *name = sqlite3_column_name(st, i);
    int w = (int)width[i];
    fprintf(out, numeric[i] == 1 ? "%*s" : "%-*s", i + 1 < nc || numeric[i] == 1 ? w : 0, name);
    fputs(i + 1 < nc ? "  " : "\n", out);
  }
  for (int i = 0; i < nc; i++) {
    for (size_t k = 0; k < width[i]; k++) fputc('-', out);
    fputs(i + 1 < nc ? "  " : "\n", out);
  }
  for (size_t r = 0; r < nrows; r++) {
    for (int i = 0; i < nc; i++) {
      const char *c = cells[r * (size_t)nc + (size_t)i];
      int w = (int)width[i];
      fprintf(out, numeric[i] == 1 ? "%*s" : "%-*s", i + 1 < nc || numeric[i] == 1 ? w : 0,
              c ? c : "");
      fputs(i + 1 < nc ? "  " : "\n", out);
    }
  }
done:
  if (cells)
    for (size_t k = 0; k < nrows * (size_t)nc; k++) free(cells[k]);
  free(cells);
  free(numeric);
  free(width);
  return rc;
}

/* Writes every row of st in the chosen format; returns an exit status. CSV and JSON stream,
 * so a million-row result needs no memory. */
static int print_rows_limited(sqlite3_stmt *st, enum fmt fmt, FILE *out, qlimits *lim) {
  int nc = sqlite3_column_count(st), step;
  if (fmt == FMT_TEXT) return print_text_table(st, out, lim);
  if (fmt == FMT_CSV) {
    for (int i = 0; i < nc; i++) {
      if (i) fputc(',', out);
      csv_field(out, sqlite3_column_name(st, i));
    }
    if (nc) fputs("\r\n", out);
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
      if (over_limit(lim, st)) return 1;
      for (int i = 0; i < nc; i++) {
        if (i) fputc(',', out);
        csv_value(out, st, i);
      }
      if (nc) fputs("\r\n", out);
    }
  } else {
    hs_json j;
    hs_json_init(&j, out, 0);
    hs_json_array_begin(&j);
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
      /* The array stays open: a cut result must not parse as the whole one. */
      if (over_limit(lim, st)) return 1;
      json_row(&j, st);
    }
    if (step != SQLITE_DONE && lim) return limited_step_failed(sqlite3_db_handle(st), lim);
    hs_json_array_end(&j);
    fputc('\n', out);
  }
  return step == SQLITE_DONE ? 0 : limited_step_failed(sqlite3_db_handle(st), lim);
}

static int print_rows(sqlite3_stmt *st, enum fmt fmt, FILE *out) { return print_rows_limited(st, fmt, out, NULL); }

int hs_query_write_csv(sqlite3_stmt *st, FILE *out) { return print_rows(st, FMT_CSV, out); }

/* One row shown as "name  value" lines, for the wide run and summary rows. */
static int print_vertical(sqlite3_stmt *st, const char *title, FILE *out) {
  int step = sqlite3_step(st);
  if (step != SQLITE_ROW) {
    if (step != SQLITE_DONE) return step_failed(sqlite3_db_handle(st));
    fprintf(out, "%s: none\n", title);
    return 0;
  }
  int nc = sqlite3_column_count(st);
  size_t w = 0;
  for (int i = 0; i < nc; i++)
    if (strlen(sqlite3_column_name(st, i)) > w) w = strlen(sqlite3_column_name(st, i));
  fprintf(out, "%s\n", title);
  for (int i = 0; i < nc; i++) {
    fprintf(out, "  %-*s  ", (int)w, sqlite3_column_name(st, i));
    if (sqlite3_column_type(st, i) == SQLITE_TEXT) {
      /* Multi-line texts (the cluster YAML) keep their lines, indented under the value. */
      const char *t = (const char *)sqlite3_column_text(st, i);
      char last = '\0';
      for (; *t; t++) {
        fputc(*t, out);
        if (*t == '\n' && t[1]) fprintf(out, "  %-*s  ", (int)w, "");
        last = *t;
      }
      if (last != '\n') fputc('\n', out);
    } else {
      char *c = text_cell(st, i, 0);
      fprintf(out, "%s\n", c ? c : "");
      free(c);
    }
  }
  return 0;
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK) {
    fprintf(stderr, "hetsim query: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  return 0;
}

/* ---- verbs ---------------------------------------------------------------------------- */

static int parse_id(const char *s, int64_t *id) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v <= 0) return usage_error("not a run ID: \"%s\"", s);
  *id = v;
  return 0;
}

static int check_run(sqlite3 *db, int64_t id, const char *path) {
  sqlite3_stmt *st = NULL;
  if (prepare(db, "SELECT 1 FROM run WHERE id = ?1", &st)) return 1;
  sqlite3_bind_int64(st, 1, id);
  int step = sqlite3_step(st);
  sqlite3_finalize(st);
  if (step == SQLITE_ROW) return 0;
  if (step != SQLITE_DONE) return step_failed(db);
  fprintf(stderr, "hetsim query: no run %lld in %s (hetsim query runs lists them)\n",
          (long long)id, path);
  return 2;
}

/* Filters of `runs`; NULL = any. */
typedef struct run_filter {
  const char *policy, *kind, *status;
} run_filter;

static void bind_filter(sqlite3_stmt *st, const run_filter *f) {
  const char *v[3] = {f->policy, f->kind, f->status};
  for (int k = 0; k < 3; k++) {
    if (v[k]) sqlite3_bind_text(st, k + 1, v[k], -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, k + 1);
  }
}

#define RUN_FILTER_SQL \
  " WHERE (?1 IS NULL OR r.policy = ?1) AND (?2 IS NULL OR r.kind = ?2)" \
  " AND (?3 IS NULL OR r.status = ?3)"

static int verb_runs(sqlite3 *db, enum fmt fmt, const run_filter *filter) {
  sqlite3_stmt *st = NULL;
  if (prepare(db,
              "SELECT r.id, r.kind, r.policy, r.params, r.cluster_name AS cluster, r.model,"
              " COALESCE(s.workers, NULLIF((SELECT count(*) FROM worker w WHERE w.run_id = r.id),"
              " 0)) AS workers, s.iterations, s.sim_time_s,"
              /* A 'running' run whose process is gone was cut short (core/core_store.c). */
              " CASE WHEN r.status = 'running' AND hs_run_alive(r.options) = 0"
              " THEN 'incomplete' ELSE r.status END AS status, r.started_at"
              " FROM run r LEFT JOIN summary s ON s.run_id = r.id" RUN_FILTER_SQL " ORDER BY r.id",
              &st))
    return 1;
  bind_filter(st, filter);
  int rc = print_rows(st, fmt, stdout);
  sqlite3_finalize(st);
  if (rc || fmt != FMT_TEXT) return rc;
  /* People reading the table learn what a status other than complete means; scripts read the
   * status column of --csv or --json instead. */
  if (prepare(db, "SELECT count(*) FROM run r" RUN_FILTER_SQL " AND r.status <> 'complete'", &st)) return 1;
  bind_filter(st, filter);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0)
    printf("\n%lld run%s not complete. running: still going (or written on another host);\n"
           "incomplete: its process is gone without finishing (a crash, kill -9);\n"
           "interrupted: stopped by SIGINT; failed: ended with an error (see\n"
           "hetsim query run ID). Their rows cover only what was stored before they stopped.\n",
           (long long)sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 0) == 1 ? " is" : "s are");
  sqlite3_finalize(st);
  return 0;
}

/* `evals ID` and `steps ID`: a run's rows of one table, oldest first, at most limit (< 0: all). */
static int verb_rows(sqlite3 *db, const char *verb, int64_t id, long long limit, enum fmt fmt) {
  const char *sql = strcmp(verb, "evals") == 0
                        ? "SELECT time_s, step, loss, accuracy FROM eval WHERE run_id = ?1"
                          " ORDER BY time_s, id LIMIT ?2"
                        : "SELECT step, worker, batch, start_s, compute_end_s, comm_end_s, wait_s,"
                          " model_version, staleness, loss FROM step WHERE run_id = ?1"
                          " ORDER BY step, worker LIMIT ?2";
  sqlite3_stmt *st = NULL;
  if (prepare(db, sql, &st)) return 1;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int64(st, 2, limit);
  int rc = print_rows(st, fmt, stdout);
  sqlite3_finalize(st);
  return rc;
}

static int verb_run(sqlite3 *db, int64_t id, enum fmt fmt) {
  static const char *const sql[3] = {
      "SELECT * FROM run WHERE id = ?1",
      "SELECT * FROM summary WHERE run_id = ?1",
      "SELECT * FROM worker WHERE run_id = ?1 ORDER BY idx",
  };
  static const char *const title[3] = {"run", "summary", "workers"};
  sqlite3_stmt *st[3] = {NULL, NULL, NULL};
  int rc = 0;
  for (int k = 0; k < 3 && !rc; k++) {
    rc = prepare(db, sql[k], &st[k]);
    if (!rc) sqlite3_bind_int64(st[k], 1, id);
  }
  if (rc) goto done;
  if (fmt == FMT_JSON) {
    hs_json j;
    hs_json_init(&j, stdout, 0);
    hs_json_object_begin(&j);
    for (int k = 0; k < 2; k++) {
      hs_json_key(&j, title[k]);
      int step = sqlite3_step(st[k]);
      if (step == SQLITE_ROW) json_row(&j, st[k]);
      else if (step == SQLITE_DONE) hs_json_null(&j);
      else rc = step_failed(db);
    }
    hs_json_key(&j, title[2]);
    hs_json_array_begin(&j);
    int step;
    while ((step = sqlite3_step(st[2])) == SQLITE_ROW) json_row(&j, st[2]);
    if (step != SQLITE_DONE) rc = step_failed(db);
    hs_json_array_end(&j);
    hs_json_object_end(&j);
    fputc('\n', stdout);
  } else if (fmt == FMT_CSV) {
    for (int k = 0; k < 3 && !rc; k++) {
      if (k) fputs("\r\n", stdout);
      rc = print_rows(st[k], fmt, stdout);
    }
  } else {
    char head[64];
    snprintf(head, sizeof head, "run %lld", (long long)id);
    rc = print_vertical(st[0], head, stdout);
    if (!rc) {
      fputc('\n', stdout);
      rc = print_vertical(st[1], "summary", stdout);
    }
    if (!rc) {
      fputs("\nworkers\n", stdout);
      rc = print_rows(st[2], fmt, stdout);
    }
  }
done:
  for (int k = 0; k < 3; k++) sqlite3_finalize(st[k]);
  return rc;
}

static int verb_compare(sqlite3 *db, int64_t a, int64_t b, enum fmt fmt) {
  static const char *const metrics[] = {
      "workers", "iterations", "events", "samples", "sim_time_s", "mean_iteration_s",
      "samples_per_s", "wait_fraction", "wall_s", "final_loss", "final_accuracy",
      "time_to_target_s", NULL};
  /* One UNION ALL arm per metric; the LEFT JOINs keep a row when a run has no summary yet. */
  char sql[8192];
  size_t o = 0;
  o += (size_t)snprintf(sql + o, sizeof sql - o,
                        "WITH sa AS (SELECT * FROM summary WHERE run_id = ?1),"
                        " sb AS (SELECT * FROM summary WHERE run_id = ?2) ");
  for (int k = 0; metrics[k]; k++)
    o += (size_t)snprintf(sql + o, sizeof sql - o,
                          "%sSELECT '%s' AS metric, sa.%s AS a, sb.%s AS b,"
                          " CAST(sb.%s AS REAL) / NULLIF(sa.%s, 0) AS ratio"
                          " FROM (SELECT 1) LEFT JOIN sa LEFT JOIN sb",
                          k ? " UNION ALL " : "", metrics[k], metrics[k], metrics[k],
                          metrics[k], metrics[k]);
  sqlite3_stmt *st = NULL;
  if (prepare(db, sql, &st)) return 1;
  sqlite3_bind_int64(st, 1, a);
  sqlite3_bind_int64(st, 2, b);
  if (fmt == FMT_TEXT) printf("a = run %lld, b = run %lld, ratio = b / a\n\n", (long long)a, (long long)b);
  int rc = print_rows(st, fmt, stdout);
  sqlite3_finalize(st);
  return rc;
}

/* `compare A B C ...`: one row per metric, a column per run ("run3") and one per later run's
 * ratio to the first ("run4/run3"). Two runs keep the a, b, ratio form above. */
static const char *const compare_metrics[] = {
    "workers", "iterations", "events", "samples", "sim_time_s", "mean_iteration_s",
    "samples_per_s", "wait_fraction", "wall_s", "final_loss", "final_accuracy",
    "time_to_target_s", NULL};

static int verb_compare_n(sqlite3 *db, const int64_t *ids, int n, enum fmt fmt) {
  size_t cap = 65536, o = 0;
  char *sql = malloc(cap);
  if (!sql) {
    fputs("hetsim query: out of memory\n", stderr);
    return 1;
  }
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
    fputs("hetsim query: compare: too many runs\n", stderr);
    return 2;
  }
  sqlite3_stmt *st = NULL;
  int rc = prepare(db, sql, &st);
  free(sql);
  if (rc) return rc;
  for (int i = 0; i < n; i++) sqlite3_bind_int64(st, i + 1, ids[i]);
  if (fmt == FMT_TEXT) printf("ratios are to run %lld\n\n", (long long)ids[0]);
  rc = print_rows(st, fmt, stdout);
  sqlite3_finalize(st);
  return rc;
}

/* hs_stdev(x): the sample standard deviation of the non-null x (0 for one value, NULL for none),
 * by Welford's update; registered on the connection for `groups`, so it does not depend on
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

/* `groups`: runs that differ only in their seed (and in who wrote them: pid, host, the sweep's
 * point key), one row per group and metric with the count, mean, sample sd, min and max. */
static int verb_groups(sqlite3 *db, enum fmt fmt, const run_filter *filter) {
  static const char *const metrics[] = {"time_to_target_s", "final_loss", "final_accuracy",
                                        "sim_time_s", "samples_per_s", "wait_fraction",
                                        "iterations", "mean_iteration_s", NULL};
  if (sqlite3_create_function(db, "hs_stdev", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, NULL,
                              stdev_step, stdev_final) != SQLITE_OK)
    return step_failed(db);
  char sql[8192];
  size_t o = 0;
  o += (size_t)snprintf(sql + o, sizeof sql - o,
      "WITH g AS (SELECT r.id, r.seed, r.kind, r.policy, r.params, r.cluster_name, r.model,"
      " r.global_batch, s.*,"
      " r.kind || char(31) || r.policy || char(31) || COALESCE(r.params, '') || char(31) ||"
      " r.model || char(31) || r.global_batch || char(31) || COALESCE(r.cluster_text, '') ||"
      " char(31) || CASE WHEN json_valid(r.options) THEN json_remove(r.options, '$.pid', '$.host',"
      " '$.boot', '$.pid_start', '$.sweep_point', '$.sweep') ELSE COALESCE(r.options, '') END AS gk"
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
  o += (size_t)snprintf(sql + o, sizeof sql - o,
      " ORDER BY 1, mi");
  /* The metric's index only orders the rows; leave it out of what is printed. */
  char outer[9000];
  snprintf(outer, sizeof outer,
           "SELECT \"group\", kind, policy, params, cluster, model, global_batch, runs, seeds,"
           " run_ids, metric, n, mean, sd, min, max FROM (%s)", sql);
  sqlite3_stmt *st = NULL;
  if (prepare(db, outer, &st)) return 1;
  bind_filter(st, filter);
  int rc = print_rows(st, fmt, stdout);
  sqlite3_finalize(st);
  return rc;
}

static int verb_sql(sqlite3 *db, const char *sql, enum fmt fmt, qlimits *lim) {
  /* One value may not pass the byte limit either: randomblob(1e9) fails when it is made, not
   * after a gigabyte was allocated. */
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH,
                (int)(lim->max_bytes > 0 && lim->max_bytes < SQL_LENGTH_CEILING ? lim->max_bytes : SQL_LENGTH_CEILING));
  sqlite3_stmt *st = NULL;
  const char *tail = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, &tail) != SQLITE_OK) {
    if (sqlite3_errcode(db) == SQLITE_TOOBIG) limited_step_failed(db, lim);
    else fprintf(stderr, "hetsim query: sql: %s\n", sqlite3_errmsg(db));
    return 2;
  }
  if (!st) {
    fputs("hetsim query: sql: no statement given\n", stderr);
    return 2;
  }
  /* A second statement would run unchecked by the read-only test below; refuse it. */
  sqlite3_stmt *more = NULL;
  if (tail && sqlite3_prepare_v2(db, tail, -1, &more, NULL) == SQLITE_OK && more) {
    sqlite3_finalize(more);
    sqlite3_finalize(st);
    fputs("hetsim query: sql: give one statement only\n", stderr);
    return 2;
  }
  if (!sqlite3_stmt_readonly(st)) {
    sqlite3_finalize(st);
    fputs("hetsim query: sql: refusing a statement that writes; query only reads the "
          "database\n",
          stderr);
    return 2;
  }
  if (lim->time_limit > 0) {
    lim->deadline = mono_now() + lim->time_limit;
    sqlite3_progress_handler(db, 1000, on_progress, lim);
  }
  int rc = print_rows_limited(st, fmt, stdout, lim);
  sqlite3_progress_handler(db, 0, NULL, NULL);
  sqlite3_finalize(st);
  return rc;
}

/* ---- entry point ---------------------------------------------------------------------- */

int hs_cmd_query(int argc, char **argv) {
  const char *db_path = HS_DEFAULT_DB;
  enum fmt fmt = FMT_TEXT;
  int nfmt = 0, npos = 0, only_pos = 0;
  const char *pos[68]; /* a verb and up to 64 runs for compare */
  run_filter filter = {NULL, NULL, NULL};
  const char *limit_arg = NULL;
  qlimits lim = {.time_limit = SQL_TIME_LIMIT, .max_rows = SQL_MAX_ROWS, .max_bytes = SQL_MAX_BYTES};
  int sql_limits = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!only_pos && strcmp(a, "--") == 0) {
      only_pos = 1;
    } else if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
      fputs(usage_text, stdout);
      return 0;
    } else if (!only_pos && strcmp(a, "--db") == 0) {
      if (i + 1 >= argc) return usage_error("%s needs a FILE", a);
      db_path = argv[++i];
    } else if (!only_pos && strncmp(a, "--db=", 5) == 0) {
      db_path = a + 5;
    } else if (!only_pos && strcmp(a, "--csv") == 0) {
      fmt = FMT_CSV;
      nfmt++;
    } else if (!only_pos && strcmp(a, "--json") == 0) {
      fmt = FMT_JSON;
      nfmt++;
    } else if (!only_pos && (strcmp(a, "--policy") == 0 || strcmp(a, "--kind") == 0 ||
                             strcmp(a, "--status") == 0 || strcmp(a, "--limit") == 0)) {
      if (i + 1 >= argc) return usage_error("%s needs a value", a);
      const char *v = argv[++i];
      if (a[2] == 'p') filter.policy = v;
      else if (a[2] == 'k') filter.kind = v;
      else if (a[2] == 's') filter.status = v;
      else limit_arg = v;
    } else if (!only_pos && (strcmp(a, "--time-limit") == 0 || strcmp(a, "--max-rows") == 0 ||
                             strcmp(a, "--max-bytes") == 0)) {
      if (i + 1 >= argc) return usage_error("%s needs a value", a);
      const char *v = argv[++i];
      double x;
      long long n;
      sql_limits = 1;
      if (a[2] == 't') {
        if (hs_units_parse_time(v, &x)) return usage_error("--time-limit: expected a time like 60s or 0, got \"%s\"", v);
        lim.time_limit = x;
      } else if (a[6] == 'r') {
        if (hs_units_parse_count(v, LLONG_MAX, &n)) return usage_error("--max-rows: expected a count of rows (0 = none), got \"%s\"", v);
        lim.max_rows = n;
      } else {
        if (hs_units_parse_bytes(v, &x) || x >= 9.2e18) return usage_error("--max-bytes: expected a size like 1GiB (0 = none), got \"%s\"", v);
        lim.max_bytes = (long long)x;
      }
    } else if (!only_pos && a[0] == '-' && a[1] != '\0' && npos == 0) {
      return usage_error("unknown option %s", a);
    } else if (!only_pos && a[0] == '-' && a[1] == '-') {
      return usage_error("unknown option %s", a);
    } else {
      if (npos == (int)(sizeof pos / sizeof pos[0])) return usage_error("too many arguments at \"%s\"", a);
      pos[npos++] = a;
    }
  }
  if (nfmt > 1) return usage_error("%s", "give at most one of --csv and --json");
  if (!*db_path) return usage_error("%s", "--db needs a FILE");
  if (npos == 0)
    return usage_error("%s", "missing verb: runs, groups, run ID, compare A B..., evals ID, steps ID or sql \"SELECT ...\"");
  const char *verb = pos[0];
  int want, per_run = strcmp(verb, "evals") == 0 || strcmp(verb, "steps") == 0;
  if (strcmp(verb, "runs") == 0) want = 1;
  else if (strcmp(verb, "run") == 0 || per_run) want = 2;
  else if (strcmp(verb, "compare") == 0) want = npos >= 3 ? npos : 3;
  else if (strcmp(verb, "groups") == 0) want = 1;
  else if (strcmp(verb, "sql") == 0) want = 2;
  else return usage_error("unknown verb \"%s\" (runs, groups, run, compare, evals, steps, sql)", verb);
  if (strcmp(verb, "compare") == 0 && npos - 1 > 64) return usage_error("%s", "compare: at most 64 runs");
  if (npos < want) return usage_error("%s: missing argument", verb);
  if (npos > want) return usage_error("too many arguments for %s", verb);
  if ((filter.policy || filter.kind || filter.status) && strcmp(verb, "runs") != 0 &&
      strcmp(verb, "groups") != 0)
    return usage_error("%s", "--policy, --kind and --status filter `runs` and `groups` only");
  if (limit_arg && !per_run) return usage_error("%s", "--limit applies to `evals` and `steps` only");
  if (sql_limits && strcmp(verb, "sql") != 0)
    return usage_error("%s", "--time-limit, --max-rows and --max-bytes apply to `sql` only");
  if (filter.kind && strcmp(filter.kind, "sim") != 0 && strcmp(filter.kind, "real") != 0)
    return usage_error("--kind: expected sim or real, got \"%s\"", filter.kind);
  if (filter.status && strcmp(filter.status, "running") != 0 && strcmp(filter.status, "complete") != 0 &&
      strcmp(filter.status, "failed") != 0 && strcmp(filter.status, "interrupted") != 0)
    return usage_error("--status: expected running, complete, failed or interrupted, got \"%s\"",
                       filter.status);
  long long limit = -1;
  if (limit_arg) {
    char *end = NULL;
    errno = 0;
    limit = strtoll(limit_arg, &end, 10);
    if (errno || end == limit_arg || *end || limit < 0)
      return usage_error("--limit: expected a count of rows (0 or more), got \"%s\"", limit_arg);
  }
  int64_t id[68] = {0};
  if (strcmp(verb, "run") == 0 || strcmp(verb, "compare") == 0 || per_run)
    for (int k = 1; k < want; k++)
      if (parse_id(pos[k], &id[k - 1])) return 2;

  hs_diag d = {0};
  hs_store *s = NULL;
  int rc = hs_store_open(&s, db_path, HS_STORE_READONLY, &d);
  if (rc) {
    fprintf(stderr, "hetsim query: %s\n", d.msg);
    return rc == HS_ENOTFOUND ? 2 : hs_exit_code(rc);
  }
  sqlite3 *db = hs_store_db(s);
  /* ATTACH counts as read-only for sqlite3_stmt_readonly; forbid it so `sql` cannot reach
   * other files. */
  sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
  if (strcmp(verb, "runs") == 0) {
    rc = verb_runs(db, fmt, &filter);
  } else if (per_run) {
    rc = check_run(db, id[0], db_path);
    if (!rc) rc = verb_rows(db, verb, id[0], limit, fmt);
  } else if (strcmp(verb, "run") == 0) {
    rc = check_run(db, id[0], db_path);
    if (!rc) rc = verb_run(db, id[0], fmt);
  } else if (strcmp(verb, "compare") == 0) {
    for (int k = 0; k < want - 1 && !rc; k++) rc = check_run(db, id[k], db_path);
    if (!rc) rc = want == 3 ? verb_compare(db, id[0], id[1], fmt) : verb_compare_n(db, id, want - 1, fmt);
  } else if (strcmp(verb, "groups") == 0) {
    rc = verb_groups(db, fmt, &filter);
  } else {
    rc = verb_sql(db, pos[1], fmt, &lim);
  }
  if (fflush(stdout) != 0 && !rc) {
    fprintf(stderr, "hetsim query: writing output: %s\n", strerror(errno));
    rc = 1;
  }
  hs_store_close(s);
  return rc;
}
