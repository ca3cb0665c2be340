/* hv_out: the self-describing raw output of every native program.
 *
 * Layout (docs/results-format.md, "raw files"):
 *   #@hpcvar_raw=1                       format version (HV_RAW_FORMAT_VERSION)
 *   #@key=value                          metadata header (any number)
 *   #@columns=name1,name2,...            column names (units in the names)
 *   #@point key=value key=value ...      start of one measured point
 *   rows: CSV text (one row per line) or, in binary mode, one line
 *   #@rows_binary=N followed by N*ncols little-endian float64 values
 *   #@point_end rows=N                   the point is complete
 * Every point is flushed to disk as soon as it is complete (never inside a
 * timed loop), so an interrupted run keeps every finished point; a reader
 * ignores a trailing point without its #@point_end line. */
#ifndef HV_OUT_H
#define HV_OUT_H
#include <stddef.h>
#include <stdio.h>

/* The raw format's version, the first line of every raw file. Bump it with any change a reader must know
 * about, together with RAW_FORMAT_VERSION in src/hpcvar/results/rawio.py (its version history), which
 * refuses versions it does not read (tests/unit/test_rawio_version.py checks that the two agree). */
#define HV_RAW_FORMAT_VERSION 1

typedef struct {
    FILE *f;
    int binary;
    int ncols;
    long points;
} hv_out;

/* Opens path for writing ("-" is stdout). Returns 0 or -1 (errno set). */
int hv_out_open(hv_out *o, const char *path, int binary);
void hv_out_meta(hv_out *o, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void hv_out_columns(hv_out *o, int ncols, const char *const *names);
/* Writes one complete point: desc is "key=value key=value" (no newline);
 * rows holds nrows*ncols doubles, row-major. Flushes and fsyncs. */
int hv_out_point(hv_out *o, const char *desc, const double *rows, size_t nrows);
int hv_out_close(hv_out *o);
#endif
