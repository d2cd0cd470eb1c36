/* pol_predict: the speed predictors. See pol_predict.h for the contract. */
#include "policies/pol_predict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_error.h"
#include "core/core_rng.h"

/* --- last ------------------------------------------------------------------------------- */

typedef struct last_state {
  int n;
  double y;
} last_state;

static int last_init(void *state, const hs_pred_params *p) { return 0; }
static void last_observe(void *state, double y) {
  last_state *s = state;
  s->y = y;
  s->n++;
}
static double last_predict(void *state) {
  const last_state *s = state;
  return s->n ? s->y : NAN;
}
static void no_fini(void *state) {}

const hs_predictor hs_predictor_last = {
    .name = "last",
    .description = "the last observed value",
    .state_size = sizeof(last_state),
    .init = last_init,
    .observe = last_observe,
    .predict = last_predict,
    .fini = no_fini,
};

/* --- ema: level <- alpha y + (1 - alpha) level, started at the first value ------------- */

typedef struct ema_state {
  int n;
  double alpha, level;
} ema_state;

static int ema_init(void *state, const hs_pred_params *p) {
  ema_state *s = state;
  if (!(p->alpha > 0 && p->alpha <= 1)) return HS_EINVAL;
  s->alpha = p->alpha;
  return 0;
}
static void ema_observe(void *state, double y) {
  ema_state *s = state;
  s->level = s->n++ ? s->alpha * y + (1 - s->alpha) * s->level : y;
}
static double ema_predict(void *state) {
  const ema_state *s = state;
  return s->n ? s->level : NAN;
}

const hs_predictor hs_predictor_ema = {
    .name = "ema",
    .description = "exponential smoothing: level = alpha*y + (1-alpha)*level",
    .state_size = sizeof(ema_state),
    .init = ema_init,
    .observe = ema_observe,
    .predict = ema_predict,
    .fini = no_fini,
};

/* --- holt: level and trend; started at l = y1, then b = y2 - y1, l = y2 ----------------- */

typedef struct holt_state {
  int n;
  double alpha, beta, level, trend;
} holt_state;

static int holt_init(void *state, const hs_pred_params *p) {
  holt_state *s = state;
  if (!(p->alpha > 0 && p->alpha <= 1) || !(p->beta >= 0 && p->beta <= 1)) return HS_EINVAL;
  s->alpha = p->alpha;
  s->beta = p->beta;
  return 0;
}
static void holt_observe(void *state, double y) {
  holt_state *s = state;
  if (s->n == 0) {
    s->level = y;
    s->trend = 0;
  } else if (s->n == 1) {
    s->trend = y - s->level;
    s->level = y;
  } else {
    double prev = s->level;
    s->level = s->alpha * y + (1 - s->alpha) * (s->level + s->trend);
    s->trend = s->beta * (s->level - prev) + (1 - s->beta) * s->trend;
  }
  s->n++;
}
static double holt_predict(void *state) {
  const holt_state *s = state;
  return s->n ? s->level + s->trend : NAN;
}

const hs_predictor hs_predictor_holt = {
    .name = "holt",
    .description = "Holt's linear trend: level and trend smoothed by alpha and beta",
    .state_size = sizeof(holt_state),
    .init = holt_init,
    .observe = holt_observe,
    .predict = holt_predict,
    .fini = no_fini,
};

/* --- gru ---------------------------------------------------------------------------------
 * One input (the value divided by the first value seen, so that the network works near 1
 * whatever the unit), H hidden units, one linear output read as the change from the last
 * value: x̂(t+1) = x(t) + wo·h(t) + bo. With wo = 0 at the start the GRU begins as `last` and
 * learns corrections. Cell (Cho et al. 2014):
 *   z = σ(Wz x + Uz h + bz),  r = σ(Wr x + Ur h + br),
 *   n = tanh(Wn x + Un (r ⊙ h) + bn),  h' = (1 - z) ⊙ h + z ⊙ n.
 * Each new value is one training example: the network is unrolled from h = 0 over the bptt
 * values before it, the squared error of its prediction is back-propagated through those
 * steps, the gradient's norm is clipped to 1 and one SGD step is taken. Prediction unrolls
 * the same way over the latest bptt values. */

enum { G_Z = 0, G_R = 1, G_N = 2 };

typedef struct gru_state {
  int H, K;
  double lr, scale;
  int n;           /* values seen */
  double *hist;    /* the latest K + 1 normalised values, oldest first */
  double *w, *g;   /* parameters and their gradient */
  int np;
  double *tape;    /* forward values per unrolled step: h_prev, z, r, n (4H each) */
  double *h, *dh, *tmp;
} gru_state;

/* Offsets into the parameter vector. */
static size_t gW(const gru_state *s, int gate) { return (size_t)gate * (size_t)(s->H * (s->H + 2)); }
static size_t gU(const gru_state *s, int gate) { return gW(s, gate) + (size_t)s->H; }
static size_t gB(const gru_state *s, int gate) { return gU(s, gate) + (size_t)(s->H * s->H); }
static size_t gO(const gru_state *s) { return gW(s, 3); }

static double sigm(double a) { return 1.0 / (1.0 + exp(-a)); }

static int gru_init(void *state, const hs_pred_params *p) {
  gru_state *s = state;
  if (p->hidden < 1 || p->hidden > 256 || p->bptt < 1 || p->bptt > 1024 || !(p->lr > 0))
    return HS_EINVAL;
  s->H = p->hidden;
  s->K = p->bptt;
  s->lr = p->lr;
  s->np = 3 * (s->H * (s->H + 2)) + s->H + 1;
  s->hist = calloc((size_t)s->K + 1, sizeof *s->hist);
  s->w = calloc((size_t)s->np, sizeof *s->w);
  s->g = calloc((size_t)s->np, sizeof *s->g);
  s->tape = calloc((size_t)s->K * 4 * (size_t)s->H, sizeof *s->tape);
  s->h = calloc((size_t)s->H, sizeof *s->h);
  s->dh = calloc((size_t)s->H, sizeof *s->dh);
  s->tmp = calloc((size_t)s->H, sizeof *s->tmp);
  if (!s->hist || !s->w || !s->g || !s->tape || !s->h || !s->dh || !s->tmp) return HS_ENOMEM;
  double a = 1.0 / sqrt((double)s->H);
  for (size_t i = 0; i < gO(s); i++) {
    double u = (double)(hs_rng_mix(p->seed, i) >> 11) * 0x1.0p-53; /* [0, 1) */
    s->w[i] = a * (2 * u - 1);
  }
  return 0;
}

/* Runs the cell over x[0..L) from h = 0; fills the tape and leaves the last state in s->h. */
static void gru_forward(gru_state *s, const double *x, int L) {
  int H = s->H;
  const double *w = s->w;
  memset(s->h, 0, (size_t)H * sizeof *s->h);
  for (int t = 0; t < L; t++) {
    double *hp = s->tape + (size_t)t * 4 * (size_t)H, *z = hp + H, *r = z + H, *nn = r + H;
    memcpy(hp, s->h, (size_t)H * sizeof *hp);
    for (int i = 0; i < H; i++) {
      double az = w[gW(s, G_Z) + (size_t)i] * x[t] + w[gB(s, G_Z) + (size_t)i];
      double ar = w[gW(s, G_R) + (size_t)i] * x[t] + w[gB(s, G_R) + (size_t)i];
      for (int j = 0; j < H; j++) {
        az += w[gU(s, G_Z) + (size_t)(i * H + j)] * hp[j];
        ar += w[gU(s, G_R) + (size_t)(i * H + j)] * hp[j];
      }
      z[i] = sigm(az);
      r[i] = sigm(ar);
    }
    for (int i = 0; i < H; i++) {
      double an = w[gW(s, G_N) + (size_t)i] * x[t] + w[gB(s, G_N) + (size_t)i];
      for (int j = 0; j < H; j++) an += w[gU(s, G_N) + (size_t)(i * H + j)] * r[j] * hp[j];
      nn[i] = tanh(an);
    }
    for (int i = 0; i < H; i++) s->h[i] = (1 - z[i]) * hp[i] + z[i] * nn[i];
  }
}

static double gru_output(const gru_state *s, double xlast) {
  double o = xlast + s->w[gO(s) + (size_t)s->H];
  for (int i = 0; i < s->H; i++) o += s->w[gO(s) + (size_t)i] * s->h[i];
  return o;
}

/* One SGD step on the example (x[0..L) -> target). */
static void gru_train(gru_state *s, const double *x, int L, double target) {
  int H = s->H;
  double *w = s->w, *g = s->g, *dh = s->dh, *dprev = s->tmp;
  gru_forward(s, x, L);
  double err = gru_output(s, x[L - 1]) - target;
  memset(g, 0, (size_t)s->np * sizeof *g);
  for (int i = 0; i < H; i++) {
    g[gO(s) + (size_t)i] = err * s->h[i];
    dh[i] = err * w[gO(s) + (size_t)i];
  }
  g[gO(s) + (size_t)H] = err;
  for (int t = L - 1; t >= 0; t--) {
    const double *hp = s->tape + (size_t)t * 4 * (size_t)H, *z = hp + H, *r = z + H, *nn = r + H;
    for (int j = 0; j < H; j++) dprev[j] = dh[j] * (1 - z[j]);
    /* Through n: da_n, then q = r ⊙ h_prev. */
    for (int i = 0; i < H; i++) {
      double dan = dh[i] * z[i] * (1 - nn[i] * nn[i]);
      g[gW(s, G_N) + (size_t)i] += dan * x[t];
      g[gB(s, G_N) + (size_t)i] += dan;
      for (int j = 0; j < H; j++) {
        double u = w[gU(s, G_N) + (size_t)(i * H + j)];
        g[gU(s, G_N) + (size_t)(i * H + j)] += dan * r[j] * hp[j];
        double dq = u * dan;
        dprev[j] += dq * r[j];
      }
    }
    /* dr_j = Σ_i Un[i][j] da_n_i h_prev_j; recompute it per j to keep one scratch vector. */
    for (int j = 0; j < H; j++) {
      double dr = 0;
      for (int i = 0; i < H; i++)
        dr += w[gU(s, G_N) + (size_t)(i * H + j)] * dh[i] * z[i] * (1 - nn[i] * nn[i]);
      dr *= hp[j];
      double dar = dr * r[j] * (1 - r[j]);
      double daz = dh[j] * (nn[j] - hp[j]) * z[j] * (1 - z[j]);
      g[gW(s, G_R) + (size_t)j] += dar * x[t];
      g[gB(s, G_R) + (size_t)j] += dar;
      g[gW(s, G_Z) + (size_t)j] += daz * x[t];
      g[gB(s, G_Z) + (size_t)j] += daz;
      for (int k = 0; k < H; k++) {
        g[gU(s, G_R) + (size_t)(j * H + k)] += dar * hp[k];
        g[gU(s, G_Z) + (size_t)(j * H + k)] += daz * hp[k];
        dprev[k] += w[gU(s, G_R) + (size_t)(j * H + k)] * dar + w[gU(s, G_Z) + (size_t)(j * H + k)] * daz;
      }
    }
    memcpy(dh, dprev, (size_t)H * sizeof *dh);
  }
  double norm = 0;
  for (int i = 0; i < s->np; i++) norm += g[i] * g[i];
  norm = sqrt(norm);
  double f = norm > 1.0 ? s->lr / norm : s->lr;
  if (!isfinite(norm)) return; /* never let one bad value poison the weights */
  for (int i = 0; i < s->np; i++) w[i] -= f * g[i];
}

static void gru_observe(void *state, double y) {
  gru_state *s = state;
  if (!isfinite(y)) return;
  if (s->n == 0) s->scale = y != 0 ? fabs(y) : 1.0;
  double x = y / s->scale;
  int have = s->n < s->K + 1 ? s->n : s->K + 1;
  if (have == s->K + 1) {
    memmove(s->hist, s->hist + 1, (size_t)s->K * sizeof *s->hist);
    have--;
  }
  s->hist[have] = x;
  s->n++;
  /* Train on the newest value as the target of the values before it. */
  if (have >= 1) gru_train(s, s->hist, have, x);
}

static double gru_predict(void *state) {
  gru_state *s = state;
  if (s->n == 0) return NAN;
  /* Prediction reuses the forward scratch buffers; they carry nothing between calls. */
  int have = s->n < s->K + 1 ? s->n : s->K + 1;
  int L = have < s->K ? have : s->K;
  const double *x = s->hist + (have - L);
  gru_forward(s, x, L);
  double o = gru_output(s, x[L - 1]);
  return o * s->scale;
}

static void gru_fini(void *state) {
  gru_state *s = state;
  free(s->hist);
  free(s->w);
  free(s->g);
  free(s->tape);
  free(s->h);
  free(s->dh);
  free(s->tmp);
}

const hs_predictor hs_predictor_gru = {
    .name = "gru",
    .description = "a small GRU trained online (truncated BPTT, SGD) on the series",
    .state_size = sizeof(gru_state),
    .init = gru_init,
    .observe = gru_observe,
    .predict = gru_predict,
    .fini = gru_fini,
};

static const hs_predictor *const predictors[] = {
    &hs_predictor_last, &hs_predictor_ema, &hs_predictor_holt, &hs_predictor_gru, NULL,
};

const hs_predictor *const *hs_predictor_list(void) { return predictors; }
