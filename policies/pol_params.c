#include "policies/pol_params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core_units.h"

static int spec_count(const hs_param_spec *spec) {
  int n = 0;
  while (spec && spec[n].name) n++;
  return n;
}

static void list_names(const hs_param_spec *spec, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; spec && spec[i].name; i++) {
    int k = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", spec[i].name);
    if (k < 0 || (size_t)k >= len - used) break;
    used += (size_t)k;
  }
  if (!used) snprintf(buf, len, "(none)");
}

/* Index of `word` among "a|b|c", or -1. */
static int enum_index(const char *choices, const char *word) {
  int idx = 0;
  const char *p = choices;
  size_t wl = strlen(word);
  while (p && *p) {
    const char *bar = strchr(p, '|');
    size_t l = bar ? (size_t)(bar - p) : strlen(p);
    if (l == wl && strncmp(p, word, l) == 0) return idx;
    idx++;
    p = bar ? bar + 1 : NULL;
  }
  return -1;
}

static int parse_value(const hs_param_spec *s, const char *who, const char *v, double *out,
                       hs_diag *d) {
  char *end = NULL;
  switch (s->type) {
  case HS_PARAM_INT: {
    long long x = strtoll(v, &end, 10);
    if (!*v || *end)
      return hs_diag_set(d, HS_EINVAL, "%s: parameter %s: expected an integer, got \"%s\"", who,
                         s->name, v);
    *out = (double)x;
    break;
  }
  case HS_PARAM_DOUBLE:
    *out = strtod(v, &end);
    if (!*v || *end || !isfinite(*out))
      return hs_diag_set(d, HS_EINVAL, "%s: parameter %s: expected a number, got \"%s\"", who,
                         s->name, v);
    break;
  case HS_PARAM_BOOL:
    if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
        !strcasecmp(v, "on"))
      *out = 1;
    else if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
             !strcasecmp(v, "off"))
      *out = 0;
    else
      return hs_diag_set(d, HS_EINVAL, "%s: parameter %s: expected 0/1, true/false, yes/no or on/off, got \"%s\"",
                         who, s->name, v);
    break;
  case HS_PARAM_BYTES:
    if (hs_units_parse_bytes(v, out) != 0)
      return hs_diag_set(d, HS_EINVAL, "%s: parameter %s: expected a size like \"25MiB\", got \"%s\"",
                         who, s->name, v);
    break;
  case HS_PARAM_TIME:
    if (hs_units_parse_time(v, out) != 0)
      return hs_diag_set(d, HS_EINVAL, "%s: parameter %s: expected a time like \"20ms\", got \"%s\"",
                         who, s->name, v);
    break;
  case HS_PARAM_ENUM: {
    int i = enum_index(s->choices, v);
    if (i < 0)
      return hs_diag_set(d, HS_EINVAL, "%s: parameter %s: expected one of %s, got \"%s\"", who,
                         s->name, s->choices, v);
    *out = i;
    return 0;
  }
  }
  if (s->min <= s->max && (*out < s->min || *out > s->max))
    return hs_diag_set(d, HS_EINVAL, "%s: parameter %s: expected a value in [%g, %g], got \"%s\"",
                       who, s->name, s->min, s->max, v);
  return 0;
}

int hs_params_parse(hs_params *out, const hs_param_spec *spec, const char *who, const char *text,
                    hs_diag *d) {
  memset(out, 0, sizeof *out);
  out->spec = spec;
  out->n = spec_count(spec);
  if (out->n > HS_PARAMS_MAX)
    return hs_diag_set(d, HS_EINVAL, "%s: too many parameters in its table", who);
  for (int i = 0; i < out->n; i++) {
    int rc = parse_value(&spec[i], who, spec[i].def, &out->value[i], d);
    if (rc) return rc; /* a bad default is a bug in the table; say so like any bad value */
  }
  if (!text || !*text) return 0;
  /* strtok would skip an empty item: "overlap=1," must not pass for "overlap=1". */
  size_t tl = strlen(text);
  if (text[0] == ',' || text[tl - 1] == ',' || strstr(text, ",,"))
    return hs_diag_set(d, HS_EINVAL, "%s: an empty parameter in \"%s\" (a comma too many?)", who, text);

  char *copy = strdup(text);
  if (!copy) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  int rc = 0;
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) {
      rc = hs_diag_set(d, HS_EINVAL, "%s: expected key=value, got \"%s\"", who, item);
      break;
    }
    *eq = '\0';
    int idx = -1;
    for (int i = 0; i < out->n; i++)
      if (!strcmp(spec[i].name, item)) idx = i;
    if (idx < 0) {
      char names[512];
      list_names(spec, names, sizeof names);
      rc = hs_diag_set(d, HS_EINVAL, "%s: unknown parameter \"%s\"; valid: %s", who, item, names);
      break;
    }
    if (out->given[idx]) {
      rc = hs_diag_set(d, HS_EINVAL, "%s: parameter %s given twice", who, item);
      break;
    }
    rc = parse_value(&spec[idx], who, eq + 1, &out->value[idx], d);
    if (rc) break;
    out->given[idx] = 1;
  }
  free(copy);
  return rc;
}

double hs_params_get(const hs_params *p, const char *name) {
  for (int i = 0; i < p->n; i++)
    if (!strcmp(p->spec[i].name, name)) return p->value[i];
  return NAN;
}

/* Copies the idx-th word of "a|b|c" into buf. */
static void enum_word(const char *choices, int idx, char *buf, size_t len) {
  const char *p = choices;
  for (int i = 0; p && i < idx; i++) {
    p = strchr(p, '|');
    if (p) p++;
  }
  if (!p) {
    snprintf(buf, len, "?");
    return;
  }
  const char *bar = strchr(p, '|');
  size_t l = bar ? (size_t)(bar - p) : strlen(p);
  snprintf(buf, len, "%.*s", (int)l, p);
}

void hs_params_format(const hs_params *p, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < p->n; i++) {
    const hs_param_spec *s = &p->spec[i];
    char v[64];
    switch (s->type) {
    case HS_PARAM_ENUM: enum_word(s->choices, (int)p->value[i], v, sizeof v); break;
    case HS_PARAM_INT:
    case HS_PARAM_BOOL: snprintf(v, sizeof v, "%lld", (long long)p->value[i]); break;
    default: snprintf(v, sizeof v, "%.17g", p->value[i]); break;
    }
    int k = snprintf(buf + used, len - used, "%s%s=%s", i ? "," : "", s->name, v);
    if (k < 0 || (size_t)k >= len - used) break;
    used += (size_t)k;
  }
}
