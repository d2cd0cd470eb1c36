#include "core/core_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void hs_json_init(hs_json *j, FILE *out, int pretty) {
  j->out = out;
  j->depth = 0;
  j->count[0] = 0;
  j->pretty = pretty;
  j->after_key = 0;
}

static void indent(hs_json *j) {
  if (!j->pretty) return;
  fputc('\n', j->out);
  for (int i = 0; i < j->depth; i++) fputs("  ", j->out);
}

/* Called before every value or key: writes the separating comma and indentation. */
static void before_item(hs_json *j) {
  if (j->after_key) {
    j->after_key = 0;
    return;
  }
  if (j->depth > 0) {
    if (j->count[j->depth] > 0) fputc(',', j->out);
    indent(j);
  }
  j->count[j->depth]++;
}

static void open(hs_json *j, char c) {
  before_item(j);
  fputc(c, j->out);
  if (j->depth + 1 < HS_JSON_MAX_DEPTH) j->depth++;
  j->count[j->depth] = 0;
}

static void close_(hs_json *j, char c) {
  int had = j->count[j->depth] > 0;
  if (j->depth > 0) j->depth--;
  if (had) indent(j);
  fputc(c, j->out);
  if (j->depth == 0 && j->pretty) fputc('\n', j->out);
}

void hs_json_object_begin(hs_json *j) { open(j, '{'); }
void hs_json_object_end(hs_json *j) { close_(j, '}'); }
void hs_json_array_begin(hs_json *j) { open(j, '['); }
void hs_json_array_end(hs_json *j) { close_(j, ']'); }

void hs_json_write_escaped(FILE *out, const char *s) { hs_json_write_escaped_len(out, s, strlen(s)); }

void hs_json_write_escaped_len(FILE *out, const char *s, size_t len) {
  fputc('"', out);
  const unsigned char *end = (const unsigned char *)s + len;
  for (const unsigned char *p = (const unsigned char *)s; p < end; p++) {
    switch (*p) {
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    case '\n': fputs("\\n", out); break;
    case '\r': fputs("\\r", out); break;
    case '\t': fputs("\\t", out); break;
    default:
      if (*p < 0x20) fprintf(out, "\\u%04x", *p);
      else fputc(*p, out);
    }
  }
  fputc('"', out);
}

void hs_json_key(hs_json *j, const char *key) {
  before_item(j);
  hs_json_write_escaped(j->out, key);
  fputs(j->pretty ? ": " : ":", j->out);
  j->after_key = 1;
}

void hs_json_string(hs_json *j, const char *s) {
  before_item(j);
  if (s) hs_json_write_escaped(j->out, s);
  else fputs("null", j->out);
}

void hs_json_string_len(hs_json *j, const char *s, size_t len) {
  before_item(j);
  hs_json_write_escaped_len(j->out, s, len);
}

/* The shortest form that reads back as the same double: 41.8, not 41.799999999999997. */
static void shortest(double v, char *buf, size_t size) {
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
}

void hs_json_double(hs_json *j, double v) {
  before_item(j);
  if (!isfinite(v)) {
    fputs("null", j->out);
    return;
  }
  char buf[32];
  shortest(v, buf, sizeof buf);
  fputs(buf, j->out);
}

void hs_json_int(hs_json *j, int64_t v) {
  before_item(j);
  fprintf(j->out, "%lld", (long long)v);
}

void hs_json_uint(hs_json *j, uint64_t v) {
  before_item(j);
  fprintf(j->out, "%llu", (unsigned long long)v);
}

void hs_json_bool(hs_json *j, int v) {
  before_item(j);
  fputs(v ? "true" : "false", j->out);
}

void hs_json_null(hs_json *j) {
  before_item(j);
  fputs("null", j->out);
}

/* ---- reading ---- */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

typedef struct jparser {
  const unsigned char *p, *end, *line_start;
  int line;
  hs_diag *d;
} jparser;

static int col_of(const jparser *ps, const unsigned char *at) {
  return (int)(at - ps->line_start) + 1;
}

/* What stands at the parser's position, for "got ...". */
static void got_here(const jparser *ps, char *buf, size_t size) {
  if (ps->p >= ps->end) {
    snprintf(buf, size, "the end of the text");
    return;
  }
  unsigned char c = *ps->p;
  if (c >= 0x20 && c < 0x7f) snprintf(buf, size, "'%c'", c);
  else snprintf(buf, size, "byte 0x%02x", c);
}

static int jfail_at(jparser *ps, const unsigned char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int jfail_at(jparser *ps, const unsigned char *at, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return hs_diag_set(ps->d, HS_EINVAL, "%d:%d: %s", ps->line, col_of(ps, at), what);
}

/* "expected WHAT, got X" at the parser's position. */
static int jexpected(jparser *ps, const char *what) {
  char got[32];
  got_here(ps, got, sizeof got);
  return jfail_at(ps, ps->p, "expected %s, got %s", what, got);
}

static void skip_ws(jparser *ps) {
  while (ps->p < ps->end) {
    unsigned char c = *ps->p;
    if (c == '\n') {
      ps->p++;
      ps->line++;
      ps->line_start = ps->p;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ps->p++;
    } else {
      break;
    }
  }
}

static int literal(jparser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) return jexpected(ps, "a JSON value");
  ps->p += n;
  return 0;
}

static int hexval(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int read_hex4(jparser *ps, unsigned *out) {
  if (ps->end - ps->p < 4) return jexpected(ps, "4 hex digits after \\u");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(ps->p[i]);
    if (h < 0) {
      ps->p += i;
      return jexpected(ps, "4 hex digits after \\u");
    }
    v = v * 16 + (unsigned)h;
  }
  ps->p += 4;
  *out = v;
  return 0;
}

/* Length of the valid UTF-8 sequence at p (1 to 4), or 0 when it is not valid (overlong forms,
 * surrogates and code points beyond U+10FFFF are not). */
static int utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  int n;
  unsigned cp, min;
  if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1fu, min = 0x80;
  else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0fu, min = 0x800;
  else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07u, min = 0x10000;
  else return 0;
  if (end - p < n) return 0;
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

static size_t put_utf8(char *out, unsigned cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* A string at ps->p (the opening quote) into a fresh NUL-terminated buffer. The decoded text is
 * never longer than the quoted one, which sizes the buffer. */
static int parse_string(jparser *ps, char **out, size_t *out_len) {
  const unsigned char *start = ps->p;
  ps->p++; /* the quote */
  const unsigned char *q = ps->p;
  while (q < ps->end && *q != '"') q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
  char *buf = malloc((size_t)(q - ps->p) + 1);
  if (!buf) return hs_diag_set(ps->d, HS_ENOMEM, "out of memory reading JSON");
  size_t n = 0;
  int rc = 0;
  for (;;) {
    if (ps->p >= ps->end) {
      rc = jfail_at(ps, start, "a string that is never closed (expected '\"')");
      break;
    }
    unsigned char c = *ps->p;
    if (c == '"') {
      ps->p++;
      break;
    }
    if (c < 0x20) {
      rc = jexpected(ps, "a character of a string (control characters must be escaped)");
      break;
    }
    if (c != '\\') {
      int l = utf8_len(ps->p, ps->end);
      if (!l) {
        rc = jfail_at(ps, ps->p, "invalid UTF-8 in a string (byte 0x%02x)", c);
        break;
      }
      memcpy(buf + n, ps->p, (size_t)l);
      n += (size_t)l;
      ps->p += l;
      continue;
    }
    const unsigned char *esc = ps->p;
    ps->p++;
    if (ps->p >= ps->end) {
      rc = jexpected(ps, "an escape after '\\'");
      break;
    }
    c = *ps->p++;
    switch (c) {
    case '"': buf[n++] = '"'; break;
    case '\\': buf[n++] = '\\'; break;
    case '/': buf[n++] = '/'; break;
    case 'b': buf[n++] = '\b'; break;
    case 'f': buf[n++] = '\f'; break;
    case 'n': buf[n++] = '\n'; break;
    case 'r': buf[n++] = '\r'; break;
    case 't': buf[n++] = '\t'; break;
    case 'u': {
      unsigned cp;
      if ((rc = read_hex4(ps, &cp))) break;
      if (cp >= 0xd800 && cp <= 0xdbff) {
        unsigned lo;
        if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') {
          rc = jfail_at(ps, esc, "a high surrogate \\u%04X without the low one after it", cp);
          break;
        }
        ps->p += 2;
        if ((rc = read_hex4(ps, &lo))) break;
        if (lo < 0xdc00 || lo > 0xdfff) {
          rc = jfail_at(ps, esc, "a high surrogate \\u%04X followed by \\u%04X, not a low surrogate", cp, lo);
          break;
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      } else if (cp >= 0xdc00 && cp <= 0xdfff) {
        rc = jfail_at(ps, esc, "a low surrogate \\u%04X without a high one before it", cp);
        break;
      } else if (cp == 0) {
        rc = jfail_at(ps, esc, "\\u0000 in a string (not accepted here)");
        break;
      }
      n += put_utf8(buf + n, cp);
      break;
    }
    default:
      ps->p--;
      rc = jexpected(ps, "one of \" \\ / b f n r t u after '\\'");
    }
    if (rc) break;
  }
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  *out_len = n;
  return 0;
}

static int parse_number(jparser *ps, hs_json_value *v) {
  const unsigned char *s = ps->p, *p = ps->p;
  int integral = 1;
  if (p < ps->end && *p == '-') p++;
  if (p >= ps->end || !is_digit(*p)) {
    ps->p = p;
    return jexpected(ps, "a digit");
  }
  if (*p == '0') {
    p++;
    if (p < ps->end && is_digit(*p)) return jfail_at(ps, s, "a number with a leading zero");
  } else {
    while (p < ps->end && is_digit(*p)) p++;
  }
  if (p < ps->end && *p == '.') {
    integral = 0;
    p++;
    if (p >= ps->end || !is_digit(*p)) {
      ps->p = p;
      return jexpected(ps, "a digit after the decimal point");
    }
    while (p < ps->end && is_digit(*p)) p++;
  }
  if (p < ps->end && (*p == 'e' || *p == 'E')) {
    integral = 0;
    p++;
    if (p < ps->end && (*p == '+' || *p == '-')) p++;
    if (p >= ps->end || !is_digit(*p)) {
      ps->p = p;
      return jexpected(ps, "a digit in the exponent");
    }
    while (p < ps->end && is_digit(*p)) p++;
  }
  char buf[400];
  size_t n = (size_t)(p - s);
  if (n >= sizeof buf) return jfail_at(ps, s, "a number of more than %zu characters", sizeof buf - 1);
  memcpy(buf, s, n);
  buf[n] = '\0';
  errno = 0;
  double x = strtod(buf, NULL);
  if (!isfinite(x)) return jfail_at(ps, s, "a number beyond the range of a double: %s", buf);
  v->type = HS_JSON_NUMBER;
  v->number = x;
  if (integral) {
    errno = 0;
    long long i = strtoll(buf, NULL, 10);
    if (!errno) {
      v->is_integer = 1;
      v->integer = i;
    }
  }
  ps->p = p;
  return 0;
}

/* Sorting member indices by key finds a repeated key in n log n. */
typedef struct key_ref {
  const char *key;
  int index;
} key_ref;

static int cmp_key_ref(const void *a, const void *b) {
  const key_ref *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int parse_value(jparser *ps, hs_json_value *v, int depth);

static int grow(jparser *ps, hs_json_value *v, int *cap, int with_keys) {
  if (v->n < *cap) return 0;
  int nc = *cap ? *cap * 2 : 4;
  hs_json_value *ni = realloc(v->items, (size_t)nc * sizeof *ni);
  if (!ni) return hs_diag_set(ps->d, HS_ENOMEM, "out of memory reading JSON");
  v->items = ni;
  if (with_keys) {
    char **nk = realloc(v->keys, (size_t)nc * sizeof *nk);
    if (!nk) return hs_diag_set(ps->d, HS_ENOMEM, "out of memory reading JSON");
    v->keys = nk;
  }
  *cap = nc;
  return 0;
}

static int parse_array(jparser *ps, hs_json_value *v, int depth) {
  v->type = HS_JSON_ARRAY;
  ps->p++; /* [ */
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == ']') {
    ps->p++;
    return 0;
  }
  int cap = 0, rc;
  for (;;) {
    if ((rc = grow(ps, v, &cap, 0))) return rc;
    memset(&v->items[v->n], 0, sizeof v->items[v->n]);
    v->n++;
    skip_ws(ps);
    if ((rc = parse_value(ps, &v->items[v->n - 1], depth + 1))) return rc;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      skip_ws(ps);
      if (ps->p < ps->end && *ps->p == ']') return jexpected(ps, "a value after ',' (no trailing commas in JSON)");
      continue;
    }
    if (ps->p < ps->end && *ps->p == ']') {
      ps->p++;
      return 0;
    }
    return jexpected(ps, "',' or ']'");
  }
}

static int parse_object(jparser *ps, hs_json_value *v, int depth) {
  v->type = HS_JSON_OBJECT;
  ps->p++; /* { */
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == '}') {
    ps->p++;
    return 0;
  }
  int cap = 0, rc;
  for (;;) {
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '"')
      return jexpected(ps, v->n ? "a key in double quotes (no trailing commas in JSON)" : "a key in double quotes or '}'");
    if ((rc = grow(ps, v, &cap, 1))) return rc;
    memset(&v->items[v->n], 0, sizeof v->items[v->n]);
    v->keys[v->n] = NULL;
    v->n++;
    size_t kl;
    if ((rc = parse_string(ps, &v->keys[v->n - 1], &kl))) return rc;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') return jexpected(ps, "':' after the key");
    ps->p++;
    skip_ws(ps);
    if ((rc = parse_value(ps, &v->items[v->n - 1], depth + 1))) return rc;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == '}') {
      ps->p++;
      break;
    }
    return jexpected(ps, "',' or '}'");
  }
  if (v->n < 2) return 0;
  key_ref *refs = malloc((size_t)v->n * sizeof *refs);
  if (!refs) return hs_diag_set(ps->d, HS_ENOMEM, "out of memory reading JSON");
  for (int i = 0; i < v->n; i++) refs[i] = (key_ref){v->keys[i], i};
  qsort(refs, (size_t)v->n, sizeof *refs, cmp_key_ref);
  rc = 0;
  for (int i = 1; i < v->n && !rc; i++)
    if (!strcmp(refs[i].key, refs[i - 1].key)) {
      const hs_json_value *second = &v->items[refs[i].index];
      rc = hs_diag_set(ps->d, HS_EINVAL, "%d:%d: the key \"%.100s\" is repeated in one object (this is its second value; a key may appear once)",
                       second->line, second->col, refs[i].key);
    }
  free(refs);
  return rc;
}

static int parse_value(jparser *ps, hs_json_value *v, int depth) {
  v->line = ps->line;
  v->col = col_of(ps, ps->p);
  if (depth > HS_JSON_MAX_DEPTH) return jfail_at(ps, ps->p, "nesting deeper than %d levels", HS_JSON_MAX_DEPTH);
  if (ps->p >= ps->end) return jexpected(ps, "a JSON value");
  switch (*ps->p) {
  case '{': return parse_object(ps, v, depth);
  case '[': return parse_array(ps, v, depth);
  case '"':
    v->type = HS_JSON_STRING;
    return parse_string(ps, &v->string, &v->len);
  case 't':
    v->type = HS_JSON_BOOL;
    v->boolean = 1;
    return literal(ps, "true");
  case 'f':
    v->type = HS_JSON_BOOL;
    return literal(ps, "false");
  case 'n':
    v->type = HS_JSON_NULL;
    return literal(ps, "null");
  default:
    if (*ps->p == '-' || is_digit(*ps->p)) return parse_number(ps, v);
    return jexpected(ps, "a JSON value");
  }
}

static void value_clear(hs_json_value *v) {
  for (int i = 0; i < v->n; i++) {
    if (v->items) value_clear(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->string);
}

void hs_json_value_free(hs_json_value *v) {
  if (!v) return;
  value_clear(v);
  free(v);
}

int hs_json_parse(const char *text, size_t len, hs_json_value **out, hs_diag *d) {
  *out = NULL;
  jparser ps = {.p = (const unsigned char *)text, .end = (const unsigned char *)text + len, .line = 1, .d = d};
  ps.line_start = ps.p;
  if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) ps.p += 3, ps.line_start = ps.p;
  hs_json_value *v = calloc(1, sizeof *v);
  if (!v) return hs_diag_set(d, HS_ENOMEM, "out of memory reading JSON");
  skip_ws(&ps);
  int rc = parse_value(&ps, v, 1);
  if (!rc) {
    skip_ws(&ps);
    if (ps.p < ps.end) rc = jexpected(&ps, "the end of the text after the JSON value");
  }
  if (rc) {
    hs_json_value_free(v);
    return rc;
  }
  *out = v;
  return 0;
}

const hs_json_value *hs_json_get(const hs_json_value *v, const char *key) {
  if (!v || v->type != HS_JSON_OBJECT) return NULL;
  for (int i = 0; i < v->n; i++)
    if (!strcmp(v->keys[i], key)) return &v->items[i];
  return NULL;
}

const char *hs_json_type_name(hs_json_type t) {
  switch (t) {
  case HS_JSON_NULL: return "null";
  case HS_JSON_BOOL: return "a boolean";
  case HS_JSON_NUMBER: return "a number";
  case HS_JSON_STRING: return "a string";
  case HS_JSON_ARRAY: return "an array";
  case HS_JSON_OBJECT: return "an object";
  }
  return "a value";
}

char *hs_json_describe(const hs_json_value *v, char *buf, size_t size) {
  if (!size) return buf;
  if (!v) {
    snprintf(buf, size, "nothing");
  } else if (v->type == HS_JSON_NUMBER) {
    if (v->is_integer) snprintf(buf, size, "%lld", (long long)v->integer);
    else shortest(v->number, buf, size);
  } else if (v->type == HS_JSON_STRING) {
    if (v->len > 40) snprintf(buf, size, "\"%.37s...\"", v->string);
    else snprintf(buf, size, "\"%s\"", v->string);
  } else if (v->type == HS_JSON_BOOL) {
    snprintf(buf, size, "%s", v->boolean ? "true" : "false");
  } else {
    snprintf(buf, size, "%s", hs_json_type_name(v->type));
  }
  return buf;
}
