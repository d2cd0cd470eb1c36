/* cuDNN plans without a GPU (label deviceless): cuDNN 9.8 and later run their heuristics and
 * finalize execution plans from a device-properties descriptor made from JSON. For every
 * committed properties file (tests/data/cudnn-*.json: hand-written from published specs;
 * notebooks-data/gpu-* /cudnn-deviceprop.json: recorded on a GPU by tools/gpu-check.sh; and the
 * file HETSIM_CUDNN_DEVICEPROP names, when set), every
 * convolution of every zoo model, in all three directions and at batches 1, 7 and 64, must get
 * a finalized plan through the very code the cuda nets use (nn_cuda_plan.h) under strict math,
 * with a workspace size, and the engine must carry none of the notes strict math refuses. Also:
 * plans for SM partitions, fast math, JSON cuDNN refuses, the JSON read back, the math option.
 * Needs the cuDNN library (9.8+), not a GPU; exits 77 (skipped) without it. */
#include <dlfcn.h>
#include <glob.h>

#include "hs_test.h"
#include "nn/nn_cuda_plan.h"
#include "nn/nn_graph.h"
#include "nn/nn_zoo.h"

#if !(HETSIM_HAVE_CUDA && HETSIM_HAVE_CUDNN)
int main(void) {
  printf("built without CUDA or cuDNN headers: skipped\n");
  return 77;
}
#else

static const hs_cudnn_api *dnn;
static glob_t props; /* the properties files */

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 > cap) {
      cap = 2 * cap + 4096;
      char *g = realloc(buf, cap);
      if (!g) break;
      buf = g;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  fclose(f);
  *len = n;
  return buf;
}

static cudnnBackendDescriptor_t load_props(const char *path) {
  size_t len = 0;
  char *json = slurp(path, &len);
  ASSERT(json != NULL);
  if (!json) return NULL;
  cudnnBackendDescriptor_t dp = NULL;
  hs_diag d = {0};
  int rc = hs_cuplan_deviceprop_json(dnn, json, len, &dp, &d);
  if (rc) HS_FAIL_AT("%s: cuDNN refused it: %s", path, d.msg);
  free(json);
  return dp;
}

/* Byte alignment of the filter at float offset off of a cudaMalloc'ed vector (as nn_cuda.c). */
static int64_t align_of(int64_t off) {
  int64_t b = off * 4;
  return b % 16 == 0 ? 16 : b % 8 == 0 ? 8 : 4;
}

static hs_cuplan_conv geometry(const hs_layer *l, int64_t off, int batch) {
  hs_cuplan_conv g = {.batch = batch, .in_c = l->in_c, .in_h = l->in_h, .in_w = l->in_w, .out_c = l->out_c,
                      .out_h = l->out_h, .out_w = l->out_w, .kernel = l->kernel, .stride = l->stride,
                      .pad = l->pad, .groups = l->groups, .w_align = align_of(off)};
  return g;
}

static const unsigned refused = (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE) |
                                (1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) |
                                (1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) |
                                (1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);

typedef struct seen_key {
  hs_cuplan_conv g;
  int dir;
} seen_key;

static void test_every_zoo_conv(void) {
  static const int batches[] = {1, 7, 64};
  for (size_t f = 0; f < props.gl_pathc; f++) {
    cudnnBackendDescriptor_t dp = load_props(props.gl_pathv[f]);
    if (!dp) continue;
    hs_cuplan_target t = {.dnn = dnn, .deviceprop = dp, .math = HS_CUDA_MATH_STRICT};
    seen_key *seen = NULL;
    int n_seen = 0, cap_seen = 0, convs = 0, plans = 0, failed = 0, rtc = 0;
    int64_t max_ws = 0;
    for (int m = 0; m < hs_zoo_count(); m++) {
      const char *model = hs_zoo_info(m)->name;
      hs_graph *gr = NULL;
      hs_diag d = {0};
      ASSERT_EQ(hs_zoo_build(model, &gr, &d), 0);
      if (!gr) continue;
      int64_t off = 0;
      int model_plans = 0;
      for (int i = 0; i < hs_graph_count(gr); i++) {
        const hs_layer *l = hs_graph_layer(gr, i);
        int64_t np = hs_layer_params(l);
        if (l->kind == HS_LAYER_CONV2D) {
          convs++;
          for (int dir = 0; dir < HS_CUPLAN_DIRS; dir++)
            for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
              seen_key key;
              memset(&key, 0, sizeof key);
              key.g = geometry(l, off, batches[b]);
              key.dir = dir;
              int dup = 0;
              for (int s = 0; s < n_seen && !dup; s++) dup = !memcmp(&seen[s], &key, sizeof key);
              if (dup) continue; /* the same convolution earlier in this model or another */
              if (n_seen == cap_seen) {
                cap_seen = cap_seen ? 2 * cap_seen : 64;
                seen = realloc(seen, (size_t)cap_seen * sizeof *seen);
                if (!seen) abort();
              }
              seen[n_seen++] = key;
              hs_cuplan p;
              hs_diag pd = {0};
              int rc = hs_cuplan_build(&t, &key.g, (hs_cuplan_dir)dir, &p, &pd);
              if (rc) {
                HS_FAIL_AT("%s: %s layer %d: %s", props.gl_pathv[f], model, i, pd.msg);
                failed++;
                continue;
              }
              plans++;
              model_plans++;
              ASSERT(p.desc[HS_CUPLAN_DESCS - 1] != NULL);
              ASSERT(p.workspace >= 0);
              ASSERT(p.engine >= 0);
              if (p.notes & refused)
                HS_FAIL_AT("%s layer %d %s: engine %lld has notes 0x%x that strict math refuses", model, i,
                           hs_cuplan_dir_name((hs_cuplan_dir)dir), (long long)p.engine, p.notes);
              ASSERT_EQ(p.sm_target, 0);
              /* A failed build says nothing; a good one leaves d untouched. */
              ASSERT_EQ(pd.code, 0);
              if (p.workspace > max_ws) max_ws = p.workspace;
              if (p.behavior & (1u << CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)) rtc++;
              hs_cuplan_free(dnn, &p);
            }
        }
        if (np) off += np;
      }
      printf("  %s: %s: %d distinct plans\n", props.gl_pathv[f], model, model_plans);
      hs_graph_close(gr);
    }
    /* Run-time compiled engines are no error, but each costs an NVRTC compilation when its plan
     * is finalized on a GPU: the count says how much of that a calibration will meet. */
    printf("  %s: %d convolutions, %d distinct (geometry, direction, batch) plans finalized, %d failed, "
           "%d with a run-time compiled engine, largest workspace %lld bytes\n",
           props.gl_pathv[f], convs, plans, failed, rtc, (long long)max_ws);
    ASSERT(convs > 0);
    ASSERT_EQ(failed, 0);
    free(seen);
    (void)dnn->cudnnBackendDestroyDescriptor(dp);
  }
}

/* resnet18's 3x3 64->64 convolution at 32x32 (its first block), batch 64. */
static hs_cuplan_conv resnet_block(void) {
  hs_cuplan_conv g = {.batch = 64, .in_c = 64, .in_h = 32, .in_w = 32, .out_c = 64, .out_h = 32, .out_w = 32,
                      .kernel = 3, .stride = 1, .pad = 1, .groups = 1, .w_align = 16};
  return g;
}

/* On an SM partition the heuristics get the partition's SMs; strict math then falls back to
 * whole-device tuning when nothing tuned for the partition qualifies; fast math keeps the
 * target. An SM target past the device's is no error either: the build goes on without it. */
static void test_partitions(void) {
  cudnnBackendDescriptor_t dp = load_props(props.gl_pathv[0]);
  if (!dp) return;
  hs_cuplan_conv g = resnet_block();
  static const int sms[] = {8, 16, 48, 1000};
  for (size_t i = 0; i < sizeof sms / sizeof sms[0]; i++)
    for (int math = 0; math < 2; math++)
      for (int dir = 0; dir < HS_CUPLAN_DIRS; dir++) {
        hs_cuplan_target t = {.dnn = dnn, .deviceprop = dp, .math = (hs_cuda_math)math, .sm_count = sms[i]};
        hs_cuplan p;
        hs_diag d = {0};
        int rc = hs_cuplan_build(&t, &g, (hs_cuplan_dir)dir, &p, &d);
        if (rc) {
          HS_FAIL_AT("%d SMs, %s math, %s: %s", sms[i], hs_cuda_math_name((hs_cuda_math)math),
                     hs_cuplan_dir_name((hs_cuplan_dir)dir), d.msg);
          continue;
        }
        printf("  %4d SMs %-6s %-15s engine %3lld notes 0x%02x behavior 0x%02x tuned for %d SMs, workspace %lld\n",
               sms[i], hs_cuda_math_name((hs_cuda_math)math), hs_cuplan_dir_name((hs_cuplan_dir)dir),
               (long long)p.engine, p.notes, p.behavior, p.sm_target, (long long)p.workspace);
        ASSERT(p.sm_target == 0 || p.sm_target == sms[i]);
        if (sms[i] > 132) ASSERT_EQ(p.sm_target, 0);
        if (math == HS_CUDA_MATH_STRICT) ASSERT_EQ(p.notes & refused, 0);
        hs_cuplan_free(dnn, &p);
      }
  (void)dnn->cudnnBackendDestroyDescriptor(dp);
}

/* Fast math may pick any engine; on an H100 cuDNN's first choice for fp32 is a tensor-core
 * (TF32) one, which is what strict math exists to avoid. */
static void test_fast_math(void) {
  cudnnBackendDescriptor_t dp = load_props(props.gl_pathv[0]);
  if (!dp) return;
  hs_cuplan_conv g = resnet_block();
  hs_cuplan_target t = {.dnn = dnn, .deviceprop = dp, .math = HS_CUDA_MATH_FAST};
  hs_cuplan p;
  hs_diag d = {0};
  ASSERT_EQ(hs_cuplan_build(&t, &g, HS_CUPLAN_FWD, &p, &d), 0);
  printf("  fast forward: engine %lld, notes 0x%x (tensor cores: %s)\n", (long long)p.engine, p.notes,
         (p.notes & (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) ? "yes" : "no");
  hs_cuplan_free(dnn, &p);
  (void)dnn->cudnnBackendDestroyDescriptor(dp);
}

/* A workspace callback that refuses everything above a limit: the build skips those engines;
 * one that refuses all fails the build with the callback's reason. */
static int64_t ws_limit;
static int refuse_above(void *ctx, int64_t bytes, hs_diag *d) {
  (void)ctx;
  if (bytes <= ws_limit) return 0;
  return hs_diag_set(d, HS_ENOMEM, "workspace of %lld bytes does not fit in %lld", (long long)bytes,
                     (long long)ws_limit);
}

static void test_workspace_refused(void) {
  cudnnBackendDescriptor_t dp = load_props(props.gl_pathv[0]);
  if (!dp) return;
  hs_cuplan_conv g = resnet_block();
  hs_cuplan_target t = {.dnn = dnn, .deviceprop = dp, .workspace_fits = refuse_above};
  hs_cuplan p;
  hs_diag d = {0};
  ws_limit = 0;
  int rc = hs_cuplan_build(&t, &g, HS_CUPLAN_FWD, &p, &d);
  if (rc == 0) {
    ASSERT_EQ(p.workspace, 0);
    hs_cuplan_free(dnn, &p);
  }
  ws_limit = -1;
  hs_diag_clear(&d);
  ASSERT_EQ(hs_cuplan_build(&t, &g, HS_CUPLAN_FWD, &p, &d), HS_ENOMEM);
  ASSERT_CONTAINS(d.msg, "does not fit in -1");
  ASSERT_CONTAINS(d.msg, "conv2d 3x3/1 (64->64 channels, groups 1) forward at batch 64");
  ASSERT(p.desc[HS_CUPLAN_DESCS - 1] == NULL);
  (void)dnn->cudnnBackendDestroyDescriptor(dp);
}

static void test_bad_json(void) {
  static const char *bad[] = {"{\"deviceVer\":900}", "not json", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cudnnBackendDescriptor_t dp = NULL;
    hs_diag d = {0};
    ASSERT_EQ(hs_cuplan_deviceprop_json(dnn, bad[i], strlen(bad[i]), &dp, &d), HS_EINVAL);
    ASSERT(dp == NULL);
    ASSERT_CONTAINS(d.msg, "cuDNN: device properties");
  }
}

static void test_json_read_back(void) {
  cudnnBackendDescriptor_t dp = load_props(props.gl_pathv[0]);
  if (!dp) return;
  char *json = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_cuplan_deviceprop_serialize(dnn, dp, &json, &d), 0);
  if (json) {
    ASSERT_CONTAINS(json, "\"multiProcessorCount\"");
    ASSERT_CONTAINS(json, "\"deviceVer\"");
    /* What comes back is accepted again. */
    cudnnBackendDescriptor_t again = NULL;
    ASSERT_EQ(hs_cuplan_deviceprop_json(dnn, json, strlen(json), &again, &d), 0);
    if (again) (void)dnn->cudnnBackendDestroyDescriptor(again);
  }
  free(json);
  (void)dnn->cudnnBackendDestroyDescriptor(dp);
}

static void test_target_checked(void) {
  hs_cuplan_conv g = resnet_block();
  hs_cuplan_target t = {.dnn = dnn};
  hs_cuplan p;
  hs_diag d = {0};
  ASSERT_EQ(hs_cuplan_build(&t, &g, HS_CUPLAN_FWD, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "exactly one of a handle and device properties");
  cudnnBackendDescriptor_t dp = load_props(props.gl_pathv[0]);
  if (!dp) return;
  t.deviceprop = dp;
  g.groups = 5; /* 64 channels are not 5 groups */
  ASSERT_EQ(hs_cuplan_build(&t, &g, HS_CUPLAN_FWD, &p, &d), HS_EINVAL);
  (void)dnn->cudnnBackendDestroyDescriptor(dp);
}

static void test_math_option(void) {
  hs_cuda_math m = HS_CUDA_MATH_FAST;
  hs_diag d = {0};
  unsetenv("HETSIM_CUDA_MATH");
  ASSERT_EQ(hs_cuda_math_from_env(&m, &d), 0);
  ASSERT_EQ(m, HS_CUDA_MATH_STRICT);
  setenv("HETSIM_CUDA_MATH", "fast", 1);
  ASSERT_EQ(hs_cuda_math_from_env(&m, &d), 0);
  ASSERT_EQ(m, HS_CUDA_MATH_FAST);
  setenv("HETSIM_CUDA_MATH", "tf32", 1);
  ASSERT_EQ(hs_cuda_math_from_env(&m, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "HETSIM_CUDA_MATH: expected \"strict\"");
  ASSERT_CONTAINS(d.msg, "got \"tf32\"");
  unsetenv("HETSIM_CUDA_MATH");
  ASSERT_STR(hs_cuda_math_name(HS_CUDA_MATH_STRICT), "strict");
  ASSERT_STR(hs_cuda_math_name(HS_CUDA_MATH_FAST), "fast");
}

int main(int argc, char **argv) {
  hs_diag d = {0};
  dnn = hs_cudnn_api_get(&d);
  if (!dnn) {
    printf("no cuDNN library (%s): skipped\n", d.msg);
    return 77;
  }
  if (dnn->cudnnGetVersion() < 90800) {
    printf("cuDNN %zu has no device-properties descriptors (9.8+): skipped\n", dnn->cudnnGetVersion());
    return 77;
  }
  /* cuDNN's runtime-compiled engines load NVRTC, compile, and unload it again for every plan;
   * keeping one reference open spares those reloads, and leaves NVRTC's own leaks (LeakSanitizer
   * builds) in a module that tests/lsan-cudnn.supp can name. */
  char nvrtc[HS_DL_PATH_MAX + 32];
  const char *cudnn_path = hs_cudalib_status_get(HS_CUDALIB_CUDNN)->path;
  const char *slash = strrchr(cudnn_path, '/');
  snprintf(nvrtc, sizeof nvrtc, "%.*s/libnvrtc.so.%d", slash ? (int)(slash - cudnn_path) : 1, slash ? cudnn_path : ".",
           CUDA_VERSION / 1000);
  if (!dlopen(nvrtc, RTLD_NOW | RTLD_GLOBAL)) (void)dlopen(nvrtc + (slash ? (slash - cudnn_path) + 1 : 2), RTLD_NOW | RTLD_GLOBAL);
  const char *src = getenv("HETSIM_SOURCE_DIR");
  char pat[2][1024];
  snprintf(pat[0], sizeof pat[0], "%s/tests/data/cudnn-*.json", src ? src : ".");
  snprintf(pat[1], sizeof pat[1], "%s/notebooks-data/gpu-*/cudnn-deviceprop.json", src ? src : ".");
  if (glob(pat[0], 0, NULL, &props) != 0 || props.gl_pathc == 0) {
    printf("no properties file matches %s\n", pat[0]);
    return 1;
  }
  (void)glob(pat[1], GLOB_APPEND, NULL, &props);
  /* One more, named by tools/gpu-check.sh: the JSON it has just recorded on a GPU. */
  const char *extra = getenv("HETSIM_CUDNN_DEVICEPROP");
  if (extra && extra[0]) (void)glob(extra, GLOB_APPEND | GLOB_NOCHECK, NULL, &props);
  static const hs_test_case tests[] = {
      {"every_zoo_conv", test_every_zoo_conv},
      {"partitions", test_partitions},
      {"fast_math", test_fast_math},
      {"workspace_refused", test_workspace_refused},
      {"bad_json", test_bad_json},
      {"json_read_back", test_json_read_back},
      {"target_checked", test_target_checked},
      {"math_option", test_math_option},
      {NULL, NULL},
  };
  int rc = hs_test_main("deviceless_cudnn", tests, argc, argv);
  globfree(&props);
  return rc;
}
#endif
