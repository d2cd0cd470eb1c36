/* real_rank: the multi-process real runtime: one process per worker, started by mpirun or with
 * RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT as torchrun sets them (hs_real_launch_read).
 *
 * Rank 0 is the coordinator, a driver of the runtime core (runtime/rt_core.h) as the threaded
 * runtime (real_run.h) is: the core runs the policy, checks its calls, keeps the worker table
 * and the records, counts iterations, checks the stop conditions and calls the sinks (so rows
 * are written by rank 0 only); the coordinator turns the core's actions into commands to the
 * ranks and their reports into the core's, fires timers and cluster events from its heap, and
 * runs the evaluations. Two layouts, told
 * apart by the launcher's world size:
 * - world = workers: rank w executes worker w, rank 0 in a thread of its own: it holds the
 *   worker's net, its data shard and a replica of the global model, executes the actions the
 *   coordinator sends it in order (compute a step, apply a local update, take part in an
 *   all-reduce) and reports each one back (measured duration, loss);
 * - world = workers + 1: rank 0 is also the parameter server (a thread holding the global
 *   model, which applies or accumulates pushes, applies, and sends it on pulls, in the order the
 *   policy issued them, as real_run.c's server lane) and worker w is rank w + 1 (compute, local
 *   update, push, pull).
 *
 * Two channels:
 * - control: a TCP star on MASTER_PORT + 1 (real_rank_tcp.h); rank 0's executor (worker 0,
 *   or the server) talks to the coordinator over a socket pair with the same frames;
 * - data: the per-process comm table in cfg->comm (hs_real_comm_tcp_rank for the cpu backend,
 *   hs_real_comm_nccl_rank for nccl), which owns MASTER_PORT.
 *
 * Numerics: those of real_run.h. All-reduce GRAD: replica -= lr * sum_i w_i g_i; MODEL:
 * replica = sum_i w_i x_i; each participant then takes its replica. Because every all-reduce
 * covers every worker still in the run, worker 0 among them, their replicas are the global
 * model of the threaded runtime (a worker that left keeps the one it had). An iteration
 * is counted when the global model holds the update (the rule of runtime/rt_core.h): here,
 * when the last participant reports the all-reduce (the last replica has it), or when the
 * server reports an apply-mode push or an apply; evaluations read rank 0's
 * replica (worker 0's, or the server's global model) at that iteration.
 *
 * Compression (hs_comm_opts.compressor): the worker's rank sends its update, or its gradient
 * before an all-reduce, through the compressor as the threads' workers do (real_worker.h,
 * seeded by the run's seed and the worker's index, so that both runtimes send the same).
 *
 * Leave events: the core takes the worker out (rt_core.h); its rank idles to the end. Without a
 * server rank the policies' all-reduces then cover the workers left, worker 0 always among them.
 *
 * Join events: the launch has a rank for every worker the run will have (the cluster file's and
 * one per join, hs_cluster_all_workers; a joiner w reads shard w mod N of the N workers at the
 * start, as in the threads), and a joiner's rank waits, set up, from the start. At its event the worker enters the core with the next
 * number and takes rank 0's model: the server's, or without a server rank worker 0's replica,
 * which worker 0 sends after the commands it already has (C_GIVE). It joins the policy once it
 * holds it. Without a server rank the replicas must agree for an all-reduce of gradients to
 * leave them equal, so a participant whose replica missed all-reduces (a joiner whose
 * all-reduces went on while it took the model) takes worker 0's replica again after the
 * all-reduce it is in, as the threads' participants take the global model.
 *
 * Refused (HS_EUNSUPPORTED): overlapped and hierarchical all-reduces (HS_REAL_RANKS_CAPS, by the
 * core's checks), all-reduces without worker 0, a leave of worker 0 without a server rank
 * (hs_real_rank_check_events), all-reduces with a server rank ("not supported yet"), pushes,
 * pulls and applies without one (start one process more, with --server-rank).
 *
 * Faults and bounds: a rank whose control connection closes (its process died) ends the run on
 * rank 0 with HS_ERUNTIME naming the rank; so does a worker with actions outstanding that
 * reports nothing for cfg->timeout_s, and every comm wait is bounded by it too. Rank 0 then
 * tells the other ranks to stop; ranks whose rank 0 went away end with HS_ERUNTIME. A rank that
 * fails during start-up (or before it, hs_real_rank_report) sends rank 0 its error, and rank 0's
 * stop then also ends the ranks' waits in the comm's open (hs_real_comm_config.cancel).
 *
 * Predictions (the core's predict_compute): each worker's rank sends rank 0, with its READY, the
 * step model of its own cfg->perf (its --calib, for its own device) or, without one, the fit of
 * steps it timed before the run on its own device (all ranks at once); rank 0 predicts each
 * worker by its rank's.
 *
 * Contract: as hs_real_run on rank 0 (res filled, sinks called). On other ranks the sinks and
 * cfg->test are not used, res holds no workers, and the return value is 0 once rank 0 said
 * stop, or the rank's own error. Units: seconds, samples, floats. */
#ifndef HS_REAL_RANK_H
#define HS_REAL_RANK_H

#include "core/core_affinity.h"
#include "real/real_comm.h"
#include "real/real_run.h"

/* What a round costs beyond its operations, for a model of the run (`hetsim validate`): each
 * operation (a compute, an all-reduce, a push, a pull) starts with a command from the
 * coordinator to the rank (a control message, comm_sample op "wake" of backend tcp), which the
 * rank's reader hands to its executor (a thread hand-off, op "wake" of backend cpu), and ends
 * with its report back (a control message). A synchronous all-reduce round is two operations
 * one after the other on the critical path (compute, all-reduce); a parameter-server step is
 * three (compute, push, pull): one and a half per message. A server's own commands run beside
 * its workers' and are not counted, but an apply (ps-bsp's, between the pushes and the pulls;
 * ksync's, kasync's) is one operation of the server alone on the round's critical path: the
 * simulated server's apply_latency (core_config.h). */
#define HS_REAL_RANK_MESSAGES_PER_OP 2
#define HS_REAL_RANK_HANDOFFS_PER_OP 1
#define HS_REAL_RANK_OPS_PER_ALLREDUCE 2.0
#define HS_REAL_RANK_OPS_PER_MESSAGE 1.5

/* What the multi-process runtime can do (pol_policy.h's HS_CAP_*): compression, all-reduces over
 * a subset of the workers (with worker 0 among them) and leave events; the CLI
 * checks a run against it with hs_runtime_check_caps (runtime/rt_core.h) before storing. */
#define HS_REAL_RANKS_CAPS (HS_CAP_COMPRESSION | HS_CAP_SUBSET | HS_CAP_LEAVE | HS_CAP_JOIN)

/* The events of a multi-process run's cluster file that the capabilities do not cover: without
 * a server rank (server 0), worker 0 may not leave (its rank's replica is the model the run
 * evaluates, and the cpu backend reduces at rank 0). 0, or HS_EUNSUPPORTED with
 * "PATH:LINE:COL: ..." in d. hs_real_rank_run checks it; the CLI calls it before it stores. */
int hs_real_rank_check_events(const hs_cluster_spec *spec, int server, hs_diag *d);

int hs_real_rank_run(const hs_real_config *cfg, const hs_real_launch *launch, hs_real_result *res, hs_diag *d);

/* Pinning (cfg->pin HS_PIN_AUTO, the nets on the cpu): each worker's rank pins its executing
 * thread (the one that computes and communicates; not its reader, nor rank 0's coordinator) to
 * the local_rank-th CPU the process may use, where the launch says which ranks share this
 * machine (launch->local_rank, local_world: real_comm.h) and they are at least 2 with a CPU
 * each, as the threads pin their workers (real_run.h). A server rank's executor floats, as the
 * threads' server does. 1 with cpus (the CPUs allowed) and *k (the index into them), else 0.
 * Unpinned ranks sharing 2 CPUs started one rank's compute only after the other's in 15 of 60
 * rounds of cnn (docs/performance.md, "Pinned ranks"). */
int hs_real_rank_pins(const hs_real_config *cfg, const hs_real_launch *launch, int server, hs_cpus *cpus, int *k);

/* A rank other than 0 that fails before its run (its own device, calibration or data) tells
 * rank 0 why: it joins the control channel, as hs_real_rank_run would, and sends `msg` as its
 * start-up error, which rank 0 then fails the run with, and waits for rank 0's stop. Joining
 * is bounded by HS_REAL_RANK_REPORT_WAIT_S (or timeout_s where smaller; <= 0: 60 s), since rank
 * 0 may have failed alike and never listen, the stop by timeout_s. Returns 0, or -1 when rank 0
 * could not be told (rank 0's own timeout then ends the run, saying only who is missing). */
#define HS_REAL_RANK_REPORT_WAIT_S 10.0
int hs_real_rank_report(const hs_real_launch *launch, double timeout_s, int code, const char *msg);

#endif
