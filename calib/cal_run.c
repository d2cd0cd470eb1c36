#include "calib/cal_run.h"

#include <gsl/gsl_rng.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cal_comm.h"
#include "core/core_affinity.h"
#include "core/core_rng.h"
#include "nn/nn_cuda.h"
#include "nn/nn_net.h"

enum { COMM_MIN_BYTES = 4096 };
static const double BLOCK_S = 0.02; /* s: a block of steps timed as one sample (concurrent nets) */

static int comm_sizes(const hs_cal_opts *o) {
  int n = 0;
  for (int64_t b = COMM_MIN_BYTES; b <= o->comm_max_bytes; b *= 4) n++;
  return n;
}

static int comm_on(const hs_cal_opts *o, const hs_cal_device *dev) {
  return o->comm && !strcmp(dev->kind, "cpu");
}

int hs_cal_points(const hs_cal_opts *o, const hs_cal_device *dev) {
  return o->n_models * o->n_batches + (comm_on(o, dev) ? 2 * comm_sizes(o) + 1 : 0);
}

typedef struct sweep {
  const hs_cal_opts *o;
  double done; /* points visited, for the progress display */
  /* Concurrent nets on the cpu, one per CPU: pinned as `hetsim real` pins its workers
   * (real_run.h, hs_real_pins), the timed net to the first CPU and rival r to the (r+2)-th. */
  int pin;
  hs_cpus cpus;
} sweep;

static int stopped(const hs_cal_opts *o, hs_diag *d) {
  if (o->stop && *o->stop) return hs_diag_set(d, HS_EINTR, "interrupted; rerun the same command to resume");
  return 0;
}

/* One step split into phases; t[phase] in seconds. */
static int timed_step(hs_net *n, const hs_sgd *sgd, double t[HS_CAL_PHASES], hs_diag *d) {
  int rc;
  if ((rc = hs_net_mark(n, 0, d)) || (rc = hs_net_forward(n, 1, d)) || (rc = hs_net_mark(n, 1, d)) ||
      (rc = hs_net_backward(n, d)) || (rc = hs_net_mark(n, 2, d)) || (rc = hs_net_update(n, sgd, d)) ||
      (rc = hs_net_mark(n, 3, d)))
    return rc;
  if (!t) return hs_net_sync(n, d);
  if ((rc = hs_net_elapsed(n, 0, 1, &t[HS_CAL_FORWARD], d)) ||
      (rc = hs_net_elapsed(n, 1, 2, &t[HS_CAL_BACKWARD], d)) ||
      (rc = hs_net_elapsed(n, 2, 3, &t[HS_CAL_UPDATE], d)) ||
      (rc = hs_net_elapsed(n, 0, 3, &t[HS_CAL_STEP], d)))
    return rc;
  return 0;
}

/* The step boundary where the timed net and its rivals meet: each waits for all the others
 * after every step, as the real runtime's workers meet at every all-reduce, so that the nets
 * sleep and wake as workers do and a busy machine's scheduler treats them as it treats the
 * workers (a thread that never sleeps gets only its fair share of a loaded machine: timed
 * beside such rivals at a load average of 20 on 2 cores, a step of batch 64 took 18 ms, while
 * the runs' workers computed theirs in 1.5 ms). quit releases every wait for good. */
typedef struct lockstep {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n, waiting, quit;
  unsigned gen;
} lockstep;

/* Waits until all n have arrived; returns 1 once quit was set (then it does not wait). */
static int lockstep_wait(lockstep *b) {
  pthread_mutex_lock(&b->mu);
  unsigned gen = b->gen;
  if (!b->quit && ++b->waiting == b->n) {
    b->waiting = 0;
    b->gen++;
    pthread_cond_broadcast(&b->cv);
  }
  while (!b->quit && gen == b->gen) pthread_cond_wait(&b->cv, &b->mu);
  int quit = b->quit;
  pthread_mutex_unlock(&b->mu);
  return quit;
}

static void lockstep_quit(lockstep *b) {
  pthread_mutex_lock(&b->mu);
  b->quit = 1;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* Nets stepping beside the timed one (opts.concurrent > 1): each on its own thread with its own
 * net and the timed batch, stepping in lock-step with it until told to quit, so that the timed
 * step shares the cores, caches and memory bandwidth as one of N workers of a real run does. */
typedef struct rival {
  hs_net *net;
  pthread_t th;
  lockstep *ls;
  const hs_cpus *cpus; /* pinned to cpus->id[cpu] when not NULL */
  int cpu;
  int rc;
  hs_diag d;
} rival;

static void *rival_main(void *p) {
  rival *r = p;
  if (r->cpus) hs_pin_self(r->cpus, r->cpu);
  const hs_sgd sgd = {.lr = 1e-4, .momentum = 0.9, .weight_decay = 0};
  do {
    if (!r->rc) r->rc = timed_step(r->net, &sgd, NULL, &r->d);
  } while (!lockstep_wait(r->ls));
  return NULL;
}

/* The single steps behind concurrent nets' block means: a uniform sample (reservoir sampling)
 * of up to SINGLES steps per point, every phase, for the spread stored as p10_s and p90_s:
 * the simulator's jitter is per step (cmd_validate.c), while the spread of block means is
 * that of the machine's speed from one block to the next (here they came out alike). */
enum { SINGLES = 4096 };

typedef struct singles {
  double *t;    /* [point][phase][SINGLES] */
  int64_t *seen; /* steps offered per point since its samples were last discarded */
  gsl_rng *rng;
} singles;

static double *singles_of(singles *g, int point, int phase) {
  return g->t + ((size_t)point * HS_CAL_PHASES + (size_t)phase) * SINGLES;
}

static void singles_add(singles *g, int point, const double *t) {
  int64_t i = g->seen[point]++;
  if (i >= SINGLES) i = (int64_t)gsl_rng_uniform_int(g->rng, (unsigned long)(i + 1));
  if (i >= SINGLES) return;
  for (int p = 0; p < HS_CAL_PHASES; p++) singles_of(g, point, p)[i] = t[p];
}

/* Replaces each phase's p10/p90 in st by those of the point's single steps. */
static int singles_spread(singles *g, int point, hs_cal_stats *st, hs_diag *d) {
  int n = g->seen[point] < SINGLES ? (int)g->seen[point] : SINGLES;
  for (int p = 0; p < HS_CAL_PHASES && n > 0; p++) {
    hs_cal_stats one;
    int rc = hs_cal_stats_of(singles_of(g, point, p), n, &one, d);
    if (rc) return rc;
    st[p].p10_s = one.p10_s;
    st[p].p90_s = one.p90_s;
  }
  return 0;
}

/* One visit of a batch size in the interleaved sweep (cal_time.h): loads the first `batch`
 * samples of x, y into the net (and the rivals), runs `warmup` untimed steps, then times
 * `count` samples into the sweep's `point`. HS_ENOMEM when the net cannot hold the batch.
 * `rivals` (n_rivals nets, may be 0) step concurrently while it is timed. */
static int time_visit(sweep *sw, hs_net *n, rival *rivals, int n_rivals, const float *x,
                      const int32_t *y, int batch, int warmup, int count, hs_cal_sweep *cs,
                      int point, singles *sg, hs_diag *d) {
  const hs_cal_opts *o = sw->o;
  int rc = 0, started = 0;
  if ((rc = hs_net_load(n, x, y, batch, d))) return rc;
  for (int r = 0; r < n_rivals; r++)
    if ((rc = hs_net_load(rivals[r].net, x, y, batch, d))) return rc;
  lockstep ls = {.n = n_rivals + 1};
  pthread_mutex_init(&ls.mu, NULL);
  pthread_cond_init(&ls.cv, NULL);
  if (sw->pin) hs_pin_self(&sw->cpus, 0);
  for (; started < n_rivals; started++) {
    rivals[started].ls = &ls;
    rivals[started].cpus = sw->pin ? &sw->cpus : NULL;
    rivals[started].cpu = started + 1;
    rivals[started].rc = 0;
    if (pthread_create(&rivals[started].th, NULL, rival_main, &rivals[started])) {
      rc = hs_diag_set(d, HS_ERUNTIME, "cannot start the thread of concurrent net %d", started + 1);
      break;
    }
  }
  if (rc) goto join;
  /* A small learning rate keeps the weights finite over many steps on random labels. */
  const hs_sgd sgd = {.lr = 1e-4, .momentum = 0.9, .weight_decay = 0};
  double w0 = hs_cal_now();
  for (int i = 0; i < warmup; i++) {
    if ((rc = stopped(o, d)) || (rc = timed_step(n, &sgd, NULL, d))) goto join;
    if (n_rivals) lockstep_wait(&ls);
  }
  /* With concurrent nets a sample is the mean over a block of consecutive steps lasting about
   * BLOCK_S, so that it carries its share of the time the nets (and anything else running)
   * take turns on the cores, as a worker of a real run does; alone, a sample is one step. */
  int block = 1;
  if (n_rivals > 0 && warmup > 0) {
    double step_s = (hs_cal_now() - w0) / warmup;
    block = step_s > 0 ? (int)(BLOCK_S / step_s) + 1 : 1;
    if (block > 1000) block = 1000;
  }
  for (int s = 0; s < count; s++) {
    if ((rc = stopped(o, d))) goto join;
    double t[HS_CAL_PHASES], sum[HS_CAL_PHASES] = {0};
    for (int k = 0; k < block; k++) {
      if ((rc = timed_step(n, &sgd, t, d))) goto join;
      if (n_rivals) lockstep_wait(&ls);
      if (sg) singles_add(sg, point, t);
      for (int p = 0; p < HS_CAL_PHASES; p++) sum[p] += t[p];
    }
    for (int p = 0; p < HS_CAL_PHASES; p++) sum[p] /= block;
    if ((rc = hs_cal_sweep_add(cs, point, sum, d))) goto join;
    if (o->progress) hs_progress_update(o->progress, sw->done + hs_cal_sweep_progress(cs));
  }
join:
  lockstep_quit(&ls);
  for (int r = 0; r < started; r++) {
    pthread_join(rivals[r].th, NULL);
    if (!rc && rivals[r].rc) rc = hs_diag_set(d, rivals[r].rc, "concurrent net %d: %s", r + 1, rivals[r].d.msg);
  }
  pthread_cond_destroy(&ls.cv);
  pthread_mutex_destroy(&ls.mu);
  if (sw->pin) hs_pin_restore(&sw->cpus);
  return rc;
}

/* Grows the random inputs to `batch` samples (the new ones drawn from rng): a batch size uses
 * the first `batch` of them. HS_ENOMEM when the host cannot hold them. */
static int grow_inputs(hs_net *n, gsl_rng *rng, int batch, float **x, int32_t **y, int *have,
                       hs_diag *d) {
  if (batch <= *have) return 0;
  int c, h, w;
  hs_net_input_shape(n, &c, &h, &w);
  size_t per = (size_t)c * (size_t)h * (size_t)w;
  float *nx = realloc(*x, (size_t)batch * per * sizeof *nx);
  if (nx) *x = nx;
  int32_t *ny = nx ? realloc(*y, (size_t)batch * sizeof *ny) : NULL;
  if (ny) *y = ny;
  if (!nx || !ny) return hs_diag_set(d, HS_ENOMEM, "out of host memory for a batch of %d", batch);
  for (size_t i = (size_t)*have * per; i < (size_t)batch * per; i++) nx[i] = (float)(gsl_rng_uniform(rng) * 2 - 1);
  for (int i = *have; i < batch; i++) ny[i] = (int32_t)gsl_rng_uniform_int(rng, (unsigned long)hs_net_classes(n));
  *have = batch;
  return 0;
}

static int fit_model(hs_store *s, int64_t dev, hs_cal_model_result *mr, hs_diag *d) {
  for (int p = 0; p < HS_CAL_PHASES; p++) {
    int rc = hs_cal_refit(s, dev, mr->model, (hs_cal_phase)p, mr->oom_batch, mr->max_batch, &mr->fits[p],
                          &mr->fitted[p], mr->fit_error, sizeof mr->fit_error, d);
    if (rc) return rc;
  }
  return 0;
}

static int calibrate_model(hs_store *s, const hs_cal_device *dev, int64_t dev_id, sweep *sw,
                           hs_cal_model_result *mr, hs_diag *d) {
  const hs_cal_opts *o = sw->o;
  int rc = hs_cal_store_model(s, mr->model, d);
  if (rc) return rc;
  if (o->redo && (rc = hs_cal_forget(s, dev_id, mr->model, d))) return rc;
  hs_net *n = NULL;
  gsl_rng *rng = NULL;
  float *x = NULL;
  int32_t *y = NULL;
  int have = 0, n_todo = 0, n_rivals = o->concurrent > 1 ? o->concurrent - 1 : 0;
  hs_cal_sweep cs = {0};
  singles sg = {0};
  rival *rivals = n_rivals ? calloc((size_t)n_rivals, sizeof *rivals) : NULL;
  int *todo = malloc((size_t)(o->n_batches > 0 ? o->n_batches : 1) * sizeof *todo);
  if ((n_rivals && !rivals) || !todo) {
    rc = hs_diag_set(d, HS_ENOMEM, "out of memory for %d batch sizes and %d concurrent nets", o->n_batches, n_rivals);
    goto out;
  }
  /* The batch sizes still to time: points already stored are skipped (resume). */
  for (int i = 0; i < o->n_batches; i++) {
    int stored = 0;
    if ((rc = stopped(o, d)) || (rc = hs_cal_point_stored(s, dev_id, mr->model, o->batches[i], &stored, d))) goto out;
    if (stored) mr->skipped++;
    else todo[n_todo++] = i;
  }
  sw->done += mr->skipped;
  if (o->progress) hs_progress_update(o->progress, sw->done);
  if ((rc = hs_cal_sweep_init(&cs, n_todo, HS_CAL_PHASES, HS_CAL_STEP, &o->rule, d))) goto out;
  if (n_todo) {
    hs_net_options no = {.seed = o->seed, .max_batch = 0, .threads = dev->threads, .wait_s = o->wait_s};
    if ((rc = hs_net_open(&n, dev->spec, mr->model, &no, d))) goto out;
    /* The points are stored under the name discovery gave ("NAME (16 SMs)", from the granule it
     * read): a net granted another count would file them under the wrong partition. */
    if (dev->sm_partition > 0 && hs_net_cuda_sm_count(n) != dev->sm_partition) {
      rc = hs_diag_set(d, HS_ERUNTIME, "%s: the net was granted %d SMs where discovery expected %d (the name "
                       "\"%s\"); no point stored", dev->spec, hs_net_cuda_sm_count(n), dev->sm_partition, dev->name);
      goto out;
    }
    for (int r = 0; r < n_rivals && !rc; r++) {
      no.seed = o->seed + 1 + (uint64_t)r;
      rc = hs_net_open(&rivals[r].net, dev->spec, mr->model, &no, d);
    }
    if (rc) goto out;
    if (!(rng = hs_rng_stream(o->seed, 0x63616c6962ULL))) {
      rc = hs_diag_set(d, HS_ENOMEM, "out of memory for a random stream");
      goto out;
    }
    if (n_rivals && (!(sg.t = malloc((size_t)n_todo * HS_CAL_PHASES * SINGLES * sizeof *sg.t)) ||
                     !(sg.seen = calloc((size_t)n_todo, sizeof *sg.seen)) ||
                     !(sg.rng = hs_rng_stream(o->seed, 0x73696e676cULL)))) {
      rc = hs_diag_set(d, HS_ENOMEM, "out of memory for the single steps of %d batch sizes", n_todo);
      goto out;
    }
  }
  /* Passes over the batch sizes, a few samples per visit (cal_time.h), so that a slow period
   * of the machine spreads over every size; each point is stored as soon as it is done. */
  int k, count, first;
  while (!rc && hs_cal_sweep_next(&cs, &k, &count, &first)) {
    int batch = o->batches[todo[k]];
    hs_diag pd = {0};
    rc = grow_inputs(n, rng, batch, &x, &y, &have, &pd);
    /* The full warm-up on a size's first visit; one step to settle after switching sizes. */
    if (!rc) rc = time_visit(sw, n, rivals, n_rivals, x, y, batch, first ? o->warmup : o->warmup > 0, count, &cs, k,
                             n_rivals ? &sg : NULL, &pd);
    if (rc == HS_ENOMEM) {
      /* The sweep ends at the first batch that does not fit; the limit is what ran (every
       * smaller size was visited in the first pass, or is stored). */
      mr->oom_batch = batch;
      mr->max_batch = todo[k] > 0 ? o->batches[todo[k] - 1] : 0;
      hs_cal_sweep_drop(&cs, k);
      rc = 0;
      if (!mr->max_batch) rc = hs_diag_set(d, HS_ELIMIT, "%s on %s: even the smallest batch (%d) ran out of memory: %s", mr->model, dev->spec, batch, pd.msg);
      continue;
    }
    if (rc) {
      hs_diag_set(d, rc, "%s, batch %d: %s", mr->model, batch, pd.msg);
      break;
    }
    int now = hs_cal_sweep_judge(&cs, k, d);
    if (now < 0) rc = now;
    if (now == 0 && n_rivals && cs.reps[k] == 0) sg.seen[k] = 0; /* discarded as bimodal */
    if (now > 0) {
      hs_cal_stats st[HS_CAL_PHASES];
      if (!(rc = hs_cal_sweep_stats(&cs, k, st, d)) && !(rc = n_rivals ? singles_spread(&sg, k, st, d) : 0) &&
          !(rc = hs_cal_store_point(s, dev_id, mr->model, batch, st, d)))
        mr->measured++;
    }
  }
  sw->done += n_todo;
out:
  hs_net_close(n);
  for (int r = 0; r < n_rivals && rivals; r++) hs_net_close(rivals[r].net);
  free(rivals);
  free(todo);
  free(x);
  free(y);
  hs_cal_sweep_free(&cs);
  gsl_rng_free(rng);
  free(sg.t);
  free(sg.seen);
  gsl_rng_free(sg.rng);
  if (rc) return rc;
  return fit_model(s, dev_id, mr, d);
}

static int calibrate_comm(hs_store *s, int64_t dev_id, sweep *sw, hs_cal_comm_result *cr, hs_diag *d) {
  const hs_cal_opts *o = sw->o;
  hs_comm_key key = {.device = dev_id, .backend = cr->backend, .op = cr->op, .world_size = cr->world_size};
  hs_cal_comm_opts co = {.rule = o->rule, .warmup = o->warmup, .stop = o->stop, .no_pin = o->no_pin};
  int rc = 0;
  for (int64_t bytes = COMM_MIN_BYTES; bytes <= o->comm_max_bytes; bytes *= 4, sw->done += 1) {
    int stored = 0;
    if ((rc = stopped(o, d)) || (rc = hs_cal_comm_stored(s, &key, bytes, &stored, d))) return rc;
    if (o->progress) hs_progress_update(o->progress, sw->done);
    if (stored) {
      cr->skipped++;
      continue;
    }
    hs_cal_stats st;
    rc = !strcmp(cr->op, "p2p") ? hs_cal_time_p2p(bytes, &co, &st, d)
                                : hs_cal_time_allreduce(cr->world_size, bytes, &co, &st, d);
    if (rc == HS_EINTR) return stopped(o, d) ? stopped(o, d) : rc;
    if (rc || (rc = hs_cal_store_comm_sample(s, &key, bytes, &st, d))) return rc;
    cr->measured++;
  }
  return hs_cal_refit_comm(s, &key, &cr->alpha_s, &cr->beta_bytes_per_s, &cr->r2, &cr->fitted, cr->why,
                           sizeof cr->why, d);
}

/* The hand-off latency, stored as comm_sample op "wake" (world 2, 0 bytes) unless stored. */
static int calibrate_wake(hs_store *s, int64_t dev_id, sweep *sw, hs_cal_result *res, hs_diag *d) {
  const hs_cal_opts *o = sw->o;
  hs_comm_key key = {.device = dev_id, .backend = "cpu", .op = "wake", .world_size = 2};
  hs_cal_comm_opts co = {.rule = o->rule, .warmup = o->warmup, .stop = o->stop, .no_pin = o->no_pin};
  int stored = 0, rc;
  if ((rc = stopped(o, d)) || (rc = hs_cal_comm_stored(s, &key, 0, &stored, d))) return rc;
  if (stored) {
    res->wake_skipped = 1;
  } else {
    rc = hs_cal_time_wake(&co, &res->wake, d);
    if (rc == HS_EINTR) return stopped(o, d) ? stopped(o, d) : rc;
    if (rc || (rc = hs_cal_store_comm_sample(s, &key, 0, &res->wake, d))) return rc;
    res->wake_measured = 1;
  }
  sw->done += 1;
  if (o->progress) hs_progress_update(o->progress, sw->done);
  return 0;
}

int hs_cal_run(hs_store *s, const hs_cal_device *dev, const hs_cal_opts *o, hs_cal_result *res,
               hs_diag *d) {
  memset(res, 0, sizeof *res);
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  for (int i = 1; i < o->n_batches; i++)
    if (o->batches[i] <= o->batches[i - 1]) return hs_diag_set(d, HS_EINVAL, "batch sizes must increase");
  if ((rc = hs_cal_store_device(s, dev, &res->device_id, d))) return rc;
  res->models = calloc((size_t)(o->n_models > 0 ? o->n_models : 1), sizeof *res->models);
  if (!res->models) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  sweep sw = {.o = o};
  sw.pin = !o->no_pin && o->concurrent > 1 && !strcmp(dev->kind, "cpu") && hs_cpus_allowed(&sw.cpus) >= o->concurrent;
  for (int m = 0; m < o->n_models; m++) {
    hs_cal_model_result *mr = &res->models[res->n_models++];
    snprintf(mr->model, sizeof mr->model, "%s", o->models[m]);
    if ((rc = calibrate_model(s, dev, res->device_id, &sw, mr, d))) return rc;
  }
  if (!comm_on(o, dev)) {
    snprintf(res->comm_note, sizeof res->comm_note, "%s",
             !o->comm ? "communication not timed (--no-comm)"
                      : "NCCL communication timing is not built yet; only the cpu backend's is");
    return 0;
  }
  const char *ops[2] = {"allreduce", "p2p"};
  for (int i = 0; i < 2; i++) {
    hs_cal_comm_result *cr = &res->comm[res->n_comm++];
    snprintf(cr->backend, sizeof cr->backend, "cpu");
    snprintf(cr->op, sizeof cr->op, "%s", ops[i]);
    cr->world_size = i == 0 ? o->comm_world : 2;
    if ((rc = calibrate_comm(s, res->device_id, &sw, cr, d))) return rc;
  }
  return calibrate_wake(s, res->device_id, &sw, res, d);
}

void hs_cal_result_free(hs_cal_result *res) {
  if (!res) return;
  free(res->models);
  res->models = NULL;
  res->n_models = 0;
}
