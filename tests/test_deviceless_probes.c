/* Two of doctor's GPU probes (nn/nn_probe.c, compiled from source unchanged) without a GPU (label
 * deviceless), against the emulated runtime, driver and NCCL (tests/gpu_emu):
 * - green_ctx: the green-context probe makes partitions of 8 and 24 SMs, each split from the
 *   whole GPU's resource (a split's results are never split again: the emulated driver refuses
 *   that as cuda.h says), runs its spin kernel in each and compares the times. The kernel's time
 *   is modelled from the SMs of its stream's green context (tests/gpu_emu/fake_probe_kernels.c),
 *   so what is checked is the probe's use of the driver (contexts made current, streams destroyed
 *   before their green contexts, the caller's context given back) and its arithmetic;
 * - nccl_one_rank: the one-rank all-reduce probe;
 * - nccl_two_ranks_2_28: two ranks on GPU 0 under NCCL 2.28, which refuses a device twice in
 *   ncclCommInitAll's list: the probe says the feature is missing, naming 2.30;
 * - nccl_two_ranks_2_30: the same under NCCL 2.30 (HS_EMU_NCCL_VERSION, in a child process: the
 *   library's version is read once per process), where NCCL_MULTI_RANK_GPU_ENABLE=1, which the
 *   probe sets, allows it: the all-reduce of both ranks is checked.
 * Exits 77 (skipped) in builds without CUDA or NCCL headers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core_buildinfo.h"
#include "tests/hs_test.h"

#if !HETSIM_HAVE_CUDA || !HETSIM_HAVE_NCCL

int main(void) {
  printf("skipped: this build has no CUDA or no NCCL headers\n");
  return 77;
}

#else

#include "nn/nn_cudalib.h"
#include "nn/nn_probe.h"

static void test_green_ctx(void) {
  hs_diag d = {0};
  const hs_cudrv_api *drv = hs_cudrv_api_get(&d);
  if (!drv) {
    HS_FAIL_AT("the emulated driver did not load: %s", d.msg);
    return;
  }
  CUcontext before = NULL, after = NULL;
  ASSERT_EQ(drv->cuCtxGetCurrent(&before), CUDA_SUCCESS);
  hs_probe_result r;
  hs_probe_green_ctx(&r);
  if (r.status != HS_PROBE_OK) HS_FAIL_AT("status %d: %s", r.status, r.detail);
  ASSERT_CONTAINS(r.detail, "partitions of 8 and 24 SMs");
  ASSERT_NEAR(r.expected, 3.0, 1e-12);
  ASSERT(r.value > 2.0); /* the probe's own bound is 1 + (3 - 1) / 2 */
  ASSERT_EQ(drv->cuCtxGetCurrent(&after), CUDA_SUCCESS);
  ASSERT(after == before);
}

static void test_nccl_one_rank(void) {
  hs_probe_result r;
  hs_probe_nccl_allreduce(1, &r);
  if (r.status != HS_PROBE_OK) HS_FAIL_AT("status %d: %s", r.status, r.detail);
  ASSERT_CONTAINS(r.detail, "all-reduce of 1024 floats, 1 rank on GPU 0");
  ASSERT_NEAR(r.value, 22803, 0);
}

static void test_nccl_two_ranks_2_28(void) {
  hs_probe_result r;
  hs_probe_nccl_allreduce(2, &r);
  ASSERT_EQ(r.status, HS_PROBE_MISSING);
  ASSERT_CONTAINS(r.detail, "ncclCommInitAll(2 ranks on GPU 0)");
  ASSERT_CONTAINS(r.detail, "NCCL 2.28.3 is older than 2.30, which allows it with NCCL_MULTI_RANK_GPU_ENABLE=1");
}

/* The child of nccl_two_ranks_2_30: 0 when the probe passed. */
static int two_ranks_child(void) {
  hs_probe_result r;
  hs_probe_nccl_allreduce(2, &r);
  if (r.status != HS_PROBE_OK || !strstr(r.detail, "2 ranks on GPU 0") || !strstr(r.detail, "NCCL 2.30.7")) {
    fprintf(stderr, "child: status %d: %s\n", r.status, r.detail);
    return 1;
  }
  return 0;
}

static void test_nccl_two_ranks_2_30(void) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("HS_EMU_NCCL_VERSION", "23007", 1);
    setenv("HS_PROBES_ROLE", "two_ranks", 1);
    execl("/proc/self/exe", "test_deviceless_probes", (char *)NULL);
    _exit(127);
  }
  ASSERT(pid > 0);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0);
}

static const hs_test_case cases[] = {
    {"green_ctx", test_green_ctx},
    {"nccl_one_rank", test_nccl_one_rank},
    {"nccl_two_ranks_2_28", test_nccl_two_ranks_2_28},
    {"nccl_two_ranks_2_30", test_nccl_two_ranks_2_30},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  const char *role = getenv("HS_PROBES_ROLE");
  if (role && !strcmp(role, "two_ranks")) return two_ranks_child();
  return hs_test_main("deviceless_probes", cases, argc, argv);
}

#endif /* HETSIM_HAVE_CUDA && HETSIM_HAVE_NCCL */
