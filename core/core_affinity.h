/* core_affinity: pinning threads to CPUs.
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
 *   then left as it was: pinning is an optimisation, never a reason to fail a run). */
#ifndef HS_CORE_AFFINITY_H
#define HS_CORE_AFFINITY_H

enum { HS_CPUS_MAX = 1024 };

typedef struct hs_cpus {
  int n;                  /* 0: unknown (the system would not say) */
  int id[HS_CPUS_MAX];
} hs_cpus;

/* Fills c with the calling thread's allowed CPUs; returns c->n. */
int hs_cpus_allowed(hs_cpus *c);

int hs_pin_self(const hs_cpus *c, int k);
int hs_pin_restore(const hs_cpus *c);

#endif
