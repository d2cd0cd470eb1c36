/* sim_event: the discrete-event engine's pending-event queue and clock.
 *
 * Contract:
 * - Events are ordered by (time, seq), where seq is a per-engine insertion counter, so events
 *   scheduled for the same time are popped in the order they were scheduled. Given the same
 *   sequence of calls the engine pops the same sequence of events: fully deterministic.
 * - Times are simulated seconds (double). A new event's time must be finite and >= now; popping
 *   an event advances now to its time, so the clock never goes backwards.
 * - The number of pending events is bounded by max_pending (default HS_ENGINE_DEFAULT_MAX_PENDING);
 *   exceeding it is an HS_ELIMIT error whose message names the limit and the --max-events
 *   option that raises it, not a crash or an unbounded allocation.
 * - Cost: the queue is a radix heap over the monotone times, with the events of one time in
 *   schedule order (see sim_event.c): O(1) schedule, and a pop either takes the first event of
 *   the current time or moves each other entry of one bucket to a lower one, each entry at most
 *   8 times in its life (about twice in the hold model, once when many events share a time), so
 *   amortized O(1) per event independent of N. Memory grows by doubling, amortized O(1), and a
 *   pop never allocates. An entry (32 bytes) holds its payload (kind, worker, arg, seq), so a
 *   pop reads one place. Peek is O(1) within a time and O(bucket) when the time changes.
 * - Ownership: hs_engine_open allocates, hs_engine_close frees. Not thread-safe: one engine per
 *   simulation, and several engines may live in one process. */
#ifndef HS_SIM_EVENT_H
#define HS_SIM_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"

/* 1<<27 pending events: about 4 GiB of queue at most, far beyond any sane simulation of 100,000
 * workers (which keeps a few events per worker pending), yet a bound that stops a runaway model
 * before it eats the machine. */
#define HS_ENGINE_DEFAULT_MAX_PENDING ((size_t)1 << 27)

typedef struct hs_event {
  double time;    /* s, simulated */
  uint64_t seq;   /* insertion number within the engine, from 0 */
  uint32_t kind;  /* meaning chosen by the caller */
  uint32_t worker;
  int64_t arg;
} hs_event;

typedef struct hs_engine hs_engine;

/* max_pending: 0 means HS_ENGINE_DEFAULT_MAX_PENDING; values above UINT32_MAX are clamped,
 * since counts are 32-bit. Returns 0, or HS_ENOMEM. */
int hs_engine_open(hs_engine **out, size_t max_pending, hs_diag *d);
void hs_engine_close(hs_engine *e); /* NULL is allowed */

/* time must be finite and >= now (else HS_EINVAL). When max_pending would be exceeded returns
 * HS_ELIMIT with a message naming the limit and how to raise it (--max-events). HS_ENOMEM when
 * growing the arrays fails; the engine is unchanged on any error. */
int hs_engine_schedule(hs_engine *e, double time, uint32_t kind, uint32_t worker, int64_t arg,
                       hs_diag *d);
/* 1 = the earliest event was removed into *out and now advanced to its time; 0 = queue empty. */
int hs_engine_pop(hs_engine *e, hs_event *out);
/* 1 = *out holds the earliest event, which stays queued; 0 = queue empty. */
int hs_engine_peek(const hs_engine *e, hs_event *out);

/* A hint for prefetching what the coming events will touch: the worker field of the event that
 * pops `ahead` pops after the next one (0: the next one), when that event is pending at the time
 * of the last pop (in the run of one time being popped) and ahead < 16; else UINT32_MAX. A few
 * loads; changes nothing. */
uint32_t hs_engine_ahead_worker(const hs_engine *e, uint32_t ahead);

double hs_engine_now(const hs_engine *e);         /* s */
size_t hs_engine_pending(const hs_engine *e);
uint64_t hs_engine_processed(const hs_engine *e); /* events popped so far */
size_t hs_engine_max_pending(const hs_engine *e);

#endif
