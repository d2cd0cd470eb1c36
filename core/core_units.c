#include "core/core_units.h"

#include "core/core_error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct unit_suffix {
  const char *suffix;
  double mult; /* base units per 1 of this suffix */
} unit_suffix;

static const unit_suffix time_units[] = {
    {"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ms", 1e-3}, {"s", 1.0},
    {"sec", 1.0}, {"min", 60.0}, {"h", 3600.0},      {NULL, 0.0}};

#define KI 1024.0
static const unit_suffix byte_units[] = {
    {"B", 1.0},           {"kB", 1e3},         {"KB", 1e3},
    {"MB", 1e6},          {"GB", 1e9},         {"TB", 1e12},
    {"KiB", KI},          {"MiB", KI * KI},    {"GiB", KI * KI * KI},
    {"TiB", KI * KI * KI * KI}, {NULL, 0.0}};

static const unit_suffix bw_units[] = {
    /* bits per second: divide by 8 to get bytes */
    {"bps", 1.0 / 8},     {"kbps", 1e3 / 8},   {"Kbps", 1e3 / 8},  {"Mbps", 1e6 / 8},
    {"Gbps", 1e9 / 8},    {"Tbps", 1e12 / 8},  {"bit/s", 1.0 / 8}, {"kbit/s", 1e3 / 8},
    {"Kbit/s", 1e3 / 8},  {"Mbit/s", 1e6 / 8}, {"Gbit/s", 1e9 / 8}, {"Tbit/s", 1e12 / 8},
    {"b/s", 1.0 / 8},     {"kb/s", 1e3 / 8},   {"Kb/s", 1e3 / 8},  {"Mb/s", 1e6 / 8},
    {"Gb/s", 1e9 / 8},    {"Tb/s", 1e12 / 8},
    /* bytes per second */
    {"B/s", 1.0},         {"kB/s", 1e3},       {"KB/s", 1e3},      {"MB/s", 1e6},
    {"GB/s", 1e9},        {"TB/s", 1e12},      {"KiB/s", KI},      {"MiB/s", KI * KI},
    {"GiB/s", KI * KI * KI}, {"TiB/s", KI * KI * KI * KI},
    {"Bps", 1.0},         {"kBps", 1e3},       {"KBps", 1e3},      {"MBps", 1e6},
    {"GBps", 1e9},        {"TBps", 1e12},      {NULL, 0.0}};

/* Compute rates: FLOP per second. "TFLOPS", "TFLOP/s" and "TFLOPs" all mean 10^12 FLOP/s. */
static const unit_suffix flops_units[] = {
    {"FLOPS", 1.0},   {"FLOP/s", 1.0},   {"FLOPs", 1.0},
    {"kFLOPS", 1e3},  {"kFLOP/s", 1e3},  {"kFLOPs", 1e3},  {"KFLOPS", 1e3},
    {"MFLOPS", 1e6},  {"MFLOP/s", 1e6},  {"MFLOPs", 1e6},
    {"GFLOPS", 1e9},  {"GFLOP/s", 1e9},  {"GFLOPs", 1e9},
    {"TFLOPS", 1e12}, {"TFLOP/s", 1e12}, {"TFLOPs", 1e12},
    {"PFLOPS", 1e15}, {"PFLOP/s", 1e15}, {"PFLOPs", 1e15}, {NULL, 0.0}};

static int is_blank(char c) { return c == ' ' || c == '\t'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Scans a strict decimal number at s: [+]digits[.digits][e[+-]digits] or [+].digits[...].
 * strtod alone would also take "inf", "nan", hex floats and leading blanks, which a cluster
 * file should not contain. Returns the length scanned, 0 if there is no number. */
static size_t scan_number(const char *s) {
  size_t i = 0, digits = 0;
  if (s[i] == '+') i++;
  while (is_digit(s[i])) i++, digits++;
  if (s[i] == '.') {
    i++;
    while (is_digit(s[i])) i++, digits++;
  }
  if (digits == 0) return 0;
  if (s[i] == 'e' || s[i] == 'E') {
    size_t j = i + 1;
    if (s[j] == '+' || s[j] == '-') j++;
    if (is_digit(s[j])) {
      while (is_digit(s[j])) j++;
      i = j;
    }
  }
  return i;
}

/* Splits "  12.5 GiB " into a number and a trimmed suffix, then applies the table. */
static int parse_with(const char *s, const unit_suffix *units, double *out) {
  if (!s || !out) return HS_EINVAL;
  while (is_blank(*s)) s++;
  size_t n = scan_number(s);
  if (n == 0 || n > 400) return HS_EINVAL;
  char num[402];
  memcpy(num, s, n);
  num[n] = '\0';
  errno = 0;
  char *end = NULL;
  double v = strtod(num, &end);
  if (end != num + n || !isfinite(v) || v < 0) return HS_EINVAL;
  const char *suf = s + n;
  while (is_blank(*suf)) suf++;
  size_t slen = strlen(suf);
  while (slen > 0 && is_blank(suf[slen - 1])) slen--;
  double mult = -1.0;
  if (slen == 0) {
    mult = 1.0;
  } else if (units) {
    for (const unit_suffix *u = units; u->suffix; u++) {
      if (strlen(u->suffix) == slen && memcmp(u->suffix, suf, slen) == 0) {
        mult = u->mult;
        break;
      }
    }
  }
  if (mult < 0) return HS_EINVAL;
  double r = v * mult;
  if (!isfinite(r)) return HS_EINVAL;
  *out = r;
  return 0;
}

int hs_units_parse_number(const char *s, double *out) { return parse_with(s, NULL, out); }

int hs_units_parse_count(const char *s, long long max, long long *out) {
  if (!s || !out) return HS_EINVAL;
  while (is_blank(*s)) s++;
  if (*s == '+') s++;
  if (!is_digit(*s)) return HS_EINVAL;
  long long v = 0;
  for (; is_digit(*s); s++) {
    int dgt = *s - '0';
    if (v > (max - dgt) / 10) return HS_EINVAL; /* also guards against overflow */
    v = v * 10 + dgt;
  }
  while (is_blank(*s)) s++;
  if (*s != '\0' || v > max) return HS_EINVAL;
  *out = v;
  return 0;
}

int hs_units_parse_time(const char *s, double *out_s) { return parse_with(s, time_units, out_s); }

int hs_units_parse_bytes(const char *s, double *out_bytes) {
  return parse_with(s, byte_units, out_bytes);
}

int hs_units_parse_bandwidth(const char *s, double *out_bytes_per_s) {
  double v;
  int rc = parse_with(s, bw_units, &v);
  if (rc) return rc;
  if (!(v > 0)) return HS_EINVAL;
  *out_bytes_per_s = v;
  return 0;
}

int hs_units_parse_flops(const char *s, double *out_flop_per_s) {
  double v;
  int rc = parse_with(s, flops_units, &v);
  if (rc) return rc;
  if (!(v > 0)) return HS_EINVAL;
  *out_flop_per_s = v;
  return 0;
}

/* Picks the largest unit not above v so that the number reads between 1 and 1000 (or 1024). */
static char *format_with(double v, const unit_suffix *units, size_t count, char *buf, size_t n) {
  if (!buf || n == 0) return buf;
  if (!isfinite(v)) {
    snprintf(buf, n, "%g", v);
    return buf;
  }
  size_t pick = 0;
  for (size_t i = 0; i < count; i++)
    if (fabs(v) >= units[i].mult) pick = i;
  if (v == 0) pick = 0;
  snprintf(buf, n, "%.4g%s", v / units[pick].mult, units[pick].suffix);
  return buf;
}

char *hs_units_format_time(double s, char *buf, size_t n) {
  if (!buf || n == 0) return buf;
  /* Minutes and hours only from 2 of them on: "90s" reads better than "1.5min". */
  double a = fabs(s);
  if (isfinite(s) && a >= 7200.0)
    snprintf(buf, n, "%.4gh", s / 3600.0);
  else if (isfinite(s) && a >= 120.0)
    snprintf(buf, n, "%.4gmin", s / 60.0);
  else {
    static const unit_suffix u[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
    format_with(s, u, 4, buf, n);
  }
  return buf;
}

char *hs_units_format_bytes(double bytes, char *buf, size_t n) {
  static const unit_suffix u[] = {
      {"B", 1.0}, {"KiB", KI}, {"MiB", KI * KI}, {"GiB", KI * KI * KI}, {"TiB", KI * KI * KI * KI}};
  return format_with(bytes, u, 5, buf, n);
}

char *hs_units_format_bandwidth(double bytes_per_s, char *buf, size_t n) {
  static const unit_suffix u[] = {
      {"bps", 1.0}, {"kbps", 1e3}, {"Mbps", 1e6}, {"Gbps", 1e9}, {"Tbps", 1e12}};
  return format_with(bytes_per_s * 8.0, u, 5, buf, n);
}
