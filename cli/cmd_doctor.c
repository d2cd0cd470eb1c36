/* hetsim doctor: what hetsim can do on this machine — build options, the libraries it links and
 * opens at run time, MPI (which binary of the build links it: hetsim-mpi only), the GPUs,
 * probes that really run (cuDNN, cuBLAS, NCCL, green contexts, MPS), the Fashion-MNIST files
 * and the results store — one line per check: ok, missing or failed,
 * with the reason. `--json` prints the same as one object (schema in docs/cli.md).
 *
 * Exit status: 0 unless hetsim itself cannot work (the store cannot create a database, or the
 * GSL or SQLite found is unusable): a missing GPU or GPU library is reported, not fatal. */
#define _GNU_SOURCE /* dladdr, to show which file provides each linked library */
#include <cblas.h>
#include <dlfcn.h>
#include <errno.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_version.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>
#include <zlib.h>

#include "cli/cli.h"
#include "core/core_buildinfo.h"
#include "core/core_json.h"
#include "core/core_store.h"
#include "nn/nn_blas.h"
#include "nn/nn_cudalib.h"
#include "nn/nn_data.h"
#include "nn/nn_probe.h"

#ifdef HS_SWEEP_MPI
#include <mpi.h>
#endif

/* Which binary this is. `hetsim-mpi` is built from the same sources with HS_SWEEP_MPI
 * (CMakeLists.txt) and is the only one that links libmpi; HETSIM_HAVE_MPI says only that the
 * build made it. `hetsim` under mpirun takes its rank from the launcher's environment
 * (cli/sweep_rank.h). */
#ifdef HS_SWEEP_MPI
#define DOCTOR_BINARY "hetsim-mpi"
#define DOCTOR_LINKS_MPI 1
#else
#define DOCTOR_BINARY "hetsim"
#define DOCTOR_LINKS_MPI 0
#endif

#define DOCTOR_SCHEMA_VERSION 1
#define DOCTOR_MAX_CHECKS (32 + HS_PROBE_MAX_GPUS)
/* SQLite 3.37 introduced STRICT tables, which the store's schema uses. */
#define DOCTOR_MIN_SQLITE 3037000

typedef struct doctor_check {
  const char *section; /* build, library, gpu, probe, data, store */
  char name[64];
  hs_probe_status status;
  char version[64];  /* empty: none */
  char path[HS_DL_PATH_MAX]; /* empty: none */
  char detail[3200]; /* empty: none */
  double value, expected; /* NaN: none */
} doctor_check;

typedef struct doctor {
  doctor_check checks[DOCTOR_MAX_CHECKS];
  int n;
  int unusable; /* hetsim itself cannot work here */
  hs_gpu_info gpus[HS_PROBE_MAX_GPUS];
  int n_gpus;
} doctor;

static doctor_check *add(doctor *doc, const char *section, const char *name, hs_probe_status st,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static doctor_check *add(doctor *doc, const char *section, const char *name, hs_probe_status st,
                         const char *fmt, ...) {
  /* DOCTOR_MAX_CHECKS bounds what the checks below add; past it the last entry is reused. */
  if (doc->n == DOCTOR_MAX_CHECKS) doc->n--;
  doctor_check *c = &doc->checks[doc->n++];
  memset(c, 0, sizeof *c);
  c->section = section;
  snprintf(c->name, sizeof c->name, "%s", name);
  c->status = st;
  c->value = c->expected = NAN;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
  }
  return c;
}

/* The file a linked function lives in: the shared library, or hetsim itself when static. */
static void linked_from(doctor_check *c, const void *fn_addr) {
  Dl_info info;
  if (dladdr(fn_addr, &info) && info.dli_fname) snprintf(c->path, sizeof c->path, "%s", info.dli_fname);
}

static void check_build(doctor *doc) {
  const char *mpi = DOCTOR_LINKS_MPI ? "yes" : HETSIM_HAVE_MPI ? "no (in hetsim-mpi)" : "no";
  doctor_check *c = add(doc, "build", DOCTOR_BINARY, HS_PROBE_OK, "CUDA %s, cuDNN %s, NCCL %s, MPI %s, sanitizers %s",
                        HETSIM_HAVE_CUDA ? "yes" : "no", HETSIM_HAVE_CUDNN ? "yes" : "no",
                        HETSIM_HAVE_NCCL ? "yes" : "no", mpi, HETSIM_SANITIZED ? "yes" : "no");
  snprintf(c->version, sizeof c->version, "%s", HETSIM_VERSION);
}

/* MPI: linked into hetsim-mpi only. `hetsim` reports where hetsim-mpi is (beside it, where the
 * build puts it) and what it does itself under mpirun. */
static void check_mpi(doctor *doc) {
#ifdef HS_SWEEP_MPI
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  MPI_Get_library_version(v, &len); /* MPI 3: callable before MPI_Init */
  v[strcspn(v, "\n")] = '\0';
  doctor_check *c = add(doc, "library", "MPI", HS_PROBE_OK,
                        "linked into hetsim-mpi: under mpirun `hetsim-mpi sweep` takes its rank "
                        "from MPI_COMM_WORLD; %s", v);
  snprintf(c->version, sizeof c->version, "%.*s", (int)strcspn(v, ","), v);
  linked_from(c, (const void *)&MPI_Get_library_version);
#else
  static const char own[] = "`hetsim sweep` under mpirun takes its rank from the launcher's "
                            "environment (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE)";
  if (!HETSIM_HAVE_MPI) {
    add(doc, "library", "MPI", HS_PROBE_MISSING,
        "not linked into hetsim, and this build found no MPI, so hetsim-mpi was not built "
        "(Debian: apt-get install libopenmpi-dev, then rebuild); %s", own);
    return;
  }
  char exe[HS_DL_PATH_MAX - 16];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  char *slash = strrchr(exe, '/');
  char bin[HS_DL_PATH_MAX];
  snprintf(bin, sizeof bin, "%.*s/hetsim-mpi", slash ? (int)(slash - exe) : 1, slash ? exe : ".");
  if (access(bin, X_OK) == 0) {
    doctor_check *c = add(doc, "library", "MPI", HS_PROBE_OK,
                          "not linked into hetsim; hetsim-mpi beside it links libmpi (ranks from "
                          "MPI_COMM_WORLD, one total); %s", own);
    snprintf(c->path, sizeof c->path, "%s", bin);
  } else {
    add(doc, "library", "MPI", HS_PROBE_MISSING,
        "not linked into hetsim; this build made hetsim-mpi, but it is not at %s; %s", bin, own);
  }
#endif
}

static void check_linked(doctor *doc) {
  /* GSL: hetsim's fits need GSL 2. */
  int gsl_major = atoi(gsl_version);
  doctor_check *c = add(doc, "library", "GSL", gsl_major >= 2 ? HS_PROBE_OK : HS_PROBE_FAILED, NULL);
  snprintf(c->version, sizeof c->version, "%s", gsl_version);
  linked_from(c, (const void *)&gsl_strerror); /* a function: data may be copied into hetsim */
  if (gsl_major < 2) {
    snprintf(c->detail, sizeof c->detail, "GSL %s is older than 2.0", gsl_version);
    doc->unusable = 1;
  }

  int sq = sqlite3_libversion_number();
  c = add(doc, "library", "SQLite", sq >= DOCTOR_MIN_SQLITE ? HS_PROBE_OK : HS_PROBE_FAILED, NULL);
  snprintf(c->version, sizeof c->version, "%s", sqlite3_libversion());
  linked_from(c, (const void *)&sqlite3_libversion);
  if (sq < DOCTOR_MIN_SQLITE) {
    snprintf(c->detail, sizeof c->detail, "SQLite %s is older than 3.37, which STRICT tables need",
             sqlite3_libversion());
    doc->unusable = 1;
  } else if (!sqlite3_threadsafe()) {
    c->status = HS_PROBE_FAILED;
    snprintf(c->detail, sizeof c->detail, "SQLite was built without thread safety");
    doc->unusable = 1;
  }

  c = add(doc, "library", "libyaml", HS_PROBE_OK, NULL);
  snprintf(c->version, sizeof c->version, "%s", yaml_get_version_string());
  linked_from(c, (const void *)&yaml_get_version_string);

  /* The configuration reads "OpenBLAS 0.3.21 DYNAMIC_ARCH ... MAX_THREADS=64". */
  const char *config = openblas_get_config();
  /* A core hetsim asked for (nn_blas.h) because OpenBLAS did not know this CPU is named. */
  const char *core_note = hs_blas_core_note();
  c = add(doc, "library", "OpenBLAS", HS_PROBE_OK, "%d threads; %s%s%s", openblas_get_num_threads(), config,
          core_note ? "; kernels set by hetsim with OPENBLAS_CORETYPE: " : "", core_note ? core_note : "");
  const char *ver = strchr(config, ' ');
  snprintf(c->version, sizeof c->version, "%.*s", ver ? (int)strcspn(ver + 1, " ") : 0, ver ? ver + 1 : "");
  linked_from(c, (const void *)&openblas_get_config);

  c = add(doc, "library", "zlib", HS_PROBE_OK, NULL);
  snprintf(c->version, sizeof c->version, "%s", zlibVersion());
  linked_from(c, (const void *)&zlibVersion);

  int rt = 0;
  hs_diag d = {0};
  if (hs_probe_cuda_runtime_version(&rt, &d)) {
    add(doc, "library", "CUDA runtime", HS_PROBE_MISSING, "%s", d.msg);
  } else {
    c = add(doc, "library", "CUDA runtime", HS_PROBE_OK, "static");
    snprintf(c->version, sizeof c->version, "%d.%d", rt / 1000, (rt % 1000) / 10);
    linked_from(c, (const void *)&hs_probe_cuda_runtime_version);
  }
}

static void check_loaded(doctor *doc) {
  for (int i = 0; i < HS_CUDALIB_COUNT; i++) {
    const hs_cudalib_status *st = hs_cudalib_status_get((hs_cudalib_id)i);
    /* A library that loaded may still be worth a word: the CUDA toolkit's stub driver resolves
     * every entry but runs nothing. */
    int loaded = st->state == HS_CUDALIB_OK;
    doctor_check *c = add(doc, "library", st->name, loaded ? HS_PROBE_OK : HS_PROBE_MISSING, "%s",
                          loaded ? st->note : st->error);
    snprintf(c->version, sizeof c->version, "%s", st->version_str);
    snprintf(c->path, sizeof c->path, "%s", st->path);
  }
}

static void check_gpus(doctor *doc) {
  hs_diag d = {0};
  if (hs_probe_gpus(doc->gpus, HS_PROBE_MAX_GPUS, &doc->n_gpus, &d)) {
    add(doc, "gpu", "GPU", HS_PROBE_MISSING, "%s", d.msg);
    return;
  }
  if (doc->n_gpus == 0) add(doc, "gpu", "GPU", HS_PROBE_MISSING, "no GPU found");
  for (int i = 0; i < doc->n_gpus; i++) {
    const hs_gpu_info *g = &doc->gpus[i];
    char name[32];
    snprintf(name, sizeof name, "GPU %d", g->index);
    add(doc, "gpu", name, HS_PROBE_OK, "%s, %s, compute capability %d.%d, %d SMs, %.1f GiB, SM clock %d MHz, "
        "memory clock %d MHz, %d-bit bus", g->name, g->uuid, g->cc_major, g->cc_minor, g->sms,
        (double)g->memory_bytes / (1024.0 * 1024.0 * 1024.0), g->clock_khz / 1000, g->memory_clock_khz / 1000,
        g->memory_bus_bits);
  }
}

static void add_probe(doctor *doc, const char *name, const hs_probe_result *r) {
  doctor_check *c = add(doc, "probe", name, r->status, "%s", r->detail);
  c->value = r->value;
  c->expected = r->expected;
}

/* NCCL's last: its communicators' set-up is the one call here without a bound, and a failure
 * of it can leave the device unusable for what would come after. */
static void check_probes(doctor *doc) {
  hs_probe_result r;
  hs_probe_cudnn_conv(&r);
  add_probe(doc, "cuDNN convolution", &r);
  hs_probe_cublas_gemm(&r);
  add_probe(doc, "cuBLAS GEMM", &r);
  hs_probe_green_ctx(&r);
  add_probe(doc, "green contexts", &r);
  hs_probe_mps(&r);
  add_probe(doc, "MPS", &r);
  hs_probe_nccl_allreduce(1, &r);
  add_probe(doc, "NCCL all-reduce 1 rank", &r);
  hs_probe_nccl_allreduce(2, &r);
  add_probe(doc, "NCCL 2 ranks on 1 GPU", &r);
}

/* --cudnn-deviceprop FILE: cuDNN's description of GPU 0 (the JSON that cuDNN builds plans from
 * without a GPU, tests/test_deviceless_cudnn.c), written to FILE through a temporary file and a
 * rename, so that a failure leaves an existing FILE as it was. Returns 0 when written. */
static int check_deviceprop(doctor *doc, const char *path) {
  char *json = NULL;
  hs_diag d = {0};
  if (hs_probe_cudnn_deviceprop(0, &json, &d)) {
    add(doc, "probe", "cuDNN device properties", d.code == HS_ENOTFOUND ? HS_PROBE_MISSING : HS_PROBE_FAILED,
        "%s", d.msg);
    return -1;
  }
  char tmp[HS_DL_PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  int ok = f && fputs(json, f) >= 0 && fputc('\n', f) != EOF;
  if (f && fclose(f) != 0) ok = 0;
  if (ok && rename(tmp, path) != 0) ok = 0;
  int err = errno;
  if (!ok) unlink(tmp);
  doctor_check *c = add(doc, "probe", "cuDNN device properties", ok ? HS_PROBE_OK : HS_PROBE_FAILED,
                        ok ? "GPU 0: %zu bytes of JSON written" : "GPU 0: cannot write %zu bytes of JSON: %s",
                        strlen(json), ok ? "" : strerror(err));
  snprintf(c->path, sizeof c->path, "%s", path);
  free(json);
  return ok ? 0 : -1;
}

static void check_data(doctor *doc) {
  const char *dir = getenv("HETSIM_FASHION_MNIST_DIR");
  if (!dir || !dir[0]) dir = HS_FASHION_MNIST_DIR;
  const char *splits[] = {"train", "test"};
  for (int i = 0; i < 2; i++) {
    hs_dataset *ds = NULL;
    hs_diag d = {0};
    /* Reading a few samples checks the files' format, not only that they exist. */
    if (hs_data_fashion_mnist_first(&ds, dir, splits[i], 16, &d)) {
      add(doc, "data", "Fashion-MNIST", d.code == HS_ENOTFOUND ? HS_PROBE_MISSING : HS_PROBE_FAILED, "%s", d.msg);
      return;
    }
    hs_data_close(ds);
  }
  doctor_check *c = add(doc, "data", "Fashion-MNIST", HS_PROBE_OK, "%s",
                        strcmp(dir, HS_FASHION_MNIST_SYNTHETIC) == 0
                            ? "its synthetic stand-in (HETSIM_FASHION_MNIST_DIR=synthetic), no files read"
                            : "train and test splits read");
  snprintf(c->path, sizeof c->path, "%s", dir);
}

/* Creates, migrates and removes a database in a fresh temporary folder. */
static void check_store(doctor *doc) {
  const char *tmp = getenv("TMPDIR");
  char dir[1024], db[1100];
  snprintf(dir, sizeof dir, "%s/hetsim-doctor-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    add(doc, "store", "results store", HS_PROBE_FAILED, "cannot create a temporary folder %s: %s", dir,
        strerror(errno));
    doc->unusable = 1;
    return;
  }
  snprintf(db, sizeof db, "%s/doctor.db", dir);
  hs_store *s = NULL;
  hs_diag d = {0};
  if (hs_store_open(&s, db, 0, &d)) {
    add(doc, "store", "results store", HS_PROBE_FAILED, "%s", d.msg);
    doc->unusable = 1;
  } else {
    add(doc, "store", "results store", HS_PROBE_OK, "created a database with schema version %d in %s (removed)",
        hs_store_schema_version(s), dir);
    hs_store_close(s);
  }
  const char *suffix[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
    char f[1200];
    snprintf(f, sizeof f, "%s%s", db, suffix[i]);
    unlink(f);
  }
  rmdir(dir);
}

static void print_text(const doctor *doc) {
  for (int i = 0; i < doc->n; i++) {
    const doctor_check *c = &doc->checks[i];
    printf("%-7s %s", hs_probe_status_name(c->status), c->name);
    if (c->version[0]) printf(" %s", c->version);
    if (c->path[0]) printf(" (%s)", c->path);
    if (c->detail[0]) printf(": %s", c->detail);
    putchar('\n');
  }
}

static void json_opt_string(hs_json *j, const char *key, const char *s) {
  hs_json_key(j, key);
  hs_json_string(j, s && s[0] ? s : NULL);
}

static void json_opt_double(hs_json *j, const char *key, double v) {
  hs_json_key(j, key);
  if (isnan(v)) hs_json_null(j);
  else hs_json_double(j, v);
}

static void print_json(const doctor *doc) {
  hs_json j;
  hs_json_init(&j, stdout, 1);
  hs_json_object_begin(&j);
  hs_json_key(&j, "schema_version");
  hs_json_int(&j, DOCTOR_SCHEMA_VERSION);
  hs_json_key(&j, "hetsim_version");
  hs_json_string(&j, HETSIM_VERSION);
  hs_json_key(&j, "binary");
  hs_json_string(&j, DOCTOR_BINARY);
  hs_json_key(&j, "build");
  hs_json_object_begin(&j);
  const struct { const char *k; int v; } build[] = {
      {"cuda", HETSIM_HAVE_CUDA}, {"cudnn", HETSIM_HAVE_CUDNN}, {"nccl", HETSIM_HAVE_NCCL},
      {"mpi", DOCTOR_LINKS_MPI}, {"hetsim_mpi", HETSIM_HAVE_MPI}, {"sanitized", HETSIM_SANITIZED}};
  for (size_t i = 0; i < sizeof build / sizeof build[0]; i++) {
    hs_json_key(&j, build[i].k);
    hs_json_bool(&j, build[i].v);
  }
  hs_json_object_end(&j);
  hs_json_key(&j, "usable");
  hs_json_bool(&j, !doc->unusable);
  int counts[3] = {0, 0, 0};
  hs_json_key(&j, "checks");
  hs_json_array_begin(&j);
  for (int i = 0; i < doc->n; i++) {
    const doctor_check *c = &doc->checks[i];
    counts[c->status]++;
    hs_json_object_begin(&j);
    json_opt_string(&j, "section", c->section);
    json_opt_string(&j, "name", c->name);
    json_opt_string(&j, "status", hs_probe_status_name(c->status));
    json_opt_string(&j, "version", c->version);
    json_opt_string(&j, "path", c->path);
    json_opt_string(&j, "detail", c->detail);
    json_opt_double(&j, "value", c->value);
    json_opt_double(&j, "expected", c->expected);
    hs_json_object_end(&j);
  }
  hs_json_array_end(&j);
  hs_json_key(&j, "gpus");
  hs_json_array_begin(&j);
  for (int i = 0; i < doc->n_gpus; i++) {
    const hs_gpu_info *g = &doc->gpus[i];
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
    hs_json_object_begin(&j);
    hs_json_key(&j, "index");
    hs_json_int(&j, g->index);
    json_opt_string(&j, "name", g->name);
    json_opt_string(&j, "uuid", g->uuid);
    json_opt_string(&j, "compute_capability", cc);
    hs_json_key(&j, "sms");
    hs_json_int(&j, g->sms);
    hs_json_key(&j, "memory_bytes");
    hs_json_int(&j, g->memory_bytes);
    hs_json_key(&j, "clock_khz");
    hs_json_int(&j, g->clock_khz);
    hs_json_key(&j, "memory_clock_khz");
    hs_json_int(&j, g->memory_clock_khz);
    hs_json_key(&j, "memory_bus_bits");
    hs_json_int(&j, g->memory_bus_bits);
    hs_json_object_end(&j);
  }
  hs_json_array_end(&j);
  hs_json_key(&j, "counts");
  hs_json_object_begin(&j);
  for (int s = 0; s < 3; s++) {
    hs_json_key(&j, hs_probe_status_name((hs_probe_status)s));
    hs_json_int(&j, counts[s]);
  }
  hs_json_object_end(&j);
  hs_json_object_end(&j);
  putchar('\n');
}

int hs_cmd_doctor(int argc, char **argv) {
  int json = 0;
  const char *deviceprop = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--cudnn-deviceprop")) {
      if (i + 1 >= argc || !argv[i + 1][0]) {
        fprintf(stderr, "hetsim doctor: --cudnn-deviceprop needs a file name\n");
        return 2;
      }
      deviceprop = argv[++i];
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: hetsim doctor [--json] [--cudnn-deviceprop FILE]\n\n"
             "Reports what hetsim can do on this machine, one line per check (ok, missing or\n"
             "failed, with the reason): build options; the libraries it links (GSL, SQLite,\n"
             "libyaml, OpenBLAS, zlib, the CUDA runtime); MPI (linked into hetsim-mpi only:\n"
             "`hetsim` says where hetsim-mpi is); the libraries it opens at run time (CUDA driver,\n"
             "cuBLAS, cuDNN, NCCL; see HETSIM_CUBLAS_PATH, HETSIM_CUDNN_PATH, HETSIM_NCCL_PATH);\n"
             "each GPU; probes that really run: a cuDNN convolution, a cuBLAS GEMM, NCCL\n"
             "all-reduce with 1 rank and with 2 ranks on one GPU, green-context SM partitions,\n"
             "the MPS control daemon; the Fashion-MNIST files; creating a results database.\n"
             "--json prints one object (schema in docs/cli.md).\n"
             "--cudnn-deviceprop FILE writes cuDNN's device-properties JSON of GPU 0 to FILE\n"
             "(cuDNN 9.8+), from which cuDNN builds plans without a GPU (docs/gpu.md).\n\n"
             "exit status: 0 unless hetsim itself cannot work here, or --cudnn-deviceprop was\n"
             "given and FILE could not be written (1); a missing GPU or GPU library is\n"
             "reported, not an error.\n");
      return 0;
    } else {
      fprintf(stderr, "hetsim doctor: unknown argument \"%s\"; run `hetsim doctor --help`\n", argv[i]);
      return 2;
    }
  }
  doctor *doc = calloc(1, sizeof *doc);
  if (!doc) {
    fprintf(stderr, "hetsim doctor: out of memory\n");
    return 1;
  }
  check_build(doc);
  check_linked(doc);
  check_mpi(doc);
  check_loaded(doc);
  check_gpus(doc);
  /* The properties file before the probes: the deviceless step needs it even if a probe hangs
   * and doctor is killed. */
  int prop_rc = deviceprop ? check_deviceprop(doc, deviceprop) : 0;
  check_probes(doc);
  check_data(doc);
  check_store(doc);
  if (json) print_json(doc);
  else print_text(doc);
  int rc = doc->unusable || prop_rc ? 1 : 0;
  fflush(stdout); /* the report first, then why the exit status is 1, also into one file */
  if (doc->unusable && !json) fprintf(stderr, "hetsim doctor: hetsim cannot work on this machine (see the failed lines)\n");
  if (prop_rc)
    fprintf(stderr, "hetsim doctor: --cudnn-deviceprop %s: not written (see the \"cuDNN device properties\" line)\n",
            deviceprop);
  free(doc);
  return rc;
}
