/* core_sweep: the store of `hetsim sweep` and `hetsim advise`: how a sweep finds finished
 * points, tags its runs and merges shards, and how its runs' results are read back.
 *
 * A sweep run is an ordinary run whose `options` JSON carries `sweep_point` (the point's key,
 * cli/sweep_grid.h) and `sweep` (the grid's name). A point is finished when the main database
 * or one of the sweep's shard databases holds a run with its key and status 'complete'.
 *
 * Merging copies every tagged run of a shard into the main database under a new id, with its
 * summary, worker, step and eval rows (run ids remapped), in one transaction per shard, and
 * skips a run when the main database already has a complete run with the same key (or this
 * very attempt: same key and started_at), so merging twice, or after a crash between the commit
 * and the removal of the shard, adds nothing. Column lists are read from the schema, so a
 * migration that adds columns needs no change here.
 *
 * Threading: one call at a time per hs_store. Errors go into hs_diag. */
#ifndef HS_CORE_SWEEP_H
#define HS_CORE_SWEEP_H

#include <stdint.h>

#include "core/core_error.h"
#include "core/core_store.h"

/* Sorted set of finished keys (16 hex digits each). */
typedef struct hs_sweep_keys {
  int n, cap;
  char (*k)[17];
} hs_sweep_keys;

/* Adds the keys of the complete tagged runs of the database at path (opened read-only, or to
 * write when it has a write-ahead log, which a killed writer leaves its commits in; a missing
 * file, and a file without a table — a shard whose sweep was killed while creating it — add
 * nothing). */
int hs_sweep_keys_load(hs_sweep_keys *ks, const char *path, hs_diag *d);
int hs_sweep_keys_has(const hs_sweep_keys *ks, const char *key);
void hs_sweep_keys_free(hs_sweep_keys *ks);

/* Tags the newest run of s (a shard only this process writes) with key and grid name, unless
 * it is tagged already. *run_id gets its id and status its status (status has room for 16
 * bytes), or 0 and "" when there was no untagged run. */
int hs_sweep_tag_last(hs_store *s, const char *key, const char *grid, int64_t *run_id,
                      char *status, hs_diag *d);

/* Merges the tagged runs of the shard at shard_path into s; counts go to merged and skipped.
 * A shard without a table merges nothing. The shard is not removed (see
 * hs_sweep_shard_remove). */
int hs_sweep_merge(hs_store *s, const char *shard_path, int *merged, int *skipped, hs_diag *d);
/* Removes a shard file and its -wal and -shm files. */
int hs_sweep_shard_remove(const char *path, hs_diag *d);

/* A run tagged with a sweep point, with its summary's figures (NaN when NULL or no summary). */
typedef struct hs_sweep_run {
  const char *key;           /* the point's key as stored (check its length) */
  int64_t id;
  int complete;              /* status 'complete' */
  const char *error;         /* the run's error; NULL when none */
  double time_to_target_s, final_loss, final_accuracy, samples_per_s, wait_fraction, sim_time_s;
} hs_sweep_run;
/* Calls fn for every run of s tagged with a sweep point (valid options JSON), by id; the
 * strings live until fn returns. A non-zero return of fn stops and is returned. */
int hs_sweep_runs_each(hs_store *s, int (*fn)(void *ctx, const hs_sweep_run *r), void *ctx,
                       hs_diag *d);

#endif
