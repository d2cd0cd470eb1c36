/* core_progress: a one-line progress display on a terminal for long runs.
 *
 * Contract:
 * - Draws only when `out` is a terminal; nothing at all when it is a pipe or a file. The
 *   environment variable HETSIM_PROGRESS=0 forces it off, HETSIM_PROGRESS=1 forces it on even
 *   when `out` is not a terminal (for tests).
 * - Nothing is drawn during the first second of wall time, so short runs stay silent; after
 *   that at most about ten redraws per second, as
 *   "\r<label>  45.2% [=========>          ] 1.2M events/s  ETA 3s".
 * - hs_progress_update is meant to be called once per event: it counts calls (shown as
 *   events/s) and reads the clock only every `stride` calls, a stride it adapts so that the
 *   clock is read roughly every 10 to 50 ms whatever the call rate.
 * - `done` and `total` are in any one unit (events, simulated seconds, iterations); the
 *   percentage and ETA come from their ratio. Wall times are seconds from CLOCK_MONOTONIC,
 *   or from now_fn when a test injects a clock.
 * - The struct is owned by the caller (usually on the stack); no allocation, not thread-safe. */
#ifndef HS_CORE_PROGRESS_H
#define HS_CORE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef double (*hs_progress_clock_fn)(void *ctx); /* returns s, monotonic */

typedef struct hs_progress {
  FILE *out;
  const char *label;            /* borrowed; must outlive the display */
  double total;                 /* in the caller's unit */
  int enabled;
  int drawn;                    /* a line is on the screen */
  int last_len;                 /* characters of the last line, to clear it */
  uint64_t calls;               /* hs_progress_update calls so far */
  uint64_t countdown;           /* calls left until the next clock read */
  uint64_t stride;              /* calls between clock reads */
  double t_start;               /* s */
  double t_last_read;           /* s */
  double t_last_draw;           /* s; < t_start until the first draw */
  hs_progress_clock_fn now_fn;  /* NULL: CLOCK_MONOTONIC */
  void *now_ctx;
} hs_progress;

void hs_progress_init(hs_progress *p, FILE *out, const char *label, double total);
/* As hs_progress_init, reading wall time from now_fn(ctx) instead (tests). */
void hs_progress_init_clock(hs_progress *p, FILE *out, const char *label, double total,
                            hs_progress_clock_fn now_fn, void *ctx);
void hs_progress_update(hs_progress *p, double done);
void hs_progress_finish(hs_progress *p); /* clears the line if anything was drawn */

#endif
