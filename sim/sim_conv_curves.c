/* The reader of recorded convergence curves. See sim_conv_curves.h. */
#include "sim/sim_conv_curves.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_hash.h"

/* More samples than any training run: a bound that keeps every count finite. */
#define MAX_SAMPLES 1e18

enum { COL_SAMPLES, COL_EPOCH, COL_LOSS, COL_ACC, COL_BATCH, COL_WORKERS, COL_POLICY, COL_PERIOD, COL_SEED, N_COLS };
static const char *const col_names[N_COLS] = {"samples", "epoch", "loss", "accuracy", "batch", "workers", "policy",
                                              "period", "seed"};

/* Splits one CSV line (RFC 4180: fields in double quotes may hold commas, "" is a quote) in
 * place into at most cap fields; returns the count, or -1 for an unterminated quote. */
static int csv_split(char *line, char **field, int cap) {
  int n = 0;
  char *p = line;
  for (;;) {
    if (n == cap) return n + 1; /* too many: the caller reports the count it expected */
    char *out = p, *start = p;
    if (*p == '"') {
      p++;
      for (;;) {
        if (!*p) return -1;
        if (*p == '"' && p[1] == '"') { *out++ = '"'; p += 2; continue; }
        if (*p == '"') { p++; break; }
        *out++ = *p++;
      }
      while (*p && *p != ',') p++; /* text after the closing quote is ignored */
    } else {
      while (*p && *p != ',') *out++ = *p++;
    }
    char sep = *p;
    *out = '\0';
    /* trim blanks */
    while (*start == ' ' || *start == '\t') start++;
    for (char *e = start + strlen(start); e > start && (e[-1] == ' ' || e[-1] == '\t'); e--) e[-1] = '\0';
    field[n++] = start;
    if (!sep) return n;
    p++;
  }
}

/* A number: all of s, finite, >= lo. */
static int parse_num(const char *s, double lo, double *v) {
  char *end;
  if (!*s) return -1;
  *v = strtod(s, &end);
  return *end || !isfinite(*v) || *v < lo ? -1 : 0;
}

/* HS_EINVAL with "PATH:LINE: MESSAGE". */
static int bad_at(hs_diag *d, const char *path, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int bad_at(hs_diag *d, const char *path, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hs_diag_vset(d, HS_EINVAL, fmt, ap);
  va_end(ap);
  hs_diag_prefix(d, "%s:%d", path, line);
  return HS_EINVAL;
}

int hs_conv_curves_parse(const char *name, char *text, size_t len, double dataset_size, int64_t zoo_size,
                         hs_conv_curves *out, hs_diag *d) {
  memset(out, 0, sizeof *out);
  if (strlen(text) != len) return hs_diag_set(d, HS_EINVAL, "%s: a NUL byte: not a CSV text file", name);
  int rc = 0;
  hs_conv_curve_row *rows = NULL;
  int nrows = 0, rcap = 0, col[N_COLS], ncols = 0, header = 0, lineno = 0, header_line = 0;
  for (int i = 0; i < N_COLS; i++) col[i] = -1;
  char *unknown = out->ignored;
  char *save = NULL;
  for (char *line = text; line && !rc; line = save) {
    char *nl = strchr(line, '\n');
    save = nl ? nl + 1 : NULL;
    if (nl) *nl = '\0';
    lineno++;
    size_t ll = strlen(line);
    if (ll && line[ll - 1] == '\r') line[--ll] = '\0';
    const char *q = line + strspn(line, " \t");
    if (!*q || *q == '#') continue;
    char *fld[64];
    if (!header) {
      char hdr[256];
      snprintf(hdr, sizeof hdr, "%s", q);
      ncols = csv_split(line, fld, 64);
      if (ncols < 0 || ncols > 64) {
        rc = bad_at(d, name, lineno, "the header row: %s", ncols < 0 ? "a quote is not closed" : "more than 64 columns");
        break;
      }
      for (int c = 0; c < ncols && !rc; c++) {
        int k = 0;
        while (k < N_COLS && strcmp(fld[c], col_names[k])) k++;
        if (k == N_COLS) {
          size_t ul = strlen(unknown);
          snprintf(unknown + ul, sizeof out->ignored - ul, "%s%s", ul ? ", " : "", fld[c]);
        } else if (col[k] >= 0) {
          rc = bad_at(d, name, lineno, "column \"%s\" given twice", fld[c]);
        } else {
          col[k] = c;
        }
      }
      if (!rc && (col[COL_LOSS] < 0 || col[COL_BATCH] < 0 || (col[COL_SAMPLES] < 0 && col[COL_EPOCH] < 0)))
        rc = bad_at(d, name, lineno, "the header row needs columns loss, batch and samples or epoch "
                    "(optional: accuracy, workers, policy, seed); got \"%s\"", hdr);
      header = 1;
      header_line = lineno;
      continue;
    }
    int nf = csv_split(line, fld, 64);
    if (nf != ncols) {
      if (nf < 0) rc = bad_at(d, name, lineno, "a quote is not closed");
      else rc = bad_at(d, name, lineno, "expected %d fields as in the header, got %d", ncols, nf);
      break;
    }
    hs_conv_curve_row r = {.samples = NAN, .epoch = NAN, .acc = NAN, .line = lineno};
    const char *v;
    double x;
    if (col[COL_SAMPLES] >= 0 && *(v = fld[col[COL_SAMPLES]]) && (parse_num(v, 0, &r.samples) || r.samples > MAX_SAMPLES)) {
      rc = bad_at(d, name, lineno, "samples: expected a number >= 0 and at most 1e18, got \"%s\"", v);
      break;
    }
    if (col[COL_EPOCH] >= 0 && *(v = fld[col[COL_EPOCH]]) && parse_num(v, 0, &r.epoch)) {
      rc = bad_at(d, name, lineno, "epoch: expected a number >= 0, got \"%s\"", v);
      break;
    }
    if (isnan(r.samples) && isnan(r.epoch)) {
      rc = bad_at(d, name, lineno, "neither samples nor epoch is given");
      break;
    }
    if (parse_num(v = fld[col[COL_LOSS]], 0, &r.loss)) {
      rc = bad_at(d, name, lineno, "loss: expected a number >= 0, got \"%s\"", v);
      break;
    }
    if (col[COL_ACC] >= 0 && *(v = fld[col[COL_ACC]]) && (parse_num(v, 0, &r.acc) || r.acc > 1)) {
      rc = bad_at(d, name, lineno, "accuracy: expected a fraction in [0, 1], got \"%s\"", v);
      break;
    }
    if (parse_num(v = fld[col[COL_BATCH]], 1, &x) || x != floor(x) || x > 1e9) {
      rc = bad_at(d, name, lineno, "batch: expected a positive integer (samples per worker step), got \"%s\"", v);
      break;
    }
    double batch = x, workers = 1;
    if (col[COL_WORKERS] >= 0 && *(v = fld[col[COL_WORKERS]]) && (parse_num(v, 1, &workers) || workers != floor(workers) || workers > 1e7)) {
      rc = bad_at(d, name, lineno, "workers: expected a positive integer, got \"%s\"", v);
      break;
    }
    const char *pol = col[COL_POLICY] >= 0 && *fld[col[COL_POLICY]] ? fld[col[COL_POLICY]] : "ssgd";
    double period = 0; /* 0: not given */
    if (col[COL_PERIOD] >= 0 && *(v = fld[col[COL_PERIOD]]) && (parse_num(v, 1, &period) || period != floor(period) || period > 1e7)) {
      rc = bad_at(d, name, lineno, "period: expected a positive integer (local steps between model averages), got \"%s\"", v);
      break;
    }
    r.tau = 1;
    if (!strcmp(pol, "ssgd") || !strcmp(pol, "ddp") || !strcmp(pol, "lbb")) {
      r.u = batch * workers;
      r.stale = 0;
    } else if (!strcmp(pol, "asp")) {
      r.u = batch;
      r.stale = workers - 1;
    } else if (!strcmp(pol, "localsgd")) {
      if (period == 0) {
        rc = bad_at(d, name, lineno, "a localsgd row needs a period (local steps between model averages)");
        break;
      }
      /* An average of the workers' tau local steps each: progress as the analytic model's
       * all-reduce of models, S E(S/tau) Ptau(tau) / D with S/tau = batch x workers. */
      r.u = batch * workers;
      r.stale = 0;
      r.tau = period;
    } else {
      rc = bad_at(d, name, lineno, "policy: expected ssgd, ddp or lbb (synchronous), asp or localsgd, got \"%s\"", pol);
      break;
    }
    if (period > 1 && r.tau == 1) {
      rc = bad_at(d, name, lineno, "period: only localsgd rows average every period steps; a %s row's period is 1, "
                  "got \"%s\"", pol, fld[col[COL_PERIOD]]);
      break;
    }
    if (col[COL_SEED] >= 0 && *(v = fld[col[COL_SEED]])) r.seed = hs_fnv64(HS_FNV64_INIT, v, strlen(v)) | 1;
    if (nrows == rcap) {
      int nc = rcap ? 2 * rcap : 256;
      hs_conv_curve_row *g = realloc(rows, (size_t)nc * sizeof *g);
      if (!g) {
        rc = hs_diag_set(d, HS_ENOMEM, "out of memory reading %s", name);
        break;
      }
      rows = g;
      rcap = nc;
    }
    rows[nrows++] = r;
  }
  if (!rc && !header) rc = hs_diag_set(d, HS_EINVAL, "%s:%d: no header row (the file is empty)", name, lineno);
  if (!rc && !nrows) rc = hs_diag_set(d, HS_EINVAL, "%s:%d: no rows after the header", name, header_line);

  /* Samples per epoch: --dataset-size, else samples/epoch of the rows that give both (which must
   * agree within 1%), taken from the row of the most epochs, whose rounded epoch is the least
   * off (tools/hetsim_profile.py writes 6 decimals: at 0.1 epoch that is 5e-6 of it), else the
   * zoo model's training set. */
  double D = dataset_size;
  int from = dataset_size > 0 ? 1 : 0, from_line = 0; /* from 1: the option, 2: a row */
  for (int i = 0; !rc && !from && i < nrows; i++) {
    const hs_conv_curve_row *r = &rows[i];
    if (isnan(r->samples) || isnan(r->epoch) || !(r->epoch > 0)) continue;
    if (!from_line || r->epoch > rows[from_line - 1].epoch) from_line = i + 1;
  }
  if (from_line) {
    const hs_conv_curve_row *r = &rows[from_line - 1];
    double dr = r->samples / r->epoch;
    /* A data set has a whole number of samples; the epoch column is rounded. */
    D = fabs(dr - round(dr)) <= 1e-6 * dr ? round(dr) : dr;
    from = 2;
    if (!(D >= 1 && D <= MAX_SAMPLES))
      rc = bad_at(d, name, r->line, "samples / epoch = %.6g: not a number of samples per epoch", dr);
  }
  for (int i = 0; !rc && i < nrows; i++) {
    const hs_conv_curve_row *r = &rows[i];
    if (isnan(r->samples) || isnan(r->epoch) || !(r->epoch > 0)) continue;
    double dr = r->samples / r->epoch;
    if (fabs(dr - D) > 0.01 * D) {
      char by[64];
      if (from == 1) snprintf(by, sizeof by, "--dataset-size says");
      else snprintf(by, sizeof by, "line %d gives", rows[from_line - 1].line);
      rc = bad_at(d, name, r->line, "samples / epoch = %.6g, but %s %.6g samples per epoch", dr, by, D);
    }
  }
  if (!rc && !(D > 0)) D = (double)zoo_size;
  if (!rc && !(D > 0))
    rc = hs_diag_set(d, HS_EINVAL, "%s: give --dataset-size N (training samples per epoch): the model is not in the zoo "
                     "and no row has both samples and epoch", name);
  for (int i = 0; !rc && i < nrows; i++) {
    hs_conv_curve_row *r = &rows[i];
    if (!isnan(r->samples)) continue;
    r->samples = r->epoch * D;
    if (!(r->samples <= MAX_SAMPLES))
      rc = bad_at(d, name, r->line, "epoch: %.6g epochs of %.6g samples are more than 1e18 samples", r->epoch, D);
  }
  if (rc) {
    free(rows);
    out->ignored[0] = '\0';
    return rc;
  }
  out->rows = rows;
  out->n = nrows;
  out->dataset_size = D;
  return 0;
}

void hs_conv_curves_free(hs_conv_curves *c) {
  free(c->rows);
  c->rows = NULL;
  c->n = 0;
}
