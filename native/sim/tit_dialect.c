/* The dialects of SimGrid's TIT traces (see tit_dialect.h and hpcvar.traces.tit_dialect, the reference). */
#include "tit_dialect.h"

#include "hv_ops.h"
#include "tit.h"

#include <string.h>

#define OLD HV_TIT_OLD
#define NEW HV_TIT_NEW
#define BOTH (HV_TIT_OLD | HV_TIT_NEW)

#define A(name, ...) {name, (int)sizeof(name) - 1, __VA_ARGS__}
static const tit_action ACTIONS[] = {
    A("init", K_INIT, BOTH, OP_INIT, 0, 1, 0, 0),
    A("finalize", K_FINALIZE, BOTH, OP_FINALIZE, 0, 0, 0, 0),
    A("comm_size", K_IGNORED, BOTH, -1, 0, -1, 0, 0),
    A("comm_split", K_IGNORED, BOTH, -1, 0, -1, 0, 0),
    A("comm_dup", K_IGNORED, BOTH, -1, 0, -1, 0, 0),
    A("compute", K_COMPUTE, BOTH, -1, 1, 1, 0, 0),
    A("send", K_P2P, BOTH, OP_SEND, 0, 0, 0, 0),
    A("recv", K_P2P, BOTH, OP_RECV, 0, 0, 0, 0),
    A("Isend", K_P2P, OLD, OP_ISEND, 0, 0, 0, 0),
    A("Irecv", K_P2P, OLD, OP_IRECV, 0, 0, 0, 0),
    A("isend", K_P2P, NEW, OP_ISEND, 0, 0, 0, 0),
    A("irecv", K_P2P, NEW, OP_IRECV, 0, 0, 0, 0),
    A("wait", K_WAIT, BOTH, OP_WAIT, 0, 0, 0, 0),
    A("test", K_TEST, BOTH, -1, 0, 0, 0, 0),
    A("waitAll", K_WAITALL, OLD, OP_WAIT, 0, 1, 0, 0),
    A("waitall", K_WAITALL, NEW, OP_WAIT, 0, 1, 0, 0),
    A("barrier", K_COLL, BOTH, OP_BARRIER, 0, 0, 0, 0),
    A("bcast", K_COLL, BOTH, OP_BCAST, 1, 3, 0, 0),
    A("reduce", K_COLL, BOTH, OP_REDUCE, 2, 4, 0, 0),
    A("gather", K_COLL, BOTH, OP_GATHER, 2, 5, 0, 0),
    A("scatter", K_COLL, BOTH, OP_SCATTER, 2, 5, 0, 0),
    A("allReduce", K_COLL, OLD, OP_ALLREDUCE, 2, 3, 0, 0),
    A("allToAll", K_COLL, OLD, OP_ALLTOALL, 2, 4, 0, 0),
    A("allGather", K_COLL, OLD, OP_ALLGATHER, 2, 4, 0, 0),
    A("allreduce", K_COLL, NEW, OP_ALLREDUCE, 2, 3, 0, 0),
    A("alltoall", K_COLL, NEW, OP_ALLTOALL, 2, 4, 0, 0),
    A("allgather", K_COLL, NEW, OP_ALLGATHER, 2, 4, 0, 0),
    A("sleep", K_SLEEP, NEW, -1, 1, 1, 0, 0),
    A("location", K_IGNORED, NEW, -1, 2, 2, 0, 0),
    A("sendRecv", K_SENDRECV, NEW, OP_SENDRECV, 4, 6, 0, 0),
    A("gatherV", K_VCOLL, OLD, OP_GATHERV, 1, 4, 1, 1),
    A("scatterV", K_VCOLL, OLD, OP_SCATTERV, 1, 4, 1, 1),
    A("allGatherV", K_VCOLL, OLD, OP_ALLGATHERV, 1, 3, 1, 1),
    A("allToAllV", K_VCOLL, OLD, OP_ALLTOALLV, 2, 4, 2, 2),
    A("reduceScatter", K_VCOLL, OLD, OP_REDUCESCATTER, 1, 2, 1, 1),
    A("gatherv", K_VCOLL, NEW, OP_GATHERV, 1, 4, 1, 1),
    A("scatterv", K_VCOLL, NEW, OP_SCATTERV, 1, 4, 1, 1),
    A("allgatherv", K_VCOLL, NEW, OP_ALLGATHERV, 1, 3, 1, 1),
    A("alltoallv", K_VCOLL, NEW, OP_ALLTOALLV, 2, 4, 2, 2),
    A("reducescatter", K_VCOLL, NEW, OP_REDUCESCATTER, 1, 2, 1, 1),
    A("scan", K_UNSUPPORTED, NEW, -1, 0, -1, 0, 0),
    A("exscan", K_UNSUPPORTED, NEW, -1, 0, -1, 0, 0),
};
#define NACTIONS ((int)(sizeof ACTIONS / sizeof *ACTIONS))

/* names by a hash of their length and first and last bytes, open addressing (-1: empty) */
#define NSLOTS 128
static int8_t slots[NSLOTS];

static unsigned slot_of(const char *s, int64_t n) {
    return ((unsigned)n * 7u + (unsigned char)s[0] * 3u + (unsigned char)s[n - 1]) & (NSLOTS - 1);
}

void tit_dialect_init(void) {
    memset(slots, -1, sizeof slots);
    for (int i = 0; i < NACTIONS; i++) {
        unsigned j = slot_of(ACTIONS[i].name, ACTIONS[i].len);
        while (slots[j] >= 0) j = (j + 1) & (NSLOTS - 1);
        slots[j] = (int8_t)i;
    }
}

const tit_action *tit_action_of(const char *s, int64_t n) {
    if (n <= 0) return NULL;
    for (unsigned j = slot_of(s, n); slots[j] >= 0; j = (j + 1) & (NSLOTS - 1)) {
        const tit_action *a = &ACTIONS[slots[j]];
        if (a->len == n && !memcmp(a->name, s, (size_t)n)) return a;
    }
    return NULL;
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
