/* The dialects of SimGrid's TIT traces (see tit_dialect.h and hpcvar.traces.tit_dialect, the reference). */
#include "tit_dialect.h"

#include "hv_ops.h"
#include "tit.h"

#include <string.h>

#define OLD HV_TIT_OLD
#define NEW HV_TIT_NEW
#define BOTH (HV_TIT_OLD | HV_TIT_NEW)

static const tit_action ACTIONS[] = {
    {"init", K_INIT, BOTH, OP_INIT, 0, 1, 0, 0},
    {"finalize", K_FINALIZE, BOTH, OP_FINALIZE, 0, 0, 0, 0},
    {"comm_size", K_IGNORED, BOTH, -1, 0, -1, 0, 0},
    {"comm_split", K_IGNORED, BOTH, -1, 0, -1, 0, 0},
    {"comm_dup", K_IGNORED, BOTH, -1, 0, -1, 0, 0},
    {"compute", K_COMPUTE, BOTH, -1, 1, 1, 0, 0},
    {"send", K_P2P, BOTH, OP_SEND, 0, 0, 0, 0},
    {"recv", K_P2P, BOTH, OP_RECV, 0, 0, 0, 0},
    {"Isend", K_P2P, OLD, OP_ISEND, 0, 0, 0, 0},
    {"Irecv", K_P2P, OLD, OP_IRECV, 0, 0, 0, 0},
    {"isend", K_P2P, NEW, OP_ISEND, 0, 0, 0, 0},
    {"irecv", K_P2P, NEW, OP_IRECV, 0, 0, 0, 0},
    {"wait", K_WAIT, BOTH, OP_WAIT, 0, 0, 0, 0},
    {"test", K_TEST, BOTH, -1, 0, 0, 0, 0},
    {"waitAll", K_WAITALL, OLD, OP_WAIT, 0, 1, 0, 0},
    {"waitall", K_WAITALL, NEW, OP_WAIT, 0, 1, 0, 0},
    {"barrier", K_COLL, BOTH, OP_BARRIER, 0, 0, 0, 0},
    {"bcast", K_COLL, BOTH, OP_BCAST, 1, 3, 0, 0},
    {"reduce", K_COLL, BOTH, OP_REDUCE, 2, 4, 0, 0},
    {"gather", K_COLL, BOTH, OP_GATHER, 2, 5, 0, 0},
    {"scatter", K_COLL, BOTH, OP_SCATTER, 2, 5, 0, 0},
    {"allReduce", K_COLL, OLD, OP_ALLREDUCE, 2, 3, 0, 0},
    {"allToAll", K_COLL, OLD, OP_ALLTOALL, 2, 4, 0, 0},
    {"allGather", K_COLL, OLD, OP_ALLGATHER, 2, 4, 0, 0},
    {"allreduce", K_COLL, NEW, OP_ALLREDUCE, 2, 3, 0, 0},
    {"alltoall", K_COLL, NEW, OP_ALLTOALL, 2, 4, 0, 0},
    {"allgather", K_COLL, NEW, OP_ALLGATHER, 2, 4, 0, 0},
    {"sleep", K_SLEEP, NEW, -1, 1, 1, 0, 0},
    {"location", K_IGNORED, NEW, -1, 2, 2, 0, 0},
    {"sendRecv", K_SENDRECV, NEW, OP_SENDRECV, 4, 6, 0, 0},
    {"gatherV", K_VCOLL, OLD, OP_GATHERV, 1, 4, 1, 1},
    {"scatterV", K_VCOLL, OLD, OP_SCATTERV, 1, 4, 1, 1},
    {"allGatherV", K_VCOLL, OLD, OP_ALLGATHERV, 1, 3, 1, 1},
    {"allToAllV", K_VCOLL, OLD, OP_ALLTOALLV, 2, 4, 2, 2},
    {"reduceScatter", K_VCOLL, OLD, OP_REDUCESCATTER, 1, 2, 1, 1},
    {"gatherv", K_VCOLL, NEW, OP_GATHERV, 1, 4, 1, 1},
    {"scatterv", K_VCOLL, NEW, OP_SCATTERV, 1, 4, 1, 1},
    {"allgatherv", K_VCOLL, NEW, OP_ALLGATHERV, 1, 3, 1, 1},
    {"alltoallv", K_VCOLL, NEW, OP_ALLTOALLV, 2, 4, 2, 2},
    {"reducescatter", K_VCOLL, NEW, OP_REDUCESCATTER, 1, 2, 1, 1},
    {"scan", K_UNSUPPORTED, NEW, -1, 0, -1, 0, 0},
    {"exscan", K_UNSUPPORTED, NEW, -1, 0, -1, 0, 0},
};
#define NACTIONS ((int)(sizeof ACTIONS / sizeof *ACTIONS))

const tit_action *tit_action_of(const char *s, int64_t n) {
    for (int i = 0; i < NACTIONS; i++)
        if (ACTIONS[i].name[0] == s[0] && (int64_t)strlen(ACTIONS[i].name) == n &&
            !memcmp(ACTIONS[i].name, s, (size_t)n))
            return &ACTIONS[i];
    return NULL;
}

int tit_classify(const tit_action *a, int64_t nargs) {
    if (!a) return CL_UNKNOWN;
    if (a->grammars != BOTH) return a->grammars;
    if (a->kind == K_P2P) return nargs == 2 ? CL_OLD : nargs == 3 ? CL_AMBIGUOUS : nargs == 4 ? CL_NEW : CL_NEUTRAL;
    if (a->kind == K_WAIT || a->kind == K_TEST) return nargs == 0 ? CL_OLD : nargs == 3 ? CL_NEW : CL_NEUTRAL;
    return CL_NEUTRAL;
}

int tit_nargs_ok(const tit_action *a, int grammar, int64_t nargs, int64_t n) {
    int64_t lo = a->lo + a->lo_n * n, hi = a->hi + a->hi_n * n;
    if (a->kind == K_P2P) {
        lo = grammar == NEW ? 3 : 2;
        hi = grammar == OLD ? 3 : 4;
    } else if (a->kind == K_WAIT || a->kind == K_TEST) {
        lo = hi = grammar == NEW ? 3 : 0;
    }
    return nargs >= lo && (hi < 0 || nargs <= hi);
}

/* ---- datatypes: id -> size in bytes (x86-64); 0: no size; -1 (AUTO only): the versions disagree ---------- */

#define BASE \
    8, 4, 1, 2, 8, 4, 1, 8, 1, 1, 2, 4, 8, 8, 16, 4, 1, 1, 2, 4, 8, 1, 2, 4, 8, 8, 16, 32, 8, 8, 8, 16, 16, 8, 8, 8, \
        16, 16, 4, 4
#define INTEGERS 4, 2, 4, 8, 16, 32
static const int8_t T319[] = {8, 4, 1, 2, 8, 4, 1};
static const int8_t T320[] = {BASE, 4, 8, 0, 0, 0, INTEGERS, 0, 0, 1, 8};
static const int8_t T321[] = {BASE, 8, 16, 0, 0, 0, INTEGERS, 0, 0, 1, 8};
static const int8_t T323[] = {BASE, 8, 16, 0, 0, 0, INTEGERS, 0, 0, 1, 8, 8};
static const int8_t T324[] = {BASE, 8, 16, 8, 16, 16, INTEGERS, 0, 0, 1, 8, 8};
static const int8_t T327[] = {BASE, 8, 16, 8, 16, 16, INTEGERS, 1, 8, 16, 32, 0, 0, 1, 8, 8};
static const int8_t TAUTO[] = {BASE, -1, -1, -1, -1, -1, INTEGERS, -1, -1, -1, -1, -1, 0, 1, 8, 8};

int tit_datatype_size(const char *s, int64_t n, int64_t dialect, int grammar) {
    static const int8_t *const TABLES[] = {TAUTO, T319, T320, T321, T323, T324, T327};
    static const int LENS[] = {sizeof TAUTO, sizeof T319, sizeof T320, sizeof T321,
                               sizeof T323,  sizeof T324, sizeof T327};
    if (n == 2 && s[0] == '-' && s[1] == '1') return -2;
    if (n < 1 || n > 2 || (n == 2 && s[0] == '0')) return -1;
    int id = 0;
    for (int64_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        id = id * 10 + (s[i] - '0');
    }
    int t = dialect == HV_TIT_AUTO ? (grammar == OLD ? HV_TIT_V319 : HV_TIT_AUTO) : (int)dialect;
    if (id >= LENS[t]) return -1;
    int size = TABLES[t][id];
    return size < 0 ? -3 : size == 0 ? -4 : size;
}
