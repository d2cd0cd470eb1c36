/* test_json: the strict JSON reader of core_json (what `hetsim calib import` reads profiles
 * with): values, positions, escapes, and every refusal with its LINE:COL. */
#include <stdint.h>
#include <string.h>

#include "core/core_json.h"
#include "tests/hs_test.h"

static hs_json_value *parse_ok(const char *text) {
  hs_json_value *v = NULL;
  hs_diag d = {0};
  int rc = hs_json_parse(text, strlen(text), &v, &d);
  if (rc) HS_FAIL_AT("parsing %s: %s", text, d.msg);
  return v;
}

/* Parses text, expects a refusal whose message contains want. */
static void parse_bad(const char *text, size_t len, const char *want) {
  hs_json_value *v = (hs_json_value *)1;
  hs_diag d = {0};
  int rc = hs_json_parse(text, len, &v, &d);
  if (rc != HS_EINVAL) HS_FAIL_AT("%.60s: expected HS_EINVAL, got %d", text, rc);
  if (v) HS_FAIL_AT("%.60s: *out should be NULL on failure", text);
  if (!strstr(d.msg, want)) HS_FAIL_AT("%.60s: message \"%s\" lacks \"%s\"", text, d.msg, want);
}
#define BAD(text, want) parse_bad(text, strlen(text), want)

static void test_values(void) {
  hs_json_value *v = parse_ok("{\"a\": [1, -2.5e3, 0, true, false, null, \"x\"],\n \"b\": {\"c\": {}}, \"big\": 1152921504606846976}");
  ASSERT(v);
  if (!v) return;
  ASSERT_EQ(v->type, HS_JSON_OBJECT);
  ASSERT_EQ(v->n, 3);
  ASSERT_STR(v->keys[0], "a");
  const hs_json_value *a = hs_json_get(v, "a");
  ASSERT(a && a->type == HS_JSON_ARRAY && a->n == 7);
  if (a && a->n == 7) {
    ASSERT(a->items[0].is_integer && a->items[0].integer == 1);
    ASSERT(!a->items[1].is_integer);
    ASSERT_NEAR(a->items[1].number, -2500, 0);
    ASSERT(a->items[2].is_integer && a->items[2].integer == 0);
    ASSERT(a->items[3].type == HS_JSON_BOOL && a->items[3].boolean == 1);
    ASSERT(a->items[4].type == HS_JSON_BOOL && a->items[4].boolean == 0);
    ASSERT_EQ(a->items[5].type, HS_JSON_NULL);
    ASSERT_STR(a->items[6].string, "x");
  }
  const hs_json_value *b = hs_json_get(v, "b");
  ASSERT(b && b->line == 2 && b->col == 7);
  ASSERT(hs_json_get(b, "c") && hs_json_get(b, "c")->type == HS_JSON_OBJECT && hs_json_get(b, "c")->n == 0);
  ASSERT(!hs_json_get(v, "nope"));
  ASSERT(!hs_json_get(a, "a")); /* not an object */
  const hs_json_value *big = hs_json_get(v, "big");
  ASSERT(big && big->is_integer && big->integer == (int64_t)1 << 60); /* exact beyond 2^53 */
  hs_json_value_free(v);
  /* A scalar document, surrounding white space, a byte order mark. */
  v = parse_ok(" \t\r\n 42 \n");
  ASSERT(v && v->is_integer && v->integer == 42);
  hs_json_value_free(v);
  v = parse_ok("\xef\xbb\xbf\"bom\"");
  ASSERT(v && v->type == HS_JSON_STRING && !strcmp(v->string, "bom"));
  hs_json_value_free(v);
  hs_json_value_free(NULL);
}

static void test_strings(void) {
  hs_json_value *v = parse_ok("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9 \\u20ac \\ud83d\\ude00 \xc3\xa9\"");
  ASSERT(v);
  if (!v) return;
  const char *want = "q\" b\\ s/ \b\f\n\r\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9";
  ASSERT_STR(v->string, want);
  ASSERT_EQ(v->len, strlen(want));
  hs_json_value_free(v);
}

static void test_refusals(void) {
  BAD("", "1:1: expected a JSON value, got the end of the text");
  BAD("[1, 2,]", "1:7: expected a value after ','");
  BAD("{\"a\": 1,}", "1:9: expected a key in double quotes");
  BAD("{\"a\" 1}", "1:6: expected ':' after the key");
  BAD("{'a': 1}", "1:2: expected a key in double quotes or '}'");
  BAD("[1 2]", "1:4: expected ',' or ']'");
  BAD("{\"a\": 1 \"b\": 2}", "1:9: expected ',' or '}'");
  BAD("01", "1:1: a number with a leading zero");
  BAD("-", "1:2: expected a digit");
  BAD("1.", "1:3: expected a digit after the decimal point");
  BAD("1e+", "1:4: expected a digit in the exponent");
  BAD("NaN", "1:1: expected a JSON value");
  BAD("Infinity", "1:1: expected a JSON value");
  BAD("1e999", "beyond the range of a double");
  BAD("tru", "1:1: expected a JSON value");
  BAD("// c\n1", "1:1: expected a JSON value");
  BAD("1 2", "1:3: expected the end of the text after the JSON value");
  BAD("\"abc", "1:1: a string that is never closed");
  BAD("\"a\tb\"", "1:3: expected a character of a string (control characters must be escaped)");
  BAD("\"\\x\"", "1:3: expected one of");
  BAD("\"\\u12G4\"", "expected 4 hex digits after \\u");
  BAD("\"\\ud83d\"", "a high surrogate \\uD83D without the low one");
  BAD("\"\\ude00\"", "a low surrogate \\uDE00 without a high one");
  BAD("\"\\u0000\"", "\\u0000 in a string");
  BAD("\"\xc3\"", "invalid UTF-8");
  BAD("\"\xc0\xaf\"", "invalid UTF-8");         /* overlong '/' */
  BAD("\"\xed\xa0\x80\"", "invalid UTF-8");     /* an encoded surrogate */
  BAD("{\"a\": 1,\n \"b\": 2, \"a\": 3}", "2:15: the key \"a\" is repeated in one object");
  parse_bad("[1, \0]", 6, "1:5: expected a JSON value, got byte 0x00");
  /* Nesting deeper than the limit is refused, not recursed into. */
  char deep[HS_JSON_MAX_DEPTH * 2 + 8];
  int n = HS_JSON_MAX_DEPTH + 1;
  for (int i = 0; i < n; i++) deep[i] = '[';
  for (int i = 0; i < n; i++) deep[n + i] = ']';
  deep[2 * n] = '\0';
  BAD(deep, "nesting deeper than");
  deep[n - 1] = ' ', deep[n] = ' '; /* one level less: accepted */
  hs_json_value *v = parse_ok(deep);
  hs_json_value_free(v);
}

static void test_describe(void) {
  hs_json_value *v = parse_ok("[-0.1, 12, \"12ms\", {\"a\": 1}, null, true, \"0123456789012345678901234567890123456789xyz\"]");
  ASSERT(v && v->n == 7);
  if (!v || v->n != 7) return;
  char buf[64];
  ASSERT_STR(hs_json_describe(&v->items[0], buf, sizeof buf), "-0.1");
  ASSERT_STR(hs_json_describe(&v->items[1], buf, sizeof buf), "12");
  ASSERT_STR(hs_json_describe(&v->items[2], buf, sizeof buf), "\"12ms\"");
  ASSERT_STR(hs_json_describe(&v->items[3], buf, sizeof buf), "an object");
  ASSERT_STR(hs_json_describe(&v->items[4], buf, sizeof buf), "null");
  ASSERT_STR(hs_json_describe(&v->items[5], buf, sizeof buf), "true");
  ASSERT_STR(hs_json_describe(&v->items[6], buf, sizeof buf), "\"0123456789012345678901234567890123456...\"");
  ASSERT_STR(hs_json_describe(NULL, buf, sizeof buf), "nothing");
  hs_json_value_free(v);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"values", test_values}, {"strings", test_strings}, {"refusals", test_refusals},
      {"describe", test_describe}, {NULL, NULL},
  };
  return hs_test_main("json", cases, argc, argv);
}
