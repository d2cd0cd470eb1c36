/* fuzz_cluster_yaml: libFuzzer entry point for the cluster file loader (core/core_config.c).
 *
 * Each input is parsed as a whole cluster file by hs_cluster_parse. A success must give a spec
 * whose indices are all in range (every worker and event names an existing type and node);
 * a failure must leave a message. tests/fuzz/run.sh builds it; tests/test_fuzz_regress.c runs
 * every file of tests/fuzz/regress/cluster_yaml/ through this function without libFuzzer. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/core_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hs_cluster_spec spec;
  hs_diag d = {0};
  int rc = hs_cluster_parse(&spec, "fuzz.yaml", (const char *)data, size, &d);
  if (rc == 0) {
    for (int w = 0; w < spec.n_workers; w++)
      if (spec.workers[w].type < 0 || spec.workers[w].type >= spec.n_types ||
          spec.workers[w].node < 0 || spec.workers[w].node >= spec.n_nodes)
        __builtin_trap();
    for (int e = 0; e < spec.n_events; e++) {
      const hs_event_spec *ev = &spec.events[e];
      if (ev->kind == HS_EVENT_JOIN &&
          (ev->type < 0 || ev->type >= spec.n_types || ev->node < 0 || ev->node >= spec.n_nodes))
        __builtin_trap();
      if (e > 0 && spec.events[e - 1].at > ev->at) __builtin_trap(); /* sorted by time */
    }
    if (strlen(spec.name) >= sizeof spec.name) __builtin_trap();
  } else if (d.msg[0] == '\0' || rc != d.code) {
    __builtin_trap(); /* every failure must leave a message */
  }
  hs_cluster_spec_free(&spec);
  return 0;
}
