/* Tests for the pieces behind `hetsim doctor`: the library search (core_dl), the run-time library
 * tables (nn_cudalib) and the probes' handling of a missing library, device or daemon (nn_probe).
 * Needs no GPU; where one is present, the "missing GPU" cases are skipped. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "core/core_dl.h"
#include "hs_test.h"
#include "nn/nn_cudalib.h"
#include "nn/nn_probe.h"

static char tmp_root[256];

/* A fresh folder under the test's temporary root. */
static const char *fresh_dir(const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s", tmp_root, name);
  mkdir(buf, 0700);
  return buf;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* The file behind libz.so.1 as the default loader finds it: a real library to copy around. */
static int real_libz(char *path, size_t cap) {
  hs_dl_spec spec = {.soname = "libz.so.1", .system_only = 1};
  hs_dl_lib lib;
  hs_diag d = {0};
  if (hs_dl_open(&spec, &lib, &d)) return 0;
  snprintf(path, cap, "%s", lib.path);
  return 1;
}

static void test_dl_env_folder_empty(void) {
  char dir[512];
  fresh_dir("empty", dir, sizeof dir);
  setenv("HETSIM_TEST_LIB_PATH", dir, 1);
  hs_dl_spec spec = {.soname = "libz.so.1", .env_var = "HETSIM_TEST_LIB_PATH"};
  hs_dl_lib lib;
  hs_diag d = {0};
  ASSERT_EQ(hs_dl_open(&spec, &lib, &d), HS_ENOTFOUND);
  ASSERT(lib.handle == NULL);
  /* The env folder is the only place tried, even though libz.so.1 is on the loader path. */
  ASSERT_CONTAINS(d.msg, "libz.so.1 not found (searched: $HETSIM_TEST_LIB_PATH=");
  ASSERT_CONTAINS(d.msg, dir);
  ASSERT(strstr(d.msg, "default loader") == NULL);
  unsetenv("HETSIM_TEST_LIB_PATH");
}

static void test_dl_env_not_a_folder(void) {
  setenv("HETSIM_TEST_LIB_PATH", "/nonexistent/hetsim-test", 1);
  hs_dl_spec spec = {.soname = "libz.so.1", .env_var = "HETSIM_TEST_LIB_PATH"};
  hs_dl_lib lib;
  hs_diag d = {0};
  ASSERT_EQ(hs_dl_open(&spec, &lib, &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "(not a folder)");
  unsetenv("HETSIM_TEST_LIB_PATH");
}

static void test_dl_unloadable(void) {
  char dir[512], file[600];
  fresh_dir("broken", dir, sizeof dir);
  snprintf(file, sizeof file, "%s/libz.so.1", dir);
  write_file(file, "this is not an ELF file\n");
  setenv("HETSIM_TEST_LIB_PATH", dir, 1);
  hs_dl_spec spec = {.soname = "libz.so.1", .env_var = "HETSIM_TEST_LIB_PATH"};
  hs_dl_lib lib;
  hs_diag d = {0};
  ASSERT_EQ(hs_dl_open(&spec, &lib, &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "libz.so.1 could not be loaded: ");
  ASSERT_CONTAINS(d.msg, file); /* dlerror names the file and what is wrong with it */
  ASSERT(strstr(d.msg, "ELF") || strstr(d.msg, "too short"));
  unsetenv("HETSIM_TEST_LIB_PATH");
}

static void test_dl_env_folder_found(void) {
  char real[HS_DL_PATH_MAX], dir[512], link[600];
  if (!real_libz(real, sizeof real)) {
    HS_FAIL_AT("libz.so.1 not loadable through the default loader path");
    return;
  }
  fresh_dir("good", dir, sizeof dir);
  snprintf(link, sizeof link, "%s/libz.so.1", dir);
  ASSERT_EQ(symlink(real, link), 0);
  setenv("HETSIM_TEST_LIB_PATH", dir, 1);
  hs_dl_spec spec = {.soname = "libz.so.1", .env_var = "HETSIM_TEST_LIB_PATH"};
  hs_dl_lib lib;
  hs_diag d = {0};
  ASSERT_EQ(hs_dl_open(&spec, &lib, &d), 0);
  ASSERT(lib.handle != NULL);
  ASSERT_STR(lib.path, link);
  hs_diag d2 = {0};
  ASSERT(hs_dl_sym(&lib, "zlibVersion", &d2) != NULL);
  ASSERT(hs_dl_sym(&lib, "no_such_function_hetsim", &d2) == NULL);
  ASSERT_CONTAINS(d2.msg, "no_such_function_hetsim");
  unsetenv("HETSIM_TEST_LIB_PATH");
}

static void test_dl_pip_layout(void) {
  char real[HS_DL_PATH_MAX], site[512], dir[700], link[800];
  if (!real_libz(real, sizeof real)) {
    HS_FAIL_AT("libz.so.1 not loadable through the default loader path");
    return;
  }
  fresh_dir("site", site, sizeof site);
  snprintf(dir, sizeof dir, "%s/nvidia", site);
  mkdir(dir, 0700);
  snprintf(dir, sizeof dir, "%s/nvidia/fakelib", site);
  mkdir(dir, 0700);
  snprintf(dir, sizeof dir, "%s/nvidia/fakelib/lib", site);
  mkdir(dir, 0700);
  snprintf(link, sizeof link, "%s/libz.so.1", dir);
  ASSERT_EQ(symlink(real, link), 0);
  setenv("HETSIM_PYTHON_SITE", site, 1);

  char *sites[HS_DL_MAX_SITES];
  int n = hs_dl_python_sites(sites, HS_DL_MAX_SITES);
  ASSERT(n >= 1);
  if (n >= 1) ASSERT_STR(sites[0], site); /* HETSIM_PYTHON_SITE comes first */
  for (int i = 0; i < n; i++) free(sites[i]);

  hs_dl_spec spec = {.soname = "libz.so.1", .env_var = "HETSIM_TEST_LIB_PATH"};
  hs_dl_lib lib;
  hs_diag d = {0};
  ASSERT_EQ(hs_dl_open(&spec, &lib, &d), 0);
  ASSERT_STR(lib.path, link); /* the wheel's copy wins over the loader path */
  unsetenv("HETSIM_PYTHON_SITE");
}

static void test_dl_default_path(void) {
  hs_dl_spec spec = {.soname = "libhetsim-no-such-library.so.7", .env_var = "HETSIM_TEST_LIB_PATH"};
  hs_dl_lib lib;
  hs_diag d = {0};
  ASSERT_EQ(hs_dl_open(&spec, &lib, &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "libhetsim-no-such-library.so.7 not found (searched: ");
  ASSERT_CONTAINS(d.msg, "/usr/local/cuda/lib64");
  ASSERT_CONTAINS(d.msg, "the default loader path");
  hs_dl_spec bad = {.soname = NULL};
  ASSERT_EQ(hs_dl_open(&bad, &lib, &d), HS_EINVAL);
}

static void test_cudalib_status(void) {
  ASSERT(hs_cudalib_status_get(HS_CUDALIB_COUNT) == NULL);
  for (int i = 0; i < HS_CUDALIB_COUNT; i++) {
    const hs_cudalib_status *st = hs_cudalib_status_get((hs_cudalib_id)i);
    ASSERT(st != NULL);
    if (!st) continue;
    ASSERT(st->name && st->name[0]);
    ASSERT(st->soname && strstr(st->soname, ".so."));
    ASSERT(st == hs_cudalib_status_get((hs_cudalib_id)i)); /* loaded once */
    if (st->state == HS_CUDALIB_OK) {
      ASSERT(st->version > 0);
      ASSERT(st->path[0] == '/');
      ASSERT(st->version_str[0] != '\0');
      ASSERT_STR(st->error, "");
    } else {
      ASSERT(st->error[0] != '\0');
      ASSERT_STR(st->path, "");
      if (!HETSIM_HAVE_CUDA) ASSERT_EQ(st->state, HS_CUDALIB_NOT_BUILT);
    }
  }
}

/* Without a GPU every GPU probe says missing, with the reason, and none claims failure. */
static void test_probes_without_gpu(void) {
  hs_gpu_info gpus[HS_PROBE_MAX_GPUS];
  int n = -1;
  hs_diag d = {0};
  if (hs_probe_gpus(gpus, HS_PROBE_MAX_GPUS, &n, &d) == 0 && n > 0) {
    printf("  (a GPU is present: skipped)\n");
    return;
  }
  ASSERT_EQ(n, 0);
  ASSERT(d.msg[0] != '\0');
  hs_probe_result r;
  void (*probes[])(hs_probe_result *) = {hs_probe_cudnn_conv, hs_probe_cublas_gemm, hs_probe_green_ctx};
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    probes[i](&r);
    ASSERT_EQ(r.status, HS_PROBE_MISSING);
    ASSERT(r.detail[0] != '\0');
    ASSERT(isnan(r.expected));
  }
  for (int ranks = 1; ranks <= 2; ranks++) {
    hs_probe_nccl_allreduce(ranks, &r);
    ASSERT_EQ(r.status, HS_PROBE_MISSING);
    ASSERT(r.detail[0] != '\0');
  }
  if (HETSIM_HAVE_CUDA) {
    int v = 0;
    ASSERT_EQ(hs_probe_cuda_runtime_version(&v, &d), 0);
    ASSERT(v >= 12000);
  }
}

static void test_mps_probe(void) {
  char dir[512], ctl[600];
  hs_probe_result r;
  setenv("CUDA_MPS_PIPE_DIRECTORY", "/nonexistent/hetsim-mps", 1);
  hs_probe_mps(&r);
  ASSERT_EQ(r.status, HS_PROBE_MISSING);
  ASSERT_CONTAINS(r.detail, "/nonexistent/hetsim-mps does not exist");

  fresh_dir("mps-empty", dir, sizeof dir);
  setenv("CUDA_MPS_PIPE_DIRECTORY", dir, 1);
  hs_probe_mps(&r);
  ASSERT_EQ(r.status, HS_PROBE_MISSING);
  ASSERT_CONTAINS(r.detail, "no control daemon answers");

  /* A control FIFO nobody reads: a daemon that died. */
  fresh_dir("mps-fifo", dir, sizeof dir);
  setenv("CUDA_MPS_PIPE_DIRECTORY", dir, 1);
  snprintf(ctl, sizeof ctl, "%s/control", dir);
  ASSERT_EQ(mkfifo(ctl, 0600), 0);
  hs_probe_mps(&r);
  ASSERT_EQ(r.status, HS_PROBE_MISSING);
  ASSERT_CONTAINS(r.detail, "no daemon reads the control pipe");
  /* ... and one with a reader. */
  int rd = open(ctl, O_RDONLY | O_NONBLOCK);
  ASSERT(rd >= 0);
  hs_probe_mps(&r);
  ASSERT_EQ(r.status, HS_PROBE_OK);
  if (rd >= 0) close(rd);

  /* A listening control socket. */
  fresh_dir("mps-sock", dir, sizeof dir);
  setenv("CUDA_MPS_PIPE_DIRECTORY", dir, 1);
  snprintf(ctl, sizeof ctl, "%s/control", dir);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(ctl) < sizeof addr.sun_path) {
    memcpy(addr.sun_path, ctl, strlen(ctl) + 1);
    ASSERT_EQ(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    ASSERT_EQ(listen(fd, 4), 0);
    hs_probe_mps(&r);
    ASSERT_EQ(r.status, HS_PROBE_OK);
    ASSERT_CONTAINS(r.detail, "control daemon answers");
  }
  close(fd);
  unsetenv("CUDA_MPS_PIPE_DIRECTORY");
}

static void remove_tree(const char *root) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
}

int main(int argc, char **argv) {
  const char *tmp = getenv("TMPDIR");
  snprintf(tmp_root, sizeof tmp_root, "%s/hs-test-doctor-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(tmp_root)) {
    perror("mkdtemp");
    return 1;
  }
  static const hs_test_case tests[] = {
      {"dl_env_folder_empty", test_dl_env_folder_empty},
      {"dl_env_not_a_folder", test_dl_env_not_a_folder},
      {"dl_unloadable", test_dl_unloadable},
      {"dl_env_folder_found", test_dl_env_folder_found},
      {"dl_pip_layout", test_dl_pip_layout},
      {"dl_default_path", test_dl_default_path},
      {"cudalib_status", test_cudalib_status},
      {"probes_without_gpu", test_probes_without_gpu},
      {"mps_probe", test_mps_probe},
      {NULL, NULL},
  };
  int rc = hs_test_main("doctor", tests, argc, argv);
  remove_tree(tmp_root);
  return rc;
}
