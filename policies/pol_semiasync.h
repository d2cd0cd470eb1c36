/* pol_semiasync: the computations inside the semi-asynchronous policies ashl and adsp that are
 * worth testing on their own (closed forms and the loss-curve fit). The policies themselves are
 * hs_policy_ashl and hs_policy_adsp in pol_registry.h; docs/policies.md describes them.
 *
 * Contract: pure functions, no allocation beyond GSL's workspace inside hs_adsp_fit.
 * Units: seconds. */
#ifndef HS_POL_SEMIASYNC_H
#define HS_POL_SEMIASYNC_H

/* ASHL's local steps: H_i = max(1, round((max_j(K c_j + comm_j) - comm_i) / c_i)) for the n
 * workers with step times c and communication times comm (Shen et al., IEEE TC 2024), so
 * that every worker's round c_i H_i + comm_i ends near the slowest worker's K steps. */
void hs_ashl_local_steps(int n, const double *c, const double *comm, int K, int *H);
/* The round time T = max_i (c_i H_i + comm_i). */
double hs_ashl_round_time(int n, const double *c, const double *comm, const int *H);
/* SHL's top-k density for one worker: the push must fit in the slack s = T - c H - down that
 * its round leaves. When the uncompressed push fits (up <= s) the result is 1 (send fp32 as
 * is); otherwise d = (s - cm) / (wire * up), with cm = max(0, up_c - wire * d0 * up) the
 * compression time estimated from the compressed push up_c measured at density d0, and wire
 * the wire bytes per unit density relative to fp32 (2 for top-k's index + value pairs); d is
 * clamped to [d0, 1). */
double hs_ashl_density(double T, double c, int H, double up, double down, double up_c, double d0,
                       double wire);

/* ADSP's loss curve l(t) = 1/(a^2 t + b) + c fitted to n >= 3 points by nonlinear least squares
 * (GSL multifit_nlinear, Levenberg-Marquardt). abc receives (a, b, c). Returns 0, or HS_EINVAL
 * when the points are too few or not finite, or HS_ERUNTIME when the fit fails to converge. */
int hs_adsp_fit(const double *t, const double *l, int n, double abc[3]);
/* ADSP's reward for a fitted curve and a target loss: when the curve reaches the target
 * (target > c), the inverse of the predicted time at which it does, a^2 / (1/(target - c) - b)
 * (the reference code's rule; a very large number when the curve is already below it);
 * otherwise -c, so that a curve that reaches the target beats one that does not, and a lower
 * floor beats a higher one. */
double hs_adsp_reward(const double abc[3], double target);

#endif
