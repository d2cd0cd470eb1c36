#include "core/core_perfmodel.h"

#include <ctype.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_stats.h"

typedef struct form_info {
  const char *name;
  int nparams;
  const char *keys[HS_PERF_MAX_PARAMS];
} form_info;

static const form_info forms[HS_PERF_FORMS] = {
    [HS_PERF_LINEAR] = {.name = "linear", .nparams = 2, .keys = {"t0", "k"}},
    [HS_PERF_CUBIC] = {.name = "cubic", .nparams = 4, .keys = {"a0", "a1", "a2", "a3"}},
    [HS_PERF_PIECEWISE] = {.name = "piecewise", .nparams = 4, .keys = {"t0", "k1", "k2", "knee"}},
    [HS_PERF_SATURATING] = {.name = "saturating", .nparams = 3, .keys = {"t0", "k", "b0"}},
};

static const form_info *info(hs_perf_form f) {
  return (int)f >= 0 && (int)f < HS_PERF_FORMS ? &forms[f] : NULL;
}

const char *hs_perf_form_name(hs_perf_form f) { return info(f) ? info(f)->name : NULL; }
int hs_perf_form_nparams(hs_perf_form f) { return info(f) ? info(f)->nparams : 0; }
const char *hs_perf_param_key(hs_perf_form f, int i) {
  return info(f) && i >= 0 && i < info(f)->nparams ? info(f)->keys[i] : NULL;
}

int hs_perf_form_parse(const char *name, hs_perf_form *out) {
  for (int f = 0; f < HS_PERF_FORMS; f++)
    if (name && !strcmp(name, forms[f].name)) {
      *out = (hs_perf_form)f;
      return 0;
    }
  return HS_EINVAL;
}

/* The measured time at exactly batch b, or -1. */
static double point_at(const hs_perf_model *m, double b) {
  int lo = 0, hi = m->n_points - 1;
  if (hi < 0 || b != floor(b)) return -1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (m->pt_batch[mid] == b) return m->pt_s[mid];
    if (m->pt_batch[mid] < b) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

double hs_perf_eval(const hs_perf_model *m, double b) {
  double measured = point_at(m, b);
  if (measured >= 0) return measured;
  const double *p = m->p;
  double t = NAN;
  switch (m->form) {
  case HS_PERF_LINEAR: t = p[0] + p[1] * b; break;
  case HS_PERF_CUBIC: t = p[0] + b * (p[1] + b * (p[2] + b * p[3])); break;
  case HS_PERF_PIECEWISE:
    t = b <= p[3] ? p[0] + p[1] * b : p[0] + p[1] * p[3] + p[2] * (b - p[3]);
    break;
  case HS_PERF_SATURATING:
    /* -expm1(-x) = 1 - exp(-x) without cancellation at small x. */
    t = p[2] > 0 ? p[0] + p[1] * (b + p[2] * expm1(-b / p[2])) : p[0] + p[1] * b;
    break;
  }
  /* Below the smallest measured batch a fit extrapolates, and a curved form (a cubic through
   * noisy points) can rise as the batch shrinks; a smaller batch never takes longer than the
   * smallest one measured. */
  if (m->n_points > 0 && b < m->pt_batch[0] && t > m->pt_s[0]) t = m->pt_s[0];
  return t > 0 ? t : 0.0;
}

int hs_perf_params_json(const hs_perf_model *m, char *buf, size_t size) {
  const form_info *fi = info(m->form);
  if (!fi) return HS_EINVAL;
  size_t used = 0;
  for (int i = 0; i < fi->nparams; i++) {
    int k = snprintf(buf + used, size > used ? size - used : 0, "%s\"%s\":%.17g", i ? "," : "{",
                     fi->keys[i], m->p[i]);
    if (k < 0 || (size_t)k >= size - used) return HS_ELIMIT;
    used += (size_t)k;
  }
  if (used + 2 > size) return HS_ELIMIT;
  buf[used++] = '}';
  buf[used] = '\0';
  return (int)used;
}

static const char *skip_ws(const char *s) {
  while (isspace((unsigned char)*s)) s++;
  return s;
}

int hs_perf_params_parse(hs_perf_form f, const char *json, hs_perf_model *m, hs_diag *d) {
  const form_info *fi = info(f);
  if (!fi) return hs_diag_set(d, HS_EINVAL, "unknown performance-model form %d", (int)f);
  m->n_points = 0;
  int seen[HS_PERF_MAX_PARAMS] = {0};
  const char *s = skip_ws(json ? json : "");
  if (*s++ != '{') return hs_diag_set(d, HS_EINVAL, "%s params: expected a JSON object, got \"%s\"", fi->name, json ? json : "");
  s = skip_ws(s);
  while (*s != '}') {
    if (*s++ != '"') return hs_diag_set(d, HS_EINVAL, "%s params: expected a key in \"%s\"", fi->name, json);
    const char *k = s;
    while (*s && *s != '"') s++;
    if (!*s) return hs_diag_set(d, HS_EINVAL, "%s params: unterminated key in \"%s\"", fi->name, json);
    size_t klen = (size_t)(s - k);
    s = skip_ws(s + 1);
    if (*s++ != ':') return hs_diag_set(d, HS_EINVAL, "%s params: expected ':' in \"%s\"", fi->name, json);
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v))
      return hs_diag_set(d, HS_EINVAL, "%s params: expected a finite number in \"%s\"", fi->name, json);
    int idx = -1;
    for (int i = 0; i < fi->nparams; i++)
      if (strlen(fi->keys[i]) == klen && !strncmp(fi->keys[i], k, klen)) idx = i;
    if (idx < 0)
      return hs_diag_set(d, HS_EINVAL, "%s params: unexpected key \"%.*s\" in \"%s\"", fi->name, (int)klen, k, json);
    m->p[idx] = v;
    seen[idx] = 1;
    s = skip_ws(end);
    if (*s == ',') s = skip_ws(s + 1);
    else if (*s != '}') return hs_diag_set(d, HS_EINVAL, "%s params: expected ',' or '}' in \"%s\"", fi->name, json);
  }
  for (int i = 0; i < fi->nparams; i++)
    if (!seen[i]) return hs_diag_set(d, HS_EINVAL, "%s params: missing \"%s\" in \"%s\"", fi->name, fi->keys[i], json);
  for (int i = fi->nparams; i < HS_PERF_MAX_PARAMS; i++) m->p[i] = 0;
  m->form = f;
  return 0;
}

void hs_perf_describe_db(hs_store *s, char *buf, size_t size) {
  sqlite3 *db = hs_store_db(s);
  sqlite3_stmt *st = NULL;
  size_t used = 0;
  buf[0] = '\0';
  if (sqlite3_prepare_v2(db,
                         "SELECT d.id, d.name, (SELECT group_concat(model, ', ') FROM (SELECT "
                         "DISTINCT model FROM perf_model p WHERE p.device_id = d.id AND p.chosen "
                         "= 1 AND p.phase = 'step' ORDER BY model)) FROM device d ORDER BY d.id",
                         -1, &st, NULL) != SQLITE_OK) {
    snprintf(buf, size, "(cannot read the devices: %s)", sqlite3_errmsg(db));
    return;
  }
  while (sqlite3_step(st) == SQLITE_ROW && used + 1 < size) {
    const char *models = (const char *)sqlite3_column_text(st, 2);
    int k = snprintf(buf + used, size - used, "%s\"%s\" (id %lld: %s)", used ? "; " : "",
                     (const char *)sqlite3_column_text(st, 1), (long long)sqlite3_column_int64(st, 0),
                     models ? models : "no model calibrated");
    if (k < 0) break;
    used += (size_t)k < size - used ? (size_t)k : size - used - 1;
  }
  sqlite3_finalize(st);
  if (!used) snprintf(buf, size, "no calibrated devices");
}

/* The device's measured step medians for the model as m's points (hs_perf_load). */
static int load_points(hs_store *s, int64_t dev, const char *model, hs_perf_model *m, hs_diag *d) {
  sqlite3 *db = hs_store_db(s);
  sqlite3_stmt *st;
  m->n_points = 0;
  if (sqlite3_prepare_v2(db, "SELECT batch, median_s FROM calib_sample WHERE device_id = ? AND model = ?"
                         " AND phase = 'step' AND median_s > 0 ORDER BY batch, id DESC", -1, &st, NULL) != SQLITE_OK)
    return hs_diag_set(d, HS_EDB, "database %s: reading calib_sample: %s", hs_store_path(s), sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && m->n_points < HS_PERF_MAX_POINTS) {
    int b = sqlite3_column_int(st, 0);
    if (m->n_points && m->pt_batch[m->n_points - 1] == b) continue; /* the newest per batch */
    m->pt_batch[m->n_points] = b;
    m->pt_s[m->n_points++] = sqlite3_column_double(st, 1);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return hs_diag_set(d, HS_EDB, "database %s: reading calib_sample: %s", hs_store_path(s), sqlite3_errmsg(db));
  return 0;
}

int hs_perf_load(hs_store *s, const char *device, const char *model, hs_perf_model *out,
                 int64_t *device_id, hs_diag *d) {
  sqlite3 *db = hs_store_db(s);
  sqlite3_stmt *st = NULL;
  char *end;
  long long id = strtoll(device, &end, 10);
  int by_id = *device && !*end;
  /* The newest device of that name (or that id) with a chosen step fit for the model. */
  const char *sql =
      "SELECT p.form, p.params, p.max_batch, d.id FROM perf_model p JOIN device d ON d.id = "
      "p.device_id WHERE (d.name = ?1 OR (?2 AND d.id = ?3)) AND p.model = ?4 AND p.phase = "
      "'step' AND p.chosen = 1 ORDER BY d.id DESC, p.id DESC LIMIT 1";
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return hs_diag_set(d, HS_EDB, "database %s: reading perf_model: %s", hs_store_path(s), sqlite3_errmsg(db));
  sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, by_id);
  sqlite3_bind_int64(st, 3, id);
  sqlite3_bind_text(st, 4, model, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    hs_perf_form f = HS_PERF_LINEAR;
    const char *form = (const char *)sqlite3_column_text(st, 0);
    int prc = hs_perf_form_parse(form, &f);
    if (prc) prc = hs_diag_set(d, HS_EINVAL, "database %s: perf_model has an unknown form \"%s\"", hs_store_path(s), form ? form : "");
    if (!prc) prc = hs_perf_params_parse(f, (const char *)sqlite3_column_text(st, 1), out, d);
    int64_t dev = sqlite3_column_int64(st, 3);
    if (!prc) {
      out->max_batch = sqlite3_column_type(st, 2) == SQLITE_NULL ? 0 : sqlite3_column_int(st, 2);
      if (device_id) *device_id = dev;
    }
    sqlite3_finalize(st);
    return prc ? prc : load_points(s, dev, model, out, d);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE)
    return hs_diag_set(d, HS_EDB, "database %s: reading perf_model: %s", hs_store_path(s), sqlite3_errmsg(db));
  char held[700];
  hs_perf_describe_db(s, held, sizeof held);
  return hs_diag_set(d, HS_ENOTFOUND,
                     "no calibrated step model for %s on device \"%s\" in %s; it holds: %s",
                     model, device, hs_store_path(s), held);
}

int hs_comm_time_interp(sqlite3_stmt *st, double bytes, int extrapolate, double *t) {
  double b[128], v[128];
  int n = 0;
  while (n < 128 && sqlite3_step(st) == SQLITE_ROW) {
    double bi = sqlite3_column_double(st, 0);
    if (n && bi == b[n - 1]) continue; /* one sample per size: the first (newest) */
    b[n] = bi;
    v[n++] = sqlite3_column_double(st, 1);
  }
  if (n < 2 || !(bytes > 0) || (!extrapolate && !(bytes >= b[0] && bytes <= b[n - 1]))) return 0;
  int i = 0;
  while (i < n - 2 && b[i + 1] < bytes) i++;
  double k = log(v[i + 1] / v[i]) / log(b[i + 1] / b[i]);
  *t = v[i] * exp(k * log(bytes / b[i]));
  return isfinite(*t) && *t > 0;
}

/* The measured time of `op` on the device for a message of `bytes` (world size `world`), within
 * the measured sizes only. Returns 1 with *t, else 0. */
static int comm_time_at(sqlite3 *db, int64_t dev, const char *backend, const char *op, int world,
                        double bytes, double *t) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT bytes, median_s FROM comm_sample WHERE device_id = ?1 AND"
                         " backend = ?2 AND op = ?3 AND world_size = ?4 AND bytes > 0 AND median_s > 0"
                         " ORDER BY bytes, id DESC", -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, backend, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, op, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 4, world);
  int found = hs_comm_time_interp(st, bytes, 0, t);
  sqlite3_finalize(st);
  return found;
}

/* The device's newest 'allreduce_step' sample of backend at exactly `world` ranks whose size is
 * within 1% of `bytes`: the whole gradient's all-reduce as DDP issues it after a step. Its mean
 * (else its median, *is_mean 0) in *t and its step count in *steps. Returns 1 when found. */
static int step_time_at(sqlite3 *db, int64_t dev, const char *backend, int world, double bytes, double *t,
                        int *is_mean, int *steps) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT coalesce(mean_s, median_s), mean_s IS NOT NULL, count FROM comm_sample"
                         " WHERE device_id = ?1 AND backend = ?2 AND op = 'allreduce_step' AND world_size = ?3"
                         " AND abs(bytes - ?4) <= 0.01 * ?4 AND coalesce(mean_s, median_s) > 0"
                         " ORDER BY id DESC LIMIT 1", -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_int64(st, 1, dev);
  sqlite3_bind_text(st, 2, backend, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 3, world);
  sqlite3_bind_double(st, 4, bytes);
  int found = sqlite3_step(st) == SQLITE_ROW;
  if (found) {
    *t = sqlite3_column_double(st, 0);
    *is_mean = sqlite3_column_int(st, 1);
    *steps = sqlite3_column_int(st, 2);
  }
  sqlite3_finalize(st);
  return found && isfinite(*t);
}

hs_link_spec hs_ring_link(double alpha, double beta, int n) {
  return (hs_link_spec){.bandwidth = beta * 2.0 * (n - 1) / n, .latency = alpha / (2.0 * (n - 1))};
}

int hs_comm_link_load(hs_store *s, const char *device, const char *only, int world, double msg_bytes,
                      hs_link_spec *out, char *how, size_t how_len, hs_diag *d) {
  if (only && !*only) only = NULL;
  sqlite3 *db = hs_store_db(s);
  sqlite3_stmt *st = NULL;
  /* The newest device of that name with a fitted all-reduce model of exactly the run's world
   * size, else a p2p one, else an all-reduce one of the nearest world size; any backend. */
  const char *sql =
      "SELECT m.alpha_s, m.beta_bytes_per_s, m.op, m.world_size, m.backend, d.id FROM comm_model m"
      " JOIN device d ON d.id = m.device_id WHERE d.name = ?1 AND m.op IN ('p2p', 'allreduce')"
      " AND (?3 IS NULL OR m.backend = ?3)"
      " ORDER BY (m.op = 'allreduce' AND m.world_size = ?2) DESC, m.op = 'p2p' DESC,"
      " abs(m.world_size - ?2), d.id DESC, m.id DESC LIMIT 1";
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return hs_diag_set(d, HS_EDB, "database %s: reading comm_model: %s", hs_store_path(s), sqlite3_errmsg(db));
  sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, world);
  if (only) sqlite3_bind_text(st, 3, only, -1, SQLITE_STATIC);
  else sqlite3_bind_null(st, 3);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
      return hs_diag_set(d, HS_EDB, "database %s: reading comm_model: %s", hs_store_path(s), sqlite3_errmsg(db));
    return hs_diag_set(d, HS_ENOTFOUND, "no measured communication (comm_model, op p2p or allreduce%s%s) "
                       "for device \"%s\" in %s", only ? ", backend " : "", only ? only : "", device, hs_store_path(s));
  }
  double alpha = sqlite3_column_double(st, 0), beta = sqlite3_column_double(st, 1);
  char op[16], backend[16];
  snprintf(op, sizeof op, "%s", (const char *)sqlite3_column_text(st, 2));
  int w = sqlite3_column_int(st, 3);
  snprintf(backend, sizeof backend, "%s", (const char *)sqlite3_column_text(st, 4));
  int64_t dev = sqlite3_column_int64(st, 5);
  sqlite3_finalize(st);
  /* Where the run's message size was measured, the time measured there sets beta (the fitted
   * line misses single sizes by up to 3x where caches or protocols change). */
  double t_at;
  int is_mean = 0, steps = 0;
  /* The gradient's all-reduce as DDP issues it right after the backward costs more than the
   * isolated sweep at the same size (2.0 ms against 0.2 ms for gloo over 2 ranks), and the
   * simulator charges one such all-reduce per iteration: where it was measured at the run's
   * world size and gradient, its mean is the time, replayed as a ring of `world` ranks. */
  int step = msg_bytes > 0 && world > 1 && step_time_at(db, dev, backend, world, msg_bytes, &t_at, &is_mean, &steps);
  int at = step || (msg_bytes > 0 && comm_time_at(db, dev, backend, op, w, msg_bytes, &t_at));
  if (step) w = world;
  if (at) {
    if (!(alpha >= 0 && alpha < t_at)) alpha = 0;
    beta = msg_bytes / (t_at - alpha);
  }
  if ((step || strcmp(op, "allreduce") == 0) && w > 1) {
    *out = hs_ring_link(alpha, beta, w); /* the link whose ring reproduces the measured a' + n/b' */
  } else {
    out->latency = alpha;
    out->bandwidth = beta;
  }
  if (!(out->bandwidth > 0) || !isfinite(out->bandwidth) || !(out->latency >= 0))
    return hs_diag_set(d, HS_EINVAL, "device \"%s\" in %s: its %s %s model (alpha %g s, beta %g B/s) "
                       "gives no usable link", device, hs_store_path(s), backend, op, alpha, beta);
  if (how && step)
    snprintf(how, how_len, "%s allreduce_step, world size %d: the gradient's all-reduce as DDP issues it, its %s "
             "over %d step%s, at the run's message size", backend, w, is_mean ? "mean" : "median", steps,
             steps == 1 ? "" : "s");
  else if (how)
    snprintf(how, how_len, "%s %s, world size %d%s", backend, op, w,
             at ? ", beta at the run's message size" : "");
  return 0;
}

int hs_perf_jitter_load(hs_store *s, const char *device, const char *model, double *cv, hs_diag *d) {
  sqlite3 *db = hs_store_db(s);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "SELECT p90_s / p10_s FROM calib_sample JOIN device ON device.id ="
                         " calib_sample.device_id WHERE device.name = ?1 AND calib_sample.model = ?2"
                         " AND calib_sample.phase = 'step' AND p10_s > 0 AND p90_s >= p10_s",
                         -1, &st, NULL) != SQLITE_OK)
    return hs_diag_set(d, HS_EDB, "database %s: reading calib_sample: %s", hs_store_path(s), sqlite3_errmsg(db));
  sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
  double sig[256];
  int n = 0;
  while (n < 256 && sqlite3_step(st) == SQLITE_ROW)
    sig[n++] = log(sqlite3_column_double(st, 0)) / (2 * 1.2815515655446004);
  sqlite3_finalize(st);
  if (!n)
    return hs_diag_set(d, HS_ENOTFOUND, "no measured step spread (calib_sample p10_s, p90_s) of model %s "
                       "on device \"%s\" in %s", model, device, hs_store_path(s));
  double m = hs_median_inplace(sig, (size_t)n);
  *cv = sqrt(expm1(m * m));
  return 0;
}
