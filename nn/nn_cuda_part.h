/* nn_cuda_part: partitions of a GPU's SMs for the cuda nets ("cuda:I/sm=N", nn_cuda.h): the
 * process-wide table of SM groups per GPU, and the green context and stream made on the groups a
 * net takes. It uses the driver table only (nn_cudalib.h), no cuDNN, so that a deviceless test
 * runs it against an emulated driver (tests/gpu_emu).
 *
 * Green contexts partition a GPU that every net of the process shares, so the partitions are
 * handed out from one table per GPU. The whole GPU's SMs are split once into groups of the
 * smallest size the driver allows (minSmPartitionSize, aligned to smCoscheduledAlignment: 8 SMs
 * on compute capability 9.0), and a partition of N SMs takes enough free groups to hold N; a
 * descriptor may combine several results of one split (cuDevResourceGenerateDesc), while a
 * result can never be split again (cuda.h). So partitions of different sizes never share an SM,
 * and a partition of N SMs is granted N rounded up to whole groups.
 *
 * Threading: the table is guarded by its own mutex; a partition is its owner's. Exists only in
 * builds with CUDA. */
#ifndef HS_NN_CUDA_PART_H
#define HS_NN_CUDA_PART_H

#include "core/core_buildinfo.h"
#include "core/core_error.h"

#if HETSIM_HAVE_CUDA

#include "nn/nn_cudalib.h"

/* GPUs and SM groups the table can hold. */
#define HS_CUDA_PART_MAX_GPUS 16
#define HS_CUDA_PART_MAX_GROUPS 128

typedef struct hs_cuda_part {
  int ordinal;       /* the GPU */
  CUgreenCtx green;  /* NULL until made */
  CUcontext ctx;     /* the green context as a context (cuCtxFromGreenCtx) */
  CUstream stream;   /* non-blocking, in the green context; a cudaStream_t too */
  int sm_count;      /* SMs granted: what was asked, rounded up to whole groups */
  int n_groups;      /* groups of the GPU's table held */
  int groups[HS_CUDA_PART_MAX_GROUPS];
} hs_cuda_part;

/* Takes free SM groups of GPU `ordinal` holding at least `want` SMs, which no other partition of
 * the process holds, and makes a green context on them and a stream in it; the calling thread's
 * current context is left as it was. `device` ("cuda:0/sm=16") names the partition in messages.
 * 0, or: HS_EINVAL (the GPU has fewer SMs than want), HS_ELIMIT (its free groups hold fewer:
 * other partitions hold the rest), HS_EUNSUPPORTED (ordinal past the table, or a GPU that cannot
 * be split), or the driver's failure. On failure p holds what was made so far, which
 * hs_cuda_part_close frees. */
int hs_cuda_part_open(hs_cuda_part *p, const hs_cudrv_api *drv, int ordinal, unsigned want, const char *device,
                      hs_diag *d);

/* Destroys the stream (first, as cuda.h asks) and the green context, then gives the groups back
 * to the table. Afterwards the calling thread must not keep the destroyed context current: the
 * caller makes another current (or NULL) itself. */
void hs_cuda_part_close(hs_cuda_part *p, const hs_cudrv_api *drv);

#endif /* HETSIM_HAVE_CUDA */

#endif
