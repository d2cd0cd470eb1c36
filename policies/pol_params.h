/* pol_params: a policy's parameters, declared once in a table and parsed from the
 * `--policy NAME:key=value,key=value` syntax of the CLI.
 *
 * Contract: every policy lists its parameters with a type, a default and a help line; unknown
 * keys, malformed values and out-of-range values are errors (HS_EINVAL with a message naming the
 * parameter and listing the valid ones). Values are kept as doubles (numbers, booleans, bytes,
 * times) or as the index of an enum choice. */
#ifndef HS_POL_PARAMS_H
#define HS_POL_PARAMS_H

#include "core/core_error.h"

#define HS_PARAMS_MAX 32

typedef enum hs_param_type {
  HS_PARAM_INT = 0,
  HS_PARAM_DOUBLE = 1,
  HS_PARAM_BOOL = 2,   /* 0/1, true/false, yes/no, on/off */
  HS_PARAM_BYTES = 3,  /* with units: 25MiB */
  HS_PARAM_TIME = 4,   /* with units: 20ms */
  HS_PARAM_ENUM = 5    /* one of `choices`, "a|b|c"; the value is the index */
} hs_param_type;

typedef struct hs_param_spec {
  const char *name;
  hs_param_type type;
  const char *def;      /* default, as it would be written on the command line */
  double min, max;      /* inclusive range for numbers; ignored when min > max */
  const char *choices;  /* HS_PARAM_ENUM: "ring|hier" */
  const char *help;
} hs_param_spec;

typedef struct hs_params {
  const hs_param_spec *spec; /* the table these values follow */
  int n;
  double value[HS_PARAMS_MAX];
  int given[HS_PARAMS_MAX];  /* 1 when set on the command line */
} hs_params;

/* Parses "k=v,k=v" (may be NULL or empty) against spec. `who` names the policy in messages. */
int hs_params_parse(hs_params *out, const hs_param_spec *spec, const char *who, const char *text,
                    hs_diag *d);
/* The value of a parameter by name; the name must be in the table (a programming error
 * otherwise, reported as NaN). */
double hs_params_get(const hs_params *p, const char *name);
/* Canonical "k=v,k=v" of every parameter, defaults included, in table order. */
void hs_params_format(const hs_params *p, char *buf, size_t len);

#endif
