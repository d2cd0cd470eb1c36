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

/* --- a link shared by flows, max-min fair ------------------------------------------------ */

typedef struct hs_flow {
  int64_t id;         /* caller's handle */
  double remaining;   /* bytes */
  double size;        /* bytes at the start */
  double cap;         /* bytes/s the flow's other end can take */
  double rate;        /* bytes/s, set by hs_shared_link_rates */
} hs_flow;

typedef struct hs_shared_link {
  double capacity;    /* bytes/s */
  double last;        /* s, when `remaining` were last brought up to date */
  int n, cap_n;
  hs_flow *flows;
  uint64_t epoch;     /* bumped when the rates change, to drop stale completion events */
} hs_shared_link;

void hs_shared_link_init(hs_shared_link *l, double capacity);
void hs_shared_link_free(hs_shared_link *l);
/* Advances every flow to time now at its current rate. */
void hs_shared_link_advance(hs_shared_link *l, double now);
int hs_shared_link_add(hs_shared_link *l, int64_t id, double bytes, double cap);
/* Recomputes the max-min fair rates; returns the time at which the first flow will finish
 * (INFINITY when there is none). */
double hs_shared_link_rates(hs_shared_link *l, double now);
/* Removes the flows that have finished by now, appending their ids to done (up to cap);
 * returns how many were removed. */
int hs_shared_link_reap(hs_shared_link *l, int64_t *done, int cap);

#endif
