/* `hetsim query`: read the results database. Every verb is one or more SQL statements whose
 * rows go through one printer with three formats (aligned text, RFC 4180 CSV, JSON), so that
 * the formats cannot drift apart. The database is always opened read-only. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core_json.h"
#include "core/core_store.h"
#include "core/core_store_query.h"
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

typedef struct qlimits {
  double time_limit;                 /* s; 0 = none */
  long long max_rows, max_bytes;     /* 0 = none */
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
static char *text_cell(const hs_rows *st, int i, int cut) {
  char buf[64];
  size_t len;
  switch (hs_rows_type(st, i)) {
  case HS_VALUE_NULL: return strdup("NULL");
  case HS_VALUE_INT:
    snprintf(buf, sizeof buf, "%lld", (long long)hs_rows_int(st, i));
    return strdup(buf);
  case HS_VALUE_REAL: snprintf(buf, sizeof buf, "%.6g", hs_rows_real(st, i)); return strdup(buf);
  case HS_VALUE_BLOB: {
    const unsigned char *b = hs_rows_blob(st, i, &len);
    return hex_of_blob(b, (int)len);
  }
  default: break;
  }
  const unsigned char *t = (const unsigned char *)hs_rows_text(st, i, &len); /* NUL bytes included, shown as \x00 */
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

static int is_number(const hs_rows *st, int i) {
  hs_value_type t = hs_rows_type(st, i);
  return t == HS_VALUE_INT || t == HS_VALUE_REAL;
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

static void csv_value(FILE *out, const hs_rows *st, int i) {
  char buf[64];
  size_t len;
  switch (hs_rows_type(st, i)) {
  case HS_VALUE_NULL: break;
  case HS_VALUE_INT: fprintf(out, "%lld", (long long)hs_rows_int(st, i)); break;
  case HS_VALUE_REAL:
    format_real(buf, sizeof buf, hs_rows_real(st, i));
    fputs(buf, out);
    break;
  case HS_VALUE_BLOB: {
    const unsigned char *b = hs_rows_blob(st, i, &len);
    char *h = hex_of_blob(b, (int)len);
    if (h) fputs(h, out);
    free(h);
    break;
  }
  default: csv_field(out, hs_rows_text(st, i, NULL)); break;
  }
}

static void json_value(hs_json *j, const hs_rows *st, int i) {
  size_t len;
  switch (hs_rows_type(st, i)) {
  case HS_VALUE_NULL: hs_json_null(j); break;
  case HS_VALUE_INT: hs_json_int(j, hs_rows_int(st, i)); break;
  case HS_VALUE_REAL: hs_json_double(j, hs_rows_real(st, i)); break;
  case HS_VALUE_BLOB: {
    const unsigned char *b = hs_rows_blob(st, i, &len);
    char *h = hex_of_blob(b, (int)len);
    hs_json_string(j, h ? h : "");
    free(h);
    break;
  }
  default: {
    /* The length, not strlen: a text may hold NUL bytes, which JSON writes as \u0000. */
    const char *t = hs_rows_text(st, i, &len);
    hs_json_string_len(j, t ? t : "", t ? len : 0);
    break;
  }
  }
}

static void json_row(hs_json *j, const hs_rows *st) {
  hs_json_object_begin(j);
  for (int i = 0; i < hs_rows_columns(st); i++) {
    hs_json_key(j, hs_rows_name(st, i));
    json_value(j, st, i);
  }
  hs_json_object_end(j);
}

/* ---- result sets ---------------------------------------------------------------------- */

/* Reports a failed read (d holds SQLite's message) and returns exit status 1. */
static int read_failed(const hs_diag *d) {
  fprintf(stderr, "hetsim query: %s\n", d->msg);
  return 1;
}

/* A failed step of a limited statement (rc from hs_rows_next): the time limit's message, or
 * SQLite's. */
static int limited_step_failed(int rc, const hs_diag *d, const qlimits *l) {
  if (l && rc == HS_EINTR) {
    fprintf(stderr, "hetsim query: sql: stopped after the time limit of %g s (--time-limit: give a "
            "longer one, or 0 for none)\n", l->time_limit);
    return 1;
  }
  if (l && rc == HS_ELIMIT) {
    fprintf(stderr, "hetsim query: sql: %s: a value passed the limit of %lld bytes (--max-bytes: "
            "give a higher one)\n", d->msg, l->max_bytes > 0 ? l->max_bytes : HS_SQL_LENGTH_CEILING);
    return 1;
  }
  return read_failed(d);
}

/* Counts one more row of st against the limits; 1 (with the message printed) when it passes
 * one of them. */
static int over_limit(qlimits *l, const hs_rows *st) {
  if (!l) return 0;
  l->rows++;
  for (int i = 0; i < hs_rows_columns(st); i++) {
    hs_value_type t = hs_rows_type(st, i);
    size_t len = 0;
    if (t == HS_VALUE_TEXT) hs_rows_text(st, i, &len);
    else if (t == HS_VALUE_BLOB) hs_rows_blob(st, i, &len);
    l->bytes += t == HS_VALUE_TEXT || t == HS_VALUE_BLOB ? (long long)len : t == HS_VALUE_NULL ? 0 : 8;
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
static int print_text_table(hs_rows *st, FILE *out, qlimits *lim) {
  int nc = hs_rows_columns(st);
  hs_diag d = {0};
  if (nc == 0) {
    int step;
    while ((step = hs_rows_next(st, &d)) == 1) {}
    return step == 0 ? 0 : limited_step_failed(step, &d, lim);
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
    width[i] = strlen(hs_rows_name(st, i));
    numeric[i] = 2; /* unknown until a non-null value is seen */
  }
  while ((step = hs_rows_next(st, &d)) == 1) {
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
      if (hs_rows_type(st, i) != HS_VALUE_NULL)
        numeric[i] = (char)(numeric[i] != 0 && is_number(st, i));
    }
    nrows++;
  }
  if (step != 0) {
    rc = limited_step_failed(step, &d, lim);
    if (lim) goto done;
  }
  for (int i = 0; i < nc; i++) {
    const char *name = hs_rows_name(st, i);
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
static int print_rows_limited(hs_rows *st, enum fmt fmt, FILE *out, qlimits *lim) {
  int nc = hs_rows_columns(st), step;
  hs_diag d = {0};
  if (fmt == FMT_TEXT) return print_text_table(st, out, lim);
  if (fmt == FMT_CSV) {
    for (int i = 0; i < nc; i++) {
      if (i) fputc(',', out);
      csv_field(out, hs_rows_name(st, i));
    }
    if (nc) fputs("\r\n", out);
    while ((step = hs_rows_next(st, &d)) == 1) {
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
    while ((step = hs_rows_next(st, &d)) == 1) {
      /* The array stays open: a cut result must not parse as the whole one. */
      if (over_limit(lim, st)) return 1;
      json_row(&j, st);
    }
    if (step != 0 && lim) return limited_step_failed(step, &d, lim);
    hs_json_array_end(&j);
    fputc('\n', out);
  }
  return step == 0 ? 0 : limited_step_failed(step, &d, lim);
}

static int print_rows(hs_rows *st, enum fmt fmt, FILE *out) { return print_rows_limited(st, fmt, out, NULL); }

int hs_query_write_csv(hs_rows *st, FILE *out) { return print_rows(st, FMT_CSV, out); }

/* One row shown as "name  value" lines, for the wide run and summary rows. */
static int print_vertical(hs_rows *st, const char *title, FILE *out) {
  hs_diag d = {0};
  int step = hs_rows_next(st, &d);
  if (step != 1) {
    if (step != 0) return read_failed(&d);
    fprintf(out, "%s: none\n", title);
    return 0;
  }
  int nc = hs_rows_columns(st);
  size_t w = 0;
  for (int i = 0; i < nc; i++)
    if (strlen(hs_rows_name(st, i)) > w) w = strlen(hs_rows_name(st, i));
  fprintf(out, "%s\n", title);
  for (int i = 0; i < nc; i++) {
    fprintf(out, "  %-*s  ", (int)w, hs_rows_name(st, i));
    if (hs_rows_type(st, i) == HS_VALUE_TEXT) {
      /* Multi-line texts (the cluster YAML) keep their lines, indented under the value. */
      const char *t = hs_rows_text(st, i, NULL);
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

/* An opened cursor, or the failure's exit status (1) with SQLite's message printed. */
static int opened(int rc, const hs_diag *d) { return rc ? read_failed(d) : 0; }

/* ---- verbs ---------------------------------------------------------------------------- */

static int parse_id(const char *s, int64_t *id) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v <= 0) return usage_error("not a run ID: \"%s\"", s);
  *id = v;
  return 0;
}

static int check_run(hs_store *s, int64_t id, const char *path) {
  hs_diag d = {0};
  int found = hs_store_run_exists(s, id, &d);
  if (found == 1) return 0;
  if (found < 0) return read_failed(&d);
  fprintf(stderr, "hetsim query: no run %lld in %s (hetsim query runs lists them)\n",
          (long long)id, path);
  return 2;
}

/* Runs a cursor's rows through the printer and closes it. */
static int print_and_close(hs_rows *st, enum fmt fmt, FILE *out) {
  int rc = print_rows(st, fmt, out);
  hs_rows_close(st);
  return rc;
}

static int verb_runs(hs_store *s, enum fmt fmt, const hs_run_filter *filter) {
  hs_diag d = {0};
  hs_rows *st = NULL;
  int rc = opened(hs_store_runs_open(s, filter, &st, &d), &d);
  if (rc) return rc;
  rc = print_and_close(st, fmt, stdout);
  if (rc || fmt != FMT_TEXT) return rc;
  /* People reading the table learn what a status other than complete means; scripts read the
   * status column of --csv or --json instead. */
  int64_t n = 0;
  if (hs_store_runs_not_complete(s, filter, &n, &d)) return read_failed(&d);
  if (n > 0)
    printf("\n%lld run%s not complete. running: still going (or written on another host);\n"
           "incomplete: its process is gone without finishing (a crash, kill -9);\n"
           "interrupted: stopped by SIGINT; failed: ended with an error (see\n"
           "hetsim query run ID). Their rows cover only what was stored before they stopped.\n",
           (long long)n, n == 1 ? " is" : "s are");
  return 0;
}

/* `evals ID` and `steps ID`: a run's rows of one table, oldest first, at most limit (< 0: all). */
static int verb_rows(hs_store *s, const char *verb, int64_t id, long long limit, enum fmt fmt) {
  hs_diag d = {0};
  hs_rows *st = NULL;
  int rc = opened(strcmp(verb, "evals") == 0 ? hs_store_evals_open(s, id, limit, &st, &d)
                                             : hs_store_steps_open(s, id, limit, &st, &d), &d);
  return rc ? rc : print_and_close(st, fmt, stdout);
}

static int verb_run(hs_store *s, int64_t id, enum fmt fmt) {
  static const hs_run_table table[3] = {HS_TABLE_RUN, HS_TABLE_SUMMARY, HS_TABLE_WORKER};
  static const char *const title[3] = {"run", "summary", "workers"};
  hs_rows *st[3] = {NULL, NULL, NULL};
  hs_diag d = {0};
  int rc = 0;
  for (int k = 0; k < 3 && !rc; k++) rc = opened(hs_store_run_table_open(s, table[k], id, &st[k], &d), &d);
  if (rc) goto done;
  if (fmt == FMT_JSON) {
    hs_json j;
    hs_json_init(&j, stdout, 0);
    hs_json_object_begin(&j);
    for (int k = 0; k < 2; k++) {
      hs_json_key(&j, title[k]);
      int step = hs_rows_next(st[k], &d);
      if (step == 1) json_row(&j, st[k]);
      else if (step == 0) hs_json_null(&j);
      else rc = read_failed(&d);
    }
    hs_json_key(&j, title[2]);
    hs_json_array_begin(&j);
    int step;
    while ((step = hs_rows_next(st[2], &d)) == 1) json_row(&j, st[2]);
    if (step != 0) rc = read_failed(&d);
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
  for (int k = 0; k < 3; k++) hs_rows_close(st[k]);
  return rc;
}

/* `compare A B ...`: two runs as metric, a, b, ratio; more as a column per run ("run3") and
 * one per later run's ratio to the first ("run4/run3"). */
static int verb_compare(hs_store *s, const int64_t *ids, int n, enum fmt fmt) {
  hs_diag d = {0};
  hs_rows *st = NULL;
  int rc = hs_store_compare_open(s, ids, n, &st, &d);
  if (rc == HS_ELIMIT) {
    fprintf(stderr, "hetsim query: %s\n", d.msg);
    return 2;
  }
  if ((rc = opened(rc, &d))) return rc;
  if (fmt == FMT_TEXT) {
    if (n == 2) printf("a = run %lld, b = run %lld, ratio = b / a\n\n", (long long)ids[0], (long long)ids[1]);
    else printf("ratios are to run %lld\n\n", (long long)ids[0]);
  }
  return print_and_close(st, fmt, stdout);
}

/* `groups`: runs that differ only in their seed, one row per group and metric with the count,
 * mean, sample sd, min and max (core_store_query.h). */
static int verb_groups(hs_store *s, enum fmt fmt, const hs_run_filter *filter) {
  hs_diag d = {0};
  hs_rows *st = NULL;
  int rc = opened(hs_store_groups_open(s, filter, &st, &d), &d);
  return rc ? rc : print_and_close(st, fmt, stdout);
}

static int verb_sql(hs_store *s, const char *sql, enum fmt fmt, qlimits *lim) {
  hs_sql_limits sl = {.time_s = lim->time_limit, .max_value_bytes = lim->max_bytes};
  hs_sql_refusal why;
  hs_diag d = {0};
  hs_rows *st = NULL;
  int rc = hs_store_sql_open(s, sql, &sl, &st, &why, &d);
  if (rc == HS_EINVAL) {
    switch (why) {
    case HS_SQL_TOO_BIG: limited_step_failed(HS_ELIMIT, &d, lim); break;
    case HS_SQL_EMPTY: fputs("hetsim query: sql: no statement given\n", stderr); break;
    case HS_SQL_MANY: fputs("hetsim query: sql: give one statement only\n", stderr); break;
    case HS_SQL_WRITES:
      fputs("hetsim query: sql: refusing a statement that writes; query only reads the "
            "database\n",
            stderr);
      break;
    default: fprintf(stderr, "hetsim query: sql: %s\n", d.msg); break;
    }
    return 2;
  }
  if ((rc = opened(rc, &d))) return rc;
  rc = print_rows_limited(st, fmt, stdout, lim);
  hs_rows_close(st);
  return rc;
}

/* ---- entry point ---------------------------------------------------------------------- */

int hs_cmd_query(int argc, char **argv) {
  const char *db_path = HS_DEFAULT_DB;
  enum fmt fmt = FMT_TEXT;
  int nfmt = 0, npos = 0, only_pos = 0;
  const char *pos[68]; /* a verb and up to 64 runs for compare */
  hs_run_filter filter = {NULL, NULL, NULL};
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
  if (strcmp(verb, "runs") == 0) {
    rc = verb_runs(s, fmt, &filter);
  } else if (per_run) {
    rc = check_run(s, id[0], db_path);
    if (!rc) rc = verb_rows(s, verb, id[0], limit, fmt);
  } else if (strcmp(verb, "run") == 0) {
    rc = check_run(s, id[0], db_path);
    if (!rc) rc = verb_run(s, id[0], fmt);
  } else if (strcmp(verb, "compare") == 0) {
    for (int k = 0; k < want - 1 && !rc; k++) rc = check_run(s, id[k], db_path);
    if (!rc) rc = verb_compare(s, id, want - 1, fmt);
  } else if (strcmp(verb, "groups") == 0) {
    rc = verb_groups(s, fmt, &filter);
  } else {
    rc = verb_sql(s, pos[1], fmt, &lim);
  }
  if (fflush(stdout) != 0 && !rc) {
    fprintf(stderr, "hetsim query: writing output: %s\n", strerror(errno));
    rc = 1;
  }
  hs_store_close(s);
  return rc;
}
