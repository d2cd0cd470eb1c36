/* pol_clock: the clocks of a stale synchronous bound, shared by ssp and ashl's SHL stage.
 *
 * Each worker has a clock (the updates it has pushed). The active workers' smallest clock is
 * the bound's reference: a worker more than `staleness` clocks ahead of it blocks after its
 * push until the slowest catches up. Both policies used to find the smallest clock, and the
 * blocked workers to release, by scanning every active worker whenever a worker at the minimum
 * pushed: O(N) per such push, O(N^2) per round of N pushes. Here the active workers sit in a
 * binary min-heap on their clocks and the blocked ones in a second heap on (clock, worker),
 * so a push costs O(log N) and a release O(r log N) for the r workers it releases. A change
 * of membership rebuilds both heaps in O(N) (hs_pol_clocks_members).
 *
 * The release hands back the released workers in ascending worker index, the order in which
 * the former scan over the active list issued their pulls, so that the simulated events and
 * their order stay the same.
 *
 * Contract: no globals, no I/O; hs_pol_clocks_free releases what the other calls allocated.
 * Errors: HS_ENOMEM. A zero-filled struct is an empty, valid set of clocks. */
#ifndef HS_POL_CLOCK_H
#define HS_POL_CLOCK_H

#include <stdint.h>

typedef struct hs_pol_clocks {
  int64_t *clock;    /* by worker: updates pushed */
  char *blocked;     /* by worker: waiting for the slowest active worker */
  int cap;           /* workers the by-worker arrays hold */
  int *pos;          /* by worker: index in heap, -1 when not an active worker */
  int *heap;         /* the active workers, a min-heap on clock */
  int n;             /* active workers */
  int *bheap;        /* the blocked active workers, a min-heap on (clock, worker) */
  int nb;            /* blocked active workers */
  int *out;          /* the workers the last release unblocked, ascending */
  int64_t min;       /* the smallest active clock as of the last hs_pol_clocks_release */
} hs_pol_clocks;

/* Grows the by-worker arrays to hold n workers; new workers get clock 0, not blocked, not
 * active. Returns 0 or HS_ENOMEM. */
int hs_pol_clocks_reserve(hs_pol_clocks *c, int n);
/* Makes ws[0..n) (each < the reserved count) the active workers and rebuilds both heaps from
 * their clocks and blocked flags; a blocked flag of a worker not in ws is kept but not
 * counted. O(n). min is left as it is: hs_pol_clocks_release moves it. */
int hs_pol_clocks_members(hs_pol_clocks *c, const int *ws, int n);
/* Sets worker w's clock (active or not), keeping the heaps in order. O(log N). */
void hs_pol_clocks_set(hs_pol_clocks *c, int w, int64_t clock);
/* Marks active worker w as blocked. O(log N). (An inactive worker is only flagged.) */
void hs_pol_clocks_block(hs_pol_clocks *c, int w);
/* The smallest clock of the active workers, INT64_MAX when there are none. O(1). */
int64_t hs_pol_clocks_min_now(const hs_pol_clocks *c);
/* The release: with active workers, min becomes their smallest clock, and every blocked
 * active worker whose clock is at most min + staleness is unblocked; returns how many, and
 * c->out[0..that) holds them in ascending worker index (valid until the next call). With no
 * active worker nothing changes and 0 comes back. */
int hs_pol_clocks_release(hs_pol_clocks *c, int64_t staleness);
void hs_pol_clocks_free(hs_pol_clocks *c);

#endif
