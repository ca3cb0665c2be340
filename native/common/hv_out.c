#include "hv_out.h"
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

int hv_out_open(hv_out *o, const char *path, int binary) {
    memset(o, 0, sizeof *o);
    o->binary = binary;
    o->f = strcmp(path, "-") == 0 ? stdout : fopen(path, "wb");
    if (!o->f) return -1;
    fprintf(o->f, "#@hpcvar_raw=%d\n#@encoding=%s\n", HV_RAW_FORMAT_VERSION, binary ? "binary" : "csv");
    return 0;
}

void hv_out_meta(hv_out *o, const char *key, const char *fmt, ...) {
    va_list ap;
    fprintf(o->f, "#@%s=", key);
    va_start(ap, fmt);
    vfprintf(o->f, fmt, ap);
    va_end(ap);
    fputc('\n', o->f);
}

void hv_out_columns(hv_out *o, int ncols, const char *const *names) {
    o->ncols = ncols;
    fputs("#@columns=", o->f);
    for (int i = 0; i < ncols; i++) fprintf(o->f, "%s%s", i ? "," : "", names[i]);
    fputc('\n', o->f);
    fflush(o->f);
}

int hv_out_point(hv_out *o, const char *desc, const double *rows, size_t nrows) {
    fprintf(o->f, "#@point %s\n", desc);
    if (o->binary) {
        fprintf(o->f, "#@rows_binary=%zu\n", nrows);
        if (nrows && fwrite(rows, sizeof(double) * (size_t)o->ncols, nrows, o->f) != nrows) return -1;
        fputc('\n', o->f);
    } else {
        for (size_t r = 0; r < nrows; r++) {
            const double *row = rows + r * (size_t)o->ncols;
            for (int c = 0; c < o->ncols; c++) fprintf(o->f, "%s%.17g", c ? "," : "", row[c]);
            fputc('\n', o->f);
        }
    }
    fprintf(o->f, "#@point_end rows=%zu\n", nrows);
    o->points++;
    if (fflush(o->f) != 0) return -1;
    if (o->f != stdout) fsync(fileno(o->f));
    return ferror(o->f) ? -1 : 0;
}

int hv_out_close(hv_out *o) {
    int rc = 0;
    if (o->f && o->f != stdout) rc = fclose(o->f);
    else if (o->f) rc = fflush(o->f);
    o->f = NULL;
    return rc;
}
