/* Green-context partitions of the cuda nets (nn/nn_cuda.c; label gpu, exits 77 where "cuda:0"
 * cannot be opened). Not run on a GPU yet: written against cuda.h 13.0 and nn_cuda.h.
 * - Nets of different sizes on one GPU get what they asked for rounded up to whole groups of
 *   the driver's granule, and never share an SM: together they hold no more than the GPU has.
 * - calib's and real's discovery of a partition names it by the SMs a net on it is granted.
 * - When the GPU's groups are used up, opening one more fails with HS_ELIMIT naming the counts;
 *   closing a net gives its groups back.
 * - hs_net_cuda_record_owner finds the net of a parameter or gradient pointer and records an
 *   event that completes; any other pointer is HS_ENOTFOUND.
 * - A step captured at one batch stops replaying (HS_EINVAL) once a larger batch's plans grew
 *   the cuDNN workspace the graph holds the address of. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_buildinfo.h"
#if HETSIM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "calib/cal_device.h"
#include "nn/nn_cuda.h"
#include "nn/nn_net.h"
#include "tests/hs_test.h"

static int gpu_sms; /* the whole GPU's, from a net on "cuda:0" */

static void test_sizes_and_no_sharing(void) {
  static const int ask[] = {8, 16, 24};
  hs_net *n[3] = {NULL, NULL, NULL};
  hs_net_options o = {.seed = 1, .max_batch = 4};
  int total = 0;
  for (int i = 0; i < 3; i++) {
    char dev[32];
    snprintf(dev, sizeof dev, "cuda:0/sm=%d", ask[i]);
    hs_diag d = {0};
    if (hs_net_open(&n[i], dev, "mlp", &o, &d)) {
      HS_FAIL_AT("%s: %s", dev, d.msg);
      continue;
    }
    int got = hs_net_cuda_sm_count(n[i]);
    printf("  %s: granted %d SMs (math %s)\n", dev, got, hs_net_cuda_math(n[i]));
    ASSERT(got >= ask[i]);
    ASSERT(got < ask[i] + 16); /* rounded up by less than two groups of the largest granule */
    total += got;
  }
  ASSERT(total <= gpu_sms);
  for (int i = 0; i < 3; i++) hs_net_close(n[i]);
}

/* calib and real name a partition by what a net on it is granted: the device that discovery
 * describes (sm_partition, the name's "(N SMs)") is the one the net gets. 9 SMs is not a whole
 * number of groups on any GPU with groups of 2 or more. */
static void test_discovered_as_granted(void) {
  hs_net *n = NULL;
  hs_net_options o = {.seed = 1, .max_batch = 2};
  hs_diag d = {0};
  if (hs_net_open(&n, "cuda:0/sm=9", "mlp", &o, &d)) {
    HS_FAIL_AT("cuda:0/sm=9: %s", d.msg);
    return;
  }
  int got = hs_net_cuda_sm_count(n);
  hs_net_close(n);
  hs_cal_device dev;
  ASSERT_EQ(hs_cal_device_parse("cuda:0/sm=9", &dev, &d), 0);
  ASSERT_EQ(hs_cal_device_discover(&dev, &d), 0);
  printf("  cuda:0/sm=9: granted %d SMs, discovered as %d (\"%s\")\n", got, dev.sm_partition, dev.name);
  ASSERT_EQ(dev.sm_partition, got);
  ASSERT_EQ(dev.sm_requested, 9);
  char tail[32];
  snprintf(tail, sizeof tail, " (%d SMs)", got);
  size_t nl = strlen(dev.name), tl = strlen(tail);
  ASSERT(nl > tl && !strcmp(dev.name + nl - tl, tail));
  char note[512];
  ASSERT((hs_cal_device_granted_note(&dev, note, sizeof note) != NULL) == (got != 9));
}

static void test_used_up(void) {
  hs_net *held[64];
  int k = 0;
  hs_net_options o = {.seed = 1, .max_batch = 2};
  hs_diag d = {0};
  /* Partitions of 8 (or the granule) until the GPU has none left. */
  while (k < 64 && hs_net_open(&held[k], "cuda:0/sm=8", "mlp", &o, &d) == 0) k++;
  printf("  %d partitions of >= 8 SMs opened; then: %s\n", k, d.msg);
  ASSERT(k >= 1);
  ASSERT_EQ(d.code, HS_ELIMIT);
  ASSERT_CONTAINS(d.msg, "partitions are used up");
  /* One closed: one opens again. */
  if (k > 0) {
    hs_net_close(held[--k]);
    hs_diag_clear(&d);
    ASSERT_EQ(hs_net_open(&held[k], "cuda:0/sm=8", "mlp", &o, &d), 0);
    if (!d.code) k++;
  }
  while (k > 0) hs_net_close(held[--k]);
}

static void test_record_owner(void) {
  hs_net *n = NULL;
  hs_net_options o = {.seed = 1, .max_batch = 4};
  hs_diag d = {0};
  if (hs_net_open(&n, "cuda:0/sm=16", "mlp", &o, &d)) {
    HS_FAIL_AT("open: %s", d.msg);
    return;
  }
  void *ev = NULL;
#if HETSIM_HAVE_CUDA
  ASSERT_EQ(hs_net_cuda_record_owner(hs_net_grads(n) + 10, &ev, &d), 0);
  if (ev) {
    ASSERT_EQ(cudaEventSynchronize((cudaEvent_t)ev), cudaSuccess);
    (void)cudaEventDestroy((cudaEvent_t)ev);
  }
  ASSERT_EQ(hs_net_cuda_record_owner(hs_net_params(n), &ev, &d), 0);
  if (ev) (void)cudaEventDestroy((cudaEvent_t)ev);
#endif
  int on_stack = 0;
  ASSERT_EQ(hs_net_cuda_record_owner(&on_stack, &ev, &d), HS_ENOTFOUND);
  ASSERT(ev == NULL);
  /* Closed nets are forgotten: their gradients' address (only compared, never read) has no
   * owner once the net is closed. */
  const void *grads = hs_net_grads(n);
  hs_net_close(n);
  ASSERT_EQ(hs_net_cuda_record_owner(grads, &ev, &d), HS_ENOTFOUND);
  ASSERT(ev == NULL);
}

static void test_capture_dropped_when_workspace_grows(void) {
  hs_net *n = NULL;
  hs_net_options o = {.seed = 2, .max_batch = 256};
  hs_diag d = {0};
  /* Fast math: its engines need workspaces that grow with the batch. */
  setenv("HETSIM_CUDA_MATH", "fast", 1);
  int orc = hs_net_open(&n, "cuda:0", "resnet18", &o, &d);
  unsetenv("HETSIM_CUDA_MATH");
  if (orc) {
    HS_FAIL_AT("open: %s", d.msg);
    return;
  }
  int c, h, w;
  hs_net_input_shape(n, &c, &h, &w);
  size_t per = (size_t)c * h * w;
  float *x = calloc(256 * per, sizeof *x);
  int32_t *y = calloc(256, sizeof *y);
  const hs_sgd sgd = {.lr = 0.01, .momentum = 0.9};
  if (!x || !y) abort();
  ASSERT_EQ(hs_net_load(n, x, y, 1, &d), 0);
  ASSERT_EQ(hs_net_cuda_capture_step(n, &sgd, &d), 0);
  ASSERT_EQ(hs_net_cuda_replay_step(n, &d), 0);
  /* A forward pass at batch 256 builds plans whose workspace may be larger than batch 1's; the
   * buffers are allocated for 256 from the start, so a change of hs_net_bytes is the workspace. */
  int64_t before = hs_net_bytes(n);
  ASSERT_EQ(hs_net_load(n, x, y, 256, &d), 0);
  ASSERT_EQ(hs_net_forward(n, 1, &d), 0);
  ASSERT_EQ(hs_net_load(n, x, y, 1, &d), 0);
  int64_t grown = hs_net_bytes(n) - before;
  int rc = hs_net_cuda_replay_step(n, &d);
  printf("  workspace grew by %lld bytes; replay: %s\n", (long long)grown, rc ? d.msg : "ran");
  if (grown > 0) ASSERT_EQ(rc, HS_EINVAL);
  else ASSERT_EQ(rc, 0);
  /* Capturing again works. */
  ASSERT_EQ(hs_net_cuda_capture_step(n, &sgd, &d), 0);
  ASSERT_EQ(hs_net_cuda_replay_step(n, &d), 0);
  ASSERT_EQ(hs_net_sync(n, &d), 0);
  free(x);
  free(y);
  hs_net_close(n);
}

int main(int argc, char **argv) {
  hs_net *probe = NULL;
  hs_net_options o = {.seed = 1, .max_batch = 1};
  hs_diag d = {0};
  int rc = hs_net_open(&probe, "cuda:0", "mlp", &o, &d);
  /* Only a machine without a GPU (or without the libraries) skips; a GPU whose net fails to
   * open is a failure, or a broken backend would pass as skipped. */
  if (rc == HS_EUNSUPPORTED) {
    printf("no usable GPU (%s): skipped\n", d.msg);
    return 77;
  }
  if (rc) {
    fprintf(stderr, "cuda:0: %s\n", d.msg);
    return 1;
  }
  gpu_sms = hs_net_cuda_sm_count(probe);
  printf("  GPU 0: %d SMs\n", gpu_sms);
  hs_net_close(probe);
  static const hs_test_case tests[] = {
      {"sizes_and_no_sharing", test_sizes_and_no_sharing},
      {"discovered_as_granted", test_discovered_as_granted},
      {"used_up", test_used_up},
      {"record_owner", test_record_owner},
      {"capture_dropped_when_workspace_grows", test_capture_dropped_when_workspace_grows},
      {NULL, NULL},
  };
  return hs_test_main("gpu_partitions", tests, argc, argv);
}
