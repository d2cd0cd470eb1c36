/* The SM partitions of the cuda nets (nn/nn_cuda_part.c, compiled from source unchanged: the
 * process-wide table of SM groups and the green contexts made on them) without a GPU (label
 * deviceless), against the emulated driver that hetsim's loader opens as libcuda.so.1
 * (tests/gpu_emu/fake_cuda_driver.c: 132 SMs in groups of 8, green contexts as cuda.h 13.0
 * describes them, a split's results never split again) and the emulated runtime
 * (tests/gpu_emu/fake_cudart.c). The cases:
 * - sizes: partitions of 16, 20 and 40 SMs are granted 16, 24 and 40, on SMs no other holds
 *   (their green contexts' SM sets are disjoint), with non-blocking streams on GPU 0; the calling
 *   thread's current context is left as it was;
 * - used_up: the next one that does not fit in the free groups is refused (HS_ELIMIT) naming
 *   what is free; one given back makes room; closing them all frees every group;
 * - refusals: more SMs than the GPU has, a GPU the machine does not have;
 * - threads: partitions opened and closed from several threads at once never share an SM.
 * Exits 77 (skipped) in builds without CUDA. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/core_buildinfo.h"
#include "tests/hs_test.h"

#if !HETSIM_HAVE_CUDA

int main(void) {
  printf("skipped: this build has no CUDA\n");
  return 77;
}

#else

#include <cuda_runtime_api.h>

#include "nn/nn_cuda_part.h"
#include "tests/gpu_emu/gpu_emu.h"

#define WORDS 3

static const hs_cudrv_api *driver(void) {
  hs_diag d = {0};
  const hs_cudrv_api *drv = hs_cudrv_api_get(&d);
  if (!drv) HS_FAIL_AT("the emulated driver did not load: %s", d.msg);
  return drv;
}

/* The emulated driver's account of a green context's SMs (its count, or -1). */
static int green_sms(const hs_cuda_part *p, unsigned long long *sms) {
  void *sym = hs_emu_driver_sym("hs_emu_driver_green_sms");
  int (*get)(struct CUgreenCtx_st *, unsigned long long *, int) = NULL;
  memcpy(&get, &sym, sizeof sym);
  return get ? get(p->green, sms, WORDS) : -1;
}

/* Every two of parts[0..n) share no SM, and each has the SMs it was granted. */
static int disjoint(const hs_cuda_part *parts, int n, char *why, size_t len) {
  unsigned long long seen[WORDS] = {0};
  for (int i = 0; i < n; i++) {
    unsigned long long sms[WORDS] = {0};
    int count = green_sms(&parts[i], sms);
    if (count != parts[i].sm_count) {
      snprintf(why, len, "partition %d: %d SMs in its green context, %d granted", i, count, parts[i].sm_count);
      return 0;
    }
    for (int w = 0; w < WORDS; w++) {
      if (seen[w] & sms[w]) {
        snprintf(why, len, "partition %d shares SMs with an earlier one", i);
        return 0;
      }
      seen[w] |= sms[w];
    }
  }
  return 1;
}

static void test_sizes(void) {
  const hs_cudrv_api *drv = driver();
  if (!drv) return;
  static const unsigned want[3] = {16, 20, 40}, granted[3] = {16, 24, 40};
  hs_cuda_part p[3];
  hs_diag d = {0};
  CUcontext before = NULL, after = NULL;
  ASSERT_EQ(drv->cuCtxGetCurrent(&before), CUDA_SUCCESS);
  for (int i = 0; i < 3; i++) {
    char dev[32];
    snprintf(dev, sizeof dev, "cuda:0/sm=%u", want[i]);
    if (hs_cuda_part_open(&p[i], drv, 0, want[i], dev, &d)) HS_FAIL_AT("open %s: %s", dev, d.msg);
    ASSERT_EQ(p[i].sm_count, (int)granted[i]);
    ASSERT_EQ(p[i].n_groups, (int)granted[i] / 8);
    ASSERT(p[i].ctx != NULL);
    ASSERT_EQ(hs_emu_stream_device((cudaStream_t)p[i].stream), 0);
  }
  ASSERT_EQ(drv->cuCtxGetCurrent(&after), CUDA_SUCCESS);
  ASSERT(after == before);
  char why[128];
  if (!disjoint(p, 3, why, sizeof why)) HS_FAIL_AT("%s", why);
  /* The context can be made current and work enqueued on the partition's stream. */
  ASSERT_EQ(drv->cuCtxSetCurrent(p[1].ctx), CUDA_SUCCESS);
  ASSERT_EQ(cudaStreamSynchronize((cudaStream_t)p[1].stream), cudaSuccess);
  ASSERT_EQ(drv->cuCtxSetCurrent(before), CUDA_SUCCESS);
  for (int i = 0; i < 3; i++) hs_cuda_part_close(&p[i], drv);
}

static void test_used_up(void) {
  const hs_cudrv_api *drv = driver();
  if (!drv) return;
  hs_cuda_part a, b, c, e, all;
  hs_diag d = {0};
  ASSERT_EQ(hs_cuda_part_open(&a, drv, 0, 64, "cuda:0/sm=64", &d), 0);
  ASSERT_EQ(hs_cuda_part_open(&b, drv, 0, 32, "cuda:0/sm=32", &d), 0);
  ASSERT_EQ(hs_cuda_part_open(&c, drv, 0, 24, "cuda:0/sm=24", &d), 0);
  /* 132 SMs make 16 groups of 8 (128 SMs); 120 are held, 8 free. */
  ASSERT_EQ(hs_cuda_part_open(&e, drv, 0, 16, "cuda:0/sm=16", &d), HS_ELIMIT);
  ASSERT_CONTAINS(d.msg, "cuda:0/sm=16: GPU 0's partitions are used up: 16 SMs asked, 8 free");
  ASSERT_CONTAINS(d.msg, "16 groups of 8 for green contexts, 128 SMs in all");
  hs_cuda_part_close(&e, drv); /* nothing held: harmless */
  hs_cuda_part_close(&b, drv);
  ASSERT_EQ(hs_cuda_part_open(&e, drv, 0, 40, "cuda:0/sm=40", &d), 0);
  hs_cuda_part parts[3] = {a, c, e};
  char why[128];
  if (!disjoint(parts, 3, why, sizeof why)) HS_FAIL_AT("%s", why);
  hs_cuda_part_close(&a, drv);
  hs_cuda_part_close(&c, drv);
  hs_cuda_part_close(&e, drv);
  ASSERT_EQ(hs_cuda_part_open(&all, drv, 0, 128, "cuda:0/sm=128", &d), 0);
  ASSERT_EQ(all.sm_count, 128);
  hs_cuda_part_close(&all, drv);
}

static void test_refusals(void) {
  const hs_cudrv_api *drv = driver();
  if (!drv) return;
  hs_cuda_part p;
  hs_diag d = {0};
  ASSERT_EQ(hs_cuda_part_open(&p, drv, 0, 200, "cuda:0/sm=200", &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "GPU 0 has 132 SMs, fewer than the 200 asked for");
  hs_cuda_part_close(&p, drv);
  ASSERT_EQ(hs_cuda_part_open(&p, drv, 1, 8, "cuda:1/sm=8", &d), HS_ERUNTIME);
  ASSERT_CONTAINS(d.msg, "cuDeviceGet");
  hs_cuda_part_close(&p, drv);
}

#define THREADS 6
#define ROUNDS 20

typedef struct churn {
  const hs_cudrv_api *drv;
  int id, fails;
  hs_cuda_part held;
  char why[160];
} churn;

static pthread_mutex_t census_mu = PTHREAD_MUTEX_INITIALIZER;
static hs_cuda_part *census[THREADS];

/* Opens and closes partitions of 8 to 24 SMs; while it holds one, no other thread's shares an SM
 * with it. */
static void *churn_main(void *arg) {
  churn *c = arg;
  for (int r = 0; r < ROUNDS && !c->fails; r++) {
    unsigned want = 8u * (unsigned)(1 + (c->id + r) % 3);
    hs_diag d = {0};
    int rc = hs_cuda_part_open(&c->held, c->drv, 0, want, "cuda:0/sm=N", &d);
    if (rc == HS_ELIMIT) continue; /* the others hold too much just now */
    if (rc) {
      snprintf(c->why, sizeof c->why, "%.150s", d.msg);
      c->fails++;
      break;
    }
    pthread_mutex_lock(&census_mu);
    census[c->id] = &c->held;
    hs_cuda_part now[THREADS];
    int n = 0;
    for (int i = 0; i < THREADS; i++)
      if (census[i]) now[n++] = *census[i];
    if (!disjoint(now, n, c->why, sizeof c->why)) c->fails++;
    pthread_mutex_unlock(&census_mu);
    hs_emu_jitter(100, 1000); /* held a while, while the others open and close theirs */
    pthread_mutex_lock(&census_mu);
    census[c->id] = NULL;
    pthread_mutex_unlock(&census_mu);
    hs_cuda_part_close(&c->held, c->drv);
  }
  return NULL;
}

static void test_threads(void) {
  const hs_cudrv_api *drv = driver();
  if (!drv) return;
  pthread_t th[THREADS];
  churn cs[THREADS];
  for (int i = 0; i < THREADS; i++) {
    cs[i] = (churn){.drv = drv, .id = i};
    ASSERT_EQ(pthread_create(&th[i], NULL, churn_main, &cs[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < THREADS; i++)
    if (cs[i].fails) HS_FAIL_AT("thread %d: %s", i, cs[i].why);
  /* Everything was given back. */
  hs_cuda_part all;
  hs_diag d = {0};
  ASSERT_EQ(hs_cuda_part_open(&all, drv, 0, 128, "cuda:0/sm=128", &d), 0);
  hs_cuda_part_close(&all, drv);
}

static const hs_test_case cases[] = {
    {"sizes", test_sizes},
    {"used_up", test_used_up},
    {"refusals", test_refusals},
    {"threads", test_threads},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("deviceless_partitions", cases, argc, argv); }

#endif /* HETSIM_HAVE_CUDA */
