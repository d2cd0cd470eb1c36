/* GPU probes on a real GPU (label gpu; exits 77, skipped, where there is none): the cuDNN
 * convolution, the cuBLAS GEMM and the one-rank NCCL all-reduce must run and match the CPU; the
 * two-rank NCCL and green-context probes must run or say why their feature is missing, and the
 * green contexts' measured speed ratio is printed against the SM ratio. */
#include "hs_test.h"
#include "nn/nn_probe.h"

static void show(const char *name, const hs_probe_result *r) {
  printf("  %-24s %-7s %s\n", name, hs_probe_status_name(r->status), r->detail);
}

static void test_gpus_listed(void) {
  hs_gpu_info g[HS_PROBE_MAX_GPUS];
  int n = 0;
  hs_diag d = {0};
  ASSERT_EQ(hs_probe_gpus(g, HS_PROBE_MAX_GPUS, &n, &d), 0);
  ASSERT(n >= 1);
  for (int i = 0; i < n; i++) {
    printf("  GPU %d: %s %s cc %d.%d, %d SMs\n", i, g[i].name, g[i].uuid, g[i].cc_major, g[i].cc_minor, g[i].sms);
    ASSERT(g[i].sms > 0);
    ASSERT(g[i].memory_bytes > 0);
    ASSERT(strncmp(g[i].uuid, "GPU-", 4) == 0);
  }
}

static void test_cudnn_conv(void) {
  hs_probe_result r;
  hs_probe_cudnn_conv(&r);
  show("cuDNN convolution", &r);
  ASSERT_EQ(r.status, HS_PROBE_OK);
  ASSERT(r.value <= 1e-3);
}

static void test_cublas_gemm(void) {
  hs_probe_result r;
  hs_probe_cublas_gemm(&r);
  show("cuBLAS GEMM", &r);
  ASSERT_EQ(r.status, HS_PROBE_OK);
  ASSERT(r.value <= 1e-3);
}

static void test_nccl(void) {
  hs_probe_result r;
  hs_probe_nccl_allreduce(1, &r);
  show("NCCL 1 rank", &r);
  ASSERT_EQ(r.status, HS_PROBE_OK);
  hs_probe_nccl_allreduce(2, &r);
  show("NCCL 2 ranks on 1 GPU", &r);
  /* NCCL before 2.30 refuses: missing, not failed. */
  ASSERT(r.status == HS_PROBE_OK || (r.status == HS_PROBE_MISSING && r.value < 23000));
}

static void test_green_ctx(void) {
  hs_probe_result r;
  hs_probe_green_ctx(&r);
  show("green contexts", &r);
  printf("  speed ratio %.3f, SM ratio %.3f\n", r.value, r.expected);
  ASSERT(r.status != HS_PROBE_FAILED);
}

int main(int argc, char **argv) {
  hs_gpu_info g[1];
  int n = 0;
  hs_diag d = {0};
  int rc = hs_probe_gpus(g, 1, &n, &d);
  /* HS_ENOTFOUND is "no driver or no device": skipped. A driver that lists a GPU but fails to
   * describe it is a failure, not a skip. */
  if (rc == HS_ENOTFOUND || (rc == 0 && n < 1)) {
    printf("no GPU (%s): skipped\n", rc ? d.msg : "0 devices");
    return 77;
  }
  if (rc) {
    fprintf(stderr, "GPU 0: %s\n", d.msg);
    return 1;
  }
  static const hs_test_case tests[] = {
      {"gpus_listed", test_gpus_listed}, {"cudnn_conv", test_cudnn_conv},
      {"cublas_gemm", test_cublas_gemm}, {"nccl", test_nccl},
      {"green_ctx", test_green_ctx},     {NULL, NULL},
  };
  return hs_test_main("gpu_probe", tests, argc, argv);
}
