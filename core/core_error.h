/* core_error: error codes as values, and a diagnostic buffer that carries the message.
 *
 * Contract: functions return 0 on success and a negative HS_E* code on failure; when they take
 * an hs_diag they also leave a message for the user in it. Library code never exits: only
 * main() maps codes to exit statuses (hs_exit_code). One X-macro list generates the enum and
 * the name/description tables, as libuv's UV_ERRNO_MAP does. */
#ifndef HS_CORE_ERROR_H
#define HS_CORE_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#define HS_ERRNO_MAP(XX)                                                         \
  XX(EINVAL, -1, "invalid input")                                               \
  XX(EUSAGE, -2, "bad command-line usage")                                      \
  XX(ENOMEM, -3, "out of memory")                                               \
  XX(EIO, -4, "input/output error")                                             \
  XX(EDB, -5, "database error")                                                 \
  XX(ENOTFOUND, -6, "not found")                                                \
  XX(EUNSUPPORTED, -7, "not supported")                                         \
  XX(EINTR, -8, "interrupted")                                                  \
  XX(ELIMIT, -9, "a limit was reached")                                         \
  XX(ESCHEMA, -10, "database schema mismatch")                                  \
  XX(ERUNTIME, -11, "runtime failure")

typedef enum hs_errno {
  HS_OK = 0,
#define HS_ERR_ENUM(name, val, desc) HS_##name = (val),
  HS_ERRNO_MAP(HS_ERR_ENUM)
#undef HS_ERR_ENUM
} hs_errno;

/* A message for the user, filled in by the function that failed. */
typedef struct hs_diag {
  int code;       /* the HS_E* code that was set, 0 if none */
  char msg[1024]; /* one line, no trailing newline */
} hs_diag;

const char *hs_err_name(int code);     /* "EINVAL" */
const char *hs_strerror(int code);     /* "invalid input" */

/* Sets d (when not NULL) and returns code, so that a caller can write
 * `return hs_diag_set(d, HS_EINVAL, "x: expected ...")`. */
int hs_diag_set(hs_diag *d, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with a va_list, for functions that take their own format arguments. */
int hs_diag_vset(hs_diag *d, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Prepends "prefix: " to an existing message (for context such as a file name). */
void hs_diag_prefix(hs_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hs_diag_clear(hs_diag *d);

/* Exit status for a code: 0 success, 2 bad usage or bad input, 1 anything else. */
int hs_exit_code(int code);

#endif
