/* core_config: the cluster file (YAML) and CSV event traces, parsed into plain structs.
 *
 * Contract: hs_cluster_load parses a cluster file with libyaml and fills an hs_cluster_spec that
 * the caller frees with hs_cluster_spec_free. All quantities are converted to SI base units
 * (seconds, bytes, bytes per second) at this edge. On bad input it returns HS_EINVAL and leaves
 * a message of the form
 *     FILE:LINE:COL: FIELD: expected WHAT, got "FOUND"
 * in the hs_diag. Unknown keys are errors. Nothing here touches the database.
 * Workers are numbered in file order: nodes in order, device groups in order, `count` copies. */
#ifndef HS_CORE_CONFIG_H
#define HS_CORE_CONFIG_H

#include "core/core_error.h"

#define HS_NAME_MAX 64

typedef struct hs_srcpos {
  int line, col; /* 1-based; 0 when unknown */
} hs_srcpos;

typedef struct hs_link_spec {
  double bandwidth; /* bytes/s */
  double latency;   /* s */
} hs_link_spec;

/* `{calib: NAME}` in place of a link's numbers: NAME's measured communication (comm_model) sets
 * the link's bandwidth and latency when a run starts (the CLI looks it up); "" = inline numbers.
 * `{calib: NAME, backend: B}` takes only backend B's measurements (HS_LINK_BACKENDS); "" = any. */
#define HS_LINK_BACKENDS "cpu, tcp, local, nccl, gloo"
typedef struct hs_link_calib {
  char name[128];
  char backend[16];
  hs_srcpos pos;
} hs_link_calib;

typedef enum hs_compute_kind {
  HS_COMPUTE_INLINE = 0,   /* t(b) = t0 + per_sample * b */
  HS_COMPUTE_CALIB = 1,    /* a fitted model from the calibration database, by device name */
  HS_COMPUTE_ROOFLINE = 2, /* t(b) = t0 + b * F / (flops * efficiency), F = the model's training
                            * FLOPs per sample (forward + backward) */
  HS_COMPUTE_PROFILE = 3,  /* a profile (docs/profile.md), imported when a run starts */
  HS_COMPUTE_NONE = 4      /* a per-model mapping without `default`: no form for other models */
} hs_compute_kind;

typedef struct hs_compute_spec {
  hs_compute_kind kind;
  double t0;                /* s, inline and roofline */
  double per_sample;        /* s per sample, inline */
  double flops;             /* FLOP/s, roofline: the device's peak */
  double efficiency;        /* roofline: share of the peak a training step reaches, (0, 1] */
  char calib[128];          /* device name to look up, calib only */
  char profile[512];        /* profile file as written (relative to the cluster file), profile only */
  char model[64];           /* the model these numbers are for: the per-model key, `model:` of an
                             * inline form, or "" when the file does not say */
  hs_srcpos pos;            /* where the form was written */
} hs_compute_spec;

typedef struct hs_device_type {
  char name[HS_NAME_MAX];
  double memory;            /* bytes; 0 = no limit */
  int max_batch;            /* samples; 0 = derive from memory and the model */
  hs_compute_spec compute;  /* the form for every model, or per-model mapping's `default` */
  int n_per_model;
  hs_compute_spec *per_model; /* forms for named models (their .model), owned by the spec */
  /* `real_device`: the device `hetsim real` puts this type's workers on ("cpu", "cuda:I" or
   * "cuda:I/sm=N", checked for that form here; docs/cli.md); "" = the run's --device. The
   * simulator ignores it. */
  char real_device[64];
  hs_srcpos real_device_pos;  /* where its value was written; 0:0 when absent */
  hs_srcpos pos;
} hs_device_type;

typedef struct hs_node_spec {
  char name[HS_NAME_MAX];
  hs_link_spec link;        /* between devices inside the node */
  hs_link_calib link_calib;
  int compute_slots;        /* at most this many of the node's workers compute at once, the
                               others waiting their turn (workers sharing the node's CPUs, or
                               one GPU); 0 = no limit */
  hs_srcpos pos;
} hs_node_spec;

typedef struct hs_worker_spec {
  int type;                 /* index into device_types */
  int node;                 /* index into nodes */
  double slowdown;          /* compute-time multiplier at start, default 1 */
  double comm_slowdown;     /* transfer-time multiplier at start, default 1 */
} hs_worker_spec;

typedef enum hs_event_kind {
  HS_EVENT_SLOWDOWN = 0,    /* set worker's compute slowdown (and/or comm slowdown) */
  HS_EVENT_JOIN = 1,        /* a new worker of `type` on `node` joins */
  HS_EVENT_LEAVE = 2        /* worker leaves */
} hs_event_kind;

typedef struct hs_event_spec {
  double at;                /* s since the start of the run */
  hs_event_kind kind;
  int worker;               /* SLOWDOWN, LEAVE: worker index; JOIN: -1 */
  double slowdown;          /* SLOWDOWN: new compute multiplier, or < 0 to leave it as is */
  double comm_slowdown;     /* SLOWDOWN: new comm multiplier, or < 0 to leave it as is */
  int type;                 /* JOIN: device type index */
  int node;                 /* JOIN: node index */
  hs_srcpos pos;            /* where it was written (YAML or CSV line) */
} hs_event_spec;

/* When the parameter server sends a pulled model (`parameter_server.pull`). */
typedef enum hs_ps_pull {
  HS_PS_PULL_AT_ONCE = 0,   /* at once, with the updates applied so far (the default) */
  HS_PS_PULL_AFTER_UPDATES  /* after the updates queued before the pull: one lane serving in
                               arrival order, as hetsim real's server */
} hs_ps_pull;

typedef struct hs_ps_spec {
  int present;              /* 1 when the file has a parameter_server section */
  hs_link_spec link;        /* the server's own link; defaults to the network */
  double update_time;       /* s the server spends applying one update; default 0 */
  double accumulate_time;   /* s the server spends adding one push into its accumulator (the
                               policies that accumulate pushes and then apply: ps-bsp, ksync,
                               kasync); default 0 */
  double apply_latency;     /* s between a policy's apply (ps-bsp, ksync, kasync) and the server
                               starting it: the round trip of the command that starts it, where
                               the server is driven by messages; default 0 */
  hs_ps_pull pull;          /* default HS_PS_PULL_AT_ONCE */
  int pull_given;           /* 1 when the file says `pull:` (validate's default differs) */
} hs_ps_spec;

typedef struct hs_cluster_spec {
  char name[HS_NAME_MAX];
  char path[512];           /* file it came from */
  char *text;               /* the whole file as read, for storing with a run */
  hs_link_spec network;     /* between nodes */
  hs_link_calib network_calib;
  hs_ps_spec ps;
  double jitter_cv;         /* coefficient of variation of lognormal compute noise, >= 0 */
  hs_link_calib jitter_calib; /* `jitter: {calib: NAME}`: the cv from NAME's measured steps */
  int n_types;
  hs_device_type *types;
  int n_nodes;
  hs_node_spec *nodes;
  int n_workers;
  hs_worker_spec *workers;
  int n_events;
  hs_event_spec *events;    /* sorted by `at`, stable */
} hs_cluster_spec;

/* For tests: reads text with the loader's own scanner of plain YAML and, when it accepts the
 * text, with libyaml too, and compares the two documents node for node (kind, value, line and
 * column). 1: accepted and the same; 0: declined (left to libyaml); -1: they differ, or out of
 * memory; why says which. */
int hs_cluster_fast_check(const char *text, size_t len, char *why, size_t cap);

/* Parses the cluster file at path. */
int hs_cluster_load(hs_cluster_spec *out, const char *path, hs_diag *d);
/* Parses YAML held in memory; `name` is used in messages in place of a file name. */
int hs_cluster_parse(hs_cluster_spec *out, const char *name, const char *text, size_t len,
                     hs_diag *d);
/* Appends the events of a CSV trace to spec->events (and re-sorts them). */
int hs_cluster_load_events_csv(hs_cluster_spec *spec, const char *path, hs_diag *d);
void hs_cluster_spec_free(hs_cluster_spec *spec);

/* The form of t's compute written for `model`: its per-model entry, else the default (or single)
 * form, as written (not checked, a roofline not converted). */
hs_compute_spec *hs_cluster_compute_pick(hs_device_type *t, const char *model);

/* The compute form of device type `type` for a run of `model`: its per-model entry, else its
 * default (or single) form; a roofline comes back as the inline form it gives
 * (per_sample = train_flops_per_sample / (flops * efficiency)). Refuses (HS_EINVAL,
 * FILE:LINE:COL) numbers stated for another model, a per-model mapping with neither the model nor
 * a default, and a roofline when train_flops_per_sample is not > 0. Changes nothing in spec. */
int hs_cluster_compute_for(const hs_cluster_spec *spec, int type, const char *model,
                           double train_flops_per_sample, hs_compute_spec *out, hs_diag *d);

/* Collapses every device type's compute to the one form that a run of `model` uses: the
 * per-model entry for it, else the default, else the single form. A roofline becomes an inline
 * form (per_sample = train_flops_per_sample / (flops * efficiency)); calib and profile forms stay
 * for the caller to resolve. Refuses (HS_EINVAL, FILE:LINE:COL) a form whose numbers were stated
 * for another model, a per-model mapping with neither the model nor a default, and a roofline
 * when train_flops_per_sample is not > 0. *unnamed counts the device types left with an inline
 * form that does not say its model (the caller warns that their compute ignores the model).
 * After it, n_per_model is 0 for every type. */
int hs_cluster_resolve_compute(hs_cluster_spec *spec, const char *model,
                               double train_flops_per_sample, int *unnamed, hs_diag *d);

/* Index of a device type or node by name, or -1. */
int hs_cluster_find_type(const hs_cluster_spec *spec, const char *name);
int hs_cluster_find_node(const hs_cluster_spec *spec, const char *name);

/* Every worker a run of spec has at some time: the initial ones and one per join event. They
 * are numbered as the runtimes number them: the initial workers in file order, then the joins
 * in the order of their times (events are sorted, stably). hs_cluster_worker_type gives worker
 * w's device type in that numbering and, when node is not NULL, its node in *node; -1 when
 * there is no such worker. */
int hs_cluster_all_workers(const hs_cluster_spec *spec);
int hs_cluster_worker_type(const hs_cluster_spec *spec, int w, int *node);

#endif
