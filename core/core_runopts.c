/* core_runopts: runs' options JSON, each kind written and read in one place (core_runopts.h). */
#include "core/core_runopts.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core_affinity.h"
#include "core/core_json.h"

/* A double as `hetsim real` has always stored it: every bit (%.17g); JSON has no NaN or
 * infinity, so those are null. */
static void put_number(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.17g", v);
  else fputs("null", f);
}

/* Opens buf as the stream *f a writer prints into. */
static int open_buf(char *buf, size_t len, FILE **f, hs_diag *d) {
  if (len == 0) return hs_diag_set(d, HS_EINVAL, "run options: no room");
  buf[0] = '\0';
  *f = fmemopen(buf, len, "w");
  return *f ? 0 : hs_diag_set(d, HS_ENOMEM, "run options: out of memory");
}

/* Closes a writer's stream: HS_EINVAL (buf left a valid empty string) when the text did not fit. */
static int close_buf(FILE *f, char *buf, size_t len, hs_diag *d) {
  /* fmemopen keeps one byte for the NUL: a text that filled the rest may have been cut. */
  long used = ftell(f);
  int bad = ferror(f) || used < 0 || (size_t)used + 1 >= len;
  fclose(f);
  if (bad) {
    buf[0] = '\0';
    return hs_diag_set(d, HS_EINVAL, "run options: longer than %zu bytes", len - 1);
  }
  return 0;
}

int hs_real_options_format(const hs_real_options *o, char *buf, size_t len, hs_diag *d) {
  FILE *f;
  int rc = open_buf(buf, len, &f, d);
  if (rc) return rc;
  fputs("{\"backend\":", f);
  hs_json_write_escaped(f, o->backend);
  fputs(",\"device\":", f);
  hs_json_write_escaped(f, o->device);
  fputs(",\"device_name\":", f);
  hs_json_write_escaped(f, o->device_name);
  fprintf(f, ",\"workers\":%d,\"iterations\":%lld,\"epochs\":", o->workers, (long long)o->iterations);
  put_number(f, o->epochs);
  fputs(",\"time_s\":", f);
  put_number(f, o->time_s);
  fputs(",\"target_loss\":", f);
  put_number(f, o->target_loss);
  fputs(",\"lr\":", f);
  put_number(f, o->lr);
  fprintf(f, ",\"eval_every\":%lld,\"eval_samples\":%lld,\"train_samples\":%lld,\"timeout_s\":",
          (long long)o->eval_every, (long long)o->eval_samples, (long long)o->train_samples);
  put_number(f, o->timeout_s);
  fputs(",\"launch\":", f);
  hs_json_write_escaped(f, o->launch);
  fputs(",\"pin\":", f);
  hs_json_write_escaped(f, o->pin);
  fprintf(f, ",\"pinned\":%s", o->pinned ? "true" : "false");
  if (o->target_accuracy > 0) {
    fputs(",\"target_accuracy\":", f);
    put_number(f, o->target_accuracy);
  }
  if (o->cpus > 0) fprintf(f, ",\"cpus\":%d", o->cpus);
  if (o->local_ranks > 0) fprintf(f, ",\"local_ranks\":%d", o->local_ranks);
  if (o->n_type_devices > 0) {
    /* {"TYPE": {"device": ..., "device_name": ...}, ...}: what `hetsim validate` needs to find
     * each worker's calibration. */
    fputs(",\"type_devices\":{", f);
    for (int i = 0; i < o->n_type_devices && i < HS_REAL_MAX_TYPE_DEVICES; i++) {
      const hs_real_type_device *t = &o->type_devices[i];
      if (i) fputc(',', f);
      hs_json_write_escaped(f, t->type);
      fputs(":{\"device\":", f);
      hs_json_write_escaped(f, t->device);
      fputs(",\"device_name\":", f);
      hs_json_write_escaped(f, t->device_name);
      fputc('}', f);
    }
    fputc('}', f);
  }
  fputc('}', f);
  return close_buf(f, buf, len, d);
}

/* Member key of obj as a number, 0 when it is missing or not a number (json_extract's NULL,
 * read as a number). */
static double get_number(const hs_json_value *obj, const char *key) {
  const hs_json_value *v = hs_json_get(obj, key);
  return v && v->type == HS_JSON_NUMBER ? v->number : 0;
}

static int64_t get_int(const hs_json_value *obj, const char *key) {
  const hs_json_value *v = hs_json_get(obj, key);
  if (!v || v->type != HS_JSON_NUMBER) return 0;
  if (v->is_integer) return v->integer;
  /* As SQLite reads a real as an integer: toward zero, clamped to the range. */
  if (!(v->number > -9.2e18)) return v->number < 0 ? INT64_MIN : 0;
  return v->number < 9.2e18 ? (int64_t)v->number : INT64_MAX;
}

static void get_string(const hs_json_value *obj, const char *key, char *buf, size_t len) {
  const hs_json_value *v = hs_json_get(obj, key);
  snprintf(buf, len, "%s", v && v->type == HS_JSON_STRING ? v->string : "");
}

/* Parses json (NULL reads as "{}") into a root object; HS_EINVAL when it is not one. */
static int parse_object(const char *json, hs_json_value **root, hs_diag *d) {
  if (!json) json = "{}";
  int rc = hs_json_parse(json, strlen(json), root, d);
  if (rc) return rc;
  if ((*root)->type != HS_JSON_OBJECT) {
    const char *type = hs_json_type_name((*root)->type);
    hs_json_value_free(*root);
    *root = NULL;
    return hs_diag_set(d, HS_EINVAL, "run options: expected a JSON object, got %s", type);
  }
  return 0;
}

int hs_real_options_parse(const char *json, hs_real_options *o, hs_diag *d) {
  memset(o, 0, sizeof *o);
  hs_json_value *root = NULL;
  int rc = parse_object(json, &root, d);
  if (rc) return rc;
  get_string(root, "backend", o->backend, sizeof o->backend);
  get_string(root, "device", o->device, sizeof o->device);
  get_string(root, "device_name", o->device_name, sizeof o->device_name);
  int64_t w = get_int(root, "workers");
  o->workers = w < 0 ? 0 : w > 1 << 30 ? 1 << 30 : (int)w;
  o->iterations = get_int(root, "iterations");
  o->epochs = get_number(root, "epochs");
  o->time_s = get_number(root, "time_s");
  o->target_loss = get_number(root, "target_loss");
  o->lr = get_number(root, "lr");
  o->eval_every = get_int(root, "eval_every");
  o->eval_samples = get_int(root, "eval_samples");
  o->train_samples = get_int(root, "train_samples");
  o->timeout_s = get_number(root, "timeout_s");
  get_string(root, "launch", o->launch, sizeof o->launch);
  get_string(root, "pin", o->pin, sizeof o->pin);
  const hs_json_value *p = hs_json_get(root, "pinned");
  o->pinned = p && p->type == HS_JSON_BOOL && p->boolean;
  o->target_accuracy = get_number(root, "target_accuracy");
  int64_t c = get_int(root, "cpus"), lr = get_int(root, "local_ranks");
  o->cpus = c < 0 ? 0 : c > HS_CPUS_MAX ? HS_CPUS_MAX : (int)c;
  o->local_ranks = lr < 0 ? 0 : lr > 1 << 20 ? 1 << 20 : (int)lr;
  const hs_json_value *td = hs_json_get(root, "type_devices");
  for (int i = 0; td && td->type == HS_JSON_OBJECT && i < td->n && o->n_type_devices < HS_REAL_MAX_TYPE_DEVICES; i++) {
    if (td->items[i].type != HS_JSON_OBJECT) continue;
    hs_real_type_device *t = &o->type_devices[o->n_type_devices++];
    snprintf(t->type, sizeof t->type, "%s", td->keys[i]);
    get_string(&td->items[i], "device", t->device, sizeof t->device);
    get_string(&td->items[i], "device_name", t->device_name, sizeof t->device_name);
  }
  hs_json_value_free(root);
  return 0;
}

/* A string, or null for "". */
static void put_string_or_null(FILE *f, const char *s) {
  if (s[0]) hs_json_write_escaped(f, s);
  else fputs("null", f);
}

int hs_sim_options_format(const hs_sim_options *o, char *buf, size_t len, hs_diag *d) {
  FILE *f;
  int rc = open_buf(buf, len, &f, d);
  if (rc) return rc;
  fprintf(f, "{\"iterations\":%lld,\"epochs\":", (long long)o->iterations);
  put_number(f, o->epochs);
  fputs(",\"sim_time_s\":", f);
  put_number(f, o->sim_time_s);
  fprintf(f, ",\"store\":\"%s\",\"convergence\":", o->store_steps ? "steps" : "summary");
  hs_json_write_escaped(f, o->convergence);
  fputs(",\"convergence_params\":", f);
  hs_json_write_escaped(f, o->convergence_params);
  fputs(",\"target_loss\":", f);
  put_number(f, o->target_loss);
  fputs(",\"target_accuracy\":", f);
  put_number(f, o->target_accuracy);
  fputs(",\"events_csv\":", f);
  put_string_or_null(f, o->events_csv);
  fprintf(f, ",\"grad_bytes\":%lld,\"convergence_source\":", (long long)o->grad_bytes);
  put_string_or_null(f, o->convergence_source);
  if (o->convergence_fit_id) fprintf(f, ",\"convergence_fit_id\":%lld}", (long long)o->convergence_fit_id);
  else fputs(",\"convergence_fit_id\":null}", f);
  return close_buf(f, buf, len, d);
}

int hs_sim_options_parse(const char *json, hs_sim_options *o, hs_diag *d) {
  memset(o, 0, sizeof *o);
  hs_json_value *root = NULL;
  int rc = parse_object(json, &root, d);
  if (rc) return rc;
  o->iterations = get_int(root, "iterations");
  o->epochs = get_number(root, "epochs");
  o->sim_time_s = get_number(root, "sim_time_s");
  char store[16];
  get_string(root, "store", store, sizeof store);
  o->store_steps = strcmp(store, "steps") == 0;
  get_string(root, "convergence", o->convergence, sizeof o->convergence);
  get_string(root, "convergence_params", o->convergence_params, sizeof o->convergence_params);
  o->target_loss = get_number(root, "target_loss");
  o->target_accuracy = get_number(root, "target_accuracy");
  get_string(root, "events_csv", o->events_csv, sizeof o->events_csv);
  o->grad_bytes = get_int(root, "grad_bytes");
  get_string(root, "convergence_source", o->convergence_source, sizeof o->convergence_source);
  o->convergence_fit_id = get_int(root, "convergence_fit_id");
  hs_json_value_free(root);
  return 0;
}

int hs_validate_options_format(const hs_validate_options *o, char *buf, size_t len, hs_diag *d) {
  FILE *f;
  int rc = open_buf(buf, len, &f, d);
  if (rc) return rc;
  fprintf(f, "{\"validates\":%lld,\"iterations\":%lld,\"convergence\":", (long long)o->validates,
          (long long)o->iterations);
  hs_json_write_escaped(f, o->convergence);
  fputs(",\"target_loss\":", f);
  put_number(f, o->target_loss);
  fprintf(f, ",\"grad_bytes\":%lld,\"validation_key\":", (long long)o->grad_bytes);
  hs_json_write_escaped(f, o->validation_key);
  fputc('}', f);
  return close_buf(f, buf, len, d);
}

int hs_validate_options_parse(const char *json, hs_validate_options *o, hs_diag *d) {
  memset(o, 0, sizeof *o);
  hs_json_value *root = NULL;
  int rc = parse_object(json, &root, d);
  if (rc) return rc;
  o->validates = get_int(root, "validates");
  o->iterations = get_int(root, "iterations");
  get_string(root, "convergence", o->convergence, sizeof o->convergence);
  const hs_json_value *tl = hs_json_get(root, "target_loss");
  o->target_loss = tl && tl->type == HS_JSON_NUMBER ? tl->number : NAN;
  o->grad_bytes = get_int(root, "grad_bytes");
  get_string(root, "validation_key", o->validation_key, sizeof o->validation_key);
  hs_json_value_free(root);
  return 0;
}
