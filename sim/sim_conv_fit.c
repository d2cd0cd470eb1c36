/* Stored convergence fits and the source of a run's convergence parameters. See
 * sim_conv_fit.h. */
#include "sim/sim_conv_fit.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* The analytic coefficients as stored, in the order of hs_conv_coef. */
static const char *const coef_keys[] = {"phi", "b0", "beta0", "beta1", "beta2", "lambda_s",
                                        "lambda_tau", "lambda_c", "acc_max", "acc_alpha", "acc_slope",
                                        "acc_bend", "acc_noise"};
enum { N_COEF = (int)(sizeof coef_keys / sizeof coef_keys[0]) };

static void coef_values(const hs_conv_coef *c, double v[N_COEF]) {
  const double x[N_COEF] = {c->phi, c->b0, c->beta0, c->beta1, c->beta2, c->lambda_s,
                            c->lambda_tau, c->lambda_c, c->acc_max, c->acc_alpha, c->acc_slope,
                            c->acc_bend, c->acc_noise};
  memcpy(v, x, sizeof x);
}


static void copy_text(sqlite3_stmt *st, int i, char *buf, size_t len) {
  const unsigned char *t = sqlite3_column_text(st, i);
  snprintf(buf, len, "%s", t ? (const char *)t : "");
}

int hs_conv_fit_newest(hs_store *s, const char *model, int64_t dataset_size, hs_conv_fit *out, hs_diag *d) {
  memset(out, 0, sizeof *out);
  out->rmse = NAN;
  out->beta0_scale = 1;
  if (hs_store_schema_version(s) < 3) return hs_diag_set(d, HS_ENOTFOUND, "no convergence fit for %s (schema before version 3)", model);
  sqlite3 *db = hs_store_db(s);
  char sql[1024];
  int k = snprintf(sql, sizeof sql, "SELECT id, source, points, rmse, created_at, json_extract(params, '$.dataset_size'), "
                   "json_extract(params, '$.fitted')");
  for (int i = 0; i < N_COEF; i++) k += snprintf(sql + k, sizeof sql - (size_t)k, ", json_extract(params, '$.%s')", coef_keys[i]);
  snprintf(sql + k, sizeof sql - (size_t)k, " FROM convergence_fit WHERE model = ? ORDER BY id DESC LIMIT 1");
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return hs_diag_set(d, HS_EDB, "reading convergence_fit: %s", sqlite3_errmsg(db));
  sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    int e = rc == SQLITE_DONE ? hs_diag_set(d, HS_ENOTFOUND, "no convergence fit for model %s", model)
                              : hs_diag_set(d, HS_EDB, "reading convergence_fit: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return e;
  }
  out->id = sqlite3_column_int64(st, 0);
  snprintf(out->model, sizeof out->model, "%s", model);
  copy_text(st, 1, out->source, sizeof out->source);
  out->points = sqlite3_column_int64(st, 2);
  if (sqlite3_column_type(st, 3) != SQLITE_NULL) out->rmse = sqlite3_column_double(st, 3);
  copy_text(st, 4, out->created_at, sizeof out->created_at);
  out->dataset_size = sqlite3_column_type(st, 5) == SQLITE_NULL ? 0 : sqlite3_column_double(st, 5);
  copy_text(st, 6, out->fitted, sizeof out->fitted);
  if (dataset_size > 0 && out->dataset_size > 0) out->beta0_scale = (double)dataset_size / out->dataset_size;
  size_t used = 0;
  for (int i = 0; i < N_COEF && used < sizeof out->params; i++) {
    if (sqlite3_column_type(st, 7 + i) == SQLITE_NULL) continue; /* a key left out keeps its default */
    double v = sqlite3_column_double(st, 7 + i);
    if (!strcmp(coef_keys[i], "beta0")) v *= out->beta0_scale;
    int n = snprintf(out->params + used, sizeof out->params - used, "%s%s=%.17g", used ? "," : "", coef_keys[i], v);
    if (n > 0) used += (size_t)n;
  }
  sqlite3_finalize(st);
  return 0;
}

int hs_conv_fit_store(hs_store *s, const hs_conv_fit_row *row, int64_t *id, int *existed, hs_diag *d) {
  *id = 0;
  *existed = 0;
  double v[N_COEF];
  coef_values(row->coef, v);
  for (int i = 0; i < N_COEF; i++)
    if (!isfinite(v[i])) return hs_diag_set(d, HS_EINVAL, "convergence fit of %s: %s is not finite", row->model, coef_keys[i]);
  if (row->points <= 0 || !(row->dataset_size > 0))
    return hs_diag_set(d, HS_EINVAL, "convergence fit of %s: no points or no dataset size", row->model);
  char json[2048];
  size_t k = 0;
  k += (size_t)snprintf(json, sizeof json, "{");
  for (int i = 0; i < N_COEF && k < sizeof json; i++)
    k += (size_t)snprintf(json + k, sizeof json - k, "\"%s\":%.17g,", coef_keys[i], v[i]);
  if (k < sizeof json)
    k += (size_t)snprintf(json + k, sizeof json - k, "\"dataset_size\":%.17g,\"classes\":%d,\"fitted\":[",
                          row->dataset_size, row->classes);
  for (int i = 0; row->fitted && row->fitted[i] && k < sizeof json; i++)
    k += (size_t)snprintf(json + k, sizeof json - k, "%s\"%s\"", i ? "," : "", row->fitted[i]);
  if (k < sizeof json) {
    if (isfinite(row->accuracy_rmse))
      k += (size_t)snprintf(json + k, sizeof json - k, "],\"accuracy_rmse\":%.17g}", row->accuracy_rmse);
    else
      k += (size_t)snprintf(json + k, sizeof json - k, "],\"accuracy_rmse\":null}");
  }
  if (k >= sizeof json) return hs_diag_set(d, HS_ELIMIT, "convergence fit of %s: parameters too long", row->model);

  sqlite3 *db = hs_store_db(s);
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return hs_diag_set(d, HS_EDB, "storing the convergence fit: %s", sqlite3_errmsg(db));
  int rc = 0;
  sqlite3_stmt *st = NULL;
  /* The newest fit of the model, the same source and parameters: already stored. */
  if (sqlite3_prepare_v2(db, "SELECT id, source = ?2 AND params = ?3 FROM convergence_fit WHERE model = ?1"
                         " ORDER BY id DESC LIMIT 1", -1, &st, NULL) != SQLITE_OK) {
    rc = hs_diag_set(d, HS_EDB, "reading convergence_fit: %s", sqlite3_errmsg(db));
    goto done;
  }
  sqlite3_bind_text(st, 1, row->model, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, row->source, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, json, -1, SQLITE_STATIC);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW && sqlite3_column_int(st, 1)) {
    *id = sqlite3_column_int64(st, 0);
    *existed = 1;
  } else if (step != SQLITE_ROW && step != SQLITE_DONE) {
    rc = hs_diag_set(d, HS_EDB, "reading convergence_fit: %s", sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
  st = NULL;
  if (rc || *existed) goto done;
  if (sqlite3_prepare_v2(db, "INSERT INTO convergence_fit(model, params, source, points, rmse) VALUES (?, ?, ?, ?, ?)",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = hs_diag_set(d, HS_EDB, "storing the convergence fit: %s", sqlite3_errmsg(db));
    goto done;
  }
  sqlite3_bind_text(st, 1, row->model, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, json, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, row->source, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, row->points);
  if (isfinite(row->rmse)) sqlite3_bind_double(st, 5, row->rmse);
  else sqlite3_bind_null(st, 5);
  if (sqlite3_step(st) != SQLITE_DONE) rc = hs_diag_set(d, HS_EDB, "storing the convergence fit: %s", sqlite3_errmsg(db));
  else *id = sqlite3_last_insert_rowid(db);
  sqlite3_finalize(st);
done:
  if (rc) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    *existed = 0;
    return rc;
  }
  if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    rc = hs_diag_set(d, HS_EDB, "storing the convergence fit: %s", sqlite3_errmsg(db));
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  }
  return rc;
}

void hs_conv_source_text(const hs_conv_model *m, const char *model, const hs_conv_fit *fit, const char *file,
                         const char *spec, char *buf, size_t len) {
  if (!len) return;
  buf[0] = '\0';
  if (!m) return;
  int k;
  if (m != &hs_conv_analytic)
    k = snprintf(buf, len, "%s: trained, no fitted parameters", m->name);
  else if (file)
    k = snprintf(buf, len, "--convergence-params %s", file);
  else if (fit)
    k = snprintf(buf, len, "convergence_fit %lld: %s (%lld points, loss rmse %.4g%s)", (long long)fit->id, fit->source,
                 (long long)fit->points, fit->rmse, fit->beta0_scale != 1 ? ", beta0 rescaled to this data set" : "");
  else if (hs_conv_analytic_defaults(model))
    k = snprintf(buf, len, "built-in fit of %s to proxy runs (docs/convergence.md)", model);
  else
    k = snprintf(buf, len, "illustrative defaults, not fitted to any run (docs/convergence.md)");
  if (k < 0 || (size_t)k >= len) return;
  /* The keys set in the spec, which win over all of the above. */
  const char *colon = spec ? strchr(spec, ':') : NULL;
  if (!colon || !colon[1]) return;
  size_t used = (size_t)k;
  int n = snprintf(buf + used, len - used, "; set in --convergence:");
  if (n < 0 || (size_t)n >= len - used) return;
  used += (size_t)n;
  for (const char *p = colon + 1; *p && used + 2 < len;) {
    size_t kl = strcspn(p, "=,");
    n = snprintf(buf + used, len - used, " %.*s", (int)kl, p);
    if (n < 0 || (size_t)n >= len - used) return;
    used += (size_t)n;
    p += strcspn(p, ",");
    if (*p == ',') p++;
  }
}
