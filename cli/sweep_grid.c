#include "cli/sweep_grid.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/core_config.h"
#include "core/core_hash.h"
#include "policies/pol_registry.h"

/* Grid files are small; a bigger one is a mistake, not a grid. */
enum { GRID_MAX_FILE = 1 << 20, GRID_MAX_POINTS = 1000000 };

/* The run settings a grid may give, in the order of the canonical text. */
typedef struct setting_def {
  const char *key, *option;
  int file;   /* 1: a path resolved against the grid's folder; 2: the same, content hashed */
  int list;   /* 1: may be a list of values, one set of points per value */
} setting_def;
static const setting_def setting_defs[] = {
    {"model", "--model", 0, 1},
    {"global_batch", "--global-batch", 0, 1},
    {"iterations", "--iterations", 0, 0},
    {"epochs", "--epochs", 0, 0},
    {"sim_time", "--sim-time", 0, 0},
    {"target_loss", "--target-loss", 0, 0},
    {"target_accuracy", "--target-accuracy", 0, 0},
    {"convergence", "--convergence", 0, 1},
    {"convergence_params", "--convergence-params", 2, 0},
    {"calib", "--calib", 1, 0},
    {"events", "--events", 2, 0},
    {"store", "--store", 0, 0},
    {"max_events", "--max-events", 0, 0},
    {"max_iterations", "--max-iterations", 0, 0},
    {"max_step_rows", "--max-step-rows", 0, 0},
    {NULL, NULL, 0, 0},
};
_Static_assert(sizeof setting_defs / sizeof setting_defs[0] <= HS_SWEEP_SETTINGS_MAX + 1,
               "settings table fits hs_sweep_grid.settings");

/* A growable string. */
typedef struct sbuf {
  char *s;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (k < 0) {
    b->oom = 1;
    return;
  }
  if (b->n + (size_t)k + 1 > b->cap) {
    size_t nc = (b->cap ? b->cap * 2 : 256) + (size_t)k;
    char *ns = realloc(b->s, nc);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = nc;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

typedef struct gctx {
  const char *path;
  yaml_document_t *doc;
  char *dir;            /* the grid's folder with a trailing '/', or "" */
  hs_diag *d;
} gctx;

static int gfail(gctx *c, const yaml_node_t *n, const char *field, const char *expected) {
  char found[80] = "";
  if (!n) snprintf(found, sizeof found, "nothing");
  else if (n->type == YAML_SCALAR_NODE)
    snprintf(found, sizeof found, "\"%.60s\"", (const char *)n->data.scalar.value);
  else snprintf(found, sizeof found, "a %s", n->type == YAML_MAPPING_NODE ? "mapping" : "sequence");
  return hs_diag_set(c->d, HS_EINVAL, "%s:%d:%d: %s: expected %s, got %s", c->path,
                     n ? (int)n->start_mark.line + 1 : 1, n ? (int)n->start_mark.column + 1 : 1,
                     field, expected, found);
}

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static char *resolve(gctx *c, const char *p) {
  size_t l = strlen(c->dir) + strlen(p) + 1;
  char *r = malloc(l);
  if (r) snprintf(r, l, "%s%s", p[0] == '/' ? "" : c->dir, p);
  return r;
}

/* Items of a node that may be one scalar or a sequence of them: allocates *items (free it
 * with free) and returns the count, or -1 (with a message) on a bad node. */
static int items_of(gctx *c, yaml_node_t *n, const char *field, const char *what,
                    yaml_node_t ***items) {
  *items = NULL;
  int seq = n->type == YAML_SEQUENCE_NODE;
  if (!seq && n->type != YAML_SCALAR_NODE) {
    gfail(c, n, field, what);
    return -1;
  }
  int k = seq ? (int)(n->data.sequence.items.top - n->data.sequence.items.start) : 1;
  if (k == 0) {
    gfail(c, n, field, "a non-empty list");
    return -1;
  }
  yaml_node_t **arr = calloc((size_t)k, sizeof *arr);
  if (!arr) {
    hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->path);
    return -1;
  }
  for (int i = 0; i < k; i++) {
    arr[i] = seq ? yaml_document_get_node(c->doc, n->data.sequence.items.start[i]) : n;
    if (!scalar(arr[i]) && !(arr[i] && arr[i]->type == YAML_MAPPING_NODE)) {
      char f[96];
      snprintf(f, sizeof f, "%s[%d]", field, i);
      gfail(c, arr[i], f, what);
      free(arr);
      return -1;
    }
  }
  *items = arr;
  return k;
}

/* The expanded policy specs of the grid. */
typedef struct specs {
  int n, cap;
  char **s;
  char **canon;
} specs;

static int specs_add(gctx *c, specs *sp, const yaml_node_t *at, const char *field, const char *spec) {
  const hs_policy *pol = NULL;
  hs_params params;
  hs_diag pd = {0};
  if (hs_policy_parse(spec, &pol, &params, &pd))
    return hs_diag_set(c->d, HS_EINVAL, "%s:%d:%d: %s: %s", c->path, (int)at->start_mark.line + 1,
                       (int)at->start_mark.column + 1, field, pd.msg);
  char pstr[1024];
  hs_params_format(&params, pstr, sizeof pstr);
  if (sp->n == sp->cap) {
    int nc = sp->cap ? 2 * sp->cap : 16;
    char **ns = realloc(sp->s, (size_t)nc * sizeof *ns);
    if (ns) sp->s = ns;
    char **nk = realloc(sp->canon, (size_t)nc * sizeof *nk);
    if (nk) sp->canon = nk;
    if (!ns || !nk) return hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->path);
    sp->cap = nc;
  }
  sbuf k = {0};
  sb_add(&k, "%s:%s", pol->name, pstr);
  sp->s[sp->n] = strdup(spec);
  sp->canon[sp->n] = k.s;
  if (!sp->s[sp->n] || !k.s || k.oom) {
    free(sp->s[sp->n]);
    free(k.s);
    return hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->path);
  }
  sp->n++;
  return 0;
}

/* {name: NAME, params: {k: v | [v, ...], ...}}: one spec per combination of values. */
static int policy_mapping(gctx *c, specs *sp, yaml_node_t *n, const char *field) {
  const char *name = NULL;
  yaml_node_t *params = NULL;
  for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
    yaml_node_t *k = yaml_document_get_node(c->doc, pr->key);
    yaml_node_t *v = yaml_document_get_node(c->doc, pr->value);
    const char *ks = scalar(k);
    if (ks && !strcmp(ks, "name")) {
      if (!(name = scalar(v))) return gfail(c, v, field, "a policy name");
    } else if (ks && !strcmp(ks, "params")) {
      if (!v || v->type != YAML_MAPPING_NODE) return gfail(c, v, field, "a mapping of parameters");
      params = v;
    } else {
      return gfail(c, k, field, "name or params");
    }
  }
  if (!name) return gfail(c, n, field, "a mapping with name:");
  int np = params ? (int)(params->data.mapping.pairs.top - params->data.mapping.pairs.start) : 0;
  if (np > 16) return gfail(c, params, field, "at most 16 parameters");
  yaml_node_t **vals[16];
  yaml_node_t *vnode[16];
  const char *keys[16];
  int cnt[16], idx[16];
  int rc = 0, nv = 0;
  for (int i = 0; i < np; i++) {
    yaml_node_pair_t *pr = &params->data.mapping.pairs.start[i];
    yaml_node_t *k = yaml_document_get_node(c->doc, pr->key);
    vnode[i] = yaml_document_get_node(c->doc, pr->value);
    if (!(keys[i] = scalar(k))) {
      rc = gfail(c, k, field, "a parameter name");
      break;
    }
    char f[160];
    snprintf(f, sizeof f, "%s.params.%s", field, keys[i]);
    cnt[i] = vnode[i] ? items_of(c, vnode[i], f, "a value or a list of values", &vals[i]) : -1;
    if (cnt[i] < 0) {
      if (!vnode[i]) rc = gfail(c, vnode[i], f, "a value");
      rc = HS_EINVAL;
      break;
    }
    nv = i + 1;
    for (int j = 0; j < cnt[i]; j++)
      if (!scalar(vals[i][j])) {
        rc = gfail(c, vals[i][j], f, "a scalar value");
        break;
      }
    if (rc) break;
    idx[i] = 0;
  }
  while (!rc) {
    sbuf s = {0};
    sb_add(&s, "%s", name);
    for (int i = 0; i < np; i++)
      sb_add(&s, "%s%s=%s", i ? "," : ":", keys[i], scalar(vals[i][idx[i]]));
    if (s.oom) rc = hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->path);
    else rc = specs_add(c, sp, n, field, s.s);
    free(s.s);
    int i = np - 1;
    while (i >= 0 && ++idx[i] == cnt[i]) idx[i--] = 0;
    if (i < 0) break;
  }
  for (int i = 0; i < nv; i++) free(vals[i]);
  return rc;
}

static int load_policies(gctx *c, yaml_node_t *n, specs *sp) {
  yaml_node_t **items;
  int k = items_of(c, n, "policies", "a policy spec like ssp:s=2 or {name: ssp, params: {s: [1, 2]}}", &items);
  if (k < 0) return HS_EINVAL;
  int rc = 0;
  for (int i = 0; i < k && !rc; i++) {
    char f[48];
    snprintf(f, sizeof f, "policies[%d]", i);
    if (scalar(items[i])) rc = specs_add(c, sp, items[i], f, scalar(items[i]));
    else rc = policy_mapping(c, sp, items[i], f);
  }
  free(items);
  return rc;
}

static int load_seeds(gctx *c, yaml_node_t *n, uint64_t **seeds, int *ns) {
  yaml_node_t **items;
  int k = items_of(c, n, "seeds", "a seed or a list of seeds", &items);
  if (k < 0) return HS_EINVAL;
  *seeds = calloc((size_t)k, sizeof **seeds);
  int rc = *seeds ? 0 : hs_diag_set(c->d, HS_ENOMEM, "%s: out of memory", c->path);
  for (int i = 0; i < k && !rc; i++) {
    const char *s = scalar(items[i]);
    char *end = NULL;
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || s[0] == '-') {
      char f[32];
      snprintf(f, sizeof f, "seeds[%d]", i);
      rc = gfail(c, items[i], f, "a non-negative integer");
    }
    (*seeds)[i] = v;
  }
  *ns = k;
  free(items);
  return rc;
}

static int hash_file(gctx *c, const char *path, const yaml_node_t *at, const char *field,
                     uint64_t *h) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return hs_diag_set(c->d, HS_EINVAL, "%s:%d:%d: %s: cannot open %s: %s", c->path,
                       (int)at->start_mark.line + 1, (int)at->start_mark.column + 1, field, path,
                       strerror(errno));
  *h = HS_FNV64_INIT;
  unsigned char buf[8192];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) *h = hs_fnv64(*h, buf, got);
  fclose(f);
  return 0;
}

/* One setting's value, or for a list setting its values (each a non-empty scalar, at most
 * HS_SWEEP_VALUES_MAX, no value twice). */
static int setting_values(gctx *c, hs_sweep_setting *s, const setting_def *sd, yaml_node_t *v) {
  s->option = sd->option;
  s->key = sd->key;
  int seq = v->type == YAML_SEQUENCE_NODE;
  if (seq && !sd->list) return gfail(c, v, sd->key, "one value (only model, global_batch and convergence take lists)");
  if (!seq && (!scalar(v) || !*scalar(v))) return gfail(c, v, sd->key, seq ? "a list of values" : "one value");
  int n = seq ? (int)(v->data.sequence.items.top - v->data.sequence.items.start) : 1;
  if (n < 1) return gfail(c, v, sd->key, "a non-empty list of values");
  if (n > HS_SWEEP_VALUES_MAX) {
    char what[64];
    snprintf(what, sizeof what, "at most %d values", HS_SWEEP_VALUES_MAX);
    return gfail(c, v, sd->key, what);
  }
  if (!(s->values = calloc((size_t)n, sizeof *s->values))) return hs_diag_set(c->d, HS_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    yaml_node_t *it = seq ? yaml_document_get_node(c->doc, v->data.sequence.items.start[i]) : v;
    char f[96];
    snprintf(f, sizeof f, "%s[%d]", sd->key, i);
    if (!scalar(it) || !*scalar(it)) return gfail(c, it, seq ? f : sd->key, "one value");
    for (int j = 0; j < i; j++)
      if (!strcmp(s->values[j], scalar(it))) return gfail(c, it, f, "each value once");
    s->values[i] = sd->file ? resolve(c, scalar(it)) : strdup(scalar(it));
    if (!s->values[i]) return hs_diag_set(c->d, HS_ENOMEM, "out of memory");
    s->n_values = i + 1;
  }
  s->value = s->values[0];
  return 0;
}

static int grid_parse(hs_sweep_grid *g, gctx *c) {
  yaml_node_t *root = yaml_document_get_root_node(c->doc);
  if (!root || root->type != YAML_MAPPING_NODE) return gfail(c, root, "grid", "a mapping");
  yaml_node_t *clusters = NULL, *policies = NULL, *seeds = NULL;
  const yaml_node_t *at[HS_SWEEP_SETTINGS_MAX];
  int rc = 0;
  for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top; pr++) {
    yaml_node_t *k = yaml_document_get_node(c->doc, pr->key);
    yaml_node_t *v = yaml_document_get_node(c->doc, pr->value);
    const char *ks = scalar(k);
    if (!ks) return gfail(c, k, "grid", "a key");
    if (!v) return gfail(c, v, ks, "a value");
    if (!strcmp(ks, "name")) {
      if (!scalar(v)) return gfail(c, v, ks, "a name");
      free(g->name);
      if (!(g->name = strdup(scalar(v)))) return hs_diag_set(c->d, HS_ENOMEM, "out of memory");
    } else if (!strcmp(ks, "clusters") || !strcmp(ks, "cluster")) {
      clusters = v;
    } else if (!strcmp(ks, "policies") || !strcmp(ks, "policy")) {
      policies = v;
    } else if (!strcmp(ks, "seeds") || !strcmp(ks, "seed")) {
      seeds = v;
    } else {
      const setting_def *sd = setting_defs;
      while (sd->key && strcmp(sd->key, ks)) sd++;
      if (!sd->key)
        return gfail(c, k, "grid",
                     "one of name, clusters, policies, seeds, model, global_batch, iterations, "
                     "epochs, sim_time, target_loss, target_accuracy, convergence, "
                     "convergence_params, calib, events, store, max_events, max_iterations, "
                     "max_step_rows");
      for (int i = 0; i < g->n_settings; i++)
        if (g->settings[i].option == sd->option) return gfail(c, k, ks, "each setting once");
      hs_sweep_setting *st = &g->settings[g->n_settings];
      at[g->n_settings++] = v; /* counted first, so that a failure frees what it filled */
      if ((rc = setting_values(c, st, sd, v))) return rc;
    }
  }
  if (!clusters) return gfail(c, root, "clusters", "a cluster file or a list of them");
  if (!policies) return gfail(c, root, "policies", "a policy or a list of them");
  int have_model = 0, have_gb = 0, have_stop = 0, have_store = 0;
  for (int i = 0; i < g->n_settings; i++) {
    const char *o = g->settings[i].option;
    have_model |= !strcmp(o, "--model");
    have_gb |= !strcmp(o, "--global-batch");
    have_store |= !strcmp(o, "--store");
    have_stop |= !strcmp(o, "--iterations") || !strcmp(o, "--epochs") || !strcmp(o, "--sim-time") ||
                 !strcmp(o, "--target-loss") || !strcmp(o, "--target-accuracy");
  }
  if (!have_model) return gfail(c, root, "model", "a model name (hetsim models lists them)");
  if (!have_gb) return gfail(c, root, "global_batch", "the samples per global iteration");
  if (!have_stop)
    return gfail(c, root, "grid",
                 "a stop condition: iterations, epochs, sim_time, target_loss or target_accuracy");
  if (!have_store) {
    /* A sweep keeps summaries unless told otherwise: thousands of runs of step rows add up. */
    hs_sweep_setting *st = &g->settings[g->n_settings];
    st->option = "--store";
    st->key = "store";
    if (!(st->values = calloc(1, sizeof *st->values)) || !(st->values[0] = strdup("summary")))
      return hs_diag_set(c->d, HS_ENOMEM, "out of memory");
    st->value = st->values[0];
    st->n_values = 1;
    at[g->n_settings++] = root;
  }

  /* Clusters: each must load; its content goes into the key. */
  yaml_node_t **citems;
  int nc = items_of(c, clusters, "clusters", "a cluster file or a list of them", &citems);
  if (nc < 0) return HS_EINVAL;
  uint64_t *chash = calloc((size_t)nc, sizeof *chash);
  g->clusters = calloc((size_t)nc, sizeof *g->clusters);
  if (!chash || !g->clusters) rc = hs_diag_set(c->d, HS_ENOMEM, "out of memory");
  for (int i = 0; i < nc && !rc; i++) {
    char f[32];
    snprintf(f, sizeof f, "clusters[%d]", i);
    if (!scalar(citems[i])) {
      rc = gfail(c, citems[i], f, "a cluster file path");
      break;
    }
    if (!(g->clusters[i] = resolve(c, scalar(citems[i])))) {
      rc = hs_diag_set(c->d, HS_ENOMEM, "out of memory");
      break;
    }
    g->n_clusters = i + 1;
    hs_cluster_spec spec;
    hs_diag cd = {0};
    if (hs_cluster_load(&spec, g->clusters[i], &cd)) {
      rc = hs_diag_set(c->d, HS_EINVAL, "%s:%d:%d: %s: %s", c->path,
                       (int)citems[i]->start_mark.line + 1, (int)citems[i]->start_mark.column + 1,
                       f, cd.msg);
    } else {
      chash[i] = hs_fnv64(HS_FNV64_INIT, spec.text, strlen(spec.text));
    }
    hs_cluster_spec_free(&spec);
  }
  free(citems);

  specs sp = {0};
  uint64_t *seedv = NULL;
  int nseeds = 0;
  if (!rc) rc = load_policies(c, policies, &sp);
  if (!rc && seeds) rc = load_seeds(c, seeds, &seedv, &nseeds);
  if (!rc && !seeds) {
    nseeds = 1;
    if ((seedv = calloc(1, sizeof *seedv))) seedv[0] = 1;
    else rc = hs_diag_set(c->d, HS_ENOMEM, "out of memory");
  }
  /* The settings' part of the canonical text, files by content: one line per setting and
   * value, in setting_defs order; a point's text takes its own value's line of each. */
  char *line[HS_SWEEP_SETTINGS_MAX][HS_SWEEP_VALUES_MAX];
  memset(line, 0, sizeof line);
  int order[HS_SWEEP_SETTINGS_MAX], norder = 0;
  long long ncombos = 1;
  for (const setting_def *sd = setting_defs; !rc && sd->key; sd++)
    for (int i = 0; i < g->n_settings && !rc; i++) {
      const hs_sweep_setting *st = &g->settings[i];
      if (st->option != sd->option) continue;
      order[norder++] = i;
      ncombos *= st->n_values;
      for (int j = 0; j < st->n_values && !rc; j++) {
        sbuf l = {0};
        if (sd->file == 2) {
          uint64_t h = 0;
          rc = hash_file(c, st->values[j], at[i], sd->key, &h);
          sb_add(&l, "%s #%016" PRIx64 "\n", sd->key, h);
        } else {
          sb_add(&l, "%s %s\n", sd->key, st->values[j]);
        }
        line[i][j] = l.s;
        if (!rc && (l.oom || !l.s)) rc = hs_diag_set(c->d, HS_ENOMEM, "out of memory");
      }
    }
  long long total = (long long)g->n_clusters * ncombos * sp.n * nseeds;
  if (!rc && total > GRID_MAX_POINTS)
    rc = hs_diag_set(c->d, HS_EINVAL, "%s: grid: expected at most %d points, got %lld", c->path,
                     GRID_MAX_POINTS, total);
  if (!rc && !(g->points = calloc((size_t)total, sizeof *g->points)))
    rc = hs_diag_set(c->d, HS_ENOMEM, "out of memory");
  for (int ci = 0; !rc && ci < g->n_clusters; ci++)
    for (long long co = 0; !rc && co < ncombos; co++) {
      /* Combination co in mixed radix over the settings, the last setting fastest. */
      unsigned char vidx[HS_SWEEP_SETTINGS_MAX] = {0};
      long long rest = co;
      for (int i = g->n_settings - 1; i >= 0; i--) {
        vidx[i] = (unsigned char)(rest % g->settings[i].n_values);
        rest /= g->settings[i].n_values;
      }
      sbuf common = {0}, vary = {0};
      for (int k = 0; k < norder; k++) {
        const hs_sweep_setting *st = &g->settings[order[k]];
        sb_add(&common, "%s", line[order[k]][vidx[order[k]]]);
        if (st->n_values > 1)
          sb_add(&vary, "%s%s=%s", vary.n ? " " : "", st->key, st->values[vidx[order[k]]]);
      }
      sb_add(&vary, "%s", "");
      for (int pi = 0; !rc && pi < sp.n; pi++)
        for (int si = 0; !rc && si < nseeds; si++) {
          hs_sweep_point *p = &g->points[g->n_points];
          sbuf t = {0};
          sb_add(&t, "hetsim sweep point 1\ncluster #%016" PRIx64 "\npolicy %s\nseed %" PRIu64 "\n%s",
                 chash[ci], sp.canon[pi], seedv[si], common.s ? common.s : "");
          p->index = g->n_points;
          p->cluster = g->clusters[ci];
          p->policy = strdup(sp.s[pi]);
          p->seed = seedv[si];
          p->text = t.s;
          p->vary = vary.s ? strdup(vary.s) : NULL;
          memcpy(p->vidx, vidx, sizeof p->vidx);
          g->n_points++;
          if (t.oom || !t.s || !p->policy || common.oom || vary.oom || !p->vary) {
            rc = hs_diag_set(c->d, HS_ENOMEM, "out of memory");
            break;
          }
          snprintf(p->key, sizeof p->key, "%016" PRIx64, hs_fnv64(HS_FNV64_INIT, t.s, t.n));
        }
      free(common.s);
      free(vary.s);
    }
  for (int i = 0; i < HS_SWEEP_SETTINGS_MAX; i++)
    for (int j = 0; j < HS_SWEEP_VALUES_MAX; j++) free(line[i][j]);
  /* Two points with one key would be one experiment listed twice (ssgd and ssgd:overlap=0). */
  for (int i = 0; !rc && i < g->n_points; i++)
    for (int j = i + 1; !rc && j < g->n_points && j < i + 4096; j++)
      if (!strcmp(g->points[i].key, g->points[j].key))
        rc = hs_diag_set(c->d, HS_EINVAL,
                         "%s: grid: points %d and %d are the same experiment (%s seed %" PRIu64
                         " and %s seed %" PRIu64 " on %s); list each once",
                         c->path, i, j, g->points[i].policy, g->points[i].seed,
                         g->points[j].policy, g->points[j].seed, g->points[i].cluster);
  for (int i = 0; i < sp.n; i++) {
    free(sp.s[i]);
    free(sp.canon[i]);
  }
  free(sp.s);
  free(sp.canon);
  free(seedv);
  free(chash);
  return rc;
}

int hs_sweep_grid_load(hs_sweep_grid *g, const char *path, hs_diag *d) {
  memset(g, 0, sizeof *g);
  FILE *f = fopen(path, "rb");
  if (!f) return hs_diag_set(d, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
  char *text = malloc(GRID_MAX_FILE + 1);
  size_t len = text ? fread(text, 1, GRID_MAX_FILE + 1, f) : 0;
  fclose(f);
  if (!text) return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", path);
  if (len > GRID_MAX_FILE) {
    free(text);
    return hs_diag_set(d, HS_EINVAL, "%s: expected a grid file of at most %d bytes, got more", path,
                       GRID_MAX_FILE);
  }
  gctx c = {.path = path, .d = d};
  const char *slash = strrchr(path, '/');
  size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
  g->path = strdup(path);
  c.dir = malloc(dl + 1);
  const char *base = slash ? slash + 1 : path;
  g->name = strdup(base);
  if (!g->path || !c.dir || !g->name) {
    free(text);
    free(c.dir);
    hs_sweep_grid_free(g);
    return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", path);
  }
  memcpy(c.dir, path, dl);
  c.dir[dl] = '\0';
  yaml_parser_t parser;
  yaml_document_t doc;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  int rc;
  if (!yaml_parser_load(&parser, &doc)) {
    rc = hs_diag_set(d, HS_EINVAL, "%s:%d:%d: grid: expected YAML, got an error: %s", path,
                     (int)parser.problem_mark.line + 1, (int)parser.problem_mark.column + 1,
                     parser.problem ? parser.problem : "unknown");
  } else {
    c.doc = &doc;
    rc = grid_parse(g, &c);
    yaml_document_delete(&doc);
  }
  yaml_parser_delete(&parser);
  free(text);
  free(c.dir);
  if (rc) hs_sweep_grid_free(g);
  return rc;
}

void hs_sweep_grid_free(hs_sweep_grid *g) {
  if (!g) return;
  for (int i = 0; i < g->n_points; i++) {
    free(g->points[i].policy);
    free(g->points[i].text);
    free(g->points[i].vary);
  }
  free(g->points);
  for (int i = 0; i < g->n_clusters; i++) free(g->clusters[i]);
  free(g->clusters);
  for (int i = 0; i < g->n_settings; i++) {
    for (int j = 0; j < g->settings[i].n_values; j++) free(g->settings[i].values[j]);
    free(g->settings[i].values);
  }
  free(g->name);
  free(g->path);
  memset(g, 0, sizeof *g);
}

int hs_sweep_point_argv(const hs_sweep_grid *g, const hs_sweep_point *p, const char *db, const char *calib,
                        char *seedbuf, size_t seedlen, char **argv, int max) {
  int n = 0;
  snprintf(seedbuf, seedlen, "%" PRIu64, p->seed);
  const char *fixed[] = {"sim", "--cluster", p->cluster, "--policy", p->policy, "--seed", seedbuf,
                         "--db", db};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && n < max - 1; i++)
    argv[n++] = (char *)fixed[i];
  int has_calib = 0;
  for (int i = 0; i < g->n_settings && n < max - 2; i++) {
    argv[n++] = (char *)g->settings[i].option;
    argv[n++] = g->settings[i].values[p->vidx[i]];
    has_calib |= !strcmp(g->settings[i].option, "--calib");
  }
  if (calib && !has_calib && n < max - 2) {
    argv[n++] = "--calib";
    argv[n++] = (char *)calib;
  }
  argv[n] = NULL;
  return n;
}
