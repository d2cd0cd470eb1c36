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
    /* The next peer on the ring, without a division per participant. */
    hs_link_spec l = hs_netm_link(net, &peers[ws[k]], &peers[ws[k + 1 < n ? k + 1 : 0]]);
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

/* --- shared link ---------------------------------------------------------------------------- */

void hs_shared_link_init(hs_shared_link *l, double capacity) {
  memset(l, 0, sizeof *l);
  l->capacity = capacity;
}

void hs_shared_link_free(hs_shared_link *l) {
  for (int g = 0; g < l->n_groups; g++) free(l->groups[g].heap);
  free(l->groups);
  free(l->done);
  memset(l, 0, sizeof *l);
}

/* The heap order: earlier finish first; equal finishes by id, so that the heap's shape does
 * not depend on the order of equal keys. */
static int flow_before(const hs_flow *a, const hs_flow *b) {
  return a->finish < b->finish || (a->finish == b->finish && a->id < b->id);
}

static void heap_up(hs_flow *h, int i) {
  hs_flow x = h[i];
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!flow_before(&x, &h[p])) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = x;
}

static void heap_down(hs_flow *h, int n, int i) {
  hs_flow x = h[i];
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && flow_before(&h[c + 1], &h[c])) c++;
    if (!flow_before(&h[c], &x)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = x;
}

static int group_push(hs_flow_group *g, hs_flow f) {
  if (g->n == g->cap_n) {
    int nc = g->cap_n ? 2 * g->cap_n : 16;
    hs_flow *h = realloc(g->heap, (size_t)nc * sizeof *h);
    if (!h) return HS_ENOMEM;
    g->heap = h;
    g->cap_n = nc;
  }
  g->heap[g->n] = f;
  heap_up(g->heap, g->n++);
  return 0;
}

static hs_flow group_pop(hs_flow_group *g) {
  hs_flow top = g->heap[0];
  g->heap[0] = g->heap[--g->n];
  if (g->n > 1) heap_down(g->heap, g->n, 0);
  return top;
}

/* Moves a group's origin to now when `served` has grown large against its flows' sizes, so
 * that `finish - served` keeps its precision however long the link stays busy: with served
 * below 1024 times the largest size, its rounding is below 2.3e-13 of that size. O(n) in the
 * group, once per about 1024 of its flows' worth of service. */
static void group_rebase(hs_flow_group *g) {
  for (int i = 0; i < g->n; i++) g->heap[i].finish -= g->served;
  g->served = 0;
}

void hs_shared_link_advance(hs_shared_link *l, double now) {
  double dt = now - l->last;
  if (dt > 0)
    for (int i = 0; i < l->n_groups; i++) {
      hs_flow_group *g = &l->groups[i];
      if (!g->n) continue;
      g->served += g->rate * dt;
      if (g->served > 1024.0 * g->max_size) group_rebase(g);
    }
  l->last = now;
}

/* The group of flows capped at cap, created in cap order when it is the first. */
static hs_flow_group *group_of(hs_shared_link *l, double cap) {
  int lo = 0, hi = l->n_groups;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (l->groups[mid].cap < cap) lo = mid + 1;
    else hi = mid;
  }
  if (lo < l->n_groups && l->groups[lo].cap == cap) return &l->groups[lo];
  if (l->n_groups == l->cap_groups) {
    int nc = l->cap_groups ? 2 * l->cap_groups : 4;
    hs_flow_group *g = realloc(l->groups, (size_t)nc * sizeof *g);
    if (!g) return NULL;
    l->groups = g;
    l->cap_groups = nc;
  }
  memmove(&l->groups[lo + 1], &l->groups[lo], (size_t)(l->n_groups - lo) * sizeof *l->groups);
  l->n_groups++;
  l->groups[lo] = (hs_flow_group){.cap = cap};
  return &l->groups[lo];
}

int hs_shared_link_add(hs_shared_link *l, int64_t id, double bytes, double cap) {
  /* The list of finished flows has room for every flow, so that reaping never allocates. */
  if (l->n + (l->n_done - l->done_at) >= l->cap_done) {
    int nc = l->cap_done ? 2 * l->cap_done : 64;
    int64_t *d = realloc(l->done, (size_t)nc * sizeof *d);
    if (!d) return HS_ENOMEM;
    l->done = d;
    l->cap_done = nc;
  }
  hs_flow_group *g = group_of(l, cap);
  if (!g) return HS_ENOMEM;
  if (group_push(g, (hs_flow){.finish = g->served + bytes, .size = bytes, .id = id})) return HS_ENOMEM;
  if (bytes > g->max_size) g->max_size = bytes;
  l->n++;
  return 0;
}

double hs_shared_link_rates(hs_shared_link *l, double now) {
  l->epoch++;
  if (l->n == 0) return INFINITY;
  /* Progressive filling over the groups in cap order: a group whose cap is below the fair
   * share of what is left keeps its cap, and from the first that does not, all split the
   * rest equally. */
  double left = l->capacity;
  int k = 0, i = 0;
  for (; i < l->n_groups; i++) {
    hs_flow_group *g = &l->groups[i];
    if (!g->n) continue;
    double share = left / (double)(l->n - k);
    if (g->cap > share) break;
    g->rate = g->cap;
    left -= g->cap * (double)g->n;
    k += g->n;
  }
  if (k < l->n) {
    double share = left / (double)(l->n - k);
    for (; i < l->n_groups; i++) l->groups[i].rate = share;
  }
  double first = INFINITY;
  for (i = 0; i < l->n_groups; i++) {
    const hs_flow_group *g = &l->groups[i];
    if (!g->n) continue;
    double rem = g->heap[0].finish - g->served;
    double t = now + (rem > 0 ? rem : 0) / g->rate;
    if (t < first) first = t;
  }
  return first;
}

static int by_id(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* A flow counts as finished when what is left is rounding noise of its size, or would take
 * less time than the clock can resolve at `last` (a completion event could never move time on
 * to it). */
static int flow_finished(const hs_shared_link *l, const hs_flow_group *g, double rem, double size) {
  return rem <= 1e-9 * size || l->last + rem / g->rate <= l->last;
}

/* Moves every finished flow into l->done, by cap and then id. */
static void collect_done(hs_shared_link *l) {
  l->n_done = l->done_at = 0;
  for (int i = 0; i < l->n_groups; i++) {
    hs_flow_group *g = &l->groups[i];
    int first = l->n_done, kept = 0;
    hs_flow keep[8];
    /* The heap is in order of finish, so the finished flows are at its top: pop while the
     * top could be finished for the largest size of the group, and put back any popped flow
     * that is not finished for its own size (a small flow just ahead of a finished big one).
     * More than 8 such flows at one event is left for the next event. */
    while (g->n) {
      double rem = g->heap[0].finish - g->served;
      if (!flow_finished(l, g, rem, g->max_size)) break;
      if (!flow_finished(l, g, rem, g->heap[0].size)) {
        if (kept == 8) break;
        keep[kept++] = group_pop(g);
        continue;
      }
      l->done[l->n_done++] = group_pop(g).id; /* room for every flow: see hs_shared_link_add */
    }
    for (int j = 0; j < kept; j++) group_push(g, keep[j]); /* cannot fail: the slots exist */
    int got = l->n_done - first;
    l->n -= got;
    for (int j = first + 1; j < l->n_done; j++)
      if (l->done[j] < l->done[j - 1]) {
        qsort(&l->done[first], (size_t)got, sizeof *l->done, by_id);
        break;
      }
    if (!g->n) g->served = g->max_size = 0; /* an empty group starts its clock afresh */
  }
}

int hs_shared_link_reap(hs_shared_link *l, int64_t *done, int cap) {
  if (l->done_at == l->n_done) collect_done(l);
  int got = l->n_done - l->done_at;
  if (got > cap) got = cap > 0 ? cap : 0;
  memcpy(done, &l->done[l->done_at], (size_t)got * sizeof *done);
  l->done_at += got;
  return got;
}
