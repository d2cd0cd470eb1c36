#define _GNU_SOURCE /* sched_getaffinity, CPU_SET */
#include "core/core_affinity.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

int hs_cpus_allowed(hs_cpus *c) {
  cpu_set_t set;
  c->n = 0;
  if (sched_getaffinity(0, sizeof set, &set)) return 0;
  for (int i = 0; i < CPU_SETSIZE && c->n < HS_CPUS_MAX; i++)
    if (CPU_ISSET(i, &set)) c->id[c->n++] = i;
  return c->n;
}

static int set_self(const hs_cpus *c, int only) {
  if (c->n < 1) return -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < c->n; i++)
    if (only < 0 || i == only) CPU_SET(c->id[i], &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) ? -1 : 0;
}

int hs_pin_self(const hs_cpus *c, int k) {
  return c->n < 1 || k < 0 ? -1 : set_self(c, k % c->n);
}

int hs_pin_restore(const hs_cpus *c) { return set_self(c, -1); }

void hs_touch_pages(void *p, size_t bytes) {
  if (!p) return;
  long page = sysconf(_SC_PAGESIZE);
  size_t step = page > 0 ? (size_t)page : 4096;
  /* Read and written back through a volatile pointer, so that the compiler keeps every access
   * and the bytes stay what they were. */
  volatile unsigned char *b = p;
  for (size_t i = 0; i < bytes; i += step) b[i] = b[i];
  if (bytes) b[bytes - 1] = b[bytes - 1];
}
