/* The run's model, its profiles and its convergence fit, as `hetsim sim` and `hetsim advise`
 * resolve them (cli.h): one code path, so that advise checks up front exactly what each of its
 * simulations will use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/cal_import.h"
#include "calib/cal_store.h"
#include "cli/cli.h"
#include "core/core_buildinfo.h"
#include "core/core_config.h"
#include "core/core_store.h"
#include "nn/nn_zoo.h"
#include "sim/sim_conv_fit.h"

int hs_cli_import_profiles(const char *cmd, const char *model, hs_cluster_spec *spec, hs_store **ps,
                           unsigned char *from_profile) {
  hs_cal_import_info *info = NULL;
  hs_diag d = {0};
  int status = 0;
  for (int t = 0; t < spec->n_types && !status; t++) {
    hs_compute_spec *cs = hs_cluster_compute_pick(&spec->types[t], model);
    if (cs->kind != HS_COMPUTE_PROFILE) continue;
    char path[4096], where[1024];
    snprintf(where, sizeof where, "%s:%d:%d: device_types.%s.compute%s%s.profile", spec->path,
             cs->pos.line, cs->pos.col, spec->types[t].name, cs->model[0] ? "." : "", cs->model);
    if (hs_cli_profile_path(spec->path, cs->profile, path, sizeof path)) {
      const char *dir = getenv("HETSIM_PROFILES");
      fprintf(stderr, "hetsim %s: %s: no profile \"%s\" (not %s, nor in the bundled profiles %s)\n", cmd,
              where, cs->profile, path, dir && *dir ? dir : HETSIM_PROFILES_DIR);
      status = 2;
      break;
    }
    if (!info && !(info = calloc(1, sizeof *info))) {
      fprintf(stderr, "hetsim %s: out of memory\n", cmd);
      status = 1;
      break;
    }
    int rc = *ps ? 0 : hs_store_open(ps, ":memory:", 0, &d);
    if (!rc) rc = hs_cal_import_file(*ps, path, info, &d);
    if (rc) {
      fprintf(stderr, "hetsim %s: %s: %s\n", cmd, where, d.msg);
      status = rc == HS_EINVAL || rc == HS_EIO ? 2 : 1;
    } else if (strcmp(info->model, model) != 0) {
      fprintf(stderr, "hetsim %s: %s: the profile %s measures model %s, not %s (give per-model "
              "compute: {%s: {profile: ...}, %s: {...}})\n", cmd, where, path, info->model, model,
              info->model, model);
      status = 2;
    } else {
      cs->kind = HS_COMPUTE_CALIB;
      snprintf(cs->calib, sizeof cs->calib, "%s", info->device);
      snprintf(cs->model, sizeof cs->model, "%s", info->model);
      from_profile[t] = 1;
    }
  }
  free(info);
  return status;
}

int hs_cli_resolve_model(const char *cmd, const char *model, const char *calib_path, hs_store *prof_store,
                         const char *conv, const hs_model_info **mi, hs_model_stats *ms, int *from_calib) {
  hs_diag d = {0};
  if (from_calib) *from_calib = 0;
  if ((*mi = hs_zoo_find(model))) {
    if (!hs_zoo_stats(model, ms, &d)) return 0;
    fprintf(stderr, "hetsim %s: %s\n", cmd, d.msg);
    return 1;
  }
  char zoo[256], held[512] = "";
  hs_zoo_names(zoo, sizeof zoo);
  hs_store *cs = NULL;
  hs_cal_model_row row;
  /* A profile that the cluster file names brings its model with it. */
  int rc = prof_store ? hs_cal_load_model(prof_store, model, &row, &d) : HS_ENOTFOUND;
  if (rc == HS_ENOTFOUND) {
    rc = access(calib_path, F_OK) ? HS_ENOTFOUND
                                  : hs_store_open(&cs, calib_path, HS_STORE_READONLY | HS_STORE_EMPTY_OK, &d);
    if (rc == HS_ENOTFOUND) snprintf(held, sizeof held, "no such database");
    /* An SQLite file without tables (a calibration killed while creating it) holds no model. */
    if (!rc && hs_store_schema_version(cs) == 0) {
      rc = HS_ENOTFOUND;
      snprintf(held, sizeof held, "none (the database is empty)");
    }
    if (!rc) {
      rc = hs_cal_load_model(cs, model, &row, &d);
      if (rc == HS_ENOTFOUND) hs_cal_imported_models(cs, held, sizeof held);
      else if (!rc && from_calib) *from_calib = 1;
    }
    hs_store_close(cs);
  }
  if (rc == HS_ENOTFOUND || (!rc && !row.source[0])) {
    fprintf(stderr, "hetsim %s: --model: unknown model \"%s\"; valid: %s (the zoo), and the models imported into %s: %s\n",
            cmd, model, zoo, calib_path, held[0] ? held : "none (`hetsim calib import` brings them)");
    return 2;
  }
  if (rc) {
    fprintf(stderr, "hetsim %s: --calib %s: %s\n", cmd, calib_path, d.msg);
    return 1;
  }
  /* An imported model has timings but no data set: the proxy cannot train it, and the analytic
   * model's progress is counted in the samples per epoch of the curves its parameters were
   * fitted to (`hetsim fit-convergence --curves`), checked once they are read. */
  if (conv && strncmp(conv, "analytic", 8) != 0) {
    fprintf(stderr, "hetsim %s: --convergence: %s is an imported model (`hetsim models --db %s`): it has timings but "
            "no data set to train on; use --convergence analytic with parameters fitted to its own curves "
            "(`hetsim fit-convergence --curves`), or a model of the zoo (%s)\n", cmd, model, calib_path, zoo);
    return 2;
  }
  *ms = (hs_model_stats){.params = row.params, .grad_bytes = row.grad_bytes, .flops_per_sample = NAN,
                         .train_flops_per_sample = row.flops_per_sample};
  return 0;
}

int hs_cli_conv_analytic(const char *spec) {
  return !strncmp(spec, "analytic", 8) && (!spec[8] || spec[8] == ':');
}

int hs_cli_find_conv_fit(const char *cmd, const char *model, const char *calib, const char *db,
                         int64_t dataset_size, hs_conv_fit *fit) {
  const char *paths[2] = {calib, db};
  for (int i = 0; i < 2; i++) {
    hs_store *s = NULL;
    hs_diag d = {0};
    if (!paths[i] || (i == 1 && calib && db && !strcmp(calib, db))) continue;
    if (access(paths[i], F_OK)) continue;
    /* A database without tables holds no fit: a --db that this run is about to create, or
     * whose creation a killed run left (a sweep's shard). */
    int rc = hs_store_open(&s, paths[i], HS_STORE_READONLY | HS_STORE_EMPTY_OK, &d);
    if (rc) {
      /* There, but not a database this build can read: said, not passed over. */
      fprintf(stderr, "hetsim %s: %s %s: %s\n", cmd, i == 0 ? "--calib" : "--db", paths[i], d.msg);
      return hs_exit_code(rc) == 2 ? -2 : -1;
    }
    rc = hs_conv_fit_newest(s, model, dataset_size, fit, &d);
    hs_store_close(s);
    if (!rc) return 1;
    if (rc != HS_ENOTFOUND) {
      fprintf(stderr, "hetsim %s: %s: %s\n", cmd, paths[i], d.msg);
      return -1;
    }
  }
  return 0;
}
