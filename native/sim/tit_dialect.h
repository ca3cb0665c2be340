/* The two dialects of SimGrid's TIT traces for the C parser (native/sim/tit.c): the actions, how a line chooses
 * a file's grammar, the arguments each action takes, the datatype tables. The twin of hpcvar.traces.tit_dialect,
 * which documents them; tests/unit/test_tit_native.py compares the parsers on random lines of every kind. */
#ifndef HV_TIT_DIALECT_H
#define HV_TIT_DIALECT_H

#include "tit.h"

#include <stdint.h>

/* action kinds (hpcvar.traces.tit_dialect.K_*) */
enum {
    K_INIT,
    K_FINALIZE,
    K_COMPUTE,
    K_SLEEP,
    K_P2P,
    K_WAIT,
    K_WAITALL,
    K_TEST,
    K_COLL,
    K_SENDRECV,
    K_IGNORED,
    K_UNSUPPORTED,
    K_VCOLL
};
#define OP_REDUCESCATTER (-2) /* a K_VCOLL read as a reduce then a scatterv */
/* classes of a line for the choice of grammar */
enum { CL_NEUTRAL = 0, CL_OLD = 1, CL_NEW = 2, CL_AMBIGUOUS = 3, CL_UNKNOWN = 4 };

typedef struct {
    const char *name;
    int len;                /* strlen(name) */
    int kind, grammars, op; /* grammars: a mask of HV_TIT_OLD | HV_TIT_NEW; op: an OP_* code or -1 */
    int lo, hi;             /* arguments (not for K_P2P, K_WAIT, K_TEST); hi -1: any number */
    int lo_n, hi_n;         /* K_VCOLL: lo + lo_n * N to hi + hi_n * N arguments for N ranks */
} tit_action;

/* fill the table of names (once per parse, before tit_action_of; the same values every time) */
void tit_dialect_init(void);
/* the action of a name (case-sensitive), NULL if none */
const tit_action *tit_action_of(const char *s, int64_t n);
/* the class of a line: its action (NULL: unknown) and number of arguments */
static inline int tit_classify(const tit_action *a, int64_t nargs) {
    if (!a) return CL_UNKNOWN;
    if (a->grammars != (HV_TIT_OLD | HV_TIT_NEW)) return a->grammars;
    if (a->kind == K_P2P) return nargs == 2 ? CL_OLD : nargs == 3 ? CL_AMBIGUOUS : nargs == 4 ? CL_NEW : CL_NEUTRAL;
    if (a->kind == K_WAIT || a->kind == K_TEST) return nargs == 0 ? CL_OLD : nargs == 3 ? CL_NEW : CL_NEUTRAL;
    return CL_NEUTRAL;
}

/* whether the action takes nargs arguments in the grammar (v-collectives: with a world of n ranks) */
static inline int tit_nargs_ok(const tit_action *a, int grammar, int64_t nargs, int64_t n) {
    int64_t lo = a->lo + a->lo_n * n, hi = a->hi + a->hi_n * n;
    if (a->kind == K_P2P) {
        lo = grammar == HV_TIT_NEW ? 3 : 2;
        hi = grammar == HV_TIT_OLD ? 3 : 4;
    } else if (a->kind == K_WAIT || a->kind == K_TEST) {
        lo = hi = grammar == HV_TIT_NEW ? 3 : 0;
    }
    return nargs >= lo && (hi < 0 || nargs <= hi);
}
/* the size in bytes of the datatype id token s[0..n) in the dialect and grammar, or -(error) with the errors
 * of hpcvar.traces.tit_dialect (DT_UNKNOWN 1, DT_DERIVED 2, DT_AMBIGUOUS 3, DT_NOSIZE 4) */
int tit_datatype_size(const char *s, int64_t n, int64_t dialect, int grammar);

#endif
