/* fake_cudnn: an emulated cuDNN 9 (graph API, fp32 2-D convolutions) for deviceless tests, built
 * as libcudnn.so.9 so that hetsim's loader (nn/nn_cudalib.c) opens it through HETSIM_CUDNN_PATH.
 * Its work runs on the emulated CUDA runtime of the process that loads it (fake_cudart.c, whose
 * symbols the test executable exports; gpu_emu.h).
 *
 * What it models, from cudnn_graph.h, cuDNN's backend descriptor reference and, where the two
 * differ or the reference is silent, what cuDNN 9.19 itself answers (noted below):
 * - Backend descriptors of the types a convolution needs: TENSOR, CONVOLUTION, the three
 *   convolution operations, OPERATIONGRAPH, ENGINEHEUR, ENGINE, ENGINECFG, EXECUTION_PLAN,
 *   VARIANT_PACK and DEVICEPROP (cuDNN 9.8's deviceless plans: from JSON, a device id or a
 *   handle). Other types are refused at creation with CUDNN_STATUS_NOT_SUPPORTED.
 * - cudnnBackendSetAttribute checks that the attribute belongs to the descriptor's type, its
 *   attribute type, its element count and, for descriptor-valued attributes, the elements'
 *   descriptor types (CUDNN_STATUS_BAD_PARAM and its refinements); once the descriptor is
 *   finalized it answers CUDNN_STATUS_NOT_INITIALIZED, as documented (9.19 says BAD_PARAM).
 *   Descriptor-valued attributes are copied when set, as 9.19 does: the elements may be
 *   destroyed at once, and one that was not finalized when set fails the finalization.
 * - cudnnBackendGetAttribute answers CUDNN_STATUS_NOT_INITIALIZED before finalization and
 *   writes at most requestedElementCount elements; the count it returns is the attribute's
 *   when none are requested and the number written otherwise (as 9.19). Descriptor-valued
 *   results fill the caller's own descriptors (ENGINEHEUR_RESULTS: ENGINECFG descriptors the
 *   caller created; ENGINECFG_ENGINE), which come back finalized.
 * - cudnnBackendFinalize validates: required attributes; tensors (as many dimensions as
 *   strides, dimensions positive, strides not negative, a unique id, a byte alignment that is a
 *   positive multiple of the element size, as 9.19 requires); convolutions (mode, padding,
 *   stride and dilation counts equal to the spatial dimensions, strides and dilations positive,
 *   paddings not negative); each convolution operation's tensors consistent with its
 *   convolution (output size (in + pre + post - dilation * (k - 1) - 1) / stride + 1, the
 *   batch, groups g = C / the filter's channel dimension dividing C and K, K output channels);
 *   unique ids distinct within an operation and naming one tensor within a graph. Alpha and
 *   beta (CUDNN_TYPE_FLOAT or CUDNN_TYPE_DOUBLE) default to 1 and 0: 9.19 finalizes an
 *   operation without them. What cuDNN supports but this emulation does not compute (other data
 *   types, 1-D and 3-D convolutions, vectorised or by-value tensors, fused graphs) is
 *   CUDNN_STATUS_NOT_SUPPORTED, naming the emulation as the reason.
 * - Heuristics and plans are for the device of the device properties given, else of the graph's
 *   or the plan's handle (both attributes are deprecated in 9.x), else a default one: 9.19
 *   finalizes them with neither, even without a GPU.
 * - cudnnBackendExecute checks that the plan and the variant pack are finalized, that the plan
 *   can run (one finalized from device properties without a handle only describes a device),
 *   that every tensor of the graph has a pointer, aligned as its tensor says, inside live
 *   emulated device memory of the handle's GPU for the tensor's whole extent (from its
 *   dimensions and strides), and that the workspace is such memory when the plan needs one
 *   (CUDNN_STATUS_BAD_PARAM and its refinements: the documented answer to "a required data
 *   pointer is invalid"). It then puts the convolution on the handle's stream (cudnnSetStream;
 *   NULL: the legacy default stream) as work the stream owns, with copies of all it needs. When
 *   that work runs (later, on the stream's executor; again at each launch of a CUDA graph that
 *   captured it) it checks again that every buffer is live (a VIOLATION otherwise: on a GPU it
 *   would read freed memory, as a captured graph that outlived its workspace does), scribbles
 *   over the workspace, and computes y = alpha * conv(x, w) + beta * y,
 *   dx = alpha * conv^T(dy, w) + beta * dx or dw = alpha * wgrad(x, dy) + beta * dw with double
 *   accumulation, groups, asymmetric padding, strides, dilations, CUDNN_CONVOLUTION's mirrored
 *   filter and any strides of every tensor (NCHW, NHWC, padded). With beta == 0 the output is
 *   not read, as cuDNN documents, so the NaN that uninitialised emulated memory holds stays out.
 *
 * How it is hostile:
 * - The heuristics answer, in a fixed order, first what a careless caller must not take: a TF32
 *   tensor-core engine (CUDNN_NUMERICAL_NOTE_TENSOR_CORE, run-time compiled; it rounds its
 *   operands to TF32 when it runs, so its results differ from fp32, unless NVIDIA_TF32_OVERRIDE
 *   was 0 when the library started), a split-K engine with
 *   atomic adds (CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: its results move by an ulp at random
 *   from run to run), a Winograd engine where one applies (deterministic, fp32 accumulation);
 *   then an fp32 engine whose plan fails to finalize (CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT:
 *   it wants 256 KiB of shared memory per block), an exact fp32 engine that needs a workspace
 *   proportional to the problem, and last an exact fp32 engine with no workspace. The fallback
 *   list is the non-deterministic engine, then the exact one without workspace. With an SM
 *   count target only the TF32 engine is offered, as cuDNN 9.19 does; a target above the
 *   device's SMs is CUDNN_STATUS_BAD_PARAM, as in 9.19.
 * - cudnnGetLastErrorString clears the message it returns (as 9.19); the JSON of device
 *   properties is read back with its terminating NUL counted.
 * - A destroyed descriptor or handle keeps its memory with a poisoned magic: passing it again
 *   is a VIOLATION (a use after free in cuDNN), as is a pointer that is not one.
 *
 * What it does not model: data types other than fp32, tensor cores' numerics beyond TF32
 * rounding, 1-D and 3-D convolutions, fused or multi-operation graphs, knobs, intermediates,
 * serialization of plans, kernel caches, cudnnBackendPopulateCudaGraph, the legacy (non-graph)
 * API, speed. Every device (behind a handle, a device id, or the default) is an H100 (compute
 * capability 9.0, 132 SMs, 227 KiB of opt-in shared memory per block), as the emulated driver's.
 *
 * Without the emulated runtime (a process linking the real CUDA runtime, as
 * test_deviceless_cudnn does) the runtime's symbols are weak and resolve to nothing: plans can
 * still be built from device properties, but cudnnCreate answers CUDNN_STATUS_NOT_INITIALIZED
 * (no GPU), so nothing can execute.
 *
 * Threading: one process-wide lock guards every descriptor and handle; work on streams uses
 * only its own copies. Units: bytes, elements. */
#include <cblas.h>
#include <cudnn.h>

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/gpu_emu/gpu_emu.h"

/* The emulated runtime's functions are optional: weak, NULL when the process has none. */
#pragma weak hs_emu_violation
#pragma weak hs_emu_device_range
#pragma weak hs_emu_stream_device
#pragma weak hs_emu_stream_submit_owned
#pragma weak hs_emu_current_device
#pragma weak cudaGetDeviceCount
#pragma weak cudaDeviceSynchronize

enum {
  MAX_DIMS = CUDNN_DIM_MAX,
  MAX_SPATIAL = CUDNN_DIM_MAX - 2,
  MAX_OPS = 4,       /* operations in a graph */
  MAX_RESULTS = 8,   /* heuristics' configurations */
  MAX_PACK = 64,     /* pointers in a variant pack */
  MAX_JSON = 1 << 16 /* bytes of device-properties JSON */
};

enum { HANDLE_LIVE = 0x484e444cu, HANDLE_DEAD = 0xdead484eu, DESC_LIVE = 0x44455343u, DESC_DEAD = 0xdead4445u };

/* Every device (behind a handle, a device id, or the default): an H100 SXM5, as the emulated driver's. */
#define EMU_DEVICE_VER 900
#define EMU_SMS 132
#define EMU_SMEM_OPTIN 232448

/* --- errors -------------------------------------------------------------------------------- */

static _Thread_local char last_msg[512];

static cudnnStatus_t fail(cudnnStatus_t s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cudnnStatus_t fail(cudnnStatus_t s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_msg, sizeof last_msg, fmt, ap);
  va_end(ap);
  /* cuDNN logs its errors when CUDNN_LOGERR_DBG=1. */
  const char *log = getenv("CUDNN_LOGERR_DBG");
  if (log && !strcmp(log, "1"))
    fprintf(stderr, "gpu_emu: cuDNN (pid %ld): %s: %s\n", (long)getpid(), cudnnGetErrorString(s), last_msg);
  return s;
}

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void violation(const char *fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (hs_emu_violation) hs_emu_violation("cuDNN: %s", buf);
  fprintf(stderr, "gpu_emu: VIOLATION (pid %ld): cuDNN: %s\n", (long)getpid(), buf);
  abort();
}

#define STATUS_LIST(XX)                                                                                               \
  XX(CUDNN_STATUS_SUCCESS) XX(CUDNN_STATUS_NOT_INITIALIZED) XX(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)              \
  XX(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH) XX(CUDNN_STATUS_DEPRECATED) XX(CUDNN_STATUS_LICENSE_ERROR)          \
  XX(CUDNN_STATUS_RUNTIME_IN_PROGRESS) XX(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)                                           \
  XX(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED) XX(CUDNN_STATUS_BAD_PARAM) XX(CUDNN_STATUS_INVALID_VALUE)                \
  XX(CUDNN_STATUS_BAD_PARAM_NULL_POINTER) XX(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)                               \
  XX(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED) XX(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)                                    \
  XX(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT) XX(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)                             \
  XX(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH) XX(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)                             \
  XX(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE) XX(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)                            \
  XX(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE) XX(CUDNN_STATUS_NOT_SUPPORTED)                                           \
  XX(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN) XX(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)                                   \
  XX(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE) XX(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)                                      \
  XX(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER) XX(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)          \
  XX(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH) XX(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)            \
  XX(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)                                                               \
  XX(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT) XX(CUDNN_STATUS_NOT_SUPPORTED_PADDING)                    \
  XX(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM) XX(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)                \
  XX(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE) XX(CUDNN_STATUS_INTERNAL_ERROR)                                \
  XX(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED) XX(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)                 \
  XX(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)                                                              \
  XX(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) XX(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)           \
  XX(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED) XX(CUDNN_STATUS_EXECUTION_FAILED)                           \
  XX(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER) XX(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)                              \
  XX(CUDNN_STATUS_EXECUTION_FAILED_CUDART) XX(CUDNN_STATUS_EXECUTION_FAILED_CURAND)

const char *cudnnGetErrorString(cudnnStatus_t status) {
#define STATUS_CASE(s) \
  case s: return #s;
  switch (status) { STATUS_LIST(STATUS_CASE) }
#undef STATUS_CASE
  return "CUDNN_UNKNOWN_STATUS";
}

/* "The internal error message buffer will be cleared after this call": it is. */
void cudnnGetLastErrorString(char *message, size_t max_size) {
  if (message && max_size > 0) snprintf(message, max_size, "%s", last_msg);
  last_msg[0] = '\0';
}

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

/* --- state --------------------------------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

struct cudnnContext {
  unsigned magic;
  int device;          /* the device current when it was created */
  cudaStream_t stream; /* cudnnSetStream; NULL: the legacy default stream */
  struct cudnnContext *next_all;
};

/* Every handle and descriptor ever made stays reachable from these lists (freed ones poisoned). */
static struct cudnnContext *all_handles;

/* The device a plan is built for: its properties, and whether it can run the plan. */
/* FROM_DEFAULT: neither a handle nor device properties. cuDNN 9.19 then still runs its
 * heuristics and finalizes plans, even on a machine without a GPU; the emulation assumes its H100. */
typedef enum target_from { FROM_NONE = 0, FROM_HANDLE, FROM_DEVICEPROP, FROM_DEFAULT } target_from;
typedef struct target {
  target_from from;
  struct cudnnContext *handle; /* FROM_HANDLE */
  int device;                  /* FROM_HANDLE; -1 otherwise */
  int ver;                     /* compute capability * 100 */
  int sms;
  int64_t smem_optin; /* bytes of shared memory a block may opt in to */
} target;

typedef struct tensor_s {
  cudnnDataType_t type;
  int nd;
  int64_t dim[MAX_DIMS], str[MAX_DIMS]; /* dimensions in N, C, spatial order; strides in elements */
  int64_t uid, align;                   /* align: bytes */
  int is_virtual;
} tensor_s;

typedef struct conv_s {
  cudnnDataType_t comp;
  cudnnConvolutionMode_t mode;
  int nsp;
  int64_t pre[MAX_SPATIAL], post[MAX_SPATIAL], stride[MAX_SPATIAL], dil[MAX_SPATIAL];
} conv_s;

/* The tensors of a convolution by role: the data (x or dx), the filter (w or dw), the output
 * (y or dy). Which one the operation writes depends on its direction. */
enum { T_DATA = 0, T_FILT = 1, T_OUT = 2 };
typedef enum dir_t { DIR_FWD = 0, DIR_DGRAD = 1, DIR_WGRAD = 2 } dir_t;

typedef struct op_s {
  dir_t dir;
  tensor_s t[3];
  conv_s conv;
  double alpha, beta;
  cudnnBackendAttributeType_t alpha_type, beta_type; /* as set; 0 (CUDNN_TYPE_HANDLE): not set */
} op_s;

typedef struct graph_s {
  struct cudnnContext *handle; /* NULL: none given */
  int nops;
  op_s op[MAX_OPS];
} graph_s;

typedef struct engine_s {
  graph_s graph;
  int64_t index;
  int sm_target; /* 0: the whole device */
  target dev;    /* FROM_NONE when no device properties were given */
} engine_s;

typedef struct heur_s {
  graph_s graph;
  cudnnBackendHeurMode_t mode;
  int sm_target;
  target dev;
  int n;
  int64_t results[MAX_RESULTS];
} heur_s;

typedef struct plan_s {
  engine_s eng;
  target dev;
  struct cudnnContext *handle; /* the handle it was built for, or NULL */
  int runnable;                /* built for a GPU (a handle, or the current device) */
  int64_t workspace;           /* bytes */
} plan_s;

typedef struct pack_s {
  int n;
  int64_t uid[MAX_PACK];
  void *ptr[MAX_PACK];
  void *workspace;
} pack_s;

typedef struct devprop_s {
  target dev;
  char *json; /* malloc'ed, NUL-terminated */
} devprop_s;

typedef union body {
  tensor_s tensor;
  conv_s conv;
  op_s op;
  graph_s graph;
  engine_s engine;
  engine_s cfg; /* an engine configuration is its engine (no knobs) */
  heur_s heur;
  plan_s plan;
  pack_s pack;
  devprop_s devprop;
} body;

/* An attribute as set, before finalization. A descriptor-valued one is copied when set, as cuDNN
 * does: the caller may destroy the elements at once, and an element that was not finalized when
 * set fails the finalization even if it was finalized since. */
typedef struct attr_val {
  cudnnBackendAttributeName_t name;
  cudnnBackendAttributeType_t type;
  int64_t count;
  void *data;     /* the elements as given (descriptor-valued: never dereferenced again) */
  body **snap;    /* descriptor-valued: count copies, NULL where the element was not finalized */
  int *snap_type; /* ... and their descriptor types */
} attr_val;

typedef struct desc {
  unsigned magic;
  cudnnBackendDescriptorType_t type;
  int finalized;
  attr_val *attrs;
  int n_attrs;
  body *b;
  struct desc *next_all;
} desc;

static desc *all_descs;

/* --- descriptor types and attributes ------------------------------------------------------- */

#define D_TENSOR CUDNN_BACKEND_TENSOR_DESCRIPTOR
#define D_CONV CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR
#define D_FWD CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
#define D_DGRAD CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
#define D_WGRAD CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR
#define D_GRAPH CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
#define D_HEUR CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR
#define D_ENGINE CUDNN_BACKEND_ENGINE_DESCRIPTOR
#define D_CFG CUDNN_BACKEND_ENGINECFG_DESCRIPTOR
#define D_PLAN CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR
#define D_PACK CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
#define D_DEVPROP CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR

static const char *desc_name(cudnnBackendDescriptorType_t t) {
  switch ((int)t) {
  case D_TENSOR: return "CUDNN_BACKEND_TENSOR_DESCRIPTOR";
  case D_CONV: return "CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR";
  case D_FWD: return "CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR";
  case D_DGRAD: return "CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR";
  case D_WGRAD: return "CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR";
  case D_GRAPH: return "CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR";
  case D_HEUR: return "CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR";
  case D_ENGINE: return "CUDNN_BACKEND_ENGINE_DESCRIPTOR";
  case D_CFG: return "CUDNN_BACKEND_ENGINECFG_DESCRIPTOR";
  case D_PLAN: return "CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR";
  case D_PACK: return "CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR";
  case D_DEVPROP: return "CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR";
  default: return "a descriptor type this emulation does not model";
  }
}

static int is_conv_op(int t) { return t == D_FWD || t == D_DGRAD || t == D_WGRAD; }

enum {
  A_SET = 1,        /* settable before finalization */
  A_GET = 2,        /* readable after finalization */
  A_UNMODELLED = 4, /* cuDNN has it; this emulation refuses it with CUDNN_STATUS_NOT_SUPPORTED */
};
enum { EL_NONE = -1, EL_ANY_OP = -2 };

typedef struct attr_rule {
  int desc;                          /* descriptor type */
  cudnnBackendAttributeName_t name;
  cudnnBackendAttributeType_t type, alt; /* the attribute types accepted (alt == type: one) */
  int64_t max;                       /* elements at most */
  unsigned flags;
  int elem; /* descriptor-valued: the elements' descriptor type, EL_ANY_OP or EL_NONE */
  const char *str;
} attr_rule;

#define RULE(d, a, t, alt, max, fl, el) \
  {d, CUDNN_ATTR_##a, CUDNN_TYPE_##t, CUDNN_TYPE_##alt, max, fl, el, "CUDNN_ATTR_" #a}
#define SG (A_SET | A_GET)
static const attr_rule rules[] = {
    RULE(D_TENSOR, TENSOR_BYTE_ALIGNMENT, INT64, INT64, 1, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_DATA_TYPE, DATA_TYPE, DATA_TYPE, 1, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_DIMENSIONS, INT64, INT64, MAX_DIMS, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_STRIDES, INT64, INT64, MAX_DIMS, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_VECTOR_COUNT, INT64, INT64, 1, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_VECTORIZED_DIMENSION, INT64, INT64, 1, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_UNIQUE_ID, INT64, INT64, 1, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_IS_VIRTUAL, BOOLEAN, BOOLEAN, 1, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_IS_BY_VALUE, BOOLEAN, BOOLEAN, 1, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_REORDERING_MODE, TENSOR_REORDERING_MODE, TENSOR_REORDERING_MODE, 1, SG, EL_NONE),
    RULE(D_TENSOR, TENSOR_RAGGED_OFFSET_DESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, A_UNMODELLED, D_TENSOR),
    RULE(D_CONV, CONVOLUTION_COMP_TYPE, DATA_TYPE, DATA_TYPE, 1, SG, EL_NONE),
    RULE(D_CONV, CONVOLUTION_CONV_MODE, CONVOLUTION_MODE, CONVOLUTION_MODE, 1, SG, EL_NONE),
    RULE(D_CONV, CONVOLUTION_DILATIONS, INT64, INT64, MAX_SPATIAL, SG, EL_NONE),
    RULE(D_CONV, CONVOLUTION_FILTER_STRIDES, INT64, INT64, MAX_SPATIAL, SG, EL_NONE),
    RULE(D_CONV, CONVOLUTION_POST_PADDINGS, INT64, INT64, MAX_SPATIAL, SG, EL_NONE),
    RULE(D_CONV, CONVOLUTION_PRE_PADDINGS, INT64, INT64, MAX_SPATIAL, SG, EL_NONE),
    RULE(D_CONV, CONVOLUTION_SPATIAL_DIMS, INT64, INT64, 1, SG, EL_NONE),
    RULE(D_FWD, OPERATION_CONVOLUTION_FORWARD_ALPHA, FLOAT, DOUBLE, 1, SG, EL_NONE),
    RULE(D_FWD, OPERATION_CONVOLUTION_FORWARD_BETA, FLOAT, DOUBLE, 1, SG, EL_NONE),
    RULE(D_FWD, OPERATION_CONVOLUTION_FORWARD_CONV_DESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_CONV),
    RULE(D_FWD, OPERATION_CONVOLUTION_FORWARD_W, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_FWD, OPERATION_CONVOLUTION_FORWARD_X, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_FWD, OPERATION_CONVOLUTION_FORWARD_Y, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_DGRAD, OPERATION_CONVOLUTION_BWD_DATA_ALPHA, FLOAT, DOUBLE, 1, SG, EL_NONE),
    RULE(D_DGRAD, OPERATION_CONVOLUTION_BWD_DATA_BETA, FLOAT, DOUBLE, 1, SG, EL_NONE),
    RULE(D_DGRAD, OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_CONV),
    RULE(D_DGRAD, OPERATION_CONVOLUTION_BWD_DATA_W, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_DGRAD, OPERATION_CONVOLUTION_BWD_DATA_DX, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_DGRAD, OPERATION_CONVOLUTION_BWD_DATA_DY, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_WGRAD, OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, FLOAT, DOUBLE, 1, SG, EL_NONE),
    RULE(D_WGRAD, OPERATION_CONVOLUTION_BWD_FILTER_BETA, FLOAT, DOUBLE, 1, SG, EL_NONE),
    RULE(D_WGRAD, OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_CONV),
    RULE(D_WGRAD, OPERATION_CONVOLUTION_BWD_FILTER_DW, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_WGRAD, OPERATION_CONVOLUTION_BWD_FILTER_X, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_WGRAD, OPERATION_CONVOLUTION_BWD_FILTER_DY, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_TENSOR),
    RULE(D_GRAPH, OPERATIONGRAPH_HANDLE, HANDLE, HANDLE, 1, SG, EL_NONE),
    RULE(D_GRAPH, OPERATIONGRAPH_OPS, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 64, SG, EL_ANY_OP),
    RULE(D_GRAPH, OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, INT64, INT64, 1, A_GET, EL_NONE),
    RULE(D_GRAPH, OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED, BOOLEAN, BOOLEAN, 1, SG, EL_NONE),
    RULE(D_GRAPH, OPERATIONGRAPH_IS_SAME_TOPOLOGY, BOOLEAN, BOOLEAN, 1, A_UNMODELLED, EL_NONE),
    RULE(D_HEUR, ENGINEHEUR_MODE, HEUR_MODE, HEUR_MODE, 1, SG, EL_NONE),
    RULE(D_HEUR, ENGINEHEUR_OPERATION_GRAPH, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_GRAPH),
    RULE(D_HEUR, ENGINEHEUR_RESULTS, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, INT64_MAX, A_GET, D_CFG),
    RULE(D_HEUR, ENGINEHEUR_SM_COUNT_TARGET, INT32, INT32, 1, SG, EL_NONE),
    RULE(D_HEUR, ENGINEHEUR_DEVICEPROP, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_DEVPROP),
    RULE(D_ENGINE, ENGINE_OPERATION_GRAPH, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_GRAPH),
    RULE(D_ENGINE, ENGINE_GLOBAL_INDEX, INT64, INT64, 1, SG, EL_NONE),
    RULE(D_ENGINE, ENGINE_KNOB_INFO, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, INT64_MAX, A_GET,
         CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR),
    RULE(D_ENGINE, ENGINE_NUMERICAL_NOTE, NUMERICAL_NOTE, NUMERICAL_NOTE, INT64_MAX, A_GET, EL_NONE),
    RULE(D_ENGINE, ENGINE_LAYOUT_INFO, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, INT64_MAX, A_GET,
         CUDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR),
    RULE(D_ENGINE, ENGINE_BEHAVIOR_NOTE, BEHAVIOR_NOTE, BEHAVIOR_NOTE, INT64_MAX, A_GET, EL_NONE),
    RULE(D_ENGINE, ENGINE_SM_COUNT_TARGET, INT32, INT32, 1, SG, EL_NONE),
    RULE(D_ENGINE, ENGINE_DEVICEPROP, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_DEVPROP),
    RULE(D_ENGINE, ENGINE_DISABLE_CLUSTER_COOPERATIVE, BOOLEAN, BOOLEAN, 1, A_UNMODELLED, EL_NONE),
    RULE(D_CFG, ENGINECFG_ENGINE, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_ENGINE),
    RULE(D_CFG, ENGINECFG_INTERMEDIATE_INFO, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, A_UNMODELLED,
         CUDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR),
    RULE(D_CFG, ENGINECFG_KNOB_CHOICES, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 64, A_UNMODELLED,
         CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR),
    RULE(D_CFG, ENGINECFG_WORKSPACE_SIZE, INT64, INT64, 1, A_GET, EL_NONE),
    RULE(D_CFG, ENGINECFG_SHARED_MEMORY_USED, INT64, INT64, 1, A_GET, EL_NONE),
    RULE(D_PLAN, EXECUTION_PLAN_HANDLE, HANDLE, HANDLE, 1, SG, EL_NONE),
    RULE(D_PLAN, EXECUTION_PLAN_ENGINE_CONFIG, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_CFG),
    RULE(D_PLAN, EXECUTION_PLAN_WORKSPACE_SIZE, INT64, INT64, 1, A_GET, EL_NONE),
    RULE(D_PLAN, EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS, INT64, INT64, MAX_PACK, A_UNMODELLED, EL_NONE),
    RULE(D_PLAN, EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS, INT64, INT64, MAX_PACK, A_UNMODELLED, EL_NONE),
    RULE(D_PLAN, EXECUTION_PLAN_JSON_REPRESENTATION, CHAR, CHAR, INT64_MAX, A_UNMODELLED, EL_NONE),
    RULE(D_PLAN, EXECUTION_PLAN_KERNEL_CACHE, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, A_UNMODELLED,
         CUDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR),
    RULE(D_PLAN, EXECUTION_PLAN_DEVICEPROP, BACKEND_DESCRIPTOR, BACKEND_DESCRIPTOR, 1, SG, D_DEVPROP),
    RULE(D_PACK, VARIANT_PACK_UNIQUE_IDS, INT64, INT64, MAX_PACK, SG, EL_NONE),
    RULE(D_PACK, VARIANT_PACK_DATA_POINTERS, VOID_PTR, VOID_PTR, MAX_PACK, SG, EL_NONE),
    RULE(D_PACK, VARIANT_PACK_INTERMEDIATES, VOID_PTR, VOID_PTR, MAX_PACK, A_UNMODELLED, EL_NONE),
    RULE(D_PACK, VARIANT_PACK_WORKSPACE, VOID_PTR, VOID_PTR, 1, SG, EL_NONE),
    RULE(D_PACK, VARIANT_PACK_OVERRIDE_UNIQUE_IDS, INT64, INT64, MAX_PACK, A_UNMODELLED, EL_NONE),
    RULE(D_PACK, VARIANT_PACK_OVERRIDE_SHAPES, INT64, INT64, MAX_PACK, A_UNMODELLED, EL_NONE),
    RULE(D_PACK, VARIANT_PACK_OVERRIDE_STRIDES, INT64, INT64, MAX_PACK, A_UNMODELLED, EL_NONE),
    RULE(D_DEVPROP, DEVICEPROP_DEVICE_ID, INT32, INT32, 1, SG, EL_NONE),
    RULE(D_DEVPROP, DEVICEPROP_HANDLE, HANDLE, HANDLE, 1, SG, EL_NONE),
    RULE(D_DEVPROP, DEVICEPROP_JSON_REPRESENTATION, CHAR, CHAR, MAX_JSON, SG, EL_NONE),
};
#undef RULE
#undef SG

static const attr_rule *rule_of(int dtype, cudnnBackendAttributeName_t name) {
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
    if (rules[i].desc == dtype && rules[i].name == name) return &rules[i];
  return NULL;
}

static const char *attr_name(int dtype, cudnnBackendAttributeName_t name) {
  const attr_rule *r = rule_of(dtype, name);
  return r ? r->str : "an attribute";
}

static size_t type_size(cudnnBackendAttributeType_t t) {
  switch (t) {
  case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
  case CUDNN_TYPE_DATA_TYPE: return sizeof(cudnnDataType_t);
  case CUDNN_TYPE_BOOLEAN: return sizeof(_Bool);
  case CUDNN_TYPE_INT64: return sizeof(int64_t);
  case CUDNN_TYPE_FLOAT: return sizeof(float);
  case CUDNN_TYPE_DOUBLE: return sizeof(double);
  case CUDNN_TYPE_VOID_PTR: return sizeof(void *);
  case CUDNN_TYPE_CONVOLUTION_MODE: return sizeof(cudnnConvolutionMode_t);
  case CUDNN_TYPE_HEUR_MODE: return sizeof(cudnnBackendHeurMode_t);
  case CUDNN_TYPE_NUMERICAL_NOTE: return sizeof(cudnnBackendNumericalNote_t);
  case CUDNN_TYPE_BEHAVIOR_NOTE: return sizeof(cudnnBackendBehaviorNote_t);
  case CUDNN_TYPE_TENSOR_REORDERING_MODE: return sizeof(cudnnBackendTensorReordering_t);
  case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
  case CUDNN_TYPE_INT32: return sizeof(int32_t);
  case CUDNN_TYPE_CHAR: return sizeof(char);
  default: return 0;
  }
}

/* --- handles and descriptors (mu held) ------------------------------------------------------ */

/* The live handle h, or NULL with the status in *st (NULL handle); a VIOLATION for a destroyed
 * handle or a pointer that is not one. */
static struct cudnnContext *handle_of(cudnnHandle_t h, const char *api, cudnnStatus_t *st) {
  if (!h) {
    *st = fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: the handle is NULL", api);
    return NULL;
  }
  if (h->magic == HANDLE_DEAD) violation("%s: handle %p used after cudnnDestroy", api, (void *)h);
  if (h->magic != HANDLE_LIVE) violation("%s: %p is not a cuDNN handle", api, (void *)h);
  return h;
}

static desc *desc_of(cudnnBackendDescriptor_t p, const char *api, cudnnStatus_t *st) {
  desc *d = p;
  if (!d) {
    *st = fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: the descriptor is NULL", api);
    return NULL;
  }
  if (d->magic == DESC_DEAD)
    violation("%s: descriptor %p used after cudnnBackendDestroyDescriptor", api, (void *)d);
  if (d->magic != DESC_LIVE) violation("%s: %p is not a backend descriptor", api, (void *)d);
  return d;
}

static void free_body(int type, body *b) {
  if (b && type == D_DEVPROP) free(b->devprop.json);
  free(b);
}

static void free_val(attr_val *a) {
  if (a->snap)
    for (int64_t j = 0; j < a->count; j++) free_body(a->snap_type[j], a->snap[j]);
  free(a->snap);
  free(a->snap_type);
  free(a->data);
}

static void free_attrs(desc *d) {
  for (int i = 0; i < d->n_attrs; i++) free_val(&d->attrs[i]);
  free(d->attrs);
  d->attrs = NULL;
  d->n_attrs = 0;
}

/* A copy of a finalized descriptor's contents (heap parts included), or NULL without memory. */
static body *body_clone(int type, const body *b) {
  body *c = malloc(sizeof *c);
  if (!c) return NULL;
  memcpy(c, b, sizeof *c);
  if (type == D_DEVPROP && b->devprop.json) {
    c->devprop.json = strdup(b->devprop.json);
    if (!c->devprop.json) {
      free(c);
      return NULL;
    }
  }
  return c;
}

static attr_val *attr_find(desc *d, cudnnBackendAttributeName_t name) {
  for (int i = 0; i < d->n_attrs; i++)
    if (d->attrs[i].name == name) return &d->attrs[i];
  return NULL;
}

/* --- attribute reading at finalization (mu held) ------------------------------------------- */

/* The attribute's value as set (NULL when not set). */
static const attr_val *got(desc *d, cudnnBackendAttributeName_t name) { return attr_find(d, name); }

static cudnnStatus_t missing(const desc *d, cudnnBackendAttributeName_t name) {
  return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(%s): the required attribute %s is not set",
              desc_name(d->type), attr_name(d->type, name));
}

static int64_t i64_at(const attr_val *a, int64_t i) { return ((const int64_t *)a->data)[i]; }

/* The copy of element i of descriptor-valued attribute a (its type checked when set); NULL with
 * *st set when that element was not finalized when it was set. */
static const body *elem_at(const desc *d, const attr_val *a, int64_t i, cudnnStatus_t *st) {
  if (!a->snap[i])
    *st = fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "cudnnBackendFinalize(%s): %s (element %lld) was not finalized "
               "when it was set", desc_name(d->type), attr_name(d->type, a->name), (long long)i);
  return a->snap[i];
}

/* --- targets: the device a plan is for ------------------------------------------------------ */

static target emu_target(target_from from, struct cudnnContext *h, int device) {
  target t = {.from = from, .handle = h, .device = device, .ver = EMU_DEVICE_VER, .sms = EMU_SMS,
              .smem_optin = EMU_SMEM_OPTIN};
  return t;
}

static int emu_device_count(void) {
  int n = 0;
  if (!cudaGetDeviceCount || !hs_emu_current_device || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

/* --- device properties JSON ---------------------------------------------------------------- */

typedef struct json_p {
  const char *s;
  size_t n, i;
  int depth;
} json_p;

static void j_ws(json_p *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

/* A string into out (up to cap - 1 bytes, escapes kept as written). */
static int j_string(json_p *p, char *out, size_t cap) {
  size_t k = 0;
  if (p->i >= p->n || p->s[p->i] != '"') return 0;
  p->i++;
  while (p->i < p->n && p->s[p->i] != '"') {
    if ((unsigned char)p->s[p->i] < 0x20) return 0;
    if (p->s[p->i] == '\\') {
      if (++p->i >= p->n || !p->s[p->i] || !strchr("\"\\/bfnrtu", p->s[p->i])) return 0;
      if (p->s[p->i] == 'u') {
        for (int h = 0; h < 4; h++)
          if (++p->i >= p->n || !p->s[p->i] || !strchr("0123456789abcdefABCDEF", p->s[p->i])) return 0;
      }
    }
    if (out && k + 1 < cap) out[k++] = p->s[p->i];
    p->i++;
  }
  if (p->i >= p->n) return 0;
  p->i++;
  if (out && cap) out[k] = '\0';
  return 1;
}

static int j_number(json_p *p, double *v) {
  size_t start = p->i;
  if (p->i < p->n && p->s[p->i] == '-') p->i++;
  size_t digits = p->i;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  if (p->i == digits) return 0;
  if (p->i < p->n && p->s[p->i] == '.') {
    size_t frac = ++p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    if (p->i == frac) return 0;
  }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    size_t ex = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    if (p->i == ex) return 0;
  }
  char buf[64];
  size_t len = p->i - start;
  if (len >= sizeof buf) return 0;
  memcpy(buf, p->s + start, len);
  buf[len] = '\0';
  *v = strtod(buf, NULL);
  return 1;
}

typedef enum jkind { J_BAD = 0, J_OBJ, J_ARR, J_STR, J_NUM, J_LIT } jkind;

/* Any value; its kind, and for an array the count of its elements. */
static jkind j_value(json_p *p, double *num, int *elems) {
  j_ws(p);
  if (p->i >= p->n || ++p->depth > 64) return J_BAD;
  jkind k = J_BAD;
  char c = p->s[p->i];
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    int count = 0;
    p->i++;
    j_ws(p);
    if (p->i < p->n && p->s[p->i] == close) p->i++;
    else
      for (;;) {
        if (c == '{') {
          j_ws(p);
          if (!j_string(p, NULL, 0)) return J_BAD;
          j_ws(p);
          if (p->i >= p->n || p->s[p->i++] != ':') return J_BAD;
        }
        if (j_value(p, NULL, NULL) == J_BAD) return J_BAD;
        count++;
        j_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
          p->i++;
          continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
          p->i++;
          break;
        }
        return J_BAD;
      }
    if (elems) *elems = count;
    k = c == '{' ? J_OBJ : J_ARR;
  } else if (c == '"') {
    k = j_string(p, NULL, 0) ? J_STR : J_BAD;
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    double v = 0;
    k = j_number(p, &v) ? J_NUM : J_BAD;
    if (num) *num = v;
  } else {
    static const char *const lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3 && k == J_BAD; i++) {
      size_t l = strlen(lits[i]);
      if (p->n - p->i >= l && !memcmp(p->s + p->i, lits[i], l)) {
        p->i += l;
        k = J_LIT;
      }
    }
  }
  p->depth--;
  return k;
}

/* The keys cuDNN 9.19 reads from a device's JSON (all required), with their kinds. */
static const struct json_key {
  const char *key;
  jkind kind;
} json_keys[] = {
    {"deviceVer", J_NUM},        {"multiProcessorCount", J_NUM},
    {"warpSize", J_NUM},         {"maxSharedMemoryPerBlock", J_NUM},
    {"maxSharedMemoryPerBlockOptin", J_NUM}, {"reservedSharedMemoryPerBlock", J_NUM},
    {"maxRegistersPerSM", J_NUM}, {"maxCtasPerSM", J_NUM},
    {"maxThreadsPerBlock", J_NUM}, {"maxThreadsPerSM", J_NUM},
    {"regsPerBlock", J_NUM},     {"totalGlobalMem", J_NUM},
    {"smClockRateKHz", J_NUM},   {"l2CacheSize", J_NUM},
    {"maxBlockSize", J_ARR},     {"memClockRateKHz", J_NUM},
    {"maxGridSize", J_ARR},      {"supportCoopLaunch", J_NUM},
    {"pciDeviceId", J_NUM},      {"isTccDriver", J_NUM},
    {"cudaDeviceId", J_NUM},     {"driverVer", J_NUM},
    {"deviceName", J_STR},
};
enum { N_JSON_KEYS = sizeof json_keys / sizeof json_keys[0] };

static cudnnStatus_t parse_devprop_json(const char *s, size_t n, target *t) {
  json_p p = {.s = s, .n = n, .i = 0, .depth = 0};
  double val[N_JSON_KEYS] = {0};
  int seen[N_JSON_KEYS] = {0};
  j_ws(&p);
  if (p.i >= p.n || p.s[p.i] != '{')
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR): the JSON "
                "representation is not a JSON object");
  p.i++;
  j_ws(&p);
  int empty = p.i < p.n && p.s[p.i] == '}';
  if (empty) p.i++;
  while (!empty) {
    char key[64];
    j_ws(&p);
    if (!j_string(&p, key, sizeof key)) break;
    j_ws(&p);
    if (p.i >= p.n || p.s[p.i++] != ':') break;
    double v = 0;
    int elems = 0;
    jkind k = j_value(&p, &v, &elems);
    if (k == J_BAD) break;
    for (int i = 0; i < N_JSON_KEYS; i++)
      if (!strcmp(key, json_keys[i].key)) {
        if (k != json_keys[i].kind || (k == J_ARR && elems != 3))
          return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR): JSON key "
                      "\"%s\" has the wrong type", key);
        seen[i] = 1;
        val[i] = v;
      }
    j_ws(&p);
    if (p.i < p.n && p.s[p.i] == ',') {
      p.i++;
      continue;
    }
    if (p.i < p.n && p.s[p.i] == '}') {
      p.i++;
      empty = 1;
      continue;
    }
    break;
  }
  j_ws(&p);
  if (!empty || p.i != p.n)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR): the JSON "
                "representation is not valid JSON (at byte %zu)", p.i);
  for (int i = 0; i < N_JSON_KEYS; i++)
    if (!seen[i])
      return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR): "
                  "!json_object.HasMember(\"%s\")", json_keys[i].key);
  *t = emu_target(FROM_DEVICEPROP, NULL, -1);
  t->ver = (int)val[0];
  t->sms = (int)val[1];
  t->smem_optin = (int64_t)val[4];
  if (t->sms < 1 || t->ver < 100)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR): deviceVer %d, "
                "multiProcessorCount %d", t->ver, t->sms);
  return CUDNN_STATUS_SUCCESS;
}

/* The JSON of an emulated GPU (malloc'ed). */
static char *emu_device_json(int device) {
  char *s = malloc(1024);
  if (!s) return NULL;
  snprintf(s, 1024,
           "{\"deviceVer\":%d,\"multiProcessorCount\":%d,\"warpSize\":32,\"maxSharedMemoryPerBlock\":49152,"
           "\"maxSharedMemoryPerBlockOptin\":%d,\"reservedSharedMemoryPerBlock\":1024,\"maxRegistersPerSM\":65536,"
           "\"maxCtasPerSM\":32,\"maxThreadsPerBlock\":1024,\"maxThreadsPerSM\":2048,\"regsPerBlock\":65536,"
           "\"totalGlobalMem\":85520809984,\"smClockRateKHz\":1980000,\"l2CacheSize\":52428800,"
           "\"maxBlockSize\":[1024,1024,64],\"memClockRateKHz\":2619000,\"maxGridSize\":[2147483647,65535,65535],"
           "\"supportCoopLaunch\":1,\"pciDeviceId\":%d,\"isTccDriver\":0,\"cudaDeviceId\":%d,\"driverVer\":13000,"
           "\"deviceName\":\"gpu_emu H100 (emulated)\"}",
           EMU_DEVICE_VER, EMU_SMS, EMU_SMEM_OPTIN, device, device);
  return s;
}

/* --- engines -------------------------------------------------------------------------------- */

/* How an engine computes when it runs. */
typedef enum prec_t {
  PREC_EXACT = 0,  /* double accumulation, rounded once to fp32 */
  PREC_TF32 = 1,   /* operands rounded to TF32 first */
  PREC_NONDET = 2, /* exact, then moved by an ulp at random (a varying order of atomic adds) */
  PREC_FLOAT = 3   /* fp32 accumulation (Winograd's transforms lose more than fp32 rounding) */
} prec_t;

enum { E_WINOGRAD_ONLY = 1, E_NEEDS_TF32 = 2, E_BIG_SMEM = 4 };

typedef struct engine_def {
  const char *what;
  unsigned notes;    /* bit i: cudnnBackendNumericalNote_t i */
  unsigned behavior; /* bit i: cudnnBackendBehaviorNote_t i */
  unsigned flags;
  prec_t prec;
} engine_def;

#define NOTE(n) (1u << CUDNN_NUMERICAL_NOTE_##n)
static const engine_def engines[] = {
    [0] = {"implicit GEMM, fp32, no workspace", 0, 0, 0, PREC_EXACT},
    [1] = {"precomputed-index GEMM, fp32, with a workspace", 0, 0, 0, PREC_EXACT},
    [2] = {"large-tile implicit GEMM, fp32 (256 KiB of shared memory per block)", 0, 0, E_BIG_SMEM, PREC_EXACT},
    [3] = {"split-K with atomic adds", NOTE(NONDETERMINISTIC), 0, 0, PREC_NONDET},
    [4] = {"Winograd F(2x2, 3x3)", NOTE(WINOGRAD) | NOTE(WINOGRAD_TILE_4x4), 0, E_WINOGRAD_ONLY, PREC_FLOAT},
    [5] = {"TF32 tensor-core implicit GEMM", NOTE(TENSOR_CORE), 1u << CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION,
           E_NEEDS_TF32, PREC_TF32},
};
#undef NOTE
enum { N_ENGINES = sizeof engines / sizeof engines[0], E_TF32 = 5, E_NONDET = 3, E_WINOGRAD = 4, E_BIGSMEM = 2,
       E_WS = 1, E_PLAIN = 0 };
enum { BIG_SMEM = 256 * 1024 };

static int engine_applies(int64_t e, const graph_s *g) {
  if (e < 0 || e >= N_ENGINES) return 0;
  const op_s *o = &g->op[0];
  if (engines[e].flags & E_WINOGRAD_ONLY)
    return o->dir != DIR_WGRAD && o->t[T_FILT].dim[2] == 3 && o->t[T_FILT].dim[3] == 3 && o->conv.stride[0] == 1 &&
           o->conv.stride[1] == 1 && o->conv.dil[0] == 1 && o->conv.dil[1] == 1;
  return 1;
}

/* Bytes of workspace engine e needs for the graph's convolution. */
static int64_t engine_workspace(int64_t e, const graph_s *g) {
  const op_s *o = &g->op[0];
  const int64_t *x = o->t[T_DATA].dim, *w = o->t[T_FILT].dim, *y = o->t[T_OUT].dim;
  switch (e) {
  case E_WS: /* one image's columns: C * R * S * P * Q floats */
    return (int64_t)sizeof(float) * x[1] * w[2] * w[3] * y[2] * y[3];
  case E_WINOGRAD: { /* transformed inputs, outputs and filters in 4x4 tiles */
    int64_t tiles = ((y[2] + 1) / 2) * ((y[3] + 1) / 2);
    return (int64_t)sizeof(float) * 16 * (x[0] * x[1] * tiles + y[0] * y[1] * tiles + w[0] * w[1]);
  }
  case E_TF32: /* the filter, reordered, and a counter per 8x8 output tile: grows with the batch */
    return (int64_t)sizeof(float) * (w[0] * w[1] * w[2] * w[3] + y[0] * y[1] * ((y[2] + 7) / 8) * ((y[3] + 7) / 8)) +
           256;
  default: return 0;
  }
}

/* Why engine e cannot run on device t (a status, with the message set), or success. */
static cudnnStatus_t engine_fits(int64_t e, const target *t) {
  if ((engines[e].flags & E_NEEDS_TF32) && t->ver < 800)
    return fail(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH,
                "cudnnBackendFinalize(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR): engine %lld (%s) needs compute "
                "capability 8.0, the device has %d.%d",
                (long long)e, engines[e].what, t->ver / 100, (t->ver % 100) / 10);
  if ((engines[e].flags & E_BIG_SMEM) && t->smem_optin < BIG_SMEM)
    return fail(
        CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT,
        "cudnnBackendFinalize(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR): engine %lld (%s) needs %d bytes of shared "
        "memory per block, the device offers %lld",
        (long long)e, engines[e].what, BIG_SMEM, (long long)t->smem_optin);
  return CUDNN_STATUS_SUCCESS;
}

/* The heuristics' answer, in order. */
static int heuristics_list(const heur_s *h, int64_t *out) {
  int n = 0;
  const int tf32 = h->dev.ver >= 800;
  if (h->sm_target > 0) { /* cuDNN 9.19 offers tensor-core engines only for an SM target */
    if (tf32) out[n++] = E_TF32;
    return n;
  }
  if (h->mode == CUDNN_HEUR_MODE_FALLBACK) {
    out[n++] = E_NONDET;
    out[n++] = E_PLAIN;
    return n;
  }
  if (tf32) out[n++] = E_TF32;
  out[n++] = E_NONDET;
  if (engine_applies(E_WINOGRAD, &h->graph)) out[n++] = E_WINOGRAD;
  out[n++] = E_BIGSMEM;
  out[n++] = E_WS;
  out[n++] = E_PLAIN;
  return n;
}

/* --- finalization, per descriptor type (mu held) ------------------------------------------- */

static int64_t tensor_span(const tensor_s *t) {
  int64_t span = 1;
  for (int i = 0; i < t->nd; i++) span += (t->dim[i] - 1) * t->str[i];
  return span;
}

static cudnnStatus_t fin_tensor(desc *d) {
  static const char *const what = "cudnnBackendFinalize(CUDNN_BACKEND_TENSOR_DESCRIPTOR)";
  const attr_val *type = got(d, CUDNN_ATTR_TENSOR_DATA_TYPE), *dims = got(d, CUDNN_ATTR_TENSOR_DIMENSIONS),
                 *strides = got(d, CUDNN_ATTR_TENSOR_STRIDES), *uid = got(d, CUDNN_ATTR_TENSOR_UNIQUE_ID),
                 *align = got(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT);
  if (!type) return missing(d, CUDNN_ATTR_TENSOR_DATA_TYPE);
  if (!dims) return missing(d, CUDNN_ATTR_TENSOR_DIMENSIONS);
  if (!strides) return missing(d, CUDNN_ATTR_TENSOR_STRIDES);
  if (!uid) return missing(d, CUDNN_ATTR_TENSOR_UNIQUE_ID);
  if (!align) return missing(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT);
  tensor_s t;
  memset(&t, 0, sizeof t);
  if (dims->count != strides->count)
    return fail(CUDNN_STATUS_BAD_PARAM, "%s: %lld dimensions but %lld strides", what, (long long)dims->count,
                (long long)strides->count);
  t.nd = (int)dims->count;
  int64_t elems = 1;
  for (int i = 0; i < t.nd; i++) {
    t.dim[i] = i64_at(dims, i);
    t.str[i] = i64_at(strides, i);
    if (t.dim[i] < 1 || t.str[i] < 0)
      return fail(CUDNN_STATUS_BAD_PARAM, "%s: dimension %d is %lld with stride %lld", what, i, (long long)t.dim[i],
                  (long long)t.str[i]);
    if (t.dim[i] > (INT64_C(1) << 40) / elems || t.str[i] > (INT64_C(1) << 40))
      return fail(CUDNN_STATUS_BAD_PARAM, "%s: the tensor is too large", what);
    elems *= t.dim[i];
  }
  t.type = *(const cudnnDataType_t *)type->data;
  t.uid = i64_at(uid, 0);
  t.align = i64_at(align, 0);
  if (t.align < 1 || t.align % (int64_t)sizeof(float))
    return fail(CUDNN_STATUS_BAD_PARAM, "%s: byte alignment %lld is not a positive multiple of the element size", what,
                (long long)t.align);
  const attr_val *a;
  if ((a = got(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL))) t.is_virtual = *(const _Bool *)a->data;
  if (t.type != CUDNN_DATA_FLOAT)
    return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, "%s: data type %d: the emulation models CUDNN_DATA_FLOAT only",
                what, (int)t.type);
  if ((a = got(d, CUDNN_ATTR_TENSOR_VECTOR_COUNT)) && i64_at(a, 0) != 1)
    return fail(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, "%s: vectorised tensors are not modelled by the emulation", what);
  if ((a = got(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE)) && *(const _Bool *)a->data)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: by-value tensors are not modelled by the emulation", what);
  if ((a = got(d, CUDNN_ATTR_TENSOR_REORDERING_MODE)) &&
      *(const cudnnBackendTensorReordering_t *)a->data != CUDNN_TENSOR_REORDERING_NONE)
    return fail(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT, "%s: reordered tensors are not modelled by the emulation", what);
  d->b->tensor = t;
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fin_conv(desc *d) {
  static const char *const what = "cudnnBackendFinalize(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)";
  const attr_val *comp = got(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE), *mode = got(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE),
                 *spatial = got(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS);
  if (!comp) return missing(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE);
  if (!mode) return missing(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE);
  if (!spatial) return missing(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS);
  conv_s c;
  memset(&c, 0, sizeof c);
  c.comp = *(const cudnnDataType_t *)comp->data;
  c.mode = *(const cudnnConvolutionMode_t *)mode->data;
  int64_t nsp = i64_at(spatial, 0);
  if (c.mode != CUDNN_CONVOLUTION && c.mode != CUDNN_CROSS_CORRELATION)
    return fail(CUDNN_STATUS_BAD_PARAM, "%s: convolution mode %d is neither CUDNN_CONVOLUTION nor "
                "CUDNN_CROSS_CORRELATION", what, (int)c.mode);
  if (nsp < 1 || nsp > MAX_SPATIAL)
    return fail(CUDNN_STATUS_BAD_PARAM, "%s: %lld spatial dimensions (1 to %d)", what, (long long)nsp, MAX_SPATIAL);
  c.nsp = (int)nsp;
  struct {
    cudnnBackendAttributeName_t name;
    int64_t *dst, min;
  } arrays[] = {{CUDNN_ATTR_CONVOLUTION_DILATIONS, c.dil, 1},
                {CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, c.stride, 1},
                {CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, c.pre, 0},
                {CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, c.post, 0}};
  for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
    const attr_val *a = got(d, arrays[k].name);
    if (!a) return missing(d, arrays[k].name);
    if (a->count != nsp)
      return fail(CUDNN_STATUS_BAD_PARAM, "%s: %s has %lld elements for %lld spatial dimensions", what,
                  attr_name(D_CONV, arrays[k].name), (long long)a->count, (long long)nsp);
    for (int i = 0; i < c.nsp; i++) {
      arrays[k].dst[i] = i64_at(a, i);
      if (arrays[k].dst[i] < arrays[k].min)
        return fail(CUDNN_STATUS_BAD_PARAM, "%s: %s[%d] is %lld (at least %lld)", what,
                    attr_name(D_CONV, arrays[k].name), i, (long long)arrays[k].dst[i], (long long)arrays[k].min);
    }
  }
  if (c.comp != CUDNN_DATA_FLOAT)
    return fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, "%s: compute type %d: the emulation models CUDNN_DATA_FLOAT only",
                what, (int)c.comp);
  if (c.nsp != 2)
    return fail(CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
                "%s: %d spatial dimensions: the emulation models 2-D convolutions only", what, c.nsp);
  d->b->conv = c;
  return CUDNN_STATUS_SUCCESS;
}

/* 1 when no two elements of t share an address (a layout an output may have). */
static int non_overlapping(const tensor_s *t) {
  int order[MAX_DIMS];
  for (int i = 0; i < t->nd; i++) order[i] = i;
  for (int i = 1; i < t->nd; i++)
    for (int j = i; j > 0 && t->str[order[j]] < t->str[order[j - 1]]; j--) {
      int s = order[j];
      order[j] = order[j - 1];
      order[j - 1] = s;
    }
  int64_t need = 1;
  for (int i = 0; i < t->nd; i++) {
    const int k = order[i];
    if (t->dim[k] == 1) continue;
    if (t->str[k] < need) return 0;
    need = t->str[k] * t->dim[k];
  }
  return 1;
}

static cudnnStatus_t fin_op(desc *d) {
  /* The attributes of alpha, beta, the convolution, then the tensors by role, per direction. */
  static const cudnnBackendAttributeName_t names[3][6] = {
      {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY}};
  static const char *const role[3][3] = {{"X", "W", "Y"}, {"DX", "W", "DY"}, {"X", "DW", "DY"}};
  const dir_t dir = d->type == D_FWD ? DIR_FWD : d->type == D_DGRAD ? DIR_DGRAD : DIR_WGRAD;
  const char *what = desc_name(d->type);
  op_s o;
  memset(&o, 0, sizeof o);
  o.dir = dir;
  /* Alpha and beta may be left unset (cuDNN 9.19 finalizes without them): 1 and 0 then. */
  o.alpha = 1;
  o.beta = 0;
  for (int k = 0; k < 2; k++) {
    const attr_val *a = got(d, names[dir][k]);
    if (!a) continue;
    double v = a->type == CUDNN_TYPE_FLOAT ? (double)*(const float *)a->data : *(const double *)a->data;
    if (k == 0) {
      o.alpha = v;
      o.alpha_type = a->type;
    } else {
      o.beta = v;
      o.beta_type = a->type;
    }
  }
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const attr_val *conv = got(d, names[dir][2]);
  if (!conv) return missing(d, names[dir][2]);
  const body *cb = elem_at(d, conv, 0, &st);
  if (!cb) return st;
  o.conv = cb->conv;
  for (int r = 0; r < 3; r++) {
    const attr_val *ta = got(d, names[dir][3 + r]);
    if (!ta) return missing(d, names[dir][3 + r]);
    const body *tb = elem_at(d, ta, 0, &st);
    if (!tb) return st;
    o.t[r] = tb->tensor;
  }
  const tensor_s *x = &o.t[T_DATA], *w = &o.t[T_FILT], *y = &o.t[T_OUT];
  for (int r = 0; r < 3; r++)
    if (o.t[r].nd != o.conv.nsp + 2)
      return fail(CUDNN_STATUS_BAD_PARAM,
                  "cudnnBackendFinalize(%s): tensor %s has %d dimensions, a convolution with %d spatial dimensions "
                  "needs %d", what, role[dir][r], o.t[r].nd, o.conv.nsp, o.conv.nsp + 2);
  for (int r = 0; r < 3; r++)
    for (int q = r + 1; q < 3; q++)
      if (o.t[r].uid == o.t[q].uid)
        return fail(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                    "cudnnBackendFinalize(%s): tensors %s and %s have the same unique id %lld", what, role[dir][r],
                    role[dir][q], (long long)o.t[r].uid);
  for (int r = 0; r < 3; r++)
    if (o.t[r].is_virtual)
      return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
                  "cudnnBackendFinalize(%s): tensor %s is virtual: the emulation models single convolutions, whose "
                  "tensors are all in memory", what, role[dir][r]);
  const int64_t n = x->dim[0], c = x->dim[1], k = w->dim[0], cg = w->dim[1];
  if (y->dim[0] != n)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(%s): batch %lld in %s, %lld in %s", what,
                (long long)n, role[dir][0], (long long)y->dim[0], role[dir][2]);
  if (c % cg)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(%s): %s has %lld channels, not a multiple of "
                "the filter's %lld input channels", what, role[dir][0], (long long)c, (long long)cg);
  const int64_t groups = c / cg;
  if (k % groups)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(%s): %lld output channels are not a multiple "
                "of %lld groups", what, (long long)k, (long long)groups);
  if (y->dim[1] != k)
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(%s): the filter has %lld output channels, %s "
                "has %lld", what, (long long)k, role[dir][2], (long long)y->dim[1]);
  for (int i = 0; i < o.conv.nsp; i++) {
    const int64_t span = x->dim[2 + i] + o.conv.pre[i] + o.conv.post[i] - o.conv.dil[i] * (w->dim[2 + i] - 1) - 1;
    const int64_t out = span < 0 ? 0 : span / o.conv.stride[i] + 1;
    if (span < 0 || y->dim[2 + i] != out)
      return fail(CUDNN_STATUS_BAD_PARAM,
                  "cudnnBackendFinalize(%s): spatial dimension %d: input %lld, padding %lld + %lld, filter %lld, "
                  "dilation %lld, stride %lld give %lld outputs, %s has %lld",
                  what, i, (long long)x->dim[2 + i], (long long)o.conv.pre[i], (long long)o.conv.post[i],
                  (long long)w->dim[2 + i], (long long)o.conv.dil[i], (long long)o.conv.stride[i], (long long)out,
                  role[dir][2], (long long)y->dim[2 + i]);
  }
  const int written = dir == DIR_FWD ? T_OUT : dir == DIR_DGRAD ? T_DATA : T_FILT;
  if (!non_overlapping(&o.t[written]))
    return fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(%s): the strides of the output %s make elements overlap",
                what, role[dir][written]);
  d->b->op = o;
  return CUDNN_STATUS_SUCCESS;
}

static int same_tensor(const tensor_s *a, const tensor_s *b) {
  if (a->type != b->type || a->nd != b->nd || a->align != b->align) return 0;
  for (int i = 0; i < a->nd; i++)
    if (a->dim[i] != b->dim[i] || a->str[i] != b->str[i]) return 0;
  return 1;
}

static cudnnStatus_t fin_graph(desc *d) {
  static const char *const what = "cudnnBackendFinalize(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)";
  const attr_val *ops = got(d, CUDNN_ATTR_OPERATIONGRAPH_OPS);
  if (!ops) return missing(d, CUDNN_ATTR_OPERATIONGRAPH_OPS);
  graph_s g;
  memset(&g, 0, sizeof g);
  const attr_val *a;
  if ((a = got(d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE))) {
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    g.handle = handle_of(*(cudnnHandle_t const *)a->data, what, &st);
    if (!g.handle) return st;
  }
  if ((a = got(d, CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED)) && *(const _Bool *)a->data)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: dynamic shapes are not modelled by the emulation", what);
  if (ops->count > MAX_OPS)
    return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, "%s: %lld operations: the emulation models at most %d", what,
                (long long)ops->count, MAX_OPS);
  for (int64_t i = 0; i < ops->count; i++) {
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    const body *ob = elem_at(d, ops, i, &st);
    if (!ob) return st;
    g.op[g.nops++] = ob->op;
  }
  /* A unique id names one tensor throughout the graph. */
  for (int i = 0; i < g.nops; i++)
    for (int r = 0; r < 3; r++)
      for (int j = i; j < g.nops; j++)
        for (int q = (j == i ? r + 1 : 0); q < 3; q++)
          if (g.op[i].t[r].uid == g.op[j].t[q].uid && !same_tensor(&g.op[i].t[r], &g.op[j].t[q]))
            return fail(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, "%s: unique id %lld names two different tensors",
                        what, (long long)g.op[i].t[r].uid);
  d->b->graph = g;
  return CUDNN_STATUS_SUCCESS;
}

/* The device properties of a descriptor-valued attribute (optional): 1 when set (*t filled), 0
 * when not, -1 with *st set on error. */
static int devprop_attr(desc *d, cudnnBackendAttributeName_t name, target *t, cudnnStatus_t *st) {
  const attr_val *a = got(d, name);
  if (!a) return 0;
  const body *b = elem_at(d, a, 0, st);
  if (!b) return -1;
  *t = b->devprop.dev;
  return 1;
}

/* The emulation computes graphs of one convolution (cuDNN has engines for more). */
static cudnnStatus_t graph_supported(const graph_s *g, const char *what) {
  if (g->nops != 1)
    return fail(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, "%s: a graph of %d operations: the emulation has engines for "
                "single convolutions only", what, g->nops);
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fin_heur(desc *d) {
  static const char *const what = "cudnnBackendFinalize(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)";
  const attr_val *graph = got(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), *mode = got(d, CUDNN_ATTR_ENGINEHEUR_MODE);
  if (!graph) return missing(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
  if (!mode) return missing(d, CUDNN_ATTR_ENGINEHEUR_MODE);
  heur_s h;
  memset(&h, 0, sizeof h);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const body *gb = elem_at(d, graph, 0, &st);
  if (!gb) return st;
  h.graph = gb->graph;
  h.mode = *(const cudnnBackendHeurMode_t *)mode->data;
  if (h.mode != CUDNN_HEUR_MODE_INSTANT && h.mode != CUDNN_HEUR_MODE_B && h.mode != CUDNN_HEUR_MODE_FALLBACK &&
      h.mode != CUDNN_HEUR_MODE_A)
    return fail(CUDNN_STATUS_BAD_PARAM, "%s: heuristics mode %d", what, (int)h.mode);
  int has = devprop_attr(d, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, &h.dev, &st);
  if (has < 0) return st;
  if (!has) {
    if (h.graph.handle) h.dev = emu_target(FROM_HANDLE, h.graph.handle, h.graph.handle->device);
    else h.dev = emu_target(FROM_DEFAULT, NULL, -1);
  }
  const attr_val *a = got(d, CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET);
  if (a) {
    h.sm_target = *(const int32_t *)a->data;
    if (h.sm_target < 0 || h.sm_target > h.dev.sms) /* 0: the whole device, as in 9.19 */
      return fail(CUDNN_STATUS_BAD_PARAM, "%s: SM count target %d: the device has %d SMs", what, h.sm_target,
                  h.dev.sms);
  }
  if ((st = graph_supported(&h.graph, what)) != CUDNN_STATUS_SUCCESS) return st;
  h.n = heuristics_list(&h, h.results);
  d->b->heur = h;
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fin_engine(desc *d) {
  static const char *const what = "cudnnBackendFinalize(CUDNN_BACKEND_ENGINE_DESCRIPTOR)";
  const attr_val *graph = got(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH), *index = got(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
  if (!graph) return missing(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH);
  if (!index) return missing(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX);
  engine_s e;
  memset(&e, 0, sizeof e);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const body *gb = elem_at(d, graph, 0, &st);
  if (!gb) return st;
  e.graph = gb->graph;
  e.index = i64_at(index, 0);
  if (e.index < 0 || e.index >= N_ENGINES)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: global index %lld (the graph has %d engines)", what,
                (long long)e.index, N_ENGINES);
  if (devprop_attr(d, CUDNN_ATTR_ENGINE_DEVICEPROP, &e.dev, &st) < 0) return st;
  const attr_val *a = got(d, CUDNN_ATTR_ENGINE_SM_COUNT_TARGET);
  if (a && (e.sm_target = *(const int32_t *)a->data) < 0)
    return fail(CUDNN_STATUS_BAD_PARAM, "%s: SM count target %d", what, e.sm_target);
  if ((st = graph_supported(&e.graph, what)) != CUDNN_STATUS_SUCCESS) return st;
  if (!engine_applies(e.index, &e.graph))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: engine %lld (%s) does not support this convolution", what,
                (long long)e.index, engines[e.index].what);
  d->b->engine = e;
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fin_cfg(desc *d) {
  const attr_val *engine = got(d, CUDNN_ATTR_ENGINECFG_ENGINE);
  if (!engine) return missing(d, CUDNN_ATTR_ENGINECFG_ENGINE);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const body *eb = elem_at(d, engine, 0, &st);
  if (!eb) return st;
  d->b->cfg = eb->engine;
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fin_plan(desc *d) {
  static const char *const what = "cudnnBackendFinalize(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)";
  const attr_val *cfg = got(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
  if (!cfg) return missing(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
  plan_s p;
  memset(&p, 0, sizeof p);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const body *cb = elem_at(d, cfg, 0, &st);
  if (!cb) return st;
  p.eng = cb->cfg;
  const attr_val *a = got(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE);
  if (a) {
    p.handle = handle_of(*(cudnnHandle_t const *)a->data, what, &st);
    if (!p.handle) return st;
  }
  int has = devprop_attr(d, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, &p.dev, &st);
  if (has < 0) return st;
  /* CUDNN_ATTR_EXECUTION_PLAN_HANDLE is deprecated in 9.x: a plan without it and without device
   * properties runs on cudnnBackendExecute's handle; one with device properties only cannot run. */
  if (p.handle) {
    if (!has) p.dev = emu_target(FROM_HANDLE, p.handle, p.handle->device);
    p.runnable = 1;
  } else if (!has) {
    p.dev = emu_target(FROM_DEFAULT, NULL, -1);
    p.runnable = 1;
  }
  if ((st = engine_fits(p.eng.index, &p.dev)) != CUDNN_STATUS_SUCCESS) return st;
  p.workspace = engine_workspace(p.eng.index, &p.eng.graph);
  d->b->plan = p;
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fin_pack(desc *d) {
  static const char *const what = "cudnnBackendFinalize(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)";
  const attr_val *ids = got(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS),
                 *ptrs = got(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  if (!ids) return missing(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  if (!ptrs) return missing(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  if (ids->count != ptrs->count)
    return fail(CUDNN_STATUS_BAD_PARAM, "%s: %lld unique ids but %lld data pointers", what, (long long)ids->count,
                (long long)ptrs->count);
  pack_s p;
  memset(&p, 0, sizeof p);
  p.n = (int)ids->count;
  for (int i = 0; i < p.n; i++) {
    p.uid[i] = i64_at(ids, i);
    p.ptr[i] = ((void *const *)ptrs->data)[i];
    for (int j = 0; j < i; j++)
      if (p.uid[j] == p.uid[i])
        return fail(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES, "%s: unique id %lld appears twice", what,
                    (long long)p.uid[i]);
  }
  const attr_val *ws = got(d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE);
  p.workspace = ws ? *(void *const *)ws->data : NULL;
  d->b->pack = p;
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fin_devprop(desc *d) {
  static const char *const what = "cudnnBackendFinalize(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR)";
  const attr_val *json = got(d, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION),
                 *id = got(d, CUDNN_ATTR_DEVICEPROP_DEVICE_ID), *h = got(d, CUDNN_ATTR_DEVICEPROP_HANDLE);
  if (!!json + !!id + !!h != 1)
    return fail(CUDNN_STATUS_BAD_PARAM, "%s: give exactly one of a JSON representation, a device id and a handle",
                what);
  devprop_s p;
  memset(&p, 0, sizeof p);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  int device = 0;
  if (json) {
    if ((st = parse_devprop_json(json->data, (size_t)json->count, &p.dev)) != CUDNN_STATUS_SUCCESS) return st;
    p.json = malloc((size_t)json->count + 1);
    if (!p.json) return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "%s: out of host memory", what);
    memcpy(p.json, json->data, (size_t)json->count);
    p.json[json->count] = '\0';
  } else {
    if (h) {
      struct cudnnContext *hc = handle_of(*(cudnnHandle_t const *)h->data, what, &st);
      if (!hc) return st;
      device = hc->device;
    } else {
      device = *(const int32_t *)id->data;
      int n = emu_device_count();
      if (device < 0 || device >= n)
        return fail(n ? CUDNN_STATUS_BAD_PARAM : CUDNN_STATUS_NOT_INITIALIZED,
                    "%s: device %d (this process has %d GPU%s)", what, device, n, n == 1 ? "" : "s");
    }
    /* Properties, not a target: a plan built from them still cannot run. */
    p.dev = emu_target(FROM_DEVICEPROP, NULL, -1);
    p.json = emu_device_json(device);
    if (!p.json) return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "%s: out of host memory", what);
  }
  d->b->devprop = p;
  return CUDNN_STATUS_SUCCESS;
}

/* --- getting attributes (mu held; the descriptor finalized) --------------------------------- */

typedef struct get_args {
  cudnnBackendAttributeType_t type;
  int64_t requested;
  int64_t *count;
  void *elems;
} get_args;

/* Writes min(n, requested) elements. The count is n when none were requested, else the number
 * written (as cuDNN 9.19 answers). */
static cudnnStatus_t put(const get_args *g, const void *vals, int64_t n) {
  int64_t k = n < g->requested ? n : g->requested;
  *g->count = g->requested ? k : n;
  if (k > 0) memcpy(g->elems, vals, (size_t)k * type_size(g->type));
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t put_i64(const get_args *g, int64_t v) { return put(g, &v, 1); }

/* Fills the caller's descriptors with copies of bodies[0..n) of type t (finalized). */
static cudnnStatus_t put_descs(const get_args *g, int t, const body *const *bodies, int64_t n, const char *what) {
  int64_t k = n < g->requested ? n : g->requested;
  desc **out = g->elems;
  for (int64_t i = 0; i < k; i++) {
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    desc *o = desc_of(out[i], what, &st);
    if (!o) return st;
    if (o->type != (cudnnBackendDescriptorType_t)t)
      return fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "%s: element %lld is a %s, a %s is needed", what,
                  (long long)i, desc_name(o->type), desc_name((cudnnBackendDescriptorType_t)t));
  }
  for (int64_t i = 0; i < k; i++) {
    desc *o = out[i];
    free_attrs(o);
    if (t == D_DEVPROP) free(o->b->devprop.json);
    memcpy(o->b, bodies[i], sizeof *o->b);
    if (t == D_DEVPROP && bodies[i]->devprop.json) o->b->devprop.json = strdup(bodies[i]->devprop.json);
    o->finalized = 1;
  }
  *g->count = g->requested ? k : n;
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t put_desc1(const get_args *g, int t, const body *b, const char *what) {
  return put_descs(g, t, &b, 1, what);
}

static cudnnStatus_t put_alpha(const get_args *g, double v, cudnnBackendAttributeType_t set_as, const char *what) {
  if (set_as == 0) set_as = g->type; /* not set: the default, in either type */
  if (g->type != set_as)
    return fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "%s: the value was set as %s", what,
                set_as == CUDNN_TYPE_FLOAT ? "CUDNN_TYPE_FLOAT" : "CUDNN_TYPE_DOUBLE");
  if (set_as == CUDNN_TYPE_FLOAT) {
    float f = (float)v;
    return put(g, &f, 1);
  }
  return put(g, &v, 1);
}

static cudnnStatus_t put_notes(const get_args *g, unsigned bits) {
  int list[32], n = 0;
  for (int i = 0; i < 32; i++)
    if (bits & (1u << i)) list[n++] = i;
  return put(g, list, n);
}

static cudnnStatus_t get_attr(desc *d, cudnnBackendAttributeName_t name, const get_args *g, const char *what) {
  const body *b = d->b;
  switch ((int)name) {
  case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT: return put_i64(g, b->tensor.align);
  case CUDNN_ATTR_TENSOR_DATA_TYPE: return put(g, &b->tensor.type, 1);
  case CUDNN_ATTR_TENSOR_DIMENSIONS: return put(g, b->tensor.dim, b->tensor.nd);
  case CUDNN_ATTR_TENSOR_STRIDES: return put(g, b->tensor.str, b->tensor.nd);
  case CUDNN_ATTR_TENSOR_VECTOR_COUNT: return put_i64(g, 1);
  case CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION: return put_i64(g, -1);
  case CUDNN_ATTR_TENSOR_UNIQUE_ID: return put_i64(g, b->tensor.uid);
  case CUDNN_ATTR_TENSOR_IS_VIRTUAL: {
    _Bool v = b->tensor.is_virtual != 0;
    return put(g, &v, 1);
  }
  case CUDNN_ATTR_TENSOR_IS_BY_VALUE: {
    _Bool v = 0;
    return put(g, &v, 1);
  }
  case CUDNN_ATTR_TENSOR_REORDERING_MODE: {
    cudnnBackendTensorReordering_t v = CUDNN_TENSOR_REORDERING_NONE;
    return put(g, &v, 1);
  }
  case CUDNN_ATTR_CONVOLUTION_COMP_TYPE: return put(g, &b->conv.comp, 1);
  case CUDNN_ATTR_CONVOLUTION_CONV_MODE: return put(g, &b->conv.mode, 1);
  case CUDNN_ATTR_CONVOLUTION_DILATIONS: return put(g, b->conv.dil, b->conv.nsp);
  case CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES: return put(g, b->conv.stride, b->conv.nsp);
  case CUDNN_ATTR_CONVOLUTION_POST_PADDINGS: return put(g, b->conv.post, b->conv.nsp);
  case CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS: return put(g, b->conv.pre, b->conv.nsp);
  case CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS: return put_i64(g, b->conv.nsp);
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA: return put_alpha(g, b->op.alpha, b->op.alpha_type, what);
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA: return put_alpha(g, b->op.beta, b->op.beta_type, what);
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC: {
    body c;
    memset(&c, 0, sizeof c);
    c.conv = b->op.conv;
    return put_desc1(g, D_CONV, &c, what);
  }
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY: {
    int r =
        (name == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X || name == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX ||
         name == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X)
            ? T_DATA
        : (name == CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W || name == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W ||
           name == CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW)
            ? T_FILT
            : T_OUT;
    body t;
    memset(&t, 0, sizeof t);
    t.tensor = b->op.t[r];
    return put_desc1(g, D_TENSOR, &t, what);
  }
  case CUDNN_ATTR_OPERATIONGRAPH_HANDLE:
    if (!b->graph.handle) return fail(CUDNN_STATUS_BAD_PARAM, "%s: the graph has no handle", what);
    return put(g, &b->graph.handle, 1);
  case CUDNN_ATTR_OPERATIONGRAPH_OPS: {
    body ops[MAX_OPS];
    const body *ptrs[MAX_OPS];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < b->graph.nops; i++) {
      ops[i].op = b->graph.op[i];
      ptrs[i] = &ops[i];
    }
    /* Each element must be an operation descriptor of the type of the operation it receives. */
    int64_t k = b->graph.nops < g->requested ? b->graph.nops : g->requested;
    for (int64_t i = 0; i < k; i++) {
      cudnnStatus_t st =
          put_descs(&(get_args){.type = g->type, .requested = 1, .count = g->count, .elems = (desc **)g->elems + i},
                    b->graph.op[i].dir == DIR_FWD     ? D_FWD
                    : b->graph.op[i].dir == DIR_DGRAD ? D_DGRAD
                                                      : D_WGRAD,
                    &ptrs[i], 1, what);
      if (st != CUDNN_STATUS_SUCCESS) return st;
    }
    *g->count = g->requested ? k : b->graph.nops;
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT: return put_i64(g, N_ENGINES);
  case CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED: {
    _Bool v = 0;
    return put(g, &v, 1);
  }
  case CUDNN_ATTR_ENGINEHEUR_MODE: return put(g, &b->heur.mode, 1);
  case CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET: {
    int32_t v = b->heur.sm_target;
    return put(g, &v, 1);
  }
  case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH: {
    body gb;
    memset(&gb, 0, sizeof gb);
    gb.graph = b->heur.graph;
    return put_desc1(g, D_GRAPH, &gb, what);
  }
  case CUDNN_ATTR_ENGINEHEUR_RESULTS: {
    body cfgs[MAX_RESULTS];
    const body *ptrs[MAX_RESULTS];
    memset(cfgs, 0, sizeof cfgs);
    for (int i = 0; i < b->heur.n; i++) {
      cfgs[i].cfg.graph = b->heur.graph;
      cfgs[i].cfg.index = b->heur.results[i];
      cfgs[i].cfg.sm_target = b->heur.sm_target;
      cfgs[i].cfg.dev = b->heur.dev;
      ptrs[i] = &cfgs[i];
    }
    return put_descs(g, D_CFG, ptrs, b->heur.n, what);
  }
  case CUDNN_ATTR_ENGINE_OPERATION_GRAPH: {
    body gb;
    memset(&gb, 0, sizeof gb);
    gb.graph = b->engine.graph;
    return put_desc1(g, D_GRAPH, &gb, what);
  }
  case CUDNN_ATTR_ENGINE_GLOBAL_INDEX: return put_i64(g, b->engine.index);
  case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE: return put_notes(g, engines[b->engine.index].notes);
  case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE: return put_notes(g, engines[b->engine.index].behavior);
  case CUDNN_ATTR_ENGINE_KNOB_INFO:
  case CUDNN_ATTR_ENGINE_LAYOUT_INFO: /* no knobs, no preferred layouts */
    *g->count = 0;
    return CUDNN_STATUS_SUCCESS;
  case CUDNN_ATTR_ENGINE_SM_COUNT_TARGET: {
    int32_t v = b->engine.sm_target;
    return put(g, &v, 1);
  }
  case CUDNN_ATTR_ENGINECFG_ENGINE: {
    body e;
    memset(&e, 0, sizeof e);
    e.engine = b->cfg;
    return put_desc1(g, D_ENGINE, &e, what);
  }
  case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE: return put_i64(g, engine_workspace(b->cfg.index, &b->cfg.graph));
  case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED:
    return put_i64(g, (engines[b->cfg.index].flags & E_BIG_SMEM) ? BIG_SMEM : 48 * 1024);
  case CUDNN_ATTR_EXECUTION_PLAN_HANDLE:
    if (!b->plan.handle) return fail(CUDNN_STATUS_BAD_PARAM, "%s: the plan has no handle", what);
    return put(g, &b->plan.handle, 1);
  case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG: {
    body c;
    memset(&c, 0, sizeof c);
    c.cfg = b->plan.eng;
    return put_desc1(g, D_CFG, &c, what);
  }
  case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE: return put_i64(g, b->plan.workspace);
  case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: return put(g, b->pack.uid, b->pack.n);
  case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: return put(g, b->pack.ptr, b->pack.n);
  case CUDNN_ATTR_VARIANT_PACK_WORKSPACE: return put(g, &b->pack.workspace, 1);
  case CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION:
    /* The count includes the terminating NUL, as some cuDNN versions report it. */
    return put(g, b->devprop.json, (int64_t)strlen(b->devprop.json) + 1);
  default: break;
  }
  return fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: %s cannot be read back in the emulation", what,
              attr_name(d->type, name));
}

/* --- the backend API ------------------------------------------------------------------------ */

static int modelled(cudnnBackendDescriptorType_t t) {
  switch ((int)t) {
  case D_TENSOR: case D_CONV: case D_FWD: case D_DGRAD: case D_WGRAD: case D_GRAPH: case D_HEUR: case D_ENGINE:
  case D_CFG: case D_PLAN: case D_PACK: case D_DEVPROP: return 1;
  default: return 0;
  }
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                           cudnnBackendDescriptor_t *descriptor) {
  if (!descriptor)
    return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnBackendCreateDescriptor: the descriptor pointer is NULL");
  *descriptor = NULL;
  if (!modelled(descriptorType))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendCreateDescriptor: descriptor type %d is not modelled by the "
                "emulation", (int)descriptorType);
  desc *d = calloc(1, sizeof *d);
  body *b = calloc(1, sizeof *b);
  if (!d || !b) {
    free(d);
    free(b);
    return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "cudnnBackendCreateDescriptor: out of host memory");
  }
  d->magic = DESC_LIVE;
  d->type = descriptorType;
  d->b = b;
  pthread_mutex_lock(&mu);
  d->next_all = all_descs;
  all_descs = d;
  pthread_mutex_unlock(&mu);
  *descriptor = d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  pthread_mutex_lock(&mu);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  desc *d = desc_of(descriptor, "cudnnBackendDestroyDescriptor", &st);
  if (d) {
    free_attrs(d);
    free_body(d->type, d->b);
    d->b = NULL;
    d->magic = DESC_DEAD; /* kept, poisoned: a later use is reported */
  }
  pthread_mutex_unlock(&mu);
  return st;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType, int64_t elementCount,
                                       const void *arrayOfElements) {
  static const char *const api = "cudnnBackendSetAttribute";
  pthread_mutex_lock(&mu);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  desc *d = desc_of(descriptor, api, &st);
  const attr_rule *r = d ? rule_of(d->type, attributeName) : NULL;
  if (!d) goto out;
  if (d->finalized) {
    st = fail(CUDNN_STATUS_NOT_INITIALIZED, "%s(%s, %s): the descriptor is already finalized", api, desc_name(d->type),
              attr_name(d->type, attributeName));
    goto out;
  }
  if (!r) {
    st = fail(CUDNN_STATUS_BAD_PARAM, "%s: attribute %d is not an attribute of %s", api, (int)attributeName,
              desc_name(d->type));
    goto out;
  }
  if (r->flags & A_UNMODELLED) {
    st = fail(CUDNN_STATUS_NOT_SUPPORTED, "%s(%s): %s is not modelled by the emulation", api, desc_name(d->type),
              r->str);
    goto out;
  }
  if (!(r->flags & A_SET)) {
    st = fail(CUDNN_STATUS_BAD_PARAM, "%s(%s): %s cannot be set", api, desc_name(d->type), r->str);
    goto out;
  }
  if (attributeType != r->type && attributeType != r->alt) {
    st = fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "%s(%s): %s given attribute type %d", api, desc_name(d->type),
              r->str, (int)attributeType);
    goto out;
  }
  if (elementCount < 1 || elementCount > r->max) {
    st = fail(CUDNN_STATUS_BAD_PARAM, "%s(%s): %s given %lld elements (1 to %lld)", api, desc_name(d->type), r->str,
              (long long)elementCount, (long long)r->max);
    goto out;
  }
  if (!arrayOfElements) {
    st =
        fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s(%s): %s: the elements are NULL", api, desc_name(d->type), r->str);
    goto out;
  }
  body **snap = NULL;
  int *snap_type = NULL;
  if (attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    desc *const *elems = arrayOfElements;
    for (int64_t i = 0; i < elementCount && st == CUDNN_STATUS_SUCCESS; i++) {
      desc *e = desc_of(elems[i], api, &st);
      if (e && (r->elem >= 0 ? e->type != (cudnnBackendDescriptorType_t)r->elem : !is_conv_op(e->type)))
        st = fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "%s(%s): %s given a %s", api, desc_name(d->type), r->str,
                  desc_name(e->type));
    }
    if (st != CUDNN_STATUS_SUCCESS) goto out;
    snap = calloc((size_t)elementCount, sizeof *snap);
    snap_type = calloc((size_t)elementCount, sizeof *snap_type);
    int oom = !snap || !snap_type;
    for (int64_t i = 0; i < elementCount && !oom; i++) {
      snap_type[i] = elems[i]->type;
      if (elems[i]->finalized) oom = !(snap[i] = body_clone(elems[i]->type, elems[i]->b));
    }
    if (oom) {
      free_val(&(attr_val){.count = elementCount, .snap = snap, .snap_type = snap_type});
      st = fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "%s: out of host memory", api);
      goto out;
    }
  } else if (attributeType == CUDNN_TYPE_HANDLE) {
    struct cudnnContext *h = handle_of(*(cudnnHandle_t const *)arrayOfElements, api, &st);
    if (!h) goto out;
  }
  size_t bytes = (size_t)elementCount * type_size(attributeType);
  void *data = malloc(bytes);
  attr_val *grown = realloc(d->attrs, (size_t)(d->n_attrs + 1) * sizeof *grown);
  if (!data || !grown) {
    if (grown) d->attrs = grown;
    free_val(&(attr_val){.count = elementCount, .data = data, .snap = snap, .snap_type = snap_type});
    st = fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "%s: out of host memory", api);
    goto out;
  }
  d->attrs = grown;
  memcpy(data, arrayOfElements, bytes);
  attr_val *old = attr_find(d, attributeName);
  if (old) free_val(old); /* a second set replaces the first */
  else old = &d->attrs[d->n_attrs++];
  *old = (attr_val){.name = attributeName, .type = attributeType, .count = elementCount, .data = data, .snap = snap,
                    .snap_type = snap_type};
out:
  pthread_mutex_unlock(&mu);
  return st;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  pthread_mutex_lock(&mu);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  desc *d = desc_of(descriptor, "cudnnBackendFinalize", &st);
  if (d && d->finalized) {
    st = fail(CUDNN_STATUS_BAD_PARAM, "cudnnBackendFinalize(%s): the descriptor is already finalized",
              desc_name(d->type));
  } else if (d) {
    switch ((int)d->type) {
    case D_TENSOR: st = fin_tensor(d); break;
    case D_CONV: st = fin_conv(d); break;
    case D_FWD: case D_DGRAD: case D_WGRAD: st = fin_op(d); break;
    case D_GRAPH: st = fin_graph(d); break;
    case D_HEUR: st = fin_heur(d); break;
    case D_ENGINE: st = fin_engine(d); break;
    case D_CFG: st = fin_cfg(d); break;
    case D_PLAN: st = fin_plan(d); break;
    case D_PACK: st = fin_pack(d); break;
    case D_DEVPROP: st = fin_devprop(d); break;
    default: st = fail(CUDNN_STATUS_INTERNAL_ERROR, "cudnnBackendFinalize: descriptor type %d", (int)d->type); break;
    }
    if (st == CUDNN_STATUS_SUCCESS) {
      d->finalized = 1;
      free_attrs(d); /* nothing reads them any more; set refuses from now on */
    }
  }
  pthread_mutex_unlock(&mu);
  return st;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType, int64_t requestedElementCount,
                                       int64_t *elementCount, void *arrayOfElements) {
  static const char *const api = "cudnnBackendGetAttribute";
  pthread_mutex_lock(&mu);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  desc *d = desc_of(descriptor, api, &st);
  const attr_rule *r = d ? rule_of(d->type, attributeName) : NULL;
  char what[160];
  if (!d) goto out;
  snprintf(what, sizeof what, "%s(%s, %s)", api, desc_name(d->type), r ? r->str : "?");
  if (!r)
    st = fail(CUDNN_STATUS_BAD_PARAM, "%s: attribute %d is not an attribute of %s", api, (int)attributeName,
              desc_name(d->type));
  else if (r->flags & A_UNMODELLED) st = fail(CUDNN_STATUS_NOT_SUPPORTED, "%s: not modelled by the emulation", what);
  else if (!(r->flags & A_GET)) st = fail(CUDNN_STATUS_BAD_PARAM, "%s: the attribute cannot be read", what);
  else if (attributeType != r->type && attributeType != r->alt)
    st = fail(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "%s: attribute type %d", what, (int)attributeType);
  else if (!d->finalized) st = fail(CUDNN_STATUS_NOT_INITIALIZED, "%s: the descriptor is not finalized", what);
  else if (!elementCount) st = fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: elementCount is NULL", what);
  else if (requestedElementCount < 0)
    st = fail(CUDNN_STATUS_BAD_PARAM, "%s: %lld elements requested", what, (long long)requestedElementCount);
  else if (requestedElementCount > 0 && !arrayOfElements)
    st = fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: %lld elements requested into NULL", what,
              (long long)requestedElementCount);
  else
    st = get_attr(d, attributeName,
                  &(get_args){.type = attributeType, .requested = requestedElementCount, .count = elementCount,
                              .elems = arrayOfElements},
                  what);
out:
  pthread_mutex_unlock(&mu);
  return st;
}

/* --- handles ------------------------------------------------------------------------------- */

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  if (!handle) return fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreate: the handle pointer is NULL");
  *handle = NULL;
  if (emu_device_count() < 1)
    return fail(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate: no CUDA device (%s)",
                hs_emu_current_device ? "the emulated runtime has none" : "no emulated CUDA runtime in this process");
  struct cudnnContext *h = calloc(1, sizeof *h);
  if (!h) return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "cudnnCreate: out of host memory");
  h->magic = HANDLE_LIVE;
  h->device = hs_emu_current_device();
  pthread_mutex_lock(&mu);
  h->next_all = all_handles;
  all_handles = h;
  pthread_mutex_unlock(&mu);
  *handle = h;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  pthread_mutex_lock(&mu);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  struct cudnnContext *h = handle_of(handle, "cudnnDestroy", &st);
  if (h) h->magic = HANDLE_DEAD; /* kept, poisoned */
  pthread_mutex_unlock(&mu);
  /* "cudnnDestroy() will implicitly call cudaDeviceSynchronize()". */
  if (h && cudaDeviceSynchronize) (void)cudaDeviceSynchronize();
  return st;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  pthread_mutex_lock(&mu);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  struct cudnnContext *h = handle_of(handle, "cudnnSetStream", &st);
  if (h && streamId) {
    int dev = hs_emu_stream_device ? hs_emu_stream_device(streamId) : -1;
    if (dev < 0) st = fail(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: %p is not a live stream", (void *)streamId);
    else if (dev != h->device)
      st = fail(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH, "cudnnSetStream: the stream is on device %d, the handle on %d",
                dev, h->device);
  }
  if (h && st == CUDNN_STATUS_SUCCESS) h->stream = streamId;
  pthread_mutex_unlock(&mu);
  return st;
}

/* --- execution ------------------------------------------------------------------------------ */

/* NVIDIA_TF32_OVERRIDE=0 when the library started: TF32 off in cuDNN whatever an engine would
 * use ("will override any defaults or programmatic configuration of NVIDIA libraries", the
 * variable's documentation); the TF32 engine then computes in full fp32. */
static int tf32_off;
static pthread_once_t tf32_once = PTHREAD_ONCE_INIT;
static void tf32_read(void) {
  const char *e = getenv("NVIDIA_TF32_OVERRIDE");
  tf32_off = e && !strcmp(e, "0");
}
static int tf32_overridden(void) {
  pthread_once(&tf32_once, tf32_read);
  return tf32_off;
}

/* One convolution on a stream: copies of everything it reads. */
typedef struct work {
  dir_t dir;
  prec_t prec;
  int64_t engine;
  int64_t dim[3][4], str[3][4]; /* by role: data, filter, output */
  float *ptr[3];
  size_t bytes[3]; /* each tensor's extent */
  int64_t pre[2], stride[2], dil[2];
  int flip; /* CUDNN_CONVOLUTION: the filter is applied mirrored */
  double alpha, beta;
  void *workspace;
  size_t ws_bytes;
  uint64_t seed;
} work;

static uint64_t runs; /* atomic: seeds of non-deterministic runs */

static float to_tf32(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) {
    u += 0xfffu + ((u >> 13) & 1u); /* round to nearest even at the 10th mantissa bit */
    u &= 0xffffe000u;
  }
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Writes alpha * acc + beta * old into *out as the engine would. */
static void store(const work *w, float *out, double acc, float facc, uint64_t idx) {
  double v = w->alpha * (w->prec == PREC_FLOAT ? (double)facc : acc);
  if (w->beta != 0) v += w->beta * (double)*out;
  float f = (float)v;
  if (w->prec == PREC_NONDET) {
    uint64_t r = mix(w->seed ^ (idx * 0x2545f4914f6cdd1dull));
    if ((r & 3u) == 1u) f = nextafterf(f, INFINITY);
    else if ((r & 3u) == 2u) f = nextafterf(f, -INFINITY);
  }
  *out = f;
}

#define OFF(t, a, b, c, d) ((a) * w->str[t][0] + (b) * w->str[t][1] + (c) * w->str[t][2] + (d) * w->str[t][3])

/* One product of the reduction, as the engine forms it. */
#define TERM(a, b)                                                   \
  do {                                                               \
    float fa_ = (a), fb_ = (b);                                      \
    if (tf32) {                                                      \
      fa_ = to_tf32(fa_);                                            \
      fb_ = to_tf32(fb_);                                            \
    }                                                                \
    if (flt) facc += fa_ * fb_;                                      \
    else acc += (double)fa_ * (double)fb_;                           \
  } while (0)

static void run_fwd(const work *w) {
  const int64_t n_ = w->dim[T_DATA][0], c_ = w->dim[T_DATA][1], h_ = w->dim[T_DATA][2], w_ = w->dim[T_DATA][3];
  const int64_t k_ = w->dim[T_FILT][0], cg = w->dim[T_FILT][1], r_ = w->dim[T_FILT][2], s_ = w->dim[T_FILT][3];
  const int64_t p_ = w->dim[T_OUT][2], q_ = w->dim[T_OUT][3], kg = k_ / (c_ / cg);
  const float *x = w->ptr[T_DATA], *f = w->ptr[T_FILT];
  float *y = w->ptr[T_OUT];
  const int tf32 = w->prec == PREC_TF32, flt = w->prec == PREC_FLOAT;
  for (int64_t n = 0; n < n_; n++)
    for (int64_t k = 0; k < k_; k++)
      for (int64_t p = 0; p < p_; p++)
        for (int64_t q = 0; q < q_; q++) {
          const int64_t g = k / kg;
          double acc = 0;
          float facc = 0;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t r = 0; r < r_; r++) {
              const int64_t h = p * w->stride[0] - w->pre[0] + r * w->dil[0];
              if (h < 0 || h >= h_) continue;
              for (int64_t s = 0; s < s_; s++) {
                const int64_t v = q * w->stride[1] - w->pre[1] + s * w->dil[1];
                if (v < 0 || v >= w_) continue;
                const int64_t rr = w->flip ? r_ - 1 - r : r, ss = w->flip ? s_ - 1 - s : s;
                TERM(x[OFF(T_DATA, n, g * cg + c, h, v)], f[OFF(T_FILT, k, c, rr, ss)]);
              }
            }
          store(w, &y[OFF(T_OUT, n, k, p, q)], acc, facc, (uint64_t)(((n * k_ + k) * p_ + p) * q_ + q));
        }
}

static void run_dgrad(const work *w) {
  const int64_t n_ = w->dim[T_DATA][0], c_ = w->dim[T_DATA][1], h_ = w->dim[T_DATA][2], w_ = w->dim[T_DATA][3];
  const int64_t k_ = w->dim[T_FILT][0], cg = w->dim[T_FILT][1], r_ = w->dim[T_FILT][2], s_ = w->dim[T_FILT][3];
  const int64_t p_ = w->dim[T_OUT][2], q_ = w->dim[T_OUT][3], kg = k_ / (c_ / cg);
  const float *dy = w->ptr[T_OUT], *f = w->ptr[T_FILT];
  float *dx = w->ptr[T_DATA];
  const int tf32 = w->prec == PREC_TF32, flt = w->prec == PREC_FLOAT;
  for (int64_t n = 0; n < n_; n++)
    for (int64_t c = 0; c < c_; c++)
      for (int64_t h = 0; h < h_; h++)
        for (int64_t v = 0; v < w_; v++) {
          const int64_t g = c / cg, ci = c % cg;
          double acc = 0;
          float facc = 0;
          for (int64_t k = g * kg; k < (g + 1) * kg; k++)
            for (int64_t r = 0; r < r_; r++) {
              const int64_t ph = h + w->pre[0] - r * w->dil[0];
              if (ph < 0 || ph % w->stride[0] || ph / w->stride[0] >= p_) continue;
              for (int64_t s = 0; s < s_; s++) {
                const int64_t qv = v + w->pre[1] - s * w->dil[1];
                if (qv < 0 || qv % w->stride[1] || qv / w->stride[1] >= q_) continue;
                const int64_t rr = w->flip ? r_ - 1 - r : r, ss = w->flip ? s_ - 1 - s : s;
                TERM(dy[OFF(T_OUT, n, k, ph / w->stride[0], qv / w->stride[1])], f[OFF(T_FILT, k, ci, rr, ss)]);
              }
            }
          store(w, &dx[OFF(T_DATA, n, c, h, v)], acc, facc, (uint64_t)(((n * c_ + c) * h_ + h) * w_ + v));
        }
}

static void run_wgrad(const work *w) {
  const int64_t n_ = w->dim[T_DATA][0], c_ = w->dim[T_DATA][1], h_ = w->dim[T_DATA][2], w_ = w->dim[T_DATA][3];
  const int64_t k_ = w->dim[T_FILT][0], cg = w->dim[T_FILT][1], r_ = w->dim[T_FILT][2], s_ = w->dim[T_FILT][3];
  const int64_t p_ = w->dim[T_OUT][2], q_ = w->dim[T_OUT][3], kg = k_ / (c_ / cg);
  const float *x = w->ptr[T_DATA], *dy = w->ptr[T_OUT];
  float *dw = w->ptr[T_FILT];
  const int tf32 = w->prec == PREC_TF32, flt = w->prec == PREC_FLOAT;
  for (int64_t k = 0; k < k_; k++)
    for (int64_t c = 0; c < cg; c++)
      for (int64_t rr = 0; rr < r_; rr++)
        for (int64_t ss = 0; ss < s_; ss++) {
          const int64_t g = k / kg, r = w->flip ? r_ - 1 - rr : rr, s = w->flip ? s_ - 1 - ss : ss;
          double acc = 0;
          float facc = 0;
          for (int64_t n = 0; n < n_; n++)
            for (int64_t p = 0; p < p_; p++) {
              const int64_t h = p * w->stride[0] - w->pre[0] + r * w->dil[0];
              if (h < 0 || h >= h_) continue;
              for (int64_t q = 0; q < q_; q++) {
                const int64_t v = q * w->stride[1] - w->pre[1] + s * w->dil[1];
                if (v < 0 || v >= w_) continue;
                TERM(x[OFF(T_DATA, n, g * cg + c, h, v)], dy[OFF(T_OUT, n, k, p, q)]);
              }
            }
          store(w, &dw[OFF(T_FILT, k, c, rr, ss)], acc, facc, (uint64_t)(((k * cg + c) * r_ + rr) * s_ + ss));
        }
}
#undef TERM
#undef OFF

/* The exact engines (and the TF32 one) by matrix products, as cuDNN's GEMM engines work: per
 * image and group, the input is unfolded (im2col, zeros where the window leaves it) and the
 * convolution is one dgemm with the filter. The products are those of the loops above, exact in
 * double; only the order of the double sums differs (about 1e-16 relative). The loops stay for
 * the fp32-accumulating engine, and as the definition this is checked against
 * (HS_EMU_CUDNN_LOOPS=1 runs every engine through them). */
typedef struct unfold {
  int64_t n_, c_, h_, w_, k_, cg, r_, s_, p_, q_, kg, groups, rows, cols; /* rows cg*R*S, cols P*Q */
  int tf32;
} unfold;

static unfold unfold_of(const work *w) {
  unfold u = {.n_ = w->dim[T_DATA][0], .c_ = w->dim[T_DATA][1], .h_ = w->dim[T_DATA][2], .w_ = w->dim[T_DATA][3],
              .k_ = w->dim[T_FILT][0], .cg = w->dim[T_FILT][1], .r_ = w->dim[T_FILT][2], .s_ = w->dim[T_FILT][3],
              .p_ = w->dim[T_OUT][2], .q_ = w->dim[T_OUT][3], .tf32 = w->prec == PREC_TF32};
  u.groups = u.c_ / u.cg;
  u.kg = u.k_ / u.groups;
  u.rows = u.cg * u.r_ * u.s_;
  u.cols = u.p_ * u.q_;
  return u;
}

static double operand(const unfold *u, float f) { return (double)(u->tf32 ? to_tf32(f) : f); }

#define OFF(t, a, b, c, d) ((a) * w->str[t][0] + (b) * w->str[t][1] + (c) * w->str[t][2] + (d) * w->str[t][3])

/* col[(c*R + r)*S + s][p*Q + q] = x[n, g*cg + c, h, v] at the window's (h, v), or 0 outside. */
static void unfold_input(const work *w, const unfold *u, int64_t n, int64_t g, double *col) {
  const float *x = w->ptr[T_DATA];
  for (int64_t c = 0; c < u->cg; c++)
    for (int64_t r = 0; r < u->r_; r++)
      for (int64_t s = 0; s < u->s_; s++) {
        double *row = col + ((c * u->r_ + r) * u->s_ + s) * u->cols;
        for (int64_t p = 0; p < u->p_; p++) {
          const int64_t h = p * w->stride[0] - w->pre[0] + r * w->dil[0];
          for (int64_t q = 0; q < u->q_; q++) {
            const int64_t v = q * w->stride[1] - w->pre[1] + s * w->dil[1];
            row[p * u->q_ + q] =
                h < 0 || h >= u->h_ || v < 0 || v >= u->w_ ? 0.0 : operand(u, x[OFF(T_DATA, n, g * u->cg + c, h, v)]);
          }
        }
      }
}

/* fm[kl][(c*R + r)*S + s]: group g's filters, mirrored for CUDNN_CONVOLUTION. */
static void unfold_filter(const work *w, const unfold *u, int64_t g, double *fm) {
  const float *f = w->ptr[T_FILT];
  for (int64_t kl = 0; kl < u->kg; kl++)
    for (int64_t c = 0; c < u->cg; c++)
      for (int64_t r = 0; r < u->r_; r++)
        for (int64_t s = 0; s < u->s_; s++) {
          const int64_t rr = w->flip ? u->r_ - 1 - r : r, ss = w->flip ? u->s_ - 1 - s : s;
          fm[kl * u->rows + (c * u->r_ + r) * u->s_ + s] = operand(u, f[OFF(T_FILT, g * u->kg + kl, c, rr, ss)]);
        }
}

/* om[kl][p*Q + q] = dy[n, g*kg + kl, p, q]. */
static void unfold_output(const work *w, const unfold *u, int64_t n, int64_t g, double *om) {
  const float *dy = w->ptr[T_OUT];
  for (int64_t kl = 0; kl < u->kg; kl++)
    for (int64_t p = 0; p < u->p_; p++)
      for (int64_t q = 0; q < u->q_; q++)
        om[kl * u->cols + p * u->q_ + q] = operand(u, dy[OFF(T_OUT, n, g * u->kg + kl, p, q)]);
}

/* 1 when done; 0 when the scratch could not be had (the loops then run). */
static int run_by_gemm(const work *w) {
  const unfold u = unfold_of(w);
  double *col = malloc((size_t)(u.rows * u.cols) * sizeof *col);
  double *fm = malloc((size_t)(u.kg * u.rows) * sizeof *fm);
  double *om = malloc((size_t)(u.kg * u.cols) * sizeof *om);
  double *acc = malloc((size_t)(w->dir == DIR_DGRAD ? u.cg * u.h_ * u.w_ : w->dir == DIR_WGRAD ? u.kg * u.rows : 1) *
                       sizeof *acc);
  int ok = col && fm && om && acc;
  for (int64_t g = 0; ok && g < u.groups; g++) {
    if (w->dir != DIR_WGRAD) unfold_filter(w, &u, g, fm);
    if (w->dir == DIR_WGRAD) memset(acc, 0, (size_t)(u.kg * u.rows) * sizeof *acc);
    for (int64_t n = 0; n < u.n_; n++) {
      if (w->dir == DIR_FWD) {
        unfold_input(w, &u, n, g, col);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)u.kg, (int)u.cols, (int)u.rows, 1.0, fm,
                    (int)u.rows, col, (int)u.cols, 0.0, om, (int)u.cols);
        float *y = w->ptr[T_OUT];
        for (int64_t kl = 0; kl < u.kg; kl++)
          for (int64_t p = 0; p < u.p_; p++)
            for (int64_t q = 0; q < u.q_; q++) {
              const int64_t k = g * u.kg + kl;
              store(w, &y[OFF(T_OUT, n, k, p, q)], om[kl * u.cols + p * u.q_ + q], 0.0f,
                    (uint64_t)(((n * u.k_ + k) * u.p_ + p) * u.q_ + q));
            }
      } else if (w->dir == DIR_DGRAD) {
        unfold_output(w, &u, n, g, om);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)u.rows, (int)u.cols, (int)u.kg, 1.0, fm,
                    (int)u.rows, om, (int)u.cols, 0.0, col, (int)u.cols);
        memset(acc, 0, (size_t)(u.cg * u.h_ * u.w_) * sizeof *acc);
        for (int64_t c = 0; c < u.cg; c++) /* fold the columns back onto the input they came from */
          for (int64_t r = 0; r < u.r_; r++)
            for (int64_t s = 0; s < u.s_; s++) {
              const double *row = col + ((c * u.r_ + r) * u.s_ + s) * u.cols;
              for (int64_t p = 0; p < u.p_; p++) {
                const int64_t h = p * w->stride[0] - w->pre[0] + r * w->dil[0];
                if (h < 0 || h >= u.h_) continue;
                for (int64_t q = 0; q < u.q_; q++) {
                  const int64_t v = q * w->stride[1] - w->pre[1] + s * w->dil[1];
                  if (v >= 0 && v < u.w_) acc[(c * u.h_ + h) * u.w_ + v] += row[p * u.q_ + q];
                }
              }
            }
        float *dx = w->ptr[T_DATA];
        for (int64_t c = 0; c < u.cg; c++)
          for (int64_t h = 0; h < u.h_; h++)
            for (int64_t v = 0; v < u.w_; v++) {
              const int64_t cc = g * u.cg + c;
              store(w, &dx[OFF(T_DATA, n, cc, h, v)], acc[(c * u.h_ + h) * u.w_ + v], 0.0f,
                    (uint64_t)(((n * u.c_ + cc) * u.h_ + h) * u.w_ + v));
            }
      } else {
        unfold_input(w, &u, n, g, col);
        unfold_output(w, &u, n, g, om);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)u.kg, (int)u.rows, (int)u.cols, 1.0, om,
                    (int)u.cols, col, (int)u.cols, 1.0, acc, (int)u.rows);
      }
    }
    if (w->dir == DIR_WGRAD) {
      float *dw = w->ptr[T_FILT];
      for (int64_t kl = 0; kl < u.kg; kl++)
        for (int64_t c = 0; c < u.cg; c++)
          for (int64_t rr = 0; rr < u.r_; rr++)
            for (int64_t ss = 0; ss < u.s_; ss++) {
              const int64_t k = g * u.kg + kl, r = w->flip ? u.r_ - 1 - rr : rr, s = w->flip ? u.s_ - 1 - ss : ss;
              store(w, &dw[OFF(T_FILT, k, c, rr, ss)], acc[kl * u.rows + (c * u.r_ + r) * u.s_ + s], 0.0f,
                    (uint64_t)(((k * u.cg + c) * u.r_ + rr) * u.s_ + ss));
            }
    }
  }
  free(col);
  free(fm);
  free(om);
  free(acc);
  return ok;
}
#undef OFF

/* On the stream's executor, perhaps again and again (a captured graph's launches). */
static void run_work(void *arg) {
  work *w = arg;
  static const char *const role[3][3] = {{"x", "w", "y"}, {"dx", "w", "dy"}, {"x", "dw", "dy"}};
  for (int r = 0; r < 3; r++)
    if (!hs_emu_device_range(w->ptr[r], w->bytes[r], NULL))
      violation("cuDNN execution reads freed memory: the %s of a convolution (%p, %zu bytes) is no longer live device "
                "memory when the work runs", role[w->dir][r], (void *)w->ptr[r], w->bytes[r]);
  if (w->ws_bytes) {
    if (!hs_emu_device_range(w->workspace, w->ws_bytes, NULL))
      violation(
          "cuDNN execution reads freed memory: the workspace (%p, %zu bytes) of a convolution is no longer live "
          "device memory when the work runs (freed before the work ran, or a CUDA graph that captured it outlived it)",
          w->workspace, w->ws_bytes);
    memset(w->workspace, 0xa5, w->ws_bytes); /* scratch: what it held is gone */
  }
  w->seed = mix(__atomic_add_fetch(&runs, 1, __ATOMIC_RELAXED) ^ (uint64_t)time(NULL));
  const char *e = getenv("HS_EMU_CUDNN_LOOPS"); /* 1: the plain loops for every engine */
  int loops = e && e[0] == '1';
  if (!loops && w->prec != PREC_FLOAT && run_by_gemm(w)) {
    if (w->ws_bytes) memset(w->workspace, 0xff, w->ws_bytes);
    return;
  }
  switch (w->dir) {
  case DIR_FWD: run_fwd(w); break;
  case DIR_DGRAD: run_dgrad(w); break;
  case DIR_WGRAD: run_wgrad(w); break;
  }
  if (w->ws_bytes) memset(w->workspace, 0xff, w->ws_bytes);
}

static void free_work(void *arg) { free(arg); }

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                  cudnnBackendDescriptor_t variantPack) {
  static const char *const api = "cudnnBackendExecute";
  static const char *const role[3][3] = {{"X", "W", "Y"}, {"DX", "W", "DY"}, {"X", "DW", "DY"}};
  pthread_mutex_lock(&mu);
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  work *w = NULL;
  cudaStream_t stream = NULL;
  struct cudnnContext *h = handle_of(handle, api, &st);
  desc *pd = h ? desc_of(executionPlan, api, &st) : NULL;
  desc *vd = pd ? desc_of(variantPack, api, &st) : NULL;
  if (!vd) goto out;
  if (pd->type != D_PLAN || vd->type != D_PACK) {
    st = fail(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
              "%s: given a %s and a %s (an execution plan and a variant pack are "
              "needed)",
              api, desc_name(pd->type), desc_name(vd->type));
    goto out;
  }
  if (!pd->finalized || !vd->finalized) {
    st = fail(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "%s: the %s is not finalized", api,
              !pd->finalized ? "execution plan" : "variant pack");
    goto out;
  }
  const plan_s *p = &pd->b->plan;
  const pack_s *v = &vd->b->pack;
  if (!p->runnable) {
    st = fail(CUDNN_STATUS_BAD_PARAM, "%s: the plan was finalized from device properties only "
              "(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, no handle): it describes a device and cannot run", api);
    goto out;
  }
  if (p->handle) {
    if (p->handle->magic != HANDLE_LIVE) violation("%s: the plan's handle %p was destroyed", api, (void *)p->handle);
    if (p->handle->device != h->device) {
      st = fail(CUDNN_STATUS_BAD_PARAM, "%s: the plan was built for device %d, the handle is on device %d", api,
                p->handle->device, h->device);
      goto out;
    }
  }
  if (!hs_emu_stream_submit_owned) {
    st = fail(CUDNN_STATUS_EXECUTION_FAILED_CUDART, "%s: the emulated runtime has no hs_emu_stream_submit_owned", api);
    goto out;
  }
  stream = h->stream;
  const int sdev = hs_emu_stream_device(stream);
  if (sdev < 0) {
    st = fail(CUDNN_STATUS_EXECUTION_FAILED_CUDART, "%s: the handle's stream %p is not a live stream (destroyed?)", api,
              (void *)stream);
    goto out;
  }
  if (sdev != h->device) {
    st = fail(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH, "%s: the stream is on device %d, the handle on device %d", api,
              sdev, h->device);
    goto out;
  }
  const op_s *o = &p->eng.graph.op[0];
  w = calloc(1, sizeof *w);
  if (!w) {
    st = fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "%s: out of host memory", api);
    goto out;
  }
  w->dir = o->dir;
  w->engine = p->eng.index;
  w->prec = engines[p->eng.index].prec;
  if (w->prec == PREC_TF32 && tf32_overridden()) w->prec = PREC_EXACT;
  for (int r = 0; r < 3; r++) {
    const tensor_s *t = &o->t[r];
    int i = 0;
    while (i < v->n && v->uid[i] != t->uid) i++;
    if (i == v->n) {
      st = fail(CUDNN_STATUS_BAD_PARAM, "%s: the variant pack has no pointer for tensor %s (unique id %lld)", api,
                role[o->dir][r], (long long)t->uid);
      goto out;
    }
    void *ptr = v->ptr[i];
    const size_t bytes = (size_t)tensor_span(t) * sizeof(float);
    int dev = -1;
    if (!ptr) {
      st = fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: the pointer of tensor %s (unique id %lld) is NULL", api,
                role[o->dir][r], (long long)t->uid);
      goto out;
    }
    if ((uintptr_t)ptr % (uintptr_t)t->align) {
      st = fail(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
                "%s: tensor %s (unique id %lld) at %p is not aligned to the %lld "
                "bytes its descriptor promises",
                api, role[o->dir][r], (long long)t->uid, ptr, (long long)t->align);
      goto out;
    }
    if (!hs_emu_device_range(ptr, bytes, &dev)) {
      st = fail(CUDNN_STATUS_BAD_PARAM, "%s: tensor %s (unique id %lld): [%p, +%zu bytes) is not inside live device "
                "memory (host memory, freed, or too small for its dimensions and strides)", api, role[o->dir][r],
                (long long)t->uid, ptr, bytes);
      goto out;
    }
    if (dev != h->device) {
      st = fail(CUDNN_STATUS_BAD_PARAM, "%s: tensor %s is on device %d, the handle on device %d", api, role[o->dir][r],
                dev, h->device);
      goto out;
    }
    w->ptr[r] = ptr;
    w->bytes[r] = bytes;
    memcpy(w->dim[r], t->dim, sizeof w->dim[r]);
    memcpy(w->str[r], t->str, sizeof w->str[r]);
  }
  if (p->workspace > 0) {
    int dev = -1;
    if (!v->workspace) {
      st = fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                "%s: the plan needs %lld bytes of workspace and the variant pack has "
                "none",
                api, (long long)p->workspace);
      goto out;
    }
    if (!hs_emu_device_range(v->workspace, (size_t)p->workspace, &dev) || dev != h->device) {
      st = fail(CUDNN_STATUS_BAD_PARAM, "%s: the workspace [%p, +%lld bytes) is not live device memory of device %d",
                api, v->workspace, (long long)p->workspace, h->device);
      goto out;
    }
    w->workspace = v->workspace;
    w->ws_bytes = (size_t)p->workspace;
  }
  for (int i = 0; i < 2; i++) {
    w->pre[i] = o->conv.pre[i];
    w->stride[i] = o->conv.stride[i];
    w->dil[i] = o->conv.dil[i];
  }
  w->flip = o->conv.mode == CUDNN_CONVOLUTION;
  w->alpha = o->alpha;
  w->beta = o->beta;
out:
  pthread_mutex_unlock(&mu);
  if (st != CUDNN_STATUS_SUCCESS) {
    free(w);
    return st;
  }
  /* The runtime owns w from here, and releases it when no launch can run it again. */
  cudaError_t e = hs_emu_stream_submit_owned(stream, run_work, w, free_work);
  if (e != cudaSuccess)
    return fail(CUDNN_STATUS_EXECUTION_FAILED_CUDART, "%s: the stream refused the work (CUDA error %d)", api, (int)e);
  return CUDNN_STATUS_SUCCESS;
}
