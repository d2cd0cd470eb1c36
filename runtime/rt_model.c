/* The arithmetic on the global model: see rt_model.h for the contract. */
#include "runtime/rt_model.h"

#include <stdlib.h>
#include <string.h>

#include "core/core_affinity.h"

int hs_runtime_model_open(hs_runtime_model *m, int64_t P, hs_diag *d) {
  memset(m, 0, sizeof *m);
  m->P = P;
  m->global = calloc((size_t)(P > 0 ? P : 1), sizeof *m->global);
  m->acc = calloc((size_t)(P > 0 ? P : 1), sizeof *m->acc);
  if (!m->global || !m->acc) {
    hs_runtime_model_close(m);
    return hs_diag_set(d, HS_ENOMEM, "out of memory for the global model (%lld floats)", (long long)P);
  }
  /* Mapped now, not in the run's first update (core_affinity.h). */
  hs_touch_pages(m->global, (size_t)(P > 0 ? P : 1) * sizeof *m->global);
  hs_touch_pages(m->acc, (size_t)(P > 0 ? P : 1) * sizeof *m->acc);
  return 0;
}

void hs_runtime_model_close(hs_runtime_model *m) {
  free(m->global);
  free(m->acc);
  m->global = m->acc = NULL;
  m->acc_w = 0;
}

void hs_runtime_weights(double *v, int n) {
  double tot = 0;
  for (int i = 0; i < n; i++) tot += v[i];
  for (int i = 0; i < n; i++) v[i] = tot != 0 ? v[i] / tot : 1.0 / n;
}

/* GCC's -O2 vectorises a loop only when its trip count is a known multiple of the vector width
 * (the very-cheap cost model), so these run in blocks of VBLOCK floats and finish one by one.
 * Each element's arithmetic is the same either way: the results do not depend on the blocks. */
#define VBLOCK 16

void hs_runtime_vec_scale(float *restrict y, const float *restrict x, float a, int64_t n) {
  int64_t i = 0;
  for (; i + VBLOCK <= n; i += VBLOCK)
    for (int k = 0; k < VBLOCK; k++) y[i + k] = a * x[i + k];
  for (; i < n; i++) y[i] = a * x[i];
}

void hs_runtime_vec_axpy(float *restrict y, const float *restrict x, float a, int64_t n) {
  int64_t i = 0;
  for (; i + VBLOCK <= n; i += VBLOCK)
    for (int k = 0; k < VBLOCK; k++) y[i + k] += a * x[i + k];
  for (; i < n; i++) y[i] += a * x[i];
}

/* x + (-lr) g: negation is exact, so the bits are those of x - lr * g. */
void hs_runtime_vec_sgd(float *restrict x, float *restrict q, const float *restrict g, float lr, int64_t n) {
  float a = -lr;
  if (!q) {
    hs_runtime_vec_axpy(x, g, a, n);
    return;
  }
  int64_t i = 0;
  for (; i + VBLOCK <= n; i += VBLOCK)
    for (int k = 0; k < VBLOCK; k++) {
      float v = x[i + k] + a * g[i + k];
      x[i + k] = v;
      q[i + k] = v;
    }
  for (; i < n; i++) {
    float v = x[i] + a * g[i];
    x[i] = v;
    q[i] = v;
  }
}

void hs_runtime_model_allreduced(hs_runtime_model *m, hs_comm_what what, const float *red, double lr, float *q) {
  if (what == HS_COMM_GRAD) hs_runtime_vec_sgd(m->global, q, red, (float)lr, m->P);
  else memcpy(m->global, red, (size_t)m->P * sizeof *m->global);
}

/* y *= a, blocked as the vec_ functions (one array: nothing to alias). */
static void scale_in_place(float *y, float a, int64_t n) {
  int64_t i = 0;
  for (; i + VBLOCK <= n; i += VBLOCK)
    for (int k = 0; k < VBLOCK; k++) y[i + k] *= a;
  for (; i < n; i++) y[i] *= a;
}

void hs_runtime_model_push(hs_runtime_model *m, hs_comm_what what, hs_ps_mode mode, float *buf, double batch,
                           double weight, double lr) {
  int64_t P = m->P;
  /* The server scales what arrives (after decompression) by the push's weight. */
  if (weight > 0 && weight != 1) scale_in_place(buf, (float)weight, P);
  if (mode == HS_PS_ACCUMULATE) {
    float s = what == HS_COMM_GRAD ? (float)batch : 1.0f;
    hs_runtime_vec_axpy(m->acc, buf, s, P);
    m->acc_w += s;
    m->acc_model = what == HS_COMM_MODEL;
  } else if (what == HS_COMM_GRAD) {
    hs_runtime_vec_sgd(m->global, NULL, buf, (float)lr, P);
  } else {
    hs_runtime_vec_axpy(m->global, buf, 1.0f, P);
  }
}

void hs_runtime_model_apply(hs_runtime_model *m, double lr) {
  if (m->acc_w > 0) {
    double f = 1.0 / m->acc_w;
    if (m->acc_model) hs_runtime_vec_axpy(m->global, m->acc, (float)f, m->P);
    else hs_runtime_vec_sgd(m->global, NULL, m->acc, (float)(lr * f), m->P);
  }
  memset(m->acc, 0, (size_t)m->P * sizeof *m->acc);
  m->acc_w = 0;
}

/* The two cases of hs_runtime_model_delta, blocked as the vec_ functions: with restrict-qualified
 * arrays that do not overlap GCC vectorises the blocks (the plain loop, which had to allow for
 * any overlap, ran one float at a time: 7.5% of a real ashl run's samples, 2026-11-28). */
static void delta_in_place(float *restrict x, float *restrict base, int64_t n) {
  int64_t i = 0;
  for (; i + VBLOCK <= n; i += VBLOCK)
    for (int k = 0; k < VBLOCK; k++) {
      float v = x[i + k];
      x[i + k] = v - base[i + k];
      base[i + k] = v;
    }
  for (; i < n; i++) {
    float v = x[i];
    x[i] = v - base[i];
    base[i] = v;
  }
}

static void delta_apart(float *restrict delta, const float *restrict x, float *restrict base, int64_t n) {
  int64_t i = 0;
  for (; i + VBLOCK <= n; i += VBLOCK)
    for (int k = 0; k < VBLOCK; k++) {
      float v = x[i + k];
      delta[i + k] = v - base[i + k];
      base[i + k] = v;
    }
  for (; i < n; i++) {
    float v = x[i];
    delta[i] = v - base[i];
    base[i] = v;
  }
}

void hs_runtime_model_delta(float *delta, const float *x, float *base, int64_t n) {
  if (delta == x) delta_in_place(delta, base, n);
  else delta_apart(delta, x, base, n);
}
