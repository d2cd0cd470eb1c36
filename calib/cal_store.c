#include "calib/cal_store.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_zoo.h"

static const char *const phase_names[HS_CAL_PHASES] = {
    [HS_CAL_FORWARD] = "forward", [HS_CAL_BACKWARD] = "backward",
    [HS_CAL_UPDATE] = "update", [HS_CAL_STEP] = "step",
};

const char *hs_cal_phase_name(hs_cal_phase p) {
  return (int)p >= 0 && p < HS_CAL_PHASES ? phase_names[p] : NULL;
}

static int db_fail(hs_store *s, hs_diag *d, const char *what) {
  return hs_diag_set(d, HS_EDB, "database %s: %s: %s", hs_store_path(s), what,
                     sqlite3_errmsg(hs_store_db(s)));
}

static int prep(hs_store *s, sqlite3_stmt **st, const char *sql, hs_diag *d) {
  if (sqlite3_prepare_v2(hs_store_db(s), sql, -1, st, NULL) != SQLITE_OK) return db_fail(s, d, sql);
  return 0;
}

/* Steps a statement that returns no rows (or whose rows are ignored) and finalizes it. */
static int run(hs_store *s, sqlite3_stmt *st, const char *what, hs_diag *d) {
  int rc = sqlite3_step(st);
  int ok = rc == SQLITE_DONE || rc == SQLITE_ROW;
  if (!ok) db_fail(s, d, what);
  sqlite3_finalize(st);
  return ok ? 0 : HS_EDB;
}

/* Steps a prepared count query and finalizes it: *count its one value (0 after a failure). */
static int read_count(hs_store *s, sqlite3_stmt *st, const char *what, int *count, hs_diag *d) {
  int rc = sqlite3_step(st);
  *count = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? 0 : db_fail(s, d, what);
}

static int exec(hs_store *s, const char *sql, hs_diag *d) {
  if (sqlite3_exec(hs_store_db(s), sql, NULL, NULL, NULL) != SQLITE_OK) return db_fail(s, d, sql);
  return 0;
}

/* Each writing function below is one transaction of its own, or, when the caller already holds
 * one (hs_cal_tx_begin: `hetsim calib import` stores a whole profile at once), a savepoint
 * inside it, so that a failure undoes this function's writes and leaves the caller to decide
 * about the rest. *nested says which, for the matching commit or rollback. */
static int tx_begin(hs_store *s, int *nested, hs_diag *d) {
  *nested = !sqlite3_get_autocommit(hs_store_db(s));
  return exec(s, *nested ? "SAVEPOINT hs_cal" : "BEGIN IMMEDIATE", d);
}

static int tx_commit(hs_store *s, int nested, hs_diag *d) {
  return exec(s, nested ? "RELEASE hs_cal" : "COMMIT", d);
}

static void rollback(hs_store *s, int nested) {
  sqlite3_exec(hs_store_db(s), nested ? "ROLLBACK TO hs_cal; RELEASE hs_cal" : "ROLLBACK", NULL, NULL, NULL);
}

int hs_cal_tx_begin(hs_store *s, int *nested, hs_diag *d) { return tx_begin(s, nested, d); }

int hs_cal_tx_commit(hs_store *s, int nested, hs_diag *d) {
  int rc = tx_commit(s, nested, d);
  if (rc) rollback(s, nested);
  return rc;
}

void hs_cal_tx_rollback(hs_store *s, int nested) { rollback(s, nested); }

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v) {
  if (v && *v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}
static void bind_pos_or_null(sqlite3_stmt *st, int i, int64_t v) {
  if (v > 0) sqlite3_bind_int64(st, i, v);
  else sqlite3_bind_null(st, i);
}
static void bind_double_or_null(sqlite3_stmt *st, int i, double v) {
  if (isfinite(v)) sqlite3_bind_double(st, i, v);
  else sqlite3_bind_null(st, i);
}

/* The summary of one timed point, bound to ?i (median_s), ?i+1 (p10_s), ?i+2 (p90_s) and ?i+3
 * (count): the same four columns in calib_sample and comm_sample. */
static void bind_stats(sqlite3_stmt *st, int i, const hs_cal_stats *cs) {
  sqlite3_bind_double(st, i, cs->median_s);
  bind_double_or_null(st, i + 1, cs->p10_s);
  bind_double_or_null(st, i + 2, cs->p90_s);
  sqlite3_bind_int(st, i + 3, cs->count);
}

int hs_cal_store_device(hs_store *s, const hs_cal_device *dev, int64_t *id, hs_diag *d) {
  return hs_cal_store_device_from(s, dev, NULL, id, d);
}

int hs_cal_store_device_from(hs_store *s, const hs_cal_device *dev, const char *source, int64_t *id,
                             hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "SELECT id FROM device WHERE kind = ?1 AND name = ?2 AND host IS ?3 AND ordinal IS "
                "?4 AND sm_partition IS ?5 AND uuid IS ?6 AND source IS ?7 ORDER BY id DESC LIMIT 1",
                d);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, dev->kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, dev->name, -1, SQLITE_STATIC);
  bind_text_or_null(st, 3, dev->host);
  if (dev->ordinal >= 0) sqlite3_bind_int(st, 4, dev->ordinal);
  else sqlite3_bind_null(st, 4);
  bind_pos_or_null(st, 5, dev->sm_partition);
  bind_text_or_null(st, 6, dev->uuid);
  bind_text_or_null(st, 7, source);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return db_fail(s, d, "looking up the device");
  if ((rc = prep(s, &st,
                 "INSERT INTO device(name, uuid, kind, ordinal, sm_count, sm_partition, "
                 "memory_bytes, compute_capability, clock_sm_mhz, clock_mem_mhz, driver_version, "
                 "cuda_version, cudnn_version, nccl_version, blas, host, source) VALUES (?1, ?2, "
                 "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                 d)))
    return rc;
  sqlite3_bind_text(st, 1, dev->name, -1, SQLITE_STATIC);
  bind_text_or_null(st, 2, dev->uuid);
  sqlite3_bind_text(st, 3, dev->kind, -1, SQLITE_STATIC);
  if (dev->ordinal >= 0) sqlite3_bind_int(st, 4, dev->ordinal);
  bind_pos_or_null(st, 5, dev->sm_count);
  bind_pos_or_null(st, 6, dev->sm_partition);
  bind_pos_or_null(st, 7, dev->memory_bytes);
  bind_text_or_null(st, 8, dev->compute_capability);
  bind_pos_or_null(st, 9, dev->clock_sm_mhz);
  bind_pos_or_null(st, 10, dev->clock_mem_mhz);
  bind_text_or_null(st, 11, dev->driver_version);
  bind_text_or_null(st, 12, dev->cuda_version);
  bind_text_or_null(st, 13, dev->cudnn_version);
  bind_text_or_null(st, 14, dev->nccl_version);
  bind_text_or_null(st, 15, dev->blas);
  bind_text_or_null(st, 16, dev->host);
  bind_text_or_null(st, 17, source);
  if ((rc = run(s, st, "inserting the device", d))) return rc;
  *id = sqlite3_last_insert_rowid(hs_store_db(s));
  return 0;
}

int hs_cal_store_model(hs_store *s, const char *model, hs_diag *d) {
  hs_model_stats ms;
  const hs_model_info *mi = hs_zoo_find(model);
  int rc = mi ? hs_zoo_stats(model, &ms, d) : hs_diag_set(d, HS_EINVAL, "unknown model \"%s\"", model);
  if (rc) return rc;
  hs_cal_model_row row = {.params = ms.params, .grad_bytes = ms.grad_bytes,
                          .flops_per_sample = ms.train_flops_per_sample};
  snprintf(row.name, sizeof row.name, "%s", model);
  snprintf(row.description, sizeof row.description, "%s", mi->description);
  return hs_cal_store_model_row(s, &row, d);
}

int hs_cal_store_model_row(hs_store *s, const hs_cal_model_row *m, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "INSERT INTO model(name, params, grad_bytes, flops_per_sample, description, source) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(name) DO NOTHING",
                d);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, m->name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, m->params);
  sqlite3_bind_int64(st, 3, m->grad_bytes);
  bind_double_or_null(st, 4, m->flops_per_sample);
  bind_text_or_null(st, 5, m->description);
  bind_text_or_null(st, 6, m->source);
  return run(s, st, "inserting the model", d);
}

int hs_cal_load_model(hs_store *s, const char *name, hs_cal_model_row *m, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  memset(m, 0, sizeof *m);
  int rc = prep(s, &st,
                "SELECT name, params, grad_bytes, flops_per_sample, description, source FROM model "
                "WHERE name = ?1",
                d);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const char *desc = (const char *)sqlite3_column_text(st, 4), *src = (const char *)sqlite3_column_text(st, 5);
    snprintf(m->name, sizeof m->name, "%s", (const char *)sqlite3_column_text(st, 0));
    m->params = sqlite3_column_int64(st, 1);
    m->grad_bytes = sqlite3_column_int64(st, 2);
    m->flops_per_sample = sqlite3_column_type(st, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 3);
    snprintf(m->description, sizeof m->description, "%s", desc ? desc : "");
    snprintf(m->source, sizeof m->source, "%s", src ? src : "");
  }
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return 0;
  if (rc != SQLITE_DONE) return db_fail(s, d, "reading the model table");
  return hs_diag_set(d, HS_ENOTFOUND, "no model \"%s\" in %s", name, hs_store_path(s));
}

void hs_cal_imported_models(hs_store *s, char *buf, size_t size) {
  sqlite3_stmt *st = NULL;
  size_t l = 0;
  buf[0] = '\0';
  if (sqlite3_prepare_v2(hs_store_db(s), "SELECT name FROM model WHERE source IS NOT NULL ORDER BY name", -1, &st, NULL) !=
      SQLITE_OK)
    return;
  while (sqlite3_step(st) == SQLITE_ROW && l + 1 < size) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    l += (size_t)snprintf(buf + l, size - l, "%s%s", l ? ", " : "", name ? name : "");
  }
  sqlite3_finalize(st);
}

int hs_cal_point_stored(hs_store *s, int64_t dev, const char *model, int batch, int *stored,
                        hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "SELECT count(DISTINCT phase) FROM calib_sample WHERE device_id = ?1 AND model = "
                "?2 AND batch = ?3",
                d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 3, batch);
  int phases;
  rc = read_count(s, st, "reading calib_sample", &phases, d);
  *stored = phases == HS_CAL_PHASES;
  return rc;
}

int hs_cal_store_sample(hs_store *s, int64_t dev, const char *model, int batch, hs_cal_phase phase,
                        const hs_cal_stats *cs, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "INSERT INTO calib_sample(device_id, model, batch, phase, median_s, p10_s, p90_s, "
                "count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 3, batch);
  sqlite3_bind_text(st, 4, phase_names[phase], -1, SQLITE_STATIC);
  bind_stats(st, 5, cs);
  return run(s, st, "inserting calib_sample", d);
}

int hs_cal_store_point(hs_store *s, int64_t dev, const char *model, int batch,
                       const hs_cal_stats stv[HS_CAL_PHASES], hs_diag *d) {
  int nested, rc = tx_begin(s, &nested, d);
  if (rc) return rc;
  sqlite3_stmt *st = NULL;
  if ((rc = prep(s, &st, "DELETE FROM calib_sample WHERE device_id = ?1 AND model = ?2 AND batch = ?3", d))) goto fail;
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 3, batch);
  if ((rc = run(s, st, "replacing calib_sample rows", d))) goto fail;
  for (int p = 0; p < HS_CAL_PHASES; p++)
    if ((rc = hs_cal_store_sample(s, dev, model, batch, (hs_cal_phase)p, &stv[p], d))) goto fail;
  if ((rc = tx_commit(s, nested, d))) goto fail;
  return 0;
fail:
  rollback(s, nested);
  return rc;
}

/* Runs the two deletions sqls[0..2) with ?1 = dev, ?2 = key, in one transaction. */
static int forget(hs_store *s, const char *const sqls[2], int64_t dev, const char *key, hs_diag *d) {
  int nested, rc = tx_begin(s, &nested, d);
  if (rc) return rc;
  for (int i = 0; i < 2; i++) {
    sqlite3_stmt *st = NULL;
    if ((rc = prep(s, &st, sqls[i], d))) goto fail;
    sqlite3_bind_int64(st, 1, dev);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    if ((rc = run(s, st, sqls[i], d))) goto fail;
  }
  if ((rc = tx_commit(s, nested, d))) goto fail;
  return 0;
fail:
  rollback(s, nested);
  return rc;
}

int hs_cal_forget(hs_store *s, int64_t dev, const char *model, hs_diag *d) {
  static const char *const sqls[] = {
      "DELETE FROM calib_sample WHERE device_id = ?1 AND model = ?2",
      "DELETE FROM perf_model WHERE device_id = ?1 AND model = ?2",
  };
  return forget(s, sqls, dev, model, d);
}

int hs_cal_forget_comm(hs_store *s, int64_t dev, const char *backend, hs_diag *d) {
  static const char *const sqls[] = {
      "DELETE FROM comm_sample WHERE device_id = ?1 AND backend = ?2",
      "DELETE FROM comm_model WHERE device_id = ?1 AND backend = ?2",
  };
  return forget(s, sqls, dev, backend, d);
}

/* Reads (x, y) pairs from a prepared statement into fresh arrays. */
static int read_pairs(hs_store *s, sqlite3_stmt *st, double **x, double **y, int *n, hs_diag *d) {
  int cap = 16, k = 0, rc, oom = 0;
  double *xs = malloc((size_t)cap * sizeof *xs), *ys = malloc((size_t)cap * sizeof *ys);
  while (xs && ys && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (k == cap) {
      cap *= 2;
      double *nx = realloc(xs, (size_t)cap * sizeof *xs);
      if (nx) xs = nx;
      double *ny = realloc(ys, (size_t)cap * sizeof *ys);
      if (ny) ys = ny;
      if (!nx || !ny) {
        oom = 1;
        break;
      }
    }
    xs[k] = sqlite3_column_double(st, 0);
    ys[k] = sqlite3_column_double(st, 1);
    k++;
  }
  rc = sqlite3_errcode(hs_store_db(s));
  sqlite3_finalize(st);
  if (!xs || !ys || oom) {
    free(xs);
    free(ys);
    return hs_diag_set(d, HS_ENOMEM, "out of memory reading samples");
  }
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    free(xs);
    free(ys);
    return db_fail(s, d, "reading samples");
  }
  *x = xs, *y = ys, *n = k;
  return 0;
}

int hs_cal_load_samples(hs_store *s, int64_t dev, const char *model, hs_cal_phase phase,
                        double **batch, double **time, int *n, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "SELECT batch, median_s FROM calib_sample WHERE id IN (SELECT max(id) FROM "
                "calib_sample WHERE device_id = ?1 AND model = ?2 AND phase = ?3 GROUP BY batch) "
                "ORDER BY batch",
                d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, phase_names[phase], -1, SQLITE_STATIC);
  return read_pairs(s, st, batch, time, n, d);
}

int hs_cal_store_fits(hs_store *s, int64_t dev, const char *model, hs_cal_phase phase,
                      const hs_fit_set *fs, int max_batch, hs_diag *d) {
  int nested, rc = tx_begin(s, &nested, d);
  if (rc) return rc;
  sqlite3_stmt *st = NULL;
  if ((rc = prep(s, &st, "DELETE FROM perf_model WHERE device_id = ?1 AND model = ?2 AND phase = ?3", d))) goto fail;
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, phase_names[phase], -1, SQLITE_STATIC);
  if ((rc = run(s, st, "replacing perf_model rows", d))) goto fail;
  for (int f = 0; f < HS_PERF_FORMS; f++) {
    const hs_fit_result *r = &fs->r[f];
    if (!r->ok) continue;
    char params[512];
    if (hs_perf_params_json(&r->model, params, sizeof params) < 0) {
      rc = hs_diag_set(d, HS_ELIMIT, "parameters of the %s fit do not fit in %zu bytes", hs_perf_form_name((hs_perf_form)f), sizeof params);
      goto fail;
    }
    if ((rc = prep(s, &st,
                   "INSERT INTO perf_model(device_id, model, phase, form, params, r2, "
                   "heldout_rel_error, max_batch, chosen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                   d)))
      goto fail;
    sqlite3_bind_int64(st, 1, dev);
    sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, phase_names[phase], -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, hs_perf_form_name((hs_perf_form)f), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, params, -1, SQLITE_TRANSIENT);
    bind_double_or_null(st, 6, r->r2);
    bind_double_or_null(st, 7, r->heldout);
    bind_pos_or_null(st, 8, max_batch);
    sqlite3_bind_int(st, 9, f == fs->chosen);
    if ((rc = run(s, st, "inserting perf_model", d))) goto fail;
  }
  if ((rc = tx_commit(s, nested, d))) goto fail;
  return 0;
fail:
  rollback(s, nested);
  return rc;
}

int hs_cal_fit_points(hs_cal_phase phase, double *b, double *t, int n, int oom_batch, int max_batch,
                      hs_fit_set *fs, int *fitted, char *why, size_t why_size, hs_diag *d) {
  *fitted = 0;
  /* Points at or beyond a memory limit seen now (stored by an earlier run) are left out. */
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!oom_batch || b[i] < oom_batch) b[k] = b[i], t[k] = t[i], k++;
  hs_diag fd = {0};
  int rc = hs_fit_select(b, t, k, fs, &fd);
  if (rc == HS_EINVAL && phase == HS_CAL_STEP && k >= 1 && k < HS_FIT_MIN_POINTS && max_batch > 0 &&
      b[k - 1] <= max_batch) {
    /* Memory ran out before a third batch size: the batches a run may use are few, and the
     * line through the measured ones (flat through one) stands for them, not judged. */
    memset(fs, 0, sizeof *fs);
    for (int f = 0; f < HS_PERF_FORMS; f++) {
      fs->r[f].heldout = fs->r[f].r2 = NAN;
      fs->r[f].model.form = (hs_perf_form)f;
      snprintf(fs->r[f].why, sizeof fs->r[f].why, "%d batch sizes before the memory limit", k);
    }
    hs_fit_result *r = &fs->r[HS_PERF_LINEAR];
    r->ok = 1;
    r->model.p[1] = k == 2 ? (t[1] - t[0]) / (b[1] - b[0]) : 0;
    r->model.p[0] = t[0] - r->model.p[1] * b[0];
    snprintf(r->why, sizeof r->why, "the line through %d batch size%s before the memory limit "
             "(batch %d); not judged on held-out sizes", k, k == 1 ? "" : "s", max_batch + 1);
    fs->chosen = HS_PERF_LINEAR;
    rc = 0;
  }
  if (rc == HS_EINVAL) {
    snprintf(why, why_size, "%s: %.200s", phase_names[phase], fd.msg);
    return 0;
  }
  if (rc) return hs_diag_set(d, rc, "fitting %s: %s", phase_names[phase], fd.msg);
  *fitted = 1;
  return 0;
}

int hs_cal_refit(hs_store *s, int64_t dev, const char *model, hs_cal_phase phase, int oom_batch,
                 int max_batch, hs_fit_set *fs, int *fitted, char *why, size_t why_size, hs_diag *d) {
  double *b = NULL, *t = NULL;
  int n = 0;
  *fitted = 0;
  int rc = hs_cal_load_samples(s, dev, model, phase, &b, &t, &n, d);
  if (rc) return rc;
  int ok = 0;
  hs_diag fd = {0};
  rc = hs_cal_fit_points(phase, b, t, n, oom_batch, max_batch, fs, &ok, why, why_size, &fd);
  free(b);
  free(t);
  if (rc) return hs_diag_set(d, rc, "%s: %s", model, fd.msg);
  if (!ok) return 0;
  if ((rc = hs_cal_store_fits(s, dev, model, phase, fs, max_batch, d))) return rc;
  *fitted = 1;
  return 0;
}

static void bind_comm_key(sqlite3_stmt *st, const hs_comm_key *k) {
  sqlite3_bind_int64(st, 1, k->device);
  sqlite3_bind_text(st, 2, k->backend, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, k->op, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 4, k->world_size);
}

int hs_cal_comm_stored(hs_store *s, const hs_comm_key *k, int64_t bytes, int *stored, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "SELECT count(*) FROM comm_sample WHERE device_id = ?1 AND backend = ?2 AND op = "
                "?3 AND world_size = ?4 AND bytes = ?5",
                d);
  if (rc) return rc;
  bind_comm_key(st, k);
  sqlite3_bind_int64(st, 5, bytes);
  int rows;
  rc = read_count(s, st, "reading comm_sample", &rows, d);
  *stored = rows > 0;
  return rc;
}

int hs_cal_store_comm_sample(hs_store *s, const hs_comm_key *k, int64_t bytes,
                             const hs_cal_stats *cs, hs_diag *d) {
  return hs_cal_store_comm_sample_mean(s, k, bytes, cs, NAN, d);
}

int hs_cal_store_comm_sample_mean(hs_store *s, const hs_comm_key *k, int64_t bytes,
                                  const hs_cal_stats *cs, double mean_s, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "INSERT INTO comm_sample(device_id, backend, op, world_size, bytes, median_s, "
                "p10_s, p90_s, count, mean_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                d);
  if (rc) return rc;
  bind_comm_key(st, k);
  sqlite3_bind_int64(st, 5, bytes);
  bind_stats(st, 6, cs);
  bind_double_or_null(st, 10, mean_s);
  return run(s, st, "inserting comm_sample", d);
}

int hs_cal_load_comm(hs_store *s, const hs_comm_key *k, double **bytes, double **time, int *n,
                     hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "SELECT bytes, median_s FROM comm_sample WHERE id IN (SELECT max(id) FROM "
                "comm_sample WHERE device_id = ?1 AND backend = ?2 AND op = ?3 AND world_size = "
                "?4 GROUP BY bytes) ORDER BY bytes",
                d);
  if (rc) return rc;
  bind_comm_key(st, k);
  return read_pairs(s, st, bytes, time, n, d);
}

int hs_cal_store_comm_model(hs_store *s, const hs_comm_key *k, double alpha_s, double beta,
                            double r2, hs_diag *d) {
  int nested, rc = tx_begin(s, &nested, d);
  if (rc) return rc;
  sqlite3_stmt *st = NULL;
  if ((rc = prep(s, &st,
                 "DELETE FROM comm_model WHERE device_id = ?1 AND backend = ?2 AND op = ?3 AND "
                 "world_size = ?4",
                 d)))
    goto fail;
  bind_comm_key(st, k);
  if ((rc = run(s, st, "replacing comm_model rows", d))) goto fail;
  if ((rc = prep(s, &st,
                 "INSERT INTO comm_model(device_id, backend, op, world_size, alpha_s, "
                 "beta_bytes_per_s, r2) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                 d)))
    goto fail;
  bind_comm_key(st, k);
  sqlite3_bind_double(st, 5, alpha_s);
  sqlite3_bind_double(st, 6, beta);
  bind_double_or_null(st, 7, r2);
  if ((rc = run(s, st, "inserting comm_model", d))) goto fail;
  if ((rc = tx_commit(s, nested, d))) goto fail;
  return 0;
fail:
  rollback(s, nested);
  return rc;
}

int hs_cal_refit_comm(hs_store *s, const hs_comm_key *k, double *alpha_s, double *beta, double *r2,
                      int *fitted, char *why, size_t why_size, hs_diag *d) {
  double *b = NULL, *t = NULL;
  int n = 0;
  *fitted = 0;
  int rc = hs_cal_load_comm(s, k, &b, &t, &n, d);
  if (rc) return rc;
  hs_diag fd = {0};
  rc = hs_fit_comm(b, t, n, alpha_s, beta, r2, &fd);
  free(b);
  free(t);
  if (rc) {
    snprintf(why, why_size, "%.250s", fd.msg);
    return 0;
  }
  if ((rc = hs_cal_store_comm_model(s, k, *alpha_s, *beta, *r2, d))) return rc;
  *fitted = 1;
  return 0;
}

/* --- compress_sample ------------------------------------------------------------------------ */

int hs_cal_forget_compress(hs_store *s, int64_t dev, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st, "DELETE FROM compress_sample WHERE device_id = ?1", d);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, dev);
  return run(s, st, "deleting compress_sample", d);
}

/* compress_sample's key into ?1 to ?4. */
static void bind_compress_key(sqlite3_stmt *st, int64_t dev, const char *compressor, double setting, int64_t elems) {
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, compressor, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 3, setting);
  sqlite3_bind_int64(st, 4, elems);
}

int hs_cal_compress_stored(hs_store *s, int64_t dev, const char *compressor, double setting, int64_t elems,
                           int *stored, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "SELECT count(*) FROM compress_sample WHERE device_id = ?1 AND compressor = ?2 AND setting = ?3 "
                "AND elems = ?4",
                d);
  if (rc) return rc;
  bind_compress_key(st, dev, compressor, setting, elems);
  int rows;
  rc = read_count(s, st, "reading compress_sample", &rows, d);
  *stored = rows > 0;
  return rc;
}

int hs_cal_store_compress_sample(hs_store *s, int64_t dev, const char *compressor, double setting, int64_t elems,
                                 const hs_cal_stats *cs, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  int rc = prep(s, &st,
                "INSERT INTO compress_sample(device_id, compressor, setting, elems, median_s, p10_s, p90_s, count) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                d);
  if (rc) return rc;
  bind_compress_key(st, dev, compressor, setting, elems);
  bind_stats(st, 5, cs);
  return run(s, st, "inserting compress_sample", d);
}
