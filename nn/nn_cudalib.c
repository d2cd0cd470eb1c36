/* nn_cudalib: loads the CUDA driver, cuBLAS, cuDNN and NCCL once per process (see nn_cudalib.h). */
#include "nn/nn_cudalib.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* How each library is found. Indexed by hs_cudalib_id. */
static const struct cudalib_spec {
  const char *name;
  hs_dl_spec dl;
} specs[HS_CUDALIB_COUNT] = {
    [HS_CUDALIB_DRIVER] = {"CUDA driver", {.soname = "libcuda.so.1", .env_var = NULL, .system_only = 1}},
    [HS_CUDALIB_CUBLAS] = {"cuBLAS", {.soname = "libcublas.so.13", .env_var = "HETSIM_CUBLAS_PATH"}},
    [HS_CUDALIB_CUDNN] = {"cuDNN", {.soname = "libcudnn.so.9", .env_var = "HETSIM_CUDNN_PATH"}},
    [HS_CUDALIB_NCCL] = {"NCCL", {.soname = "libnccl.so.2", .env_var = "HETSIM_NCCL_PATH"}},
};

/* Process-wide, written once under pthread_once and read-only afterwards (see the header). */
static hs_cudalib_status statuses[HS_CUDALIB_COUNT];

static void status_init(hs_cudalib_id id) {
  hs_cudalib_status *st = &statuses[id];
  st->name = specs[id].name;
  st->soname = specs[id].dl.soname;
  st->env_var = specs[id].dl.env_var;
  st->state = HS_CUDALIB_MISSING;
}

#if HETSIM_HAVE_CUDA

#define HS_STR_(x) #x
#define HS_STR(x) HS_STR_(x) /* expands header macros first: cuDeviceTotalMem -> "..._v2" */

/* Every entry must have the type of the function its real header declares. */
#define HS_CHECK_SIG(ret, name, args)                                                           \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), hs_pfn_##name),               \
                 HS_STR(name) " in nn_cudalib.h differs from its header");
HS_CUDRV_FUNCS(HS_CHECK_SIG)
HS_CUBLAS_FUNCS(HS_CHECK_SIG)
#if HETSIM_HAVE_CUDNN
HS_CUDNN_FUNCS(HS_CHECK_SIG)
#endif
#if HETSIM_HAVE_NCCL
HS_NCCL_FUNCS(HS_CHECK_SIG)
#endif

/* Resolves one entry into api->name; on a missing symbol records the error and returns. The
 * memcpy turns dlsym's object pointer into a function pointer as POSIX requires, without a cast. */
#define HS_RESOLVE(ret, name, args)                                                              \
  {                                                                                             \
    void *sym_ = hs_dl_sym(&dl, HS_STR(name), &d);                                              \
    if (!sym_) goto fail;                                                                       \
    memcpy(&api->name, &sym_, sizeof sym_);                                                     \
  }

static void set_version(hs_cudalib_status *st, int version, int major, int minor, int patch) {
  st->version = version;
  if (patch >= 0) snprintf(st->version_str, sizeof st->version_str, "%d.%d.%d", major, minor, patch);
  else snprintf(st->version_str, sizeof st->version_str, "%d.%d", major, minor);
}

/* Opens the library of id; returns 1 with dl filled in, or 0 with the status saying why. */
static int open_lib(hs_cudalib_id id, hs_dl_lib *dl) {
  hs_diag d = {0};
  status_init(id);
  if (hs_dl_open(&specs[id].dl, dl, &d)) {
    snprintf(statuses[id].error, sizeof statuses[id].error, "%s", dl->why);
    return 0;
  }
  snprintf(statuses[id].path, sizeof statuses[id].path, "%s", dl->path);
  return 1;
}

static void missing_symbol(hs_cudalib_id id, const hs_diag *d) {
  statuses[id].state = HS_CUDALIB_MISSING;
  snprintf(statuses[id].error, sizeof statuses[id].error, "%s", d->msg);
}

static hs_cudrv_api cudrv_table;
static hs_cublas_api cublas_table;

static void load_driver(void) {
  hs_dl_lib dl;
  hs_diag d = {0};
  hs_cudrv_api *api = &cudrv_table;
  hs_cudalib_status *st = &statuses[HS_CUDALIB_DRIVER];
  if (!open_lib(HS_CUDALIB_DRIVER, &dl)) return;
  /* The version first, so that a driver too old for green contexts says which it is. */
  void *sym = hs_dl_sym(&dl, "cuDriverGetVersion", &d);
  if (sym) {
    hs_pfn_cuDriverGetVersion get;
    memcpy(&get, &sym, sizeof sym);
    int v = 0;
    CUresult r = get(&v);
    if (r == CUDA_SUCCESS) set_version(st, v, v / 1000, (v % 1000) / 10, -1);
    else if (r == CUDA_ERROR_STUB_LIBRARY)
      snprintf(st->note, sizeof st->note,
               "the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), not an NVIDIA driver: "
               "no GPU can be used");
  }
  HS_CUDRV_FUNCS(HS_RESOLVE)
  st->state = HS_CUDALIB_OK;
  return;
fail:
  missing_symbol(HS_CUDALIB_DRIVER, &d);
  if (st->version && st->version < 12040)
    snprintf(st->error + strlen(st->error), sizeof st->error - strlen(st->error),
             " (driver %s is older than CUDA 12.4, which green contexts need)", st->version_str);
}

static void load_cublas(void) {
  hs_dl_lib dl;
  hs_diag d = {0};
  hs_cublas_api *api = &cublas_table;
  hs_cudalib_status *st = &statuses[HS_CUDALIB_CUBLAS];
  if (!open_lib(HS_CUDALIB_CUBLAS, &dl)) return;
  HS_CUBLAS_FUNCS(HS_RESOLVE)
  int major = 0, minor = 0, patch = 0;
  if (api->cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      api->cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      api->cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    set_version(st, major * 10000 + minor * 100 + patch, major, minor, patch);
  st->state = HS_CUDALIB_OK;
  return;
fail:
  missing_symbol(HS_CUDALIB_CUBLAS, &d);
}

#if HETSIM_HAVE_CUDNN
static hs_cudnn_api cudnn_table;

static void load_cudnn(void) {
  hs_dl_lib dl;
  hs_diag d = {0};
  hs_cudnn_api *api = &cudnn_table;
  hs_cudalib_status *st = &statuses[HS_CUDALIB_CUDNN];
  if (!open_lib(HS_CUDALIB_CUDNN, &dl)) return;
  HS_CUDNN_FUNCS(HS_RESOLVE)
  /* cuDNN 9 numbers versions major*10000 + minor*100 + patch. */
  int v = (int)api->cudnnGetVersion();
  set_version(st, v, v / 10000, (v % 10000) / 100, v % 100);
  st->state = HS_CUDALIB_OK;
  return;
fail:
  missing_symbol(HS_CUDALIB_CUDNN, &d);
}
#endif

#if HETSIM_HAVE_NCCL
static hs_nccl_api nccl_table;

static void load_nccl(void) {
  hs_dl_lib dl;
  hs_diag d = {0};
  hs_nccl_api *api = &nccl_table;
  hs_cudalib_status *st = &statuses[HS_CUDALIB_NCCL];
  if (!open_lib(HS_CUDALIB_NCCL, &dl)) return;
  HS_NCCL_FUNCS(HS_RESOLVE)
  /* NCCL 2.9+ numbers versions major*10000 + minor*100 + patch. */
  int v = 0;
  if (api->ncclGetVersion(&v) == ncclSuccess) set_version(st, v, v / 10000, (v % 10000) / 100, v % 100);
  st->state = HS_CUDALIB_OK;
  return;
fail:
  missing_symbol(HS_CUDALIB_NCCL, &d);
}
#endif

#endif /* HETSIM_HAVE_CUDA */

#if !HETSIM_HAVE_CUDA || !HETSIM_HAVE_CUDNN || !HETSIM_HAVE_NCCL
/* A library this build has no headers for. */
static void not_built(hs_cudalib_id id, const char *why) {
  status_init(id);
  statuses[id].state = HS_CUDALIB_NOT_BUILT;
  snprintf(statuses[id].error, sizeof statuses[id].error, "%s", why);
}
#endif

#if !HETSIM_HAVE_CUDA
static void load_driver(void) { not_built(HS_CUDALIB_DRIVER, "built without CUDA"); }
static void load_cublas(void) { not_built(HS_CUDALIB_CUBLAS, "built without CUDA"); }
#endif
#if !HETSIM_HAVE_CUDA || !HETSIM_HAVE_CUDNN
static void load_cudnn(void) {
  not_built(HS_CUDALIB_CUDNN, HETSIM_HAVE_CUDA ? "built without cuDNN headers" : "built without CUDA");
}
#endif
#if !HETSIM_HAVE_CUDA || !HETSIM_HAVE_NCCL
static void load_nccl(void) {
  not_built(HS_CUDALIB_NCCL, HETSIM_HAVE_CUDA ? "built without NCCL headers" : "built without CUDA");
}
#endif

static pthread_once_t onces[HS_CUDALIB_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                                 PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
static void (*const loaders[HS_CUDALIB_COUNT])(void) = {
    [HS_CUDALIB_DRIVER] = load_driver,
    [HS_CUDALIB_CUBLAS] = load_cublas,
    [HS_CUDALIB_CUDNN] = load_cudnn,
    [HS_CUDALIB_NCCL] = load_nccl,
};

const hs_cudalib_status *hs_cudalib_status_get(hs_cudalib_id id) {
  if ((int)id < 0 || id >= HS_CUDALIB_COUNT) return NULL;
  pthread_once(&onces[id], loaders[id]);
  return &statuses[id];
}

#if HETSIM_HAVE_CUDA
/* The table when its library loaded, else NULL with d saying why. */
static const void *table_or_diag(hs_cudalib_id id, const void *table, hs_diag *d) {
  const hs_cudalib_status *st = hs_cudalib_status_get(id);
  if (st->state == HS_CUDALIB_OK) return table;
  hs_diag_set(d, st->state == HS_CUDALIB_NOT_BUILT ? HS_EUNSUPPORTED : HS_ENOTFOUND, "%s: %s",
              st->name, st->error);
  return NULL;
}

const hs_cudrv_api *hs_cudrv_api_get(hs_diag *d) {
  return table_or_diag(HS_CUDALIB_DRIVER, &cudrv_table, d);
}

/* The names of the codes a machine without a usable driver gives, for when the driver cannot
 * name them itself (the toolkit's stub answers every call, cuGetErrorName included, with
 * CUDA_ERROR_STUB_LIBRARY). */
static const char *known_name(CUresult r) {
  switch (r) {
  case CUDA_ERROR_STUB_LIBRARY:
    return "CUDA_ERROR_STUB_LIBRARY: the CUDA toolkit's stub libcuda.so.1 is on the loader path, not an NVIDIA "
           "driver's";
  case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
  case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
  case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
  default: return NULL;
  }
}

const char *hs_cudrv_error_text(const hs_cudrv_api *cu, CUresult r, char *buf, size_t n) {
  const char *text = NULL, *name = NULL;
  if (cu && (cu->cuGetErrorString(r, &text) != CUDA_SUCCESS || (text && !*text))) text = NULL;
  if (cu && (cu->cuGetErrorName(r, &name) != CUDA_SUCCESS || (name && !*name))) name = NULL;
  if (!name) name = known_name(r);
  if (text && name) snprintf(buf, n, "%s (%s)", text, name);
  else if (text || name) snprintf(buf, n, "%s (%d)", text ? text : name, (int)r);
  else snprintf(buf, n, "unknown CUDA driver error %d", (int)r);
  return buf;
}

int hs_cudrv_err(const hs_cudrv_api *cu, CUresult r, const char *what, hs_diag *d) {
  if (r == CUDA_SUCCESS) return 0;
  char t[HS_CUDRV_ERROR_TEXT];
  return hs_diag_set(d, r == CUDA_ERROR_OUT_OF_MEMORY ? HS_ENOMEM : HS_ERUNTIME, "CUDA driver: %s: %s", what,
                     hs_cudrv_error_text(cu, r, t, sizeof t));
}

const hs_cublas_api *hs_cublas_api_get(hs_diag *d) {
  return table_or_diag(HS_CUDALIB_CUBLAS, &cublas_table, d);
}

#if HETSIM_HAVE_CUDNN
const hs_cudnn_api *hs_cudnn_api_get(hs_diag *d) {
  return table_or_diag(HS_CUDALIB_CUDNN, &cudnn_table, d);
}
#endif

#if HETSIM_HAVE_NCCL
const hs_nccl_api *hs_nccl_api_get(hs_diag *d) {
  return table_or_diag(HS_CUDALIB_NCCL, &nccl_table, d);
}
#endif
#endif /* HETSIM_HAVE_CUDA */
