/* real_launch: the choice of runtime and communication table for a real run (real_launch.h). */
#include "real/real_launch.h"

#include <errno.h>
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

int hs_real_plan_pinned(const hs_real_plan *p, hs_real_pin pin, int n_workers) {
  hs_real_config cfg = {.device = p->device, .pin = pin};
  hs_cpus cpus;
  return !p->multi && hs_real_pins(&cfg, n_workers, &cpus);
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
