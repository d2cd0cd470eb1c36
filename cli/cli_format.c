#include "cli/cli_format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hs_fmt_real(char *buf, size_t n, double v) {
  if (!isfinite(v)) {
    snprintf(buf, n, "%s", isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity"));
    return;
  }
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, n, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

void hs_fmt_params(const char *params, const char *sep, char *out, size_t n) {
  size_t o = 0;
  if (n == 0) return;
  out[0] = '\0';
  for (const char *p = params; p && *p && o + 1 < n;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char item[256];
    snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
    char *eq = strchr(item, '=');
    char shown[300];
    snprintf(shown, sizeof shown, "%s", item);
    if (eq && eq[1] && strpbrk(eq + 1, ".eE")) {
      char *end = NULL;
      double v = strtod(eq + 1, &end);
      if (end && *end == '\0' && isfinite(v)) {
        char num[40];
        hs_fmt_real(num, sizeof num, v);
        snprintf(shown, sizeof shown, "%.*s=%s", (int)(eq - item), item, num);
      }
    }
    int k = snprintf(out + o, n - o, "%s%s", o ? sep : "", shown);
    if (k < 0 || (size_t)k >= n - o) {
      out[o] = '\0';
      break;
    }
    o += (size_t)k;
    p = e ? e + 1 : NULL;
  }
}
