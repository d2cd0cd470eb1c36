#include "calib/cal_import.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_json.h"
#include "nn/nn_zoo.h"

/* ---- the document, checked ---- */

typedef struct prof_compute {
  int batch;
  hs_cal_phase phase;
  hs_cal_stats st;
  int index;       /* in $.compute; -1 for a step derived from the phases */
} prof_compute;

typedef struct prof_comm {
  const char *backend, *op; /* static strings */
  int world;
  int64_t bytes;
  hs_cal_stats st;
  double mean_s;            /* s; NaN when the entry gives none */
  int batch, buckets;       /* an allreduce_step entry's; 0 when not given */
  int index;
} prof_comm;

typedef struct profile {
  const char *tool, *created_at;
  const char *mode, *dtype, *optimizer;
  int world, concurrent;
  const char *torch_version;
  int threads;
  const char *origin, *input, *loss, *description;
  const char *src_repository, *src_commit, *src_file, *src_licence;
  hs_cal_device dev;
  hs_cal_model_row model;
  int oom_batch;
  prof_compute *compute; /* given entries, then derived steps */
  int n_compute;
  prof_comm *comm;
  int n_comm;
  char hash[17];
  char source[1024];     /* device.source */
} profile;

/* Messages name the document and the JSON path of the field: "FILE: $.compute[3].median_s:
 * expected ..., got ...". */
typedef struct checker {
  const char *name;
  hs_diag *d;
} checker;

static int bad(checker *x, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(checker *x, const char *path, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hs_diag_set(x->d, HS_EINVAL, "%s: %s: %s", x->name, path, msg);
}

static void join(char *out, size_t size, const char *path, const char *key) {
  snprintf(out, size, "%s.%s", path, key);
}

/* "expected WHAT, got X", with a hint when a number was written with a unit. */
static int bad_value(checker *x, const char *path, const char *what, const hs_json_value *v) {
  char got[64];
  hs_json_describe(v, got, sizeof got);
  int unit = v && v->type == HS_JSON_STRING && strstr(what, "number");
  return bad(x, path, "expected %s, got %s%s", what, got,
             unit ? " (numbers are plain JSON numbers in the profile's unit: s, bytes, FLOP; no suffixes)" : "");
}

/* Every key of obj must be one of allowed (NULL-terminated) or "extra", which is free-form. */
static int keys_ok(checker *x, const hs_json_value *obj, const char *path, const char *const *allowed) {
  for (int i = 0; i < obj->n; i++) {
    const char *k = obj->keys[i];
    int ok = !strcmp(k, "extra");
    for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(k, *a);
    if (ok) continue;
    char list[512] = "";
    size_t l = 0;
    for (const char *const *a = allowed; *a && l < sizeof list; a++)
      l += (size_t)snprintf(list + l, sizeof list - l, "%s%s", a == allowed ? "" : ", ", *a);
    char p[256];
    join(p, sizeof p, path, k);
    return bad(x, p, "unknown key; expected one of %s (free-form data belongs under \"extra\")", list);
  }
  return 0;
}

/* The member key of obj, NULL when absent or null; a required one that is absent is an error. */
static int member(checker *x, const hs_json_value *obj, const char *path, const char *key, int required,
                  const hs_json_value **out) {
  const hs_json_value *v = hs_json_get(obj, key);
  *out = v && v->type != HS_JSON_NULL ? v : NULL;
  if (required && !*out) {
    char p[256];
    join(p, sizeof p, path, key);
    return v ? bad(x, p, "required, got null") : bad(x, p, "missing (required)");
  }
  return 0;
}

static int object_at(checker *x, const hs_json_value *obj, const char *path, const char *key, int required,
                     const hs_json_value **out) {
  int rc = member(x, obj, path, key, required, out);
  if (rc || !*out) return rc;
  char p[256];
  join(p, sizeof p, path, key);
  return (*out)->type == HS_JSON_OBJECT ? 0 : bad_value(x, p, "an object", *out);
}

/* A string member; max_len 0 = any length. Names may not hold control characters. */
static int string_at(checker *x, const hs_json_value *obj, const char *path, const char *key, int required,
                     size_t max_len, const char **out) {
  const hs_json_value *v;
  *out = NULL;
  int rc = member(x, obj, path, key, required, &v);
  if (rc || !v) return rc;
  char p[256];
  join(p, sizeof p, path, key);
  if (v->type != HS_JSON_STRING) return bad_value(x, p, "a string", v);
  if (required && !v->len) return bad_value(x, p, "a non-empty string", v);
  if (max_len && v->len > max_len) return bad(x, p, "expected at most %zu characters, got %zu", max_len, v->len);
  for (size_t i = 0; i < v->len; i++)
    if ((unsigned char)v->string[i] < 0x20) return bad(x, p, "expected a string without control characters");
  *out = v->string;
  return 0;
}

static int enum_at(checker *x, const hs_json_value *obj, const char *path, const char *key,
                   const char *const *allowed, const char **out) {
  const hs_json_value *v;
  int rc = member(x, obj, path, key, 1, &v);
  if (rc) return rc;
  char what[256] = "one of";
  size_t l = strlen(what);
  for (const char *const *a = allowed; *a; a++) {
    if (v->type == HS_JSON_STRING && !strcmp(v->string, *a)) {
      *out = *a; /* the static string */
      return 0;
    }
    l += (size_t)snprintf(what + l, sizeof what - l, "%s \"%s\"", a == allowed ? "" : ",", *a);
    if (l >= sizeof what) l = sizeof what - 1;
  }
  char p[256];
  join(p, sizeof p, path, key);
  return bad_value(x, p, what, v);
}

/* An integer member in [min, max]; JSON numbers with an integral value (64.0) count. */
static int int_at(checker *x, const hs_json_value *obj, const char *path, const char *key, int required,
                  int64_t min, int64_t max, const char *what, int64_t *out, int *present) {
  const hs_json_value *v;
  *present = 0;
  int rc = member(x, obj, path, key, required, &v);
  if (rc || !v) return rc;
  char p[256];
  join(p, sizeof p, path, key);
  int64_t i;
  if (v->type != HS_JSON_NUMBER) return bad_value(x, p, what, v);
  if (v->is_integer) i = v->integer;
  else if (v->number == floor(v->number) && fabs(v->number) <= 9007199254740992.0) i = (int64_t)v->number;
  else return bad_value(x, p, what, v);
  if (i < min || i > max) return bad_value(x, p, what, v);
  *out = i;
  *present = 1;
  return 0;
}

/* A time in seconds: a finite number > 0. */
static int time_at(checker *x, const hs_json_value *obj, const char *path, const char *key, int required,
                   double *out) {
  const hs_json_value *v;
  *out = NAN;
  int rc = member(x, obj, path, key, required, &v);
  if (rc || !v) return rc;
  char p[256];
  join(p, sizeof p, path, key);
  if (v->type != HS_JSON_NUMBER || !(v->number > 0)) return bad_value(x, p, "a positive number of seconds", v);
  *out = v->number;
  return 0;
}

/* The summary of one timing: median_s, p10_s, p90_s and count, p10 <= median <= p90. */
static int stats_at(checker *x, const hs_json_value *e, const char *path, hs_cal_stats *st) {
  int rc, present;
  int64_t count = 0;
  if ((rc = time_at(x, e, path, "median_s", 1, &st->median_s)) || (rc = time_at(x, e, path, "p10_s", 0, &st->p10_s)) ||
      (rc = time_at(x, e, path, "p90_s", 0, &st->p90_s)) ||
      (rc = int_at(x, e, path, "count", 1, 1, INT32_MAX, "a positive integer (timed repetitions)", &count, &present)))
    return rc;
  st->count = (int)count;
  char p[256];
  if (!isnan(st->p10_s) && st->p10_s > st->median_s) {
    join(p, sizeof p, path, "p10_s");
    return bad(x, p, "expected at most median_s (%.9g), got %.9g", st->median_s, st->p10_s);
  }
  if (!isnan(st->p90_s) && st->p90_s < st->median_s) {
    join(p, sizeof p, path, "p90_s");
    return bad(x, p, "expected at least median_s (%.9g), got %.9g", st->median_s, st->p90_s);
  }
  return 0;
}

/* What a pooled timing was pooled from (docs/profile.md, tools/hetsim_profile.py --rounds and
 * --concurrent): "processes", a positive integer, and "process_medians_s", a non-empty array of
 * positive seconds, each optional. Checked, not stored: the fit uses the pooled summary. */
static int pooled_at(checker *x, const hs_json_value *e, const char *path) {
  int64_t n = 0;
  int present;
  int rc = int_at(x, e, path, "processes", 0, 1, INT32_MAX, "a positive integer (processes pooled)", &n, &present);
  const hs_json_value *v;
  if (rc || (rc = member(x, e, path, "process_medians_s", 0, &v)) || !v) return rc;
  char p[256];
  join(p, sizeof p, path, "process_medians_s");
  if (v->type != HS_JSON_ARRAY) return bad_value(x, p, "a non-empty array of positive numbers of seconds", v);
  if (v->n < 1) return bad(x, p, "expected a non-empty array of positive numbers of seconds, got []");
  for (int i = 0; i < v->n; i++) {
    if (v->items[i].type == HS_JSON_NUMBER && v->items[i].number > 0) continue;
    char q[300];
    snprintf(q, sizeof q, "%s[%d]", p, i);
    return bad_value(x, q, "a positive number of seconds", &v->items[i]);
  }
  return 0;
}

/* ISO-8601 UTC: YYYY-MM-DDTHH:MM:SS, optional fraction, then Z or +00:00. */
static int iso_utc(const char *s) {
  static const char pat[] = "dddd-dd-ddTdd:dd:dd";
  for (size_t i = 0; i < sizeof pat - 1; i++) {
    if (!s[i]) return 0;
    if (pat[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i]) return 0;
  }
  s += sizeof pat - 1;
  if (*s == '.') {
    s++;
    if (!(*s >= '0' && *s <= '9')) return 0;
    while (*s >= '0' && *s <= '9') s++;
  }
  return !strcmp(s, "Z") || !strcmp(s, "+00:00");
}

int hs_cal_import_model_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n < 1 || n > 63) return 0;
  for (const char *c = name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("._+-", *c)))
      return 0;
  return 1;
}

static const char *const phase_list[] = {"forward", "backward", "update", "step", NULL};
static const char *const kind_list[] = {"cuda", "cpu", NULL};
static const char *const mode_list[] = {"plain", "ddp", NULL};
static const char *const backend_list[] = {"nccl", "gloo", NULL};
static const char *const op_list[] = {"allreduce", "p2p", "broadcast", "allgather", "reducescatter",
                                      HS_CAL_OP_ALLREDUCE_STEP, NULL};

static int check_device(checker *x, const hs_json_value *root, profile *pr) {
  static const char *const keys[] = {"name", "kind", "memory_bytes", "sm_count", "compute_capability",
                                     "driver_version", "cuda_version", "cudnn_version", "nccl_version",
                                     "torch_version", "host", "threads", NULL};
  const hs_json_value *dv;
  const char *name, *kind, *cc, *drv, *cuda, *cudnn, *nccl, *host;
  int64_t mem = 0, sms = 0, threads = 0;
  int rc, present;
  if ((rc = object_at(x, root, "$", "device", 1, &dv)) || (rc = keys_ok(x, dv, "$.device", keys)) ||
      (rc = string_at(x, dv, "$.device", "name", 1, HS_CAL_IMPORT_NAME_MAX, &name)) ||
      (rc = enum_at(x, dv, "$.device", "kind", kind_list, &kind)) ||
      (rc = int_at(x, dv, "$.device", "memory_bytes", 0, 0, INT64_MAX, "a non-negative integer of bytes", &mem, &present)) ||
      (rc = int_at(x, dv, "$.device", "sm_count", 0, 1, INT32_MAX, "a positive integer", &sms, &present)) ||
      (rc = string_at(x, dv, "$.device", "compute_capability", 0, 15, &cc)) ||
      (rc = string_at(x, dv, "$.device", "driver_version", 0, 31, &drv)) ||
      (rc = string_at(x, dv, "$.device", "cuda_version", 0, 31, &cuda)) ||
      (rc = string_at(x, dv, "$.device", "cudnn_version", 0, 31, &cudnn)) ||
      (rc = string_at(x, dv, "$.device", "nccl_version", 0, 31, &nccl)) ||
      (rc = string_at(x, dv, "$.device", "torch_version", 0, 63, &pr->torch_version)) ||
      (rc = string_at(x, dv, "$.device", "host", 0, 255, &host)) ||
      (rc = int_at(x, dv, "$.device", "threads", 0, 1, 1 << 20, "a positive integer", &threads, &present)))
    return rc;
  hs_cal_device *d = &pr->dev;
  memset(d, 0, sizeof *d);
  snprintf(d->spec, sizeof d->spec, "profile");
  snprintf(d->kind, sizeof d->kind, "%s", kind);
  snprintf(d->name, sizeof d->name, "%s", name);
  d->ordinal = -1;
  d->sm_count = (int)sms;
  d->memory_bytes = mem;
  snprintf(d->compute_capability, sizeof d->compute_capability, "%s", cc ? cc : "");
  snprintf(d->driver_version, sizeof d->driver_version, "%s", drv ? drv : "");
  snprintf(d->cuda_version, sizeof d->cuda_version, "%s", cuda ? cuda : "");
  snprintf(d->cudnn_version, sizeof d->cudnn_version, "%s", cudnn ? cudnn : "");
  snprintf(d->nccl_version, sizeof d->nccl_version, "%s", nccl ? nccl : "");
  snprintf(d->host, sizeof d->host, "%s", host ? host : "");
  d->threads = (int)threads;
  pr->threads = (int)threads;
  return 0;
}

static int check_model(checker *x, const hs_json_value *root, profile *pr) {
  static const char *const keys[] = {"name", "origin", "params", "grad_bytes", "flops_per_sample", "input",
                                     "loss", "description", NULL};
  const hs_json_value *mv, *fv;
  const char *name;
  int64_t params = 0, grad = 0;
  int rc, present;
  if ((rc = object_at(x, root, "$", "model", 1, &mv)) || (rc = keys_ok(x, mv, "$.model", keys)) ||
      (rc = string_at(x, mv, "$.model", "name", 1, 63, &name)))
    return rc;
  if (!hs_cal_import_model_name_ok(name))
    return bad(x, "$.model.name", "expected a name of letters, digits and \"._+-\" (what --model takes), got \"%s\"", name);
  if ((rc = string_at(x, mv, "$.model", "origin", 0, 200, &pr->origin)) ||
      (rc = int_at(x, mv, "$.model", "params", 1, 1, INT64_MAX, "a positive integer (trainable parameters)", &params, &present)) ||
      (rc = int_at(x, mv, "$.model", "grad_bytes", 1, 1, INT64_MAX, "a positive integer of bytes", &grad, &present)) ||
      (rc = member(x, mv, "$.model", "flops_per_sample", 0, &fv)) ||
      (rc = string_at(x, mv, "$.model", "input", 0, 100, &pr->input)) ||
      (rc = string_at(x, mv, "$.model", "loss", 0, 100, &pr->loss)) ||
      (rc = string_at(x, mv, "$.model", "description", 0, 1000, &pr->description)))
    return rc;
  hs_cal_model_row *m = &pr->model;
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "%s", name);
  m->params = params;
  m->grad_bytes = grad;
  m->flops_per_sample = NAN;
  if (fv) {
    if (fv->type != HS_JSON_NUMBER || !(fv->number > 0))
      return bad_value(x, "$.model.flops_per_sample", "a positive number of FLOP (forward + backward, per sample) or null", fv);
    m->flops_per_sample = fv->number;
  }
  return 0;
}

static int check_execution(checker *x, const hs_json_value *root, profile *pr) {
  static const char *const keys[] = {"mode", "world_size", "concurrent", "dtype", "optimizer", NULL};
  const hs_json_value *ev;
  int64_t world = 0, conc = 0;
  int rc, present;
  if ((rc = object_at(x, root, "$", "execution", 1, &ev)) || (rc = keys_ok(x, ev, "$.execution", keys)) ||
      (rc = enum_at(x, ev, "$.execution", "mode", mode_list, &pr->mode)) ||
      (rc = int_at(x, ev, "$.execution", "world_size", 1, 1, 1 << 20, "a positive integer (ranks)", &world, &present)) ||
      (rc = int_at(x, ev, "$.execution", "concurrent", 1, 1, 1024, "an integer from 1 to 1024 (processes stepping at once)", &conc, &present)) ||
      (rc = string_at(x, ev, "$.execution", "dtype", 1, 31, &pr->dtype)) ||
      (rc = string_at(x, ev, "$.execution", "optimizer", 0, 63, &pr->optimizer)))
    return rc;
  pr->world = (int)world;
  pr->concurrent = (int)conc;
  return 0;
}

static int cmp_compute(const void *a, const void *b) {
  const prof_compute *x = a, *y = b;
  if (x->batch != y->batch) return (x->batch > y->batch) - (x->batch < y->batch);
  if (x->phase != y->phase) return (x->phase > y->phase) - (x->phase < y->phase);
  return (x->index > y->index) - (x->index < y->index);
}

/* The step times must fit, as hs_cal_refit will fit them once stored (the device row is this
 * document's own: its source carries the content hash), so that a document refused for them is
 * refused before anything is written, and by hs_cal_import_check too. */
static int check_step_fit(checker *x, profile *pr, int max_batch) {
  qsort(pr->compute, (size_t)pr->n_compute, sizeof *pr->compute, cmp_compute);
  double *b = malloc((size_t)pr->n_compute * sizeof *b), *t = malloc((size_t)pr->n_compute * sizeof *t);
  int rc = 0, n = 0, fitted = 0;
  if (!b || !t) rc = hs_diag_set(x->d, HS_ENOMEM, "out of memory");
  for (int i = 0; !rc && i < pr->n_compute; i++)
    if (pr->compute[i].phase == HS_CAL_STEP) b[n] = pr->compute[i].batch, t[n] = pr->compute[i].st.median_s, n++;
  hs_fit_set fs;
  char why[256] = "";
  if (!rc) rc = hs_cal_fit_points(HS_CAL_STEP, b, t, n, pr->oom_batch, max_batch, &fs, &fitted, why, sizeof why, x->d);
  if (!rc && !fitted) rc = bad(x, "$.compute", "the step times cannot be fitted: %s", why);
  free(b);
  free(t);
  return rc;
}

static int check_compute(checker *x, const hs_json_value *root, profile *pr) {
  static const char *const keys[] = {"batch", "phase", "median_s", "p10_s", "p90_s", "count", "peak_memory_bytes",
                                     "processes", "process_medians_s", NULL};
  const hs_json_value *cv;
  int rc = member(x, root, "$", "compute", 1, &cv);
  if (rc) return rc;
  if (cv->type != HS_JSON_ARRAY) return bad_value(x, "$.compute", "an array of timings", cv);
  if (cv->n < 1) return bad(x, "$.compute", "expected at least one timing, got an empty array");
  /* Room for every entry plus a derived step per batch. */
  if (!(pr->compute = calloc((size_t)cv->n * 2, sizeof *pr->compute))) return hs_diag_set(x->d, HS_ENOMEM, "out of memory");
  for (int i = 0; i < cv->n; i++) {
    const hs_json_value *e = &cv->items[i];
    char path[64];
    snprintf(path, sizeof path, "$.compute[%d]", i);
    if (e->type != HS_JSON_OBJECT) return bad_value(x, path, "an object", e);
    prof_compute *c = &pr->compute[pr->n_compute++];
    const char *phase;
    int64_t batch = 0, peak = 0;
    int present;
    if ((rc = keys_ok(x, e, path, keys)) ||
        (rc = int_at(x, e, path, "batch", 1, 1, 1 << 30, "a positive integer (samples)", &batch, &present)) ||
        (rc = enum_at(x, e, path, "phase", phase_list, &phase)) || (rc = stats_at(x, e, path, &c->st)) ||
        (rc = pooled_at(x, e, path)) ||
        (rc = int_at(x, e, path, "peak_memory_bytes", 0, 0, INT64_MAX, "a non-negative integer of bytes", &peak, &present)))
      return rc;
    c->batch = (int)batch;
    c->index = i;
    for (int p = 0; p < HS_CAL_PHASES; p++)
      if (!strcmp(phase, hs_cal_phase_name((hs_cal_phase)p))) c->phase = (hs_cal_phase)p;
  }
  int given = pr->n_compute;
  qsort(pr->compute, (size_t)given, sizeof *pr->compute, cmp_compute);
  /* One timing per (batch, phase); every batch needs a step time, given or summed. */
  int steps = 0;
  for (int i = 0; i < given;) {
    int j = i, have[HS_CAL_PHASES] = {0}, first[HS_CAL_PHASES] = {0};
    for (; j < given && pr->compute[j].batch == pr->compute[i].batch; j++) {
      const prof_compute *c = &pr->compute[j];
      if (have[c->phase]) { /* sorted by index within (batch, phase): c is the later one */
        char path[64];
        snprintf(path, sizeof path, "$.compute[%d]", c->index);
        return bad(x, path, "batch %d, phase %s is timed twice (also $.compute[%d])", c->batch,
                   hs_cal_phase_name(c->phase), first[c->phase]);
      }
      have[c->phase] = 1;
      first[c->phase] = c->index;
    }
    int batch = pr->compute[i].batch;
    if (!have[HS_CAL_STEP]) {
      if (!have[HS_CAL_FORWARD] || !have[HS_CAL_BACKWARD] || !have[HS_CAL_UPDATE]) {
        char path[64];
        snprintf(path, sizeof path, "$.compute[%d]", pr->compute[i].index);
        return bad(x, path, "batch %d has no \"step\" timing and not all of forward, backward and update to sum one from", batch);
      }
      prof_compute *s = &pr->compute[pr->n_compute++];
      s->batch = batch;
      s->phase = HS_CAL_STEP;
      s->index = -1;
      s->st = (hs_cal_stats){.median_s = 0, .p10_s = NAN, .p90_s = NAN, .count = INT32_MAX};
      for (int k = i; k < j; k++) {
        s->st.median_s += pr->compute[k].st.median_s;
        if (pr->compute[k].st.count < s->st.count) s->st.count = pr->compute[k].st.count;
      }
      if (!isfinite(s->st.median_s)) {
        char path[64];
        snprintf(path, sizeof path, "$.compute[%d]", pr->compute[i].index);
        return bad(x, path, "batch %d: forward + backward + update sum to %g s; expected a finite time", batch,
                   s->st.median_s);
      }
    }
    steps++;
    i = j;
  }
  int64_t oom = 0;
  int present;
  if ((rc = int_at(x, root, "$", "oom_batch", 0, 1, 1 << 30, "a positive integer (samples) or null", &oom, &present)))
    return rc;
  pr->oom_batch = (int)oom;
  /* Fewer batch sizes are enough where memory ran out before a third (cal_store.h). */
  if (steps < HS_FIT_MIN_POINTS && !(oom && steps >= 1))
    return bad(x, "$.compute", "step times at %d batch size%s; fitting t(b) and judging it on held-out batch sizes needs at least %d "
               "(or fewer with an oom_batch: the first batch that ran out of memory)",
               steps, steps == 1 ? "" : "s", HS_FIT_MIN_POINTS);
  int largest = pr->compute[given - 1].batch; /* sorted by batch */
  if (oom && largest >= oom)
    return bad(x, "$.oom_batch", "expected a batch above every timed one (the first that ran out of memory), got %lld, but batch %d was timed",
               (long long)oom, largest);
  return check_step_fit(x, pr, oom ? largest : 0);
}

static int cmp_comm(const void *a, const void *b) {
  const prof_comm *x = a, *y = b;
  int c = strcmp(x->backend, y->backend);
  if (!c) c = strcmp(x->op, y->op);
  if (!c) c = (x->world > y->world) - (x->world < y->world);
  if (!c) c = (x->bytes > y->bytes) - (x->bytes < y->bytes);
  if (!c) c = (x->index > y->index) - (x->index < y->index);
  return c;
}

static int same_group(const prof_comm *a, const prof_comm *b) {
  return !strcmp(a->backend, b->backend) && !strcmp(a->op, b->op) && a->world == b->world;
}

static int is_step(const prof_comm *c) { return !strcmp(c->op, HS_CAL_OP_ALLREDUCE_STEP); }

static int check_comm(checker *x, const hs_json_value *root, profile *pr) {
  static const char *const keys[] = {"backend", "op", "world_size", "bytes", "median_s", "p10_s", "p90_s", "count",
                                     "mean_s", NULL};
  /* The whole gradient's all-reduce as DDP issues it after a step: also what the steps were. */
  static const char *const step_keys[] = {"backend", "op", "world_size", "bytes", "median_s", "p10_s", "p90_s", "count",
                                          "mean_s", "batch", "buckets", NULL};
  const hs_json_value *cv;
  int rc = member(x, root, "$", "comm", 0, &cv);
  if (rc || !cv) return rc;
  if (cv->type != HS_JSON_ARRAY) return bad_value(x, "$.comm", "an array or null", cv);
  if (!cv->n) return 0;
  if (!(pr->comm = calloc((size_t)cv->n, sizeof *pr->comm))) return hs_diag_set(x->d, HS_ENOMEM, "out of memory");
  for (int i = 0; i < cv->n; i++) {
    const hs_json_value *e = &cv->items[i];
    char path[64];
    snprintf(path, sizeof path, "$.comm[%d]", i);
    if (e->type != HS_JSON_OBJECT) return bad_value(x, path, "an object", e);
    prof_comm *c = &pr->comm[pr->n_comm++];
    int64_t world = 0, bytes = 0, batch = 0, buckets = 0;
    int present;
    /* Which keys are allowed depends on the op, read properly right after. */
    const hs_json_value *opv = hs_json_get(e, "op");
    int step = opv && opv->type == HS_JSON_STRING && !strcmp(opv->string, HS_CAL_OP_ALLREDUCE_STEP);
    if ((rc = keys_ok(x, e, path, step ? step_keys : keys)) ||
        (rc = enum_at(x, e, path, "backend", backend_list, &c->backend)) ||
        (rc = enum_at(x, e, path, "op", op_list, &c->op)) ||
        (rc = int_at(x, e, path, "world_size", 1, 2, 1 << 20, "an integer of at least 2 (ranks taking part)", &world, &present)) ||
        (rc = int_at(x, e, path, "bytes", 1, step, INT64_MAX,
                     step ? "a positive integer (the gradient's bytes)" : "a non-negative integer (message bytes)", &bytes,
                     &present)) ||
        (rc = stats_at(x, e, path, &c->st)) || (rc = time_at(x, e, path, "mean_s", step, &c->mean_s)) ||
        (rc = int_at(x, e, path, "batch", 0, 1, 1 << 30, "a positive integer (samples per rank)", &batch, &present)) ||
        (rc = int_at(x, e, path, "buckets", 0, 1, INT32_MAX, "a positive integer (DDP's gradient buckets)", &buckets,
                     &present)))
      return rc;
    c->world = (int)world;
    c->bytes = bytes;
    c->batch = (int)batch;
    c->buckets = (int)buckets;
    c->index = i;
  }
  qsort(pr->comm, (size_t)pr->n_comm, sizeof *pr->comm, cmp_comm);
  int groups = 1;
  for (int i = 1; i < pr->n_comm; i++) {
    const prof_comm *a = &pr->comm[i - 1], *b = &pr->comm[i];
    if (!same_group(a, b)) {
      groups++;
      continue;
    }
    char path[64];
    snprintf(path, sizeof path, "$.comm[%d]", b->index);
    if (a->bytes == b->bytes)
      return bad(x, path, "%s %s over %d ranks at %lld bytes is timed twice (also $.comm[%d])", b->backend, b->op, b->world,
                 (long long)b->bytes, a->index);
    /* One gradient, one size: the simulator takes the entry at the run's gradient. */
    if (is_step(b))
      return bad(x, path, "%s %s over %d ranks at %lld bytes, and at %lld bytes in $.comm[%d]: expected one per backend and "
                 "world size (the all-reduce of the model's whole gradient)", b->backend, b->op, b->world,
                 (long long)b->bytes, (long long)a->bytes, a->index);
  }
  if (groups > HS_CAL_IMPORT_MAX_COMM)
    return bad(x, "$.comm", "timings of %d (backend, op, world_size) groups; at most %d are imported from one profile", groups,
               HS_CAL_IMPORT_MAX_COMM);
  return 0;
}

static int check_source(checker *x, const hs_json_value *root, profile *pr) {
  static const char *const keys[] = {"repository", "commit", "file", "licence", "notes", "command",
                                     "also_read", NULL};
  const hs_json_value *sv, *ar;
  const char *notes, *command;
  int rc = object_at(x, root, "$", "source", 0, &sv);
  if (rc || !sv) return rc;
  if ((rc = keys_ok(x, sv, "$.source", keys)) || (rc = string_at(x, sv, "$.source", "repository", 0, 200, &pr->src_repository)) ||
      (rc = string_at(x, sv, "$.source", "commit", 0, 64, &pr->src_commit)) ||
      (rc = string_at(x, sv, "$.source", "file", 0, 300, &pr->src_file)) ||
      (rc = string_at(x, sv, "$.source", "licence", 0, 0, &pr->src_licence)) ||
      (rc = string_at(x, sv, "$.source", "notes", 0, 0, &notes)) ||
      (rc = string_at(x, sv, "$.source", "command", 0, 0, &command)))
    return rc;
  /* also_read: the other files of the source that the conversion read, as strings. */
  if ((rc = member(x, sv, "$.source", "also_read", 0, &ar)) || !ar) return rc;
  if (ar->type != HS_JSON_ARRAY) return bad_value(x, "$.source.also_read", "an array of file names", ar);
  for (int i = 0; i < ar->n; i++)
    if (ar->items[i].type != HS_JSON_STRING) {
      char f[64];
      snprintf(f, sizeof f, "$.source.also_read[%d]", i);
      return bad_value(x, f, "a file name (a string)", &ar->items[i]);
    }
  return 0;
}

/* Checks the whole document into pr; nothing touches the database. */
static int check_profile(checker *x, const hs_json_value *root, profile *pr) {
  static const char *const keys[] = {"format", "version", "created_at", "tool", "source", "device", "model",
                                     "execution", "compute", "oom_batch", "comm", NULL};
  if (root->type != HS_JSON_OBJECT) return bad_value(x, "$", "an object (a hetsim profile)", root);
  const hs_json_value *fv, *vv;
  int rc;
  /* Format and version first: a document of another kind or version is named as such rather
   * than by the first field this version does not know. */
  if ((rc = member(x, root, "$", "format", 1, &fv))) return rc;
  if (fv->type != HS_JSON_STRING || strcmp(fv->string, "hetsim-profile"))
    return bad_value(x, "$.format", "\"hetsim-profile\"", fv);
  if ((rc = member(x, root, "$", "version", 1, &vv))) return rc;
  if (vv->type != HS_JSON_NUMBER || !vv->is_integer || vv->integer != HS_PROFILE_VERSION) {
    char got[64];
    return bad(x, "$.version", "expected %d (the profile version this hetsim reads), got %s%s", HS_PROFILE_VERSION,
               hs_json_describe(vv, got, sizeof got),
               vv->type == HS_JSON_NUMBER && vv->number > HS_PROFILE_VERSION ? "; a newer hetsim may read it" : "");
  }
  if ((rc = keys_ok(x, root, "$", keys)) || (rc = string_at(x, root, "$", "created_at", 1, 64, &pr->created_at)) ||
      (rc = string_at(x, root, "$", "tool", 1, 200, &pr->tool)))
    return rc;
  if (!iso_utc(pr->created_at))
    return bad_value(x, "$.created_at", "an ISO-8601 UTC time like \"2026-11-25T12:00:00Z\"", hs_json_get(root, "created_at"));
  if ((rc = check_source(x, root, pr)) || (rc = check_device(x, root, pr)) || (rc = check_model(x, root, pr)) ||
      (rc = check_execution(x, root, pr)) || (rc = check_compute(x, root, pr)) || (rc = check_comm(x, root, pr)))
    return rc;
  return 0;
}

/* ---- provenance ---- */

/* FNV-1a, 64 bits, over the document's bytes: the same file imported twice has the same hash. */
static uint64_t fnv1a64(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

static void append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...) {
  size_t l = strlen(buf);
  if (l + 1 >= size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + l, size - l, fmt, ap);
  va_end(ap);
}

static void describe_sources(profile *pr) {
  char *s = pr->source;
  size_t n = sizeof pr->source;
  s[0] = '\0';
  append(s, n, "profile %s (%s, %s; %s, world size %d, %d concurrent, %s", pr->hash, pr->tool, pr->created_at, pr->mode,
         pr->world, pr->concurrent, pr->dtype);
  if (pr->optimizer) append(s, n, ", %s", pr->optimizer);
  if (pr->threads) append(s, n, ", %d thread%s", pr->threads, pr->threads == 1 ? "" : "s");
  if (pr->torch_version) append(s, n, ", torch %s", pr->torch_version);
  append(s, n, ")");
  if (pr->src_repository || pr->src_file) {
    append(s, n, "; from %s", pr->src_repository ? pr->src_repository : "");
    if (pr->src_commit) append(s, n, "@%s", pr->src_commit);
    if (pr->src_file) append(s, n, "%s%s", pr->src_repository ? " " : "", pr->src_file);
    if (pr->src_licence) append(s, n, " (%s)", pr->src_licence);
  }
  hs_cal_model_row *m = &pr->model;
  snprintf(m->source, sizeof m->source, "profile %s (%s, %s) on %s", pr->hash, pr->tool, pr->created_at, pr->dev.name);
  if (pr->origin) append(m->source, sizeof m->source, ", built as %s", pr->origin);
  if (pr->description) snprintf(m->description, sizeof m->description, "%s", pr->description);
  else {
    snprintf(m->description, sizeof m->description, "imported");
    if (pr->origin) append(m->description, sizeof m->description, ": %s", pr->origin);
    if (pr->input) append(m->description, sizeof m->description, ", input %s", pr->input);
    if (pr->loss) append(m->description, sizeof m->description, ", loss %s", pr->loss);
  }
}

/* ---- storing ---- */

/* The model row: the zoo's for a zoo model, the profile's otherwise; a row already stored is
 * kept, and a profile that contradicts it (another network under the same name) refused. */
static int store_model(hs_store *s, checker *x, profile *pr, hs_cal_import_info *info, hs_diag *d) {
  hs_cal_model_row have;
  hs_diag ld = {0};
  int rc = hs_cal_load_model(s, pr->model.name, &have, &ld);
  if (rc && rc != HS_ENOTFOUND) return hs_diag_set(d, rc, "%s", ld.msg);
  if (!rc) {
    const char *where = have.source[0] ? have.source : info->model_in_zoo ? "the zoo" : "an earlier calibration";
    if (have.params != pr->model.params)
      return bad(x, "$.model.params", "expected %lld, the parameters of the model \"%s\" already in %s (from %s), got %lld: "
                 "another network under the same name; give it its own model.name",
                 (long long)have.params, have.name, hs_store_path(s), where, (long long)pr->model.params);
    if (have.grad_bytes != pr->model.grad_bytes)
      return bad(x, "$.model.grad_bytes", "expected %lld, the gradient bytes of the model \"%s\" already in %s (from %s), got %lld",
                 (long long)have.grad_bytes, have.name, hs_store_path(s), where, (long long)pr->model.grad_bytes);
    return 0;
  }
  info->model_added = 1;
  if (info->model_in_zoo) return hs_cal_store_model(s, pr->model.name, d);
  return hs_cal_store_model_row(s, &pr->model, d);
}

static int store_profile(hs_store *s, checker *x, profile *pr, hs_cal_import_info *info, hs_diag *d) {
  int rc = store_model(s, x, pr, info, d);
  if (rc) return rc;
  if ((rc = hs_cal_store_device_from(s, &pr->dev, pr->source, &info->device_id, d))) return rc;
  /* A device row with this name and this document's hash that holds the model's samples: the
   * document was imported before. */
  double *b = NULL, *t = NULL;
  int n = 0;
  if ((rc = hs_cal_load_samples(s, info->device_id, pr->model.name, HS_CAL_STEP, &b, &t, &n, d))) return rc;
  free(b);
  free(t);
  if (n > 0) {
    info->unchanged = 1;
    info->model_added = 0;
    return 0;
  }
  for (int i = 0; i < pr->n_compute; i++) {
    const prof_compute *c = &pr->compute[i];
    if ((rc = hs_cal_store_sample(s, info->device_id, pr->model.name, c->batch, c->phase, &c->st, d))) return rc;
    info->samples++;
    info->derived_steps += c->index < 0;
    info->batches += c->phase == HS_CAL_STEP;
    if (c->batch > info->max_batch) info->max_batch = c->batch;
  }
  info->oom_batch = pr->oom_batch;
  if (!pr->oom_batch) info->max_batch = 0; /* no limit seen */
  for (int p = 0; p < HS_CAL_PHASES; p++) {
    int any = 0;
    for (int i = 0; i < pr->n_compute && !any; i++) any = pr->compute[i].phase == (hs_cal_phase)p;
    if (!any) continue;
    char why[256] = "";
    if ((rc = hs_cal_refit(s, info->device_id, pr->model.name, (hs_cal_phase)p, pr->oom_batch, info->max_batch,
                           &info->fits_by_phase[p], &info->fitted[p], why, sizeof why, d)))
      return rc;
    if (info->fitted[p]) {
      info->fits++;
    } else {
      if (p == HS_CAL_STEP) return bad(x, "$.compute", "the step times cannot be fitted: %s", why);
      append(info->fit_notes, sizeof info->fit_notes, "%s%s", info->fit_notes[0] ? "; " : "", why);
    }
  }
  for (int i = 0; i < pr->n_comm; i++) {
    const prof_comm *c = &pr->comm[i];
    hs_comm_key key = {.device = info->device_id, .backend = c->backend, .op = c->op, .world_size = c->world};
    if ((rc = hs_cal_store_comm_sample_mean(s, &key, c->bytes, &c->st, c->mean_s, d))) return rc;
    info->comm_samples++;
    if (i + 1 < pr->n_comm && same_group(c, &pr->comm[i + 1])) continue;
    /* The last size of a group: fit the group. */
    hs_cal_import_comm *g = &info->comm[info->n_comm++];
    snprintf(g->backend, sizeof g->backend, "%s", c->backend);
    snprintf(g->op, sizeof g->op, "%s", c->op);
    g->world_size = c->world;
    g->mean_s = NAN;
    for (int k = i; k >= 0 && same_group(c, &pr->comm[k]); k--) g->sizes++;
    if (is_step(c)) {
      /* One size (check_comm): nothing to fit; the simulator takes it at the run's gradient. */
      g->mean_s = c->mean_s;
      g->bytes = c->bytes;
      snprintf(g->why, sizeof g->why, "the all-reduce as DDP issues it, used at its size (%lld bytes) by its mean "
               "(%.3g s of %d steps", (long long)c->bytes, c->mean_s, c->st.count);
      if (c->batch) append(g->why, sizeof g->why, ", batch %d per rank", c->batch);
      if (c->buckets) append(g->why, sizeof g->why, ", %d bucket%s", c->buckets, c->buckets == 1 ? "" : "s");
      append(g->why, sizeof g->why, ")");
      continue;
    }
    if ((rc = hs_cal_refit_comm(s, &key, &g->alpha_s, &g->beta_bytes_per_s, &g->r2, &g->fitted, g->why, sizeof g->why, d)))
      return rc;
    info->fits += g->fitted;
  }
  return 0;
}

/* Parses and checks the document into *root and *pr and fills the info's names and hash;
 * nothing touches a database. */
static int prepare(const char *name, const char *json, size_t len, const hs_cal_import_opts *o, hs_json_value **root,
                   profile *pr, hs_cal_import_info *info, hs_diag *d) {
  memset(info, 0, sizeof *info);
  memset(pr, 0, sizeof *pr);
  checker x = {.name = name, .d = d};
  int rc = hs_json_parse(json, len, root, d);
  if (rc) {
    /* "NAME:LINE:COL: ..." as a compiler writes it. */
    char msg[sizeof d->msg];
    snprintf(msg, sizeof msg, "%s", d->msg);
    return hs_diag_set(d, rc, "%s:%s", name, msg);
  }
  if ((rc = check_profile(&x, *root, pr))) return rc;
  const char *as = o ? o->device_name : NULL;
  if (as && (!*as || strlen(as) > HS_CAL_IMPORT_NAME_MAX))
    return hs_diag_set(d, HS_EINVAL, "--as: expected a device name of 1 to %d characters", HS_CAL_IMPORT_NAME_MAX);
  if (as) {
    snprintf(pr->dev.name, sizeof pr->dev.name, "%s", as);
  } else if (pr->concurrent > 1) {
    /* As `hetsim calib --concurrent N` names its devices, so that `hetsim validate` finds the
     * calibration of N workers sharing the machine. */
    char full[sizeof pr->dev.name];
    hs_cal_device_shared_name(full, sizeof full, pr->dev.name, pr->concurrent);
    memcpy(pr->dev.name, full, sizeof full);
  }
  snprintf(pr->hash, sizeof pr->hash, "%016llx", (unsigned long long)fnv1a64(json, len));
  describe_sources(pr);
  snprintf(info->device, sizeof info->device, "%.127s", pr->dev.name); /* at most 100 + " (N workers)" */
  snprintf(info->model, sizeof info->model, "%s", pr->model.name);
  snprintf(info->hash, sizeof info->hash, "%s", pr->hash);
  const hs_model_info *zoo = hs_zoo_find(pr->model.name);
  if (!zoo) return 0;
  hs_model_stats ms;
  if ((rc = hs_zoo_stats(zoo->name, &ms, d))) return rc;
  info->model_in_zoo = 1;
  if (ms.params != pr->model.params)
    return bad(&x, "$.model.params", "expected %lld, the parameters of the zoo's %s (%s), got %lld: another network under the "
               "same name; give it its own model.name",
               (long long)ms.params, zoo->name, zoo->description, (long long)pr->model.params);
  if (ms.grad_bytes != pr->model.grad_bytes)
    return bad(&x, "$.model.grad_bytes", "expected %lld, the fp32 gradient bytes of the zoo's %s, got %lld", (long long)ms.grad_bytes,
               zoo->name, (long long)pr->model.grad_bytes);
  return 0;
}

static void profile_free(profile *pr, hs_json_value *root) {
  free(pr->compute);
  free(pr->comm);
  hs_json_value_free(root);
}

int hs_cal_import_check(const char *name, const char *json, size_t len, const hs_cal_import_opts *o,
                        hs_cal_import_info *info, hs_diag *d) {
  hs_json_value *root = NULL;
  profile pr;
  int rc = prepare(name, json, len, o, &root, &pr, info, d);
  profile_free(&pr, root);
  return rc;
}

int hs_cal_import_text_opts(hs_store *st, const char *name, const char *json, size_t len,
                            const hs_cal_import_opts *o, hs_cal_import_info *info, hs_diag *d) {
  hs_json_value *root = NULL;
  profile pr;
  int rc = prepare(name, json, len, o, &root, &pr, info, d), nested = 0;
  if (!rc && !(rc = hs_cal_tx_begin(st, &nested, d))) {
    checker x = {.name = name, .d = d};
    rc = store_profile(st, &x, &pr, info, d);
    if (rc || info->unchanged) hs_cal_tx_rollback(st, nested); /* unchanged: nothing was written */
    else rc = hs_cal_tx_commit(st, nested, d);
  }
  if (rc) {
    char dev[sizeof info->device], model[sizeof info->model];
    snprintf(dev, sizeof dev, "%s", info->device);
    snprintf(model, sizeof model, "%s", info->model);
    memset(info, 0, sizeof *info);
    snprintf(info->device, sizeof info->device, "%s", dev);
    snprintf(info->model, sizeof info->model, "%s", model);
  }
  profile_free(&pr, root);
  return rc;
}

int hs_cal_import_text(hs_store *st, const char *name, const char *json, size_t len,
                       hs_cal_import_info *info, hs_diag *d) {
  return hs_cal_import_text_opts(st, name, json, len, NULL, info, d);
}

int hs_cal_import_read(const char *path, char **text, size_t *len, hs_diag *d) {
  *text = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return hs_diag_set(d, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
  char *buf = malloc(HS_CAL_IMPORT_MAX_BYTES + 1);
  if (!buf) {
    fclose(f);
    return hs_diag_set(d, HS_ENOMEM, "out of memory reading %s", path);
  }
  size_t n = fread(buf, 1, HS_CAL_IMPORT_MAX_BYTES + 1, f);
  int err = ferror(f);
  fclose(f);
  int rc = 0;
  if (err) rc = hs_diag_set(d, HS_EIO, "%s: read error", path);
  else if (n > HS_CAL_IMPORT_MAX_BYTES)
    rc = hs_diag_set(d, HS_EINVAL, "%s: larger than %d MiB; not a profile", path, HS_CAL_IMPORT_MAX_BYTES >> 20);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0'; /* n <= HS_CAL_IMPORT_MAX_BYTES: room for it */
  char *fit = realloc(buf, n + 1); /* give back the rest of the largest size */
  *text = fit ? fit : buf;
  *len = n;
  return 0;
}

int hs_cal_import_file_opts(hs_store *st, const char *path, const hs_cal_import_opts *o,
                            hs_cal_import_info *info, hs_diag *d) {
  memset(info, 0, sizeof *info);
  char *buf;
  size_t n;
  int rc = hs_cal_import_read(path, &buf, &n, d);
  if (rc) return rc;
  rc = hs_cal_import_text_opts(st, path, buf, n, o, info, d);
  free(buf);
  return rc;
}

int hs_cal_import_file(hs_store *st, const char *path, hs_cal_import_info *info, hs_diag *d) {
  return hs_cal_import_file_opts(st, path, NULL, info, d);
}
