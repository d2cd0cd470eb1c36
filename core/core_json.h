/* core_json: a small streaming JSON writer for summaries, query output and traces.
 *
 * The writer tracks nesting so that commas are placed for the caller. Numbers that are not
 * finite are written as null, since JSON has no NaN or infinity. Not thread-safe: one writer
 * per stream. */
#ifndef HS_CORE_JSON_H
#define HS_CORE_JSON_H

#include <stdint.h>
#include <stdio.h>

#define HS_JSON_MAX_DEPTH 32

typedef struct hs_json {
  FILE *out;
  int depth;
  int count[HS_JSON_MAX_DEPTH]; /* members written at each depth */
  int pretty;                   /* 1: newlines and two-space indent */
  int after_key;                /* a key was just written; the value needs no comma */
} hs_json;

void hs_json_init(hs_json *j, FILE *out, int pretty);
void hs_json_object_begin(hs_json *j);
void hs_json_object_end(hs_json *j);
void hs_json_array_begin(hs_json *j);
void hs_json_array_end(hs_json *j);
void hs_json_key(hs_json *j, const char *key);
void hs_json_string(hs_json *j, const char *s); /* NULL writes null */
/* len bytes of s, NUL bytes included (written as \u0000), for texts that may hold them. */
void hs_json_string_len(hs_json *j, const char *s, size_t len);
void hs_json_double(hs_json *j, double v);
void hs_json_int(hs_json *j, int64_t v);
void hs_json_uint(hs_json *j, uint64_t v);
void hs_json_bool(hs_json *j, int v);
void hs_json_null(hs_json *j);
/* Writes s as a JSON string literal with escapes; usable without a writer. */
void hs_json_write_escaped(FILE *out, const char *s);
void hs_json_write_escaped_len(FILE *out, const char *s, size_t len);

#endif
