/* real_launch: how a real run is carried out, chosen in one place: which runtime (the worker
 * threads of one process, real_run.h, or one process per worker started by mpirun or torchrun,
 * real_rank.h) and which communication table (cpu, local or nccl, real_comm.h; under a
 * launcher the per-rank table of the cpu or nccl backend) — from the backend's name, the
 * device and how the process was started. `hetsim real` chooses (hs_real_plan_choose), sizes
 * once the workers are known (hs_real_plan_workers), and runs (hs_real_plan_run).
 *
 * Contract: every refusal happens before anything runs or is stored, as HS_EINVAL (or the
 * backend's code) with the whole message in d; nothing is allocated between the calls. The
 * local backend runs every worker in one process, so a launcher that started several
 * processes for it is refused. */
#ifndef HS_REAL_LAUNCH_H
#define HS_REAL_LAUNCH_H

#include "calib/cal_device.h"
#include "core/core_config.h"
#include "core/core_error.h"
#include "core/core_runopts.h"
#include "real/real_comm.h"
#include "real/real_run.h"

typedef struct hs_real_plan {
  const hs_real_comm_ops *comm; /* the table the run uses (per rank under a launcher) */
  hs_real_launch launch;        /* how this process was started */
  int multi;                    /* 1: one process per worker (real_rank.h); 0: threads */
  int server_rank;              /* multi only: rank 0 is the parameter server */
  char device[64];              /* the device string, "cuda:local" resolved to this rank's GPU */
  hs_cal_device dev;            /* the device parsed (hs_cal_device_discover fills the rest) */
} hs_real_plan;

/* Chooses the backend's table and the runtime from `backend` ("cpu", "local", "nccl"),
 * `device` ("cpu", "cuda:I", "cuda:I/sm=N", or "cuda:local" under a launcher) and
 * `server_rank` (1: one more process than workers, for the parameter server), checking that
 * they go together and with the launcher's environment. */
int hs_real_plan_choose(hs_real_plan *p, const char *backend, const char *device, int server_rank,
                        hs_diag *d);
/* Once the run's workers are known: under a launcher, checks the world size (the workers, plus
 * one with a server rank) and takes the backend's per-rank table; on threads, opens a GPU
 * backend once so that what this build or machine cannot do is said now. */
int hs_real_plan_workers(hs_real_plan *p, int n_workers, double timeout_s, hs_diag *d);
/* The device a local run's --device defaults to when the cluster file gives its workers GPU
 * devices (`real_device`): "cuda:I", the GPU of the first device type that names one, written
 * into buf; NULL when no type names a GPU. */
const char *hs_real_devices_gpu(const hs_cluster_spec *spec, char *buf, size_t len);
/* Per-worker devices from the cluster file's `real_device` keys (core_config.h), checked against
 * the chosen backend and device: the cpu backend takes only `cpu`; the nccl backend none (each
 * rank is on --device); the local backend only partitions or the whole of its own GPU (the one
 * --device names: its all-reduce runs on one GPU). Fills devs[i] (hs_cluster_all_workers
 * entries, joiners included, allocated by the caller) with worker i's device, NULL for a
 * worker on p->device, and sets *n_own to the workers with a device of their own. HS_EINVAL
 * with FILE:LINE:COL where a key is refused. Needs no GPU. */
int hs_real_plan_devices(const hs_real_plan *p, const hs_cluster_spec *spec, const char **devs,
                         int *n_own, hs_diag *d);
/* On the machine (after hs_cal_device_discover of p->dev): discovers the device of every type
 * that has a `real_device` and at least one worker, recording each (type, device, discovered
 * name: the name its `hetsim calib --device` calibration has) in ro->type_devices, and checks
 * that the partitions fit the GPU: a partition larger than the GPU, or workers' partitions that
 * need more SMs together than it has, are HS_EINVAL naming the file (granted partitions are
 * rounded up to the driver's groups, so a run that passes may still run out; the runtime says
 * so). */
int hs_real_plan_type_devices(const hs_real_plan *p, const hs_cluster_spec *spec,
                              hs_real_options *ro, hs_diag *d);
/* On threads with --device a partition (after hs_cal_device_discover of p->dev), where no
 * worker has a device of its own: the n_workers workers' partitions and the evaluation net's,
 * all of --device's size, must fit the GPU together, as hs_real_plan_type_devices checks for a
 * cluster file's devices; HS_EINVAL naming --device where they cannot. 0 for a whole GPU, the
 * cpu, or one process per worker (each its own process: partitions of different processes are
 * not exclusive). */
int hs_real_plan_partitions(const hs_real_plan *p, int n_workers, hs_diag *d);
/* The step model of each worker for `hetsim real --calib`: a worker whose device type runs on a
 * device of its own (ro->type_devices, from hs_real_plan_type_devices) gets that device's
 * calibration of `model` from store, the others NULL (the calibration of --device). models has
 * room for HS_REAL_MAX_TYPE_DEVICES; out (hs_cluster_all_workers entries) points into it. A device
 * with no calibration of the model is HS_ENOTFOUND naming the type, its device and what the
 * store has. */
int hs_real_plan_worker_perf(const hs_cluster_spec *spec, const hs_real_options *ro, hs_store *store,
                             const char *model, hs_perf_model *models, const hs_perf_model **out,
                             hs_diag *d);
/* Whether the run's worker threads will be pinned (hs_real_pins; for one process per worker,
 * whether the workers' ranks pin their executors, hs_real_rank_pins, as rank 0's launch shows it). */
int hs_real_plan_pinned(const hs_real_plan *p, hs_real_pin pin, int n_workers);
/* Whether the chosen runtime (threads or ranks) can run policy with params on cluster (NULL:
 * none), as far as that shows before the run (hs_runtime_check_caps, runtime/rt_core.h): 0, or
 * HS_EUNSUPPORTED with the message in d. What only the policy's calls show (a compressor on
 * the ranks, an overlapped all-reduce) is refused when asked, and the run then fails. */
int hs_real_plan_check(const hs_real_plan *p, const hs_policy *policy, const hs_params *params,
                       const hs_cluster_spec *cluster, hs_diag *d);
/* Runs cfg (its comm set to p->comm) on the chosen runtime: this process's rank under a
 * launcher, else the threads. */
int hs_real_plan_run(const hs_real_plan *p, const hs_real_config *cfg, hs_real_result *res,
                     hs_diag *d);

#endif
