/* sim_trace: streaming Chrome trace JSON.
 *
 * A large run writes millions of slices, so the writer formats each record straight into its
 * own buffer and hands the file whole buffers (one write per 256 KiB): no stdio call, and no
 * stdio lock, per field or per character. Times are written with three decimals by integer
 * arithmetic on the double's bits, digit for digit what printf's "%.3f" writes (the exact
 * binary value rounded half to even); printf remains only for times of 2^53 us and more. */
#include "sim/sim_trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_BUF (256 * 1024)
#define TRACE_RECORD_MAX 2048 /* room a slice needs: its cached prefix, tid and two times */

/* A slice's record up to its tid, kept for a (name, category) pair: a run writes millions of
 * slices under a handful of names. Found by pointer and checked by content, so a caller that
 * reuses a buffer for another name gets that name. */
#define PREFIX_NAME_MAX 48
#define PREFIX_CACHE 8
typedef struct slice_prefix {
  const char *name_ptr, *cat_ptr; /* as passed; NULL name_ptr: an empty entry */
  char name[PREFIX_NAME_MAX], cat[PREFIX_NAME_MAX];
  int has_cat;
  size_t len;
  char text[2 * 6 * PREFIX_NAME_MAX + 64]; /* {"name":"...","cat":"...","ph":"X","pid":1,"tid": */
} slice_prefix;

struct hs_trace {
  FILE *f;
  char *path;
  uint64_t count; /* events written */
  int err;        /* errno of the first failed write, 0 while none failed */
  size_t len;     /* bytes in buf */
  int next_prefix; /* the cache entry to replace next */
  slice_prefix prefix[PREFIX_CACHE];
  char buf[TRACE_BUF];
};

static void trace_flush(hs_trace *t) {
  if (t->len && !t->err && fwrite(t->buf, 1, t->len, t->f) != t->len) t->err = errno ? errno : EIO;
  t->len = 0;
}

/* Makes room for n more bytes (n <= TRACE_BUF). */
static char *trace_room(hs_trace *t, size_t n) {
  if (t->len + n > TRACE_BUF) trace_flush(t);
  return t->buf + t->len;
}

static void trace_put(hs_trace *t, const char *s, size_t n) {
  while (n > 0) {
    size_t k = TRACE_BUF - t->len;
    if (k == 0) {
      trace_flush(t);
      k = TRACE_BUF;
    }
    if (k > n) k = n;
    memcpy(t->buf + t->len, s, k);
    t->len += k;
    s += k;
    n -= k;
  }
}
#define PUT_LIT(t, lit) trace_put((t), (lit), sizeof(lit) - 1)

/* s as a JSON string at p (room for 2 + 6 * strlen(s) bytes): quotes, the escapes JSON
 * requires, everything else (UTF-8 included) as is; returns the end. */
static char *put_escaped(char *p, const char *s) {
  static const char hex[] = "0123456789abcdef";
  *p++ = '"';
  for (unsigned char c; (c = (unsigned char)*s) != 0; s++) {
    if (c >= 0x20 && c != '"' && c != '\\') {
      *p++ = (char)c;
      continue;
    }
    *p++ = '\\';
    switch (c) {
    case '"': case '\\': *p++ = (char)c; break;
    case '\n': *p++ = 'n'; break;
    case '\r': *p++ = 'r'; break;
    case '\t': *p++ = 't'; break;
    default:
      memcpy(p, "u00", 3);
      p[3] = hex[c >> 4];
      p[4] = hex[c & 15];
      p += 5;
    }
  }
  *p++ = '"';
  return p;
}

/* The same through the buffer, for a string of any length. */
static void trace_put_escaped(hs_trace *t, const char *s) {
  size_t n = strlen(s);
  if (2 + 6 * n <= TRACE_BUF) {
    char *p = trace_room(t, 2 + 6 * n);
    t->len = (size_t)(put_escaped(p, s) - t->buf);
    return;
  }
  char chunk[2 + 6 * 64 + 1];
  PUT_LIT(t, "\"");
  for (size_t i = 0; i < n; i += 64) {
    char part[65];
    size_t k = n - i < 64 ? n - i : 64;
    memcpy(part, s + i, k);
    part[k] = 0;
    char *e = put_escaped(chunk, part);
    trace_put(t, chunk + 1, (size_t)(e - chunk - 2)); /* without its quotes */
  }
  PUT_LIT(t, "\"");
}

static const char digits2[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal digits of v at p, two at a time from a table; returns the end. */
static char *put_u32(char *p, uint32_t v) {
  int n = v >= 100000 ? (v >= 10000000 ? (v >= 100000000 ? (v >= 1000000000 ? 10 : 9) : 8)
                                       : (v >= 1000000 ? 7 : 6))
                      : (v >= 1000 ? (v >= 10000 ? 5 : 4) : (v >= 100 ? 3 : (v >= 10 ? 2 : 1)));
  char *q = p + n;
  while (v >= 100) {
    uint32_t r = v % 100;
    v /= 100;
    q -= 2;
    memcpy(q, digits2 + 2 * r, 2);
  }
  if (v >= 10) memcpy(q - 2, digits2 + 2 * v, 2);
  else q[-1] = (char)('0' + v);
  return p + n;
}

static char *put_u64(char *p, uint64_t v) {
  if (v <= UINT32_MAX) return put_u32(p, (uint32_t)v);
  p = put_u64(p, v / 1000000000);
  uint32_t lo = (uint32_t)(v % 1000000000);
  for (int i = 8; i >= 0; i--, lo /= 10) p[i] = (char)('0' + lo % 10);
  return p + 9;
}

static char *put_int(char *p, int v) {
  if (v < 0) {
    *p++ = '-';
    return put_u64(p, (uint64_t)0 - (uint64_t)(int64_t)v);
  }
  return put_u32(p, (uint32_t)v);
}

/* v with three decimals, as snprintf("%.3f") writes it (the caller has checked it is finite).
 * v = m * 2^e exactly; v * 1000 = m * 1000 * 2^e with m * 1000 < 2^63, so the rounding to an
 * integer number of thousandths is one shift and one comparison with half the divisor. */
static char *put_fix3(char *p, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  if (!(fabs(v) < 0x1p53)) return p + snprintf(p, 400, "%.3f", v); /* 400: the longest %.3f */
  if (bits >> 63) *p++ = '-'; /* printf keeps the sign of a value that rounds to zero */
  int ex = (int)((bits >> 52) & 0x7ff);
  uint64_t m = bits & ((UINT64_C(1) << 52) - 1);
  int e = ex ? ex - 1075 : -1074;
  if (ex) m |= UINT64_C(1) << 52;
  uint64_t q; /* round(|v| * 1000), ties to even */
  if (e >= 0) {
    q = (m << e) * 1000; /* |v| < 2^53 */
  } else if (e <= -64) {
    q = 0; /* m * 1000 < 2^63 <= half of 2^-e: below one half */
  } else {
    uint64_t x = m * 1000, k = (uint64_t)-e;
    q = x >> k;
    uint64_t rem = x & ((UINT64_C(1) << k) - 1), half = UINT64_C(1) << (k - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
  }
  uint64_t ip = q / 1000;
  unsigned f = (unsigned)(q - ip * 1000);
  p = put_u64(p, ip);
  p[0] = '.';
  p[1] = (char)('0' + f / 100);
  memcpy(p + 2, digits2 + 2 * (f % 100), 2);
  return p + 4;
}

int hs_trace_open_file(hs_trace **out, FILE *f, const char *path, hs_diag *d) {
  *out = NULL;
  hs_trace *t = malloc(sizeof *t);
  char *p = t ? strdup(path) : NULL;
  if (!p) {
    free(t);
    fclose(f);
    return hs_diag_set(d, HS_ENOMEM, "trace: out of memory");
  }
  t->f = f;
  t->path = p;
  t->count = 0;
  t->err = 0;
  t->len = 0;
  t->next_prefix = 0;
  memset(t->prefix, 0, sizeof t->prefix);
  setvbuf(t->f, NULL, _IONBF, 0); /* the writer's own buffer is the only one */
  PUT_LIT(t, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  *out = t;
  return 0;
}

int hs_trace_open(hs_trace **out, const char *path, hs_diag *d) {
  *out = NULL;
  FILE *f = fopen(path, "w");
  if (!f) {
    int e = errno;
    return hs_diag_set(d, HS_EIO, "%s: cannot create trace file: %s", path, strerror(e));
  }
  return hs_trace_open_file(out, f, path, d);
}

/* Separates records; the first one gets no comma, since JSON forbids a leading one. */
static void trace_sep(hs_trace *t) {
  if (t->count++) PUT_LIT(t, ",\n");
}

void hs_trace_thread_name(hs_trace *t, int tid, const char *name) {
  trace_sep(t);
  PUT_LIT(t, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":");
  char *p = trace_room(t, 32);
  t->len = (size_t)(put_int(p, tid) - t->buf);
  PUT_LIT(t, ",\"args\":{\"name\":");
  trace_put_escaped(t, name ? name : "");
  PUT_LIT(t, "}}");
  trace_sep(t);
  PUT_LIT(t, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":");
  p = trace_room(t, 64);
  p = put_int(p, tid);
  memcpy(p, ",\"args\":{\"sort_index\":", 22);
  p = put_int(p + 22, tid);
  memcpy(p, "}}", 2);
  t->len = (size_t)(p + 2 - t->buf);
}

static const char slice_mid[] = ",\"ph\":\"X\",\"pid\":1,\"tid\":";

/* The cached record prefix for (name, cat), made on first use; NULL when the names are too
 * long to cache. */
static const slice_prefix *prefix_of(hs_trace *t, const char *name, const char *cat) {
  for (int i = 0; i < PREFIX_CACHE; i++) {
    const slice_prefix *e = &t->prefix[i];
    if (e->name_ptr == name && e->cat_ptr == cat && !strcmp(e->name, name) &&
        (!cat || !strcmp(e->cat, cat)))
      return e;
  }
  size_t nn = strlen(name), nc = cat ? strlen(cat) : 0;
  if (nn >= PREFIX_NAME_MAX || nc >= PREFIX_NAME_MAX) return NULL;
  slice_prefix *e = &t->prefix[t->next_prefix];
  t->next_prefix = (t->next_prefix + 1) % PREFIX_CACHE;
  e->name_ptr = name;
  e->cat_ptr = cat;
  memcpy(e->name, name, nn + 1);
  if (cat) memcpy(e->cat, cat, nc + 1);
  char *p = e->text;
  memcpy(p, "{\"name\":", 8);
  p = put_escaped(p + 8, name);
  if (cat) {
    memcpy(p, ",\"cat\":", 7);
    p = put_escaped(p + 7, cat);
  }
  memcpy(p, slice_mid, sizeof slice_mid - 1);
  e->len = (size_t)(p + sizeof slice_mid - 1 - e->text);
  return e;
}

void hs_trace_slice(hs_trace *t, int tid, const char *name, const char *cat, double start_s,
                    double dur_s) {
  if (!isfinite(start_s) || !isfinite(dur_s) || dur_s < 0.0) return;
  if (!name) name = "";
  const slice_prefix *e = prefix_of(t, name, cat);
  char *p;
  if (e) {
    p = trace_room(t, TRACE_RECORD_MAX);
    if (t->count++) {
      memcpy(p, ",\n", 2);
      p += 2;
    }
    memcpy(p, e->text, e->len);
    p += e->len;
  } else { /* long names: escaped through the buffer */
    trace_sep(t);
    PUT_LIT(t, "{\"name\":");
    trace_put_escaped(t, name);
    if (cat) {
      PUT_LIT(t, ",\"cat\":");
      trace_put_escaped(t, cat);
    }
    p = trace_room(t, TRACE_RECORD_MAX);
    memcpy(p, slice_mid, sizeof slice_mid - 1);
    p += sizeof slice_mid - 1;
  }
  /* Microseconds with three decimals: nanosecond resolution, which the viewers accept. */
  p = put_int(p, tid);
  memcpy(p, ",\"ts\":", 6);
  p = put_fix3(p + 6, start_s * 1e6);
  memcpy(p, ",\"dur\":", 7);
  p = put_fix3(p + 7, dur_s * 1e6);
  *p++ = '}';
  t->len = (size_t)(p - t->buf);
}

uint64_t hs_trace_count(const hs_trace *t) { return t->count; }

int hs_trace_close(hs_trace *t, hs_diag *d) {
  if (!t) return 0;
  PUT_LIT(t, "\n]}\n");
  trace_flush(t);
  int e = t->err;
  /* fclose is where a file system that defers its errors (NFS, a full quota) reports them. */
  if (fclose(t->f) != 0 && !e) e = errno ? errno : EIO;
  int rc = 0;
  if (e) rc = hs_diag_set(d, HS_EIO, "%s: writing the trace failed: %s", t->path, strerror(e));
  free(t->path);
  free(t);
  return rc;
}
