#include "hv_args.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hv_opt *find(hv_opt *opts, size_t n, const char *name, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) return &opts[i];
    return NULL;
}

int hv_args_parse(int argc, char **argv, hv_opt *opts, size_t nopts, char *err, size_t errlen) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (options are --name value)", a);
            return -1;
        }
        a += 2;
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        hv_opt *o = find(opts, nopts, a, len);
        if (!o) {
            snprintf(err, errlen, "unknown option '--%.*s'", (int)len, a);
            return -1;
        }
        if (o->is_flag) {
            o->value = eq ? eq + 1 : "1";
        } else if (eq) {
            o->value = eq + 1;
        } else if (i + 1 < argc) {
            o->value = argv[++i];
        } else {
            snprintf(err, errlen, "option '--%s' needs a value", o->name);
            return -1;
        }
    }
    return 0;
}

const char *hv_args_get(const hv_opt *opts, size_t nopts, const char *name) {
    for (size_t i = 0; i < nopts; i++)
        if (strcmp(opts[i].name, name) == 0) return opts[i].value;
    return NULL;
}

int hv_args_long(const hv_opt *opts, size_t nopts, const char *name, long lo, long hi, long *out, char *err,
                 size_t errlen) {
    const char *v = hv_args_get(opts, nopts, name);
    if (!v) {
        snprintf(err, errlen, "option '--%s' is required", name);
        return -1;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        snprintf(err, errlen, "option '--%s': '%s' is not an integer in [%ld, %ld]", name, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int hv_args_double(const hv_opt *opts, size_t nopts, const char *name, double lo, double hi, double *out, char *err,
                   size_t errlen) {
    const char *v = hv_args_get(opts, nopts, name);
    if (!v) {
        snprintf(err, errlen, "option '--%s' is required", name);
        return -1;
    }
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi)) {
        snprintf(err, errlen, "option '--%s': '%s' is not a number in [%g, %g]", name, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int hv_args_list(const hv_opt *opts, size_t nopts, const char *name, int64_t **out, size_t *n, char *err,
                 size_t errlen) {
    const char *v = hv_args_get(opts, nopts, name);
    if (!v || !*v) {
        snprintf(err, errlen, "option '--%s' is required", name);
        return -1;
    }
    size_t cap = 1;
    for (const char *p = v; *p; p++) cap += *p == ',';
    int64_t *xs = malloc(cap * sizeof *xs);
    if (!xs) {
        snprintf(err, errlen, "out of memory parsing '--%s'", name);
        return -1;
    }
    size_t k = 0;
    const char *p = v;
    while (*p) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (errno || end == p || x < 0 || (*end && *end != ',')) {
            snprintf(err, errlen, "option '--%s': '%s' is not a comma list of non-negative integers", name, v);
            free(xs);
            return -1;
        }
        xs[k++] = x;
        p = *end ? end + 1 : end;
    }
    *out = xs;
    *n = k;
    return 0;
}

/* One typed option into its field (its presence checked by the caller). */
static int read_one(const hv_opt *opts, size_t nopts, const hv_opt *o, char *base, char *err, size_t errlen) {
    switch (o->kind) {
    case HV_ARG_LONG:
        return hv_args_long(opts, nopts, o->name, o->ilo, o->ihi, (long *)(base + o->offset), err, errlen);
    case HV_ARG_DOUBLE:
        return hv_args_double(opts, nopts, o->name, o->dlo, o->dhi, (double *)(base + o->offset), err, errlen);
    case HV_ARG_LIST:
        return hv_args_list(opts, nopts, o->name, (int64_t **)(base + o->offset), (size_t *)(base + o->count_offset),
                            err, errlen);
    case HV_ARG_STRING: *(const char **)(base + o->offset) = o->value; return 0;
    case HV_ARG_FLAG: *(int *)(base + o->offset) = strcmp(o->value, "0") != 0; return 0;
    case HV_ARG_NONE: break;
    }
    return 0;
}

int hv_args_config(const hv_opt *opts, size_t nopts, void *config, char *err, size_t errlen) {
    char *base = config;
    for (size_t i = 0; i < nopts; i++) {
        const hv_opt *o = &opts[i];
        if (o->kind == HV_ARG_NONE || (o->optional && !o->value)) continue;
        if (!o->value && o->kind == HV_ARG_STRING) {
            snprintf(err, errlen, "option '--%s' is required", o->name);
            return -1;
        }
        if (read_one(opts, nopts, o, base, err, errlen) != 0) return -1;
    }
    return 0;
}
