/* core_progress: throttled one-line progress display. */
#include "core/core_progress.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HS_PROGRESS_DELAY 1.0      /* s before the first draw */
#define HS_PROGRESS_INTERVAL 0.1   /* s between draws */
#define HS_PROGRESS_BAR 20         /* characters inside the brackets */
#define HS_PROGRESS_MAX_STRIDE 65536u

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double progress_now(const hs_progress *p) {
  return p->now_fn ? p->now_fn(p->now_ctx) : monotonic_s();
}

void hs_progress_init_clock(hs_progress *p, FILE *out, const char *label, double total,
                            hs_progress_clock_fn now_fn, void *ctx) {
  memset(p, 0, sizeof *p);
  p->out = out;
  p->label = label ? label : "";
  p->total = total;
  p->now_fn = now_fn;
  p->now_ctx = ctx;
  p->stride = 1;
  p->countdown = 1;
  const char *env = getenv("HETSIM_PROGRESS");
  if (env && strcmp(env, "0") == 0) p->enabled = 0;
  else if (env && strcmp(env, "1") == 0) p->enabled = out != NULL;
  else p->enabled = out != NULL && isatty(fileno(out));
  if (!p->enabled) return;
  p->t_start = p->t_last_read = progress_now(p);
  p->t_last_draw = p->t_start - 1.0;
}

void hs_progress_init(hs_progress *p, FILE *out, const char *label, double total) {
  hs_progress_init_clock(p, out, label, total, NULL, NULL);
}

/* 1234567 -> "1.2M": rates span many orders of magnitude. */
static void format_si(char *buf, size_t n, double v) {
  if (v >= 1e9) snprintf(buf, n, "%.1fG", v / 1e9);
  else if (v >= 1e6) snprintf(buf, n, "%.1fM", v / 1e6);
  else if (v >= 1e3) snprintf(buf, n, "%.1fk", v / 1e3);
  else snprintf(buf, n, "%.0f", v);
}

static void format_eta(char *buf, size_t n, double s) {
  if (!(s >= 0.0) || s > 1e8) snprintf(buf, n, "?");
  else if (s < 60.0) snprintf(buf, n, "%.0fs", s);
  else if (s < 3600.0) snprintf(buf, n, "%dm%02ds", (int)(s / 60.0), (int)s % 60);
  else snprintf(buf, n, "%dh%02dm", (int)(s / 3600.0), ((int)s / 60) % 60);
}

static void progress_draw(hs_progress *p, double done, double now) {
  double elapsed = now - p->t_start;
  double frac = p->total > 0.0 ? done / p->total : 0.0;
  if (!(frac >= 0.0)) frac = 0.0;
  if (frac > 1.0) frac = 1.0;
  char bar[HS_PROGRESS_BAR + 1];
  int fill = (int)(frac * HS_PROGRESS_BAR);
  for (int i = 0; i < HS_PROGRESS_BAR; i++)
    bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
  bar[HS_PROGRESS_BAR] = '\0';
  char rate[32], eta[32];
  format_si(rate, sizeof rate, elapsed > 0.0 ? (double)p->calls / elapsed : 0.0);
  format_eta(eta, sizeof eta, frac > 0.0 ? elapsed * (1.0 - frac) / frac : -1.0);
  char line[256];
  int len = snprintf(line, sizeof line, "%s %5.1f%% [%s] %s events/s  ETA %s", p->label,
                     100.0 * frac, bar, rate, eta);
  if (len < 0) return;
  if (len >= (int)sizeof line) len = (int)sizeof line - 1;
  /* Pad with spaces over a longer previous line instead of relying on terminal escapes. */
  int pad = p->last_len > len ? p->last_len - len : 0;
  fprintf(p->out, "\r%s%*s", line, pad, "");
  fflush(p->out);
  p->last_len = len;
  p->drawn = 1;
  p->t_last_draw = now;
}

void hs_progress_update(hs_progress *p, double done) {
  if (!p->enabled) return;
  p->calls++;
  if (--p->countdown > 0) return;
  double now = progress_now(p);
  /* Adapt the stride so that clock reads stay rare at millions of calls per second and yet
   * frequent enough when the caller updates once per iteration. */
  double gap = now - p->t_last_read;
  if (gap < 0.01 && p->stride < HS_PROGRESS_MAX_STRIDE) p->stride *= 2;
  else if (gap > 0.05 && p->stride > 1) p->stride /= 2;
  p->countdown = p->stride;
  p->t_last_read = now;
  if (now - p->t_start < HS_PROGRESS_DELAY) return;
  if (now - p->t_last_draw < HS_PROGRESS_INTERVAL) return;
  progress_draw(p, done, now);
}

void hs_progress_finish(hs_progress *p) {
  if (!p->enabled || !p->drawn) return;
  fprintf(p->out, "\r%*s\r", p->last_len, "");
  fflush(p->out);
  p->drawn = 0;
  p->last_len = 0;
}
