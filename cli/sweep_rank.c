#include "cli/sweep_rank.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

int hs_sweep_rank_peek(hs_sweep_rank *r, hs_diag *d) {
  memset(r, 0, sizeof *r);
  r->size = 1;
  int rc = from_env(r, d);
#ifdef HS_SWEEP_MPI
  r->mpi = r->launched;
#endif
  r->parent = (long)getppid();
  return rc;
}

int hs_sweep_rank_init(hs_sweep_rank *r, int *argc, char ***argv, hs_diag *d) {
  memset(r, 0, sizeof *r);
  r->size = 1;
  int rc = from_env(r, d);
  if (rc) return rc;
#ifdef HS_SWEEP_MPI
  if (r->launched) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      if (MPI_Init(argc, argv) != MPI_SUCCESS) return hs_diag_set(d, HS_ERUNTIME, "MPI_Init failed");
      r->owns = 1;
    }
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
  if (r->mpi && r->owns) MPI_Finalize();
#endif
  r->mpi = 0;
  r->owns = 0;
}

/* The launcher's id of this job, the same in every rank and different in the next job. */
static int job_id(char *buf, size_t len) {
  static const char *const vars[] = {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", NULL};
  for (int i = 0; vars[i]; i++) {
    const char *s = getenv(vars[i]);
    if (s && *s && strlen(s) < len) {
      snprintf(buf, len, "%s", s);
      return 0;
    }
  }
  const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
  if (!job || !*job || !step || !*step) return -1;
  int n = snprintf(buf, len, "slurm %s.%s", job, step);
  return n > 0 && (size_t)n < len ? 0 : -1;
}

static int no_job_id(hs_diag *d) {
  return hs_diag_set(d, HS_EINVAL,
                     "the MPI launcher gives no job id (PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, "
                     "SLURM_JOB_ID), so rank 0 cannot tell when the other ranks are done; run "
                     "hetsim-mpi instead");
}

int hs_sweep_rank_files_arrive(const hs_sweep_rank *r, const char *prefix, long count, hs_diag *d) {
  char id[256], path[4200], tmp[4300];
  if (job_id(id, sizeof id)) return no_job_id(d);
  snprintf(path, sizeof path, "%s.rank%d.done", prefix, r->rank);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  /* Written whole, then renamed: rank 0 never reads half an id. */
  FILE *f = fopen(tmp, "w");
  if (!f) return hs_diag_set(d, HS_EIO, "cannot write %s: %s", tmp, strerror(errno));
  int bad = fprintf(f, "%s\n%ld\n", id, count) < 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return hs_diag_set(d, HS_EIO, "cannot write %s: %s", path, strerror(e));
  }
  return 0;
}

/* 1 when path's first line is id; *count gets the number on its second line. */
static int holds(const char *path, const char *id, long *count) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[300] = "", num[64] = "";
  int ok = fgets(line, sizeof line, f) != NULL && fgets(num, sizeof num, f) != NULL;
  fclose(f);
  line[strcspn(line, "\n")] = '\0';
  char *end = NULL;
  *count = ok ? strtol(num, &end, 10) : 0;
  return ok && !strcmp(line, id) && end != num;
}

int hs_sweep_rank_files_wait(const hs_sweep_rank *r, const char *prefix, long *sum, hs_diag *d) {
  char id[256], path[4200];
  if (job_id(id, sizeof id)) return no_job_id(d);
  for (int k = 0; k < r->size; k++) {
    if (k == r->rank) continue;
    snprintf(path, sizeof path, "%s.rank%d.done", prefix, k);
    long count = 0;
    while (!holds(path, id, &count)) {
      long parent = (long)getppid();
      if (r->parent && (parent != r->parent || parent == 1))
        return hs_diag_set(d, HS_ERUNTIME, "the MPI launcher ended before rank %d was done", k);
      struct timespec ts = {0, 50 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    *sum += count;
  }
  for (int k = 0; k < r->size; k++) {
    if (k == r->rank) continue;
    snprintf(path, sizeof path, "%s.rank%d.done", prefix, k);
    unlink(path);
  }
  return 0;
}
