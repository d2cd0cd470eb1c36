/* cli_common: what several subcommands share: usage errors, integer arguments, the command
 * line of a run, and the evaluations buffered while a run writes its steps. */
#include <stdarg.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "core/core_error.h"
#include "core/core_store.h"

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

int hs_cli_parse_int64(const char *s, int64_t min, int64_t *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < min) return -1;
  *out = v;
  return 0;
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

int hs_cli_evals_store(const hs_cli_evals *e, hs_store *s, int64_t run, hs_diag *d) {
  int rc = 0;
  for (int64_t i = 0; !rc && i < e->n; i++)
    rc = hs_store_eval_add(s, run, e->r[i].time_s, e->r[i].step, e->r[i].loss, e->r[i].accuracy, d);
  return rc;
}

void hs_cli_evals_free(hs_cli_evals *e) {
  free(e->r);
  e->r = NULL;
  e->n = e->cap = 0;
}
