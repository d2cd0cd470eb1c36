/* test_util.h: helpers shared by test programs, on top of hs_test.h (include that first).
 * Header-only, like hs_test.h: each test program is one translation unit. */
#ifndef HS_TEST_UTIL_H
#define HS_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_config.h"
#include "policies/pol_registry.h"
#include "sim/sim_run.h"

/* Simulates resnet18 (global batch 96, seed 1) on traces/ashl-3worker.yaml of the source tree
 * under the policy SPEC, until max_iterations updates or max_sim_time seconds (0: no limit of
 * that kind). Returns 0 with the result in *res, which the caller frees with
 * hs_sim_result_free; or -1 with the failure recorded and nothing to free. */
static inline int hs_test_sim_3worker(const char *spec, int64_t max_iterations, double max_sim_time,
                                      hs_sim_result *res) {
  memset(res, 0, sizeof *res);
  const char *src = getenv("HETSIM_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/traces/ashl-3worker.yaml", src ? src : ".");
  hs_cluster_spec cluster;
  hs_diag d;
  if (hs_cluster_load(&cluster, path, &d)) {
    HS_FAIL_AT("%s", d.msg);
    return -1;
  }
  const hs_policy *pol;
  hs_params params;
  int rc = hs_policy_parse(spec, &pol, &params, &d);
  if (!rc) {
    hs_sim_config cfg = {.cluster = &cluster, .model = "resnet18", .grad_bytes = 44695848.0,
                         .param_bytes = 44695848.0, .dataset_size = 50000, .global_batch = 96,
                         .policy = pol, .params = &params, .seed = 1,
                         .max_iterations = max_iterations, .max_sim_time = max_sim_time};
    rc = hs_sim_run(&cfg, res, &d);
  }
  if (rc) {
    HS_FAIL_AT("%s: %s", spec, d.msg);
    hs_sim_result_free(res);
  }
  hs_cluster_spec_free(&cluster);
  return rc ? -1 : 0;
}

#endif
