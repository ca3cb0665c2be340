/* OTF2 archives into the native trace's columns (native/sim/otf2_read.c, libhv_otf2.so, built only when
 * libotf2 is found), called from Python through ctypes (hpcvar.traces.otf2_native mirrors the struct and
 * checks its size). */
#ifndef HV_OTF2_READ_H
#define HV_OTF2_READ_H

#include <stdint.h>

enum {
    HV_OTF2_OK = 0,
    HV_OTF2_E_OPEN,       /* the archive or its global definitions cannot be read (msg) */
    HV_OTF2_E_RESOLUTION, /* the timer resolution (err_value) is 0 */
    HV_OTF2_E_READ,       /* the local definitions or the events cannot be read (msg) */
    HV_OTF2_E_TIME,       /* a timestamp beyond int64 ns */
    HV_OTF2_E_NO_PROCESS, /* no location group of type process */
    HV_OTF2_E_MEMORY
};

typedef struct {
    const char *anchor;
    /* set by hv_otf2_read */
    int64_t nrows, ntasks, err_value;
    int32_t err, pad;
    char msg[512];
    /* filled by hv_otf2_fill: nrows entries each, sorted by task then seq, times from the earliest row */
    int32_t *task;
    int64_t *seq;
    int8_t *op;
    int32_t *peer;
    int64_t *bytes;
    int32_t *tag;
    int64_t *req, *t_start, *t_end;
    void *state;
} hv_otf2_config;

int hv_otf2_config_size(void);
/* read the archive; 0 (c->err says whether it could be read) or -1 on no memory; c->state is kept for
 * hv_otf2_fill until hv_otf2_free */
int hv_otf2_read(hv_otf2_config *c);
void hv_otf2_fill(hv_otf2_config *c);
void hv_otf2_free(hv_otf2_config *c);

#endif
