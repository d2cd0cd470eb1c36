/* Tests of the Chrome trace writer: valid JSON, the slices present, errors reported. */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "hs_test.h"
#include "sim/sim_trace.h"

/* A minimal recursive-descent JSON validator: returns a pointer past the value, NULL if bad. */
static const char *js_value(const char *p, int depth);

static const char *js_ws(const char *p) {
  while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
  return p;
}

static const char *js_string(const char *p) {
  if (*p++ != '"') return NULL;
  while (*p && *p != '"') {
    if ((unsigned char)*p < 0x20) return NULL;
    if (*p == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!isxdigit((unsigned char)p[i])) return NULL;
        p += 4;
      } else if (!strchr("\"\\/bfnrt", *p) || !*p) {
        return NULL;
      }
    }
    p++;
  }
  return *p == '"' ? p + 1 : NULL;
}

static const char *js_number(const char *p) {
  const char *s = p;
  if (*p == '-') p++;
  if (!isdigit((unsigned char)*p)) return NULL;
  while (isdigit((unsigned char)*p)) p++;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p)) p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p)) p++;
  }
  return p > s ? p : NULL;
}

static const char *js_value(const char *p, int depth) {
  if (depth > 64) return NULL;
  p = js_ws(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    int obj = *p == '{';
    p = js_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (obj) {
        p = js_string(js_ws(p));
        if (!p) return NULL;
        p = js_ws(p);
        if (*p++ != ':') return NULL;
      }
      p = js_value(p, depth + 1);
      if (!p) return NULL;
      p = js_ws(p);
      if (*p == ',') { p++; continue; }
      return *p == close ? p + 1 : NULL;
    }
  }
  if (*p == '"') return js_string(p);
  if (!strncmp(p, "true", 4)) return p + 4;
  if (!strncmp(p, "false", 5)) return p + 5;
  if (!strncmp(p, "null", 4)) return p + 4;
  return js_number(p);
}

static int json_valid(const char *s) {
  const char *end = js_value(s, 0);
  return end && *js_ws(end) == '\0';
}

/* strstr without printing the haystack, which is a whole trace file here. */
#define ASSERT_IN(hay, needle) ASSERT(strstr((hay), (needle)) != NULL)

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (buf) buf[n] = '\0';
  fclose(f);
  return buf;
}

static void test_checker_self_test(void) {
  ASSERT(json_valid("{\"a\":[1,2.5,-3e2,\"x\\n\",true,null,{}]}"));
  ASSERT(!json_valid("{\"a\":[1,2,]}"));
  ASSERT(!json_valid("{\"a\":1"));
  ASSERT(!json_valid("[\"tab\there\"]"));
}

static void test_write_and_read_back(void) {
  const char *path = hs_test_tmp("trace.json");
  hs_trace *t;
  hs_diag d = {0};
  ASSERT_EQ(hs_trace_open(&t, path, &d), 0);
  if (!t) return;
  hs_trace_thread_name(t, 0, "worker 0 (gtx1070)");
  hs_trace_thread_name(t, 1, "worker \"1\"\n\\tab\t");
  for (int i = 0; i < 1000; i++) {
    hs_trace_slice(t, i % 2, "compute", "step", i * 0.01, 0.004);
    hs_trace_slice(t, i % 2, "allreduce", NULL, i * 0.01 + 0.004, 0.006);
  }
  hs_trace_slice(t, 0, "bad", "x", NAN, 1.0); /* skipped, not written as nan */
  hs_trace_slice(t, 0, "neg", "x", 1.0, -1.0);
  ASSERT_EQ(hs_trace_count(t), 4 + 2000);
  ASSERT_EQ(hs_trace_close(t, &d), 0);
  char *s = slurp(path);
  ASSERT(s != NULL);
  if (!s) return;
  ASSERT(json_valid(s));
  ASSERT(!strncmp(s, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 39));
  ASSERT_IN(s, "\"thread_name\"");
  ASSERT_IN(s, "\"thread_sort_index\"");
  ASSERT_IN(s, "worker \\\"1\\\"\\n\\\\tab\\t");
  ASSERT_IN(s, "{\"name\":\"compute\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":1,\"tid\":1,"
                     "\"ts\":10000.000,\"dur\":4000.000}");
  ASSERT(!strstr(s, "\"bad\""));
  ASSERT(!strstr(s, "\"neg\""));
  free(s);
  /* A second opinion from Python's json module, when python3 is there. */
  if (system("command -v python3 >/dev/null 2>&1") == 0) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
             "assert len(d[\"traceEvents\"])==2004' '%s'", path);
    ASSERT_EQ(system(cmd), 0);
  }
  remove(path);
}

static void test_empty_trace_is_valid(void) {
  const char *path = hs_test_tmp("empty.json");
  hs_trace *t;
  ASSERT_EQ(hs_trace_open(&t, path, NULL), 0);
  ASSERT_EQ(hs_trace_close(t, NULL), 0);
  char *s = slurp(path);
  ASSERT(s && json_valid(s));
  free(s);
  remove(path);
}

static void test_open_error_names_path(void) {
  hs_trace *t;
  hs_diag d = {0};
  ASSERT_EQ(hs_trace_open(&t, "/nonexistent-dir/x/trace.json", &d), HS_EIO);
  ASSERT(t == NULL);
  ASSERT_CONTAINS(d.msg, "/nonexistent-dir/x/trace.json");
  ASSERT_CONTAINS(d.msg, "No such file");
}

static void test_write_error_reported(void) {
  FILE *probe = fopen("/dev/full", "w");
  if (!probe) return; /* no /dev/full here: nothing to test */
  fclose(probe);
  hs_trace *t;
  hs_diag d = {0};
  ASSERT_EQ(hs_trace_open(&t, "/dev/full", &d), 0);
  if (!t) return;
  for (int i = 0; i < 100000; i++) hs_trace_slice(t, 0, "compute", "step", i, 0.5);
  ASSERT_EQ(hs_trace_close(t, &d), HS_EIO);
  ASSERT_CONTAINS(d.msg, "/dev/full");
}

/* The next "tid": at or after p, or NULL. A loop of its own: a sanitizer's strstr measures the
 * whole rest of the 20 MB trace at every call, which made this test take 7 minutes under ASan. */
static const char *next_tid(const char *p) {
  for (; *p; p++)
    if (p[0] == '"' && p[1] == 't' && p[2] == 'i' && p[3] == 'd' && p[4] == '"' && p[5] == ':') return p;
  return NULL;
}

/* The writer formats times itself: each must read exactly as snprintf("%.3f") writes it, over
 * every magnitude a run can reach and the exact ties (odd multiples of 1/16 us are halfway
 * between two thousandths), so that a trace is the same file as printf would have made. */
static void test_times_as_printf_writes_them(void) {
  const char *path = hs_test_tmp("fmt.json");
  hs_trace *t;
  ASSERT_EQ(hs_trace_open(&t, path, NULL), 0);
  if (!t) return;
  enum { N = 200000 };
  double *v = malloc(N * sizeof *v);
  uint64_t x = 88172645463325252ULL;
  for (int i = 0; i < N; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double u = (double)(x >> 11) * 0x1.0p-53;
    switch (i % 6) {
    case 0: v[i] = u * 1000.0; break;                                  /* up to 1000 s */
    case 1: v[i] = ldexp(u, (int)(x % 80) - 60); break;                /* 1e-18 s .. 1e6 s */
    case 2: v[i] = (double)(2 * (x % 100000) + 1) / 16.0 * 1e-6; break; /* ties, in us */
    case 3: v[i] = (double)(x % 1000000) * 1e-9; break;                /* whole nanoseconds */
    case 4: v[i] = ldexp(1.0, (int)(x % 40)) * 1e-6 - 5e-10; break;    /* near .xxx5 */
    default: v[i] = u * 1e10; break;                                   /* past 2^53 us */
    }
    hs_trace_slice(t, i, "s", NULL, v[i], i % 2 ? v[i] : 0.0);
  }
  ASSERT_EQ(hs_trace_close(t, NULL), 0);
  char *s = slurp(path);
  ASSERT(s != NULL);
  const char *p = s;
  int bad = 0;
  for (int i = 0; s && i < N && bad < 5; i++) {
    char want[256];
    snprintf(want, sizeof want, "\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", i, v[i] * 1e6,
             (i % 2 ? v[i] : 0.0) * 1e6);
    const char *q = next_tid(p);
    if (!q || strncmp(q, want, strlen(want)) != 0) {
      HS_FAIL_AT("slice %d (%.17g s): wanted %s, got %.60s", i, v[i], want, q ? q : "(end)");
      bad++;
    }
    if (q) p = q + 1;
  }
  free(s);
  free(v);
  remove(path);
}


/* hs_trace_slice_static writes what hs_trace_slice writes; hs_trace_slice reads its strings at
 * each call, so a buffer reused for another name gives that name; tids named by
 * hs_trace_thread_name (their digits kept) and others (formatted) read the same. */
static void test_static_names_and_tids(void) {
  const char *path = hs_test_tmp("static.json");
  hs_trace *t;
  ASSERT_EQ(hs_trace_open(&t, path, NULL), 0);
  if (!t) return;
  for (int i = 0; i < 3000; i += 7) hs_trace_thread_name(t, i, "w");
  hs_trace_thread_name(t, -3, "negative");
  char buf[16];
  strcpy(buf, "first");
  hs_trace_slice(t, 1, buf, NULL, 1.0, 1.0);
  strcpy(buf, "second");
  hs_trace_slice(t, 1, buf, NULL, 2.0, 1.0);
  for (int tid = -5; tid < 3100; tid++) {
    hs_trace_slice_static(t, tid, "compute", "comm", tid * 1e-3, 5e-4);
    hs_trace_slice(t, tid, "compute", "comm", tid * 1e-3, 5e-4);
  }
  /* more kinds than the writer caches, by address and by content */
  static const char *const kinds[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "ka"};
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 11; k++) hs_trace_slice_static(t, k, kinds[k], kinds[(k + 1) % 11], r, 0.5);
  hs_trace_slice_static(t, 0, "a long name, longer than the writer caches: 48 characters or more", "c", 0, 1);
  ASSERT_EQ(hs_trace_close(t, NULL), 0);
  char *s = slurp(path);
  ASSERT(s && json_valid(s));
  if (!s) return;
  ASSERT_IN(s, "{\"name\":\"first\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1000000.000,\"dur\":1000000.000}");
  ASSERT_IN(s, "{\"name\":\"second\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":2000000.000,\"dur\":1000000.000}");
  ASSERT_IN(s, "\"tid\":-3,\"args\":{\"sort_index\":-3}}");
  ASSERT_IN(s, "\"name\":\"a long name, longer than the writer caches: 48 characters or more\",\"cat\":\"c\"");
  const char *p = s;
  int bad = 0;
  for (int tid = -5; tid < 3100 && bad < 5; tid++) {
    char want[160];
    snprintf(want, sizeof want, "{\"name\":\"compute\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,"
             "\"ts\":%.3f,\"dur\":%.3f}", tid, tid * 1e-3 * 1e6, 5e-4 * 1e6);
    for (int twice = 0; twice < 2; twice++) { /* static, then by content */
      const char *q = strstr(p, "{\"name\":\"compute\"");
      if (!q || strncmp(q, want, strlen(want)) != 0) {
        HS_FAIL_AT("tid %d: wanted %s, got %.100s", tid, want, q ? q : "(end)");
        bad++;
      }
      if (q) p = q + 1;
    }
  }
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 11; k++) {
      char want[128];
      snprintf(want, sizeof want, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,"
               "\"ts\":%.3f,\"dur\":500000.000}", kinds[k], kinds[(k + 1) % 11], k, r * 1e6);
      const char *q = strstr(p, want);
      ASSERT(q != NULL);
      if (q) p = q + 1;
    }
  free(s);
  remove(path);
}

/* A stream that is not a regular file (a pipe): no O_DIRECT, the same text; the writer closes
 * the stream. More than one 4 MiB chunk, so that chunks and the tail both go through. */
static void test_stream_to_pipe(void) {
  const char *path = hs_test_tmp("piped.json");
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "cat > '%s'", path);
  FILE *f = popen(cmd, "w");
  ASSERT(f != NULL);
  if (!f) return;
  /* popen's stream must be closed by pclose: give the writer a dup of its descriptor. */
  FILE *g = fdopen(dup(fileno(f)), "w");
  ASSERT(g != NULL);
  hs_trace *t;
  ASSERT_EQ(hs_trace_open_file(&t, g, "a pipe", NULL), 0);
  enum { N = 100000 };
  for (int i = 0; i < N; i++) hs_trace_slice_static(t, i % 64, "compute", "compute", i * 1e-3, 1e-3);
  ASSERT_EQ(hs_trace_close(t, NULL), 0);
  ASSERT_EQ(pclose(f), 0);
  char *s = slurp(path);
  ASSERT(s && json_valid(s));
  if (s) {
    ASSERT(strlen(s) > 4 * 1024 * 1024);
    char want[160];
    snprintf(want, sizeof want, "\"tid\":%d,\"ts\":%.3f,\"dur\":1000.000}\n]}\n", (N - 1) % 64,
             (N - 1) * 1e-3 * 1e6);
    ASSERT_IN(s, want);
  }
  free(s);
  remove(path);
}

/* The text a trace should hold, built with snprintf alongside the writer's calls. */
typedef struct want_text {
  char *s;
  size_t len, cap;
  int records;
} want_text;

static void want_add(want_text *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void want_add(want_text *w, const char *fmt, ...) {
  char rec[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(rec, sizeof rec, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof rec) return;
  size_t need = w->len + (size_t)n + 3;
  if (need > w->cap) {
    size_t c = w->cap ? w->cap : 4096;
    while (c < need) c *= 2;
    char *p = realloc(w->s, c);
    if (!p) return;
    w->s = p;
    w->cap = c;
  }
  if (w->records++) {
    memcpy(w->s + w->len, ",\n", 2);
    w->len += 2;
  }
  memcpy(w->s + w->len, rec, (size_t)n);
  w->len += (size_t)n;
}

/* A slice as the writer should write it (cat NULL: none). */
static void want_slice(want_text *w, int tid, const char *name, const char *cat, double t0, double d) {
  if (cat)
    want_add(w, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
             name, cat, tid, t0 * 1e6, d * 1e6);
  else
    want_add(w, "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", name, tid,
             t0 * 1e6, d * 1e6);
}

static void want_thread(want_text *w, int tid, const char *name) {
  want_add(w, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", tid, name);
  want_add(w, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
           tid, tid);
}

/* The whole file: wanted text and the file's bytes the same; returns the file's length. */
static size_t expect_file(const char *path, const want_text *w) {
  static const char head[] = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", foot[] = "\n]}\n";
  char *s = slurp(path);
  ASSERT(s != NULL);
  if (!s) return 0;
  size_t n = strlen(s), hn = sizeof head - 1, fn = sizeof foot - 1;
  size_t want = hn + w->len + fn;
  ASSERT_EQ((long long)n, (long long)want);
  if (n == want && (memcmp(s, head, hn) || memcmp(s + hn, w->s, w->len) || memcmp(s + hn + w->len, foot, fn))) {
    size_t i = 0;
    while (i < w->len && s[hn + i] == w->s[i]) i++;
    HS_FAIL_AT("first difference at byte %zu: wanted %.80s, got %.80s", hn + i, w->s + (i > 40 ? i - 40 : 0),
               s + hn + (i > 40 ? i - 40 : 0));
  }
  free(s);
  return n;
}

/* Consecutive slices of a kind with the same start and duration (the workers of a collective,
 * or of one GPU type), whose record the writer copies from the kind's last one: the same text
 * as each written afresh, on tids with and without kept digits, through hs_trace_slice_kind,
 * _static and by content, for names whose text is longer than the writer copies at once, times
 * too long to keep, and -0.0 after 0.0 (equal values, different text). */
static void test_repeated_times(void) {
  const char *path = hs_test_tmp("repeat.json");
  hs_trace *t;
  ASSERT_EQ(hs_trace_open(&t, path, NULL), 0);
  if (!t) return;
  want_text w = {0};
  for (int tid = 0; tid < 40; tid++) {
    hs_trace_thread_name(t, tid, "w");
    want_thread(&w, tid, "w");
  }
  static const char longn[] = "a name of forty characters, more or less", longc[] = "and a category of forty, also";
  int comp = hs_trace_kind(t, "compute", "compute"), comm = hs_trace_kind(t, "allreduce", "comm");
  int lng = hs_trace_kind(t, longn, longc), bare = hs_trace_kind(t, "step", NULL);
  ASSERT(comp >= 0 && comm >= 0 && lng >= 0 && bare >= 0);
  static const int tids[] = {0, 1, 2, 39, 40, 41, 1000, -1, 5, 5, 6};
  enum { NT = sizeof tids / sizeof tids[0] };
  for (int r = 0; r < 30; r++) {
    double t0 = r * 0.125 + (r % 3) * 1e-7, big = 1e9 + r; /* big: 22 characters in us */
    for (int i = 0; i < NT; i++) {
      int tid = tids[i];
      double d = (abs(tid) % 3 + 1) * 0.01;
      hs_trace_slice_kind(t, tid, comp, t0, d);
      want_slice(&w, tid, "compute", "compute", t0, d);
      hs_trace_slice_kind(t, tid, comm, t0 + 0.05, 0.0625);
      want_slice(&w, tid, "allreduce", "comm", t0 + 0.05, 0.0625);
      double z = r % 2 ? -0.0 : 0.0; /* -0.000 after 0.000: equal doubles, other text */
      hs_trace_slice_kind(t, tid, bare, t0, i % 2 ? z : 0.0);
      want_slice(&w, tid, "step", NULL, t0, i % 2 ? z : 0.0);
      hs_trace_slice_kind(t, tid, lng, t0, 0.5);
      want_slice(&w, tid, longn, longc, t0, 0.5);
      hs_trace_slice_kind(t, tid, comm, big, big);
      want_slice(&w, tid, "allreduce", "comm", big, big);
      hs_trace_slice_static(t, tid, "wait", "wait", t0, 0.001);
      want_slice(&w, tid, "wait", "wait", t0, 0.001);
      hs_trace_slice(t, tid, "push", "comm", t0, 0.002);
      want_slice(&w, tid, "push", "comm", t0, 0.002);
      hs_trace_slice_kind(t, tid, comp, t0, NAN); /* skipped: nothing cached for it either */
      hs_trace_slice_kind(t, tid, comp, t0, -d);
    }
  }
  ASSERT_EQ((long long)hs_trace_count(t), (long long)w.records);
  ASSERT_EQ(hs_trace_close(t, NULL), 0);
  expect_file(path, &w);
  free(w.s);
  remove(path);
}

/* A regular file of several write buffers (direct writes where the file system takes them),
 * ending once on a whole 4 KiB block and once not: the same bytes as printf would write. */
static void test_large_file(void) {
  for (int exact = 0; exact < 2; exact++) {
    const char *path = hs_test_tmp(exact ? "large-exact.json" : "large.json");
    hs_trace *t;
    ASSERT_EQ(hs_trace_open(&t, path, NULL), 0);
    if (!t) return;
    want_text w = {0};
    int comp = hs_trace_kind(t, "compute", "compute");
    const size_t head_foot = 39 + 1 + 4; /* the file's text around the records */
    for (int i = 0;; i++) {
      double t0 = i * 1e-3, d = (i % 7) * 1e-4;
      hs_trace_slice_kind(t, i % 100, comp, t0, d);
      want_slice(&w, i % 100, "compute", "compute", t0, d);
      if (w.len > (size_t)40 << 20 && (!exact || (w.len + head_foot) % 4096 == 0)) break;
      if (w.len > (size_t)48 << 20) break; /* no whole block: the test below says so */
    }
    ASSERT_EQ(hs_trace_close(t, NULL), 0);
    size_t n = expect_file(path, &w);
    if (exact) ASSERT_EQ((long long)(n % 4096), 0LL);
    free(w.s);
    remove(path);
  }
}

/* hs_trace_slice_kind writes what hs_trace_slice writes for the kind's names; the writer gives
 * HS_TRACE_KINDS kinds, none for names too long, and ignores an id it did not give. */
static void test_kinds(void) {
  const char *path = hs_test_tmp("kinds.json");
  hs_trace *t;
  ASSERT_EQ(hs_trace_open(&t, path, NULL), 0);
  if (!t) return;
  int wait = hs_trace_kind(t, "wait", "wait"), comm = hs_trace_kind(t, "allreduce", "comm");
  int bare = hs_trace_kind(t, "step", NULL);
  ASSERT_EQ(wait, 0);
  ASSERT_EQ(comm, 1);
  ASSERT_EQ(bare, 2);
  ASSERT_EQ(hs_trace_kind(t, "a long name, longer than the writer caches: 48 characters or more", "c"), -1);
  int last = bare;
  for (int k = 3; k < HS_TRACE_KINDS; k++) last = hs_trace_kind(t, "more", "kinds");
  ASSERT_EQ(last, HS_TRACE_KINDS - 1);
  ASSERT_EQ(hs_trace_kind(t, "one", "too many"), -1);
  for (int tid = -2; tid < 70; tid++) {
    hs_trace_slice_kind(t, tid, comm, tid * 1e-3, 2.5e-4);
    hs_trace_slice(t, tid, "allreduce", "comm", tid * 1e-3, 2.5e-4);
  }
  hs_trace_slice_kind(t, 3, bare, 1.0, 0.5);
  hs_trace_slice_kind(t, 3, wait, NAN, 0.5); /* skipped, as hs_trace_slice skips it */
  hs_trace_slice_kind(t, 3, HS_TRACE_KINDS, 1.0, 0.5); /* ids it did not give: ignored */
  hs_trace_slice_kind(t, 3, -1, 1.0, 0.5);
  uint64_t n = hs_trace_count(t);
  ASSERT_EQ(hs_trace_close(t, NULL), 0);
  ASSERT_EQ((long long)n, 72LL * 2 + 1);
  char *s = slurp(path);
  ASSERT(s && json_valid(s));
  if (!s) return;
  const char *p = s;
  int bad = 0;
  for (int tid = -2; tid < 70 && bad < 5; tid++) {
    char want[160];
    snprintf(want, sizeof want, "{\"name\":\"allreduce\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,"
             "\"ts\":%.3f,\"dur\":%.3f}", tid, tid * 1e-3 * 1e6, 2.5e-4 * 1e6);
    for (int twice = 0; twice < 2; twice++) { /* by kind, then by name */
      const char *q = strstr(p, "{\"name\":\"allreduce\"");
      if (!q || strncmp(q, want, strlen(want)) != 0) {
        HS_FAIL_AT("tid %d: wanted %s, got %.100s", tid, want, q ? q : "(end)");
        bad++;
      }
      if (q) p = q + 1;
    }
  }
  ASSERT_IN(s, "{\"name\":\"step\",\"ph\":\"X\",\"pid\":1,\"tid\":3,\"ts\":1000000.000,\"dur\":500000.000}");
  free(s);
  remove(path);
}

static const hs_test_case cases[] = {
    {"times_as_printf_writes_them", test_times_as_printf_writes_them},
    {"checker_self_test", test_checker_self_test},
    {"write_and_read_back", test_write_and_read_back},
    {"empty_trace_is_valid", test_empty_trace_is_valid},
    {"open_error_names_path", test_open_error_names_path},
    {"write_error_reported", test_write_error_reported},
    {"static_names_and_tids", test_static_names_and_tids},
    {"kinds", test_kinds},
    {"stream_to_pipe", test_stream_to_pipe},
    {"repeated_times", test_repeated_times},
    {"large_file", test_large_file},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("trace", cases, argc, argv); }
