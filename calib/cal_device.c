#include "calib/cal_device.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_buildinfo.h"
#include "nn/nn_cudalib.h"

/* OpenBLAS's own report of its version, target and threading ("OpenBLAS 0.3.21 DYNAMIC_ARCH
 * NO_AFFINITY Haswell MAX_THREADS=64"); declared here rather than through cblas.h, whose
 * location differs between OpenBLAS packages. */
extern char *openblas_get_config(void);

static int parse_nonneg(const char **s, long *out) {
  if (!isdigit((unsigned char)**s)) return -1;
  char *end;
  long v = strtol(*s, &end, 10);
  if (v < 0 || v > 1000000) return -1;
  *s = end;
  *out = v;
  return 0;
}

char *hs_cal_device_shared_name(char *buf, size_t len, const char *name, int n) {
  char full[512];
  snprintf(full, sizeof full, "%s (%d workers)", name, n);
  snprintf(buf, len, "%.255s", full);
  return buf;
}

const char *hs_cal_device_granted_note(const hs_cal_device *dev, char *buf, size_t len) {
  if (dev->sm_requested <= 0 || dev->sm_requested == dev->sm_partition) return NULL;
  snprintf(buf, len, "%s: the driver grants whole groups of SMs: the partition has %d (named \"%s\")", dev->spec,
           dev->sm_partition, dev->name);
  return buf;
}

int hs_cal_device_parse(const char *s, hs_cal_device *out, hs_diag *d) {
  memset(out, 0, sizeof *out);
  out->ordinal = -1;
  out->threads = 1;
  if (!s || strlen(s) >= sizeof out->spec) goto bad;
  snprintf(out->spec, sizeof out->spec, "%s", s);
  if (!strcmp(s, "cpu")) {
    snprintf(out->kind, sizeof out->kind, "cpu");
    return 0;
  }
  if (strncmp(s, "cuda:", 5)) goto bad;
  const char *p = s + 5;
  long ord, sm = 0;
  if (parse_nonneg(&p, &ord)) goto bad;
  if (*p == '/') {
    p++;
    if (strncmp(p, "sm=", 3)) goto bad;
    p += 3;
    if (parse_nonneg(&p, &sm) || sm < 1) goto bad;
  }
  if (*p) goto bad;
  snprintf(out->kind, sizeof out->kind, "cuda");
  out->ordinal = (int)ord;
  out->sm_partition = (int)sm;
  return 0;
bad:
  return hs_diag_set(d, HS_EINVAL, "expected cpu, cuda:I or cuda:I/sm=N, got \"%s\"", s ? s : "");
}

static void cpu_model_name(char *buf, size_t size) {
  snprintf(buf, size, "cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    char *v = strchr(line, ':');
    if (!v) continue;
    v++;
    while (isspace((unsigned char)*v)) v++;
    size_t n = strlen(v);
    while (n && isspace((unsigned char)v[n - 1])) v[--n] = '\0';
    if (n) snprintf(buf, size, "%s", v);
    break;
  }
  fclose(f);
}

static int discover_cpu(hs_cal_device *dev, hs_diag *d) {
  if (!dev->name[0]) cpu_model_name(dev->name, sizeof dev->name);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  dev->sm_count = cores > 0 ? (int)cores : 0;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  dev->memory_bytes = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
  const char *cfg = openblas_get_config();
  snprintf(dev->blas, sizeof dev->blas, "%s", cfg ? cfg : "OpenBLAS");
  return 0;
}

#if HETSIM_HAVE_CUDA
static int cu_fail(const hs_cudrv_api *cu, CUresult r, const char *what, const hs_cal_device *dev,
                   hs_diag *d) {
  char t[HS_CUDRV_ERROR_TEXT];
  return hs_diag_set(d, r == CUDA_ERROR_NO_DEVICE ? HS_EUNSUPPORTED : HS_ERUNTIME,
                     "%s: %s: %s", dev->spec, what, hs_cudrv_error_text(cu, r, t, sizeof t));
}

static int discover_cuda(hs_cal_device *dev, hs_diag *d) {
  hs_diag ld = {0};
  const hs_cudrv_api *cu = hs_cudrv_api_get(&ld);
  if (!cu)
    return hs_diag_set(d, HS_EUNSUPPORTED, "%s: no usable CUDA driver on this machine (%s)", dev->spec, ld.msg);
  CUresult r = cu->cuInit(0);
  if (r != CUDA_SUCCESS) return cu_fail(cu, r, "cuInit", dev, d);
  int count = 0;
  if ((r = cu->cuDeviceGetCount(&count)) != CUDA_SUCCESS) return cu_fail(cu, r, "counting GPUs", dev, d);
  if (dev->ordinal >= count)
    return hs_diag_set(d, HS_EUNSUPPORTED, "%s: this machine has %d GPU%s", dev->spec, count, count == 1 ? "" : "s");
  CUdevice cd;
  if ((r = cu->cuDeviceGet(&cd, dev->ordinal)) != CUDA_SUCCESS) return cu_fail(cu, r, "cuDeviceGet", dev, d);
  char name[256] = "";
  if (!dev->name[0]) {
    if ((r = cu->cuDeviceGetName(name, (int)sizeof name, cd)) != CUDA_SUCCESS) return cu_fail(cu, r, "reading the name", dev, d);
    snprintf(dev->name, sizeof dev->name, "%s", name);
  }
  CUuuid u;
  if (cu->cuDeviceGetUuid(&u, cd) == CUDA_SUCCESS) {
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(dev->uuid, sizeof dev->uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  }
  size_t mem = 0;
  if (cu->cuDeviceTotalMem(&mem, cd) == CUDA_SUCCESS) dev->memory_bytes = (int64_t)mem;
  int v = 0, major = 0, minor = 0;
  if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, cd) == CUDA_SUCCESS) dev->sm_count = v;
  if (cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cd) == CUDA_SUCCESS &&
      cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cd) == CUDA_SUCCESS)
    snprintf(dev->compute_capability, sizeof dev->compute_capability, "%d.%d", major, minor);
  if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, cd) == CUDA_SUCCESS) dev->clock_sm_mhz = v / 1000;
  if (cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, cd) == CUDA_SUCCESS) dev->clock_mem_mhz = v / 1000;
  if (dev->sm_partition > 0 && dev->sm_count > 0 && dev->sm_partition > dev->sm_count)
    return hs_diag_set(d, HS_EINVAL, "%s: the GPU has %d SMs, fewer than the partition's %d", dev->spec,
                       dev->sm_count, dev->sm_partition);
  /* Partitions are granted in whole groups of the driver's granule (nn_cuda.c splits the GPU
   * into them once): the SMs those groups cover bound what partitions can have together. */
  CUdevResource all;
  memset(&all, 0, sizeof all);
  CUresult res = cu->cuDeviceGetDevResource(cd, &all, CU_DEV_RESOURCE_TYPE_SM);
  unsigned g = res == CUDA_SUCCESS ? hs_cudrv_sm_granule(&all) : 0;
  if (g && dev->sm_count > 0) dev->sm_grouped = (int)((unsigned)dev->sm_count / g * g);
  if (dev->sm_partition > 0) {
    /* The device is what a net on it gets, not what was asked. */
    if (res != CUDA_SUCCESS) return cu_fail(cu, res, "reading its SM resource (green contexts)", dev, d);
    unsigned granted = hs_cudrv_sm_granted((unsigned)dev->sm_partition, g);
    if (dev->sm_count > 0 && granted > (unsigned)dev->sm_count)
      return hs_diag_set(d, HS_EINVAL, "%s: partitions are whole groups of %u SMs on this GPU, so %d SMs round up "
                         "to %u, more than its %d", dev->spec, g, dev->sm_partition, granted, dev->sm_count);
    dev->sm_requested = dev->sm_partition;
    dev->sm_partition = (int)granted;
  }
  if (cu->cuDriverGetVersion(&v) == CUDA_SUCCESS)
    snprintf(dev->driver_version, sizeof dev->driver_version, "%d.%d", v / 1000, (v % 1000) / 10);
  snprintf(dev->cuda_version, sizeof dev->cuda_version, "%d.%d", CUDA_VERSION / 1000, (CUDA_VERSION % 1000) / 10);
  const hs_cudalib_status *st = hs_cudalib_status_get(HS_CUDALIB_CUDNN);
  if (st && st->state == HS_CUDALIB_OK) snprintf(dev->cudnn_version, sizeof dev->cudnn_version, "%s", st->version_str);
  st = hs_cudalib_status_get(HS_CUDALIB_NCCL);
  if (st && st->state == HS_CUDALIB_OK) snprintf(dev->nccl_version, sizeof dev->nccl_version, "%s", st->version_str);
  /* A partition is its own virtual device: its name says so, unless --name gave one. */
  if (dev->sm_partition > 0 && name[0]) {
    char full[256 + 32];
    snprintf(full, sizeof full, "%s (%d SMs)", name, dev->sm_partition);
    snprintf(dev->name, sizeof dev->name, "%.255s", full);
  }
  return 0;
}
#else
static int discover_cuda(hs_cal_device *dev, hs_diag *d) {
  return hs_diag_set(d, HS_EUNSUPPORTED, "%s: this hetsim was built without CUDA", dev->spec);
}
#endif

int hs_cal_device_discover(hs_cal_device *dev, hs_diag *d) {
  if (gethostname(dev->host, sizeof dev->host - 1)) snprintf(dev->host, sizeof dev->host, "unknown");
  if (!strcmp(dev->kind, "cpu")) return discover_cpu(dev, d);
  if (!strcmp(dev->kind, "cuda")) return discover_cuda(dev, d);
  return hs_diag_set(d, HS_EINVAL, "unknown device kind \"%s\"", dev->kind);
}
