/* real_nccl: the per-process nccl communication backend (real_nccl.c).
 *
 * hs_real_comm_nccl (real_comm.h, what `--backend nccl` finds) refuses to open: the threaded
 * runtime cannot drive one rank per process. This table is the backend itself, for the
 * multi-process runtime (real_rank.h) or a test that runs one process per rank, started by
 * mpirun or torchrun:
 * - open: cfg.world must equal the launch's world size; the rank is the launch's; cfg.device is
 *   this process's GPU ("cuda:I"). It bootstraps the control channel and the world communicator,
 *   bounded by cfg.timeout_s.
 * - every other call's `rank` must be this process's rank (HS_EINVAL otherwise).
 * - allreduce buffers are device memory; send/recv buffers are host memory. An allreduce buffer
 *   that is an open cuda net's parameters or gradient is read after the work the net has
 *   enqueued so far; any other device buffer must be completely written before the call (its
 *   writer's stream synchronised: a cudaMemcpy from pageable memory may return before its DMA
 *   has landed).
 * - a peer process that dies makes every wait fail within a poll interval of noticing it, with
 *   HS_ERUNTIME and a message naming the rank.
 * In builds without NCCL every call answers HS_EUNSUPPORTED. */
#ifndef HS_REAL_NCCL_H
#define HS_REAL_NCCL_H

#include "real/real_comm.h"

extern const hs_real_comm_ops hs_real_comm_nccl_rank;

/* Whether this process can run an nccl rank on `device` ("cuda:I"), before anything is
 * opened: HS_EINVAL for a malformed device or a bad device index (naming how many GPUs there
 * are), HS_EUNSUPPORTED for missing NCCL, CUDA or GPU, with a message. */
int hs_real_nccl_check(const char *device, hs_diag *d);

/* This process's rank in an open per-process nccl comm. */
int hs_real_nccl_rank(const hs_real_comm *c);

#endif
