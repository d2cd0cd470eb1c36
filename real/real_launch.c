/* real_launch: the choice of runtime and communication table for a real run (real_launch.h). */
#include "real/real_launch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "real/real_nccl.h"
#include "real/real_rank.h"
#include "real/real_rank_tcp.h"
#include "runtime/rt_core.h"

/* The local rank a launcher gives this process (mpirun's or torchrun's variable), for
 * --device cuda:local: 0 with *rank set, or -1 with the message. */
static int local_rank(int *rank, hs_diag *d) {
  const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!lr) lr = getenv("LOCAL_RANK");
  char *end = NULL;
  errno = 0;
  long long v = lr ? strtoll(lr, &end, 10) : -1;
  if (!lr || !*lr || *end || errno || v < 0 || v > 1023)
    return hs_diag_set(d, HS_EINVAL, "--device cuda:local needs a launcher that sets the local rank (LOCAL_RANK as "
                       "torchrun does, or OMPI_COMM_WORLD_LOCAL_RANK under mpirun)%s%s", lr ? "; got " : "",
                       lr ? lr : "");
  *rank = (int)v;
  return 0;
}

int hs_real_plan_choose(hs_real_plan *p, const char *backend, const char *device, int server_rank,
                        hs_diag *d) {
  int rc;
  memset(p, 0, sizeof *p);
  if (!(p->comm = hs_real_comm_find(backend, d))) return HS_EINVAL;
  /* --device cuda:local: under a launcher, every rank takes the GPU of its local rank. */
  if (!strcmp(device, "cuda:local")) {
    int r = 0;
    if ((rc = local_rank(&r, d))) return rc;
    snprintf(p->device, sizeof p->device, "cuda:%d", r);
  } else {
    snprintf(p->device, sizeof p->device, "%s", device);
  }
  if ((rc = hs_cal_device_parse(p->device, &p->dev, d))) {
    char msg[sizeof d->msg];
    snprintf(msg, sizeof msg, "%s", d->msg);
    return hs_diag_set(d, rc, "--device: %s", msg);
  }
  int cpu = !strcmp(p->comm->name, "cpu"), local = !strcmp(p->comm->name, "local");
  if (cpu && strcmp(p->dev.kind, "cpu"))
    return hs_diag_set(d, HS_EINVAL, "--device %s: the cpu backend runs its workers on --device cpu; "
                       "GPUs need --backend local or nccl", p->device);
  if (!cpu && strcmp(p->dev.kind, "cuda"))
    return hs_diag_set(d, HS_EINVAL, "--device %s: the %s backend needs a GPU device such as cuda:0", p->device,
                       p->comm->name);
  /* Under a launcher (mpirun, torchrun) the cpu and nccl backends run one process per worker
   * (real_rank.h); the local backend runs every worker in one process, so a launcher that
   * started several is a mistake worth stopping at once. */
  if ((rc = hs_real_launch_read(&p->launch, 0, d)) || (local && (rc = hs_real_launch_read(&p->launch, 1, d))))
    return rc;
  p->multi = strcmp(p->launch.source, "none") && !local;
  if (server_rank && !p->multi)
    return hs_diag_set(d, HS_EINVAL, "--server-rank is for multi-process runs (cpu or nccl backend under mpirun or "
                       "torchrun); the threaded runtime has its own server thread");
  p->server_rank = server_rank;
  return 0;
}

int hs_real_plan_workers(hs_real_plan *p, int n_workers, double timeout_s, hs_diag *d) {
  int rc;
  int nccl = !strcmp(p->comm->name, "nccl");
  if (p->multi) {
    /* One process per worker: the world size must match, and the backend's per-process table
     * replaces the registry's. */
    if ((rc = hs_real_launch_read(&p->launch, n_workers + p->server_rank, d)) ||
        (nccl && (rc = hs_real_nccl_check(p->device, d))))
      return rc;
    p->comm = nccl ? &hs_real_comm_nccl_rank : &hs_real_comm_tcp_rank;
  } else if (strcmp(p->comm->name, "cpu")) {
    /* Say plainly what this build or machine cannot do before anything is stored. */
    hs_real_comm *probe = NULL;
    hs_real_comm_config cc = {.world = 2, .n = 1, .timeout_s = timeout_s, .device = p->device};
    if ((rc = p->comm->open(&probe, &cc, d))) return rc;
    p->comm->close(probe);
  }
  return 0;
}

const char *hs_real_devices_gpu(const hs_cluster_spec *spec, char *buf, size_t len) {
  for (int t = 0; spec && t < spec->n_types; t++) {
    hs_cal_device dev;
    hs_diag ignore = {0};
    if (spec->types[t].real_device[0] && !hs_cal_device_parse(spec->types[t].real_device, &dev, &ignore) &&
        !strcmp(dev.kind, "cuda")) {
      snprintf(buf, len, "cuda:%d", dev.ordinal);
      return buf;
    }
  }
  return NULL;
}

/* FILE:LINE:COL: device_types.TYPE.real_device "DEV": WHY, as HS_EINVAL. */
static int type_device_fail(const hs_cluster_spec *spec, const hs_device_type *t, hs_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int type_device_fail(const hs_cluster_spec *spec, const hs_device_type *t, hs_diag *d, const char *fmt, ...) {
  char why[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return hs_diag_set(d, HS_EINVAL, "%s:%d:%d: device_types.%s.real_device \"%s\": %s", spec->path,
                     t->real_device_pos.line, t->real_device_pos.col, t->name, t->real_device, why);
}

int hs_real_plan_devices(const hs_real_plan *p, const hs_cluster_spec *spec, const char **devs,
                         int *n_own, hs_diag *d) {
  *n_own = 0;
  const char *backend = p->comm->name;
  for (int i = 0; i < spec->n_types; i++) {
    const hs_device_type *t = &spec->types[i];
    if (!t->real_device[0]) continue;
    hs_cal_device dev;
    int rc = hs_cal_device_parse(t->real_device, &dev, d);
    if (rc) return type_device_fail(spec, t, d, "expected cpu, cuda:I or cuda:I/sm=N");
    int gpu = !strcmp(dev.kind, "cuda");
    if (!strcmp(backend, "cpu") && gpu)
      return type_device_fail(spec, t, d, "the cpu backend runs every worker on the cpu; workers on a GPU "
                              "need --backend local");
    if (!strcmp(backend, "nccl"))
      return type_device_fail(spec, t, d, "the nccl backend puts each rank on --device (cuda:I or "
                              "cuda:local); per-worker devices are for --backend local");
    if (!strcmp(backend, "local") && !gpu)
      return type_device_fail(spec, t, d, "the local backend runs every worker on a GPU (cuda:I or "
                              "cuda:I/sm=N)");
    if (!strcmp(backend, "local") && dev.ordinal != p->dev.ordinal)
      return type_device_fail(spec, t, d, "the local backend runs every worker on one GPU, here cuda:%d (--device, "
                              "else the first GPU the file names), whose all-reduce and evaluation "
                              "cannot reach another GPU: workers on several GPUs are not supported",
                              p->dev.ordinal);
  }
  for (int w = 0; w < hs_cluster_all_workers(spec); w++) {
    const hs_device_type *t = &spec->types[hs_cluster_worker_type(spec, w, NULL)];
    devs[w] = t->real_device[0] ? t->real_device : NULL;
    if (devs[w]) (*n_own)++;
  }
  return 0;
}

/* Green contexts never share an SM (nn_cuda.h): partitions that need `sms` SMs together (each
 * rounded up to the driver's groups), more than the GPU's whole groups cover (else, unknown, than
 * it has), cannot all be granted. `where` names what asked for them. */
static int partitions_fit(const hs_real_plan *p, long long sms, const char *where, hs_diag *d) {
  int usable = p->dev.sm_grouped > 0 ? p->dev.sm_grouped : p->dev.sm_count;
  if (usable > 0 && sms > usable)
    return hs_diag_set(d, HS_EINVAL, "%s: the partitions of the workers%s need %lld SMs together (each "
                       "rounded up to the driver's groups), more than the %d %sof GPU %d", where,
                       p->dev.sm_partition ? " and of the evaluation net (--device)" : "", sms, usable,
                       p->dev.sm_grouped > 0 ? "in whole groups " : "", p->dev.ordinal);
  return 0;
}

int hs_real_plan_type_devices(const hs_real_plan *p, const hs_cluster_spec *spec,
                              hs_real_options *ro, hs_diag *d) {
  int rc;
  /* The SMs the partitions need together: the workers', and the evaluation net's on --device. */
  long long sms = p->dev.sm_partition;
  ro->n_type_devices = 0;
  for (int i = 0; i < spec->n_types; i++) {
    const hs_device_type *t = &spec->types[i];
    int workers = 0, all = hs_cluster_all_workers(spec);
    for (int w = 0; w < all; w++) workers += hs_cluster_worker_type(spec, w, NULL) == i;
    if (!workers) continue;
    hs_cal_device dev;
    if (!t->real_device[0]) {
      /* On --device: its partition, or the whole GPU. */
      sms += (long long)workers * p->dev.sm_partition;
      continue;
    }
    if ((rc = hs_cal_device_parse(t->real_device, &dev, d)) || (rc = hs_cal_device_discover(&dev, d))) {
      char why[sizeof d->msg];
      snprintf(why, sizeof why, "%s", d->msg);
      if (rc != HS_EINVAL) {
        /* No GPU, no driver: what the machine cannot do, not what the file says. */
        return hs_diag_set(d, rc, "%s:%d:%d: device_types.%s.real_device: %s", spec->path,
                           t->real_device_pos.line, t->real_device_pos.col, t->name, why);
      }
      return type_device_fail(spec, t, d, "%s", why);
    }
    sms += (long long)workers * dev.sm_partition;
    if (ro->n_type_devices >= HS_REAL_MAX_TYPE_DEVICES)
      return type_device_fail(spec, t, d, "more than %d device types with a real_device in one run",
                              HS_REAL_MAX_TYPE_DEVICES);
    hs_real_type_device *r = &ro->type_devices[ro->n_type_devices++];
    snprintf(r->type, sizeof r->type, "%s", t->name);
    snprintf(r->device, sizeof r->device, "%s", t->real_device);
    snprintf(r->device_name, sizeof r->device_name, "%s", dev.name);
  }
  return partitions_fit(p, sms, spec->path, d);
}

int hs_real_plan_partitions(const hs_real_plan *p, int n_workers, hs_diag *d) {
  if (p->multi || p->dev.sm_partition <= 0) return 0;
  char where[96];
  snprintf(where, sizeof where, "--device %s, %d workers", p->device, n_workers);
  return partitions_fit(p, (long long)(n_workers + 1) * p->dev.sm_partition, where, d);
}

int hs_real_plan_worker_perf(const hs_cluster_spec *spec, const hs_real_options *ro, hs_store *store,
                             const char *model, hs_perf_model *models, const hs_perf_model **out,
                             hs_diag *d) {
  for (int k = 0; k < ro->n_type_devices; k++) {
    const hs_real_type_device *t = &ro->type_devices[k];
    int rc = hs_perf_load(store, t->device_name, model, &models[k], NULL, d);
    if (rc) {
      char why[sizeof d->msg];
      snprintf(why, sizeof why, "%s", d->msg);
      return hs_diag_set(d, rc, "device type %s runs on %s (%s): %s", t->type, t->device, t->device_name, why);
    }
  }
  for (int w = 0; w < hs_cluster_all_workers(spec); w++) {
    const char *type = spec->types[hs_cluster_worker_type(spec, w, NULL)].name;
    out[w] = NULL;
    for (int k = 0; k < ro->n_type_devices; k++)
      if (!strcmp(ro->type_devices[k].type, type)) out[w] = &models[k];
  }
  return 0;
}

int hs_real_plan_pinned(const hs_real_plan *p, hs_real_pin pin, int n_workers) {
  hs_real_config cfg = {.device = p->device, .pin = pin};
  hs_cpus cpus;
  int k;
  return p->multi ? hs_real_rank_pins(&cfg, &p->launch, 0, &cpus, &k) : hs_real_pins(&cfg, n_workers, &cpus);
}

int hs_real_plan_run(const hs_real_plan *p, const hs_real_config *cfg, hs_real_result *res,
                     hs_diag *d) {
  hs_real_config c = *cfg;
  c.comm = p->comm;
  return p->multi ? hs_real_rank_run(&c, &p->launch, res, d) : hs_real_run(&c, res, d);
}

int hs_real_plan_check(const hs_real_plan *p, const hs_policy *policy, const hs_params *params,
                       const hs_cluster_spec *cluster, hs_diag *d) {
  return p->multi ? hs_runtime_check_caps(policy, params, cluster, HS_REAL_RANKS_CAPS, "multi-process real", d)
                  : hs_runtime_check_caps(policy, params, cluster, HS_REAL_THREADS_CAPS, "threaded real", d);
}
