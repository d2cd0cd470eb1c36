/* sweep_rank: which share of a sweep this process takes when started by mpirun.
 *
 * Two builds of one interface. In `hetsim` (no MPI library, so that the binary runs where no
 * libmpi is installed) the rank and size come from the launcher's environment: Open MPI's
 * OMPI_COMM_WORLD_RANK/SIZE, or PMI_RANK/PMI_SIZE (MPICH, Hydra, Slurm's PMI); barriers and
 * sums are then local no-ops, which the sweep tolerates because every rank merges its own
 * shards. In `hetsim-mpi` (built when CMake finds MPI, compiled with HS_SWEEP_MPI) the values
 * come from MPI_COMM_WORLD, and barriers and sums are real, so that rank 0 can report totals.
 * Outside mpirun both give rank 0 of 1. */
#ifndef HS_SWEEP_RANK_H
#define HS_SWEEP_RANK_H

#include "core/core_error.h"

typedef struct hs_sweep_rank {
  int rank, size;
  int mpi;      /* 1 when MPI is initialised (hetsim-mpi under mpirun) */
  int launched; /* 1 when started by an MPI launcher */
  int owns;     /* 1 when this init called MPI_Init, so that its finalize calls MPI_Finalize */
  long parent;  /* the parent process (the launcher's) when peeked; 0 before */
} hs_sweep_rank;

/* Under a launcher, hetsim-mpi initialises MPI here unless it already is: a caller that runs
 * several sweeps (hetsim advise) inits first and finalizes last, and the sweeps' own inits and
 * finalizes then leave MPI as they found it (MPI cannot be initialised again once finalized).
 * argc and argv may be NULL. */
int hs_sweep_rank_init(hs_sweep_rank *r, int *argc, char ***argv, hs_diag *d);
void hs_sweep_rank_barrier(hs_sweep_rank *r);
/* The sum of v over the ranks (v itself without MPI). */
long hs_sweep_rank_sum(hs_sweep_rank *r, long v);
/* Ends the whole MPI job with code (a rank that stops early would leave the others waiting in
 * a barrier); without MPI it does nothing and the caller returns its status. */
void hs_sweep_rank_abort(hs_sweep_rank *r, int code);
void hs_sweep_rank_finalize(hs_sweep_rank *r);

/* The rank and size from the launcher's environment alone, without initialising MPI; r->mpi is
 * set when hs_sweep_rank_init would initialise it (hetsim-mpi under a launcher), so that a
 * caller knows whether the sweep's barrier is a real one. */
int hs_sweep_rank_peek(hs_sweep_rank *r, hs_diag *d);

/* A barrier over files, for `hetsim` (no MPI) under a launcher, where hs_sweep_rank_barrier
 * does nothing: every rank but 0 calls arrive with a count when its work is done, which writes
 * PREFIX.rank<R>.done holding the launcher's job id (PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid or
 * Slurm's job and step ids), so that a file left by an earlier job never counts, and the count;
 * rank 0 calls wait, which returns once every other rank's file holds this job's id, adds their
 * counts to *sum, and removes the files. Like MPI_Barrier it has no time limit: a rank killed
 * before it arrives is the launcher's to end (Open MPI's mpirun ends the whole job then); but
 * wait gives up with HS_ERUNTIME when this process's parent changes from r->parent or is
 * init (the launcher is gone, and a later job may have overwritten the files with its own id). Both
 * return HS_EINVAL without waiting or writing when the launcher gives no job id; the ranks must
 * share PREFIX's folder. */
int hs_sweep_rank_files_arrive(const hs_sweep_rank *r, const char *prefix, long count, hs_diag *d);
int hs_sweep_rank_files_wait(const hs_sweep_rank *r, const char *prefix, long *sum, hs_diag *d);

#endif
