#include "cli/sweep_rank.h"

#include <stdlib.h>
#include <string.h>

#ifdef HS_SWEEP_MPI
#include <mpi.h>
#endif

static int env_int(const char *name, int *v) {
  const char *s = getenv(name);
  if (!s || !*s) return -1;
  char *end = NULL;
  long x = strtol(s, &end, 10);
  if (*end || x < 0 || x > 1 << 24) return -1;
  *v = (int)x;
  return 0;
}

static int from_env(hs_sweep_rank *r, hs_diag *d) {
  int rank, size;
  if ((!env_int("OMPI_COMM_WORLD_RANK", &rank) && !env_int("OMPI_COMM_WORLD_SIZE", &size)) ||
      (!env_int("PMI_RANK", &rank) && !env_int("PMI_SIZE", &size))) {
    if (size < 1 || rank >= size)
      return hs_diag_set(d, HS_EINVAL, "MPI launcher environment says rank %d of %d", rank, size);
    r->rank = rank;
    r->size = size;
    r->launched = 1;
  }
  return 0;
}

int hs_sweep_rank_init(hs_sweep_rank *r, int *argc, char ***argv, hs_diag *d) {
  memset(r, 0, sizeof *r);
  r->size = 1;
  int rc = from_env(r, d);
  if (rc) return rc;
#ifdef HS_SWEEP_MPI
  if (r->launched) {
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return hs_diag_set(d, HS_ERUNTIME, "MPI_Init failed");
    r->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->size);
  }
#else
  (void)argc;
  (void)argv;
#endif
  return 0;
}

void hs_sweep_rank_barrier(hs_sweep_rank *r) {
#ifdef HS_SWEEP_MPI
  if (r->mpi) MPI_Barrier(MPI_COMM_WORLD);
#else
  (void)r;
#endif
}

long hs_sweep_rank_sum(hs_sweep_rank *r, long v) {
#ifdef HS_SWEEP_MPI
  long s = v;
  if (r->mpi) MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return s;
#else
  (void)r;
  return v;
#endif
}

void hs_sweep_rank_abort(hs_sweep_rank *r, int code) {
#ifdef HS_SWEEP_MPI
  if (r->mpi) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)r;
  (void)code;
#endif
}

void hs_sweep_rank_finalize(hs_sweep_rank *r) {
#ifdef HS_SWEEP_MPI
  if (r->mpi) MPI_Finalize();
#endif
  r->mpi = 0;
}
