/* hetsim sweep: run a grid of simulations in parallel, resumably, over local worker processes
 * and MPI ranks.
 *
 * Work split: point i of the grid belongs to rank i mod size (size 1 outside mpirun); a rank
 * drops the points already finished (a complete run with the point's key in the main database
 * or in one of its leftover shards) and deals the rest round-robin to its --jobs worker
 * processes (fork; with one job, or under MPI with one job, the rank runs them itself). Each
 * worker runs a point exactly as `hetsim sim` would (the same entry point, stdout silenced)
 * into its own shard database, then tags the new run with the point's key (core/core_sweep.h).
 * Shards: DB.w<J> for local workers, DB.rank<R> (one job) or DB.rank<R>.w<J> under mpirun.
 * At the end each rank merges its own shards into DB (WAL and the busy timeout serialize the
 * ranks' merges), skipping runs whose point is already complete there, and removes them. A
 * killed sweep leaves shards behind; the next sweep with the same DB counts their finished
 * points as done and merges them too. A point left without a complete run fails the sweep by
 * name (each rank names its own; in hetsim-mpi rank 0 checks the whole grid in DB after the
 * barrier, when every rank has merged). A lock file (DB.lock, or DB.rank<R>.lock) keeps two
 * sweeps from writing the same shards. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/report_file.h"
#include "cli/sweep_grid.h"
#include "cli/sweep_rank.h"
#include "core/core_sweep.h"
#include "core/core_store.h"

/* The one piece of process-wide state: a signal handler can reach nothing else. */
static volatile sig_atomic_t sweep_interrupted;
static void on_sigint(int sig) { sweep_interrupted = 1; }

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim sweep --grid FILE [--db FILE] [--jobs N] [--list] [--no-merge]\n"
"       hetsim sweep --merge SHARD... [--db FILE] [--keep]\n"
"\n"
"Runs every point of a grid (clusters x policies x policy parameters x seeds, see\n"
"docs/cli.md) as `hetsim sim` would, in parallel, and stores the runs in the database.\n"
"A point that already has a complete run (same key: same cluster contents, policy and\n"
"parameters, seed and settings) is never run again, so a sweep that stopped can be started\n"
"again with the same command. Started by mpirun, each rank takes every size-th point.\n"
"\n"
"  --grid FILE     grid file (YAML)\n"
"  --db FILE       results database (default %s); shards are FILE.w<J> and, under\n"
"                  mpirun, FILE.rank<R>[.w<J>] next to it\n"
"  --jobs N        worker processes on this host or rank (default: online CPUs, 1 under\n"
"                  mpirun)\n"
"  --list          print the points with their keys and whether each is done; run nothing\n"
"  --no-merge      leave the shards (per-node databases); merge later with --merge\n"
"  --merge SHARD.. merge shard databases into --db, without duplicates, then remove them\n"
"  --keep          with --merge: keep the shard files\n"
"\n"
"exit status: 0 every point of this rank complete, 1 some point failed or was interrupted\n"
"or the database could not be written, 2 bad usage or bad grid.\n",
          HS_DEFAULT_DB);
}

typedef struct sweep_args {
  const char *grid, *db;
  int jobs, list, no_merge, merge, keep;
  char **shards;
  int n_shards;
} sweep_args;

#define bad(...) hs_cli_usage("sweep", 1, __VA_ARGS__)

enum { O_GRID = 256, O_DB, O_JOBS, O_LIST, O_NOMERGE, O_MERGE, O_KEEP, O_HELP };

static int parse_args(int argc, char **argv, sweep_args *a) {
  static const struct option opts[] = {
      {"grid", required_argument, NULL, O_GRID}, {"db", required_argument, NULL, O_DB},
      {"jobs", required_argument, NULL, O_JOBS}, {"list", no_argument, NULL, O_LIST},
      {"no-merge", no_argument, NULL, O_NOMERGE}, {"merge", no_argument, NULL, O_MERGE},
      {"keep", no_argument, NULL, O_KEEP}, {"help", no_argument, NULL, O_HELP},
      {NULL, 0, NULL, 0},
  };
  memset(a, 0, sizeof *a);
  a->db = HS_DEFAULT_DB;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_GRID: a->grid = optarg; break;
    case O_DB: a->db = optarg; break;
    case O_JOBS: {
      char *end = NULL;
      long v = strtol(optarg, &end, 10);
      if (!*optarg || *end || v < 1 || v > 4096)
        return bad("--jobs: expected an integer from 1 to 4096, got \"%s\"", optarg);
      a->jobs = (int)v;
      break;
    }
    case O_LIST: a->list = 1; break;
    case O_NOMERGE: a->no_merge = 1; break;
    case O_MERGE: a->merge = 1; break;
    case O_KEEP: a->keep = 1; break;
    case O_HELP:
    case 'h': usage(stdout); return -1;
    default: return bad("unknown or incomplete option \"%s\"", argv[optind - 1]);
    }
  }
  if (!*a->db) return bad("%s", "--db needs a FILE");
  if (a->merge) {
    if (a->grid || a->list || a->no_merge || a->jobs)
      return bad("%s", "--merge takes only shard files, --db and --keep");
    if (optind >= argc) return bad("%s", "--merge needs at least one SHARD file");
    a->shards = argv + optind;
    a->n_shards = argc - optind;
    /* Merging a file into itself would wait on its own lock until the busy timeout. */
    for (int i = 0; i < a->n_shards; i++)
      if (hs_outfile_same(a->shards[i], a->db))
        return bad("--merge: shard \"%s\" is the --db database itself", a->shards[i]);
    return 0;
  }
  if (optind < argc) return bad("unexpected argument \"%s\"", argv[optind]);
  if (a->keep) return bad("%s", "--keep goes with --merge");
  if (!a->grid) return bad("%s", "--grid FILE is required");
  return 0;
}

/* Shard paths of this rank: "PREFIX.w<J>", and PREFIX itself under mpirun with one job. */
static void shard_path(char *buf, size_t len, const char *prefix, int launched, int jobs, int j) {
  if (launched && jobs == 1) snprintf(buf, len, "%s", prefix);
  else snprintf(buf, len, "%s.w%d", prefix, j);
}

/* The leftover shards of this rank's prefix that exist now (from this or an earlier sweep). */
static int find_shards(const char *prefix, int launched, glob_t *gl, char ***out, int *n) {
  char pat[4200];
  snprintf(pat, sizeof pat, "%s.w[0-9]*", prefix);
  *out = NULL;
  *n = 0;
  memset(gl, 0, sizeof *gl);
  int grc = glob(pat, 0, NULL, gl);
  if (grc != 0 && grc != GLOB_NOMATCH) return -1;
  char **v = calloc(gl->gl_pathc + 2, sizeof *v);
  if (!v) return -1;
  if (launched && access(prefix, F_OK) == 0) v[(*n)++] = (char *)prefix;
  for (size_t i = 0; i < gl->gl_pathc; i++) {
    const char *p = gl->gl_pathv[i] + strlen(prefix) + 2;
    size_t k = strspn(p, "0123456789");
    if (k > 0 && p[k] == '\0') v[(*n)++] = gl->gl_pathv[i];
  }
  *out = v;
  return 0;
}

/* Runs points todo[j], todo[j + stride], ... into shard; returns the number that did not
 * end complete. */
static int run_worker(const hs_sweep_grid *g, const int *todo, int ntodo, int j, int stride,
                      const char *shard, const char *db, int rank) {
  int failed = 0;
  for (int k = j; k < ntodo; k += stride) {
    if (sweep_interrupted) {
      failed += (ntodo - k + stride - 1) / stride;
      break;
    }
    const hs_sweep_point *p = &g->points[todo[k]];
    char *argv[2 * HS_SWEEP_SETTINGS_MAX + 16];
    char seed[32];
    int argc = hs_sweep_point_argv(g, p, shard, db, seed, sizeof seed, argv, (int)(sizeof argv / sizeof argv[0]));
    /* `hetsim sim` prints its summary on stdout; the sweep prints one line per point instead. */
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    if (saved >= 0 && devnull >= 0) dup2(devnull, STDOUT_FILENO);
    if (devnull >= 0) close(devnull);
    int src = hs_cmd_sim(argc, argv);
    fflush(stdout);
    if (saved >= 0) {
      dup2(saved, STDOUT_FILENO);
      close(saved);
    }
    hs_store *s = NULL;
    hs_diag d = {0};
    int64_t run = 0;
    char status[16] = "";
    int rc = hs_store_open(&s, shard, 0, &d);
    if (!rc) rc = hs_sweep_tag_last(s, p->key, g->name, &run, status, &d);
    hs_store_close(s);
    if (rc) fprintf(stderr, "hetsim sweep: point %d (%s): %s\n", p->index, p->key, d.msg);
    int ok = !rc && src == 0 && !strcmp(status, "complete");
    if (!ok) failed++;
    if (run)
      printf("point %d %s: %s seed %llu on %s%s%s: %s (run %lld of %s, rank %d)\n", p->index,
             p->key, p->policy, (unsigned long long)p->seed, p->cluster, p->vary[0] ? ", " : "",
             p->vary, status, (long long)run, shard, rank);
    else
      printf("point %d %s: %s seed %llu on %s: failed before the run began (exit %d, rank %d)\n",
             p->index, p->key, p->policy, (unsigned long long)p->seed, p->cluster, src, rank);
    fflush(stdout);
    if (!strcmp(status, "interrupted")) sweep_interrupted = 1;
  }
  return failed;
}

/* Merges each shard into the open store; removes the merged ones unless keep. Returns the
 * number of shards that could not be merged. */
static int merge_shards(hs_store *s, char **shards, int n, int keep, int *merged, int *skipped) {
  int bad_shards = 0;
  *merged = *skipped = 0;
  for (int i = 0; i < n; i++) {
    hs_diag d = {0};
    int m = 0, k = 0;
    int rc = hs_sweep_merge(s, shards[i], &m, &k, &d);
    if (!rc && !keep) rc = hs_sweep_shard_remove(shards[i], &d);
    if (rc) {
      fprintf(stderr, "hetsim sweep: merging %s: %s (the shard is kept)\n", shards[i], d.msg);
      bad_shards++;
      continue;
    }
    *merged += m;
    *skipped += k;
  }
  return bad_shards;
}

/* Names on stderr the points first, first + step, ... of g that done lacks (at most 16, then a
 * count); returns how many there are. */
static int report_missing(const hs_sweep_grid *g, const hs_sweep_keys *done, int first, int step,
                          const char *db, const char *whose) {
  enum { SHOWN = 16 };
  int total = 0, n = 0;
  for (int i = first; i < g->n_points; i += step) {
    total++;
    n += !hs_sweep_keys_has(done, g->points[i].key);
  }
  if (!n) return 0;
  fprintf(stderr, "hetsim sweep: %d of %d points%s have no complete run in %s:", n, total, whose, db);
  int k = 0;
  for (int i = first; i < g->n_points && k < SHOWN; i += step)
    if (!hs_sweep_keys_has(done, g->points[i].key))
      fprintf(stderr, "%s point %d (%s)", k++ ? "," : "", g->points[i].index, g->points[i].key);
  if (n > SHOWN) fprintf(stderr, " and %d more", n - SHOWN);
  fprintf(stderr, "; run the same command again to run them\n");
  return n;
}

static int open_main(const char *db, hs_store **s) {
  hs_diag d = {0};
  int rc = hs_store_open(s, db, 0, &d);
  if (rc) {
    fprintf(stderr, "hetsim sweep: %s\n", d.msg);
    return hs_exit_code(rc) == 2 ? 2 : 1;
  }
  return 0;
}

static int cmd_merge(const sweep_args *a) {
  hs_store *s = NULL;
  int rc = open_main(a->db, &s);
  if (rc) return rc;
  int merged, skipped;
  int nbad = merge_shards(s, a->shards, a->n_shards, a->keep, &merged, &skipped);
  hs_store_close(s);
  printf("merged %d runs from %d shards into %s (%d already there)\n", merged,
         a->n_shards - nbad, a->db, skipped);
  return nbad ? 1 : 0;
}

int hs_cmd_sweep(int argc, char **argv) {
  long ran;
  return hs_cmd_sweep_counted(argc, argv, &ran);
}

int hs_cmd_sweep_counted(int argc, char **argv, long *ran) {
  *ran = 0;
  sweep_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  if (a.merge) return cmd_merge(&a);

  hs_diag d = {0};
  hs_sweep_grid g;
  if ((rc = hs_sweep_grid_load(&g, a.grid, &d))) {
    fprintf(stderr, "hetsim sweep: %s\n", d.msg);
    return rc == HS_EIO ? 2 : hs_exit_code(rc);
  }
  hs_sweep_rank rk;
  if ((rc = hs_sweep_rank_init(&rk, &argc, &argv, &d))) {
    fprintf(stderr, "hetsim sweep: %s\n", d.msg);
    hs_sweep_grid_free(&g);
    return 1;
  }
  int status = 1, lockfd = -1, nleft = 0, ntodo = 0, mine = 0, reached_end = 0, is_child = 0;
  int locked = 0; /* this process holds the lock file (and removes it at the end) */
  int *todo = NULL;
  char **left = NULL;
  glob_t gl;
  memset(&gl, 0, sizeof gl);
  hs_sweep_keys done = {0};
  hs_store *s = NULL;
  char prefix[4096], lockpath[4200];
  if (rk.launched) snprintf(prefix, sizeof prefix, "%s.rank%d", a.db, rk.rank);
  else snprintf(prefix, sizeof prefix, "%s", a.db);
  int jobs = a.jobs ? a.jobs : rk.launched ? 1 : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (jobs < 1) jobs = 1;

  /* Open (create, migrate) the main database first: a read-only folder, a full disk or a newer
   * schema stops the sweep before any work. */
  if (!a.list) {
    if ((status = open_main(a.db, &s))) goto out;
    hs_store_close(s);
    s = NULL;
    status = 1;
    snprintf(lockpath, sizeof lockpath, "%s.lock", prefix);
    lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lockfd < 0) {
      fprintf(stderr, "hetsim sweep: cannot create %s: %s\n", lockpath, strerror(errno));
      goto out;
    }
    if (flock(lockfd, LOCK_EX | LOCK_NB) != 0) {
      fprintf(stderr, "hetsim sweep: another sweep is writing the shards of %s (%s is locked)\n",
              a.db, lockpath);
      goto out;
    }
    locked = 1;
  }
  if (find_shards(prefix, rk.launched, &gl, &left, &nleft)) {
    fprintf(stderr, "hetsim sweep: out of memory listing shards\n");
    goto out;
  }
  rc = hs_sweep_keys_load(&done, a.db, &d);
  for (int i = 0; !rc && i < nleft; i++) rc = hs_sweep_keys_load(&done, left[i], &d);
  if (rc) {
    fprintf(stderr, "hetsim sweep: %s\n", d.msg);
    status = hs_exit_code(rc) == 2 ? 2 : 1;
    goto out;
  }
  if (a.list) {
    printf("point key              status  seed  policy  cluster\n");
    for (int i = 0; i < g.n_points; i++) {
      const hs_sweep_point *p = &g.points[i];
      printf("%5d %s %-7s %5llu  %s  %s%s%s\n", p->index, p->key,
             hs_sweep_keys_has(&done, p->key) ? "done" : "todo", (unsigned long long)p->seed,
             p->policy, p->cluster, p->vary[0] ? "  " : "", p->vary);
    }
    status = 0;
    goto out;
  }
  if (!(todo = calloc((size_t)g.n_points + 1, sizeof *todo))) goto out;
  for (int i = rk.rank; i < g.n_points; i += rk.size) {
    mine++;
    if (!hs_sweep_keys_has(&done, g.points[i].key)) todo[ntodo++] = i;
  }
  if (jobs > ntodo) jobs = ntodo > 0 ? ntodo : 1;
  printf("sweep %s: %d points, %d on rank %d of %d, %d already done, %d to run with %d job%s\n",
         g.name, g.n_points, mine, rk.rank, rk.size, mine - ntodo, ntodo, jobs, jobs > 1 ? "s" : "");
  fflush(stdout);

  struct sigaction old_sa;
  sweep_interrupted = 0;
  hs_cli_catch_signal(SIGINT, on_sigint, &old_sa);
  int failed = 0;
  char shard[4300];
  if (ntodo > 0 && jobs == 1) {
    shard_path(shard, sizeof shard, prefix, rk.launched, 1, 0);
    failed = run_worker(&g, todo, ntodo, 0, 1, shard, a.db, rk.rank);
  } else if (ntodo > 0) {
    pid_t *pids = calloc((size_t)jobs, sizeof *pids);
    for (int j = 0; pids && j < jobs; j++) {
      shard_path(shard, sizeof shard, prefix, rk.launched, jobs, j);
      pid_t pid = fork();
      if (pid == 0) {
        /* The worker process: run its share, free what it inherited, and leave without the
         * parent's clean-up (the lock file, MPI). */
        int f = run_worker(&g, todo, ntodo, j, jobs, shard, a.db, rk.rank);
        free(pids);
        is_child = 1;
        status = f ? 1 : 0;
        goto out;
      }
      if (pid < 0) {
        fprintf(stderr, "hetsim sweep: fork: %s\n", strerror(errno));
        failed++;
        break;
      }
      pids[j] = pid;
    }
    for (int j = 0; pids && j < jobs; j++) {
      if (!pids[j]) continue;
      int ws = 0;
      while (waitpid(pids[j], &ws, 0) < 0 && errno == EINTR) {}
      if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) failed++;
    }
    if (!pids) failed++;
    free(pids);
  }
  sigaction(SIGINT, &old_sa, NULL);

  /* The shards now: the leftovers and the ones this sweep made. */
  globfree(&gl);
  free(left);
  left = NULL;
  if (find_shards(prefix, rk.launched, &gl, &left, &nleft)) {
    fprintf(stderr, "hetsim sweep: out of memory listing shards\n");
    goto out;
  }
  int merge_bad = 0;
  if (!a.no_merge && nleft > 0) {
    if ((status = open_main(a.db, &s))) goto out;
    status = 1;
    int merged, skipped;
    merge_bad = merge_shards(s, left, nleft, 0, &merged, &skipped);
    hs_store_close(s);
    s = NULL;
    printf("merged %d runs from %d shards into %s (%d already there)\n", merged, nleft - merge_bad,
           a.db, skipped);
  }
  /* Count this rank's finished points from the databases themselves. */
  hs_sweep_keys_free(&done);
  rc = hs_sweep_keys_load(&done, a.db, &d);
  if (a.no_merge)
    for (int i = 0; !rc && i < nleft; i++) rc = hs_sweep_keys_load(&done, left[i], &d);
  if (rc) fprintf(stderr, "hetsim sweep: %s\n", d.msg);
  long ndone = 0;
  for (int i = rk.rank; i < g.n_points; i += rk.size) ndone += hs_sweep_keys_has(&done, g.points[i].key);
  hs_sweep_rank_barrier(&rk);
  reached_end = 1;
  long all_done = hs_sweep_rank_sum(&rk, ndone);
  /* The points of this rank complete now that were not before (none when --db could not be
   * read back). */
  long ran_here = ndone - (mine - ntodo);
  *ran = hs_sweep_rank_sum(&rk, ran_here > 0 ? ran_here : 0);
  if (rk.rank == 0 || !rk.mpi)
    printf("sweep %s: %ld of %d points complete%s%s\n", g.name, all_done,
           rk.mpi ? g.n_points : mine, rk.mpi || !rk.launched ? "" : " on this rank",
           sweep_interrupted ? " (interrupted)" : "");
  fflush(stdout);
  /* A point without a complete run fails the sweep by name. Under MPI every rank has merged by
   * now (the barrier), so rank 0 checks the whole grid in DB itself: a rank that ran its points
   * but lost them on the way (a merge that did not happen) cannot pass unnoticed. */
  int missing = 0;
  if (rk.mpi && !a.no_merge) {
    if (rk.rank == 0) {
      hs_sweep_keys all = {0};
      int lrc = hs_sweep_keys_load(&all, a.db, &d);
      if (lrc) fprintf(stderr, "hetsim sweep: %s\n", d.msg);
      missing = lrc ? 1 : report_missing(&g, &all, 0, 1, a.db, "");
      hs_sweep_keys_free(&all);
    }
  } else if (!rc) {
    char where[4300];
    snprintf(where, sizeof where, "%s%s", a.db, a.no_merge ? " or its shards" : "");
    missing = report_missing(&g, &done, rk.rank, rk.size, where, rk.launched ? " of this rank" : "");
  }
  status = (!rc && ndone == mine && !merge_bad && !missing) ? 0 : 1;

out:
  fflush(stdout);
  if (lockfd >= 0) {
    if (locked && !is_child) unlink(lockpath);
    close(lockfd);
  }
  if (!is_child && !reached_end && status && !a.list) {
    fflush(stderr);
    hs_sweep_rank_abort(&rk, status);
  }
  if (!is_child) hs_sweep_rank_finalize(&rk);
  hs_store_close(s);
  hs_sweep_keys_free(&done);
  globfree(&gl);
  free(left);
  free(todo);
  hs_sweep_grid_free(&g);
  if (is_child) {
    fflush(stderr);
    _exit(status);
  }
  return status;
}
