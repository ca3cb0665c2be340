/* hv_args: tiny, strict "--key value" / "--key=value" parsing for the native
 * programs. The Python side validates user input; these checks are a second
 * line of defence and name the offending option. Unknown options are errors. */
#ifndef HV_ARGS_H
#define HV_ARGS_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;   /* without the leading "--" */
    const char *value;  /* NULL until set; flags get "1" */
    int is_flag;
    const char *help;
} hv_opt;

/* Returns 0, or -1 with a message in err naming the option. */
int hv_args_parse(int argc, char **argv, hv_opt *opts, size_t nopts, char *err, size_t errlen);
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
