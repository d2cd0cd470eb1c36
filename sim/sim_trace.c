/* sim_trace: streaming Chrome trace JSON. */
#include "sim/sim_trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_json.h"

struct hs_trace {
  FILE *f;
  char *path;
  uint64_t count; /* events written */
};

int hs_trace_open(hs_trace **out, const char *path, hs_diag *d) {
  *out = NULL;
  hs_trace *t = calloc(1, sizeof *t);
  char *p = t ? strdup(path) : NULL;
  if (!p) {
    free(t);
    return hs_diag_set(d, HS_ENOMEM, "trace: out of memory");
  }
  t->path = p;
  t->f = fopen(path, "w");
  if (!t->f) {
    int e = errno;
    free(t->path);
    free(t);
    return hs_diag_set(d, HS_EIO, "%s: cannot create trace file: %s", path, strerror(e));
  }
  /* Traces of large runs hold millions of small records; a large buffer keeps writes cheap. */
  setvbuf(t->f, NULL, _IOFBF, 1 << 20);
  fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", t->f);
  *out = t;
  return 0;
}

/* Separates records; the first one gets no comma, since JSON forbids a leading one. */
static void trace_sep(hs_trace *t) {
  if (t->count++) fputs(",\n", t->f);
}

void hs_trace_thread_name(hs_trace *t, int tid, const char *name) {
  trace_sep(t);
  fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":",
          tid);
  hs_json_write_escaped(t->f, name ? name : "");
  fputs("}}", t->f);
  trace_sep(t);
  fprintf(t->f,
          "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,"
          "\"args\":{\"sort_index\":%d}}",
          tid, tid);
}

void hs_trace_slice(hs_trace *t, int tid, const char *name, const char *cat, double start_s,
                    double dur_s) {
  if (!isfinite(start_s) || !isfinite(dur_s) || dur_s < 0.0) return;
  trace_sep(t);
  fputs("{\"name\":", t->f);
  hs_json_write_escaped(t->f, name ? name : "");
  if (cat) {
    fputs(",\"cat\":", t->f);
    hs_json_write_escaped(t->f, cat);
  }
  /* Microseconds with three decimals: nanosecond resolution, which the viewers accept. */
  fprintf(t->f, ",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", tid,
          start_s * 1e6, dur_s * 1e6);
}

uint64_t hs_trace_count(const hs_trace *t) { return t->count; }

int hs_trace_close(hs_trace *t, hs_diag *d) {
  if (!t) return 0;
  fputs("\n]}\n", t->f);
  int failed = ferror(t->f);
  int e = failed ? (errno ? errno : EIO) : 0;
  /* fclose flushes the last buffer, which is where a full disk usually shows up. */
  if (fclose(t->f) != 0 && !failed) {
    failed = 1;
    e = errno;
  }
  int rc = 0;
  if (failed) rc = hs_diag_set(d, HS_EIO, "%s: writing the trace failed: %s", t->path, strerror(e));
  free(t->path);
  free(t);
  return rc;
}
