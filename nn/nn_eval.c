#include "nn/nn_eval.h"

#include <stdlib.h>

int hs_net_evaluate(hs_net *net, const hs_dataset *ds, int64_t n, int chunk, float *x, int32_t *y,
                    double *loss, double *accuracy, hs_diag *d) {
  if (n < 1 || chunk < 1) return hs_diag_set(d, HS_EINVAL, "evaluation of %lld samples in chunks of %d", (long long)n, chunk);
  enum { IDX = 256 };
  int64_t idx[IDX];
  size_t per = (size_t)hs_data_sample_size(ds);
  double lsum = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += chunk) {
    int m = (int)(n - start < chunk ? n - start : chunk), c, rc;
    double l;
    /* hs_data_gather takes the indices of the samples; in pieces of IDX */
    for (int k = 0; k < m; k += IDX) {
      int p = m - k < IDX ? m - k : IDX;
      for (int i = 0; i < p; i++) idx[i] = start + k + i;
      if ((rc = hs_data_gather(ds, idx, p, x + (size_t)k * per, y + k, d))) return rc;
    }
    if ((rc = hs_net_load(net, x, y, m, d)) || (rc = hs_net_forward(net, 0, d)) || (rc = hs_net_result(net, &l, &c, d)))
      return rc;
    lsum += l * m;
    correct += c;
  }
  *loss = lsum / (double)n;
  *accuracy = (double)correct / (double)n;
  return 0;
}

int hs_net_evaluate_params(hs_net *net, const float *params, const hs_dataset *ds, double *loss,
                           double *accuracy, hs_diag *d) {
  int rc = hs_net_set_params(net, params, d);
  if (rc) return rc;
  const int chunk = 500;
  float *x = malloc((size_t)chunk * (size_t)hs_data_sample_size(ds) * sizeof *x);
  int32_t *y = malloc((size_t)chunk * sizeof *y);
  if (!x || !y) rc = hs_diag_set(d, HS_ENOMEM, "out of memory for an evaluation");
  else rc = hs_net_evaluate(net, ds, hs_data_count(ds), chunk, x, y, loss, accuracy, d);
  free(x);
  free(y);
  return rc;
}
