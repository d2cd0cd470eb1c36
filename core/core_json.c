#include "core/core_json.h"

#include <math.h>
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

void hs_json_double(hs_json *j, double v) {
  before_item(j);
  if (!isfinite(v)) {
    fputs("null", j->out);
    return;
  }
  /* The shortest form that reads back as the same double: 41.8, not 41.799999999999997. */
  char buf[32];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
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
