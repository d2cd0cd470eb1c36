/* sweep_grid: the grid file of `hetsim sweep` (YAML), expanded into points.
 *
 * A grid is the Cartesian product clusters x run settings x policies (each with the Cartesian
 * product of its listed parameter values) x seeds. Run settings (model, global batch, stop
 * condition, ...) are the `hetsim sim` options they stand for; model, global_batch and
 * convergence may each be a list, and the grid then holds every combination of their values.
 * docs/cli.md describes the file. Points are numbered in that nesting order (cluster outermost,
 * then the settings' combinations, then policies, seed innermost).
 *
 * Each point has a key: the FNV-1a 64-bit hash, in 16 hex digits, of its canonical text (the
 * cluster's and event trace's contents, the policy with every parameter in canonical form,
 * defaults included, the seed and every run setting with the point's own value), so that the
 * same experiment has the same key whatever the file paths or the spelling of the policy, an
 * edited cluster is a new point, and a point of a list setting has the key it would have in a
 * grid that gives that one value.
 *
 * Contract: hs_sweep_grid_load checks everything it can without running (clusters load,
 * policies and their parameters parse, settings are known keys) and reports errors as
 * FILE:LINE:COL: FIELD: expected ..., got ... (HS_EINVAL). The grid owns every string; free it
 * with hs_sweep_grid_free. No database access. */
#ifndef HS_SWEEP_GRID_H
#define HS_SWEEP_GRID_H

#include <stdint.h>

#include "core/core_error.h"

enum { HS_SWEEP_SETTINGS_MAX = 16, HS_SWEEP_VALUES_MAX = 64 };

typedef struct hs_sweep_point {
  int index;            /* 0-based, in grid order */
  const char *cluster;  /* path of the cluster file (resolved against the grid's folder) */
  char *policy;         /* policy spec as given to hetsim sim, e.g. "ssp:s=2" */
  uint64_t seed;
  char key[17];         /* 16 hex digits */
  char *text;           /* the canonical text the key hashes */
  unsigned char vidx[HS_SWEEP_SETTINGS_MAX]; /* per setting: which of its values this point runs (0 for a scalar) */
  char *vary;           /* the values of the list settings, "global_batch=512 model=mlp"; "" when
                           none is a list */
} hs_sweep_point;

/* A run setting: a `hetsim sim` option and its value, or its list of values. */
typedef struct hs_sweep_setting {
  const char *option;   /* "--global-batch" (static) */
  char *value;          /* "256"; file settings resolved against the grid's folder; the first
                           value of a list */
  const char *key;      /* "global_batch" (static) */
  int n_values;         /* 1, or the length of a list */
  char **values;        /* all n_values values; values[0] is value */
} hs_sweep_setting;


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
 * command line of point p writing to db: "sim --cluster ... --db DB". A grid without a `calib`
 * setting gives the point `--calib CALIB` when calib is not NULL: the sweep's own --db, which
 * `hetsim sim --db DB` would read calibrations, imported models and convergence fits from,
 * while the point writes to its shard. The strings belong to g, p, db and calib. Returns argc. */
int hs_sweep_point_argv(const hs_sweep_grid *g, const hs_sweep_point *p, const char *db, const char *calib,
                        char *seedbuf, size_t seedlen, char **argv, int max);

#endif
