/* The cluster writer (core_config_write.h): write -> parse gives the same spec, field by field
 * and bit for bit, for every bundled cluster file, a file with every kind of field, and the
 * cluster `hetsim validate` writes, whose text must stay exactly what validate always stored
 * (it is hashed into the validation key). */
#include <stdlib.h>
#include <string.h>

#include "core/core_config.h"
#include "core/core_config_write.h"
#include "core/core_error.h"
#include "tests/hs_test.h"

/* Same bits (NaN equal to NaN). */
#define ASSERT_SAME(a, b) ASSERT(memcmp(&(double){a}, &(double){b}, sizeof(double)) == 0)

static void same_link(const hs_link_spec *a, const hs_link_spec *b) {
  ASSERT_SAME(a->bandwidth, b->bandwidth);
  ASSERT_SAME(a->latency, b->latency);
}

static void same_form(const hs_compute_spec *a, const hs_compute_spec *b) {
  ASSERT_EQ(a->kind, b->kind);
  ASSERT_SAME(a->t0, b->t0);
  ASSERT_SAME(a->per_sample, b->per_sample);
  ASSERT_SAME(a->flops, b->flops);
  ASSERT_SAME(a->efficiency, b->efficiency);
  ASSERT_STR(a->calib, b->calib);
  ASSERT_STR(a->profile, b->profile);
  ASSERT_STR(a->model, b->model);
}

/* Everything but source positions, the path and the text. */
static void same_spec(const hs_cluster_spec *a, const hs_cluster_spec *b) {
  ASSERT_STR(a->name, b->name);
  same_link(&a->network, &b->network);
  ASSERT_STR(a->network_calib.name, b->network_calib.name);
  ASSERT_STR(a->network_calib.backend, b->network_calib.backend);
  ASSERT_EQ(a->ps.present, b->ps.present);
  same_link(&a->ps.link, &b->ps.link);
  ASSERT_SAME(a->ps.update_time, b->ps.update_time);
  ASSERT_SAME(a->ps.accumulate_time, b->ps.accumulate_time);
  ASSERT_SAME(a->ps.apply_latency, b->ps.apply_latency);
  ASSERT_EQ(a->ps.pull, b->ps.pull);
  ASSERT_SAME(a->jitter_cv, b->jitter_cv);
  ASSERT_STR(a->jitter_calib.name, b->jitter_calib.name);
  ASSERT_EQ(a->n_types, b->n_types);
  for (int t = 0; t < a->n_types && t < b->n_types; t++) {
    const hs_device_type *x = &a->types[t], *y = &b->types[t];
    ASSERT_STR(x->name, y->name);
    ASSERT_SAME(x->memory, y->memory);
    ASSERT_EQ(x->max_batch, y->max_batch);
    ASSERT_STR(x->real_device, y->real_device);
    same_form(&x->compute, &y->compute);
    ASSERT_EQ(x->n_per_model, y->n_per_model);
    for (int m = 0; m < x->n_per_model && m < y->n_per_model; m++) same_form(&x->per_model[m], &y->per_model[m]);
  }
  ASSERT_EQ(a->n_nodes, b->n_nodes);
  for (int i = 0; i < a->n_nodes && i < b->n_nodes; i++) {
    ASSERT_STR(a->nodes[i].name, b->nodes[i].name);
    same_link(&a->nodes[i].link, &b->nodes[i].link);
    ASSERT_STR(a->nodes[i].link_calib.name, b->nodes[i].link_calib.name);
    ASSERT_STR(a->nodes[i].link_calib.backend, b->nodes[i].link_calib.backend);
    ASSERT_EQ(a->nodes[i].compute_slots, b->nodes[i].compute_slots);
  }
  ASSERT_EQ(a->n_workers, b->n_workers);
  for (int w = 0; w < a->n_workers && w < b->n_workers; w++) {
    ASSERT_EQ(a->workers[w].type, b->workers[w].type);
    ASSERT_EQ(a->workers[w].node, b->workers[w].node);
    ASSERT_SAME(a->workers[w].slowdown, b->workers[w].slowdown);
    ASSERT_SAME(a->workers[w].comm_slowdown, b->workers[w].comm_slowdown);
  }
  ASSERT_EQ(a->n_events, b->n_events);
  for (int e = 0; e < a->n_events && e < b->n_events; e++) {
    const hs_event_spec *x = &a->events[e], *y = &b->events[e];
    ASSERT_SAME(x->at, y->at);
    ASSERT_EQ(x->kind, y->kind);
    ASSERT_EQ(x->worker, y->worker);
    ASSERT_SAME(x->slowdown, y->slowdown);
    ASSERT_SAME(x->comm_slowdown, y->comm_slowdown);
    ASSERT_EQ(x->type, y->type);
    ASSERT_EQ(x->node, y->node);
  }
}

/* spec -> text -> spec2: the same spec; and text -> spec2 -> text again: the same text. */
static void round_trip(const hs_cluster_spec *spec, const char *what) {
  char *text = NULL, *again = NULL;
  hs_diag d;
  hs_diag_clear(&d);
  if (hs_cluster_write_yaml(spec, &text, NULL, &d)) {
    HS_FAIL_AT("%s: writing: %s", what, d.msg);
    return;
  }
  hs_cluster_spec back;
  if (hs_cluster_parse(&back, "written", text, strlen(text), &d)) {
    HS_FAIL_AT("%s: the written text does not parse: %s\n%s", what, d.msg, text);
    free(text);
    return;
  }
  same_spec(spec, &back);
  if (hs_cluster_write_yaml(&back, &again, NULL, &d)) HS_FAIL_AT("%s: writing again: %s", what, d.msg);
  else ASSERT_STR(again, text);
  free(again);
  free(text);
  hs_cluster_spec_free(&back);
}

static void test_bundled_files(void) {
  static const char *const files[] = {"lbb-4gpu", "lbb-4gpu-measured", "ashl-3worker", "hetero-16gpu",
                                      "hetero-1024gpu", "gavel-mixed", "sailor-opt350m"};
  const char *src = getenv("HETSIM_SOURCE_DIR");
  if (!src) src = ".";
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/%s.yaml", src, files[i]);
    hs_cluster_spec s;
    hs_diag d;
    hs_diag_clear(&d);
    if (hs_cluster_load(&s, path, &d)) {
      HS_FAIL_AT("%s: %s", path, d.msg);
      continue;
    }
    if (i == 0) {
      char csv[1024];
      snprintf(csv, sizeof csv, "%s/traces/lbb-4gpu-events.csv", src);
      if (hs_cluster_load_events_csv(&s, csv, &d)) HS_FAIL_AT("%s: %s", csv, d.msg);
    }
    round_trip(&s, path);
    hs_cluster_spec_free(&s);
  }
}

/* Every kind of field: a parameter server, calibrated links and jitter, per-model forms with
 * and without a default, profiles, rooflines, real devices, odd names, uneven numbers and every
 * kind of event. */
static const char every_field[] =
    "name: \"mixed: lab\"\n"
    "network: {bandwidth: 12.5Gbps, latency: 0.1ms}\n"
    "parameter_server: {bandwidth: 3GB/s, latency: 7us, update_time: 1.5ms, accumulate_time: 0.25ms, apply_latency: 40us, pull: after_updates}\n"
    "device_types:\n"
    "  a100: {memory: 80GB, max_batch: 1024, real_device: \"cuda:0/sm=16\", compute: {resnet18: {t0: 1.1ms, per_sample: 0.013ms}, default: {flops: 312TFLOPS, efficiency: 0.37, t0: 2ms}}}\n"
    "  \"GTX 750\": {memory: 2GiB, compute: {calib: \"GeForce GTX 750\"}}\n"
    "  cpu: {compute: {t0: 0.3333333333333333, per_sample: 1e-7, model: mlp}}\n"
    "  prof: {compute: {mlp: {profile: \"profiles/my prof.json\"}, cnn: {t0: 0s, per_sample: 1s}}}\n"
    "nodes:\n"
    "  - name: n0\n"
    "    link: {calib: \"cpu shm\"}\n"
    "    devices: [{type: a100, count: 2}, {type: \"GTX 750\", slowdown: 2.5, comm_slowdown: 3}, {type: a100}]\n"
    "  - name: \"true\"\n"
    "    link: {bandwidth: 1234567B/s, latency: 0s}\n"
    "    compute_slots: 2\n"
    "    devices: [{type: cpu, count: 3}, {type: prof}]\n"
    "  - name: n2\n"
    "    link: {calib: \"cpu shm\", backend: tcp}\n"
    "    devices: [{type: cpu, count: 3}, {type: prof}]\n"
    "jitter: {calib: \"GeForce GTX 750\"}\n"
    "events:\n"
    "  - {at: 0.25s, worker: 1, slowdown: 1.75}\n"
    "  - {at: 2min, worker: 2, comm_slowdown: 0.5}\n"
    "  - {at: 3h, join: {type: cpu, node: \"true\"}}\n"
    "  - {at: 3h, leave: 0}\n";

static void test_every_field(void) {
  hs_cluster_spec s;
  hs_diag d;
  hs_diag_clear(&d);
  if (hs_cluster_parse(&s, "every.yaml", every_field, strlen(every_field), &d)) {
    HS_FAIL_AT("%s", d.msg);
    return;
  }
  round_trip(&s, "every field");
  /* Plain jitter and uneven numbers that no unit writes shorter than base units. */
  s.jitter_calib.name[0] = '\0';
  s.jitter_cv = 0.1 + 0.2;
  s.network.latency = 1.0 / 3.0;
  s.types[0].memory = 12345.5;
  round_trip(&s, "every field, changed");
  hs_cluster_spec_free(&s);
}

/* The cluster `hetsim validate` writes for a run on threads (N workers on one host): exactly
 * the text validate stored before the writer existed, so earlier validations are reused. */
static void test_validate_threads_text(void) {
  static const int counts[] = {1, 2, 4, 64};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    int n = counts[k];
    char want[1024];
    snprintf(want, sizeof want,
             "name: cpu-threads\nnetwork: {bandwidth: 1GB/s, latency: 1us}\ndevice_types:\n"
             "  cpu: {compute: {t0: 1ms, per_sample: 1ms}}\nnodes:\n  - name: host\n"
             "    link: {bandwidth: 1GB/s, latency: 1us}\n    devices: [{type: cpu, count: %d}]\n",
             n);
    hs_link_spec link = {.bandwidth = 1e9, .latency = 1e-6};
    hs_device_type cpu = {.name = "cpu", .compute = {.kind = HS_COMPUTE_INLINE, .t0 = 1e-3, .per_sample = 1e-3}};
    hs_node_spec host = {.name = "host", .link = link};
    hs_worker_spec ws[64];
    for (int w = 0; w < n; w++) ws[w] = (hs_worker_spec){.type = 0, .node = 0, .slowdown = 1, .comm_slowdown = 1};
    hs_cluster_spec s = {.name = "cpu-threads", .network = link, .n_types = 1, .types = &cpu,
                         .n_nodes = 1, .nodes = &host, .n_workers = n, .workers = ws};
    char *text = NULL;
    hs_diag d;
    hs_diag_clear(&d);
    size_t len = 0;
    if (hs_cluster_write_yaml(&s, &text, &len, &d)) {
      HS_FAIL_AT("%s", d.msg);
      continue;
    }
    ASSERT_STR(text, want);
    ASSERT_EQ(len, strlen(want));
    round_trip(&s, "threads");
    free(text);
  }
}

/* Workers out of file order cannot be written. */
static void test_refuses_unordered_workers(void) {
  hs_device_type t = {.name = "t", .compute = {.kind = HS_COMPUTE_INLINE, .t0 = 1, .per_sample = 1}};
  hs_node_spec nodes[2] = {{.name = "a", .link = {1e9, 0}}, {.name = "b", .link = {1e9, 0}}};
  hs_worker_spec ws[2] = {{.type = 0, .node = 1, .slowdown = 1, .comm_slowdown = 1},
                          {.type = 0, .node = 0, .slowdown = 1, .comm_slowdown = 1}};
  hs_cluster_spec s = {.name = "x", .network = {1e9, 0}, .n_types = 1, .types = &t, .n_nodes = 2,
                       .nodes = nodes, .n_workers = 2, .workers = ws};
  char *text = NULL;
  hs_diag d;
  hs_diag_clear(&d);
  ASSERT_EQ(hs_cluster_write_yaml(&s, &text, NULL, &d), HS_EINVAL);
  ASSERT(text == NULL);
  ASSERT_CONTAINS(d.msg, "node by node");
}

static const hs_test_case cases[] = {
    {"bundled_files", test_bundled_files},
    {"every_field", test_every_field},
    {"validate_threads_text", test_validate_threads_text},
    {"refuses_unordered_workers", test_refuses_unordered_workers},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("config_write", cases, argc, argv); }
