/* Cluster file and CSV trace loading: a full valid file checked value by value, the worker
 * expansion, every bundled file, and one bad input per kind of field with its message. */
#include "core/core_config.h"
#include "core/core_error.h"
#include "tests/hs_test.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char full_yaml[] =
    "name: lbb-4gpu\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "parameter_server: {bandwidth: 1.25GB/s, update_time: 2ms}\n"
    "device_types:\n"
    "  gtx1070: {memory: 8GiB, max_batch: 512, compute: {t0: 4ms, per_sample: 0.55ms}}\n"
    "  gtx750:  {memory: 2GiB, compute: {calib: \"GeForce GTX 750\"}}\n"
    "nodes:\n"
    "  - name: server0\n"
    "    link: {bandwidth: 8GB/s, latency: 5us}\n"
    "    devices: [{type: gtx1070, count: 2}, {type: gtx750, slowdown: 2.0, comm_slowdown: 4}]\n"
    "  - devices:\n"
    "      - {type: gtx750, count: 3}\n"
    "jitter: {cv: 0.1}\n"
    "events:\n"
    "  - {at: 300s, worker: 3, comm_slowdown: 1.0}\n"
    "  - {at: 120s, worker: 3, slowdown: 2.0}\n"
    "  - {at: 400s, join: {type: gtx1070, node: server0}}\n"
    "  - {at: 500s, leave: 2}\n"
    "  - {at: 120s, worker: 5, slowdown: 1.5, comm_slowdown: 2}\n"
    "  - {at: 450s, worker: 6, slowdown: 3}\n";

static int parse(hs_cluster_spec *s, const char *text, hs_diag *d) {
  hs_diag_clear(d);
  return hs_cluster_parse(s, "c.yaml", text, strlen(text), d);
}

static void test_full_file(void) {
  hs_cluster_spec s;
  hs_diag d;
  int rc = parse(&s, full_yaml, &d);
  ASSERT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", d.msg);
    return;
  }
  ASSERT_STR(s.name, "lbb-4gpu");
  ASSERT_STR(s.path, "c.yaml");
  ASSERT_STR(s.text, full_yaml);
  ASSERT_REL(s.network.bandwidth, 10e9 / 8, 1e-12);
  ASSERT_REL(s.network.latency, 20e-6, 1e-12);
  ASSERT_EQ(s.ps.present, 1);
  ASSERT_REL(s.ps.link.bandwidth, 1.25e9, 1e-12);
  ASSERT_REL(s.ps.link.latency, 20e-6, 1e-12); /* defaults to the network's */
  ASSERT_REL(s.ps.update_time, 2e-3, 1e-12);
  ASSERT_REL(s.jitter_cv, 0.1, 1e-12);

  ASSERT_EQ(s.n_types, 2);
  ASSERT_STR(s.types[0].name, "gtx1070");
  ASSERT_REL(s.types[0].memory, 8 * GIB, 1e-12);
  ASSERT_EQ(s.types[0].max_batch, 512);
  ASSERT_EQ(s.types[0].compute.kind, HS_COMPUTE_INLINE);
  ASSERT_REL(s.types[0].compute.t0, 4e-3, 1e-12);
  ASSERT_REL(s.types[0].compute.per_sample, 0.55e-3, 1e-12);
  ASSERT_EQ(s.types[0].pos.line, 5);
  ASSERT_EQ(s.types[0].pos.col, 3);
  ASSERT_STR(s.types[1].name, "gtx750");
  ASSERT_REL(s.types[1].memory, 2 * GIB, 1e-12);
  ASSERT_EQ(s.types[1].max_batch, 0);
  ASSERT_EQ(s.types[1].compute.kind, HS_COMPUTE_CALIB);
  ASSERT_STR(s.types[1].compute.calib, "GeForce GTX 750");
  ASSERT_EQ(hs_cluster_find_type(&s, "gtx750"), 1);
  ASSERT_EQ(hs_cluster_find_type(&s, "gtx980"), -1);

  ASSERT_EQ(s.n_nodes, 2);
  ASSERT_STR(s.nodes[0].name, "server0");
  ASSERT_REL(s.nodes[0].link.bandwidth, 8e9, 1e-12);
  ASSERT_REL(s.nodes[0].link.latency, 5e-6, 1e-12);
  ASSERT_EQ(s.nodes[0].pos.line, 8);
  ASSERT_EQ(s.nodes[0].pos.col, 5);
  ASSERT_STR(s.nodes[1].name, "node1");
  ASSERT_REL(s.nodes[1].link.bandwidth, 16e9, 1e-12); /* default */
  ASSERT_REL(s.nodes[1].link.latency, 5e-6, 1e-12);
  ASSERT_EQ(hs_cluster_find_node(&s, "node1"), 1);
  ASSERT_EQ(hs_cluster_find_node(&s, "nodeX"), -1);

  /* Node order, then group order, count copies. */
  static const int want_type[] = {0, 0, 1, 1, 1, 1};
  static const int want_node[] = {0, 0, 0, 1, 1, 1};
  ASSERT_EQ(s.n_workers, 6);
  for (int i = 0; i < 6 && i < s.n_workers; i++) {
    ASSERT_EQ(s.workers[i].type, want_type[i]);
    ASSERT_EQ(s.workers[i].node, want_node[i]);
    ASSERT_REL(s.workers[i].slowdown, i == 2 ? 2.0 : 1.0, 1e-15);
    ASSERT_REL(s.workers[i].comm_slowdown, i == 2 ? 4.0 : 1.0, 1e-15);
  }

  /* Sorted by time, stable: the two 120s events keep their file order. */
  ASSERT_EQ(s.n_events, 6);
  if (s.n_events == 6) {
    const hs_event_spec *e = s.events;
    ASSERT_REL(e[0].at, 120, 1e-12);
    ASSERT_EQ(e[0].kind, HS_EVENT_SLOWDOWN);
    ASSERT_EQ(e[0].worker, 3);
    ASSERT_REL(e[0].slowdown, 2.0, 1e-15);
    ASSERT(e[0].comm_slowdown < 0);
    ASSERT_EQ(e[0].pos.line, 16);
    ASSERT_EQ(e[1].worker, 5);
    ASSERT_REL(e[1].at, 120, 1e-12);
    ASSERT_REL(e[1].slowdown, 1.5, 1e-15);
    ASSERT_REL(e[1].comm_slowdown, 2, 1e-15);
    ASSERT_REL(e[2].at, 300, 1e-12);
    ASSERT_EQ(e[2].worker, 3);
    ASSERT(e[2].slowdown < 0);
    ASSERT_REL(e[2].comm_slowdown, 1.0, 1e-15);
    ASSERT_REL(e[3].at, 400, 1e-12);
    ASSERT_EQ(e[3].kind, HS_EVENT_JOIN);
    ASSERT_EQ(e[3].worker, -1);
    ASSERT_EQ(e[3].type, 0);
    ASSERT_EQ(e[3].node, 0);
    ASSERT_REL(e[4].at, 450, 1e-12);
    ASSERT_EQ(e[4].worker, 6); /* the worker that joined at 400s */
    ASSERT_EQ(e[5].kind, HS_EVENT_LEAVE);
    ASSERT_EQ(e[5].worker, 2);
    ASSERT_REL(e[5].at, 500, 1e-12);
  }
  /* Every worker the run has: six in the file, then the join's, numbered 6, of its type and
   * node (as the runtimes number joiners). */
  ASSERT_EQ(hs_cluster_all_workers(&s), 7);
  int node = -1;
  ASSERT_EQ(hs_cluster_worker_type(&s, 2, &node), 1);
  ASSERT_EQ(node, 0);
  ASSERT_EQ(hs_cluster_worker_type(&s, 5, &node), 1);
  ASSERT_EQ(node, 1);
  ASSERT_EQ(hs_cluster_worker_type(&s, 6, &node), 0);
  ASSERT_EQ(node, 0);
  ASSERT_EQ(hs_cluster_worker_type(&s, 0, NULL), 0);
  ASSERT_EQ(hs_cluster_worker_type(&s, 7, &node), -1);
  ASSERT_EQ(hs_cluster_worker_type(&s, -1, &node), -1);
  hs_cluster_spec_free(&s);
  ASSERT(s.types == NULL && s.text == NULL && s.n_workers == 0);
  hs_cluster_spec_free(&s); /* twice is harmless */
}

static void test_defaults(void) {
  hs_cluster_spec s;
  hs_diag d;
  int rc = parse(&s,
                 "name: one\n"
                 "device_types: {g: {compute: {t0: 0, per_sample: 1e-3}}}\n"
                 "nodes: [{devices: [{type: g}]}]\n",
                 &d);
  ASSERT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", d.msg);
    return;
  }
  ASSERT_REL(s.network.bandwidth, 10e9 / 8, 1e-12);
  ASSERT_REL(s.network.latency, 20e-6, 1e-12);
  ASSERT_EQ(s.ps.present, 0);
  ASSERT_EQ(s.jitter_cv, 0);
  ASSERT_EQ(s.n_events, 0);
  ASSERT(s.events == NULL);
  ASSERT_EQ(s.n_workers, 1);
  ASSERT_STR(s.nodes[0].name, "node0");
  ASSERT_EQ(s.types[0].memory, 0);
  ASSERT_REL(s.types[0].compute.per_sample, 1e-3, 1e-12);
  hs_cluster_spec_free(&s);
}

static void test_ps_defaults_to_network(void) {
  hs_cluster_spec s;
  hs_diag d;
  int rc = parse(&s,
                 "name: ps\n"
                 "network: {bandwidth: 25Gbps, latency: 7us}\n"
                 "parameter_server: {}\n"
                 "device_types: {g: {compute: {t0: 1ms, per_sample: 1ms}}}\n"
                 "nodes: [{devices: [{type: g}]}, {devices: [{type: g}]}]\n",
                 &d);
  ASSERT_EQ(rc, 0);
  if (rc) return;
  ASSERT_EQ(s.ps.present, 1);
  ASSERT_REL(s.ps.link.bandwidth, 25e9 / 8, 1e-12);
  ASSERT_REL(s.ps.link.latency, 7e-6, 1e-12);
  ASSERT_EQ(s.ps.update_time, 0);
  ASSERT_EQ(s.ps.pull, HS_PS_PULL_AT_ONCE);
  hs_cluster_spec_free(&s);
  rc = parse(&s,
             "name: ps\n"
             "network: {bandwidth: 25Gbps, latency: 7us}\n"
             "parameter_server: {pull: after_updates}\n"
             "device_types: {g: {compute: {t0: 1ms, per_sample: 1ms}}}\n"
             "nodes: [{devices: [{type: g}]}, {devices: [{type: g}]}]\n",
             &d);
  ASSERT_EQ(rc, 0);
  if (rc) return;
  ASSERT_EQ(s.ps.pull, HS_PS_PULL_AFTER_UPDATES);
  hs_cluster_spec_free(&s);
}

/* A node's compute_slots: at most that many of its workers compute at once; absent, 0. */
static void test_compute_slots(void) {
  hs_cluster_spec s;
  hs_diag d;
  int rc = parse(&s,
                 "name: shared\n"
                 "network: {bandwidth: 10Gbps, latency: 20us}\n"
                 "device_types: {c: {compute: {t0: 1ms, per_sample: 0.1ms}}}\n"
                 "nodes:\n"
                 "  - {name: a, compute_slots: 2, devices: [{type: c, count: 3}]}\n"
                 "  - {name: b, devices: [{type: c}]}\n",
                 &d);
  ASSERT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", d.msg);
    return;
  }
  ASSERT_EQ(s.nodes[0].compute_slots, 2);
  ASSERT_EQ(s.nodes[1].compute_slots, 0);
  hs_cluster_spec_free(&s);
}

static void test_large_count(void) {
  hs_cluster_spec s;
  hs_diag d;
  int rc = parse(&s,
                 "name: big\n"
                 "network: {bandwidth: 100Gbps, latency: 5us}\n"
                 "device_types: {a: {compute: {t0: 1ms, per_sample: 1ms}},"
                 " b: {compute: {t0: 1ms, per_sample: 2ms}}}\n"
                 "nodes:\n"
                 "  - devices: [{type: a, count: 100000}]\n"
                 "  - devices: [{type: b, count: 50000}, {type: a}]\n"
                 "events: [{at: 1s, worker: 150000, slowdown: 2}]\n",
                 &d);
  ASSERT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", d.msg);
    return;
  }
  ASSERT_EQ(s.n_workers, 150001);
  ASSERT_EQ(s.workers[99999].type, 0);
  ASSERT_EQ(s.workers[99999].node, 0);
  ASSERT_EQ(s.workers[100000].type, 1);
  ASSERT_EQ(s.workers[100000].node, 1);
  ASSERT_EQ(s.workers[150000].type, 0);
  ASSERT_EQ(s.workers[150000].node, 1);
  hs_cluster_spec_free(&s);
}

/* ---------- bad inputs: one per kind of field ---------- */

typedef struct bad_case {
  const char *yaml;
  const char *want[4]; /* substrings of the message, NULL-terminated */
} bad_case;

#define T "device_types: {g: {compute: {t0: 1ms, per_sample: 1ms}}}\n"
#define N "nodes: [{devices: [{type: g}]}]\n"

static const bad_case bad_cases[] = {
    /* top level */
    {"- a\n- b\n", {"c.yaml:1:1: (top level): expected a mapping", "got a sequence"}},
    {"hello\n", {"c.yaml:1:1: (top level): expected a mapping", "got \"hello\""}},
    {"name: c\ncolour: red\n" T N, {"c.yaml:2:1: colour: expected one of: name, network,", "got \"colour\""}},
    {"name: c\nname: d\n" T N, {"c.yaml:2:1: name: expected each key once", "got \"name\""}},
    {"name: c\n" T N "jitter: {cv: 0, cv: 1}\n", {"c.yaml:4:17: jitter.cv: expected each key once", "got \"cv\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, type: g}]}]\n", {"c.yaml:3:30: nodes[0].devices[0].type: expected each key once"}},
    {"? [a]\n: b\n", {"c.yaml:1:3: (top level): expected a key, one of: name", "got a sequence"}},
    /* name */
    {T N, {"c.yaml:1:1: name: expected a cluster name (required), got nothing"}},
    {"name: [a]\n" T N, {"c.yaml:1:7: name: expected a non-empty string", "got a sequence"}},
    {"name:\n" T N, {"c.yaml:1:6: name: expected a non-empty string", "got an empty value"}},
    {"name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n" T N,
     {"c.yaml:1:7: name: expected a non-empty string of at most 63 characters", "got \"aaaa"}},
    /* network */
    {"name: c\nnetwork: fast\n" T N, {"c.yaml:2:10: network: expected a mapping", "got \"fast\""}},
    {"name: c\nnetwork: {bandwidth: fast}\n" T N,
     {"c.yaml:2:22: network.bandwidth: expected a bandwidth of at least 1 B/s, like \"10Gbps\" or \"1.25GB/s\", got \"fast\""}},
    {"name: c\nnetwork: {bandwidth: 0Gbps}\n" T N, {"c.yaml:2:22: network.bandwidth: expected a bandwidth", "got \"0Gbps\""}},
    {"name: c\nnetwork: {latency: -3us}\n" T N, {"c.yaml:2:20: network.latency: expected a time of at most 1e9 s, like", "got \"-3us\""}},
    {"name: c\nnetwork: {bandwidth: 1Gbps, latncy: 3us}\n" T N,
     {"c.yaml:2:29: network.latncy: expected one of: bandwidth, latency, calib, backend, got \"latncy\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g}]}, {devices: [{type: g}]}]\n",
     {"c.yaml:1:1: network: expected a mapping {bandwidth, latency} (required with more than one node), got nothing"}},
    /* parameter_server */
    {"name: c\nparameter_server: [1]\n" T N, {"c.yaml:2:19: parameter_server: expected a mapping", "got a sequence"}},
    {"name: c\nparameter_server: {update_time: soon}\n" T N,
     {"c.yaml:2:33: parameter_server.update_time: expected a time", "got \"soon\""}},
    {"name: c\nparameter_server: {pull: later}\n" T N,
     {"c.yaml:2:26: parameter_server.pull: expected at_once or after_updates", "got \"later\""}},
    {"name: c\nparameter_server: {bandwidth: 1e999Gbps}\n" T N,
     {"c.yaml:2:31: parameter_server.bandwidth: expected a bandwidth", "got \"1e999Gbps\""}},
    {"name: c\nparameter_server: {latency: 1 day}\n" T N,
     {"c.yaml:2:29: parameter_server.latency: expected a time", "got \"1 day\""}},
    {"name: c\nparameter_server: {host: x}\n" T N,
     {"c.yaml:2:20: parameter_server.host: expected one of: bandwidth, latency, update_time", "got \"host\""}},
    /* device_types */
    {"name: c\n" N, {"c.yaml:1:1: device_types: expected a mapping from device type names", "(required), got nothing"}},
    {"name: c\ndevice_types: [g]\n" N, {"c.yaml:2:15: device_types: expected a mapping", "got a sequence"}},
    {"name: c\ndevice_types: {}\n" N, {"c.yaml:2:15: device_types: expected at least one device type, got nothing"}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms}}\n  g: {compute: {t0: 1ms, per_sample: 1ms}}\n" N,
     {"c.yaml:4:3: device_types.g: expected each device type name once, got \"g\" again (first at line 3)"}},
    {"name: c\ndevice_types:\n  g: 5\n" N, {"c.yaml:3:6: device_types.g: expected a mapping", "got \"5\""}},
    {"name: c\ndevice_types:\n  g: {memroy: 8GiB, compute: {t0: 1ms, per_sample: 1ms}}\n" N,
     {"c.yaml:3:7: device_types.g.memroy: expected one of: memory, max_batch, compute, real_device, got \"memroy\""}},
    /* real_device: a device string of `hetsim real` */
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms}, real_device: gpu0}\n" N,
     {"c.yaml:3:57: device_types.g.real_device: expected a device for `hetsim real`: cpu, cuda:I or cuda:I/sm=N", "got \"gpu0\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms}, real_device: \"cuda:0/sm=0\"}\n" N,
     {"c.yaml:3:57: device_types.g.real_device: expected a device", "got \"cuda:0/sm=0\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms}, real_device: \"cuda:0/sm=16x\"}\n" N,
     {"c.yaml:3:57: device_types.g.real_device: expected a device", "got \"cuda:0/sm=16x\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms}, real_device: \"cuda:/sm=8\"}\n" N,
     {"c.yaml:3:57: device_types.g.real_device: expected a device", "got \"cuda:/sm=8\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms}, real_device: \"cuda:local\"}\n" N,
     {"c.yaml:3:57: device_types.g.real_device: expected a device", "got \"cuda:local\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms}, real_device: \"\"}\n" N,
     {"c.yaml:3:57: device_types.g.real_device: expected a device", "got an empty value"}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms}, real_device: [cuda:0]}\n" N,
     {"c.yaml:3:57: device_types.g.real_device: expected a device", "got a sequence"}},
    {"name: c\ndevice_types:\n  g: {memory: 8 gigs, compute: {t0: 1ms, per_sample: 1ms}}\n" N,
     {"c.yaml:3:15: device_types.g.memory: expected a size like \"8GiB\" or \"512MB\", got \"8 gigs\""}},
    {"name: c\ndevice_types:\n  g: {max_batch: -4, compute: {t0: 1ms, per_sample: 1ms}}\n" N,
     {"c.yaml:3:18: device_types.g.max_batch: expected an integer from 0 to", "got \"-4\""}},
    {"name: c\ndevice_types:\n  g: {max_batch: 12.5, compute: {t0: 1ms, per_sample: 1ms}}\n" N,
     {"c.yaml:3:18: device_types.g.max_batch: expected an integer", "got \"12.5\""}},
    {"name: c\ndevice_types:\n  g: {memory: 1GiB}\n" N,
     {"c.yaml:3:6: device_types.g.compute: expected a mapping {t0, per_sample}, {calib}, {profile}, {flops, efficiency, t0} or a mapping from model names (and default) to these (required), got nothing"}},
    {"name: c\ndevice_types:\n  g: {compute: fast}\n" N, {"c.yaml:3:16: device_types.g.compute: expected a mapping", "got \"fast\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms, calib: x}}\n" N,
     {"c.yaml:3:16: device_types.g.compute: expected one of {t0, per_sample} (an inline model), {calib}", "not several, got both \"calib\" and \"per_sample\""}},
    {"name: c\ndevice_types:\n  g: {compute: {}}\n" N,
     {"c.yaml:3:16: device_types.g.compute: expected one of {t0, per_sample} (an inline model), {calib}", "got neither"}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms}}\n" N,
     {"c.yaml:3:16: device_types.g.compute.per_sample: expected a time > 0", "(required with t0), got nothing"}},
    {"name: c\ndevice_types:\n  g: {compute: {per_sample: 1ms}}\n" N,
     {"c.yaml:3:16: device_types.g.compute.t0: expected a time", "(required with per_sample), got nothing"}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1parsec, per_sample: 1ms}}\n" N,
     {"c.yaml:3:21: device_types.g.compute.t0: expected a time like \"20us\" or \"4ms\", got \"1parsec\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 0ms}}\n" N,
     {"c.yaml:3:38: device_types.g.compute.per_sample: expected a time > 0", "got \"0ms\""}},
    {"name: c\ndevice_types:\n  g: {compute: {calib: \"\"}}\n" N,
     {"c.yaml:3:24: device_types.g.compute.calib: expected a non-empty string", "got an empty value"}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms, flops: 3}}\n" N,
     {"c.yaml:3:16: device_types.g.compute: expected one of", "got both \"flops\" and \"per_sample\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms, speed: 3}}\n" N,
     {"c.yaml:3:43: device_types.g.compute.speed: expected one of: t0, per_sample, model, calib, profile, flops, efficiency, got \"speed\""}},
    /* compute: the roofline, the profile, the model it was measured for, per-model mappings */
    {"name: c\ndevice_types:\n  g: {compute: {flops: 15.7TFLOPS, t0: 1ms}}\n" N,
     {"c.yaml:3:16: device_types.g.compute.efficiency: expected the share of the peak", "(required with flops), got nothing"}},
    {"name: c\ndevice_types:\n  g: {compute: {flops: 15.7 teraflops, efficiency: 0.5}}\n" N,
     {"c.yaml:3:24: device_types.g.compute.flops: expected a compute rate > 0 like \"15.7TFLOPS\"", "got \"15.7 teraflops\""}},
    {"name: c\ndevice_types:\n  g: {compute: {flops: 0TFLOPS, efficiency: 0.5}}\n" N,
     {"device_types.g.compute.flops: expected a compute rate > 0", "got \"0TFLOPS\""}},
    {"name: c\ndevice_types:\n  g: {compute: {flops: 1TFLOPS, efficiency: 1.5}}\n" N,
     {"c.yaml:3:45: device_types.g.compute.efficiency: expected a number in (0, 1], got \"1.5\""}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, efficiency: 0.5}}\n" N,
     {"c.yaml:3:38: device_types.g.compute.efficiency: expected no efficiency without flops"}},
    {"name: c\ndevice_types:\n  g: {compute: {calib: x, model: mlp}}\n" N,
     {"c.yaml:3:34: device_types.g.compute: expected {calib} alone", "got \"calib\" with other keys"}},
    {"name: c\ndevice_types:\n  g: {compute: {profile: \"\"}}\n" N,
     {"c.yaml:3:26: device_types.g.compute.profile: expected a non-empty string"}},
    {"name: c\ndevice_types:\n  g: {compute: {t0: 1ms, per_sample: 1ms, model: [a]}}\n" N,
     {"c.yaml:3:50: device_types.g.compute.model: expected a non-empty string", "got a sequence"}},
    {"name: c\ndevice_types:\n  g: {compute: {mlp: {t0: 1ms, per_sample: 1ms}, cnn: 5}}\n" N,
     {"c.yaml:3:55: device_types.g.compute.cnn: expected a mapping {t0, per_sample}", "got \"5\""}},
    {"name: c\ndevice_types:\n  g: {compute: {mlp: {t0: 1ms, per_sample: 1ms}, mlp: {calib: x}}}\n" N,
     {"c.yaml:3:50: device_types.g.compute.mlp: expected each model once in a mapping"}},
    {"name: c\ndevice_types:\n  g: {compute: {mlp: {t0: 1ms, per_sample: 1ms, model: cnn}}}\n" N,
     {"device_types.g.compute.mlp.model: expected the model of its key (\"mlp\") or nothing", "got \"cnn\""}},
    {"name: c\ndevice_types:\n  g: {compute: {mlp: {t0: 1ms}}}\n" N,
     {"c.yaml:3:22: device_types.g.compute.mlp.per_sample: expected a time > 0"}},
    {"name: c\nnetwork: {calib: gloo-host, latency: 3us}\n" T N,
     {"c.yaml:2:10: network: expected either {bandwidth, latency} or {calib}", "not both"}},
    {"name: c\nnetwork: {calib: gloo-host, backend: udp}\n" T N,
     {"c.yaml:2:38: network.backend: expected one of cpu, tcp, local, nccl, gloo", "got \"udp\""}},
    {"name: c\nnetwork: {bandwidth: 1GB/s, latency: 3us, backend: tcp}\n" T N,
     {"c.yaml:2:52: network.backend: expected backend only with {calib: NAME}", "a backend without calib"}},
    {"name: c\ndevice_types:\n  [a]: {compute: {t0: 1ms, per_sample: 1ms}}\n" N,
     {"c.yaml:3:3: device_types (a type name): expected a non-empty string", "got a sequence"}},
    /* nodes */
    {"name: c\n" T, {"c.yaml:1:1: nodes: expected a sequence of nodes (required), got nothing"}},
    {"name: c\n" T "nodes: {a: 1}\n", {"c.yaml:3:8: nodes: expected a sequence of nodes", "got a mapping"}},
    {"name: c\n" T "nodes: []\n", {"c.yaml:3:8: nodes: expected at least one node, got nothing"}},
    {"name: c\n" T "nodes: [{}]\n", {"c.yaml:3:8: nodes: expected at least one device in some node's devices, got nothing"}},
    {"name: c\n" T "nodes: [5]\n", {"c.yaml:3:9: nodes[0]: expected a mapping with keys name, link, compute_slots, devices, got \"5\""}},
    {"name: c\n" T "nodes: [{gpus: [{type: g}]}]\n", {"c.yaml:3:10: nodes[0].gpus: expected one of: name, link, compute_slots, devices, got \"gpus\""}},
    {"name: c\nnetwork: {}\n" T "nodes:\n  - {devices: [{type: g}]}\n  - {name: n, link: {bandwidth: fast}}\n",
     {"c.yaml:6:33: nodes[1].link.bandwidth: expected a bandwidth of at least 1 B/s, like \"10Gbps\" or \"1.25GB/s\", got \"fast\""}},
    {"name: c\nnetwork: {}\n" T "nodes:\n  - {devices: [{type: g}]}\n  - {link: {latency: 1 ms ago}}\n",
     {"c.yaml:6:22: nodes[1].link.latency: expected a time", "got \"1 ms ago\""}},
    {"name: c\nnetwork: {}\n" T "nodes:\n  - {devices: [{type: g}]}\n  - {link: 10Gbps}\n",
     {"c.yaml:6:12: nodes[1].link: expected a mapping with keys bandwidth, latency (or calib), got \"10Gbps\""}},
    {"name: c\nnetwork: {}\n" T "nodes:\n  - {name: a, devices: [{type: g}]}\n  - {name: a}\n",
     {"c.yaml:6:5: nodes[1].name: expected a node name used once, got \"a\" again (nodes[0] has it)"}},
    {"name: c\nnetwork: {}\n" T "nodes:\n  - {name: node1, devices: [{type: g}]}\n  - {}\n",
     {"nodes[1].name: expected a node name used once, got \"node1\" again"}},
    {"name: c\n" T "nodes: [{name: {a: 1}, devices: [{type: g}]}]\n",
     {"c.yaml:3:16: nodes[0].name: expected a non-empty string", "got a mapping"}},
    {"name: c\n" T "nodes: [{devices: {type: g}}]\n",
     {"c.yaml:3:19: nodes[0].devices: expected a sequence of device groups", "got a mapping"}},
    {"name: c\n" T "nodes: [{devices: [g]}]\n",
     {"c.yaml:3:20: nodes[0].devices[0]: expected a mapping with keys type, count", "got \"g\""}},
    {"name: c\n" T "nodes: [{devices: [{count: 2}]}]\n",
     {"c.yaml:3:20: nodes[0].devices[0].type: expected a device type name (required), got nothing"}},
    {"name: c\n" T "nodes:\n  - devices: [{type: g}, {type: gtx980}]\n",
     {"c.yaml:4:33: nodes[0].devices[1].type: expected one of the device_types: g, got \"gtx980\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, count: 0}]}]\n",
     {"c.yaml:3:37: nodes[0].devices[0].count: expected an integer from 1 to", "got \"0\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, count: two}]}]\n",
     {"c.yaml:3:37: nodes[0].devices[0].count: expected an integer", "got \"two\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, count: 99999999999999999999}]}]\n",
     {"nodes[0].devices[0].count: expected an integer from 1 to 4194304", "got \"99999999999999999999\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, count: 3000000}, {type: g, count: 3000000}]}]\n",
     {"c.yaml:3:64: nodes[0].devices[1].count: expected at most 4194304 workers in all", "got \"3000000\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, slowdown: 0}]}]\n",
     {"c.yaml:3:40: nodes[0].devices[0].slowdown: expected a number from 1e-06 to 1e+06, got \"0\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, comm_slowdown: -2}]}]\n",
     {"c.yaml:3:45: nodes[0].devices[0].comm_slowdown: expected a number from 1e-06 to 1e+06, got \"-2\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, slowdown: nan}]}]\n",
     {"nodes[0].devices[0].slowdown: expected a number from 1e-06 to 1e+06, got \"nan\""}},
    {"name: c\n" T "nodes: [{devices: [{type: g, speed: 2}]}]\n",
     {"c.yaml:3:30: nodes[0].devices[0].speed: expected one of: type, count, slowdown, comm_slowdown, got \"speed\""}},
    /* jitter */
    {"name: c\n" T N "jitter: 0.1\n", {"c.yaml:4:9: jitter: expected a mapping with key cv or calib, got \"0.1\""}},
    {"name: c\n" T N "jitter: {cv: -0.1}\n", {"c.yaml:4:14: jitter.cv: expected a number from 0 to 100, got \"-0.1\""}},
    {"name: c\n" T N "jitter: {sigma: 1}\n", {"c.yaml:4:10: jitter.sigma: expected one of: cv, calib, got \"sigma\""}},
    {"name: c\n" T N "jitter: {cv: 0.1, calib: x}\n", {"c.yaml:4:9: jitter: expected either {cv} or {calib}", "not both"}},
    /* ranges that would turn into inf or NaN times later (issue 19) */
    {"name: c\n" T N "jitter: {cv: 1e308}\n", {"c.yaml:4:14: jitter.cv: expected a number from 0 to 100, got \"1e308\""}},
    {"name: c\nnetwork: {bandwidth: 1e-300}\n" T N, {"c.yaml:2:22: network.bandwidth: expected a bandwidth of at least 1 B/s", "got \"1e-300\""}},
    {"name: c\nnetwork: {latency: 1e308}\n" T N, {"c.yaml:2:20: network.latency: expected a time of at most 1e9 s", "got \"1e308\""}},
    {"name: c\nparameter_server: {update_time: 2e9s}\n" T N, {"c.yaml:2:33: parameter_server.update_time: expected a time of at most 1e9 s"}},
    {"name: c\nparameter_server: {bandwidth: 0}\n" T N, {"c.yaml:2:31: parameter_server.bandwidth: expected a bandwidth of at least 1 B/s"}},
    {"name: c\n" T "nodes: [{devices: [{type: g, slowdown: 1e25}]}]\n",
     {"c.yaml:3:40: nodes[0].devices[0].slowdown: expected a number from 1e-06 to 1e+06, got \"1e25\""}},
    {"name: c\n" T N "events:\n  - {at: 1e300s, worker: 0, slowdown: 2}\n", {"c.yaml:5:10: events[0].at: expected a time of at most 1e9 s"}},
    {"name: c\n" T N "events:\n  - {at: 1s, worker: 0, comm_slowdown: 1e308}\n",
     {"c.yaml:5:40: events[0].comm_slowdown: expected a number from 1e-06 to 1e+06, got \"1e308\""}},
    /* events */
    {"name: c\n" T N "events: {at: 1s}\n", {"c.yaml:4:9: events: expected a sequence of events", "got a mapping"}},
    {"name: c\n" T N "events: [3]\n", {"c.yaml:4:10: events[0]: expected a mapping", "got \"3\""}},
    {"name: c\n" T N "events:\n  - {worker: 0, slowdown: 2}\n",
     {"c.yaml:5:5: events[0].at: expected a time like \"20us\" or \"4ms\" (required), got nothing"}},
    {"name: c\n" T N "events:\n  - {at: later, worker: 0, slowdown: 2}\n",
     {"c.yaml:5:10: events[0].at: expected a time", "got \"later\""}},
    {"name: c\n" T N "events:\n  - {at: 1s, worker: 0, slowdown: 2}\n  - {at: 2s, worker: 0, slowdown: fast}\n",
     {"c.yaml:6:35: events[1].slowdown: expected a number from 1e-06 to 1e+06, got \"fast\""}},
    {"name: c\n" T N "events:\n  - {at: 1s, worker: 0, comm_slowdown: 0}\n",
     {"c.yaml:5:40: events[0].comm_slowdown: expected a number from 1e-06 to 1e+06, got \"0\""}},
    {"name: c\n" T N "events:\n  - {at: 1s, worker: 0}\n",
     {"c.yaml:5:5: events[0]: expected exactly one kind of event", "got only \"worker\""}},
    {"name: c\n" T N "events:\n  - {at: 1s, slowdown: 2}\n",
     {"c.yaml:5:5: events[0].worker: expected a worker index (required with slowdown/comm_slowdown), got nothing"}},
    {"name: c\n" T N "events:\n  - {at: 1s, worker: first, slowdown: 2}\n",
     {"c.yaml:5:22: events[0].worker: expected a worker index (an integer >= 0), got \"first\""}},
    {"name: c\n" T N "events:\n  - {at: 1s, worker: 1, slowdown: 2}\n",
     {"c.yaml:5:22: events[0].worker: expected a worker index from 0 to 0 (the workers that exist at 1s), got \"1\""}},
    {"name: c\n" T N "events:\n  - {at: 2s, worker: 1, slowdown: 2}\n  - {at: 3s, join: {type: g}}\n",
     {"c.yaml:5:22: events[0].worker: expected a worker index from 0 to 0", "got \"1\""}},
    {"name: c\n" T N "events:\n  - {at: 5s, leave: 0}\n  - {at: 6s, worker: 0, slowdown: 2}\n",
     {"c.yaml:6:22: events[1].worker: expected a worker that has not left (worker 0 left at 5s), got \"0\""}},
    {"name: c\n" T N "events:\n  - {at: 5s, leave: 0}\n  - {at: 6s, leave: 0}\n",
     {"c.yaml:6:21: events[1].leave: expected a worker that has not left", "got \"0\""}},
    {"name: c\n" T N "events:\n  - {at: 5s, leave: 1}\n",
     {"c.yaml:5:21: events[0].leave: expected a worker index from 0 to 0", "got \"1\""}},
    {"name: c\n" T N "events:\n  - {at: 5s, leave: [1]}\n",
     {"c.yaml:5:21: events[0].leave: expected a worker index (an integer >= 0), got a sequence"}},
    {"name: c\n" T N "events:\n  - {at: 5s, leave: 0, join: {type: g}}\n",
     {"c.yaml:5:5: events[0]: expected exactly one kind of event", "got several kinds at once"}},
    {"name: c\n" T N "events:\n  - {at: 5s, worker: 0, join: {type: g}}\n",
     {"c.yaml:5:22: events[0].worker: expected no worker key with join", "got \"0\""}},
    {"name: c\n" T N "events:\n  - {at: 5s, join: {type: h100}}\n",
     {"c.yaml:5:27: events[0].join.type: expected one of the device_types: g, got \"h100\""}},
    {"name: c\n" T N "events:\n  - {at: 5s, join: {node: node0}}\n",
     {"c.yaml:5:20: events[0].join.type: expected a device type name (required), got nothing"}},
    {"name: c\n" T N "events:\n  - {at: 5s, join: {type: g, node: rack9}}\n",
     {"c.yaml:5:36: events[0].join.node: expected a node name, one of: node0, got \"rack9\""}},
    {"name: c\nnetwork: {}\n" T "nodes: [{devices: [{type: g}]}, {name: b}]\n" "events:\n  - {at: 5s, join: {type: g}}\n",
     {"c.yaml:6:20: events[0].join.node: expected a node name, one of: node0, b (required), got nothing"}},
    {"name: c\n" T N "events:\n  - {at: 5s, join: g}\n",
     {"c.yaml:5:20: events[0].join: expected a mapping with keys type, node, got \"g\""}},
    {"name: c\n" T N "events:\n  - {at: 5s, join: {type: g, rack: 1}}\n",
     {"c.yaml:5:30: events[0].join.rack: expected one of: type, node, got \"rack\""}},
    {"name: c\n" T N "events:\n  - {at: 5s, when: 1}\n",
     {"c.yaml:5:14: events[0].when: expected one of: at, worker, slowdown, comm_slowdown, join, leave, got \"when\""}},
    {"name: c\nnetwork: {}\n" T "nodes: [{compute_slots: 0, devices: [{type: g}]}]\n",
     {"c.yaml:4:25: nodes[0].compute_slots: expected an integer from 1 to 4194304, got \"0\""}},
    {"name: c\nnetwork: {}\n" T "nodes: [{compute_slots: 1.5, devices: [{type: g}]}]\n",
     {"c.yaml:4:25: nodes[0].compute_slots: expected an integer from 1 to 4194304, got \"1.5\""}},
    {"name: c\nnetwork: {}\n" T "nodes: [{slots: 2, devices: [{type: g}]}]\n",
     {"nodes[0].slots: expected one of: name, link, compute_slots, devices, got \"slots\""}},
    /* YAML itself */
    {"name: c\n  bad: [\n", {"c.yaml:", "YAML syntax error"}},
    {"name: c\nkey: value: other\n", {"c.yaml:2:11: YAML syntax error: mapping values are not allowed"}},
    {"name: [c\n", {"c.yaml:2:1: YAML syntax error", "while parsing a flow sequence (line 1, column 7)"}},
    {"name: \"c\x01\"\n", {"c.yaml:1:9: YAML syntax error: control characters are not allowed"}},
    {"name: c\xff\n", {"c.yaml:1:8: YAML syntax error: invalid", "byte offset 7"}},
    {"name: *nope\n", {"c.yaml:1:7: YAML syntax error", "undefined alias"}},
    {"", {"c.yaml:1:1: (top level): expected a cluster description", "got an empty file"}},
    {"# only a comment\n", {"c.yaml:1:1: (top level)", "got an empty file"}},
    {"name: c\n" T N "---\nname: d\n", {"c.yaml:5:1: (top level): expected a single YAML document, got a second one"}},
};

static void test_bad_inputs(void) {
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    const bad_case *b = &bad_cases[i];
    hs_cluster_spec s;
    hs_diag d;
    int rc = parse(&s, b->yaml, &d);
    if (rc != HS_EINVAL) {
      HS_FAIL_AT("case %zu: rc %d (%s), want EINVAL; yaml:\n%s", i, rc, d.msg, b->yaml);
      hs_cluster_spec_free(&s);
      continue;
    }
    ASSERT(s.types == NULL && s.text == NULL && s.workers == NULL && s.events == NULL);
    ASSERT_EQ(d.code, HS_EINVAL);
    ASSERT(strchr(d.msg, '\n') == NULL);
    for (int k = 0; k < 4 && b->want[k]; k++)
      if (!strstr(d.msg, b->want[k]))
        HS_FAIL_AT("case %zu: message\n    %s\n  lacks\n    %s", i, d.msg, b->want[k]);
  }
}

static void test_found_is_escaped(void) {
  hs_cluster_spec s;
  hs_diag d;
  char big[600];
  int rc = parse(&s, "name: c\n" T N "jitter: {cv: \"1\\tq\\\"z\"}\n", &d);
  ASSERT_EQ(rc, HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "got \"1\\x09q\\\"z\"");
  /* Long values are cut so the message stays one readable line. */
  snprintf(big, sizeof big, "name: c\n" T N "jitter: {cv: %0300d}\n", 7);
  rc = parse(&s, big, &d);
  ASSERT_EQ(rc, 0); /* 000...7 is a fine number */
  hs_cluster_spec_free(&s);
  snprintf(big, sizeof big, "name: c\n" T N "jitter: {cv: %0300dz}\n", 7);
  rc = parse(&s, big, &d);
  ASSERT_EQ(rc, HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "000...\"");
  ASSERT(strlen(d.msg) < 300);
}

static void test_aliases_and_tags(void) {
  /* Anchors and aliases are plain YAML; the loader sees the resolved nodes. */
  hs_cluster_spec s;
  hs_diag d;
  int rc = parse(&s,
                 "name: c\n"
                 "network: &net {bandwidth: 10Gbps, latency: 20us}\n"
                 "parameter_server: *net\n"
                 "device_types: {g: {compute: {t0: 1ms, per_sample: 1ms}}}\n"
                 "nodes:\n"
                 "  - &n {devices: [{type: g, count: 2}]}\n"
                 "  - {devices: [{type: !!str g}]}\n",
                 &d);
  ASSERT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", d.msg);
    return;
  }
  ASSERT_EQ(s.n_workers, 3);
  ASSERT_REL(s.ps.link.bandwidth, 10e9 / 8, 1e-12);
  hs_cluster_spec_free(&s);
}

/* ---------- files ---------- */

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

static void test_load_file(void) {
  const char *p = hs_test_tmp("cluster.yaml");
  ASSERT_EQ(write_file(p, full_yaml), 0);
  hs_cluster_spec s;
  hs_diag d;
  hs_diag_clear(&d);
  int rc = hs_cluster_load(&s, p, &d);
  ASSERT_EQ(rc, 0);
  if (rc == 0) {
    ASSERT_STR(s.path, p);
    ASSERT_STR(s.text, full_yaml);
    ASSERT_EQ(s.n_workers, 6);
    hs_cluster_spec_free(&s);
  }
  unlink(p);
  /* A bad file names itself in the message. */
  ASSERT_EQ(write_file(p, "name: c\n" T "nodes: [{devices: [{type: q}]}]\n"), 0);
  rc = hs_cluster_load(&s, p, &d);
  ASSERT_EQ(rc, HS_EINVAL);
  char want[600];
  snprintf(want, sizeof want, "%s:3:27: nodes[0].devices[0].type: expected one of the device_types: g, got \"q\"", p);
  ASSERT_CONTAINS(d.msg, want);
  unlink(p);
}

static void test_load_missing_file(void) {
  hs_cluster_spec s;
  hs_diag d;
  int rc = hs_cluster_load(&s, "/nonexistent/dir/cluster.yaml", &d);
  ASSERT_EQ(rc, HS_EIO);
  ASSERT_CONTAINS(d.msg, "/nonexistent/dir/cluster.yaml");
  ASSERT_CONTAINS(d.msg, "No such file or directory");
  rc = hs_cluster_load(&s, "/", &d); /* a directory cannot be read as a file */
  ASSERT_EQ(rc, HS_EIO);
  ASSERT_CONTAINS(d.msg, "/: cannot read");
  hs_cluster_spec_free(&s);
}

static void test_bundled_files(void) {
  static const struct {
    const char *file;
    int workers, nodes, types;
  } files[] = {{"traces/lbb-4gpu.yaml", 4, 1, 3},
               {"traces/ashl-3worker.yaml", 3, 3, 1},
               {"traces/hetero-16gpu.yaml", 16, 2, 2},
               {"traces/hetero-1024gpu.yaml", 1024, 128, 3}};
  const char *src = getenv("HETSIM_SOURCE_DIR");
  if (!src) src = ".";
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", src, files[i].file);
    hs_cluster_spec s;
    hs_diag d;
    hs_diag_clear(&d);
    int rc = hs_cluster_load(&s, path, &d);
    if (rc) {
      HS_FAIL_AT("%s: %s", path, d.msg);
      continue;
    }
    ASSERT_EQ(s.n_workers, files[i].workers);
    ASSERT_EQ(s.n_nodes, files[i].nodes);
    ASSERT_EQ(s.n_types, files[i].types);
    /* Each type has resnet18's inline numbers and a roofline for every other model. */
    for (int t = 0; t < s.n_types; t++) {
      ASSERT_EQ(s.types[t].n_per_model, 1);
      if (s.types[t].n_per_model != 1) continue;
      ASSERT_STR(s.types[t].per_model[0].model, "resnet18");
      ASSERT(s.types[t].per_model[0].per_sample > 0);
      ASSERT_EQ(s.types[t].compute.kind, HS_COMPUTE_ROOFLINE);
      ASSERT(s.types[t].compute.flops > 1e12 && s.types[t].compute.efficiency == 0.5);
    }
    if (i == 0) {
      /* lbb-4gpu: 2x GTX 1070, M40, GTX 750 in that order, and its CSV trace. */
      ASSERT_EQ(s.workers[0].type, hs_cluster_find_type(&s, "gtx1070"));
      ASSERT_EQ(s.workers[3].type, hs_cluster_find_type(&s, "gtx750"));
      char csv[1024];
      snprintf(csv, sizeof csv, "%s/traces/lbb-4gpu-events.csv", src);
      rc = hs_cluster_load_events_csv(&s, csv, &d);
      if (rc) HS_FAIL_AT("%s: %s", csv, d.msg);
      ASSERT_EQ(s.n_events, 4);
    }
    if (i == 1) {
      ASSERT_EQ(s.ps.present, 1);
      ASSERT_REL(s.workers[2].slowdown, 4, 1e-15);
      ASSERT_REL(s.workers[2].comm_slowdown, 8, 1e-15);
    }
    hs_cluster_spec_free(&s);
  }
}

/* ---------- the loader's own reader of plain YAML, against libyaml ---------- */

/* Texts in the reader's subset, or at its edges, where libyaml's rules are easy to get wrong:
 * where each node starts, indentless and compact block sequences, flow collections over several
 * lines, comments, spaces inside and around scalars, values below their key. */
static const char *const edge_texts[] = {
    "a: b\n",
    "a: b",
    "  a: b\n  c: d\n",
    "a: b c  d   \n",
    "a : b\n",
    "a:    b # c\n# d\n\n   # e\ne: f\n",
    "a:\n- b\n- c\nd: e\n",
    "a:\n  - b\n  - c\nd: e\n",
    "a:\n  - x: 1\n    y: 2\n  - z: 3\nd: e\n",
    "a:\n- x: 1\n  y: 2\n- {z: 3}\n",
    "a:\n  b:\n    c: d\n  e: f\ng: h\n",
    "a: {b: c, d: [e, f, {g: h}], i: []}\n",
    "a: {}\n",
    "a: {b: c,\n    d: e}\n",
    "a: {b: c\n    , d: e}\n",
    "a: {b:\n      c}\n",
    "a: [b,\n  # note\n  c]\n",
    "a: {b: c,\nd: e}\n",
    "{a: b, c: [d]}\n",
    "{a: b,\nc: d}\n",
    "a: -1\nb: -.5e-3\nc: +2\nd: ~\ne: (x)\n",
    "a: b\n  c\n",
    "a: b\n  # c\n",
    "a: b\n  c: d\n",
    "a:\n  b: c\n d: e\n",
    "- a\n- b\n",
    "a: b#c\n",
    "a: {b: c}#d\n",
    "a: b:c\n",
    "a: b: c\n",
    "a:\n",
    "a: [b, ]\n",
    "a: {b: c,}\n",
    "a: {b}\n",
    "a: {b: }\n",
    "a: [b: c]\n",
    "a:\n  - - b\n",
    "a:\n  -\n    b: c\n",
    "a: {b: c d}\n",
    "a: {b: c\n  d}\n",
    "a: b\n---\nc: d\n",
    "---\na: b\n",
    "a: b\n...\n",
    "a: 'b'\n",
    "a: \"b\"\n",
    "a: &x b\nc: *x\n",
    "a: !!str b\n",
    "a:\tb\n",
    "a: b\r\n",
    "? a\n: b\n",
    "a: |\n  b\n",
    "a: [b, {c: d,\n e: [f,\n  g]}]\n",
    "x:\n  a: {b: c,\n  d: e}\n",
    "x:\n  a: {b: c,\n   d: e}\n",
};

/* A few nodes written the way bench/gen_cluster.sh writes a million. */
static const char gen_text[] =
    "# Generated by bench/gen_cluster.sh 20\n"
    "name: gen-20\n"
    "network: {bandwidth: 200Gbps, latency: 5us}\n"
    "device_types:\n"
    "  v100: {memory: 32GiB, compute: {resnet18: {t0: 2ms, per_sample: 0.22ms},\n"
    "                                  default: {flops: 15.7TFLOPS, efficiency: 0.5, t0: 2ms}}}\n"
    "  a100: {memory: 40GiB, compute: {resnet18: {t0: 2ms, per_sample: 0.17ms},\n"
    "                                  default: {flops: 19.5TFLOPS, efficiency: 0.5, t0: 2ms}}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 100GB/s, latency: 3us}, devices: [{type: v100, count: 8}]}\n"
    "  - {name: n1, link: {bandwidth: 100GB/s, latency: 3us}, devices: [{type: a100, count: 8}]}\n"
    "  - {name: n2, link: {bandwidth: 100GB/s, latency: 3us}, devices: [{type: v100, count: 4}]}\n";

/* Checks one text: the reader either declines it or reads what libyaml reads. */
static int fast_agrees(const char *text, size_t len, const char *what) {
  char why[300];
  int r = hs_cluster_fast_check(text, len, why, sizeof why);
  if (r < 0) HS_FAIL_AT("%s: the reader and libyaml differ: %s; text:\n%.*s", what, why, (int)len, text);
  return r;
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 20);
  *len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  fclose(f);
  if (buf) buf[*len] = '\0';
  return buf;
}

static void test_fast_reader(void) {
  /* What the reader must take itself, or the million-worker start-up is slow again. */
  ASSERT_EQ(fast_agrees(gen_text, strlen(gen_text), "gen_text"), 1);
  ASSERT_EQ(fast_agrees(full_yaml + 0, 0, "empty"), 0);
  int accepted = 0, declined = 0;
  for (size_t i = 0; i < sizeof edge_texts / sizeof edge_texts[0]; i++) {
    char what[32];
    snprintf(what, sizeof what, "edge_texts[%zu]", i);
    int r = fast_agrees(edge_texts[i], strlen(edge_texts[i]), what);
    accepted += r == 1;
    declined += r == 0;
  }
  /* Both outcomes are exercised (the list holds texts of each kind). */
  ASSERT(accepted >= 20);
  ASSERT(declined >= 20);
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++)
    fast_agrees(bad_cases[i].yaml, strlen(bad_cases[i].yaml), "a bad case");

  /* Every bundled cluster file and the texts above, each mutated many times: a character
   * deleted, inserted or replaced (structure characters mostly), or a line's indentation
   * changed. Whatever the reader accepts, libyaml must read the same. */
  static const char *const files[] = {"traces/lbb-4gpu.yaml", "traces/ashl-3worker.yaml",
                                      "traces/hetero-16gpu.yaml", "traces/hetero-1024gpu.yaml",
                                      "traces/gavel-mixed.yaml", "traces/sailor-opt350m.yaml",
                                      "traces/lbb-4gpu-measured.yaml",
                                      "bench/clusters/cpu-2-slow.yaml"};
  const char *src = getenv("HETSIM_SOURCE_DIR");
  if (!src) src = ".";
  enum { N_BASE = 3 + sizeof files / sizeof files[0] };
  char *base[N_BASE];
  size_t base_len[N_BASE];
  base[0] = strdup(gen_text);
  base[1] = strdup(full_yaml);
  base[2] = strdup(edge_texts[9]);
  for (size_t i = 0; i < 3; i++) base_len[i] = strlen(base[i]);
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", src, files[i]);
    base[3 + i] = read_all(path, &base_len[3 + i]);
    if (!base[3 + i]) HS_FAIL_AT("cannot read %s", path);
    else fast_agrees(base[3 + i], base_len[3 + i], files[i]);
  }
  static const char alphabet[] = " \n:-#{}[],'\"&*!|>?%@`\tab1.";
  unsigned long long x = 88172645463325252ULL;
  int mut_accepted = 0;
  for (int m = 0; m < 30000; m++) {
    size_t b = (size_t)m % N_BASE, len = base_len[b];
    if (!base[b] || len == 0) continue;
    char *t = malloc(len + 64);
    memcpy(t, base[b], len);
    int edits = 1 + m % 3;
    for (int e = 0; e < edits; e++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t at = (size_t)(x >> 20) % (len + 1);
      char ch = alphabet[(x >> 8) % (sizeof alphabet - 1)];
      switch ((x >> 4) % 4) {
      case 0: /* delete */
        if (at < len) memmove(t + at, t + at + 1, len - at - 1), len--;
        break;
      case 1: /* insert */
        memmove(t + at + 1, t + at, len - at), t[at] = ch, len++;
        break;
      case 2: /* replace */
        if (at < len) t[at] = ch;
        break;
      default: { /* one more or one less space at the start of a line */
        while (at > 0 && t[at - 1] != '\n') at--;
        if ((x >> 40) & 1) memmove(t + at + 1, t + at, len - at), t[at] = ' ', len++;
        else if (at < len && t[at] == ' ') memmove(t + at, t + at + 1, len - at - 1), len--;
      }
      }
      if (len + 4 > base_len[b] + 60) break;
    }
    mut_accepted += fast_agrees(t, len, "a mutation") == 1;
    free(t);
  }
  ASSERT(mut_accepted > 1000);
  for (size_t i = 0; i < N_BASE; i++) free(base[i]);
}

/* `real_device` (the device `hetsim real` puts a type's workers on): read in every YAML form,
 * with its position; absent, empty. The fast reader declines its values (':' and '=' are outside
 * its plain scalars), so libyaml reads such files, and the two never disagree. */
static void test_real_device(void) {
  static const char text[] =
      "name: parts\n"
      "device_types:\n"
      "  big: {compute: {t0: 1ms, per_sample: 1ms}, real_device: \"cuda:0/sm=64\"}\n"
      "  mid: {compute: {t0: 1ms, per_sample: 2ms}, real_device: cuda:0/sm=32}\n"
      "  small:\n"
      "    compute: {t0: 1ms, per_sample: 4ms}\n"
      "    real_device: cuda:0/sm=16\n"
      "  whole: {compute: {t0: 1ms, per_sample: 1ms}, real_device: 'cuda:12'}\n"
      "  host: {compute: {t0: 1ms, per_sample: 1ms}, real_device: cpu}\n"
      "  plain: {compute: {t0: 1ms, per_sample: 1ms}}\n"
      "nodes: [{name: n, devices: [{type: big}, {type: mid}, {type: small, count: 2}, {type: plain}]}]\n";
  hs_cluster_spec s;
  hs_diag d;
  ASSERT_EQ(parse(&s, text, &d), 0);
  if (s.n_types != 6) return;
  ASSERT_STR(s.types[0].real_device, "cuda:0/sm=64");
  ASSERT_EQ(s.types[0].real_device_pos.line, 3);
  ASSERT_EQ(s.types[0].real_device_pos.col, 59);
  ASSERT_STR(s.types[1].real_device, "cuda:0/sm=32");
  ASSERT_EQ(s.types[1].real_device_pos.line, 4);
  ASSERT_STR(s.types[2].real_device, "cuda:0/sm=16");
  ASSERT_EQ(s.types[2].real_device_pos.line, 7);
  ASSERT_EQ(s.types[2].real_device_pos.col, 18);
  ASSERT_STR(s.types[3].real_device, "cuda:12");
  ASSERT_STR(s.types[4].real_device, "cpu");
  ASSERT_STR(s.types[5].real_device, "");
  ASSERT_EQ(s.types[5].real_device_pos.line, 0);
  ASSERT_EQ(s.n_workers, 5);
  /* The simulator's view is unchanged: the same compute as without the key. */
  ASSERT_REL(s.types[2].compute.per_sample, 4e-3, 1e-12);
  hs_cluster_spec_free(&s);
  ASSERT(fast_agrees(text, strlen(text), "real_device text") >= 0);
}

/* ---------- CSV traces ---------- */

static const char csv_base[] =
    "name: c\n"
    "network: {}\n"
    "device_types: {gtx1070: {compute: {t0: 1ms, per_sample: 1ms}}}\n"
    "nodes: [{name: server0, devices: [{type: gtx1070, count: 4}]}, {name: s1}]\n"
    "events: [{at: 200s, worker: 1, slowdown: 3}]\n";

static int load_csv(hs_cluster_spec *s, const char *csv, hs_diag *d) {
  const char *p = hs_test_tmp("trace.csv");
  if (write_file(p, csv) != 0) return -100;
  hs_diag_clear(d);
  int rc = hs_cluster_load_events_csv(s, p, d);
  unlink(p);
  return rc;
}

static void test_csv_valid(void) {
  hs_cluster_spec s;
  hs_diag d;
  ASSERT_EQ(parse(&s, csv_base, &d), 0);
  int rc = load_csv(&s,
                    "# a trace\n"
                    "at,event,worker,value,type,node\n"
                    "\n"
                    "120s,slowdown,3,2.0,,\n"
                    "  # indented comment\n"
                    "130s,comm_slowdown,1,4,,\r\n"
                    "400s,join,,,gtx1070,server0\n"
                    "450s , slowdown , 4 , 0.5 , , \n"
                    "500s,leave,2,,,\n"
                    "200s,slowdown,1,1,,",
                    &d);
  ASSERT_EQ(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", d.msg);
    hs_cluster_spec_free(&s);
    return;
  }
  ASSERT_EQ(s.n_events, 7);
  if (s.n_events == 7) {
    const hs_event_spec *e = s.events;
    ASSERT_REL(e[0].at, 120, 1e-12);
    ASSERT_EQ(e[0].worker, 3);
    ASSERT_REL(e[0].slowdown, 2.0, 1e-15);
    ASSERT(e[0].comm_slowdown < 0);
    ASSERT_EQ(e[0].pos.line, 4);
    ASSERT_EQ(e[1].worker, 1);
    ASSERT_REL(e[1].comm_slowdown, 4, 1e-15);
    ASSERT(e[1].slowdown < 0);
    /* Equal times keep load order: the cluster file's 200s event before the trace's. */
    ASSERT_REL(e[2].at, 200, 1e-12);
    ASSERT_REL(e[2].slowdown, 3, 1e-15);
    ASSERT_REL(e[3].at, 200, 1e-12);
    ASSERT_REL(e[3].slowdown, 1, 1e-15);
    ASSERT_EQ(e[4].kind, HS_EVENT_JOIN);
    ASSERT_EQ(e[4].type, 0);
    ASSERT_EQ(e[4].node, 0);
    ASSERT_EQ(e[4].worker, -1);
    ASSERT_EQ(e[5].worker, 4); /* the joined worker */
    ASSERT_REL(e[5].slowdown, 0.5, 1e-15);
    ASSERT_EQ(e[6].kind, HS_EVENT_LEAVE);
    ASSERT_EQ(e[6].worker, 2);
  }
  hs_cluster_spec_free(&s);
}

typedef struct csv_bad {
  const char *csv;
  const char *want[3];
} csv_bad;

#define H "at,event,worker,value,type,node\n"

static const csv_bad csv_bad_cases[] = {
    {"", {"trace.csv:1:1: header: expected \"at,event,worker,value,type,node\", got an empty file"}},
    {"# only comments\n\n", {"header: expected", "got an empty file"}},
    {"at,event,worker\n1s,leave,0\n", {"trace.csv:1:1: header: expected \"at,event,worker,value,type,node\", got \"at,event,worker\""}},
    {"event,at,worker,value,type,node\n", {"trace.csv:1:1: header:", "got \"event,at,"}},
    {H "1s,leave,0\n", {"trace.csv:2:1: line: expected 6 fields (at,event,worker,value,type,node), got 3"}},
    {H "1s,leave,0,,,,\n", {"trace.csv:2:1: line: expected 6 fields", "got 7"}},
    {H "soon,leave,0,,,\n", {"trace.csv:2:1: column \"at\": expected a time of at most 1e9 s, like \"20us\" or \"4ms\", got \"soon\""}},
    {H ",leave,0,,,\n", {"trace.csv:2:1: column \"at\": expected a time", "got an empty field"}},
    {H "1s,explode,0,,,\n", {"trace.csv:2:4: column \"event\": expected one of: slowdown, comm_slowdown, join, leave, got \"explode\""}},
    {H "1s,slowdown,x,2,,\n", {"trace.csv:2:13: column \"worker\": expected a worker index (an integer >= 0), got \"x\""}},
    {H "1s,slowdown,,2,,\n", {"trace.csv:2:13: column \"worker\": expected a worker index", "got an empty field"}},
    {H "1s,comm_slowdown,0,1e308,,\n", {"trace.csv:2:20: column \"value\": expected a slowdown factor (a number from 1e-06 to 1e+06), got \"1e308\""}},
    {H "1e300s,leave,0,,,\n", {"trace.csv:2:1: column \"at\": expected a time of at most 1e9 s", "got \"1e300s\""}},
    {H "1s,slowdown,0,fast,,\n", {"trace.csv:2:15: column \"value\": expected a slowdown factor (a number from 1e-06 to 1e+06), got \"fast\""}},
    {H "1s,comm_slowdown,0,0,,\n", {"trace.csv:2:20: column \"value\": expected a slowdown factor", "got \"0\""}},
    {H "1s,slowdown,0,,,\n", {"trace.csv:2:15: column \"value\": expected a slowdown factor", "got an empty field"}},
    {H "1s,slowdown,0,2,gtx1070,\n", {"trace.csv:2:17: column \"type\": expected an empty field for a slowdown event, got \"gtx1070\""}},
    {H "1s,leave,0,2,,\n", {"trace.csv:2:12: column \"value\": expected an empty field for a leave event, got \"2\""}},
    {H "1s,leave,0,,,server0\n", {"trace.csv:2:14: column \"node\": expected an empty field for a leave event, got \"server0\""}},
    {H "1s,join,3,,gtx1070,server0\n", {"trace.csv:2:9: column \"worker\": expected an empty field for a join event, got \"3\""}},
    {H "1s,join,,,gtx980,server0\n", {"trace.csv:2:11: column \"type\": expected one of the device_types: gtx1070, got \"gtx980\""}},
    {H "1s,join,,,gtx1070,rack9\n", {"trace.csv:2:19: column \"node\": expected a node name, one of: server0, s1, got \"rack9\""}},
    {H "1s,join,,,gtx1070,\n", {"trace.csv:2:19: column \"node\": expected a node name", "got an empty field"}},
    {H "1s,slowdown,4,2,,\n", {"trace.csv:2:13: column \"worker\": expected a worker index from 0 to 3 (the workers that exist at 1s), got \"4\""}},
    {H "# c\n1s,leave,2,,,\n2s,slowdown,2,2,,\n", {"trace.csv:4:13: column \"worker\": expected a worker that has not left (worker 2 left at 1s), got \"2\""}},
    {H "100s,leave,1,,,\n", {"trace.csv: events: expected a worker that has not left (worker 1 left at 100s) for the earlier event at c.yaml:5:10", "got \"1\""}},
    {H "1s,slowdown,0,2,,\x01\n", {"trace.csv:2:18: column \"node\": expected an empty field", "got \"\\x01\""}},
};

static void test_csv_bad(void) {
  for (size_t i = 0; i < sizeof csv_bad_cases / sizeof csv_bad_cases[0]; i++) {
    hs_cluster_spec s;
    hs_diag d;
    ASSERT_EQ(parse(&s, csv_base, &d), 0);
    int rc = load_csv(&s, csv_bad_cases[i].csv, &d);
    if (rc != HS_EINVAL) {
      HS_FAIL_AT("csv case %zu: rc %d (%s)", i, rc, d.msg);
    } else {
      for (int k = 0; k < 3 && csv_bad_cases[i].want[k]; k++)
        if (!strstr(d.msg, csv_bad_cases[i].want[k]))
          HS_FAIL_AT("csv case %zu: message\n    %s\n  lacks\n    %s", i, d.msg,
                     csv_bad_cases[i].want[k]);
    }
    /* A failed load leaves the spec as it was. */
    ASSERT_EQ(s.n_events, 1);
    ASSERT_REL(s.events[0].at, 200, 1e-12);
    hs_cluster_spec_free(&s);
  }
}

static void test_csv_missing_file(void) {
  hs_cluster_spec s;
  hs_diag d;
  ASSERT_EQ(parse(&s, csv_base, &d), 0);
  int rc = hs_cluster_load_events_csv(&s, "/nonexistent/trace.csv", &d);
  ASSERT_EQ(rc, HS_EIO);
  ASSERT_CONTAINS(d.msg, "/nonexistent/trace.csv: cannot open: No such file or directory");
  ASSERT_EQ(s.n_events, 1);
  hs_cluster_spec_free(&s);
}

static const hs_test_case cases[] = {
    {"full_file", test_full_file},
    {"defaults", test_defaults},
    {"ps_defaults_to_network", test_ps_defaults_to_network},
    {"large_count", test_large_count},
    {"compute_slots", test_compute_slots},
    {"bad_inputs", test_bad_inputs},
    {"found_is_escaped", test_found_is_escaped},
    {"aliases_and_tags", test_aliases_and_tags},
    {"load_file", test_load_file},
    {"load_missing_file", test_load_missing_file},
    {"bundled_files", test_bundled_files},
    {"fast_reader", test_fast_reader},
    {"real_device", test_real_device},
    {"csv_valid", test_csv_valid},
    {"csv_bad", test_csv_bad},
    {"csv_missing_file", test_csv_missing_file},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("config", cases, argc, argv); }
