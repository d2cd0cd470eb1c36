/* sweep_grid: the grid file of `hetsim sweep` (YAML), expanded into points.
 *
 * A grid is the Cartesian product clusters x policies (each with the Cartesian product of its
 * listed parameter values) x seeds, run with one set of run settings (model, global batch, stop
 * condition, ...) given as the `hetsim sim` options they stand for. docs/cli.md describes the
 * file. Points are numbered in that nesting order (cluster outermost, seed innermost).
 *
 * Each point has a key: the FNV-1a 64-bit hash, in 16 hex digits, of its canonical text (the
 * cluster's and event trace's contents, the policy with every parameter in canonical form,
 * defaults included, the seed and every run setting), so that the same experiment has the same
 * key whatever the file paths or the spelling of the policy, and an edited cluster is a new
 * point.
 *
 * Contract: hs_sweep_grid_load checks everything it can without running (clusters load,
 * policies and their parameters parse, settings are known keys) and reports errors as
 * FILE:LINE:COL: FIELD: expected ..., got ... (HS_EINVAL). The grid owns every string; free it
 * with hs_sweep_grid_free. No database access. */
#ifndef HS_SWEEP_GRID_H
#define HS_SWEEP_GRID_H

#include <stdint.h>

#include "core/core_error.h"

typedef struct hs_sweep_point {
  int index;            /* 0-based, in grid order */
  const char *cluster;  /* path of the cluster file (resolved against the grid's folder) */
  char *policy;         /* policy spec as given to hetsim sim, e.g. "ssp:s=2" */
  uint64_t seed;
  char key[17];         /* 16 hex digits */
  char *text;           /* the canonical text the key hashes */
} hs_sweep_point;

/* A run setting: a `hetsim sim` option and its value. */
typedef struct hs_sweep_setting {
  const char *option;   /* "--global-batch" (static) */
  char *value;          /* "256"; file settings resolved against the grid's folder */
} hs_sweep_setting;

enum { HS_SWEEP_SETTINGS_MAX = 16 };

typedef struct hs_sweep_grid {
  char *name;           /* `name:` of the grid, or the file name */
  char *path;
  int n_clusters;
  char **clusters;      /* resolved paths */
  int n_settings;
  hs_sweep_setting settings[HS_SWEEP_SETTINGS_MAX];
  int n_points;
  hs_sweep_point *points;
} hs_sweep_grid;

int hs_sweep_grid_load(hs_sweep_grid *g, const char *path, hs_diag *d);
void hs_sweep_grid_free(hs_sweep_grid *g);

/* Fills argv (NULL-terminated, at most max entries with the NULL) with the `hetsim sim`
 * command line of point p writing to db: "sim --cluster ... --db DB". The strings belong to g,
 * p and db. Returns argc. */
int hs_sweep_point_argv(const hs_sweep_grid *g, const hs_sweep_point *p, const char *db,
                        char *seedbuf, size_t seedlen, char **argv, int max);

/* FNV-1a 64 of len bytes, continuing from h (start with HS_FNV64_INIT). */
#define HS_FNV64_INIT 0xcbf29ce484222325ULL
uint64_t hs_fnv64(uint64_t h, const void *data, size_t len);

#endif
