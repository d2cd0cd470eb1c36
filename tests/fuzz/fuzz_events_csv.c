/* fuzz_events_csv: libFuzzer entry point for the CSV event-trace loader (core/core_config.c).
 *
 * The loader reads a path, so each input is written to a private temporary file and appended
 * to a small fixed cluster (3 workers, 2 device types, 2 nodes) with
 * hs_cluster_load_events_csv. A success must keep events sorted with indices in range; a
 * failure must leave the cluster's events as they were and a message. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char base_yaml[] =
    "name: fuzz\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  a: {memory: 8GiB, compute: {t0: 4ms, per_sample: 0.5ms}}\n"
    "  b: {memory: 2GiB, compute: {t0: 8ms, per_sample: 1ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 8GB/s, latency: 5us}, devices: [{type: a, count: 2}]}\n"
    "  - {name: n1, link: {bandwidth: 8GB/s, latency: 5us}, devices: [{type: b}]}\n"
    "events:\n"
    "  - {at: 1s, worker: 0, slowdown: 2.0}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/hs-fuzz-events-%ld.csv", (long)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  if (size && fwrite(data, 1, size, f) != size) {
    fclose(f);
    return 0;
  }
  fclose(f);
  hs_cluster_spec spec;
  hs_diag d = {0};
  if (hs_cluster_parse(&spec, "base.yaml", base_yaml, sizeof base_yaml - 1, &d)) __builtin_trap();
  int before = spec.n_events;
  int rc = hs_cluster_load_events_csv(&spec, path, &d);
  if (rc == 0) {
    for (int e = 0; e < spec.n_events; e++) {
      const hs_event_spec *ev = &spec.events[e];
      if (e > 0 && spec.events[e - 1].at > ev->at) __builtin_trap();
      if (ev->kind == HS_EVENT_JOIN &&
          (ev->type < 0 || ev->type >= spec.n_types || ev->node < 0 || ev->node >= spec.n_nodes))
        __builtin_trap();
    }
  } else if (d.msg[0] == '\0' || rc != d.code || spec.n_events != before) {
    __builtin_trap();
  }
  hs_cluster_spec_free(&spec);
  unlink(path);
  return 0;
}
