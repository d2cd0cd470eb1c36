/* core_config_write: a cluster spec as the YAML text that parses back to it (core_config_write.h). */
#include "core/core_config_write.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_units.h"

typedef struct unit {
  const char *suffix;
  double scale;
} unit;

typedef int (*parse_fn)(const char *s, double *out);

/* The shortest "NUMBER SUFFIX" over units that parse reads back as exactly v (ties: the first
 * unit listed); a plain number in base units (%.17g) when none does. */
static void put_quantity(FILE *f, double v, const unit *u, int nu, parse_fn parse) {
  char best[64] = "", cand[64];
  for (int k = 0; k < nu; k++) {
    for (int prec = 1; prec <= 17; prec++) {
      snprintf(cand, sizeof cand, "%.*g%s", prec, v / u[k].scale, u[k].suffix);
      double back;
      if (parse(cand, &back) == 0 && back == v) {
        if (!best[0] || strlen(cand) < strlen(best)) memcpy(best, cand, sizeof best);
        break;
      }
    }
  }
  if (best[0]) fputs(best, f);
  else fprintf(f, "%.17g", v);
}

static const unit time_units[] = {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
static const unit bw_units[] = {{"GB/s", 1e9}, {"MB/s", 1e6}, {"kB/s", 1e3}, {"TB/s", 1e12},
                                {"B/s", 1.0},  {"Gbps", 1.25e8}, {"Mbps", 1.25e5}, {"kbps", 125.0},
                                {"Tbps", 1.25e11}, {"GiB/s", 1073741824.0}, {"MiB/s", 1048576.0}};
static const unit byte_units[] = {{"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0},
                                  {"TiB", 1099511627776.0}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3},
                                  {"TB", 1e12}, {"B", 1.0}};
static const unit flops_units[] = {{"TFLOPS", 1e12}, {"GFLOPS", 1e9}, {"PFLOPS", 1e15},
                                   {"MFLOPS", 1e6}, {"FLOPS", 1.0}};
static const unit plain_units[] = {{"", 1.0}};

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))
static void put_time(FILE *f, double v) { put_quantity(f, v, time_units, N_OF(time_units), hs_units_parse_time); }
static void put_bw(FILE *f, double v) { put_quantity(f, v, bw_units, N_OF(bw_units), hs_units_parse_bandwidth); }
static void put_bytes(FILE *f, double v) { put_quantity(f, v, byte_units, N_OF(byte_units), hs_units_parse_bytes); }
static void put_flops(FILE *f, double v) { put_quantity(f, v, flops_units, N_OF(flops_units), hs_units_parse_flops); }
static void put_number(FILE *f, double v) { put_quantity(f, v, plain_units, 1, hs_units_parse_number); }

/* A scalar as plain YAML when it reads back as the same string, else double-quoted. */
static void put_string(FILE *f, const char *s) {
  static const char *const special[] = {"true", "false", "yes", "no", "on", "off", "null", "~", NULL};
  int plain = s[0] != '\0' && (isalpha((unsigned char)s[0]) || s[0] == '_');
  for (const char *p = s; plain && *p; p++)
    plain = isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.' || *p == '/';
  for (int k = 0; plain && special[k]; k++) {
    size_t n = strlen(special[k]);
    if (strlen(s) == n) {
      int same = 1;
      for (size_t i = 0; i < n; i++) same &= tolower((unsigned char)s[i]) == special[k][i];
      if (same) plain = 0;
    }
  }
  if (plain) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\x%02x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static void put_link(FILE *f, const hs_link_spec *l, const hs_link_calib *cal) {
  if (cal->name[0]) {
    fputs("{calib: ", f);
    put_string(f, cal->name);
    if (cal->backend[0]) {
      fputs(", backend: ", f);
      put_string(f, cal->backend);
    }
    fputc('}', f);
    return;
  }
  fputs("{bandwidth: ", f);
  put_bw(f, l->bandwidth);
  fputs(", latency: ", f);
  put_time(f, l->latency);
  fputc('}', f);
}

static void put_form(FILE *f, const hs_compute_spec *c) {
  switch (c->kind) {
  case HS_COMPUTE_CALIB:
    fputs("{calib: ", f);
    put_string(f, c->calib);
    break;
  case HS_COMPUTE_PROFILE:
    fputs("{profile: ", f);
    put_string(f, c->profile);
    break;
  case HS_COMPUTE_ROOFLINE:
    fputs("{flops: ", f);
    put_flops(f, c->flops);
    fputs(", efficiency: ", f);
    put_number(f, c->efficiency);
    fputs(", t0: ", f);
    put_time(f, c->t0);
    break;
  default:
    fputs("{t0: ", f);
    put_time(f, c->t0);
    fputs(", per_sample: ", f);
    put_time(f, c->per_sample);
    if (c->model[0]) {
      fputs(", model: ", f);
      put_string(f, c->model);
    }
    break;
  }
  fputc('}', f);
}

static void put_type(FILE *f, const hs_device_type *t) {
  fputs("  ", f);
  put_string(f, t->name);
  fputs(": {", f);
  if (t->memory > 0) {
    fputs("memory: ", f);
    put_bytes(f, t->memory);
    fputs(", ", f);
  }
  if (t->max_batch > 0) fprintf(f, "max_batch: %d, ", t->max_batch);
  if (t->real_device[0]) {
    fputs("real_device: ", f);
    put_string(f, t->real_device);
    fputs(", ", f);
  }
  fputs("compute: ", f);
  if (t->n_per_model == 0) {
    put_form(f, &t->compute);
  } else {
    fputc('{', f);
    for (int m = 0; m < t->n_per_model; m++) {
      if (m) fputs(", ", f);
      put_string(f, t->per_model[m].model);
      fputs(": ", f);
      hs_compute_spec form = t->per_model[m];
      form.model[0] = '\0'; /* the key says the model */
      put_form(f, &form);
    }
    if (t->compute.kind != HS_COMPUTE_NONE) {
      fputs(", default: ", f);
      put_form(f, &t->compute);
    }
    fputc('}', f);
  }
  fputs("}\n", f);
}

/* Node `node`'s workers, which must be the run of workers from *next on; advances *next. */
static int put_devices(FILE *f, const hs_cluster_spec *s, int node, int *next, hs_diag *d) {
  fputs("    devices: [", f);
  int groups = 0;
  while (*next < s->n_workers && s->workers[*next].node == node) {
    const hs_worker_spec *w = &s->workers[*next];
    int count = 1;
    while (*next + count < s->n_workers) {
      const hs_worker_spec *x = &s->workers[*next + count];
      if (x->node != node || x->type != w->type || x->slowdown != w->slowdown ||
          x->comm_slowdown != w->comm_slowdown)
        break;
      count++;
    }
    if (groups++) fputs(", ", f);
    fputs("{type: ", f);
    put_string(f, s->types[w->type].name);
    fprintf(f, ", count: %d", count);
    if (w->slowdown != 1) {
      fputs(", slowdown: ", f);
      put_number(f, w->slowdown);
    }
    if (w->comm_slowdown != 1) {
      fputs(", comm_slowdown: ", f);
      put_number(f, w->comm_slowdown);
    }
    fputc('}', f);
    *next += count;
  }
  fputs("]\n", f);
  if (node == s->n_nodes - 1 && *next != s->n_workers)
    return hs_diag_set(d, HS_EINVAL, "cluster %s: worker %d is on no node", s->name, *next);
  return 0;
}

static void put_event(FILE *f, const hs_cluster_spec *s, const hs_event_spec *e) {
  fputs("  - {at: ", f);
  put_time(f, e->at);
  if (e->kind == HS_EVENT_JOIN) {
    fputs(", join: {type: ", f);
    put_string(f, s->types[e->type].name);
    fputs(", node: ", f);
    put_string(f, s->nodes[e->node].name);
    fputc('}', f);
  } else if (e->kind == HS_EVENT_LEAVE) {
    fprintf(f, ", leave: %d", e->worker);
  } else {
    fprintf(f, ", worker: %d", e->worker);
    if (e->slowdown >= 0) {
      fputs(", slowdown: ", f);
      put_number(f, e->slowdown);
    }
    if (e->comm_slowdown >= 0) {
      fputs(", comm_slowdown: ", f);
      put_number(f, e->comm_slowdown);
    }
  }
  fputs("}\n", f);
}

int hs_cluster_write_yaml(const hs_cluster_spec *s, char **text, size_t *len, hs_diag *d) {
  *text = NULL;
  for (int w = 1; w < s->n_workers; w++)
    if (s->workers[w].node < s->workers[w - 1].node)
      return hs_diag_set(d, HS_EINVAL, "cluster %s: worker %d is on node %d after a worker of node %d: "
                         "a cluster file numbers workers node by node", s->name, w, s->workers[w].node,
                         s->workers[w - 1].node);
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  fputs("name: ", f);
  put_string(f, s->name);
  fputs("\nnetwork: ", f);
  put_link(f, &s->network, &s->network_calib);
  fputc('\n', f);
  if (s->ps.present) {
    fputs("parameter_server: {bandwidth: ", f);
    put_bw(f, s->ps.link.bandwidth);
    fputs(", latency: ", f);
    put_time(f, s->ps.link.latency);
    fputs(", update_time: ", f);
    put_time(f, s->ps.update_time);
    if (s->ps.accumulate_time > 0) {
      fputs(", accumulate_time: ", f);
      put_time(f, s->ps.accumulate_time);
    }
    if (s->ps.apply_latency > 0) {
      fputs(", apply_latency: ", f);
      put_time(f, s->ps.apply_latency);
    }
    if (s->ps.pull == HS_PS_PULL_AFTER_UPDATES) fputs(", pull: after_updates", f);
    fputs("}\n", f);
  }
  fputs("device_types:\n", f);
  for (int t = 0; t < s->n_types; t++) put_type(f, &s->types[t]);
  fputs("nodes:\n", f);
  int next = 0, rc = 0;
  for (int i = 0; i < s->n_nodes && !rc; i++) {
    fputs("  - name: ", f);
    put_string(f, s->nodes[i].name);
    fputs("\n    link: ", f);
    put_link(f, &s->nodes[i].link, &s->nodes[i].link_calib);
    fputc('\n', f);
    if (s->nodes[i].compute_slots > 0) fprintf(f, "    compute_slots: %d\n", s->nodes[i].compute_slots);
    rc = put_devices(f, s, i, &next, d);
  }
  if (s->jitter_calib.name[0]) {
    fputs("jitter: {calib: ", f);
    put_string(f, s->jitter_calib.name);
    fputs("}\n", f);
  } else if (s->jitter_cv != 0) {
    fputs("jitter: {cv: ", f);
    put_number(f, s->jitter_cv);
    fputs("}\n", f);
  }
  if (s->n_events) {
    fputs("events:\n", f);
    for (int e = 0; e < s->n_events; e++) put_event(f, s, &s->events[e]);
  }
  int bad = ferror(f);
  fclose(f);
  if (rc || bad) {
    free(buf);
    return rc ? rc : hs_diag_set(d, HS_ENOMEM, "out of memory");
  }
  *text = buf;
  if (len) *len = n;
  return 0;
}
