/* Unit parsing and formatting: every suffix, the rejections, and round trips. */
#include "core/core_error.h"
#include "core/core_units.h"
#include "tests/hs_test.h"

static double t(const char *s) {
  double v = -1;
  int rc = hs_units_parse_time(s, &v);
  if (rc) HS_FAIL_AT("time \"%s\" rejected", s);
  return v;
}
static double by(const char *s) {
  double v = -1;
  int rc = hs_units_parse_bytes(s, &v);
  if (rc) HS_FAIL_AT("bytes \"%s\" rejected", s);
  return v;
}
static double bw(const char *s) {
  double v = -1;
  int rc = hs_units_parse_bandwidth(s, &v);
  if (rc) HS_FAIL_AT("bandwidth \"%s\" rejected", s);
  return v;
}

static void test_time_suffixes(void) {
  ASSERT_REL(t("20us"), 20e-6, 1e-12);
  ASSERT_REL(t("20\xc2\xb5s"), 20e-6, 1e-12);
  ASSERT_REL(t("4ms"), 4e-3, 1e-12);
  ASSERT_REL(t("1.5s"), 1.5, 1e-12);
  ASSERT_REL(t("2min"), 120, 1e-12);
  ASSERT_REL(t("1h"), 3600, 1e-12);
  ASSERT_REL(t("7ns"), 7e-9, 1e-12);
  ASSERT_REL(t("3sec"), 3, 1e-12);
  ASSERT_REL(t("2.5"), 2.5, 1e-12);
  ASSERT_REL(t("1e-3s"), 1e-3, 1e-12);
  ASSERT_REL(t(" 10 ms "), 10e-3, 1e-12);
  ASSERT_REL(t(".5s"), 0.5, 1e-12);
  ASSERT_REL(t("+3s"), 3, 1e-12);
  ASSERT_EQ(t("0s"), 0);
  ASSERT_EQ(t("0"), 0);
}

static void test_bytes_suffixes(void) {
  ASSERT_REL(by("8GiB"), 8.0 * 1024 * 1024 * 1024, 1e-12);
  ASSERT_REL(by("512MiB"), 512.0 * 1024 * 1024, 1e-12);
  ASSERT_REL(by("1.5GB"), 1.5e9, 1e-12);
  ASSERT_REL(by("100KB"), 100e3, 1e-12);
  ASSERT_REL(by("4kB"), 4e3, 1e-12);
  ASSERT_REL(by("1024B"), 1024, 1e-12);
  ASSERT_REL(by("2KiB"), 2048, 1e-12);
  ASSERT_REL(by("3MB"), 3e6, 1e-12);
  ASSERT_REL(by("2TB"), 2e12, 1e-12);
  ASSERT_REL(by("1TiB"), 1099511627776.0, 1e-12);
  ASSERT_REL(by("4096"), 4096, 1e-12);
  ASSERT_EQ(by("0B"), 0);
}

static void test_bandwidth_suffixes(void) {
  ASSERT_REL(bw("10Gbps"), 10e9 / 8, 1e-12);
  ASSERT_REL(bw("10Gbit/s"), 10e9 / 8, 1e-12);
  ASSERT_REL(bw("10Gb/s"), 10e9 / 8, 1e-12);
  ASSERT_REL(bw("100Mbps"), 100e6 / 8, 1e-12);
  ASSERT_REL(bw("1kbps"), 125, 1e-12);
  ASSERT_REL(bw("1Tbps"), 1e12 / 8, 1e-12);
  ASSERT_REL(bw("1.25GB/s"), 1.25e9, 1e-12);
  ASSERT_REL(bw("25GiB/s"), 25.0 * 1024 * 1024 * 1024, 1e-12);
  ASSERT_REL(bw("8GB/s"), 8e9, 1e-12);
  ASSERT_REL(bw("300MB/s"), 300e6, 1e-12);
  ASSERT_REL(bw("2GBps"), 2e9, 1e-12);
  ASSERT_REL(bw("1000"), 1000, 1e-12);
  ASSERT_REL(bw("1e9B/s"), 1e9, 1e-12);
}

static void test_number_and_count(void) {
  double v;
  long long n;
  ASSERT_EQ(hs_units_parse_number("2.0", &v), 0);
  ASSERT_REL(v, 2.0, 1e-15);
  ASSERT_EQ(hs_units_parse_number("0", &v), 0);
  ASSERT_EQ(v, 0);
  ASSERT_EQ(hs_units_parse_number("2x", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_number("2s", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_count("100000", 1000000, &n), 0);
  ASSERT_EQ(n, 100000);
  ASSERT_EQ(hs_units_parse_count("0", 10, &n), 0);
  ASSERT_EQ(n, 0);
  ASSERT_EQ(hs_units_parse_count("11", 10, &n), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_count("1.5", 10, &n), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_count("-1", 10, &n), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_count("", 10, &n), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_count("99999999999999999999999", 1000, &n), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_count("9223372036854775807", 9223372036854775807LL, &n), 0);
  ASSERT_EQ(hs_units_parse_count("9223372036854775808", 9223372036854775807LL, &n), HS_EINVAL);
}

static void test_rejections(void) {
  static const char *const bad_any[] = {"",     "   ",  "-1s",  "nan",  "inf",   "NaN",
                                        "1e999", "s",    "1..2s", "1s2",  "1 2s",  "0x10",
                                        "--1",  "1e",   "fast", "1s s", "1,5s",  NULL};
  double v = 42;
  for (const char *const *b = bad_any; *b; b++) {
    if (hs_units_parse_time(*b, &v) != HS_EINVAL) HS_FAIL_AT("time accepted \"%s\"", *b);
    if (hs_units_parse_bytes(*b, &v) != HS_EINVAL) HS_FAIL_AT("bytes accepted \"%s\"", *b);
    if (hs_units_parse_bandwidth(*b, &v) != HS_EINVAL) HS_FAIL_AT("bw accepted \"%s\"", *b);
    if (hs_units_parse_number(*b, &v) != HS_EINVAL) HS_FAIL_AT("number accepted \"%s\"", *b);
  }
  ASSERT_EQ(v, 42); /* untouched on failure */
  ASSERT_EQ(hs_units_parse_time("5GB", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_time("5S", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_bytes("5Gbps", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_bytes("5gib", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_bytes("5G", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_bandwidth("5GB", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_bandwidth("0Gbps", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_bandwidth("0", &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_bandwidth("1e-400", &v), HS_EINVAL); /* underflows to 0 */
  ASSERT_EQ(hs_units_parse_bytes("1e300TiB", &v), HS_EINVAL);   /* overflows */
  ASSERT_EQ(hs_units_parse_time(NULL, &v), HS_EINVAL);
  ASSERT_EQ(hs_units_parse_time("1s", NULL), HS_EINVAL);
}

static void test_format(void) {
  char b[32];
  ASSERT_STR(hs_units_format_time(20e-6, b, sizeof b), "20us");
  ASSERT_STR(hs_units_format_time(4e-3, b, sizeof b), "4ms");
  ASSERT_STR(hs_units_format_time(1.5, b, sizeof b), "1.5s");
  ASSERT_STR(hs_units_format_time(90, b, sizeof b), "90s");
  ASSERT_STR(hs_units_format_time(300, b, sizeof b), "5min");
  ASSERT_STR(hs_units_format_time(7200, b, sizeof b), "2h");
  ASSERT_STR(hs_units_format_time(0, b, sizeof b), "0ns");
  ASSERT_STR(hs_units_format_bytes(8.0 * 1024 * 1024 * 1024, b, sizeof b), "8GiB");
  ASSERT_STR(hs_units_format_bytes(512, b, sizeof b), "512B");
  ASSERT_STR(hs_units_format_bytes(1536, b, sizeof b), "1.5KiB");
  ASSERT_STR(hs_units_format_bandwidth(10e9 / 8, b, sizeof b), "10Gbps");
  ASSERT_STR(hs_units_format_bandwidth(1.25e9, b, sizeof b), "10Gbps");
  ASSERT_STR(hs_units_format_bandwidth(12.5e6, b, sizeof b), "100Mbps");
  /* Truncation into a tiny buffer stays NUL-terminated. */
  char tiny[3];
  hs_units_format_time(1234.5, tiny, sizeof tiny);
  ASSERT_EQ(strlen(tiny), 2);
}

static void test_round_trip(void) {
  static const double values[] = {3e-9, 20e-6, 0.0042, 1.5, 59, 600, 86400};
  char b[32];
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    double v;
    ASSERT_EQ(hs_units_parse_time(hs_units_format_time(values[i], b, sizeof b), &v), 0);
    ASSERT_REL(v, values[i], 1e-3);
    ASSERT_EQ(hs_units_parse_bytes(hs_units_format_bytes(values[i] * 1e9, b, sizeof b), &v), 0);
    ASSERT_REL(v, values[i] * 1e9, 1e-3);
    ASSERT_EQ(hs_units_parse_bandwidth(hs_units_format_bandwidth(values[i] * 1e9, b, sizeof b), &v),
              0);
    ASSERT_REL(v, values[i] * 1e9, 1e-3);
  }
}

static const hs_test_case cases[] = {
    {"time_suffixes", test_time_suffixes},
    {"bytes_suffixes", test_bytes_suffixes},
    {"bandwidth_suffixes", test_bandwidth_suffixes},
    {"number_and_count", test_number_and_count},
    {"rejections", test_rejections},
    {"format", test_format},
    {"round_trip", test_round_trip},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("units", cases, argc, argv); }
