/* nn_cuda_part: the SM groups of each GPU and the green contexts made on them (nn_cuda_part.h). */
#include "nn/nn_cuda_part.h"

#if HETSIM_HAVE_CUDA

#include <pthread.h>
#include <string.h>

/* One GPU's split into groups, and which are held. */
typedef struct sm_table {
  int ready;              /* the split was made */
  unsigned sm_total;      /* SMs of the GPU */
  unsigned granule;       /* SMs of the smallest group the driver allows */
  int n_groups;
  CUdevResource groups[HS_CUDA_PART_MAX_GROUPS]; /* one split of the whole GPU */
  int holder[HS_CUDA_PART_MAX_GROUPS];           /* 0 free, else 1 */
} sm_table;

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static sm_table sm_tables[HS_CUDA_PART_MAX_GPUS];

/* Splits GPU dev (ordinal) into groups once (table_mu held). */
static int table_ready(const hs_cudrv_api *drv, int ordinal, CUdevice dev, sm_table *t, hs_diag *d) {
  if (t->ready) return 0;
  CUdevResource all;
  memset(&all, 0, sizeof all);
  int rc = hs_cudrv_err(drv, drv->cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM),
                        "cuDeviceGetDevResource", d);
  if (rc) return rc;
  unsigned g = hs_cudrv_sm_granule(&all);
  unsigned nb = 0;
  /* A NULL result asks how many groups the split makes. */
  rc = hs_cudrv_err(drv, drv->cuDevSmResourceSplitByCount(NULL, &nb, &all, NULL, 0, g),
                    "cuDevSmResourceSplitByCount (count)", d);
  if (rc) return rc;
  if (nb > HS_CUDA_PART_MAX_GROUPS) nb = HS_CUDA_PART_MAX_GROUPS;
  if (nb < 1)
    return hs_diag_set(d, HS_EUNSUPPORTED, "GPU %d (%u SMs) cannot be split into partitions of %u SMs", ordinal,
                       all.sm.smCount, g);
  memset(t->groups, 0, sizeof t->groups);
  rc = hs_cudrv_err(drv, drv->cuDevSmResourceSplitByCount(t->groups, &nb, &all, NULL, 0, g),
                    "cuDevSmResourceSplitByCount", d);
  if (rc) return rc;
  t->sm_total = all.sm.smCount;
  t->granule = g;
  t->n_groups = (int)nb;
  memset(t->holder, 0, sizeof t->holder);
  t->ready = 1;
  return 0;
}

/* Takes free groups of the GPU holding at least `want` SMs for p; fills res[0..*n_res). */
static int take(hs_cuda_part *p, const hs_cudrv_api *drv, CUdevice dev, unsigned want, const char *device,
                CUdevResource *res, int *n_res, hs_diag *d) {
  if (p->ordinal < 0 || p->ordinal >= HS_CUDA_PART_MAX_GPUS)
    return hs_diag_set(d, HS_EUNSUPPORTED, "%s: green contexts on GPUs past %d are not supported", device,
                       HS_CUDA_PART_MAX_GPUS - 1);
  pthread_mutex_lock(&table_mu);
  sm_table *t = &sm_tables[p->ordinal];
  int rc = table_ready(drv, p->ordinal, dev, t, d);
  if (!rc && want > t->sm_total)
    rc = hs_diag_set(d, HS_EINVAL, "%s: GPU %d has %u SMs, fewer than the %u asked for", device, p->ordinal,
                     t->sm_total, want);
  unsigned got = 0, free_sms = 0, in_groups = 0;
  int k = 0;
  for (int i = 0; !rc && i < t->n_groups; i++) {
    in_groups += t->groups[i].sm.smCount;
    if (t->holder[i]) continue;
    free_sms += t->groups[i].sm.smCount;
    if (got < want) {
      p->groups[k] = i;
      res[k++] = t->groups[i];
      got += t->groups[i].sm.smCount;
    }
  }
  if (!rc && got < want)
    rc = hs_diag_set(d, HS_ELIMIT, "%s: GPU %d's partitions are used up: %u SMs asked, %u free (the GPU's %u SMs "
                     "make %d groups of %u for green contexts, %u SMs in all; other nets of this process hold the "
                     "rest): use fewer or smaller partitions",
                     device, p->ordinal, want, free_sms, t->sm_total, t->n_groups, t->granule, in_groups);
  if (!rc) {
    for (int i = 0; i < k; i++) t->holder[p->groups[i]] = 1;
    p->n_groups = k;
    *n_res = k;
  }
  pthread_mutex_unlock(&table_mu);
  return rc;
}

static void give_back(hs_cuda_part *p) {
  if (!p->n_groups || p->ordinal < 0 || p->ordinal >= HS_CUDA_PART_MAX_GPUS) return;
  pthread_mutex_lock(&table_mu);
  for (int i = 0; i < p->n_groups; i++) sm_tables[p->ordinal].holder[p->groups[i]] = 0;
  p->n_groups = 0;
  pthread_mutex_unlock(&table_mu);
}

int hs_cuda_part_open(hs_cuda_part *p, const hs_cudrv_api *drv, int ordinal, unsigned want, const char *device,
                      hs_diag *d) {
  memset(p, 0, sizeof *p);
  p->ordinal = ordinal;
  CUdevice dev;
  int rc = hs_cudrv_err(drv, drv->cuInit(0), "cuInit", d);
  if (!rc) rc = hs_cudrv_err(drv, drv->cuDeviceGet(&dev, ordinal), "cuDeviceGet", d);
  if (rc) return rc;
  CUdevResource res[HS_CUDA_PART_MAX_GROUPS];
  int n_res = 0;
  if ((rc = take(p, drv, dev, want, device, res, &n_res, d))) return rc;
  CUdevResourceDesc desc;
  rc = hs_cudrv_err(drv, drv->cuDevResourceGenerateDesc(&desc, res, (unsigned)n_res), "cuDevResourceGenerateDesc", d);
  if (!rc)
    rc = hs_cudrv_err(drv, drv->cuGreenCtxCreate(&p->green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM),
                      "cuGreenCtxCreate", d);
  CUdevResource granted;
  memset(&granted, 0, sizeof granted);
  if (!rc)
    rc = hs_cudrv_err(drv, drv->cuGreenCtxGetDevResource(p->green, &granted, CU_DEV_RESOURCE_TYPE_SM),
                      "cuGreenCtxGetDevResource", d);
  if (!rc) p->sm_count = (int)granted.sm.smCount;
  if (!rc) rc = hs_cudrv_err(drv, drv->cuCtxFromGreenCtx(&p->ctx, p->green), "cuCtxFromGreenCtx", d);
  /* The stream is made in the green context whatever the thread has current (cuda.h). */
  if (!rc)
    rc = hs_cudrv_err(drv, drv->cuGreenCtxStreamCreate(&p->stream, p->green, CU_STREAM_NON_BLOCKING, 0),
                      "cuGreenCtxStreamCreate", d);
  if (rc) hs_diag_prefix(d, "%s", device);
  return rc;
}

void hs_cuda_part_close(hs_cuda_part *p, const hs_cudrv_api *drv) {
  if (p->stream) (void)drv->cuStreamDestroy(p->stream);
  if (p->green) (void)drv->cuGreenCtxDestroy(p->green);
  p->stream = NULL;
  p->green = NULL;
  p->ctx = NULL;
  /* The SM groups go back only now that the green context using them is gone. */
  give_back(p);
}

#endif /* HETSIM_HAVE_CUDA */
