/* The driver table without a GPU (label deviceless): with the CUDA toolkit's stub libcuda.so on
 * the loader path (CMakeLists.txt links it as libcuda.so.1 into a folder of the build and sets
 * LD_LIBRARY_PATH and HETSIM_CUDA_STUB_DIR for this test), every entry of hetsim's driver table
 * must resolve, so a misspelt or missing entry shows up here rather than on a GPU machine; the
 * status must say it is the stub, and listing GPUs and the probes must report "no GPU" with the
 * stub's error named, never "failed". The cuBLAS, cuDNN and NCCL tables are checked the same
 * way where their (real) libraries load. Exits 77 (skipped) when not run that way. */
#include "hs_test.h"
#include "nn/nn_cudalib.h"
#include "nn/nn_probe.h"

#if !HETSIM_HAVE_CUDA
int main(void) {
  printf("built without CUDA: skipped\n");
  return 77;
}
#else

static const char *stub_dir;

/* Every field of a table is a resolved function. */
#define HS_NONNULL(ret, name, args)                                                              \
  if (!api->name) HS_FAIL_AT("%s: entry %s is NULL", table, #name);                             \
  n++;

static void test_driver_entries(void) {
  const hs_cudalib_status *st = hs_cudalib_status_get(HS_CUDALIB_DRIVER);
  printf("  CUDA driver: state %d, path %s, note \"%s\", error \"%s\"\n", st->state, st->path, st->note, st->error);
  ASSERT_EQ(st->state, HS_CUDALIB_OK);
  ASSERT(strncmp(st->path, stub_dir, strlen(stub_dir)) == 0);
  hs_diag d = {0};
  const hs_cudrv_api *api = hs_cudrv_api_get(&d);
  ASSERT(api != NULL);
  if (!api) return;
  const char *table = "driver";
  int n = 0;
  HS_CUDRV_FUNCS(HS_NONNULL)
  printf("  %d driver entries resolved\n", n);
  ASSERT(n > 20);
  /* The stub answers every call with CUDA_ERROR_STUB_LIBRARY, which the status names. */
  ASSERT_CONTAINS(st->note, "stub");
  ASSERT_EQ(st->version, 0);
  ASSERT_EQ(api->cuInit(0), CUDA_ERROR_STUB_LIBRARY);
}

static void test_other_tables(void) {
  hs_diag d = {0};
  int n = 0;
  const hs_cublas_api *bl = hs_cublas_api_get(&d);
  if (bl) {
    const hs_cublas_api *api = bl;
    const char *table = "cuBLAS";
    HS_CUBLAS_FUNCS(HS_NONNULL)
  } else {
    printf("  cuBLAS not checked: %s\n", d.msg);
  }
#if HETSIM_HAVE_CUDNN
  const hs_cudnn_api *dn = hs_cudnn_api_get(&d);
  if (dn) {
    const hs_cudnn_api *api = dn;
    const char *table = "cuDNN";
    HS_CUDNN_FUNCS(HS_NONNULL)
  } else {
    printf("  cuDNN not checked: %s\n", d.msg);
  }
#endif
#if HETSIM_HAVE_NCCL
  const hs_nccl_api *nc = hs_nccl_api_get(&d);
  if (nc) {
    const hs_nccl_api *api = nc;
    const char *table = "NCCL";
    HS_NCCL_FUNCS(HS_NONNULL)
  } else {
    printf("  NCCL not checked: %s\n", d.msg);
  }
#endif
  printf("  %d entries of the other tables resolved\n", n);
}

static void test_no_gpu(void) {
  hs_gpu_info g[2];
  int n = -1;
  hs_diag d = {0};
  ASSERT_EQ(hs_probe_gpus(g, 2, &n, &d), HS_ENOTFOUND);
  ASSERT_EQ(n, 0);
  ASSERT_CONTAINS(d.msg, "CUDA_ERROR_STUB_LIBRARY");
  printf("  GPUs: %s\n", d.msg);
  hs_probe_result r;
  void (*probes[])(hs_probe_result *) = {hs_probe_cudnn_conv, hs_probe_cublas_gemm, hs_probe_green_ctx};
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    probes[i](&r);
    ASSERT_EQ(r.status, HS_PROBE_MISSING);
    ASSERT(r.detail[0] != '\0');
  }
  hs_probe_nccl_allreduce(1, &r);
  ASSERT_EQ(r.status, HS_PROBE_MISSING);
}

int main(int argc, char **argv) {
  stub_dir = getenv("HETSIM_CUDA_STUB_DIR");
  if (!stub_dir || !stub_dir[0]) {
    printf("HETSIM_CUDA_STUB_DIR is not set (ctest sets it with LD_LIBRARY_PATH): skipped\n");
    return 77;
  }
  static const hs_test_case tests[] = {
      {"driver_entries", test_driver_entries},
      {"other_tables", test_other_tables},
      {"no_gpu", test_no_gpu},
      {NULL, NULL},
  };
  return hs_test_main("deviceless_driver", tests, argc, argv);
}
#endif
