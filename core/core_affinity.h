/* core_affinity: pinning threads to CPUs, and mapping memory before it is timed.
 *
 * Why: two worker threads that meet at every all-reduce wake each other up, and Linux's
 * scheduler tends to wake a thread on the CPU of the thread that woke it. On a 2-CPU machine
 * the two workers of a run then often share one CPU for dozens of rounds while the other
 * idles, and their steps run one after the other instead of side by side (measured,
 * docs/performance.md, "Pinned workers"). A thread per CPU, each pinned to its own, cannot.
 *
 * Contract:
 * - hs_cpus_allowed lists the CPUs the calling thread may run on (sched_getaffinity), in
 *   ascending order; take it before pinning anything, from the thread whose set the others
 *   should share.
 * - hs_pin_self(c, k) pins the calling thread to CPU c->id[k % c->n]; hs_pin_restore(c) lets it
 *   run on every CPU of c again. Both return 0, or -1 when the system refuses (the thread is
 *   then left as it was: pinning is an optimisation, never a reason to fail a run).
 * - hs_touch_pages(p, bytes) makes the kernel map every page of the buffer now, keeping its
 *   bytes. A large malloc or calloc returns pages that are mapped only when first written: a
 *   fault per 4 KiB page, 0.3 ms for a model of 0.8 MB on this repository's VM. A buffer of the
 *   real runtime that is first written inside a timed operation makes that operation (an
 *   early push, the first pull) several times as long as the same operation later, which the
 *   simulation of the run never sees (docs/performance.md, "First touch"). The runtimes touch
 *   their buffers where they allocate them, before the run's clock starts. */
#ifndef HS_CORE_AFFINITY_H
#define HS_CORE_AFFINITY_H

#include <stddef.h>

enum { HS_CPUS_MAX = 1024 };

typedef struct hs_cpus {
  int n;                  /* 0: unknown (the system would not say) */
  int id[HS_CPUS_MAX];
} hs_cpus;

/* Fills c with the calling thread's allowed CPUs; returns c->n. */
int hs_cpus_allowed(hs_cpus *c);

int hs_pin_self(const hs_cpus *c, int k);
int hs_pin_restore(const hs_cpus *c);

void hs_touch_pages(void *p, size_t bytes);

#endif
