/* Tests of pinning threads to CPUs (core_affinity.h). */
#define _GNU_SOURCE /* sched_getaffinity, sched_getcpu */
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core_affinity.h"
#include "hs_test.h"

static int allowed_now(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set)) return -1;
  return CPU_COUNT(&set);
}

static void test_allowed_matches_the_system(void) {
  hs_cpus c;
  ASSERT(hs_cpus_allowed(&c) >= 1);
  ASSERT_EQ(c.n, allowed_now());
  for (int i = 1; i < c.n; i++) ASSERT(c.id[i] > c.id[i - 1]);
}

static void test_pin_and_restore(void) {
  hs_cpus c;
  hs_cpus_allowed(&c);
  int k = c.n > 1 ? 1 : 0;
  ASSERT_EQ(hs_pin_self(&c, k), 0);
  ASSERT_EQ(allowed_now(), 1);
  ASSERT_EQ(sched_getcpu(), c.id[k]);
  /* k wraps around the list */
  ASSERT_EQ(hs_pin_self(&c, k + c.n), 0);
  ASSERT_EQ(sched_getcpu(), c.id[k]);
  ASSERT_EQ(hs_pin_restore(&c), 0);
  ASSERT_EQ(allowed_now(), c.n);
}

static void test_bad_requests_leave_the_thread_alone(void) {
  hs_cpus c, none = {.n = 0};
  hs_cpus_allowed(&c);
  ASSERT_EQ(hs_pin_self(&c, -1), -1);
  ASSERT_EQ(hs_pin_self(&none, 0), -1);
  ASSERT_EQ(hs_pin_restore(&none), -1);
  ASSERT_EQ(allowed_now(), c.n);
}

typedef struct pinned_arg {
  const hs_cpus *c;
  int k, cpu, rc;
} pinned_arg;

static void *pinned_main(void *p) {
  pinned_arg *a = p;
  a->rc = hs_pin_self(a->c, a->k);
  a->cpu = sched_getcpu();
  return NULL;
}

static void test_threads_get_their_own_cpu(void) {
  hs_cpus c;
  hs_cpus_allowed(&c);
  enum { N = 4 };
  pinned_arg a[N];
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    a[i] = (pinned_arg){.c = &c, .k = i};
    ASSERT_EQ(pthread_create(&th[i], NULL, pinned_main, &a[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    ASSERT_EQ(a[i].rc, 0);
    ASSERT_EQ(a[i].cpu, c.id[i % c.n]);
  }
  /* the creating thread was not pinned */
  ASSERT_EQ(allowed_now(), c.n);
}

/* hs_touch_pages maps every page of a buffer (mincore: resident) and keeps its bytes. */
static void test_touch_maps_every_page(void) {
  enum { PAGES = 64 };
  size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = PAGES * page - 100;
  unsigned char *b = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT(b != MAP_FAILED);
  if (b == MAP_FAILED) return;
  madvise(b, PAGES * page, MADV_NOHUGEPAGE); /* one fault must not map them all */
  b[0] = 7;
  b[10 * page + 3] = 9;
  unsigned char vec[PAGES];
  ASSERT_EQ(mincore(b, PAGES * page, vec), 0);
  int resident = 0;
  for (int i = 0; i < PAGES; i++) resident += vec[i] & 1;
  ASSERT(resident < PAGES); /* the test can tell */
  hs_touch_pages(b, bytes);
  ASSERT_EQ(mincore(b, PAGES * page, vec), 0);
  for (int i = 0; i < PAGES; i++) ASSERT_EQ(vec[i] & 1, 1);
  ASSERT_EQ(b[0], 7);
  ASSERT_EQ(b[10 * page + 3], 9);
  ASSERT_EQ(b[bytes - 1], 0);
  hs_touch_pages(NULL, 100);
  hs_touch_pages(b, 0);
  munmap(b, PAGES * page);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"allowed_matches_the_system", test_allowed_matches_the_system},
      {"pin_and_restore", test_pin_and_restore},
      {"bad_requests_leave_the_thread_alone", test_bad_requests_leave_the_thread_alone},
      {"threads_get_their_own_cpu", test_threads_get_their_own_cpu},
      {"touch_maps_every_page", test_touch_maps_every_page},
      {NULL, NULL},
  };
  return hs_test_main("affinity", cases, argc, argv);
}
