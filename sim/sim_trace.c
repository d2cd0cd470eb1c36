/* sim_trace: streaming Chrome trace JSON.
 *
 * A large run writes millions of slices (2.7 million, 254 MB, for 1,024 workers x 1,000
 * iterations), so the cost per slice is what counts.
 * - The writer formats each record into a 4 KiB stage, which stays in the processor's cache;
 *   each full stage is copied to the 4 MiB write buffer with non-temporal stores (whole cache
 *   lines to memory, without first reading them in, and without pushing the simulation's own
 *   data out of the cache), and the file gets whole 4 MiB chunks: no stdio call, and no stdio
 *   lock, per field or per character.
 * - On a regular file the chunks go out with O_DIRECT where the file system takes it (the
 *   buffer, the chunks and their offsets are aligned): the kernel moves them to the disk
 *   without copying them into the page cache, managing 62,000 dirty pages and evicting other
 *   files' pages to make room, which cost more CPU than formatting the records. The tail's
 *   whole 4 KiB blocks go the same way; its last partial block, and every chunk on a file system
 *   that refuses O_DIRECT, is written normally. The buffer is in transparent huge pages where
 *   the system gives them: a direct write pins the buffer's pages, and each 4 KiB page is a
 *   segment of the disk's request. Larger chunks (8, 16 MiB) wait for the disk less often but
 *   take more fresh memory, which the kernel zeroes (on the project's VM, at times from the
 *   host: up to 9 ms per 2 MiB page); once records are staged they are no cheaper in CPU
 *   (docs/performance.md).
 * - Times are written with three decimals by integer arithmetic on the double's bits, digit for
 *   digit what printf's "%.3f" writes (the exact binary value rounded half to even), eight
 *   digits at a time by SWAR (a few multiplications on one 64-bit word); printf remains only
 *   for times of 2^53 us and more. Recent times are kept as text, by their bits.
 * - A slice's {"name":...,"cat":...,"ph":"X","pid":1,"tid": is escaped once per kind, a tid's
 *   digits once per thread (hs_trace_thread_name), and each kind keeps its last
 *   ,"ts":...,"dur":...}: consecutive slices of a kind with the same two times (the workers of a
 *   collective, or of one GPU type) are three fixed-size copies, in a small function of their
 *   own that needs few registers (put_slice_again). */
#define _GNU_SOURCE /* O_DIRECT */
#include "sim/sim_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The formatting helpers are inlined into the slice writer: called apart, their calls and
 * returns cost as much as their arithmetic. */
#if defined(__GNUC__)
#define TRACE_INLINE static inline __attribute__((always_inline))
#else
#define TRACE_INLINE static inline
#endif

/* TRACE_BUF and TRACE_STREAM can be set with -D to build the variants docs/performance.md
 * compares (other write sizes; the stage copied with memcpy). */
#ifndef TRACE_BUF
#define TRACE_BUF (4 * 1024 * 1024) /* bytes per write: a multiple of any disk's block */
#endif
#define TRACE_STAGE 4096 /* bytes formatted in the cache, then streamed to the write buffer */
_Static_assert(TRACE_BUF % TRACE_STAGE == 0, "whole stages fill the write buffer");
#ifndef TRACE_STREAM
#define TRACE_STREAM 1
#endif
#define TRACE_RECORD_MAX 2048  /* room a slice needs: its cached prefix, tid and two times */
_Static_assert(TRACE_RECORD_MAX < TRACE_STAGE, "a flushed stage has room for a record");
#define TRACE_ALIGN 4096        /* O_DIRECT's alignment of memory, size and offset */
#define TRACE_HUGE (2 * 1024 * 1024) /* the buffer's alignment: a transparent huge page's */
#define TID_CACHE_MAX (1 << 20) /* tids whose text is kept (hs_trace_thread_name) */

/* A slice's record up to its tid, kept for a (name, category) pair: a run writes millions of
 * slices under a handful of names. hs_trace_slice finds an entry by content;
 * hs_trace_slice_static by address (its strings never change while the writer is open). */
#define PREFIX_NAME_MAX 48
#define PREFIX_CACHE 8
#define TAIL_MAX 48 /* a kept ,"ts":...,"dur":...}: times of up to 34 characters together */
typedef struct slice_prefix {
  const char *name_ptr, *cat_ptr; /* as passed; NULL name_ptr: an empty entry */
  char name[PREFIX_NAME_MAX], cat[PREFIX_NAME_MAX];
  int has_cat;
  int by_address; /* made by hs_trace_slice_static: found by address */
  size_t len; /* of text, its leading ",\n" included */
  /* ,\n{"name":"...","cat":"...","ph":"X","pid":1,"tid": (the separator skipped for the first
   * record) */
  char text[2 + 2 * 6 * PREFIX_NAME_MAX + 64];
  /* The last slice's ,"ts":...,"dur":...} and the bits of its start_s and dur_s (NaNs while
   * empty): the workers of a collective end it together, one after the other, and those of one
   * GPU type compute together, so consecutive slices of a kind often repeat both times. */
  uint64_t tail_ts, tail_dur;
  size_t tail_len; /* 0: empty */
  char tail[TAIL_MAX];
} slice_prefix;

/* The text of a recently written time, kept by the double's bits: a synchronous policy's
 * workers start and end together, so most slices repeat a time that was just written (99% of
 * the times of SSGD's trace at 1,024 workers hit a cache of 256; 24% of asp's). */
#define TIME_CACHE_BITS 8
typedef struct time_text {
  uint64_t bits; /* of the value in us; a NaN's (never looked up) while empty */
  char text[24]; /* the text, and its length in text[23] */
} time_text;

struct hs_trace {
  /* First, so that posix_memalign's alignment of the struct is the buffer's. Records are
   * formatted past TRACE_STAGE by up to TRACE_RECORD_MAX bytes; whole TRACE_STAGE chunks go
   * to out. */
  char buf[TRACE_STAGE + TRACE_RECORD_MAX];
  char *out;      /* TRACE_BUF bytes, written whole */
  size_t out_len; /* bytes in out: a multiple of TRACE_STAGE */
  FILE *f;
  int fd;
  int direct; /* O_DIRECT is set on fd */
  char *path;
  uint64_t count; /* events written */
  int err;        /* errno of the first failed write, 0 while none failed */
  size_t len;     /* bytes in buf */
  int next_prefix; /* the cache entry to replace next */
  slice_prefix prefix[PREFIX_CACHE];
  slice_prefix kinds[HS_TRACE_KINDS]; /* hs_trace_kind's, never replaced */
  int nkinds;
  time_text times[1 << TIME_CACHE_BITS];
  /* The text of tids 0 .. ntid - 1 (up to TID_CACHE_MAX), made by hs_trace_thread_name:
   * 7 bytes and the length; tids past them are formatted at each slice. */
  char (*tids)[8];
  int ntid;
};

#ifndef O_DIRECT
#define O_DIRECT 0 /* never set: direct stays 0 */
#endif

/* n bytes at p to the file, in as many writes as it takes. A chunk that O_DIRECT refuses
 * (EINVAL: a file system with other alignment rules) is written again without it, and so are
 * all the chunks after it. */
static void trace_write(hs_trace *t, const char *p, size_t n) {
  while (n > 0 && !t->err) {
    ssize_t k = write(t->fd, p, n);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else if (k < 0 && errno == EINVAL && t->direct) {
      t->direct = 0;
      int fl = fcntl(t->fd, F_GETFL);
      if (fl == -1 || fcntl(t->fd, F_SETFL, fl & ~O_DIRECT) == -1) t->err = errno;
    } else {
      t->err = k < 0 && errno ? errno : EIO;
    }
  }
}

/* n bytes (a multiple of 64) from src to dst, both 16-byte aligned, past the caches. */
static void stream_copy(char *dst, const char *src, size_t n) {
#if TRACE_STREAM && defined(__SSE2__)
  for (size_t i = 0; i < n; i += 64) {
    __m128i a = _mm_load_si128((const __m128i *)(src + i));
    __m128i b = _mm_load_si128((const __m128i *)(src + i + 16));
    __m128i c = _mm_load_si128((const __m128i *)(src + i + 32));
    __m128i d = _mm_load_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a);
    _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c);
    _mm_stream_si128((__m128i *)(dst + i + 48), d);
  }
#else
  memcpy(dst, src, n);
#endif
}

/* out to the file: its first n bytes. */
static void trace_write_out(hs_trace *t, size_t n) {
#if TRACE_STREAM && defined(__SSE2__)
  _mm_sfence(); /* the streamed stores reach memory before the kernel reads it */
#endif
  trace_write(t, t->out, n);
}

/* Moves the first TRACE_STAGE bytes (len >= TRACE_STAGE) to out, writing out when it is full,
 * and the rest to the front, so that every write but the last is a whole, aligned chunk at an
 * aligned offset. */
static void trace_flush_chunk(hs_trace *t) {
  stream_copy(t->out + t->out_len, t->buf, TRACE_STAGE);
  t->out_len += TRACE_STAGE;
  if (t->out_len == TRACE_BUF) {
    trace_write_out(t, TRACE_BUF);
    t->out_len = 0;
  }
  t->len -= TRACE_STAGE;
  memmove(t->buf, t->buf + TRACE_STAGE, t->len);
}

/* Room for n more bytes (n <= TRACE_RECORD_MAX). */
static char *trace_room(hs_trace *t, size_t n) {
  (void)n;
  if (t->len >= TRACE_STAGE) trace_flush_chunk(t);
  return t->buf + t->len;
}

static void trace_put(hs_trace *t, const char *s, size_t n) {
  while (n > 0) {
    size_t k = sizeof t->buf - t->len;
    if (k == 0) {
      trace_flush_chunk(t);
      k = sizeof t->buf - t->len;
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
  if (2 + 6 * n <= TRACE_RECORD_MAX) {
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

/* The eight decimal digits of v < 10^8, with leading zeros, as the values 0..9 in the eight
 * bytes of the result, the most significant digit in the lowest byte (SWAR: v splits into two
 * 4-digit halves in 32-bit lanes, each into two 2-digit quarters in 16-bit lanes, each into two
 * digits in 8-bit lanes; each split is a multiplication by a reciprocal and a shift, exact
 * below the lane's bound: x * 10486 >> 20 is x / 100 for x < 10^4, x * 103 >> 10 is x / 10 for
 * x < 100). */
TRACE_INLINE uint64_t digits8(uint32_t v) {
  uint64_t hi = v / 10000, lo = v % 10000;
  uint64_t m = hi | (lo << 32);
  uint64_t top = ((m * 10486) >> 20) & ((UINT64_C(0x7f) << 32) | 0x7f);
  uint64_t h = ((m - 100 * top) << 16) + top;
  uint64_t tens = ((h * 103) >> 10) & UINT64_C(0x000f000f000f000f);
  return tens + ((h - 10 * tens) << 8);
}

/* The eight bytes of a, lowest first, at p. */
TRACE_INLINE void store8(char *p, uint64_t a) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p, &a, 8);
#else
  for (int i = 0; i < 8; i++) p[i] = (char)(a >> (8 * i));
#endif
}

#define ASCII_ZEROS UINT64_C(0x3030303030303030)

/* v < 10^8 in decimal at p, without leading zeros; writes 8 bytes, returns the end. */
TRACE_INLINE char *put_u8d(char *p, uint32_t v) {
  uint64_t d = digits8(v);
  int lz = d ? __builtin_ctzll(d) >> 3 : 7; /* leading zero digits: low bytes that are 0 */
  store8(p, (d + ASCII_ZEROS) >> (8 * lz));
  return p + 8 - lz;
}

/* v in decimal at p; may write up to 8 bytes past the end it returns. */
TRACE_INLINE char *put_u64(char *p, uint64_t v) {
  if (v < 100000000) return put_u8d(p, (uint32_t)v);
  if (v < UINT64_C(10000000000000000)) {
    p = put_u8d(p, (uint32_t)(v / 100000000));
  } else { /* 17 to 20 digits */
    p = put_u8d(p, (uint32_t)(v / UINT64_C(10000000000000000)));
    store8(p, digits8((uint32_t)(v / 100000000 % 100000000)) + ASCII_ZEROS);
    p += 8;
  }
  store8(p, digits8((uint32_t)(v % 100000000)) + ASCII_ZEROS);
  return p + 8;
}

TRACE_INLINE char *put_int(char *p, int v) {
  if (v < 0) {
    *p++ = '-';
    return put_u64(p, (uint64_t)0 - (uint64_t)(int64_t)v);
  }
  return put_u64(p, (uint64_t)v);
}

/* v with three decimals, as snprintf("%.3f") writes it (the caller has checked it is finite).
 * v = m * 2^e exactly; v * 1000 = m * 1000 * 2^e with m * 1000 < 2^63, so the rounding to an
 * integer number of thousandths is one shift and one comparison with half the divisor. */
TRACE_INLINE char *put_fix3(char *p, double v) {
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
  uint32_t f = (uint32_t)(q - ip * 1000);
  p = put_u64(p, ip);
  uint32_t f0 = (f * 41) >> 12; /* f / 100 for f < 1000 */
  uint32_t r = f - 100 * f0, f1 = (r * 103) >> 10;
  p[0] = '.';
  p[1] = (char)('0' + f0);
  p[2] = (char)('0' + f1);
  p[3] = (char)('0' + r - 10 * f1);
  return p + 4;
}

/* put_fix3 through the cache of recent times. */
TRACE_INLINE char *put_time(hs_trace *t, char *p, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  time_text *c = &t->times[(bits * UINT64_C(0x9e3779b97f4a7c15)) >> (64 - TIME_CACHE_BITS)];
  if (c->bits == bits) {
    memcpy(p, c->text, sizeof c->text); /* the record's room covers the bytes past the text */
    return p + c->text[23];
  }
  char *e = put_fix3(p, v);
  if (e - p < 24) {
    c->bits = bits;
    memcpy(c->text, p, sizeof c->text);
    c->text[23] = (char)(e - p);
  }
  return e;
}

int hs_trace_open_file(hs_trace **out, FILE *f, const char *path, hs_diag *d) {
  *out = NULL;
  void *mem = NULL, *obuf = NULL;
  char *p = posix_memalign(&mem, 64, sizeof(hs_trace)) == 0 &&
                    posix_memalign(&obuf, TRACE_HUGE, TRACE_BUF) == 0
                ? strdup(path)
                : NULL;
  if (!p) {
    free(mem);
    free(obuf);
    fclose(f);
    return hs_diag_set(d, HS_ENOMEM, "trace: out of memory");
  }
  hs_trace *t = mem;
  t->out = obuf;
  t->out_len = 0;
#ifdef MADV_HUGEPAGE
  /* The buffer in huge pages, where the system has them (a hint: nothing depends on it): a
   * direct write pins the buffer's pages, one at a time for small ones, and hands the disk one
   * segment per page (4 MiB in 4 KiB pages: five requests of 254 segments on the project's VM,
   * one request in two 2 MiB pages). */
  (void)madvise(t->out, TRACE_BUF, MADV_HUGEPAGE);
#endif
  t->f = f;
  t->fd = fileno(f); /* written with write(2): the FILE is only closed at the end */
  t->direct = 0;
  t->path = p;
  t->count = 0;
  t->err = 0;
  t->len = 0;
  t->next_prefix = 0;
  t->tids = NULL;
  t->ntid = 0;
  memset(t->prefix, 0, sizeof t->prefix);
  t->nkinds = 0;
  for (size_t i = 0; i < sizeof t->times / sizeof t->times[0]; i++)
    t->times[i].bits = UINT64_C(0x7ff8000000000001);
  /* O_DIRECT only on a regular file at offset 0 (a new file: the chunks' offsets are then
   * aligned); where the file system refuses it, fcntl or the first write says so and the
   * writer goes on without it. */
  struct stat st;
  if (O_DIRECT != 0 && fstat(t->fd, &st) == 0 && S_ISREG(st.st_mode) && lseek(t->fd, 0, SEEK_CUR) == 0) {
    int fl = fcntl(t->fd, F_GETFL);
    t->direct = fl != -1 && fcntl(t->fd, F_SETFL, fl | O_DIRECT) == 0;
  }
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

/* Keeps tid's text for the slices, growing the table to hold it (nothing kept where memory
 * runs out: the slices then format it). */
static void tid_keep(hs_trace *t, int tid) {
  if (tid < 0 || tid >= TID_CACHE_MAX) return;
  if (tid >= t->ntid) {
    int n = t->ntid ? t->ntid : 64;
    while (n <= tid) n *= 2;
    if (n > TID_CACHE_MAX) n = TID_CACHE_MAX;
    char(*p)[8] = realloc(t->tids, (size_t)n * sizeof *p);
    if (!p) return;
    memset(p + t->ntid, 0, (size_t)(n - t->ntid) * sizeof *p);
    t->tids = p;
    t->ntid = n;
  }
  char d[16];
  size_t len = (size_t)(put_int(d, tid) - d);
  if (len <= 7) {
    memcpy(t->tids[tid], d, len);
    t->tids[tid][7] = (char)len;
  }
}

void hs_trace_thread_name(hs_trace *t, int tid, const char *name) {
  tid_keep(t, tid);
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

/* Whether (name, cat) fit an entry. */
static int prefix_fits(const char *name, const char *cat) {
  return strlen(name) < PREFIX_NAME_MAX && (!cat || strlen(cat) < PREFIX_NAME_MAX);
}

/* Fills e with the record's text up to its tid for (name, cat), which fit (prefix_fits). */
static void prefix_fill(slice_prefix *e, const char *name, const char *cat, int by_address) {
  size_t nn = strlen(name), nc = cat ? strlen(cat) : 0;
  e->name_ptr = name;
  e->cat_ptr = cat;
  e->has_cat = cat != NULL;
  e->by_address = by_address;
  memcpy(e->name, name, nn + 1);
  if (cat) memcpy(e->cat, cat, nc + 1);
  char *p = e->text;
  memcpy(p, ",\n{\"name\":", 10);
  p = put_escaped(p + 10, name);
  if (cat) {
    memcpy(p, ",\"cat\":", 7);
    p = put_escaped(p + 7, cat);
  }
  memcpy(p, slice_mid, sizeof slice_mid - 1);
  e->len = (size_t)(p + sizeof slice_mid - 1 - e->text);
  e->tail_ts = e->tail_dur = UINT64_C(0x7ff8000000000001);
  e->tail_len = 0;
}

/* A new cache entry for (name, cat); NULL when the names are too long to cache. */
static slice_prefix *prefix_new(hs_trace *t, const char *name, const char *cat, int by_address) {
  if (!prefix_fits(name, cat)) return NULL;
  slice_prefix *e = &t->prefix[t->next_prefix];
  t->next_prefix = (t->next_prefix + 1) % PREFIX_CACHE;
  prefix_fill(e, name, cat, by_address);
  return e;
}

/* The cached prefix whose strings read as name and cat, made on first use. */
static slice_prefix *prefix_of(hs_trace *t, const char *name, const char *cat) {
  for (int i = 0; i < PREFIX_CACHE; i++) {
    slice_prefix *e = &t->prefix[i];
    if (e->name_ptr && !e->by_address && !strcmp(e->name, name) && e->has_cat == (cat != NULL) &&
        (!cat || !strcmp(e->cat, cat)))
      return e;
  }
  return prefix_new(t, name, cat, 0);
}

/* The same for strings that never change: found by address, among the entries made for such
 * strings (an address that prefix_of saw may since have been freed and reused). */
static slice_prefix *prefix_of_static(hs_trace *t, const char *name, const char *cat) {
  for (int i = 0; i < PREFIX_CACHE; i++) {
    slice_prefix *e = &t->prefix[i];
    if (e->name_ptr == name && e->cat_ptr == cat && e->by_address) return e;
  }
  return prefix_new(t, name, cat, 1);
}

/* The slice's record after its prefix e (NULL: names too long to cache, escaped through the
 * buffer). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void put_slice(hs_trace *t, slice_prefix *e, int tid, const char *name, const char *cat,
                      double start_s, double dur_s) {
  char *p;
  if (e) {
    p = trace_room(t, TRACE_RECORD_MAX);
    /* Fixed sizes: a few moves, where a call would be. The first record goes without its
     * separator. */
    const char *text = e->text + (t->count++ ? 0 : 2);
    size_t len = e->len - (size_t)(text - e->text);
    if (e->len <= 64) {
      memcpy(p, text, 64);
    } else {
      memcpy(p, text, len);
    }
    p += len;
  } else {
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
  if (tid >= 0 && tid < t->ntid && t->tids[tid][7]) {
    memcpy(p, t->tids[tid], 8);
    p += t->tids[tid][7];
  } else {
    p = put_int(p, tid);
  }
  uint64_t bs, bd;
  memcpy(&bs, &start_s, sizeof bs);
  memcpy(&bd, &dur_s, sizeof bd);
  if (e && e->tail_ts == bs && e->tail_dur == bd) { /* the kind's last times again */
    memcpy(p, e->tail, TAIL_MAX);
    t->len = (size_t)(p + e->tail_len - t->buf);
    return;
  }
  /* Microseconds with three decimals: nanosecond resolution, which the viewers accept. */
  char *q = p;
  memcpy(p, ",\"ts\":", 6);
  p = put_time(t, p + 6, start_s * 1e6);
  memcpy(p, ",\"dur\":", 7);
  p = put_time(t, p + 7, dur_s * 1e6);
  *p++ = '}';
  t->len = (size_t)(p - t->buf);
  if (e && e->len <= 64 && p - q <= TAIL_MAX) { /* as put_slice_again copies them */
    e->tail_ts = bs;
    e->tail_dur = bd;
    e->tail_len = (size_t)(p - q);
    memcpy(e->tail, q, TAIL_MAX); /* the record's room covers the bytes past its end */
  }
}

/* A slice of e's whose start_s and dur_s are those of e's last one (whose text e keeps: a
 * prefix of up to 64 bytes and a tail of up to TAIL_MAX, so those times were worth writing), on
 * a tid whose text is kept: its record copied, in fixed sizes. Returns 0 where put_slice must
 * write it. Small, and apart from put_slice, so that the common case needs few registers. */
TRACE_INLINE int put_slice_again(hs_trace *t, const slice_prefix *e, int tid, double start_s,
                                 double dur_s) {
  uint64_t bs, bd;
  memcpy(&bs, &start_s, sizeof bs);
  memcpy(&bd, &dur_s, sizeof bd);
  if (e->tail_ts != bs || e->tail_dur != bd || t->len >= TRACE_STAGE || (unsigned)tid >= (unsigned)t->ntid)
    return 0;
  const char *td = t->tids[tid];
  if (!td[7]) return 0;
  char *p = t->buf + t->len;
  memcpy(p, e->text, 64); /* the kept tail says a record was written: the separator is due */
  p += e->len;
  memcpy(p, td, 8);
  p += td[7];
  memcpy(p, e->tail, TAIL_MAX);
  t->len = (size_t)(p + e->tail_len - t->buf);
  t->count++;
  return 1;
}

/* A slice worth writing: finite times, a duration that is not negative. */
TRACE_INLINE int slice_ok(double start_s, double dur_s) {
  return fabs(start_s) <= DBL_MAX && dur_s >= 0.0 && dur_s <= DBL_MAX;
}

void hs_trace_slice(hs_trace *t, int tid, const char *name, const char *cat, double start_s,
                    double dur_s) {
  if (!slice_ok(start_s, dur_s)) return;
  if (!name) name = "";
  put_slice(t, prefix_of(t, name, cat), tid, name, cat, start_s, dur_s);
}

void hs_trace_slice_static(hs_trace *t, int tid, const char *name, const char *cat, double start_s,
                           double dur_s) {
  if (!slice_ok(start_s, dur_s)) return;
  if (!name) name = "";
  slice_prefix *e = prefix_of_static(t, name, cat);
  if (!e || !put_slice_again(t, e, tid, start_s, dur_s)) put_slice(t, e, tid, name, cat, start_s, dur_s);
}

int hs_trace_kind(hs_trace *t, const char *name, const char *cat) {
  if (!name || t->nkinds == HS_TRACE_KINDS || !prefix_fits(name, cat)) return -1;
  prefix_fill(&t->kinds[t->nkinds], name, cat, 1);
  return t->nkinds++;
}

void hs_trace_slice_kind(hs_trace *t, int tid, int kind, double start_s, double dur_s) {
  if (kind < 0 || kind >= t->nkinds) return;
  slice_prefix *e = &t->kinds[kind];
  if (put_slice_again(t, e, tid, start_s, dur_s)) return;
  if (slice_ok(start_s, dur_s)) put_slice(t, e, tid, NULL, NULL, start_s, dur_s);
}

uint64_t hs_trace_count(const hs_trace *t) { return t->count; }

int hs_trace_close(hs_trace *t, hs_diag *d) {
  if (!t) return 0;
  PUT_LIT(t, "\n]}\n");
  while (t->len >= TRACE_STAGE) trace_flush_chunk(t);
  memcpy(t->out + t->out_len, t->buf, t->len);
  size_t n = t->out_len + t->len;
  /* The tail's whole blocks directly too; the last, partial one O_DIRECT would refuse. */
  size_t done = t->direct ? n / TRACE_ALIGN * TRACE_ALIGN : 0;
  trace_write_out(t, done);
  if (t->direct && n > done) {
    int fl = fcntl(t->fd, F_GETFL);
    if (fl == -1 || fcntl(t->fd, F_SETFL, fl & ~O_DIRECT) == -1) {
      if (!t->err) t->err = errno;
    }
    t->direct = 0;
  }
  trace_write(t, t->out + done, n - done);
  t->len = t->out_len = 0;
  int e = t->err;
  /* fclose is where a file system that defers its errors (NFS, a full quota) reports them. */
  if (fclose(t->f) != 0 && !e) e = errno ? errno : EIO;
  int rc = 0;
  if (e) rc = hs_diag_set(d, HS_EIO, "%s: writing the trace failed: %s", t->path, strerror(e));
  free(t->path);
  free(t->tids);
  free(t->out);
  free(t);
  return rc;
}
