/* SimGrid TIT traces into column arrays (native/sim/tit.c), called from Python through ctypes
 * (hpcvar.traces.tit_native; the struct is mirrored there and its size checked). */
#ifndef HV_TIT_H
#define HV_TIT_H

#include <stdint.h>

/* error kinds; the message of each is written by hpcvar.traces.tit (its E_*, same order) */
enum {
    HV_TIT_OK = 0,
    HV_TIT_E_RANK,        /* token err_tok is not a rank */
    HV_TIT_E_SIZE,        /* token err_tok is not a count */
    HV_TIT_E_COMPUTE,     /* token err_tok: flops that are not a duration at flops_rate */
    HV_TIT_E_SLEEP,       /* token err_tok: seconds that are not a duration */
    HV_TIT_E_MISSING,     /* a rank without an action */
    HV_TIT_E_WAIT_EMPTY,  /* wait (3.19) without a pending request */
    HV_TIT_E_WAIT_NONE,   /* wait SRC DST TAG (err_a, err_b, token 4) without such a pending request */
    HV_TIT_E_BEYOND,      /* rank err_a runs beyond MAX_NS */
    HV_TIT_E_UNKNOWN,     /* unknown action (token 1); err_b: the file's grammar */
    HV_TIT_E_NO_ACTION,   /* no line names a rank */
    HV_TIT_E_PEER,        /* peer or root err_a >= ntasks, first named at err_file:err_line */
    HV_TIT_E_ALLTOALL,    /* an alltoall of err_a bytes per peer sends beyond MAX_BYTES on ntasks ranks */
    HV_TIT_E_NOT_ASCII,   /* a byte >= 0x80 (Python reads such text with the reference) */
    HV_TIT_E_MEMORY,      /* out of memory */
    HV_TIT_E_DIALECT,     /* the line is one grammar's, the file err_b's (chosen at line err_a; 0: --dialect) */
    HV_TIT_E_AMBIGUOUS,   /* send/recv with 3 arguments in a file no line of which tells the grammar */
    HV_TIT_E_NARGS,       /* the action does not take that many arguments in grammar err_a (err_b ranks) */
    HV_TIT_E_TAG,         /* token err_tok is not a tag */
    HV_TIT_E_DATATYPE,    /* token err_tok is not a datatype with a size (err_a: why; err_b: the grammar) */
    HV_TIT_E_BYTES,       /* the count at err_tok times err_a bytes is beyond MAX_SIZE */
    HV_TIT_E_UNSUPPORTED, /* an action hpcvar's traces have no row for */
    HV_TIT_E_TOTAL,       /* the counts from err_tok on, times err_a bytes, add up to more than MAX_SIZE */
};

/* dialects (hpcvar.traces.tit_dialect): 0 auto, else the datatype table of a SimGrid version */
enum { HV_TIT_AUTO = 0, HV_TIT_V319, HV_TIT_V320, HV_TIT_V321, HV_TIT_V323, HV_TIT_V324, HV_TIT_V327 };
/* grammars of a file */
enum { HV_TIT_UNDECIDED = 0, HV_TIT_OLD = 1, HV_TIT_NEW = 2 };

typedef struct {
    int64_t nfiles;
    const char *const *buf; /* the files' bytes, in order */
    const int64_t *len;
    double flops_rate;
    int64_t max_digits; /* Python's int() digit limit (sys.get_int_max_str_digits()), 0: none */
    int64_t dialect;    /* HV_TIT_AUTO or a version's table */
    /* set by hv_tit_parse */
    int64_t nrows, ntasks;
    int32_t *grammars; /* nfiles entries (the caller's): each file's grammar */
    int32_t err, err_tok;
    int64_t err_file, err_line, err_start, err_end; /* the failing line: file index, number, bytes */
    int64_t err_a, err_b;
    /* filled by hv_tit_fill: nrows entries each */
    int32_t *task;
    int64_t *seq;
    int8_t *op;
    int32_t *peer;
    int64_t *bytes;
    int32_t *tag;
    int64_t *req, *t;
    void *state;
} hv_tit_config;

int hv_tit_config_size(void);
/* parse every file; 0 (c->err says whether the trace is good) or -1 on no memory; c->state is kept for
 * hv_tit_fill until hv_tit_free */
int hv_tit_parse(hv_tit_config *c);
void hv_tit_fill(hv_tit_config *c);
void hv_tit_free(hv_tit_config *c);

#endif
