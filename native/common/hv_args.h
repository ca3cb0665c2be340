/* hv_args: tiny, strict "--key value" / "--key=value" parsing for the native
 * programs. The Python side validates user input; these checks are a second
 * line of defence and name the offending option. Unknown options are errors.
 *
 * A program declares ONE option table whose typed entries say where each value
 * goes in its config struct, and reads them all with hv_args_config:
 *
 *   typedef struct { int64_t *sizes; size_t nsizes; long iters; double budget_s; int pin; } my_config;
 *   hv_opt opts[] = {
 *       HV_COMMON_OPTS,
 *       HV_OPT_LIST(my_config, sizes, nsizes, "sizes", "comma list of message sizes in bytes"),
 *       HV_OPT_LONG(my_config, iters, "iters", 1, 100000000L, "measured round trips per size"),
 *       HV_OPT_DOUBLE(my_config, budget_s, "time-per-size", 0.0, 1e6, "time budget per size in seconds"),
 *       HV_OPT_FLAG(my_config, pin, "pin", "pin each rank to a CPU"),
 *   };
 *   hv_args_parse(...) (hv_ctx_init does it), then hv_args_config(opts, n, &cfg, err, len).
 *
 * Entries without a type (HV_COMMON_OPTS, HV_OPT_RAW(name, is_flag, help)) are
 * only parsed; the program reads them with hv_args_get. The *_OR variants are
 * optional: a missing option leaves the field as the program initialised it. */
#ifndef HV_ARGS_H
#define HV_ARGS_H
#include <stddef.h>
#include <stdint.h>

typedef enum { HV_ARG_NONE, HV_ARG_LONG, HV_ARG_DOUBLE, HV_ARG_LIST, HV_ARG_STRING, HV_ARG_FLAG } hv_arg_kind;

typedef struct {
    const char *name;   /* without the leading "--" */
    const char *value;  /* NULL until set; flags get "1" */
    int is_flag;
    const char *help;
    /* where hv_args_config puts the value (HV_ARG_NONE: nowhere) */
    hv_arg_kind kind;
    size_t offset;       /* of the field in the config struct: long, double, int64_t *, const char * or int */
    size_t count_offset; /* HV_ARG_LIST: of the size_t field that receives the list's length */
    long ilo, ihi;       /* HV_ARG_LONG: bounds */
    double dlo, dhi;     /* HV_ARG_DOUBLE: bounds */
    int optional;        /* missing: leave the field as it is */
} hv_opt;

/* clang-format off */
#define HV_OPT_LONG(type, field, name, lo, hi, help) \
    {name, NULL, 0, help, HV_ARG_LONG, offsetof(type, field), 0, lo, hi, 0.0, 0.0, 0}
#define HV_OPT_LONG_OR(type, field, name, lo, hi, help) \
    {name, NULL, 0, help, HV_ARG_LONG, offsetof(type, field), 0, lo, hi, 0.0, 0.0, 1}
#define HV_OPT_DOUBLE(type, field, name, lo, hi, help) \
    {name, NULL, 0, help, HV_ARG_DOUBLE, offsetof(type, field), 0, 0, 0, lo, hi, 0}
#define HV_OPT_DOUBLE_OR(type, field, name, lo, hi, help) \
    {name, NULL, 0, help, HV_ARG_DOUBLE, offsetof(type, field), 0, 0, 0, lo, hi, 1}
#define HV_OPT_LIST(type, field, count, name, help) \
    {name, NULL, 0, help, HV_ARG_LIST, offsetof(type, field), offsetof(type, count), 0, 0, 0.0, 0.0, 0}
#define HV_OPT_LIST_OR(type, field, count, name, help) \
    {name, NULL, 0, help, HV_ARG_LIST, offsetof(type, field), offsetof(type, count), 0, 0, 0.0, 0.0, 1}
#define HV_OPT_STRING(type, field, name, help) \
    {name, NULL, 0, help, HV_ARG_STRING, offsetof(type, field), 0, 0, 0, 0.0, 0.0, 0}
#define HV_OPT_STRING_OR(type, field, name, help) \
    {name, NULL, 0, help, HV_ARG_STRING, offsetof(type, field), 0, 0, 0, 0.0, 0.0, 1}
#define HV_OPT_RAW(name, is_flag, help) \
    {name, NULL, is_flag, help, HV_ARG_NONE, 0, 0, 0, 0, 0.0, 0.0, 0}
#define HV_OPT_FLAG(type, field, name, help) \
    {name, NULL, 1, help, HV_ARG_FLAG, offsetof(type, field), 0, 0, 0, 0.0, 0.0, 1}
/* clang-format on */

/* Returns 0, or -1 with a message in err naming the option. */
int hv_args_parse(int argc, char **argv, hv_opt *opts, size_t nopts, char *err, size_t errlen);
/* Every typed option of a parsed table into its field of config, in table order; 0, or -1 with a message in err
 * naming the first option that is missing or invalid. Lists are malloc'ed (the program frees them). */
int hv_args_config(const hv_opt *opts, size_t nopts, void *config, char *err, size_t errlen);
const char *hv_args_get(const hv_opt *opts, size_t nopts, const char *name);
/* Typed getters: return 0 or -1 (with err) if missing/invalid. */
int hv_args_long(const hv_opt *opts, size_t nopts, const char *name, long lo, long hi, long *out, char *err,
                 size_t errlen);
int hv_args_double(const hv_opt *opts, size_t nopts, const char *name, double lo, double hi, double *out, char *err,
                   size_t errlen);
/* Comma list of non-negative integers, e.g. "0,8,1024"; *out is malloc'ed. */
int hv_args_list(const hv_opt *opts, size_t nopts, const char *name, int64_t **out, size_t *n, char *err,
                 size_t errlen);
#endif
