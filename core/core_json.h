/* core_json: a small streaming JSON writer for summaries, query output and traces, and a strict
 * JSON reader for documents users bring (profiles, docs/profile.md).
 *
 * Writer: it tracks nesting so that commas are placed for the caller. Numbers that are not
 * finite are written as null, since JSON has no NaN or infinity. Not thread-safe: one writer
 * per stream.
 *
 * Reader: RFC 8259 and nothing more (no comments, no trailing commas, no NaN, no leading zeros,
 * no single quotes), so that a document hetsim accepts is one any JSON library accepts too.
 * Beyond the grammar it refuses what would make a document ambiguous: a key given twice in
 * one object, invalid UTF-8, a \u0000 in a string (strings are C strings here), a number
 * outside the range of a double, nesting deeper than HS_JSON_MAX_DEPTH. A leading UTF-8 byte
 * order mark is skipped. Errors are HS_EINVAL with "LINE:COL: expected ..., got ..." (1-based,
 * columns in bytes); the caller prefixes the file name. The tree is owned by the caller and
 * freed with hs_json_value_free; object members keep the document's order. */
#ifndef HS_CORE_JSON_H
#define HS_CORE_JSON_H

#include <stdint.h>
#include <stdio.h>

#include "core/core_error.h"

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

/* ---- reading ---- */

typedef enum hs_json_type {
  HS_JSON_NULL = 0, HS_JSON_BOOL, HS_JSON_NUMBER, HS_JSON_STRING, HS_JSON_ARRAY, HS_JSON_OBJECT
} hs_json_type;

typedef struct hs_json_value hs_json_value;
struct hs_json_value {
  hs_json_type type;
  int line, col;          /* where the value starts in the text, 1-based */
  int boolean;            /* HS_JSON_BOOL */
  double number;          /* HS_JSON_NUMBER */
  int is_integer;         /* HS_JSON_NUMBER written without fraction or exponent, fits int64 */
  int64_t integer;        /* its value then (exact, also beyond 2^53) */
  char *string;           /* HS_JSON_STRING: NUL-terminated UTF-8 */
  size_t len;             /* its length in bytes */
  int n;                  /* HS_JSON_ARRAY: items; HS_JSON_OBJECT: members */
  hs_json_value *items;   /* array items, or member values */
  char **keys;            /* HS_JSON_OBJECT: member keys, parallel to items */
};

/* Parses text[0..len) (no NUL needed) into a fresh tree in *out; *out is NULL on failure. */
int hs_json_parse(const char *text, size_t len, hs_json_value **out, hs_diag *d);
/* Frees a tree from hs_json_parse; NULL is allowed. */
void hs_json_value_free(hs_json_value *v);
/* The value of member key of an object; NULL when v is not an object or has no such key. */
const hs_json_value *hs_json_get(const hs_json_value *v, const char *key);
/* "null", "a boolean", "a number", "a string", "an array", "an object": for messages. */
const char *hs_json_type_name(hs_json_type t);
/* Writes a short rendering of v for "got ..." in messages: a number or string as written (a
 * string quoted, cut to about 40 characters), else its type name. Returns buf. */
char *hs_json_describe(const hs_json_value *v, char *buf, size_t size);

#endif
