/* The cluster file loader. The text becomes a compact document tree (ctree below: scalars,
 * sequences and mappings, each with the line and column it starts at, for the messages), and
 * the schema is checked by hand on that tree: each mapping lists its allowed keys, each scalar
 * goes through core_units.
 *
 * Two front ends build the tree. libyaml (yaml_parser_load, then a copy of its document) reads
 * any YAML and gives every syntax error its message. A million-worker cluster file is 12 MB of
 * one-line flow mappings, which libyaml reads at about 280 instructions a byte into a document of
 * 33 times the text; so a scanner of its own (fast_*) reads first, accepting only a plain subset
 * (block mappings and sequences, flow mappings and sequences, single-line plain scalars,
 * comments, ASCII without tabs) that it reads as libyaml does, node for node and mark for mark,
 * and declining everything else, errors included, to libyaml. tests/test_config.c compares the
 * two trees on every bundled cluster file and on mutations of them. */
#include "core/core_config.h"

#include "core/core_units.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Limits that keep a hostile or mistyped file from exhausting memory. Raise them here. */
#define CFG_MAX_WORKERS (1LL << 22)  /* initial workers over all nodes */
#define CFG_MAX_COMPUTE_SLOTS (1LL << 22) /* a node's compute_slots: as many as there may be workers */
#define CFG_MAX_FILE (64L << 20)     /* bytes in a CSV trace (about 8 times that in memory) */
/* bytes in a YAML cluster file: libyaml's document takes about 33 times the text (16 MiB:
 * 0.55 GB; the plain subset's tree about 6 times), so the YAML limit is the lower one; long
 * event lists belong in a CSV trace. */
#define CFG_MAX_YAML (16L << 20)
#define CFG_MAX_BATCH 1000000000LL   /* samples */

#define CFG_DEFAULT_NET_BW (10e9 / 8) /* 10Gbps */
#define CFG_DEFAULT_NET_LAT 20e-6
#define CFG_DEFAULT_LINK_BW 16e9      /* 16GB/s: about PCIe 4.0 x16 */
#define CFG_DEFAULT_LINK_LAT 5e-6

#define EXP_TIME "a time like \"20us\" or \"4ms\""
#define EXP_BW "a bandwidth like \"10Gbps\" or \"1.25GB/s\""

/* Ranges checked at load time, so that no number in a cluster file can turn into an infinite
 * or NaN time later (a bandwidth of 1e-300, a latency of 1e308, a jitter cv above ~1e154
 * whose square overflows), nor into a sleep too long for time_t in real mode. Wide enough for
 * any real cluster. */
#define CFG_MIN_BW 1.0           /* bytes/s */
#define CFG_MAX_TIME 1e9         /* s (about 32 years): latencies, update times, event times */
#define CFG_MIN_FACTOR 1e-6      /* slowdown, comm_slowdown */
#define CFG_MAX_FACTOR 1e6
#define CFG_MAX_CV 100.0         /* jitter.cv */
#define EXP_BW_RANGE "a bandwidth of at least 1 B/s, like \"10Gbps\" or \"1.25GB/s\""
#define EXP_TIME_RANGE "a time of at most 1e9 s, like \"20us\" or \"4ms\""
#define EXP_BYTES "a size like \"8GiB\" or \"512MB\""

/* ---------- the document tree ---------- */

typedef enum cn_type { CN_SCALAR = 1, CN_SEQ = 2, CN_MAP = 3 } cn_type;

typedef struct cnode {
  size_t off;    /* scalar: its value at tree->chars + off, NUL-terminated; collection: its first
                  * child in tree->kid */
  uint32_t n;    /* scalar: bytes in the value; sequence: items; mapping: pairs (2n kids, key
                  * then value) */
  cn_type type;
  hs_srcpos pos; /* where the node starts (libyaml's start mark, 1-based) */
} cnode;

typedef struct ctree {
  cnode *node;
  size_t n_node, cap_node;
  uint32_t *kid; /* children of each collection, contiguous */
  size_t n_kid, cap_kid;
  char *chars;   /* scalar values */
  long root;     /* index of the root node; -1 for an empty document */
} ctree;

static void ctree_free(ctree *tr) {
  free(tr->node);
  free(tr->kid);
  free(tr->chars);
  memset(tr, 0, sizeof *tr);
}

typedef struct cfg {
  const char *file; /* name used in messages */
  const ctree *tr;
  hs_diag *d;
  hs_cluster_spec *s;
} cfg;

/* A name and the index it maps to, sorted by name for lookups and duplicate checks. */
typedef struct name_ix {
  const char *name;
  int ix;
} name_ix;

/* ---------- messages ---------- */

/* Writes FOUND for a message: a scalar quoted, shortened and with control characters escaped,
 * so that a binary or huge value cannot garble the one-line message. */
static void describe_found(const char *text, size_t len, char *buf, size_t cap) {
  size_t o = 0;
  buf[o++] = '"';
  for (size_t i = 0; i < len && o + 8 < cap; i++) {
    unsigned char ch = (unsigned char)text[i];
    if (i >= 60) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    if (ch == '"' || ch == '\\') {
      buf[o++] = '\\';
      buf[o++] = (char)ch;
    } else if (ch < 0x20 || ch == 0x7f) {
      o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    } else {
      buf[o++] = (char)ch;
    }
  }
  buf[o++] = '"';
  buf[o] = '\0';
}

static const char *cn_text(const cfg *c, const cnode *n) { return c->tr->chars + n->off; }

static void describe_node(const cfg *c, const cnode *n, char *buf, size_t cap) {
  if (!n) {
    snprintf(buf, cap, "nothing");
  } else if (n->type == CN_MAP) {
    snprintf(buf, cap, "a mapping");
  } else if (n->type == CN_SEQ) {
    snprintf(buf, cap, "a sequence");
  } else if (n->n == 0) {
    snprintf(buf, cap, "an empty value");
  } else {
    describe_found(cn_text(c, n), n->n, buf, cap);
  }
}

/* FILE:LINE:COL: FIELD: expected WHAT, got FOUND, with FOUND given as text (already quoted
 * where it is a value). */
static int cfg_vfail(const cfg *c, const cnode *at, const char *field, const char *got,
                     const char *fmt, va_list ap) {
  char what[600];
  vsnprintf(what, sizeof what, fmt, ap);
  int line = at ? at->pos.line : 1;
  int col = at ? at->pos.col : 1;
  return hs_diag_set(c->d, HS_EINVAL, "%s:%d:%d: %s: expected %s, got %s", c->file, line, col,
                     field[0] ? field : "(top level)", what, got);
}

/* As cfg_vfail; `at` gives the position, `found` the node described (NULL prints "nothing",
 * for a missing field reported at its parent). */
static int cfg_fail(const cfg *c, const cnode *at, const char *field,
                    const cnode *found, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int cfg_fail(const cfg *c, const cnode *at, const char *field,
                    const cnode *found, const char *fmt, ...) {
  char got[200];
  describe_node(c, found, got, sizeof got);
  va_list ap;
  va_start(ap, fmt);
  int rc = cfg_vfail(c, at, field, got, fmt, ap);
  va_end(ap);
  return rc;
}

static int cfg_fail_got(const cfg *c, const cnode *at, const char *field, const char *got,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int cfg_fail_got(const cfg *c, const cnode *at, const char *field, const char *got,
                        const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = cfg_vfail(c, at, field, got, fmt, ap);
  va_end(ap);
  return rc;
}

static hs_srcpos node_pos(const cnode *n) { return n->pos; }

/* ---------- tree helpers ---------- */

/* Item i of a sequence; key and value of pair i of a mapping. */
static const cnode *cn_item(const cfg *c, const cnode *seq, uint32_t i) {
  return &c->tr->node[c->tr->kid[seq->off + i]];
}
static const cnode *cn_key(const cfg *c, const cnode *map, uint32_t i) {
  return &c->tr->node[c->tr->kid[map->off + 2 * (size_t)i]];
}
static const cnode *cn_val(const cfg *c, const cnode *map, uint32_t i) {
  return &c->tr->node[c->tr->kid[map->off + 2 * (size_t)i + 1]];
}

/* A scalar's value, NULL for anything else. */
static const char *cn_scalar(const cfg *c, const cnode *n) {
  return (n && n->type == CN_SCALAR) ? cn_text(c, n) : NULL;
}

static int key_is(const cfg *c, const cnode *k, const char *name) {
  return k && k->type == CN_SCALAR && k->n == strlen(name) &&
         memcmp(cn_text(c, k), name, k->n) == 0;
}

static int expect_kind(const cfg *c, const cnode *n, const char *field, cn_type kind,
                       const char *what) {
  if (n && n->type == kind) return 0;
  return cfg_fail(c, n, field, n, "%s", what);
}

/* Checks that every key of a mapping is a scalar from `allowed` and appears once. The allowed
 * lists are short, so a linear scan per key is cheap and needs no allocation. */
/* "a, b, c": the allowed keys, for a message. */
static const char *keys_list(const char *const *allowed, char *list, size_t cap) {
  size_t used = 0;
  list[0] = '\0';
  for (const char *const *a = allowed; *a; a++)
    used += (size_t)snprintf(list + used, used < cap ? cap - used : 0, "%s%s",
                             a == allowed ? "" : ", ", *a);
  return list;
}

static int check_keys(const cfg *c, const cnode *map, const char *field,
                      const char *const *allowed) {
  /* Called for every mapping of the file (a million-worker cluster has a mapping per node
   * and device group): the message's list of allowed keys is made only on an error. */
  char list[400];
  unsigned seen = 0;
  for (uint32_t p = 0; p < map->n; p++) {
    const cnode *k = cn_key(c, map, p);
    char kf[512];
    if (!k || k->type != CN_SCALAR)
      return cfg_fail(c, k ? k : map, field, k, "a key, one of: %s", keys_list(allowed, list, sizeof list));
    int hit = -1;
    for (int i = 0; allowed[i]; i++)
      if (key_is(c, k, allowed[i])) {
        hit = i;
        break;
      }
    if (hit < 0) {
      snprintf(kf, sizeof kf, "%s%s%.*s", field, field[0] ? "." : "",
               (int)(k->n > 80 ? 80 : k->n),
               cn_text(c, k));
      return cfg_fail(c, k, kf, k, "one of: %s", keys_list(allowed, list, sizeof list));
    }
    if (seen & (1u << hit)) {
      snprintf(kf, sizeof kf, "%s%s%s", field, field[0] ? "." : "", allowed[hit]);
      return cfg_fail(c, k, kf, k, "each key once in a mapping (this one repeats)");
    }
    seen |= 1u << hit;
  }
  return 0;
}

/* The value under key in a mapping whose keys check_keys has accepted, or NULL. */
static const cnode *map_get(const cfg *c, const cnode *map, const char *key) {
  for (uint32_t p = 0; p < map->n; p++)
    if (key_is(c, cn_key(c, map, p), key)) return cn_val(c, map, p);
  return NULL;
}

/* buf = parent.key, cut short if it does not fit (a message is still useful when cut). */
static void join_field(char *buf, size_t cap, const char *parent, const char *key) {
  size_t o = 0;
  for (const char *p = parent; *p && o + 1 < cap; p++) buf[o++] = *p;
  if (parent[0] && o + 1 < cap) buf[o++] = '.';
  for (const char *p = key; *p && o + 1 < cap; p++) buf[o++] = *p;
  buf[o] = '\0';
}

/* buf = a b i c, i in decimal, cut short as snprintf would: "nodes[" 7 "]". parse_nodes names
 * every node and device group so (a million-worker file has 250,000), and snprintf's format
 * parsing cost 4,000 instructions per node. */
static void field_index(char *buf, size_t cap, const char *a, const char *b, long long i,
                        const char *c) {
  char num[24];
  int k = (int)sizeof num;
  unsigned long long u = i < 0 ? 0ULL - (unsigned long long)i : (unsigned long long)i;
  do num[--k] = (char)('0' + u % 10); while ((u /= 10) != 0);
  if (i < 0) num[--k] = '-';
  size_t o = 0;
  const char *parts[4] = {a, b, NULL, c};
  for (int p = 0; p < 4; p++) {
    const char *s = p == 2 ? num + k : parts[p];
    size_t n = p == 2 ? sizeof num - (size_t)k : strlen(s);
    for (size_t j = 0; j < n && o + 1 < cap; j++) buf[o++] = s[j];
  }
  buf[o] = '\0';
}

/* ---------- scalar fields ---------- */

typedef int (*unit_parser)(const char *, double *);

static int get_quantity(const cfg *c, const cnode *n, const char *field, unit_parser parse,
                        double *out, const char *what) {
  const char *v = cn_scalar(c, n);
  if (!v || parse(v, out) != 0) return cfg_fail(c, n, field, n, "%s", what);
  return 0;
}

/* A quantity in [lo, hi]. */
static int get_ranged(const cfg *c, const cnode *n, const char *field, unit_parser parse,
                      double lo, double hi, double *out, const char *what) {
  const char *v = cn_scalar(c, n);
  if (!v || parse(v, out) != 0 || !(*out >= lo && *out <= hi)) return cfg_fail(c, n, field, n, "%s", what);
  return 0;
}

/* A slowdown or comm_slowdown factor. */
static int get_factor(const cfg *c, const cnode *n, const char *field, double *out) {
  const char *v = cn_scalar(c, n);
  if (!v || hs_units_parse_number(v, out) != 0 || !(*out >= CFG_MIN_FACTOR && *out <= CFG_MAX_FACTOR))
    return cfg_fail(c, n, field, n, "a number from %g to %g", CFG_MIN_FACTOR, CFG_MAX_FACTOR);
  return 0;
}

static int get_count(const cfg *c, const cnode *n, const char *field, long long lo,
                     long long hi, long long *out) {
  const char *v = cn_scalar(c, n);
  if (!v || hs_units_parse_count(v, hi, out) != 0 || *out < lo)
    return cfg_fail(c, n, field, n, "an integer from %lld to %lld", lo, hi);
  return 0;
}

static int get_name(const cfg *c, const cnode *n, const char *field, char *out, size_t cap) {
  const char *v = cn_scalar(c, n);
  if (!v || n->n == 0 || n->n >= cap ||
      strlen(v) != n->n)
    return cfg_fail(c, n, field, n, "a non-empty string of at most %zu characters", cap - 1);
  memcpy(out, v, n->n + 1);
  return 0;
}

/* ---------- name tables ---------- */

static int cmp_name_ix(const void *a, const void *b) {
  const name_ix *x = a, *y = b;
  int r = strcmp(x->name, y->name);
  return r ? r : (x->ix > y->ix) - (x->ix < y->ix);
}

static int find_sorted(const name_ix *tab, int n, const char *name) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int r = strcmp(tab[mid].name, name);
    if (r == 0) return tab[mid].ix;
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* Lists up to a handful of valid names for a message, in file order. */
static void list_names(const char *first, size_t stride, int n, char *buf, size_t cap) {
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && o < cap; i++) {
    if (i == 12) {
      snprintf(buf + o, cap - o, ", ... (%d in all)", n);
      return;
    }
    o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", first + (size_t)i * stride);
  }
}

static void type_list(const hs_cluster_spec *s, char *buf, size_t cap) {
  list_names(s->types ? s->types[0].name : "", sizeof(hs_device_type), s->n_types, buf, cap);
}

static void node_list(const hs_cluster_spec *s, char *buf, size_t cap) {
  list_names(s->nodes ? s->nodes[0].name : "", sizeof(hs_node_spec), s->n_nodes, buf, cap);
}

/* ---------- compute for a model ---------- */

static int compute_fail(const hs_cluster_spec *s, const hs_compute_spec *cs, hs_diag *d,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int compute_fail(const hs_cluster_spec *s, const hs_compute_spec *cs, hs_diag *d,
                        const char *fmt, ...) {
  char what[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return hs_diag_set(d, HS_EINVAL, "%s:%d:%d: %s", s->path[0] ? s->path : s->name, cs->pos.line,
                     cs->pos.col, what);
}

hs_compute_spec *hs_cluster_compute_pick(hs_device_type *t, const char *model) {
  for (int k = 0; k < t->n_per_model; k++)
    if (strcmp(t->per_model[k].model, model) == 0) return &t->per_model[k];
  return &t->compute;
}

int hs_cluster_compute_for(const hs_cluster_spec *s, int type, const char *model,
                           double train_flops_per_sample, hs_compute_spec *out, hs_diag *d) {
  if (!s || !model || !out || type < 0 || type >= s->n_types)
    return hs_diag_set(d, HS_EINVAL, "hs_cluster_compute_for: bad arguments");
  const hs_device_type *t = &s->types[type];
  const hs_compute_spec *cs = hs_cluster_compute_pick(&s->types[type], model);
  if (cs->kind == HS_COMPUTE_NONE) {
    char list[400];
    list_names(t->per_model[0].model, sizeof *t->per_model, t->n_per_model, list, sizeof list);
    return compute_fail(s, cs, d, "device_types.%s.compute: no numbers for model %s (it has: %s; "
                        "add a `%s:` or a `default:` entry)", t->name, model, list, model);
  }
  if (cs->model[0] && strcmp(cs->model, model) != 0)
    return compute_fail(s, cs, d, "device_types.%s.compute: its numbers were measured for model "
                        "%s, not %s (give per-model compute: {%s: {...}, %s: {...}})", t->name,
                        cs->model, model, cs->model, model);
  *out = *cs;
  if (cs->kind == HS_COMPUTE_ROOFLINE) {
    if (!(train_flops_per_sample > 0))
      return compute_fail(s, cs, d, "device_types.%s.compute: a roofline needs the training FLOPs "
                          "per sample of model %s, which are not known (import a profile that "
                          "measures them, or give {t0, per_sample})", t->name, model);
    out->kind = HS_COMPUTE_INLINE;
    out->per_sample = train_flops_per_sample / (cs->flops * cs->efficiency);
    snprintf(out->model, sizeof out->model, "%s", model);
  }
  return 0;
}

int hs_cluster_resolve_compute(hs_cluster_spec *s, const char *model,
                               double train_flops_per_sample, int *unnamed, hs_diag *d) {
  if (!s || !model) return hs_diag_set(d, HS_EINVAL, "hs_cluster_resolve_compute: no input");
  int n_unnamed = 0;
  for (int i = 0; i < s->n_types; i++) {
    hs_device_type *t = &s->types[i];
    hs_compute_spec cs;
    int rc = hs_cluster_compute_for(s, i, model, train_flops_per_sample, &cs, d);
    if (rc) return rc;
    if (cs.kind == HS_COMPUTE_INLINE && !cs.model[0]) n_unnamed++;
    t->compute = cs;
    free(t->per_model);
    t->per_model = NULL;
    t->n_per_model = 0;
  }
  if (unnamed) *unnamed = n_unnamed;
  return 0;
}

int hs_cluster_find_type(const hs_cluster_spec *spec, const char *name) {
  if (!spec || !name) return -1;
  for (int i = 0; i < spec->n_types; i++)
    if (strcmp(spec->types[i].name, name) == 0) return i;
  return -1;
}

int hs_cluster_find_node(const hs_cluster_spec *spec, const char *name) {
  if (!spec || !name) return -1;
  for (int i = 0; i < spec->n_nodes; i++)
    if (strcmp(spec->nodes[i].name, name) == 0) return i;
  return -1;
}

int hs_cluster_all_workers(const hs_cluster_spec *spec) {
  int n = spec->n_workers;
  for (int i = 0; i < spec->n_events; i++) n += spec->events[i].kind == HS_EVENT_JOIN;
  return n;
}

int hs_cluster_worker_type(const hs_cluster_spec *spec, int w, int *node) {
  if (w < 0) return -1;
  if (w < spec->n_workers) {
    if (node) *node = spec->workers[w].node;
    return spec->workers[w].type;
  }
  int k = w - spec->n_workers;
  for (int i = 0; i < spec->n_events; i++)
    if (spec->events[i].kind == HS_EVENT_JOIN && k-- == 0) {
      if (node) *node = spec->events[i].node;
      return spec->events[i].type;
    }
  return -1;
}

/* ---------- sections ---------- */

static int parse_link(const cfg *c, const cnode *n, const char *field, hs_link_spec *link,
                      hs_link_calib *cal) {
  static const char *const keys[] = {"bandwidth", "latency", "calib", "backend", NULL};
  static const char *const backends[] = {"cpu", "tcp", "local", "nccl", "gloo", NULL};
  char f[512];
  int rc = expect_kind(c, n, field, CN_MAP,
                       "a mapping with keys bandwidth, latency (or calib)");
  if (!rc) rc = check_keys(c, n, field, keys);
  if (rc) return rc;
  const cnode *v, *b = map_get(c, n, "backend");
  if ((v = map_get(c, n, "calib"))) {
    if (map_get(c, n, "bandwidth") || map_get(c, n, "latency"))
      return cfg_fail_got(c, n, field, "both \"calib\" and inline numbers",
                          "either {bandwidth, latency} or {calib} (measured communication), not both");
    join_field(f, sizeof f, field, "calib");
    cal->pos = node_pos(v);
    if ((rc = get_name(c, v, f, cal->name, sizeof cal->name)) || !b) return rc;
    const char *t = cn_scalar(c, b);
    for (int i = 0; t && backends[i]; i++)
      if (strlen(t) == b->n && !strcmp(t, backends[i])) {
        snprintf(cal->backend, sizeof cal->backend, "%s", backends[i]);
        return 0;
      }
    join_field(f, sizeof f, field, "backend");
    return cfg_fail(c, b, f, b, "one of " HS_LINK_BACKENDS " (the communication backend whose measurements to take)");
  }
  if (b) {
    join_field(f, sizeof f, field, "backend");
    return cfg_fail_got(c, b, f, "a backend without calib",
                        "backend only with {calib: NAME} (it picks which of NAME's measurements)");
  }
  if ((v = map_get(c, n, "bandwidth"))) {
    join_field(f, sizeof f, field, "bandwidth");
    if ((rc = get_ranged(c, v, f, hs_units_parse_bandwidth, CFG_MIN_BW, HUGE_VAL, &link->bandwidth, EXP_BW_RANGE)))
      return rc;
  }
  if ((v = map_get(c, n, "latency"))) {
    join_field(f, sizeof f, field, "latency");
    if ((rc = get_ranged(c, v, f, hs_units_parse_time, 0, CFG_MAX_TIME, &link->latency, EXP_TIME_RANGE)))
      return rc;
  }
  return 0;
}

static int parse_ps(const cfg *c, const cnode *n) {
  static const char *const keys[] = {"bandwidth", "latency", "update_time", "accumulate_time", "apply_latency",
                                     "pull", NULL};
  hs_ps_spec *ps = &c->s->ps;
  int rc = expect_kind(c, n, "parameter_server", CN_MAP,
                       "a mapping with keys bandwidth, latency, update_time, accumulate_time, apply_latency, "
                       "pull");
  if (!rc) rc = check_keys(c, n, "parameter_server", keys);
  if (rc) return rc;
  ps->present = 1;
  ps->link = c->s->network;
  ps->update_time = 0;
  const cnode *v;
  if ((v = map_get(c, n, "bandwidth")) &&
      (rc = get_ranged(c, v, "parameter_server.bandwidth", hs_units_parse_bandwidth, CFG_MIN_BW,
                       HUGE_VAL, &ps->link.bandwidth, EXP_BW_RANGE)))
    return rc;
  if ((v = map_get(c, n, "latency")) &&
      (rc = get_ranged(c, v, "parameter_server.latency", hs_units_parse_time, 0, CFG_MAX_TIME,
                       &ps->link.latency, EXP_TIME_RANGE)))
    return rc;
  if ((v = map_get(c, n, "update_time")) &&
      (rc = get_ranged(c, v, "parameter_server.update_time", hs_units_parse_time, 0, CFG_MAX_TIME,
                       &ps->update_time, EXP_TIME_RANGE)))
    return rc;
  ps->accumulate_time = 0;
  if ((v = map_get(c, n, "accumulate_time")) &&
      (rc = get_ranged(c, v, "parameter_server.accumulate_time", hs_units_parse_time, 0, CFG_MAX_TIME,
                       &ps->accumulate_time, EXP_TIME_RANGE)))
    return rc;
  ps->apply_latency = 0;
  if ((v = map_get(c, n, "apply_latency")) &&
      (rc = get_ranged(c, v, "parameter_server.apply_latency", hs_units_parse_time, 0, CFG_MAX_TIME,
                       &ps->apply_latency, EXP_TIME_RANGE)))
    return rc;
  ps->pull = HS_PS_PULL_AT_ONCE;
  if ((v = map_get(c, n, "pull"))) {
    ps->pull_given = 1;
    const char *t = cn_scalar(c, v);
    if (t && strlen(t) == v->n && !strcmp(t, "after_updates")) ps->pull = HS_PS_PULL_AFTER_UPDATES;
    else if (!t || strlen(t) != v->n || strcmp(t, "at_once"))
      return cfg_fail(c, v, "parameter_server.pull", v, "at_once or after_updates");
  }
  return 0;
}

#define EXP_COMPUTE                                                                            \
  "a mapping {t0, per_sample}, {calib}, {profile}, {flops, efficiency, t0} or a mapping from "  \
  "model names (and default) to these"
#define EXP_FLOPS "a compute rate > 0 like \"15.7TFLOPS\" or \"900GFLOPS\""

/* One form: inline {t0, per_sample[, model]}, calib {calib}, profile {profile}, or roofline
 * {flops, efficiency[, t0]}. */
static int parse_compute_form(const cfg *c, const cnode *n, const char *field,
                              hs_compute_spec *cs) {
  static const char *const keys[] = {"t0", "per_sample", "model", "calib", "profile",
                                     "flops", "efficiency", NULL};
  char f[512];
  int rc = expect_kind(c, n, field, CN_MAP, EXP_COMPUTE);
  if (!rc) rc = check_keys(c, n, field, keys);
  if (rc) return rc;
  cs->pos = node_pos(n);
  const cnode *t0 = map_get(c, n, "t0"), *ps = map_get(c, n, "per_sample"),
              *cal = map_get(c, n, "calib"), *prof = map_get(c, n, "profile"),
              *fl = map_get(c, n, "flops"), *eff = map_get(c, n, "efficiency"),
              *model = map_get(c, n, "model");
  /* Exactly one form: the keys that start one, and the other keys each form allows. */
  int forms = !!cal + !!prof + !!fl + !!ps;
  if (forms > 1 || (forms == 0 && !t0)) {
    char got[96] = "neither";
    if (forms > 1)
      snprintf(got, sizeof got, "both \"%s\" and \"%s\"", cal ? "calib" : prof ? "profile" : "flops",
               ps ? "per_sample" : fl ? "flops" : "profile");
    return cfg_fail_got(c, n, field, got,
                        "one of {t0, per_sample} (an inline model), {calib} (a fitted model), "
                        "{profile} (a measured profile) or {flops, efficiency, t0} (a roofline), "
                        "not several");
  }
  if (cal || prof) {
    const cnode *extra = t0 ? t0 : eff ? eff : model;
    if (extra)
      return cfg_fail_got(c, extra, field, cal ? "\"calib\" with other keys" : "\"profile\" with other keys",
                          "{%s} alone (the measurements say which model they are for)",
                          cal ? "calib" : "profile");
    join_field(f, sizeof f, field, cal ? "calib" : "profile");
    if (cal) {
      cs->kind = HS_COMPUTE_CALIB;
      return get_name(c, cal, f, cs->calib, sizeof cs->calib);
    }
    cs->kind = HS_COMPUTE_PROFILE;
    return get_name(c, prof, f, cs->profile, sizeof cs->profile);
  }
  if (model) {
    join_field(f, sizeof f, field, "model");
    if ((rc = get_name(c, model, f, cs->model, sizeof cs->model))) return rc;
  }
  cs->t0 = 0;
  if (t0) {
    join_field(f, sizeof f, field, "t0");
    if ((rc = get_quantity(c, t0, f, hs_units_parse_time, &cs->t0, EXP_TIME))) return rc;
  }
  if (fl) {
    cs->kind = HS_COMPUTE_ROOFLINE;
    join_field(f, sizeof f, field, "flops");
    if ((rc = get_quantity(c, fl, f, hs_units_parse_flops, &cs->flops, EXP_FLOPS))) return rc;
    join_field(f, sizeof f, field, "efficiency");
    if (!eff)
      return cfg_fail(c, n, f, NULL, "the share of the peak a training step reaches, in (0, 1] "
                      "(required with flops)");
    const char *v = cn_scalar(c, eff);
    if (!v || hs_units_parse_number(v, &cs->efficiency) || !(cs->efficiency > 0) ||
        cs->efficiency > 1)
      return cfg_fail(c, eff, f, eff, "a number in (0, 1]");
    return 0;
  }
  if (eff) {
    join_field(f, sizeof f, field, "efficiency");
    return cfg_fail(c, eff, f, eff, "no efficiency without flops (a roofline {flops, efficiency, t0})");
  }
  if (!t0) {
    join_field(f, sizeof f, field, "t0");
    return cfg_fail(c, n, f, NULL, "%s (required with per_sample)", EXP_TIME);
  }
  if (!ps) {
    join_field(f, sizeof f, field, "per_sample");
    return cfg_fail(c, n, f, NULL, "a time > 0 like \"0.55ms\" (required with t0)");
  }
  cs->kind = HS_COMPUTE_INLINE;
  join_field(f, sizeof f, field, "per_sample");
  if ((rc = get_quantity(c, ps, f, hs_units_parse_time, &cs->per_sample,
                         "a time > 0 like \"0.55ms\"")))
    return rc;
  if (!(cs->per_sample > 0))
    return cfg_fail(c, ps, f, ps, "a time > 0 like \"0.55ms\"");
  return 0;
}

/* A mapping is per-model when one of its values is itself a mapping:
 *     compute: {resnet18: {t0: 5ms, per_sample: 3ms}, mlp: {calib: cpu}, default: {...}}
 * Its keys are model names and `default`; every value is a form. */
static int is_per_model(const cfg *c, const cnode *n) {
  if (!n || n->type != CN_MAP) return 0;
  for (uint32_t p = 0; p < n->n; p++) {
    const cnode *v = cn_val(c, n, p);
    if (v && v->type == CN_MAP) return 1;
  }
  return 0;
}

static int parse_per_model(const cfg *c, const cnode *n, const char *field, hs_device_type *t);

/* The type's compute; on failure its per-model table is freed here, since the type is not yet
 * counted in n_types for hs_cluster_spec_free. */
static int parse_compute(const cfg *c, const cnode *n, const char *field, hs_device_type *t) {
  if (!is_per_model(c, n)) return parse_compute_form(c, n, field, &t->compute);
  int rc = parse_per_model(c, n, field, t);
  if (rc) {
    free(t->per_model);
    t->per_model = NULL;
    t->n_per_model = 0;
  }
  return rc;
}

static int parse_per_model(const cfg *c, const cnode *n, const char *field, hs_device_type *t) {
  ptrdiff_t count = n->n;
  if (!(t->per_model = calloc((size_t)count, sizeof *t->per_model)))
    return hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->file);
  t->compute.kind = HS_COMPUTE_NONE;
  t->compute.pos = node_pos(n);
  int have_default = 0;
  for (uint32_t p = 0; p < n->n; p++) {
    const cnode *k = cn_key(c, n, p), *v = cn_val(c, n, p);
    char name[64], f[600];
    int rc = get_name(c, k, field, name, sizeof name);
    if (rc) return rc;
    join_field(f, sizeof f, field, name);
    int is_default = strcmp(name, "default") == 0;
    int dup = is_default ? have_default : 0;
    for (int i = 0; i < t->n_per_model && !dup; i++) dup = strcmp(t->per_model[i].model, name) == 0;
    if (dup) return cfg_fail(c, k, f, k, "each model once in a mapping (this one repeats)");
    hs_compute_spec *cs = is_default ? &t->compute : &t->per_model[t->n_per_model];
    memset(cs, 0, sizeof *cs);
    if ((rc = parse_compute_form(c, v, f, cs))) return rc;
    if (cs->model[0] && strcmp(cs->model, name) != 0 && !is_default) {
      char g[620];
      join_field(g, sizeof g, f, "model");
      return cfg_fail(c, map_get(c, v, "model"), g, map_get(c, v, "model"),
                      "the model of its key (\"%s\") or nothing", name);
    }
    if (is_default) {
      have_default = 1;
      continue;
    }
    snprintf(cs->model, sizeof cs->model, "%s", name);
    t->n_per_model++;
  }
  return 0;
}

/* A device string as `hetsim real --device` takes one for a worker's net: cpu, cuda:I or
 * cuda:I/sm=N (I a GPU index, N >= 1 SMs), the grammar of calib/cal_device.h (which core may
 * not include). */
static int device_string_ok(const char *s) {
  if (!strcmp(s, "cpu")) return 1;
  if (strncmp(s, "cuda:", 5)) return 0;
  s += 5;
  const char *d = s;
  while (*s >= '0' && *s <= '9') s++;
  if (s == d || s - d > 7) return 0;
  if (!*s) return 1;
  if (strncmp(s, "/sm=", 4)) return 0;
  s += 4;
  d = s;
  while (*s >= '0' && *s <= '9') s++;
  if (s == d || s - d > 7 || *s) return 0;
  return strtol(d, NULL, 10) >= 1;
}

static int parse_types(const cfg *c, const cnode *n, name_ix **index_out) {
  static const char *const keys[] = {"memory", "max_batch", "compute", "real_device", NULL};
  hs_cluster_spec *s = c->s;
  int rc = expect_kind(c, n, "device_types", CN_MAP,
                       "a mapping from device type names to {memory, max_batch, compute, real_device}");
  if (rc) return rc;
  ptrdiff_t count = n->n;
  if (count == 0) return cfg_fail(c, n, "device_types", NULL, "at least one device type");
  if (count > INT_MAX / 2) return cfg_fail(c, n, "device_types", NULL, "fewer device types");
  s->types = calloc((size_t)count, sizeof *s->types);
  name_ix *ix = calloc((size_t)count, sizeof *ix);
  *index_out = ix;
  if (!s->types || !ix) return hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->file);
  for (uint32_t p = 0; p < n->n; p++) {
    const cnode *k = cn_key(c, n, p), *v = cn_val(c, n, p);
    hs_device_type *t = &s->types[s->n_types];
    char f[512], g[600];
    if ((rc = get_name(c, k, "device_types (a type name)", t->name, sizeof t->name))) return rc;
    t->pos = node_pos(k);
    snprintf(f, sizeof f, "device_types.%s", t->name);
    if ((rc = expect_kind(c, v, f, CN_MAP, "a mapping with keys memory, max_batch, compute, real_device")))
      return rc;
    if ((rc = check_keys(c, v, f, keys))) return rc;
    const cnode *x;
    if ((x = map_get(c, v, "memory"))) {
      join_field(g, sizeof g, f, "memory");
      if ((rc = get_quantity(c, x, g, hs_units_parse_bytes, &t->memory, EXP_BYTES))) return rc;
    }
    if ((x = map_get(c, v, "max_batch"))) {
      long long mb;
      join_field(g, sizeof g, f, "max_batch");
      if ((rc = get_count(c, x, g, 0, CFG_MAX_BATCH, &mb))) return rc;
      t->max_batch = (int)mb;
    }
    join_field(g, sizeof g, f, "compute");
    if (!(x = map_get(c, v, "compute")))
      return cfg_fail(c, v, g, NULL, "%s (required)", EXP_COMPUTE);
    if ((rc = parse_compute(c, x, g, t))) return rc;
    if ((x = map_get(c, v, "real_device"))) {
      join_field(g, sizeof g, f, "real_device");
      const char *dev = cn_scalar(c, x);
      if (!dev || strlen(dev) != x->n || x->n >= sizeof t->real_device || !device_string_ok(dev))
        return cfg_fail(c, x, g, x, "a device for `hetsim real`: cpu, cuda:I or cuda:I/sm=N (N SMs of GPU I), "
                        "like \"cuda:0/sm=16\"");
      memcpy(t->real_device, dev, x->n + 1);
      t->real_device_pos = node_pos(x);
    }
    ix[s->n_types].name = t->name;
    ix[s->n_types].ix = s->n_types;
    s->n_types++;
  }
  qsort(ix, (size_t)s->n_types, sizeof *ix, cmp_name_ix);
  for (int i = 1; i < s->n_types; i++) {
    if (strcmp(ix[i].name, ix[i - 1].name) == 0) {
      const hs_device_type *t = &s->types[ix[i].ix], *first = &s->types[ix[i - 1].ix];
      return hs_diag_set(c->d, HS_EINVAL,
                         "%s:%d:%d: device_types.%s: expected each device type name once, got "
                         "\"%s\" again (first at line %d)",
                         c->file, t->pos.line, t->pos.col, t->name, t->name, first->pos.line);
    }
  }
  return 0;
}

/* A device group before expansion into workers. */
typedef struct group {
  int type, node;
  long long count;
  double slowdown, comm_slowdown;
} group;

static int parse_group(const cfg *c, const cnode *n, const char *field, const name_ix *tix,
                       group *g) {
  static const char *const keys[] = {"type", "count", "slowdown", "comm_slowdown", NULL};
  char f[512];
  int rc = expect_kind(c, n, field, CN_MAP,
                       "a mapping with keys type, count, slowdown, comm_slowdown");
  if (!rc) rc = check_keys(c, n, field, keys);
  if (rc) return rc;
  const cnode *v;
  join_field(f, sizeof f, field, "type");
  if (!(v = map_get(c, n, "type")))
    return cfg_fail(c, n, f, NULL, "a device type name (required)");
  const char *tn = cn_scalar(c, v);
  g->type = (tn && strlen(tn) == v->n) ? find_sorted(tix, c->s->n_types, tn) : -1;
  if (g->type < 0) {
    char list[400];
    type_list(c->s, list, sizeof list);
    return cfg_fail(c, v, f, v, "one of the device_types: %s", list);
  }
  g->count = 1;
  g->slowdown = 1;
  g->comm_slowdown = 1;
  if ((v = map_get(c, n, "count"))) {
    join_field(f, sizeof f, field, "count");
    if ((rc = get_count(c, v, f, 1, CFG_MAX_WORKERS, &g->count))) return rc;
  }
  if ((v = map_get(c, n, "slowdown"))) {
    join_field(f, sizeof f, field, "slowdown");
    if ((rc = get_factor(c, v, f, &g->slowdown))) return rc;
  }
  if ((v = map_get(c, n, "comm_slowdown"))) {
    join_field(f, sizeof f, field, "comm_slowdown");
    if ((rc = get_factor(c, v, f, &g->comm_slowdown))) return rc;
  }
  return 0;
}

static int parse_nodes(const cfg *c, const cnode *n, const name_ix *tix, name_ix **nix_out) {
  static const char *const keys[] = {"name", "link", "compute_slots", "devices", NULL};
  hs_cluster_spec *s = c->s;
  int rc = expect_kind(c, n, "nodes", CN_SEQ,
                       "a sequence of nodes, each {name, link, compute_slots, devices}");
  if (rc) return rc;
  ptrdiff_t count = n->n;
  if (count == 0) return cfg_fail(c, n, "nodes", NULL, "at least one node");
  if (count > INT_MAX / 2) return cfg_fail(c, n, "nodes", NULL, "fewer nodes");
  /* Groups are counted first so that the workers array is allocated once at its final size,
   * which matters when `count` runs to hundreds of thousands. */
  size_t ngroups = 0, gcap = 0;
  group *groups = NULL;
  s->nodes = calloc((size_t)count, sizeof *s->nodes);
  name_ix *nix = calloc((size_t)count, sizeof *nix);
  *nix_out = nix;
  if (!s->nodes || !nix) return hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->file);
  long long total = 0;
  for (ptrdiff_t i = 0; i < count; i++) {
    const cnode *nd = cn_item(c, n, (uint32_t)i);
    hs_node_spec *ns = &s->nodes[i];
    char f[128], g[512];
    field_index(f, sizeof f, "nodes", "[", (long long)i, "]");
    if ((rc = expect_kind(c, nd, f, CN_MAP, "a mapping with keys name, link, compute_slots, devices")))
      goto out;
    if ((rc = check_keys(c, nd, f, keys))) goto out;
    ns->pos = node_pos(nd);
    ns->link.bandwidth = CFG_DEFAULT_LINK_BW;
    ns->link.latency = CFG_DEFAULT_LINK_LAT;
    field_index(ns->name, sizeof ns->name, "node", "", (long long)i, "");
    const cnode *v;
    if ((v = map_get(c, nd, "name"))) {
      join_field(g, sizeof g, f, "name");
      if ((rc = get_name(c, v, g, ns->name, sizeof ns->name))) goto out;
    }
    if ((v = map_get(c, nd, "link"))) {
      join_field(g, sizeof g, f, "link");
      if ((rc = parse_link(c, v, g, &ns->link, &ns->link_calib))) goto out;
    }
    if ((v = map_get(c, nd, "compute_slots"))) {
      long long slots;
      join_field(g, sizeof g, f, "compute_slots");
      if ((rc = get_count(c, v, g, 1, CFG_MAX_COMPUTE_SLOTS, &slots))) goto out;
      ns->compute_slots = (int)slots;
    }
    s->n_nodes++;
    nix[i].name = ns->name;
    nix[i].ix = (int)i;
    if (!(v = map_get(c, nd, "devices"))) continue;
    join_field(g, sizeof g, f, "devices");
    if ((rc = expect_kind(c, v, g, CN_SEQ,
                          "a sequence of device groups, each {type, count, slowdown, "
                          "comm_slowdown}")))
      goto out;
    for (uint32_t it = 0; it < v->n; it++) {
      char h[600];
      field_index(h, sizeof h, g, "[", (long long)it, "]");
      if (ngroups == gcap) {
        size_t ncap = gcap ? 2 * gcap : 16;
        group *ng = realloc(groups, ncap * sizeof *ng);
        if (!ng) {
          rc = hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->file);
          goto out;
        }
        groups = ng;
        gcap = ncap;
      }
      group *gr = &groups[ngroups];
      const cnode *gn = cn_item(c, v, it);
      if ((rc = parse_group(c, gn, h, tix, gr))) goto out;
      gr->node = (int)i;
      total += gr->count;
      if (total > CFG_MAX_WORKERS) {
        char hc[640];
        join_field(hc, sizeof hc, h, "count");
        const cnode *cn = map_get(c, gn, "count");
        rc = cfg_fail(c, cn ? cn : gn, hc, cn,
                      "at most %lld workers in all (CFG_MAX_WORKERS in core/core_config.c)",
                      (long long)CFG_MAX_WORKERS);
        goto out;
      }
      ngroups++;
    }
  }
  qsort(nix, (size_t)s->n_nodes, sizeof *nix, cmp_name_ix);
  for (int i = 1; i < s->n_nodes; i++) {
    if (strcmp(nix[i].name, nix[i - 1].name) == 0) {
      int later = nix[i].ix > nix[i - 1].ix ? nix[i].ix : nix[i - 1].ix;
      int first = nix[i].ix > nix[i - 1].ix ? nix[i - 1].ix : nix[i].ix;
      const hs_node_spec *ns = &s->nodes[later];
      rc = hs_diag_set(c->d, HS_EINVAL,
                       "%s:%d:%d: nodes[%d].name: expected a node name used once, got \"%s\" "
                       "again (nodes[%d] has it)",
                       c->file, ns->pos.line, ns->pos.col, later, ns->name, first);
      goto out;
    }
  }
  if (total == 0) {
    rc = cfg_fail(c, n, "nodes", NULL, "at least one device in some node's devices");
    goto out;
  }
  s->workers = malloc((size_t)total * sizeof *s->workers);
  if (!s->workers) {
    rc = hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory for %lld workers", c->file, total);
    goto out;
  }
  for (size_t gi = 0; gi < ngroups; gi++) {
    hs_worker_spec w = {groups[gi].type, groups[gi].node, groups[gi].slowdown,
                        groups[gi].comm_slowdown};
    for (long long k = 0; k < groups[gi].count; k++) s->workers[s->n_workers++] = w;
  }
out:
  free(groups);
  return rc;
}

/* ---------- events ---------- */

/* Where a just-parsed event's worker index was written, for messages after sorting. */
typedef struct ev_src {
  hs_srcpos wpos;   /* the worker value (or the event itself for joins) */
  int index;        /* events[index] in the cluster file; CSV: unused */
  char found[32];   /* the worker value as written */
} ev_src;

typedef struct ev_order {
  double at;
  int orig;
} ev_order;

static int cmp_ev_order(const void *a, const void *b) {
  const ev_order *x = a, *y = b;
  if (x->at < y->at) return -1;
  if (x->at > y->at) return 1;
  return (x->orig > y->orig) - (x->orig < y->orig);
}

/* Sorts spec->events stably by time and checks that each worker index names a worker that
 * exists at that moment: an initial one or one that joined earlier, and has not left. Events
 * from first_new on are the ones just read from `file` (src describes them); csv selects the
 * message style. */
static int settle_events(hs_cluster_spec *s, int first_new, const ev_src *src, const char *file,
                         int csv, hs_diag *d) {
  int n = s->n_events, rc = 0;
  if (n == 0) return 0;
  ev_order *ord = malloc((size_t)n * sizeof *ord);
  hs_event_spec *sorted = malloc((size_t)n * sizeof *sorted);
  /* One flag per worker that can exist: initial ones plus every join. */
  size_t cap = (size_t)s->n_workers + (size_t)n;
  unsigned char *gone = calloc(cap, 1);
  double *left_at = NULL;
  if (!ord || !sorted || !gone) {
    rc = hs_diag_set(d, HS_ENOMEM, "%s: out of memory", file);
    goto out;
  }
  left_at = malloc(cap * sizeof *left_at);
  if (!left_at) {
    rc = hs_diag_set(d, HS_ENOMEM, "%s: out of memory", file);
    goto out;
  }
  for (int i = 0; i < n; i++) {
    ord[i].at = s->events[i].at;
    ord[i].orig = i;
  }
  qsort(ord, (size_t)n, sizeof *ord, cmp_ev_order);
  long long alive_total = s->n_workers;
  for (int k = 0; k < n; k++) {
    hs_event_spec *e = &s->events[ord[k].orig];
    sorted[k] = *e;
    if (e->kind == HS_EVENT_JOIN) {
      alive_total++;
      continue;
    }
    const char *why = NULL;
    char whybuf[200];
    if (e->worker < 0 || e->worker >= alive_total) {
      snprintf(whybuf, sizeof whybuf,
               "a worker index from 0 to %lld (the workers that exist at %gs)", alive_total - 1,
               e->at);
      why = whybuf;
    } else if (gone[e->worker]) {
      char at[32];
      snprintf(whybuf, sizeof whybuf, "a worker that has not left (worker %d left at %s)",
               e->worker, hs_units_format_time(left_at[e->worker], at, sizeof at));
      why = whybuf;
    }
    if (why) {
      int o = ord[k].orig;
      if (o >= first_new && src) {
        const ev_src *es = &src[o - first_new];
        if (csv)
          rc = hs_diag_set(d, HS_EINVAL, "%s:%d:%d: column \"worker\": expected %s, got \"%s\"",
                           file, es->wpos.line, es->wpos.col, why, es->found);
        else
          rc = hs_diag_set(d, HS_EINVAL, "%s:%d:%d: events[%d].%s: expected %s, got \"%s\"",
                           file, es->wpos.line, es->wpos.col, es->index,
                           e->kind == HS_EVENT_LEAVE ? "leave" : "worker", why, es->found);
      } else {
        rc = hs_diag_set(d, HS_EINVAL,
                         "%s: events: expected %s for the earlier event at %s:%d:%d once "
                         "this trace is merged, got \"%d\"",
                         file, why, s->path, e->pos.line, e->pos.col, e->worker);
      }
      goto out;
    }
    if (e->kind == HS_EVENT_LEAVE) {
      gone[e->worker] = 1;
      left_at[e->worker] = e->at;
    }
  }
  memcpy(s->events, sorted, (size_t)n * sizeof *sorted);
out:
  free(ord);
  free(sorted);
  free(gone);
  free(left_at);
  return rc;
}

static void copy_found(const cfg *c, const cnode *v, char *buf, size_t cap) {
  const char *t = cn_scalar(c, v);
  snprintf(buf, cap, "%.*s", t ? (int)(v->n > 30 ? 30 : v->n) : 0,
           t ? t : "");
}

static int parse_events(const cfg *c, const cnode *n, const name_ix *tix, const name_ix *nix) {
  static const char *const keys[] = {"at", "worker", "slowdown", "comm_slowdown", "join", "leave",
                                     NULL};
  static const char *const join_keys[] = {"type", "node", NULL};
  hs_cluster_spec *s = c->s;
  int rc = expect_kind(c, n, "events", CN_SEQ,
                       "a sequence of events, each {at, worker, slowdown|comm_slowdown} or "
                       "{at, join} or {at, leave}");
  if (rc) return rc;
  ptrdiff_t count = n->n;
  if (count == 0) return 0;
  if (count > INT_MAX / 4) return cfg_fail(c, n, "events", NULL, "fewer events");
  s->events = calloc((size_t)count, sizeof *s->events);
  ev_src *src = calloc((size_t)count, sizeof *src);
  if (!s->events || !src) {
    free(src);
    return hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->file);
  }
  for (ptrdiff_t i = 0; i < count; i++) {
    const cnode *en = cn_item(c, n, (uint32_t)i);
    hs_event_spec *e = &s->events[i];
    char f[64], g[128];
    snprintf(f, sizeof f, "events[%d]", (int)i);
    if ((rc = expect_kind(c, en, f, CN_MAP,
                          "a mapping {at, worker, slowdown|comm_slowdown} or {at, join} or "
                          "{at, leave}")))
      goto out;
    if ((rc = check_keys(c, en, f, keys))) goto out;
    e->pos = node_pos(en);
    e->worker = -1;
    e->slowdown = -1;
    e->comm_slowdown = -1;
    e->type = -1;
    e->node = -1;
    src[i].index = (int)i;
    src[i].wpos = e->pos;
    const cnode *at = map_get(c, en, "at"), *w = map_get(c, en, "worker"),
                *sl = map_get(c, en, "slowdown"), *cs = map_get(c, en, "comm_slowdown"),
                *jn = map_get(c, en, "join"), *lv = map_get(c, en, "leave");
    snprintf(g, sizeof g, "%s.at", f);
    if (!at) {
      rc = cfg_fail(c, en, g, NULL, "%s (required)", EXP_TIME);
      goto out;
    }
    if ((rc = get_ranged(c, at, g, hs_units_parse_time, 0, CFG_MAX_TIME, &e->at, EXP_TIME_RANGE))) goto out;
    int kinds = (sl || cs) + !!jn + !!lv;
    if (kinds != 1) {
      rc = cfg_fail_got(c, en, f,
                        kinds == 0 ? (w ? "only \"worker\"" : "none of them")
                                   : "several kinds at once",
                        "exactly one kind of event: slowdown and/or comm_slowdown (with "
                        "worker), join, or leave");
      goto out;
    }
    if (w && (jn || lv)) {
      snprintf(g, sizeof g, "%s.worker", f);
      rc = cfg_fail(c, w, g, w, "no worker key with %s (%s)", jn ? "join" : "leave",
                    jn ? "a joining worker gets the next index" : "write leave: INDEX");
      goto out;
    }
    long long idx;
    if (jn) {
      e->kind = HS_EVENT_JOIN;
      snprintf(g, sizeof g, "%s.join", f);
      if ((rc = expect_kind(c, jn, g, CN_MAP, "a mapping with keys type, node")) ||
          (rc = check_keys(c, jn, g, join_keys)))
        goto out;
      const cnode *ty = map_get(c, jn, "type"), *no = map_get(c, jn, "node");
      char h[160], list[400];
      snprintf(h, sizeof h, "%s.type", g);
      if (!ty) {
        rc = cfg_fail(c, jn, h, NULL, "a device type name (required)");
        goto out;
      }
      const char *tn = cn_scalar(c, ty);
      e->type = (tn && strlen(tn) == ty->n) ? find_sorted(tix, s->n_types, tn) : -1;
      if (e->type < 0) {
        type_list(s, list, sizeof list);
        rc = cfg_fail(c, ty, h, ty, "one of the device_types: %s", list);
        goto out;
      }
      snprintf(h, sizeof h, "%s.node", g);
      if (!no) {
        if (s->n_nodes == 1) {
          e->node = 0; /* one node: nothing to choose */
        } else {
          node_list(s, list, sizeof list);
          rc = cfg_fail(c, jn, h, NULL, "a node name, one of: %s (required)", list);
          goto out;
        }
      } else {
        const char *nn = cn_scalar(c, no);
        e->node = (nn && strlen(nn) == no->n) ? find_sorted(nix, s->n_nodes, nn) : -1;
        if (e->node < 0) {
          node_list(s, list, sizeof list);
          rc = cfg_fail(c, no, h, no, "a node name, one of: %s", list);
          goto out;
        }
      }
    } else if (lv) {
      e->kind = HS_EVENT_LEAVE;
      snprintf(g, sizeof g, "%s.leave", f);
      if (!cn_scalar(c, lv) || hs_units_parse_count(cn_scalar(c, lv), INT_MAX, &idx) != 0) {
        rc = cfg_fail(c, lv, g, lv, "a worker index (an integer >= 0)");
        goto out;
      }
      e->worker = (int)idx;
      src[i].wpos = node_pos(lv);
      copy_found(c, lv, src[i].found, sizeof src[i].found);
    } else {
      e->kind = HS_EVENT_SLOWDOWN;
      snprintf(g, sizeof g, "%s.worker", f);
      if (!w) {
        rc = cfg_fail(c, en, g, NULL, "a worker index (required with slowdown/comm_slowdown)");
        goto out;
      }
      if (!cn_scalar(c, w) || hs_units_parse_count(cn_scalar(c, w), INT_MAX, &idx) != 0) {
        rc = cfg_fail(c, w, g, w, "a worker index (an integer >= 0)");
        goto out;
      }
      e->worker = (int)idx;
      src[i].wpos = node_pos(w);
      copy_found(c, w, src[i].found, sizeof src[i].found);
      if (sl) {
        snprintf(g, sizeof g, "%s.slowdown", f);
        if ((rc = get_factor(c, sl, g, &e->slowdown))) goto out;
      }
      if (cs) {
        snprintf(g, sizeof g, "%s.comm_slowdown", f);
        if ((rc = get_factor(c, cs, g, &e->comm_slowdown))) goto out;
      }
    }
    s->n_events++;
  }
  rc = settle_events(s, 0, src, c->file, 0, c->d);
out:
  free(src);
  return rc;
}

/* ---------- top level ---------- */

static int parse_root(const cfg *c, const cnode *root) {
  static const char *const keys[] = {"name",  "network", "parameter_server", "device_types",
                                     "nodes", "jitter",  "events",           NULL};
  static const char *const jitter_keys[] = {"cv", "calib", NULL};
  hs_cluster_spec *s = c->s;
  name_ix *tix = NULL, *nix = NULL;
  int rc = expect_kind(c, root, "(top level)", CN_MAP,
                       "a mapping with keys name, network, device_types, nodes, ...");
  if (!rc) rc = check_keys(c, root, "", keys);
  if (rc) return rc;
  const cnode *v;
  if (!(v = map_get(c, root, "name"))) return cfg_fail(c, root, "name", NULL, "a cluster name (required)");
  if ((rc = get_name(c, v, "name", s->name, sizeof s->name))) return rc;

  s->network.bandwidth = CFG_DEFAULT_NET_BW;
  s->network.latency = CFG_DEFAULT_NET_LAT;
  const cnode *net = map_get(c, root, "network");
  if (net && (rc = parse_link(c, net, "network", &s->network, &s->network_calib))) return rc;

  if (!(v = map_get(c, root, "device_types")))
    return cfg_fail(c, root, "device_types", NULL,
                    "a mapping from device type names to {memory, max_batch, compute, real_device} (required)");
  if ((rc = parse_types(c, v, &tix))) goto out;

  if (!(v = map_get(c, root, "nodes"))) {
    rc = cfg_fail(c, root, "nodes", NULL, "a sequence of nodes (required)");
    goto out;
  }
  if ((rc = parse_nodes(c, v, tix, &nix))) goto out;
  if (!net && s->n_nodes > 1) {
    rc = cfg_fail(c, root, "network", NULL,
                  "a mapping {bandwidth, latency} (required with more than one node)");
    goto out;
  }

  if ((v = map_get(c, root, "parameter_server")) && (rc = parse_ps(c, v))) goto out;

  if ((v = map_get(c, root, "jitter"))) {
    if ((rc = expect_kind(c, v, "jitter", CN_MAP, "a mapping with key cv or calib")) ||
        (rc = check_keys(c, v, "jitter", jitter_keys)))
      goto out;
    const cnode *cv = map_get(c, v, "cv"), *cal = map_get(c, v, "calib");
    const char *t = cn_scalar(c, cv);
    if (cv && cal) {
      rc = cfg_fail_got(c, v, "jitter", "both \"cv\" and \"calib\"",
                        "either {cv} or {calib} (the spread of measured steps), not both");
      goto out;
    }
    if (cal) {
      s->jitter_calib.pos = node_pos(cal);
      if ((rc = get_name(c, cal, "jitter.calib", s->jitter_calib.name, sizeof s->jitter_calib.name)))
        goto out;
    }
    if (cv && (!t || hs_units_parse_number(t, &s->jitter_cv) != 0 || s->jitter_cv > CFG_MAX_CV)) {
      rc = cfg_fail(c, cv, "jitter.cv", cv, "a number from 0 to %g", CFG_MAX_CV);
      goto out;
    }
  }

  if ((v = map_get(c, root, "events")) && (rc = parse_events(c, v, tix, nix))) goto out;
out:
  free(tix);
  free(nix);
  return rc;
}

/* ---------- front end 1: libyaml ---------- */

/* Line and column (1-based) of a byte offset, for reader errors that carry only an offset. */
static hs_srcpos offset_pos(const char *text, size_t len, size_t off) {
  hs_srcpos p = {1, 1};
  for (size_t i = 0; i < off && i < len; i++) {
    if (text[i] == '\n') {
      p.line++;
      p.col = 1;
    } else {
      p.col++;
    }
  }
  return p;
}

static int yaml_fail(const char *file, hs_diag *d, const yaml_parser_t *p, const char *text,
                     size_t len) {
  if (p->error == YAML_MEMORY_ERROR)
    return hs_diag_set(d, HS_ENOMEM, "%s: out of memory while parsing YAML", file);
  const char *problem = p->problem ? p->problem : "unknown problem";
  if (p->error == YAML_READER_ERROR) {
    hs_srcpos pos = offset_pos(text, len, p->problem_offset);
    return hs_diag_set(d, HS_EINVAL,
                       "%s:%d:%d: YAML syntax error: %s (byte offset %zu, value 0x%x)", file,
                       pos.line, pos.col, problem, p->problem_offset,
                       (unsigned)(p->problem_value & 0xffffffff));
  }
  if (p->context)
    return hs_diag_set(d, HS_EINVAL, "%s:%d:%d: YAML syntax error: %s %s (line %d, column %d)",
                       file, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                       problem, p->context, (int)p->context_mark.line + 1,
                       (int)p->context_mark.column + 1);
  return hs_diag_set(d, HS_EINVAL, "%s:%d:%d: YAML syntax error: %s", file,
                     (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1, problem);
}

/* Copies a libyaml document into tr, node k for libyaml's node id k + 1 (an alias is the node it
 * names, as in libyaml's document, so no walk is needed and a cycle is harmless). */
static int tree_from_doc(ctree *tr, yaml_document_t *doc) {
  size_t nn = (size_t)(doc->nodes.top - doc->nodes.start), nk = 0, nc = 0, co = 0;
  tr->root = nn ? 0 : -1;
  for (size_t i = 0; i < nn; i++) {
    const yaml_node_t *y = &doc->nodes.start[i];
    if (y->type == YAML_SCALAR_NODE)
      nc += y->data.scalar.length + 1;
    else if (y->type == YAML_SEQUENCE_NODE)
      nk += (size_t)(y->data.sequence.items.top - y->data.sequence.items.start);
    else
      nk += 2 * (size_t)(y->data.mapping.pairs.top - y->data.mapping.pairs.start);
  }
  tr->node = malloc((nn ? nn : 1) * sizeof *tr->node);
  tr->kid = malloc((nk ? nk : 1) * sizeof *tr->kid);
  tr->chars = malloc(nc ? nc : 1);
  if (!tr->node || !tr->kid || !tr->chars) return HS_ENOMEM;
  for (size_t i = 0; i < nn; i++) {
    const yaml_node_t *y = &doc->nodes.start[i];
    cnode *n = &tr->node[i];
    n->pos.line = (int)y->start_mark.line + 1;
    n->pos.col = (int)y->start_mark.column + 1;
    if (y->type == YAML_SCALAR_NODE) {
      n->type = CN_SCALAR;
      n->off = co;
      memcpy(tr->chars + co, y->data.scalar.value, y->data.scalar.length);
      tr->chars[co + y->data.scalar.length] = '\0';
      n->n = (uint32_t)y->data.scalar.length;
      co += y->data.scalar.length + 1;
    } else if (y->type == YAML_SEQUENCE_NODE) {
      n->type = CN_SEQ;
      n->off = tr->n_kid;
      for (yaml_node_item_t *it = y->data.sequence.items.start; it < y->data.sequence.items.top; it++)
        tr->kid[tr->n_kid++] = (uint32_t)(*it - 1);
      n->n = (uint32_t)(tr->n_kid - n->off);
    } else {
      n->type = CN_MAP;
      n->off = tr->n_kid;
      for (yaml_node_pair_t *p = y->data.mapping.pairs.start; p < y->data.mapping.pairs.top; p++) {
        tr->kid[tr->n_kid++] = (uint32_t)(p->key - 1);
        tr->kid[tr->n_kid++] = (uint32_t)(p->value - 1);
      }
      n->n = (uint32_t)((tr->n_kid - n->off) / 2);
    }
  }
  tr->n_node = nn;
  return 0;
}

/* Reads the first document of text with libyaml into tr; the parser stays open for
 * second_document. */
static int tree_libyaml(ctree *tr, yaml_parser_t *parser, const char *file, const char *text,
                        size_t len, hs_diag *d) {
  yaml_document_t doc;
  yaml_parser_set_input_string(parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(parser, &doc)) return yaml_fail(file, d, parser, text, len);
  int rc = 0;
  if (tree_from_doc(tr, &doc)) rc = hs_diag_set(d, HS_ENOMEM, "%s: out of memory", file);
  yaml_document_delete(&doc);
  return rc;
}

/* A second document would be silently ignored; say so instead. */
static int second_document(yaml_parser_t *parser, const char *file, const char *text, size_t len,
                           hs_diag *d) {
  yaml_document_t extra;
  if (!yaml_parser_load(parser, &extra)) return yaml_fail(file, d, parser, text, len);
  int rc = 0;
  yaml_node_t *r2 = yaml_document_get_root_node(&extra);
  if (r2)
    rc = hs_diag_set(d, HS_EINVAL,
                     "%s:%d:%d: (top level): expected a single YAML document, got a second one",
                     file, (int)r2->start_mark.line + 1, (int)r2->start_mark.column + 1);
  yaml_document_delete(&extra);
  return rc;
}

/* ---------- front end 2: the plain subset, read without libyaml ---------- */

/* The subset (anything else, and any error, goes to libyaml):
 * - ASCII text of printable characters, spaces and '\n' (no tabs, no '\r');
 * - a root block mapping or flow mapping, and nothing after it but comments;
 * - block mappings whose keys are plain scalars followed on the same line by ':' and a blank;
 *   each value on the key's line (a plain scalar or a flow collection closed before the line
 *   ends), or below it: a more indented block mapping or sequence, or an indentless sequence;
 * - block sequences of "- " entries: a plain scalar, a flow collection, or a compact mapping;
 * - flow mappings {k: v, ...} and sequences [v, ...], over several lines if need be, without
 *   empty values or a trailing comma;
 * - plain scalars of letters, digits and _./~+()- with single spaces inside, starting with a
 *   letter, a digit or one of _./~+( (or - before such a character);
 * - comments after a blank, and blank lines.
 * Inside it libyaml's rules are the simple ones read here: a block collection's lines start at
 * its indentation exactly (a line between two indentations, or deeper without a new collection,
 * is declined), a plain scalar ends at ": ", " #", the line's end and in flow context at ,]}.
 * A plain value followed by a more indented line would continue on it (declined by the first
 * rule). Nodes start where libyaml's marks put them: a block mapping at its first key, a block
 * sequence at its first '-', a flow collection at its bracket, a scalar at its first
 * character. */

enum { FAST_MAX_DEPTH = 64, FAST_MAX_KEY = 1000, FAST_EOF = -1, FAST_NO = -2 };

typedef struct fast {
  const char *t;
  size_t len, i;    /* text; current position */
  size_t bol;       /* offset of the current line's first character */
  int line;         /* current line, 1-based */
  int depth;
  int block_indent; /* indentation of the innermost block collection (flow lines go deeper) */
  int nc;           /* after a block value: column of the next content line, FAST_EOF at the end */
  ctree *tr;
  uint32_t *stk;    /* children of the collections being read */
  size_t n_stk, cap_stk;
  int oom;
} fast;

/* The characters of a plain scalar in the subset: letters, digits and _./~+()-. */
static const unsigned char fast_plain_tab[256] = {
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1,
    ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1,
    ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1,
    ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1,
    ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1, ['_'] = 1, ['.'] = 1,
    ['/'] = 1, ['~'] = 1, ['+'] = 1, ['('] = 1, [')'] = 1, ['-'] = 1,
};

static int fast_plain_char(int ch) { return fast_plain_tab[ch & 0xff]; }

static int fast_at(const fast *p, size_t i) { return i < p->len ? (unsigned char)p->t[i] : 0; }

/* A plain scalar can start at i (a '-' only before another scalar character, not "- "). */
static int fast_starts_plain(const fast *p, size_t i) {
  int ch = fast_at(p, i);
  if (ch == '-' || ch == ')') return ch == '-' && fast_plain_char(fast_at(p, i + 1));
  return fast_plain_char(ch);
}

static int fast_grow(void **buf, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap : 1024;
  while (ncap < need) ncap *= 2;
  void *nb = realloc(*buf, ncap * size);
  if (!nb) return -1;
  *buf = nb;
  *cap = ncap;
  return 0;
}

static long fast_node(fast *p, cn_type type) {
  ctree *tr = p->tr;
  if (fast_grow((void **)&tr->node, &tr->cap_node, tr->n_node + 1, sizeof *tr->node)) {
    p->oom = 1;
    return FAST_NO;
  }
  cnode *n = &tr->node[tr->n_node];
  n->off = p->i;
  n->n = 0;
  n->type = type;
  n->pos.line = p->line;
  n->pos.col = (int)(p->i - p->bol) + 1;
  return (long)tr->n_node++;
}

static int fast_push(fast *p, long node) {
  if (fast_grow((void **)&p->stk, &p->cap_stk, p->n_stk + 1, sizeof *p->stk)) {
    p->oom = 1;
    return -1;
  }
  p->stk[p->n_stk++] = (uint32_t)node;
  return 0;
}

/* Moves the children pushed since `first` to the tree, as node's. */
static long fast_close(fast *p, long node, size_t first) {
  ctree *tr = p->tr;
  size_t k = p->n_stk - first;
  if (fast_grow((void **)&tr->kid, &tr->cap_kid, tr->n_kid + k, sizeof *tr->kid)) {
    p->oom = 1;
    return FAST_NO;
  }
  /* An empty collection moves nothing (and tr->kid may still be NULL, which memcpy may not
   * be given even for 0 bytes). */
  if (k) memcpy(tr->kid + tr->n_kid, p->stk + first, k * sizeof *p->stk);
  cnode *n = &tr->node[node];
  n->off = tr->n_kid;
  n->n = (uint32_t)(n->type == CN_MAP ? k / 2 : k);
  tr->n_kid += k;
  p->n_stk = first;
  return node;
}

/* From the start of a line: skips blank and comment lines; returns the column (0-based) of the
 * next content, FAST_EOF, or FAST_NO at a document marker. */
static int fast_skip_lines(fast *p) {
  for (;;) {
    while (fast_at(p, p->i) == ' ') p->i++;
    int ch = fast_at(p, p->i);
    if (p->i >= p->len) return FAST_EOF;
    if (ch == '#')
      while (p->i < p->len && p->t[p->i] != '\n') p->i++;
    if (p->i < p->len && p->t[p->i] == '\n') {
      p->i++;
      p->line++;
      p->bol = p->i;
      continue;
    }
    if (p->i >= p->len) return FAST_EOF;
    if (p->i == p->bol && p->i + 3 <= p->len &&
        (memcmp(p->t + p->i, "---", 3) == 0 || memcmp(p->t + p->i, "...", 3) == 0))
      return FAST_NO;
    return (int)(p->i - p->bol);
  }
}

/* After a block value: blanks, perhaps a comment, then the line's end; then to the next content
 * line. Returns its column, FAST_EOF or FAST_NO. */
static int fast_end_line(fast *p) {
  while (fast_at(p, p->i) == ' ') p->i++;
  if (fast_at(p, p->i) == '#') {
    if (p->t[p->i - 1] != ' ') return FAST_NO; /* "}#": a comment needs a blank before it */
    while (p->i < p->len && p->t[p->i] != '\n') p->i++;
  }
  if (p->i < p->len && p->t[p->i] != '\n') return FAST_NO;
  return fast_skip_lines(p);
}

/* Inside a flow collection: blanks, line breaks and comments. 0, or FAST_NO. */
static int fast_flow_space(fast *p) {
  for (;;) {
    int ch = fast_at(p, p->i);
    if (ch == ' ') {
      p->i++;
    } else if (ch == '\n') {
      p->i++;
      p->line++;
      p->bol = p->i;
      while (fast_at(p, p->i) == ' ') p->i++;
      /* A flow line as deep as the block around it, or a document marker: libyaml's rules for
       * these are not the simple ones. */
      if (p->i < p->len && p->t[p->i] != '\n' && p->t[p->i] != '#' &&
          (int)(p->i - p->bol) <= p->block_indent)
        return FAST_NO;
    } else if (ch == '#') {
      int prev = p->i > 0 ? (unsigned char)p->t[p->i - 1] : '\n';
      if (prev != ' ' && prev != '\n') return FAST_NO;
      while (p->i < p->len && p->t[p->i] != '\n') p->i++;
    } else {
      return 0;
    }
  }
}

/* Scans a plain scalar at p->i without reading it: *end is where its value ends, *after the
 * first character after it and the blanks that follow. 0, or FAST_NO when none starts here. */
static int fast_scan_plain(const fast *p, size_t *end, size_t *after) {
  if (!fast_starts_plain(p, p->i)) return FAST_NO;
  size_t i = p->i;
  for (;;) {
    while (i < p->len && fast_plain_tab[(unsigned char)p->t[i]]) i++;
    size_t j = i;
    while (fast_at(p, j) == ' ') j++;
    if (j == i || !fast_plain_char(fast_at(p, j))) {
      *end = i;
      *after = j;
      return 0;
    }
    i = j; /* a space inside the scalar */
  }
}

/* A plain scalar from p->i that ends at `after` (fast_scan_plain) is a key: ':' and a blank
 * follow it on its line, within libyaml's reach for a simple key. */
static int fast_key_ends(const fast *p, size_t after) {
  int next = fast_at(p, after + 1);
  return fast_at(p, after) == ':' && (next == ' ' || next == '\n') && after - p->i <= FAST_MAX_KEY;
}

/* A key can start at p->i. */
static int fast_is_key(const fast *p) {
  size_t end, j;
  return fast_scan_plain(p, &end, &j) == 0 && fast_key_ends(p, j);
}

/* A plain scalar at p->i; flow selects the flow context's ends, key a mapping key (which must
 * be followed, on its line, by ':' and a blank: p->i is left after the ':'). */
static long fast_plain(fast *p, int flow, int key) {
  size_t start = p->i, end, j;
  if (fast_scan_plain(p, &end, &j) || (key && !fast_key_ends(p, j))) return FAST_NO;
  long n = fast_node(p, CN_SCALAR);
  if (n < 0) return n;
  p->tr->node[n].n = (uint32_t)(end - start);
  p->i = end;
  if (key) {
    p->i = j + 1;
    return n;
  }
  int ch = fast_at(p, j);
  if (j >= p->len || ch == '\n' || (ch == '#' && j > end)) return n;
  if (flow && (ch == ',' || ch == ']' || ch == '}')) return n;
  return FAST_NO; /* ':' (a value cannot hold one), '#' right after, other characters */
}

static long fast_flow(fast *p);

/* A value in flow context. */
static long fast_flow_value(fast *p) {
  int ch = fast_at(p, p->i);
  return ch == '{' || ch == '[' ? fast_flow(p) : fast_plain(p, 1, 0);
}

static long fast_flow(fast *p) {
  if (++p->depth > FAST_MAX_DEPTH) return FAST_NO;
  int map = p->t[p->i] == '{';
  int close = map ? '}' : ']';
  long n = fast_node(p, map ? CN_MAP : CN_SEQ);
  if (n < 0) return n;
  size_t first = p->n_stk;
  p->i++;
  if (fast_flow_space(p)) return FAST_NO;
  if (fast_at(p, p->i) != close) {
    for (;;) {
      long k = FAST_NO, v;
      if (map) {
        if ((k = fast_plain(p, 1, 1)) < 0 || fast_push(p, k) || fast_flow_space(p)) return FAST_NO;
      }
      if ((v = fast_flow_value(p)) < 0 || fast_push(p, v) || fast_flow_space(p)) return FAST_NO;
      if (fast_at(p, p->i) == close) break;
      if (fast_at(p, p->i) != ',') return FAST_NO;
      p->i++;
      if (fast_flow_space(p) || fast_at(p, p->i) == close) return FAST_NO;
    }
  }
  p->i++;
  p->depth--;
  return fast_close(p, n, first);
}

static long fast_bmap(fast *p, int col);

/* After "- " or "key: " on a block line: a flow collection or plain scalar to the line's end,
 * or (in a sequence) a compact mapping. Sets p->nc. */
static long fast_inline_value(fast *p, int seq) {
  int ch = fast_at(p, p->i);
  long v;
  if (seq && fast_is_key(p)) return fast_bmap(p, (int)(p->i - p->bol)); /* "- key: ..." */
  v = ch == '{' || ch == '[' ? fast_flow(p) : fast_plain(p, 0, 0);
  if (v < 0) return v;
  p->nc = fast_end_line(p);
  return p->nc == FAST_NO ? FAST_NO : v;
}

/* A block sequence whose first '-' is at p->i, column col; indentless: it is a mapping's value
 * at the mapping's own indentation. Leaves p->nc at the first line after it. */
static long fast_bseq(fast *p, int col, int indentless) {
  if (++p->depth > FAST_MAX_DEPTH) return FAST_NO;
  long n = fast_node(p, CN_SEQ);
  if (n < 0) return n;
  size_t first = p->n_stk;
  int outer = p->block_indent;
  p->block_indent = col;
  for (;;) {
    p->i++; /* the '-' */
    if (fast_at(p, p->i) != ' ') return FAST_NO;
    while (fast_at(p, p->i) == ' ') p->i++;
    long v = fast_inline_value(p, 1);
    if (v < 0 || p->nc == FAST_NO || fast_push(p, v)) return FAST_NO;
    if (p->nc == col && p->t[p->i] == '-' && fast_at(p, p->i + 1) == ' ') continue;
    if (p->nc < col || (p->nc == col && indentless)) break;
    return FAST_NO;
  }
  p->block_indent = outer;
  p->depth--;
  return fast_close(p, n, first);
}

/* A block mapping whose first key is at p->i, column col. Leaves p->nc at the first line after
 * it. */
static long fast_bmap(fast *p, int col) {
  if (++p->depth > FAST_MAX_DEPTH) return FAST_NO;
  long n = fast_node(p, CN_MAP);
  if (n < 0) return n;
  size_t first = p->n_stk;
  int outer = p->block_indent;
  p->block_indent = col;
  for (;;) {
    long k = fast_plain(p, 0, 1), v;
    if (k < 0 || fast_push(p, k)) return FAST_NO;
    while (fast_at(p, p->i) == ' ') p->i++;
    int ch = fast_at(p, p->i);
    if (p->i >= p->len || ch == '\n' || ch == '#') { /* the value is below */
      int nc = fast_end_line(p);
      if (nc > col && p->t[p->i] == '-' && fast_at(p, p->i + 1) == ' ')
        v = fast_bseq(p, nc, 0);
      else if (nc > col)
        v = fast_bmap(p, nc);
      else if (nc == col && p->t[p->i] == '-' && fast_at(p, p->i + 1) == ' ')
        v = fast_bseq(p, nc, 1);
      else
        return FAST_NO; /* an empty value, or worse */
    } else {
      v = fast_inline_value(p, 0);
    }
    if (v < 0 || p->nc == FAST_NO || fast_push(p, v)) return FAST_NO;
    if (p->nc == col) {
      if (p->t[p->i] == '-') return FAST_NO;
      continue;
    }
    if (p->nc < col) break;
    return FAST_NO;
  }
  p->block_indent = outer;
  p->depth--;
  return fast_close(p, n, first);
}

/* Reads text into tr when it lies in the subset: 1 read, 0 declined (tr emptied), HS_ENOMEM. */
static int tree_fast(ctree *tr, const char *text, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)text[i];
    if ((ch < 0x20 && ch != '\n') || ch > 0x7e) return 0;
  }
  fast p = {.t = text, .len = len, .line = 1, .block_indent = -1, .tr = tr};
  long root = FAST_NO;
  int col = fast_skip_lines(&p);
  if (col >= 0 && p.t[p.i] == '{') {
    root = fast_flow(&p);
    if (root >= 0 && fast_end_line(&p) != FAST_EOF) root = FAST_NO;
  } else if (col >= 0) {
    root = fast_bmap(&p, col);
    if (root >= 0 && p.nc != FAST_EOF) root = FAST_NO;
  }
  free(p.stk);
  if (root < 0) {
    ctree_free(tr);
    return p.oom ? HS_ENOMEM : 0;
  }
  /* Values in place: a copy of the text with a NUL after each scalar (the character there ends
   * the scalar, so it belongs to no other). */
  if (!(tr->chars = malloc(len + 1))) {
    ctree_free(tr);
    return HS_ENOMEM;
  }
  memcpy(tr->chars, text, len);
  tr->chars[len] = '\0';
  for (size_t i = 0; i < tr->n_node; i++)
    if (tr->node[i].type == CN_SCALAR) tr->chars[tr->node[i].off + tr->node[i].n] = '\0';
  tr->root = root;
  return 1;
}

/* ---------- the front ends checked against each other ---------- */

static int same_tree(const ctree *a, long x, const ctree *b, long y, char *why, size_t cap) {
  const cnode *m = &a->node[x], *n = &b->node[y];
  if (m->type != n->type || m->n != n->n || m->pos.line != n->pos.line || m->pos.col != n->pos.col ||
      (m->type == CN_SCALAR && memcmp(a->chars + m->off, b->chars + n->off, m->n) != 0)) {
    snprintf(why, cap, "node at %d:%d (type %d, %u long) read as one at %d:%d (type %d, %u long)",
             m->pos.line, m->pos.col, (int)m->type, m->n, n->pos.line, n->pos.col, (int)n->type,
             n->n);
    return 0;
  }
  size_t kids = m->type == CN_MAP ? 2 * (size_t)m->n : m->type == CN_SEQ ? m->n : 0;
  for (size_t k = 0; k < kids; k++)
    if (!same_tree(a, a->kid[m->off + k], b, b->kid[n->off + k], why, cap)) return 0;
  return 1;
}

int hs_cluster_fast_check(const char *text, size_t len, char *why, size_t cap) {
  ctree fast_tr = {0}, lib_tr = {0};
  char *copy = malloc(len + 1);
  if (!copy) return -1;
  memcpy(copy, text, len);
  copy[len] = '\0';
  snprintf(why, cap, "declined");
  int r = tree_fast(&fast_tr, copy, len);
  if (r == 1) {
    yaml_parser_t parser;
    hs_diag d = {0};
    r = -1;
    if (yaml_parser_initialize(&parser)) {
      if (tree_libyaml(&lib_tr, &parser, "text", copy, len, &d) != 0) {
        snprintf(why, cap, "libyaml refuses what was read: %s", d.msg);
      } else if (second_document(&parser, "text", copy, len, &d) != 0) {
        snprintf(why, cap, "libyaml finds more: %s", d.msg);
      } else if (lib_tr.root < 0) {
        snprintf(why, cap, "libyaml reads an empty document");
      } else if (same_tree(&fast_tr, fast_tr.root, &lib_tr, lib_tr.root, why, cap)) {
        snprintf(why, cap, "read, same tree");
        r = 1;
      }
      yaml_parser_delete(&parser);
    }
  } else if (r != 0) {
    r = -1;
  }
  ctree_free(&fast_tr);
  ctree_free(&lib_tr);
  free(copy);
  return r;
}

/* ---------- the file ---------- */

int hs_cluster_parse(hs_cluster_spec *out, const char *name, const char *text, size_t len,
                     hs_diag *d) {
  if (!out) return hs_diag_set(d, HS_EINVAL, "hs_cluster_parse: no output");
  memset(out, 0, sizeof *out);
  if (!name) name = "(cluster)";
  if (!text) return hs_diag_set(d, HS_EINVAL, "%s: no text", name);
  snprintf(out->path, sizeof out->path, "%s", name);
  out->text = malloc(len + 1);
  if (!out->text) return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", name);
  memcpy(out->text, text, len);
  out->text[len] = '\0';

  ctree tr = {0};
  cfg c = {out->path, &tr, d, out};
  yaml_parser_t parser;
  int libyaml = 0, rc = tree_fast(&tr, out->text, len);
  if (rc == HS_ENOMEM) {
    rc = hs_diag_set(d, HS_ENOMEM, "%s: out of memory", name);
  } else if (rc == 0) {
    if (!yaml_parser_initialize(&parser)) {
      rc = hs_diag_set(d, HS_ENOMEM, "%s: out of memory", name);
    } else {
      libyaml = 1;
      rc = tree_libyaml(&tr, &parser, out->path, out->text, len, d);
    }
  } else {
    rc = 0;
  }
  if (!rc && tr.root < 0)
    rc = hs_diag_set(d, HS_EINVAL,
                     "%s:1:1: (top level): expected a cluster description (a mapping with keys "
                     "name, device_types, nodes, ...), got an empty file",
                     out->path);
  if (!rc) rc = parse_root(&c, &tr.node[tr.root]);
  if (!rc && libyaml) rc = second_document(&parser, out->path, out->text, len, d);
  if (libyaml) yaml_parser_delete(&parser);
  ctree_free(&tr);
  if (rc) hs_cluster_spec_free(out);
  return rc;
}

/* Reads a whole file into a NUL-terminated buffer the caller frees. */
static int read_file(const char *path, long max, char **text, size_t *len, hs_diag *d) {
  *text = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return hs_diag_set(d, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  int rc = 0;
  if (!buf) {
    fclose(f);
    return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", path);
  }
  for (;;) {
    if (n + 1 >= cap) {
      if (cap >= (size_t)max) {
        rc = hs_diag_set(d, HS_EINVAL, "%s: expected a file of at most %ld bytes, got more%s",
                         path, max, max == CFG_MAX_YAML ? " (put long event lists in a CSV trace, --events)" : "");
        break;
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        rc = hs_diag_set(d, HS_ENOMEM, "%s: out of memory", path);
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - 1 - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) rc = hs_diag_set(d, HS_EIO, "%s: cannot read: %s", path, strerror(errno));
      break;
    }
  }
  fclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return 0;
}

int hs_cluster_load(hs_cluster_spec *out, const char *path, hs_diag *d) {
  if (!out) return hs_diag_set(d, HS_EINVAL, "hs_cluster_load: no output");
  memset(out, 0, sizeof *out);
  if (!path) return hs_diag_set(d, HS_EINVAL, "hs_cluster_load: no path");
  char *text;
  size_t len;
  int rc = read_file(path, CFG_MAX_YAML, &text, &len, d);
  if (rc) return rc;
  rc = hs_cluster_parse(out, path, text, len, d);
  free(text);
  return rc;
}

void hs_cluster_spec_free(hs_cluster_spec *spec) {
  if (!spec) return;
  free(spec->text);
  for (int i = 0; spec->types && i < spec->n_types; i++) free(spec->types[i].per_model);
  free(spec->types);
  free(spec->nodes);
  free(spec->workers);
  free(spec->events);
  memset(spec, 0, sizeof *spec);
}

/* ---------- CSV event traces ---------- */

enum { CSV_AT, CSV_EVENT, CSV_WORKER, CSV_VALUE, CSV_TYPE, CSV_NODE, CSV_NCOLS };
static const char *const csv_cols[CSV_NCOLS] = {"at", "event", "worker", "value", "type", "node"};

typedef struct csv_field {
  char *text; /* trimmed, NUL-terminated inside the line buffer */
  int col;    /* 1-based column of the field's first character */
} csv_field;

static int csv_fail(const char *file, int line, const csv_field *f, int which, const char *fmt,
                    hs_diag *d, ...) __attribute__((format(printf, 5, 7)));
static int csv_fail(const char *file, int line, const csv_field *f, int which, const char *fmt,
                    hs_diag *d, ...) {
  char what[400], got[200];
  va_list ap;
  va_start(ap, d);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *t = f[which].text;
  if (t[0])
    describe_found(t, strlen(t), got, sizeof got);
  else
    snprintf(got, sizeof got, "an empty field");
  return hs_diag_set(d, HS_EINVAL, "%s:%d:%d: column \"%s\": expected %s, got %s", file, line,
                     f[which].col, csv_cols[which], what, got);
}

/* Splits a line in place at commas and trims blanks; returns the number of fields found. */
static int csv_split(char *line, csv_field *f, int max) {
  int n = 0;
  char *p = line;
  for (;;) {
    char *start = p;
    while (*p && *p != ',') p++;
    char *end = p;
    int more = *p == ',';
    if (n < max) {
      while (start < end && (*start == ' ' || *start == '\t')) start++;
      f[n].col = (int)(start - line) + 1;
      while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
      *end = '\0';
      f[n].text = start;
    }
    n++;
    if (!more) break;
    p++;
  }
  return n;
}

static int csv_event(hs_cluster_spec *s, const char *file, int line, csv_field *f, hs_event_spec *e,
                     ev_src *src, hs_diag *d) {
  const char *kind = f[CSV_EVENT].text;
  memset(e, 0, sizeof *e);
  e->worker = -1;
  e->slowdown = -1;
  e->comm_slowdown = -1;
  e->type = -1;
  e->node = -1;
  e->pos.line = line;
  e->pos.col = 1;
  src->wpos = e->pos;
  src->index = -1;
  if (hs_units_parse_time(f[CSV_AT].text, &e->at) != 0 || e->at > CFG_MAX_TIME)
    return csv_fail(file, line, f, CSV_AT, "%s", d, EXP_TIME_RANGE);
  int need_worker = 0, need_value = 0, is_join = 0;
  if (strcmp(kind, "slowdown") == 0 || strcmp(kind, "comm_slowdown") == 0) {
    e->kind = HS_EVENT_SLOWDOWN;
    need_worker = need_value = 1;
  } else if (strcmp(kind, "leave") == 0) {
    e->kind = HS_EVENT_LEAVE;
    need_worker = 1;
  } else if (strcmp(kind, "join") == 0) {
    e->kind = HS_EVENT_JOIN;
    is_join = 1;
  } else {
    return csv_fail(file, line, f, CSV_EVENT, "one of: slowdown, comm_slowdown, join, leave", d);
  }
  /* Columns an event kind does not use must stay empty, so a shifted column cannot pass. */
  if (!need_worker && f[CSV_WORKER].text[0])
    return csv_fail(file, line, f, CSV_WORKER, "an empty field for a %s event", d, kind);
  if (!need_value && f[CSV_VALUE].text[0])
    return csv_fail(file, line, f, CSV_VALUE, "an empty field for a %s event", d, kind);
  if (!is_join && f[CSV_TYPE].text[0])
    return csv_fail(file, line, f, CSV_TYPE, "an empty field for a %s event", d, kind);
  if (!is_join && f[CSV_NODE].text[0])
    return csv_fail(file, line, f, CSV_NODE, "an empty field for a %s event", d, kind);
  if (need_worker) {
    long long w;
    if (hs_units_parse_count(f[CSV_WORKER].text, INT_MAX, &w) != 0)
      return csv_fail(file, line, f, CSV_WORKER, "a worker index (an integer >= 0)", d);
    e->worker = (int)w;
    src->wpos.col = f[CSV_WORKER].col;
    snprintf(src->found, sizeof src->found, "%s", f[CSV_WORKER].text);
  }
  if (need_value) {
    double v;
    if (hs_units_parse_number(f[CSV_VALUE].text, &v) != 0 || !(v >= CFG_MIN_FACTOR && v <= CFG_MAX_FACTOR))
      return csv_fail(file, line, f, CSV_VALUE, "a slowdown factor (a number from %g to %g)", d,
                      CFG_MIN_FACTOR, CFG_MAX_FACTOR);
    if (kind[0] == 's')
      e->slowdown = v;
    else
      e->comm_slowdown = v;
  }
  if (is_join) {
    char list[400];
    e->type = hs_cluster_find_type(s, f[CSV_TYPE].text);
    if (e->type < 0) {
      type_list(s, list, sizeof list);
      return csv_fail(file, line, f, CSV_TYPE, "one of the device_types: %s", d, list);
    }
    if (f[CSV_NODE].text[0] == '\0' && s->n_nodes == 1) {
      e->node = 0;
    } else {
      e->node = hs_cluster_find_node(s, f[CSV_NODE].text);
      if (e->node < 0) {
        node_list(s, list, sizeof list);
        return csv_fail(file, line, f, CSV_NODE, "a node name, one of: %s", d, list);
      }
    }
  }
  return 0;
}

int hs_cluster_load_events_csv(hs_cluster_spec *spec, const char *path, hs_diag *d) {
  if (!spec || !path) return hs_diag_set(d, HS_EINVAL, "hs_cluster_load_events_csv: no input");
  char *text;
  size_t len;
  int rc = read_file(path, CFG_MAX_FILE, &text, &len, d);
  if (rc) return rc;
  if (strlen(text) != len) {
    free(text);
    return hs_diag_set(d, HS_EINVAL, "%s: expected a text file, got a NUL byte", path);
  }
  /* Upper bound on data lines, so the arrays are allocated once. */
  size_t maxlines = 1;
  for (size_t i = 0; i < len; i++) maxlines += text[i] == '\n';
  int old_n = spec->n_events;
  if (maxlines > (size_t)(INT_MAX / 2 - old_n)) {
    free(text);
    return hs_diag_set(d, HS_EINVAL, "%s: expected fewer lines, got %zu", path, maxlines);
  }
  hs_event_spec *ev = realloc(spec->events, ((size_t)old_n + maxlines) * sizeof *ev);
  ev_src *src = calloc(maxlines, sizeof *src);
  if (ev) spec->events = ev;
  if (!ev || !src) {
    free(text);
    free(src);
    return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", path);
  }
  int header_seen = 0, line = 0, n_new = 0;
  char *p = text;
  while (*p) {
    char *eol = strchr(p, '\n');
    char *next = eol ? eol + 1 : p + strlen(p);
    if (eol) *eol = '\0';
    if (eol && eol > p && eol[-1] == '\r') eol[-1] = '\0';
    line++;
    char *q = p;
    while (*q == ' ' || *q == '\t') q++;
    if (*q == '\0' || *q == '#') {
      p = next;
      continue;
    }
    char first[200];
    if (!header_seen) describe_found(p, strlen(p), first, sizeof first);
    csv_field f[CSV_NCOLS];
    int nf = csv_split(p, f, CSV_NCOLS);
    if (!header_seen) {
      int ok = nf == CSV_NCOLS;
      for (int i = 0; ok && i < CSV_NCOLS; i++) ok = strcmp(f[i].text, csv_cols[i]) == 0;
      if (!ok) {
        rc = hs_diag_set(d, HS_EINVAL,
                         "%s:%d:1: header: expected \"at,event,worker,value,type,node\", got %s",
                         path, line, first);
        goto fail;
      }
      header_seen = 1;
      p = next;
      continue;
    }
    if (nf != CSV_NCOLS) {
      rc = hs_diag_set(d, HS_EINVAL,
                       "%s:%d:1: line: expected 6 fields (at,event,worker,value,type,node), got %d",
                       path, line, nf);
      goto fail;
    }
    if ((rc = csv_event(spec, path, line, f, &spec->events[old_n + n_new], &src[n_new], d)))
      goto fail;
    n_new++;
    p = next;
  }
  if (!header_seen) {
    rc = hs_diag_set(d, HS_EINVAL,
                     "%s:1:1: header: expected \"at,event,worker,value,type,node\", got an empty "
                     "file",
                     path);
    goto fail;
  }
  spec->n_events = old_n + n_new;
  rc = settle_events(spec, old_n, src, path, 1, d);
  if (rc) spec->n_events = old_n; /* settle_events leaves the array untouched on failure */
fail:
  free(src);
  free(text);
  return rc;
}
