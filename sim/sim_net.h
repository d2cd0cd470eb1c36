/* sim_net: the network model. Links with bandwidth and latency; collectives priced from the
 * point-to-point transfers they are made of; a shared link divided among its flows by max-min
 * fair sharing (flow-level, as SimGrid's and ns-3's flow models do).
 *
 * Ring all-reduce on n participants moves 2(n-1) chunks of m/n bytes around the ring in
 * lockstep, so each of its 2(n-1) steps lasts as long as its slowest link:
 *     T_ring(m) = 2(n-1) * max_l (alpha_l + m / (n * beta_l))
 * where link l joins participant k to participant k+1 (mod n): inside a node it is the node's
 * link, between nodes the network, and its bandwidth is divided by the larger comm_slowdown of
 * its two ends. Hierarchical all-reduce (Horovod's: intra-node reduce-scatter, inter-node
 * all-reduce among nodes, intra-node all-gather) on q nodes with g_j participants each costs
 *     T_hier(m) = 2 * max_j (g_j-1)(alpha_j + m/(g_j beta_j)) + 2(q-1) * max_l (alpha_net + m/(q beta_l))
 * Both are computed in O(n) and need no per-transfer events.
 * Units: seconds, bytes, bytes per second. */
#ifndef HS_SIM_NET_H
#define HS_SIM_NET_H

#include <stdint.h>

#include "core/core_config.h"

/* What the network model reads about one participant. */
typedef struct hs_netm_peer {
  int node;
  double comm_slowdown;
} hs_netm_peer;

/* Scratch space reused across collectives so that pricing one allocates nothing. */
typedef struct hs_netm {
  const hs_cluster_spec *spec;
  int n_nodes;
  int *node_count;      /* participants per node, by node */
  double *node_slow;    /* largest comm_slowdown per node */
  int *node_order;      /* nodes in order of first appearance */
} hs_netm;

int hs_netm_open(hs_netm *net, const hs_cluster_spec *spec);
void hs_netm_close(hs_netm *net);

/* The link between two peers: the node's link inside a node, the network between nodes. */
hs_link_spec hs_netm_link(const hs_netm *net, const hs_netm_peer *a, const hs_netm_peer *b);

/* All-reduce time of m bytes over peers[ws[0..n-1]] in that ring order. */
double hs_netm_ring_time(hs_netm *net, const hs_netm_peer *peers, const int *ws, int n, double m);
double hs_netm_hier_time(hs_netm *net, const hs_netm_peer *peers, const int *ws, int n, double m);

/* --- a link shared by flows, max-min fair ------------------------------------------------
 *
 * Each flow is capped by its other end (cap, bytes/s); the link's capacity is divided by
 * max-min fair sharing: flows whose cap is below the fair share get their cap, the others split
 * what is left equally. Flows of equal cap therefore always get equal rates, so the link keeps
 * them in one group per cap value: a group has one clock, `served` (bytes each of its flows has
 * received since the group's origin), and a min-heap of its flows keyed by the value of that
 * clock at which each finishes (its start value plus its size). A flow event costs O(log n) in
 * the heap plus O(D) over the groups, D the number of distinct caps ever seen on the link (the
 * distinct comm_slowdown values among the workers: 1 to 4 on the bundled clusters), where the
 * previous version sorted and scanned all n flows at every event.
 *
 * Use, as sim/sim_run.c does: at time now, hs_shared_link_advance(now) first; then add flows
 * and/or reap finished ones (reap until it returns 0); then hs_shared_link_rates(now), which
 * gives the next completion. Rates are those of the last hs_shared_link_rates call: a flow added
 * since runs at its group's rate until the next call.
 *
 * Answers: the same rates and completion times as a per-flow computation up to rounding (1e-9
 * relative is what tests/test_shared_link.c holds it to against that computation; about 1e-15
 * is what it finds), and the finished flows come out in the same order: by cap, then id. */

typedef struct hs_flow {
  double finish;      /* bytes: the group's `served` at which the flow is done */
  double size;        /* bytes at the start */
  int64_t id;         /* caller's handle */
} hs_flow;

typedef struct hs_flow_group {
  double cap;         /* bytes/s, the cap shared by the group's flows */
  double rate;        /* bytes/s each flow gets, set by hs_shared_link_rates */
  double served;      /* bytes each flow of the group has received since the group's origin */
  double max_size;    /* bytes, the largest flow added since the origin last moved */
  int n, cap_n;       /* flows in the heap, heap slots */
  hs_flow *heap;      /* min-heap on (finish, id) */
} hs_flow_group;

typedef struct hs_shared_link {
  double capacity;    /* bytes/s */
  double last;        /* s, when the groups' `served` were last brought up to date */
  int n;              /* flows on the link */
  int n_groups, cap_groups;
  hs_flow_group *groups; /* by cap, ascending; a group is kept when it empties */
  int64_t *done;      /* finished flows not yet handed out by hs_shared_link_reap */
  int n_done, done_at, cap_done;
  uint64_t epoch;     /* bumped when the rates change, to drop stale completion events */
} hs_shared_link;

void hs_shared_link_init(hs_shared_link *l, double capacity);
void hs_shared_link_free(hs_shared_link *l);
/* Advances every flow to time now at its current rate. */
void hs_shared_link_advance(hs_shared_link *l, double now);
/* A flow of `bytes` starting at the time of the last advance; HS_ENOMEM. */
int hs_shared_link_add(hs_shared_link *l, int64_t id, double bytes, double cap);
/* Recomputes the max-min fair rates; returns the time at which the first flow will finish
 * (INFINITY when there is none). */
double hs_shared_link_rates(hs_shared_link *l, double now);
/* Removes the flows that have finished by the last advance (what is left of them is rounding
 * noise of their size), appending their ids to done (up to cap), by cap and then id; returns
 * how many were handed out. Call it until it returns 0. */
int hs_shared_link_reap(hs_shared_link *l, int64_t *done, int cap);

#endif
