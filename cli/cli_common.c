/* cli_common: what several subcommands share: usage errors, integer arguments and run IDs,
 * opening the store, the command line and versions of a run, signals and wall time, the summary
 * of a run, and the evaluations buffered while a run writes its steps. */
#include <errno.h>
#include <stdio.h>
#include <dirent.h>
#include <gsl/gsl_version.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <yaml.h>

#include "calib/cal_import.h"
#include "cli/cli.h"
#include "core/core_config.h"
#include "core/core_buildinfo.h"
#include "core/core_error.h"
#include "core/core_json.h"
#include "core/core_store.h"
#include "core/core_units.h"
#include "nn/nn_zoo.h"

int hs_cli_usage(const char *cmd, int help, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hetsim %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (help) fprintf(stderr, "\nrun `hetsim %s --help` for the options", cmd);
  fputc('\n', stderr);
  return 2;
}

int hs_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hetsim %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(see hetsim %s --help)\n", cmd);
  return 2;
}

int hs_cli_parse_int64(const char *s, int64_t min, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  /* ERANGE: strtoll clamps to LLONG_MAX, which must not pass for the number given. */
  if (!*s || *end || errno || v < min) return -1;
  *out = v;
  return 0;
}

int hs_cli_parse_uint64(const char *s, uint64_t *out) {
  char *end;
  /* strtoull takes "-1" as 2^64 - 1 and skips blanks; only digits may pass. */
  if (*s < '0' || *s > '9') return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno) return -1;
  *out = v;
  return 0;
}

int hs_cli_parse_pin(const char *s, int *no_pin) {
  if (strcmp(s, "auto") && strcmp(s, "none")) return -1;
  *no_pin = !strcmp(s, "none");
  return 0;
}

int hs_cli_parse_run_id(const char *s, int64_t *id) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v <= 0) return -1;
  *id = v;
  return 0;
}

int hs_cli_parse_accuracy(const char *s, double *out) {
  size_t l = strlen(s);
  int pct = l > 0 && s[l - 1] == '%';
  char num[64];
  double v;
  if (l >= sizeof num) return -1;
  snprintf(num, sizeof num, "%.*s", (int)(pct ? l - 1 : l), s);
  if (hs_units_parse_number(num, &v) || !(v > 0) || v > (pct ? 100 : 1)) return -1;
  *out = pct ? v / 100 : v;
  return 0;
}

int hs_cli_store_open(const char *cmd, hs_store **s, const char *path, int flags) {
  hs_diag d = {0};
  int rc = hs_store_open(s, path, flags, &d);
  if (!rc) return 0;
  fprintf(stderr, "hetsim %s: %s\n", cmd, d.msg);
  if ((flags & HS_STORE_READONLY) && rc == HS_ENOTFOUND) return 2;
  return hs_exit_code(rc);
}

void hs_cli_unknown_model(const char *cmd, const char *model) {
  char names[256];
  hs_zoo_names(names, sizeof names);
  fprintf(stderr, "hetsim %s: --model: unknown model \"%s\"; valid: %s\n", cmd, model, names);
}

void hs_cli_warn_unnamed_compute(const char *cmd, const hs_cluster_spec *spec, const char *model) {
  char names[512];
  size_t o = 0;
  int n = 0;
  names[0] = '\0';
  for (int t = 0; t < spec->n_types; t++) {
    const hs_compute_spec *c = &spec->types[t].compute;
    if (c->kind != HS_COMPUTE_INLINE || c->model[0] || o >= sizeof names) continue;
    o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", n++ ? ", " : "", spec->types[t].name);
  }
  fprintf(stderr,
          "hetsim %s: warning: %s: the inline compute of %s does not say which model it was "
          "measured for, so it ignores the model: its times are used for %s as written (name it "
          "with `model: NAME`, or give per-model compute; docs/cli.md)\n",
          cmd, spec->path[0] ? spec->path : spec->name, names, model);
}

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int hs_cli_profile_path(const char *cluster_path, const char *name, char *out, size_t len) {
  if (name[0] == '/') {
    snprintf(out, len, "%s", name);
    return is_file(out) ? 0 : -1;
  }
  const char *slash = cluster_path ? strrchr(cluster_path, '/') : NULL;
  int dir_len = slash ? (int)(slash - cluster_path) : 1;
  if ((size_t)snprintf(out, len, "%.*s/%s", dir_len, slash ? cluster_path : ".", name) < len &&
      is_file(out))
    return 0;
  char first[4096];
  snprintf(first, sizeof first, "%s", out);
  const char *dir = getenv("HETSIM_PROFILES");
  if (!dir || !*dir) dir = HETSIM_PROFILES_DIR;
  size_t n = strlen(name);
  int has_ext = n > 5 && strcmp(name + n - 5, ".json") == 0;
  if ((size_t)snprintf(out, len, "%s/%s%s", dir, name, has_ext ? "" : ".json") < len && is_file(out))
    return 0;
  snprintf(out, len, "%s", first);
  return -1;
}

/* Imports every profile DIR/CARD/MODEL.json into s; returns 0, or 1 after printing why. */
static int import_bundled(const char *cmd, hs_store *s, const char *dir) {
  DIR *top = opendir(dir);
  if (!top) {
    fprintf(stderr, "hetsim %s: --bundled: cannot read %s\n", cmd, dir);
    return 1;
  }
  hs_cal_import_info *info = calloc(1, sizeof *info);
  int status = info ? 0 : 1;
  struct dirent *e;
  while (!status && (e = readdir(top))) {
    if (e->d_name[0] == '.') continue;
    char sub[4096];
    struct stat stb;
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    if (stat(sub, &stb) || !S_ISDIR(stb.st_mode)) continue;
    DIR *card = opendir(sub);
    struct dirent *f;
    while (card && !status && (f = readdir(card))) {
      size_t n = strlen(f->d_name);
      if (n < 6 || strcmp(f->d_name + n - 5, ".json")) continue;
      char path[8192];
      hs_diag d = {0};
      snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
      if (hs_cal_import_file(s, path, info, &d)) {
        fprintf(stderr, "hetsim %s: --bundled: %s\n", cmd, d.msg);
        status = 1;
      }
    }
    if (card) closedir(card);
  }
  closedir(top);
  free(info);
  return status;
}

int hs_cli_open_bundled(const char *cmd, hs_store **s, const char **dir) {
  const char *pdir = getenv("HETSIM_PROFILES");
  if (!pdir || !*pdir) pdir = HETSIM_PROFILES_DIR;
  *dir = pdir;
  hs_diag d = {0};
  if (hs_store_open(s, ":memory:", 0, &d)) {
    fprintf(stderr, "hetsim %s: %s\n", cmd, d.msg);
    return 1;
  }
  if (import_bundled(cmd, *s, pdir)) {
    hs_store_close(*s);
    *s = NULL;
    return 1;
  }
  return 0;
}

double hs_cli_wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void hs_cli_catch_signal(int sig, void (*handler)(int), struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, old);
}

void hs_cli_versions_json(char *buf, size_t len) {
  snprintf(buf, len, "{\"hetsim\":\"%s\",\"gsl\":\"%s\",\"sqlite\":\"%s\",\"libyaml\":\"%s\"}",
           HETSIM_VERSION, GSL_VERSION, sqlite3_libversion(), yaml_get_version_string());
}

void hs_cli_real_cluster_name(const char *backend, const char **cluster, const char **type) {
  int local = backend && !strcmp(backend, "local"), nccl = backend && !strcmp(backend, "nccl");
  *cluster = local ? "cuda-threads" : nccl ? "cuda-ranks" : "cpu-threads";
  *type = local || nccl ? "cuda" : "cpu";
}

void hs_cli_json_summary(hs_json *j, const hs_summary *m, int conv) {
  hs_json_key(j, "workers"); hs_json_int(j, m->workers);
  hs_json_key(j, "iterations"); hs_json_int(j, m->iterations);
  hs_json_key(j, "samples"); hs_json_int(j, m->samples);
  hs_json_key(j, "sim_time_s"); hs_json_double(j, m->sim_time_s);
  hs_json_key(j, "mean_iteration_s"); hs_json_double(j, m->mean_iteration_s);
  hs_json_key(j, "samples_per_s"); hs_json_double(j, m->samples_per_s);
  hs_json_key(j, "wait_fraction"); hs_json_double(j, m->wait_fraction);
  hs_json_key(j, "events"); hs_json_int(j, m->events);
  hs_json_key(j, "wall_s"); hs_json_double(j, m->wall_s);
  if (!conv) return;
  hs_json_key(j, "final_loss"); hs_json_double(j, m->final_loss);
  hs_json_key(j, "final_accuracy"); hs_json_double(j, m->final_accuracy);
  hs_json_key(j, "time_to_target_s"); hs_json_double(j, m->time_to_target_s);
}

void hs_cli_print_convergence(const hs_summary *m, int target) {
  printf("  final loss       %.6g\n", m->final_loss);
  if (!isnan(m->final_accuracy)) printf("  final accuracy   %.4f\n", m->final_accuracy);
  if (target) {
    if (isnan(m->time_to_target_s)) printf("  time to target   not reached\n");
    else printf("  time to target   %.6g s\n", m->time_to_target_s);
  }
}

void hs_cli_join_argv(int argc, char **argv, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "hetsim");
  for (int i = 0; i < argc && used < len; i++) {
    int k = snprintf(buf + used, len - used, " %s", argv[i]);
    if (k < 0) break;
    used += (size_t)k;
  }
}

int hs_cli_eval_sink(void *ctx, double time_s, int64_t step, double loss, double accuracy,
                     hs_diag *d) {
  hs_cli_evals *e = ctx;
  if (e->n == e->cap) {
    int64_t nc = e->cap ? 2 * e->cap : 256;
    hs_cli_eval *r = realloc(e->r, (size_t)nc * sizeof *r);
    if (!r) return hs_diag_set(d, HS_ENOMEM, "out of memory for evaluations");
    e->r = r;
    e->cap = nc;
  }
  e->r[e->n++] = (hs_cli_eval){.time_s = time_s, .loss = loss, .accuracy = accuracy, .step = step};
  return 0;
}

void hs_cli_evals_free(hs_cli_evals *e) {
  free(e->r);
  e->r = NULL;
  e->n = e->cap = 0;
}

int hs_cli_run_begin(hs_cli_run *r, hs_diag *d) {
  if (r->id) return 0;
  int rc = hs_store_run_begin(r->store, r->info, &r->id, d);
  if (!rc && r->store_steps) rc = hs_store_steps_begin(r->store, r->id, d);
  return rc;
}

int hs_cli_run_step_sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  hs_cli_run *r = ctx;
  int rc = hs_cli_run_begin(r, d);
  if (rc || !r->store_steps) return rc;
  if (r->max_rows > 0 && r->rows >= r->max_rows)
    return hs_diag_set(d, HS_ELIMIT, "the run reached the limit of %lld step rows (--max-step-rows): "
                       "give --store summary, a shorter run, or a higher limit", (long long)r->max_rows);
  r->rows++;
  return hs_store_step_add(r->store, row, d);
}

int hs_cli_run_finish(hs_cli_run *r, const char *status, const hs_summary *sum, const char *error,
                      const hs_worker_row *rows, int n, hs_diag *d) {
  int rc = hs_cli_run_begin(r, d);
  if (!rc && r->store_steps) rc = hs_store_steps_end(r->store, d);
  if (!rc) rc = hs_store_evals_add(r->store, r->id, r->evals.r, r->evals.n, d);
  if (!rc && rows) rc = hs_store_workers_add(r->store, r->id, rows, n, d);
  if (!rc) rc = hs_store_run_finish(r->store, r->id, status, sum, error, d);
  return rc;
}

void hs_cli_run_free(hs_cli_run *r) { hs_cli_evals_free(&r->evals); }
