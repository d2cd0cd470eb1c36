/* Convergence models: the registry and parameter layering. See sim_conv.h. */
#include "sim/sim_conv.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_zoo.h"

static const hs_conv_model *const models[] = {&hs_conv_analytic, &hs_conv_proxy, NULL};

const hs_conv_model *hs_conv_find(const char *name) {
  for (int i = 0; models[i]; i++)
    if (!strcmp(models[i]->name, name)) return models[i];
  return NULL;
}

void hs_conv_names(char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; models[i] && used < size; i++) {
    int k = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", models[i]->name);
    if (k < 0) break;
    used += (size_t)k;
  }
}

/* Reads key=value lines of `path` into one "k=v,k=v" string (caller frees). */
static int read_params_file(const char *path, char **out, hs_diag *d) {
  *out = NULL;
  FILE *f = fopen(path, "r");
  if (!f) return hs_diag_set(d, HS_EIO, "--convergence-params %s: %s", path, strerror(errno));
  size_t cap = 256, len = 0;
  char *buf = malloc(cap), line[512];
  if (!buf) {
    fclose(f);
    return hs_diag_set(d, HS_ENOMEM, "out of memory");
  }
  buf[0] = '\0';
  int lineno = 0, rc = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    /* Keep the non-blank characters: "phi = 120" reads as "phi=120". */
    char item[512];
    size_t n = 0;
    for (char *p = line; *p; p++)
      if (!isspace((unsigned char)*p)) item[n++] = *p;
    item[n] = '\0';
    if (!n) continue;
    if (!strchr(item, '=') || strchr(item, ',')) {
      rc = hs_diag_set(d, HS_EINVAL, "%s:%d: expected key=value, got \"%s\"", path, lineno, item);
      break;
    }
    if (len + n + 2 > cap) {
      while (len + n + 2 > cap) cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb) {
        rc = hs_diag_set(d, HS_ENOMEM, "out of memory");
        break;
      }
      buf = nb;
    }
    len += (size_t)sprintf(buf + len, "%s%s", len ? "," : "", item);
  }
  if (!rc && ferror(f)) rc = hs_diag_set(d, HS_EIO, "--convergence-params %s: read error", path);
  fclose(f);
  if (rc) free(buf);
  else *out = buf;
  return rc;
}

int hs_conv_parse(const char *spec, const char *model, const char *file,
                  const hs_conv_model **out, hs_params *p, hs_diag *d) {
  return hs_conv_parse_fitted(spec, model, NULL, file, out, p, d);
}

int hs_conv_parse_fitted(const char *spec, const char *model, const char *fitted, const char *file,
                         const hs_conv_model **out, hs_params *p, hs_diag *d) {
  *out = NULL;
  char name[64];
  const char *colon = strchr(spec, ':');
  size_t nl = colon ? (size_t)(colon - spec) : strlen(spec);
  if (nl >= sizeof name) nl = sizeof name - 1;
  memcpy(name, spec, nl);
  name[nl] = '\0';
  const hs_conv_model *m = hs_conv_find(name);
  if (!m) {
    char names[128];
    hs_conv_names(names, sizeof names);
    return hs_diag_set(d, HS_EINVAL, "--convergence: unknown model \"%s\"; valid: none, %s", name, names);
  }
  if (colon && !colon[1])
    return hs_diag_set(d, HS_EINVAL, "--convergence: nothing after \"%s:\"; give key=value pairs after "
                       "the colon, or no colon", name);
  if (fitted && m != &hs_conv_analytic)
    return hs_diag_set(d, HS_EINVAL, "--convergence %s takes no fitted parameters (only analytic does)", name);
  char who[96];
  snprintf(who, sizeof who, "--convergence %s", name);
  hs_params layer[2];
  /* The fitted layer replaces the model's own defaults: both are whole fits of the curve. */
  const char *mdef = m == &hs_conv_analytic ? hs_conv_analytic_defaults(model) : NULL;
  int rc = hs_params_parse(p, m->params, who, mdef, d);
  if (rc) return rc;
  if (fitted) {
    hs_params fl;
    if ((rc = hs_params_parse(&fl, m->params, "stored convergence fit", fitted, d))) return rc;
    for (int i = 0; i < p->n; i++)
      if (fl.given[i]) p->value[i] = fl.value[i];
  }
  memset(p->given, 0, sizeof p->given); /* given = set by the user, in the file or the spec */
  char *ftext = NULL;
  if (file && (rc = read_params_file(file, &ftext, d))) return rc;
  char fwho[600];
  snprintf(fwho, sizeof fwho, "--convergence-params %s", file ? file : "");
  rc = hs_params_parse(&layer[0], m->params, fwho, ftext, d);
  free(ftext);
  if (rc) return rc;
  if ((rc = hs_params_parse(&layer[1], m->params, who, colon ? colon + 1 : NULL, d))) return rc;
  if (m == &hs_conv_analytic && model && !hs_zoo_find(model) && !fitted && !file) {
    int curve = 0;
    for (int i = 0; i < p->n; i++)
      if (layer[1].given[i] && (!strcmp(m->params[i].name, "beta0") || !strcmp(m->params[i].name, "beta1") ||
                                !strcmp(m->params[i].name, "beta2")))
        curve++;
    if (curve < 3)
      return hs_diag_set(d, HS_EINVAL,
                         "--convergence analytic: no parameters for model \"%s\", which is not in the zoo: fit "
                         "them to its loss curves with `hetsim fit-convergence --curves FILE.csv --model %s` (stored "
                         "in the database), or give --convergence-params FILE", model, model);
  }
  /* Later layers win; `given` marks what the user set in the file or on the command line. */
  for (int l = 0; l < 2; l++)
    for (int i = 0; i < p->n; i++)
      if (layer[l].given[i]) {
        p->value[i] = layer[l].value[i];
        p->given[i] = 1;
      }
  *out = m;
  return 0;
}

int hs_conv_check_target(const hs_conv_model *m, const hs_params *p, int classes,
                         double target_loss, double target_accuracy, hs_diag *d) {
  if (!m || !m->check_target || (!(target_loss > 0) && !(target_accuracy > 0))) return 0;
  return m->check_target(p, classes, target_loss, target_accuracy, d);
}
