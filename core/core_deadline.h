/* core_deadline: deadlines on CLOCK_MONOTONIC for bounded waits.
 *
 * Every bounded wait in hetsim (the real backends' communication, calib's --time-limit) waits on
 * a condition variable that reads CLOCK_MONOTONIC, until an absolute deadline: a change of the
 * wall clock neither shortens nor stretches it.
 * Contract: no allocation, no state; safe from any thread. */
#ifndef HS_CORE_DEADLINE_H
#define HS_CORE_DEADLINE_H

#include <pthread.h>
#include <time.h>

/* *ts = now + s seconds on CLOCK_MONOTONIC (s >= 0). */
void hs_deadline_in(struct timespec *ts, double s);
/* 1 when CLOCK_MONOTONIC has reached the deadline dl, else 0. */
int hs_deadline_past(const struct timespec *dl);
/* pthread_cond_init of cv with its clock set to CLOCK_MONOTONIC, for pthread_cond_timedwait
 * on hs_deadline_in's deadlines. */
void hs_cond_init_monotonic(pthread_cond_t *cv);

#endif
