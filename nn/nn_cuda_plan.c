/* nn_cuda_plan: cuDNN graph-API plans for one convolution, for a GPU or a description of one
 * (see nn_cuda_plan.h). */
#include "nn/nn_cuda_plan.h"

#include <stdlib.h>
#include <string.h>

const char *hs_cuda_math_name(hs_cuda_math m) { return m == HS_CUDA_MATH_FAST ? "fast" : "strict"; }

int hs_cuda_math_parse(const char *s, const char *what, hs_cuda_math *out, hs_diag *d) {
  if (s && !strcmp(s, "strict")) *out = HS_CUDA_MATH_STRICT;
  else if (s && !strcmp(s, "fast")) *out = HS_CUDA_MATH_FAST;
  else
    return hs_diag_set(d, HS_EINVAL, "%s: expected \"strict\" (full fp32, deterministic) or "
                       "\"fast\" (TF32 tensor cores and non-deterministic engines allowed), got \"%s\"",
                       what, s ? s : "");
  return 0;
}

int hs_cuda_math_from_env(hs_cuda_math *out, hs_diag *d) {
  const char *s = getenv("HETSIM_CUDA_MATH");
  *out = HS_CUDA_MATH_STRICT;
  if (!s || !s[0]) return 0;
  return hs_cuda_math_parse(s, "environment variable HETSIM_CUDA_MATH", out, d);
}

#if HETSIM_HAVE_CUDA && HETSIM_HAVE_CUDNN

/* Tensor ids inside one convolution's operation graph: input, filter, output (or their
 * gradients, by direction). */
enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

const char *hs_cuplan_dir_name(hs_cuplan_dir dir) {
  switch (dir) {
  case HS_CUPLAN_FWD: return "forward";
  case HS_CUPLAN_DGRAD: return "backward-data";
  case HS_CUPLAN_WGRAD: return "backward-filter";
  case HS_CUPLAN_DIRS: break;
  }
  return "?";
}

int hs_cuplan_dnn_err(const hs_cudnn_api *dnn, cudnnStatus_t s, const char *what, hs_diag *d) {
  if (s == CUDNN_STATUS_SUCCESS) return 0;
  char last[512];
  last[0] = '\0';
  dnn->cudnnGetLastErrorString(last, sizeof last);
  int code = HS_ERUNTIME;
  if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    code = HS_ENOMEM;
  else if (s == CUDNN_STATUS_NOT_SUPPORTED || (s >= 3000 && s < 4000))
    code = HS_EUNSUPPORTED; /* the 3000s are cuDNN's "not supported" family */
  return hs_diag_set(d, code, "cuDNN: %s: %s%s%s%s", what, dnn->cudnnGetErrorString(s),
                     last[0] ? " (" : "", last, last[0] ? ")" : "");
}

/* Sticky helpers: after the first failure they do nothing, so descriptor construction reads as
 * straight-line code checked once. */
typedef struct builder {
  const hs_cudnn_api *dnn;
  hs_diag *d;
  int rc;
} builder;

static cudnnBackendDescriptor_t b_create(builder *b, cudnnBackendDescriptorType_t type, const char *what) {
  cudnnBackendDescriptor_t desc = NULL;
  if (b->rc) return NULL;
  b->rc = hs_cuplan_dnn_err(b->dnn, b->dnn->cudnnBackendCreateDescriptor(type, &desc), what, b->d);
  return b->rc ? NULL : desc;
}

static void b_set(builder *b, cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t name,
                  cudnnBackendAttributeType_t type, int64_t count, const void *elems, const char *what) {
  if (b->rc) return;
  b->rc = hs_cuplan_dnn_err(b->dnn, b->dnn->cudnnBackendSetAttribute(desc, name, type, count, elems), what, b->d);
}

static void b_finalize(builder *b, cudnnBackendDescriptor_t desc, const char *what) {
  if (b->rc) return;
  b->rc = hs_cuplan_dnn_err(b->dnn, b->dnn->cudnnBackendFinalize(desc), what, b->d);
}

static void destroy(const hs_cudnn_api *dnn, cudnnBackendDescriptor_t desc) {
  if (desc) (void)dnn->cudnnBackendDestroyDescriptor(desc);
}

static cudnnBackendDescriptor_t b_tensor(builder *b, int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w,
                                         int64_t align) {
  const int64_t dims[4] = {n, c, h, w};
  const int64_t strides[4] = {c * h * w, h * w, w, 1};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t t = b_create(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
  b_set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor type");
  b_set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dims");
  b_set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "tensor strides");
  b_set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id");
  b_set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
  b_finalize(b, t, "tensor finalize");
  return t;
}

void hs_cuplan_free(const hs_cudnn_api *dnn, hs_cuplan *p) {
  for (int i = HS_CUPLAN_DESCS - 1; i >= 0; i--) destroy(dnn, p->desc[i]);
  memset(p->desc, 0, sizeof p->desc);
}

/* The numerical notes that strict math refuses: on fp32 data a tensor-core engine computes in
 * TF32, the next two lose precision, non-determinism adds in a varying order, and FFT and
 * Winograd engines (deterministic) transform the data, with errors well above fp32 rounding. */
static const unsigned STRICT_REFUSED = (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE) |
                                       (1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) |
                                       (1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) |
                                       (1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) |
                                       (1u << CUDNN_NUMERICAL_NOTE_FFT) | (1u << CUDNN_NUMERICAL_NOTE_WINOGRAD) |
                                       (1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4) |
                                       (1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6) |
                                       (1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13);

/* The notes of kind attr/type (numerical or behavior) that engine eng carries, as bits: bit i
 * set for note i. The note types are C enums, which have the size of an int. */
_Static_assert(sizeof(cudnnBackendNumericalNote_t) == sizeof(int) && sizeof(cudnnBackendBehaviorNote_t) == sizeof(int),
               "cuDNN's note enums are read into an int array");
static int note_bits(const hs_cudnn_api *dnn, cudnnBackendDescriptor_t eng, cudnnBackendAttributeName_t attr,
                     cudnnBackendAttributeType_t type, const char *what, unsigned *bits, hs_diag *d) {
  int list[32];
  int64_t n = 0;
  *bits = 0;
  int rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendGetAttribute(eng, attr, type, 32, &n, list), what, d);
  for (int64_t i = 0; !rc && i < n && i < 32; i++)
    if (list[i] >= 0 && list[i] < 32) *bits |= 1u << list[i];
  return rc;
}

/* The engine of configuration cfg: its global index, numerical notes and behavior notes. */
static int engine_of(const hs_cudnn_api *dnn, cudnnBackendDescriptor_t cfg, int64_t *index, unsigned *notes,
                     unsigned *behavior, hs_diag *d) {
  builder b = {.dnn = dnn, .d = d, .rc = 0};
  cudnnBackendDescriptor_t eng = b_create(&b, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  int64_t got = 0;
  if (!b.rc)
    b.rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &eng),
                             "configuration's engine", d);
  *index = -1;
  *notes = *behavior = 0;
  if (!b.rc)
    b.rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                                                CUDNN_TYPE_INT64, 1, &got, index),
                             "engine index", d);
  if (!b.rc)
    b.rc = note_bits(dnn, eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, "engine notes", notes, d);
  if (!b.rc)
    b.rc = note_bits(dnn, eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, "engine behavior notes",
                     behavior, d);
  destroy(dnn, eng);
  return b.rc;
}

/* The operation graph of one convolution into k[0..5]. */
static int build_graph(const hs_cuplan_target *t, const hs_cuplan_conv *g, hs_cuplan_dir dir,
                       cudnnBackendDescriptor_t *k, hs_diag *d) {
  static const cudnnBackendDescriptorType_t op_type[HS_CUPLAN_DIRS] = {
      [HS_CUPLAN_FWD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
      [HS_CUPLAN_DGRAD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      [HS_CUPLAN_WGRAD] = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
  /* The attribute names of x, w, y, the convolution, alpha and beta for each direction. */
  static const cudnnBackendAttributeName_t attr[HS_CUPLAN_DIRS][6] = {
      [HS_CUPLAN_FWD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      [HS_CUPLAN_DGRAD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      [HS_CUPLAN_WGRAD] = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                           CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  builder b = {.dnn = t->dnn, .d = d, .rc = 0};
  k[0] = b_tensor(&b, UID_X, g->batch, g->in_c, g->in_h, g->in_w, 16);
  k[1] = b_tensor(&b, UID_W, g->out_c, g->in_c / g->groups, g->kernel, g->kernel, g->w_align);
  k[2] = b_tensor(&b, UID_Y, g->batch, g->out_c, g->out_h, g->out_w, 16);

  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2, dil[2] = {1, 1}, str[2] = {g->stride, g->stride}, pad[2] = {g->pad, g->pad};
  k[3] = b_create(&b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution");
  b_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "comp type");
  b_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "conv mode");
  b_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, "spatial dims");
  b_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "dilations");
  b_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str, "strides");
  b_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "pre-padding");
  b_set(&b, k[3], CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "post-padding");
  b_finalize(&b, k[3], "convolution finalize");

  const float alpha = 1.0f, beta = 0.0f;
  k[4] = b_create(&b, op_type[dir], "convolution operation");
  b_set(&b, k[4], attr[dir][0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[0], "operation x");
  b_set(&b, k[4], attr[dir][1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[1], "operation w");
  b_set(&b, k[4], attr[dir][2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[2], "operation y");
  b_set(&b, k[4], attr[dir][3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[3], "operation conv");
  b_set(&b, k[4], attr[dir][4], CUDNN_TYPE_FLOAT, 1, &alpha, "operation alpha");
  b_set(&b, k[4], attr[dir][5], CUDNN_TYPE_FLOAT, 1, &beta, "operation beta");
  b_finalize(&b, k[4], "convolution operation finalize");

  k[5] = b_create(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  /* With a device-properties target there is no handle: the heuristics and the plan take the
   * properties instead. */
  if (t->handle)
    b_set(&b, k[5], CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &t->handle, "graph handle");
  b_set(&b, k[5], CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k[4], "graph ops");
  b_finalize(&b, k[5], "operation graph finalize");
  return b.rc;
}

/* One heuristics query (mode, SM target) and its configurations in order. *cfgs is malloc'ed
 * (free the descriptors and the array); *count may be 0. */
static int heuristics(const hs_cuplan_target *t, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                      int sm_target, cudnnBackendDescriptor_t *heur_out, cudnnBackendDescriptor_t **cfgs_out,
                      int64_t *count_out, hs_diag *d) {
  const hs_cudnn_api *dnn = t->dnn;
  builder b = {.dnn = dnn, .d = d, .rc = 0};
  *heur_out = NULL;
  *cfgs_out = NULL;
  *count_out = 0;
  cudnnBackendDescriptor_t heur = b_create(&b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
  b_set(&b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
        "heuristics graph");
  b_set(&b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
  if (t->deviceprop)
    b_set(&b, heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->deviceprop,
          "heuristics device properties");
  if (sm_target > 0) {
    const int32_t sm = sm_target;
    b_set(&b, heur, CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET, CUDNN_TYPE_INT32, 1, &sm, "heuristics SM target");
  }
  b_finalize(&b, heur, "heuristics finalize");
  int64_t count = 0;
  if (!b.rc)
    b.rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL),
                             "heuristics result count", d);
  cudnnBackendDescriptor_t *cfgs = NULL;
  if (!b.rc && count > 0) {
    cfgs = calloc((size_t)count, sizeof *cfgs);
    if (!cfgs) b.rc = hs_diag_set(d, HS_ENOMEM, "out of host memory for cuDNN configurations");
    for (int64_t i = 0; i < count && !b.rc; i++)
      cfgs[i] = b_create(&b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration");
    int64_t got = 0;
    if (!b.rc)
      b.rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs),
                               "heuristics results", d);
    /* cuDNN may fill fewer than it counted: the rest stay empty and are destroyed unused. */
    if (!b.rc && got < count) {
      for (int64_t i = got; i < count; i++) destroy(dnn, cfgs[i]);
      count = got;
    }
  }
  if (b.rc) {
    if (cfgs)
      for (int64_t i = 0; i < count; i++) destroy(dnn, cfgs[i]);
    free(cfgs);
    destroy(dnn, heur);
    return b.rc;
  }
  *heur_out = heur;
  *cfgs_out = cfgs;
  *count_out = count;
  return 0;
}

/* Tries configuration cfg: the math filter, the plan, its workspace. 0 with *plan_out and *ws
 * set; otherwise the reason in why. */
static int try_config(const hs_cuplan_target *t, cudnnBackendDescriptor_t cfg, int64_t *engine, unsigned *notes,
                      unsigned *behavior, cudnnBackendDescriptor_t *plan_out, int64_t *ws, hs_diag *why) {
  const hs_cudnn_api *dnn = t->dnn;
  *plan_out = NULL;
  int rc = engine_of(dnn, cfg, engine, notes, behavior, why);
  if (rc) return rc;
  if (t->math == HS_CUDA_MATH_STRICT && (*notes & STRICT_REFUSED))
    return hs_diag_set(why, HS_EUNSUPPORTED, "engine %lld uses %s (strict math refuses it; HETSIM_CUDA_MATH=fast "
                       "allows it)", (long long)*engine,
                       (*notes & (1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)) ? "a non-deterministic reduction"
                                                                                 : "TF32 tensor cores or reduced precision");
  builder b = {.dnn = dnn, .d = why, .rc = 0};
  cudnnBackendDescriptor_t plan = b_create(&b, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
  if (t->handle)
    b_set(&b, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &t->handle, "plan handle");
  else
    b_set(&b, plan, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t->deviceprop,
          "plan device properties");
  b_set(&b, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg,
        "plan configuration");
  b_finalize(&b, plan, "execution plan finalize");
  int64_t n_ws = 0;
  *ws = 0;
  if (!b.rc)
    b.rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                                CUDNN_TYPE_INT64, 1, &n_ws, ws),
                             "plan workspace size", why);
  if (!b.rc && *ws < 0) b.rc = hs_diag_set(why, HS_ERUNTIME, "cuDNN: plan workspace of %lld bytes", (long long)*ws);
  if (!b.rc && t->workspace_fits) b.rc = t->workspace_fits(t->ctx, *ws, why);
  if (b.rc) {
    destroy(dnn, plan);
    return b.rc;
  }
  *plan_out = plan;
  return 0;
}

/* One way of asking the heuristics: a mode and an SM target (0 = the whole device). */
typedef struct heur_try {
  cudnnBackendHeurMode_t mode;
  int sm;
} heur_try;

int hs_cuplan_build(const hs_cuplan_target *t, const hs_cuplan_conv *g, hs_cuplan_dir dir, hs_cuplan *p,
                    hs_diag *d) {
  memset(p, 0, sizeof *p);
  if (!t || !t->dnn || (!t->handle) == (!t->deviceprop))
    return hs_diag_set(d, HS_EINVAL, "cuDNN plan: give exactly one of a handle and device properties");
  if ((int)dir < 0 || dir >= HS_CUPLAN_DIRS || g->batch < 1 || g->groups < 1 || g->in_c % g->groups ||
      g->out_c % g->groups || g->kernel < 1 || g->stride < 1 || g->pad < 0)
    return hs_diag_set(d, HS_EINVAL, "cuDNN plan: bad convolution (direction %d, batch %d, %d->%d channels, "
                       "groups %d, kernel %d, stride %d, pad %d)",
                       (int)dir, g->batch, g->in_c, g->out_c, g->groups, g->kernel, g->stride, g->pad);
  const hs_cudnn_api *dnn = t->dnn;
  p->batch = g->batch;
  cudnnBackendDescriptor_t *k = p->desc;
  int rc = build_graph(t, g, dir, k, d);
  /* Heuristics A, then the fallback list; with an SM target, the same again without it when
   * nothing tuned for the partition qualifies. */
  const heur_try tries[4] = {{CUDNN_HEUR_MODE_A, t->sm_count},
                             {CUDNN_HEUR_MODE_FALLBACK, t->sm_count},
                             {CUDNN_HEUR_MODE_A, 0},
                             {CUDNN_HEUR_MODE_FALLBACK, 0}};
  const int n_tries = t->sm_count > 0 ? 4 : 2;
  hs_diag why = {0}; /* the last configuration's reason, reported only if none works */
  hs_diag nomem = {0}; /* the last workspace that did not fit: the real cause, when there is one */
  int why_rc = 0, seen = 0;
  for (int m = 0; !rc && m < n_tries && !k[HS_CUPLAN_DESCS - 1]; m++) {
    cudnnBackendDescriptor_t heur = NULL, *cfgs = NULL;
    int64_t count = 0;
    hs_diag hd = {0};
    int hrc = heuristics(t, k[5], tries[m].mode, tries[m].sm, &heur, &cfgs, &count, &hd);
    if (hrc) { /* e.g. an SM target the device does not have: try the next way */
      why = hd;
      why_rc = hrc;
      continue;
    }
    int chosen = -1;
    for (int64_t i = 0; i < count && chosen < 0; i++) {
      cudnnBackendDescriptor_t plan = NULL;
      int64_t ws = 0, engine = -1;
      unsigned notes = 0, behavior = 0;
      hs_diag cd = {0};
      seen++;
      int crc = try_config(t, cfgs[i], &engine, &notes, &behavior, &plan, &ws, &cd);
      if (crc) {
        why = cd;
        why_rc = crc;
        if (crc == HS_ENOMEM) nomem = cd;
        continue;
      }
      chosen = (int)i;
      p->workspace = ws;
      p->engine = engine;
      p->notes = notes;
      p->behavior = behavior;
      p->sm_target = tries[m].sm;
      k[6] = heur;
      k[7] = cfgs[i];
      k[8] = plan;
    }
    for (int64_t i = 0; i < count; i++)
      if (i != chosen) destroy(dnn, cfgs[i]);
    free(cfgs);
    if (chosen < 0) destroy(dnn, heur);
  }
  if (!rc && !k[HS_CUPLAN_DESCS - 1]) {
    if (nomem.code) rc = hs_diag_set(d, HS_ENOMEM, "%s", nomem.msg);
    else if (why_rc) rc = hs_diag_set(d, HS_EUNSUPPORTED, "%s", why.msg);
    else rc = hs_diag_set(d, HS_EUNSUPPORTED, "cuDNN: no engine supports this convolution");
    if (seen) hs_diag_prefix(d, "none of %d engine configurations qualifies (%s math); the last", seen,
                             hs_cuda_math_name(t->math));
  }
  if (rc) {
    hs_cuplan_free(dnn, p);
    hs_diag_prefix(d, "conv2d %dx%d/%d (%d->%d channels, groups %d) %s at batch %d", g->kernel, g->kernel,
                   g->stride, g->in_c, g->out_c, g->groups, hs_cuplan_dir_name(dir), g->batch);
    return rc;
  }
  return 0;
}

int hs_cuplan_execute(const hs_cudnn_api *dnn, cudnnHandle_t handle, const hs_cuplan *p, void *x, void *w,
                      void *y, void *workspace, hs_diag *d) {
  if (!handle || !p->desc[HS_CUPLAN_DESCS - 1])
    return hs_diag_set(d, HS_EINVAL, "cuDNN: executing a plan needs a handle and a built plan");
  const int64_t uids[3] = {UID_X, UID_W, UID_Y};
  void *ptrs[3] = {x, w, y};
  builder b = {.dnn = dnn, .d = d, .rc = 0};
  cudnnBackendDescriptor_t pack = b_create(&b, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  b_set(&b, pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids, "pack ids");
  b_set(&b, pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs, "pack pointers");
  b_set(&b, pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "pack workspace");
  b_finalize(&b, pack, "variant pack finalize");
  if (!b.rc)
    b.rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendExecute(handle, p->desc[HS_CUPLAN_DESCS - 1], pack),
                             "convolution execute", d);
  destroy(dnn, pack);
  return b.rc;
}

/* cuDNN 9.8 introduced device-properties descriptors. */
static int deviceprop_supported(const hs_cudnn_api *dnn, hs_diag *d) {
  size_t v = dnn->cudnnGetVersion();
  if (v < 90800)
    return hs_diag_set(d, HS_EUNSUPPORTED, "cuDNN %zu.%zu has no device-properties descriptors (9.8 or later "
                       "needed)", v / 10000, (v % 10000) / 100);
  return 0;
}

int hs_cuplan_deviceprop_json(const hs_cudnn_api *dnn, const char *json, size_t len, cudnnBackendDescriptor_t *out,
                              hs_diag *d) {
  *out = NULL;
  int rc = deviceprop_supported(dnn, d);
  if (rc) return rc;
  builder b = {.dnn = dnn, .d = d, .rc = 0};
  cudnnBackendDescriptor_t dp = b_create(&b, CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "device properties");
  b_set(&b, dp, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, (int64_t)len, json,
        "device properties JSON");
  b_finalize(&b, dp, "device properties finalize");
  if (b.rc) {
    destroy(dnn, dp);
    /* cuDNN says BAD_PARAM for JSON it cannot use ("!json_object.HasMember(key)"). */
    if (d && d->code != HS_ENOMEM) d->code = b.rc = HS_EINVAL;
    return b.rc;
  }
  *out = dp;
  return 0;
}

int hs_cuplan_deviceprop_gpu(const hs_cudnn_api *dnn, int ordinal, cudnnBackendDescriptor_t *out, hs_diag *d) {
  *out = NULL;
  int rc = deviceprop_supported(dnn, d);
  if (rc) return rc;
  builder b = {.dnn = dnn, .d = d, .rc = 0};
  const int32_t id = ordinal;
  cudnnBackendDescriptor_t dp = b_create(&b, CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "device properties");
  b_set(&b, dp, CUDNN_ATTR_DEVICEPROP_DEVICE_ID, CUDNN_TYPE_INT32, 1, &id, "device properties GPU");
  b_finalize(&b, dp, "device properties finalize");
  if (b.rc) {
    destroy(dnn, dp);
    return b.rc;
  }
  *out = dp;
  return 0;
}

int hs_cuplan_deviceprop_serialize(const hs_cudnn_api *dnn, cudnnBackendDescriptor_t dp, char **json, hs_diag *d) {
  *json = NULL;
  int64_t n = 0;
  int rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendGetAttribute(dp, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                                                CUDNN_TYPE_CHAR, 0, &n, NULL),
                             "device properties JSON size", d);
  if (rc) return rc;
  char *s = malloc((size_t)n + 1);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of host memory for %lld bytes of JSON", (long long)n);
  int64_t got = 0;
  rc = hs_cuplan_dnn_err(dnn, dnn->cudnnBackendGetAttribute(dp, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                                            CUDNN_TYPE_CHAR, n, &got, s),
                         "device properties JSON", d);
  if (rc) {
    free(s);
    return rc;
  }
  if (got > n) got = n;
  /* cuDNN counts the terminating NUL in some versions: keep the text only. */
  while (got > 0 && s[got - 1] == '\0') got--;
  s[got] = '\0';
  *json = s;
  return 0;
}

#endif /* HETSIM_HAVE_CUDA && HETSIM_HAVE_CUDNN */
