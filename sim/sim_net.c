#include "sim/sim_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int hs_netm_open(hs_netm *net, const hs_cluster_spec *spec) {
  memset(net, 0, sizeof *net);
  net->spec = spec;
  net->n_nodes = spec->n_nodes;
  size_t n = (size_t)(spec->n_nodes > 0 ? spec->n_nodes : 1);
  net->node_count = calloc(n, sizeof *net->node_count);
  net->node_slow = calloc(n, sizeof *net->node_slow);
  net->node_order = calloc(n, sizeof *net->node_order);
  if (!net->node_count || !net->node_slow || !net->node_order) {
    hs_netm_close(net);
    return HS_ENOMEM;
  }
  return 0;
}

void hs_netm_close(hs_netm *net) {
  free(net->node_count);
  free(net->node_slow);
  free(net->node_order);
  memset(net, 0, sizeof *net);
}

hs_link_spec hs_netm_link(const hs_netm *net, const hs_netm_peer *a, const hs_netm_peer *b) {
  hs_link_spec l = a->node == b->node ? net->spec->nodes[a->node].link : net->spec->network;
  double slow = a->comm_slowdown > b->comm_slowdown ? a->comm_slowdown : b->comm_slowdown;
  l.bandwidth /= slow;
  return l;
}

double hs_netm_ring_time(hs_netm *net, const hs_netm_peer *peers, const int *ws, int n, double m) {
  if (n <= 1) return 0.0;
  double worst = 0.0;
  for (int k = 0; k < n; k++) {
    hs_link_spec l = hs_netm_link(net, &peers[ws[k]], &peers[ws[(k + 1) % n]]);
    double step = l.latency + m / ((double)n * l.bandwidth);
    if (step > worst) worst = step;
  }
  return 2.0 * (double)(n - 1) * worst;
}

double hs_netm_hier_time(hs_netm *net, const hs_netm_peer *peers, const int *ws, int n, double m) {
  if (n <= 1) return 0.0;
  int q = 0;
  for (int k = 0; k < n; k++) {
    const hs_netm_peer *p = &peers[ws[k]];
    if (net->node_count[p->node] == 0) {
      net->node_order[q++] = p->node;
      net->node_slow[p->node] = p->comm_slowdown;
    } else if (p->comm_slowdown > net->node_slow[p->node]) {
      net->node_slow[p->node] = p->comm_slowdown;
    }
    net->node_count[p->node]++;
  }
  double intra = 0.0, inter_step = 0.0;
  for (int j = 0; j < q; j++) {
    int node = net->node_order[j], g = net->node_count[node];
    if (g > 1) {
      hs_link_spec l = net->spec->nodes[node].link;
      double t = (double)(g - 1) * (l.latency + m / ((double)g * l.bandwidth / net->node_slow[node]));
      if (t > intra) intra = t;
    }
    if (q > 1) {
      int next = net->node_order[(j + 1) % q];
      double slow = net->node_slow[node] > net->node_slow[next] ? net->node_slow[node] : net->node_slow[next];
      double t = net->spec->network.latency + m / ((double)q * net->spec->network.bandwidth / slow);
      if (t > inter_step) inter_step = t;
    }
  }
  for (int j = 0; j < q; j++) net->node_count[net->node_order[j]] = 0;
  return 2.0 * intra + 2.0 * (double)(q - 1) * inter_step;
}

/* --- shared link --------------------------------------------------------------------------- */

void hs_shared_link_init(hs_shared_link *l, double capacity) {
  memset(l, 0, sizeof *l);
  l->capacity = capacity;
}

void hs_shared_link_free(hs_shared_link *l) {
  free(l->flows);
  memset(l, 0, sizeof *l);
}

void hs_shared_link_advance(hs_shared_link *l, double now) {
  double dt = now - l->last;
  if (dt > 0)
    for (int i = 0; i < l->n; i++) l->flows[i].remaining -= l->flows[i].rate * dt;
  l->last = now;
}

int hs_shared_link_add(hs_shared_link *l, int64_t id, double bytes, double cap) {
  if (l->n == l->cap_n) {
    int nc = l->cap_n ? 2 * l->cap_n : 16;
    hs_flow *f = realloc(l->flows, (size_t)nc * sizeof *f);
    if (!f) return HS_ENOMEM;
    l->flows = f;
    l->cap_n = nc;
  }
  l->flows[l->n++] = (hs_flow){.id = id, .remaining = bytes, .size = bytes, .cap = cap, .rate = 0};
  return 0;
}

static int by_cap(const void *a, const void *b) {
  double x = ((const hs_flow *)a)->cap, y = ((const hs_flow *)b)->cap;
  if (x < y) return -1;
  if (x > y) return 1;
  return (((const hs_flow *)a)->id > ((const hs_flow *)b)->id) - (((const hs_flow *)a)->id < ((const hs_flow *)b)->id);
}

double hs_shared_link_rates(hs_shared_link *l, double now) {
  l->epoch++;
  if (l->n == 0) return INFINITY;
  /* Progressive filling: flows whose own cap is below the fair share keep their cap, the rest
   * split what is left equally. Sorting by cap makes this one pass. */
  qsort(l->flows, (size_t)l->n, sizeof *l->flows, by_cap);
  double left = l->capacity;
  int k = 0;
  for (; k < l->n; k++) {
    double share = left / (double)(l->n - k);
    if (l->flows[k].cap > share) break;
    l->flows[k].rate = l->flows[k].cap;
    left -= l->flows[k].cap;
  }
  if (k < l->n) {
    double share = left / (double)(l->n - k);
    for (int i = k; i < l->n; i++) l->flows[i].rate = share;
  }
  double first = INFINITY;
  for (int i = 0; i < l->n; i++) {
    double t = now + (l->flows[i].remaining > 0 ? l->flows[i].remaining : 0) / l->flows[i].rate;
    if (t < first) first = t;
  }
  return first;
}

int hs_shared_link_reap(hs_shared_link *l, int64_t *done, int cap) {
  int kept = 0, got = 0;
  for (int i = 0; i < l->n; i++) {
    hs_flow *f = &l->flows[i];
    /* A flow counts as finished when what is left is rounding noise of its size. */
    if (f->remaining <= 1e-9 * f->size && got < cap) done[got++] = f->id;
    else l->flows[kept++] = *f;
  }
  l->n = kept;
  return got;
}
