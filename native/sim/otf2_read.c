/* OTF2 archives (Score-P) into the native trace's columns: the compiled twin of the Python reference
 * hpcvar.traces.otf2_import (read through the otf2 package), on libotf2's reader API. Every location
 * group of type process is a task (definition order); an MPI call is the span between the Enter and Leave
 * of a region named MPI_*, and the MPI records inside it say what it did (see otf2_import.py). Rows are
 * kept in event order; hv_otf2_fill writes them sorted by task with an init row first and a finalize row
 * last where the trace lacks them, times from the earliest row. */
#include "hv_ops.h"
#include "otf2_read.h"

#include <otf2/otf2.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a hash map (uint64, uint64) -> int64, open addressing --------------------------------------- */

typedef struct {
    uint64_t *k; /* 2 per slot */
    int64_t *v;
    uint8_t *used;
    int64_t cap, n;
} umap;

static uint64_t uhash(uint64_t a, uint64_t b) {
    uint64_t h = (a + 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    h ^= (b + (h >> 29)) * 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

static int umap_grow(umap *m) {
    int64_t cap = m->cap ? 2 * m->cap : 256;
    umap n = {malloc((size_t)cap * 16), malloc((size_t)cap * 8), calloc((size_t)cap, 1), cap, 0};
    if (!n.k || !n.v || !n.used) return free(n.k), free(n.v), free(n.used), -1;
    for (int64_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        uint64_t j = uhash(m->k[2 * i], m->k[2 * i + 1]) & (uint64_t)(cap - 1);
        while (n.used[j]) j = (j + 1) & (uint64_t)(cap - 1);
        n.k[2 * j] = m->k[2 * i], n.k[2 * j + 1] = m->k[2 * i + 1], n.v[j] = m->v[i], n.used[j] = 1, n.n++;
    }
    free(m->k), free(m->v), free(m->used);
    *m = n;
    return 0;
}

static int64_t umap_slot(const umap *m, uint64_t a, uint64_t b) {
    if (!m->cap) return -1;
    uint64_t j = uhash(a, b) & (uint64_t)(m->cap - 1);
    while (m->used[j] && (m->k[2 * j] != a || m->k[2 * j + 1] != b)) j = (j + 1) & (uint64_t)(m->cap - 1);
    return (int64_t)j;
}

static int64_t umap_get(const umap *m, uint64_t a, uint64_t b, int64_t dflt) {
    int64_t j = umap_slot(m, a, b);
    return j >= 0 && m->used[j] ? m->v[j] : dflt;
}

static int umap_put(umap *m, uint64_t a, uint64_t b, int64_t v) {
    if (2 * (m->n + 1) > m->cap && umap_grow(m)) return -1;
    int64_t j = umap_slot(m, a, b);
    if (!m->used[j]) m->used[j] = 1, m->n++, m->k[2 * j] = a, m->k[2 * j + 1] = b;
    m->v[j] = v;
    return 0;
}

/* remove (a, b) and return its value, or -1 (backward-shift deletion keeps probe chains whole) */
static int64_t umap_pop(umap *m, uint64_t a, uint64_t b) {
    int64_t j = umap_slot(m, a, b);
    if (j < 0 || !m->used[j]) return -1;
    int64_t v = m->v[j];
    uint64_t mask = (uint64_t)(m->cap - 1), i = (uint64_t)j, k = (i + 1) & mask;
    for (; m->used[k]; k = (k + 1) & mask) {
        uint64_t home = uhash(m->k[2 * k], m->k[2 * k + 1]) & mask;
        if (((k - home) & mask) < ((k - i) & mask)) continue; /* its home lies between i and k: stays */
        m->k[2 * i] = m->k[2 * k], m->k[2 * i + 1] = m->k[2 * k + 1], m->v[i] = m->v[k];
        i = k;
    }
    m->used[i] = 0, m->n--;
    return v;
}

static void umap_free(umap *m) { free(m->k), free(m->v), free(m->used); }

/* ---- growable arrays ----------------------------------------------------------------------------- */

#define VEC(T) \
    struct { \
        T *a; \
        int64_t n, cap; \
    }

static int vgrow(void **a, int64_t *cap, int64_t n, size_t size) {
    if (n < *cap) return 0;
    int64_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(*a, (size_t)c * size);
    if (!p) return -1;
    *a = p, *cap = c;
    return 0;
}

#define VPUSH(v, x) (vgrow((void **)&(v).a, &(v).cap, (v).n, sizeof *(v).a) ? -1 : ((v).a[(v).n++] = (x), 0))

/* ---- definitions ---------------------------------------------------------------------------------- */

enum { R_OTHER = 0, R_MPI, R_INIT, R_FINALIZE, R_SENDRECV }; /* region kinds */

typedef struct {
    int type;
    uint8_t paradigm;
    int64_t nmem, off; /* members: location refs (-1: not a location) at mem[off .. off + nmem) */
} group_def;

typedef struct {
    uint64_t ref, name;
} region_def;

/* a row inside an open MPI call, written at its Leave */
typedef struct {
    int8_t op, keyed;
    int64_t peer, bytes, tag, req;
    uint64_t key;
} call_row;

typedef struct {
    int open, kind;
    uint64_t region;
    int64_t t;
    VEC(call_row) rows;
    int64_t count, first_t, last_t; /* rows written, first row's start, last row's end */
    int8_t first_op, last_op;
} task_st;

typedef struct {
    hv_otf2_config *c;
    int have_clock;
    uint64_t res, off;
    umap strings, regions, groups, comms, loc_rank, group_rank, pending;
    VEC(char *) strs;
    VEC(region_def) region_defs;
    VEC(group_def) group_defs;
    VEC(int64_t) mem;
    VEC(uint64_t) locs;
    VEC(uint64_t) loc_group;
    int64_t last_comm_locations[256]; /* per paradigm: the group index of the latest COMM_LOCATIONS group */
    int64_t ntasks;
    task_st *tasks;
    VEC(int32_t) r_task;
    VEC(int8_t) r_op;
    VEC(int64_t) r_peer;
    VEC(int64_t) r_bytes;
    VEC(int64_t) r_tag;
    VEC(int64_t) r_req;
    VEC(int64_t) r_ts;
    VEC(int64_t) r_te;
    VEC(int64_t) r_seq;
    int64_t t0;
} otf2_st;

static OTF2_CallbackCode fail(otf2_st *S, int err, const char *fmt, ...) {
    if (!S->c->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(S->c->msg, sizeof S->c->msg, fmt, ap);
        va_end(ap);
        S->c->err = err;
    }
    return OTF2_CALLBACK_INTERRUPT;
}

static OTF2_CallbackCode nomem(otf2_st *S) { return fail(S, HV_OTF2_E_MEMORY, "out of memory"); }

static OTF2_CallbackCode def_clock(void *u, uint64_t res, uint64_t off, uint64_t len, uint64_t real) {
    otf2_st *S = u;
    (void)len, (void)real;
    S->have_clock = 1, S->res = res, S->off = off;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_string(void *u, OTF2_StringRef self, const char *s) {
    otf2_st *S = u;
    char *d = strdup(s ? s : "");
    if (!d || VPUSH(S->strs, d) || umap_put(&S->strings, self, 0, S->strs.n - 1)) return free(d), nomem(S);
    return OTF2_CALLBACK_SUCCESS;
}

static const char *string_of(const otf2_st *S, uint64_t ref) {
    int64_t i = umap_get(&S->strings, ref, 0, -1);
    return i < 0 ? NULL : S->strs.a[i];
}

static OTF2_CallbackCode def_region(void *u, OTF2_RegionRef self, OTF2_StringRef name, OTF2_StringRef canon,
                                    OTF2_StringRef desc, OTF2_RegionRole role, OTF2_Paradigm par, OTF2_RegionFlag fl,
                                    OTF2_StringRef file, uint32_t b, uint32_t e) {
    otf2_st *S = u;
    (void)canon, (void)desc, (void)role, (void)par, (void)fl, (void)file, (void)b, (void)e;
    region_def d = {self, name};
    if (VPUSH(S->region_defs, d) || umap_put(&S->regions, self, 0, S->region_defs.n - 1)) return nomem(S);
    return OTF2_CALLBACK_SUCCESS;
}

/* location groups of type process are the tasks, numbered in definition order */
static OTF2_CallbackCode def_location_group(void *u, OTF2_LocationGroupRef self, OTF2_StringRef name,
                                            OTF2_LocationGroupType type, OTF2_SystemTreeNodeRef parent,
                                            OTF2_LocationGroupRef creator) {
    otf2_st *S = u;
    (void)name, (void)parent, (void)creator;
    if (type != OTF2_LOCATION_GROUP_TYPE_PROCESS) return OTF2_CALLBACK_SUCCESS;
    if (umap_put(&S->group_rank, self, 0, S->ntasks++)) return nomem(S);
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_location(void *u, OTF2_LocationRef self, OTF2_StringRef name, OTF2_LocationType type,
                                      uint64_t nevents, OTF2_LocationGroupRef group) {
    otf2_st *S = u;
    (void)name, (void)type, (void)nevents;
    if (VPUSH(S->locs, self) || VPUSH(S->loc_group, group)) return nomem(S);
    return OTF2_CALLBACK_SUCCESS;
}

static int push_members(otf2_st *S, int64_t n, const uint64_t *m, int as_locations) {
    for (int64_t i = 0; i < n; i++)
        if (VPUSH(S->mem, as_locations ? (int64_t)m[i] : -1)) return -1;
    return 0;
}

/* a communicator group's members are ranks of the latest COMM_LOCATIONS group of its paradigm */
static OTF2_CallbackCode comm_members(otf2_st *S, OTF2_StringRef name, OTF2_GroupRef self, uint8_t par, int64_t n,
                                      const uint64_t *m) {
    int64_t p = S->last_comm_locations[par];
    if (n > 0 && p < 0)
        return fail(S, HV_OTF2_E_OPEN, "Missing referenced group for sup-group: '%s' #%u",
                    string_of(S, name) ? string_of(S, name) : "", (unsigned)self);
    for (int64_t i = 0; i < n; i++) {
        const group_def *g = &S->group_defs.a[p];
        if (m[i] >= (uint64_t)g->nmem)
            return fail(S, HV_OTF2_E_OPEN, "a communicator group names rank %llu of %lld", (unsigned long long)m[i],
                        (long long)g->nmem);
        int64_t loc = S->mem.a[g->off + (int64_t)m[i]];
        if (VPUSH(S->mem, loc)) return nomem(S);
    }
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_group(void *u, OTF2_GroupRef self, OTF2_StringRef name, OTF2_GroupType type,
                                   OTF2_Paradigm par, OTF2_GroupFlag flags, uint32_t n, const uint64_t *m) {
    otf2_st *S = u;
    (void)flags;
    group_def g = {type, par, n, S->mem.n};
    int r = 0;
    if (type == OTF2_GROUP_TYPE_LOCATIONS || type == OTF2_GROUP_TYPE_COMM_LOCATIONS) r = push_members(S, n, m, 1);
    else if (type == OTF2_GROUP_TYPE_REGIONS || type == OTF2_GROUP_TYPE_METRIC) r = push_members(S, n, m, 0);
    else if (type == OTF2_GROUP_TYPE_COMM_GROUP) {
        if (comm_members(S, name, self, par, n, m) != OTF2_CALLBACK_SUCCESS) return OTF2_CALLBACK_INTERRUPT;
    } else if (type != OTF2_GROUP_TYPE_COMM_SELF || n > 0)
        return fail(S, HV_OTF2_E_OPEN, "Unknown group_type or members: %d", (int)type);
    if (r || VPUSH(S->group_defs, g) || umap_put(&S->groups, self, 0, S->group_defs.n - 1)) return nomem(S);
    if (type == OTF2_GROUP_TYPE_COMM_LOCATIONS) S->last_comm_locations[par] = S->group_defs.n - 1;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode def_comm(void *u, OTF2_CommRef self, OTF2_StringRef name, OTF2_GroupRef group,
                                  OTF2_CommRef parent, OTF2_CommFlag flags) {
    otf2_st *S = u;
    (void)name, (void)parent, (void)flags;
    if (umap_put(&S->comms, self, 0, group)) return nomem(S);
    return OTF2_CALLBACK_SUCCESS;
}

/* the task of a peer given as a rank of a communicator (-1: none; a communicator without members: the
 * rank itself), as otf2_import's world() */
static int64_t world(const otf2_st *S, OTF2_CommRef comm, uint32_t r) {
    int64_t group = umap_get(&S->comms, comm, 0, -1);
    if (group < 0) return -1;
    int64_t gi = umap_get(&S->groups, (uint64_t)group, 0, -1);
    if (gi < 0 || S->group_defs.a[gi].nmem == 0) return r;
    const group_def *g = &S->group_defs.a[gi];
    if (r >= g->nmem || S->mem.a[g->off + r] < 0) return -1;
    return umap_get(&S->loc_rank, (uint64_t)S->mem.a[g->off + r], 0, -1);
}

/* ---- events ----------------------------------------------------------------------------------------- */

#define MAX_ABS_NS 4611686018427387904.0 /* 2^62: any two times differ by less than 2^63 */

/* ns from the clock offset: int((time - offset) * 1e9 / resolution) of Python, in doubles */
static int to_ns(otf2_st *S, uint64_t time, int64_t *ns) {
    double d = time >= S->off ? (double)(time - S->off) : -(double)(S->off - time);
    double x = d * 1e9 / (double)S->res;
    if (!(x > -MAX_ABS_NS && x < MAX_ABS_NS)) {
        fail(S, HV_OTF2_E_TIME, "a timestamp is %.6g ns from the clock offset, beyond 2^62", x);
        return -1;
    }
    *ns = (int64_t)x;
    return 0;
}

static task_st *task_of(const otf2_st *S, OTF2_LocationRef loc) {
    int64_t r = umap_get(&S->loc_rank, loc, 0, -1);
    return r < 0 ? NULL : &S->tasks[r];
}

static int add_row(otf2_st *S, task_st *t, int op, const call_row *x, int64_t ts, int64_t te) {
    int64_t r = t - S->tasks;
    if (VPUSH(S->r_task, (int32_t)r) || VPUSH(S->r_op, (int8_t)op) || VPUSH(S->r_peer, x ? x->peer : -1) ||
        VPUSH(S->r_bytes, x ? x->bytes : 0) || VPUSH(S->r_tag, x ? x->tag : 0) || VPUSH(S->r_req, x ? x->req : -1) ||
        VPUSH(S->r_ts, ts) || VPUSH(S->r_te, te) || VPUSH(S->r_seq, t->count))
        return -1;
    if (!t->count) t->first_op = (int8_t)op, t->first_t = ts;
    t->last_op = (int8_t)op, t->last_t = te, t->count++;
    return 0;
}

static int region_kind(const char *name) {
    if (!name || strncmp(name, "MPI_", 4)) return R_OTHER;
    if (!strcmp(name, "MPI_Init") || !strcmp(name, "MPI_Init_thread")) return R_INIT;
    if (!strcmp(name, "MPI_Finalize")) return R_FINALIZE;
    return !strcmp(name, "MPI_Sendrecv") ? R_SENDRECV : R_MPI;
}

static const char *region_name(const otf2_st *S, OTF2_RegionRef region) {
    int64_t i = umap_get(&S->regions, region, 0, -1);
    return i < 0 ? NULL : string_of(S, S->region_defs.a[i].name);
}

static OTF2_CallbackCode ev_enter(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                  OTF2_RegionRef region) {
    otf2_st *S = u;
    task_st *t = task_of(S, loc);
    (void)al;
    int kind = t ? region_kind(region_name(S, region)) : R_OTHER;
    if (kind == R_OTHER) return OTF2_CALLBACK_SUCCESS;
    if (to_ns(S, time, &t->t)) return OTF2_CALLBACK_INTERRUPT;
    t->open = 1, t->kind = kind, t->region = region, t->rows.n = 0;
    return OTF2_CALLBACK_SUCCESS;
}

/* the Leave of the open call: its rows, with the call's times */
static OTF2_CallbackCode ev_leave(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                  OTF2_RegionRef region) {
    otf2_st *S = u;
    task_st *t = task_of(S, loc);
    int64_t ns, r = t ? t - S->tasks : -1;
    (void)al;
    if (!t || !t->open) return OTF2_CALLBACK_SUCCESS;
    const char *a = region_name(S, region), *b = region_name(S, t->region);
    if (region != t->region && (!a || !b || strcmp(a, b))) return OTF2_CALLBACK_SUCCESS;
    if (to_ns(S, time, &ns)) return OTF2_CALLBACK_INTERRUPT;
    if (t->kind == R_INIT && !t->count && add_row(S, t, OP_INIT, NULL, ns, ns)) return nomem(S);
    for (int64_t i = 0; i < t->rows.n; i++) {
        const call_row *x = &t->rows.a[i];
        if (add_row(S, t, x->op, x, t->t, ns)) return nomem(S);
        if (x->keyed && umap_put(&S->pending, (uint64_t)r, x->key, S->r_op.n - 1)) return nomem(S);
    }
    if (t->kind == R_FINALIZE && add_row(S, t, OP_FINALIZE, NULL, t->t, t->t)) return nomem(S);
    t->open = 0;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode buffer(otf2_st *S, OTF2_LocationRef loc, call_row x) {
    task_st *t = task_of(S, loc);
    if (t && t->open && VPUSH(t->rows, x)) return nomem(S);
    return OTF2_CALLBACK_SUCCESS;
}

static task_st *open_task(const otf2_st *S, OTF2_LocationRef loc) {
    task_st *t = task_of(S, loc);
    return t && t->open ? t : NULL;
}

static OTF2_CallbackCode ev_send(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                 uint32_t receiver, OTF2_CommRef comm, uint32_t tag, uint64_t len) {
    otf2_st *S = u;
    task_st *t = open_task(S, loc);
    (void)time, (void)al;
    if (!t) return OTF2_CALLBACK_SUCCESS;
    call_row x = {t->kind == R_SENDRECV ? OP_SENDRECV : OP_SEND, 0, world(S, comm, receiver), (int64_t)len, tag, -1, 0};
    return buffer(S, loc, x);
}

static OTF2_CallbackCode ev_recv(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                 uint32_t sender, OTF2_CommRef comm, uint32_t tag, uint64_t len) {
    otf2_st *S = u;
    task_st *t = open_task(S, loc);
    (void)time, (void)al;
    if (!t) return OTF2_CALLBACK_SUCCESS;
    call_row x = {
        t->kind == R_SENDRECV ? OP_SENDRECV_RECV : OP_RECV, 0, world(S, comm, sender), (int64_t)len, tag, -1, 0};
    return buffer(S, loc, x);
}

static OTF2_CallbackCode ev_isend(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                  uint32_t receiver, OTF2_CommRef comm, uint32_t tag, uint64_t len, uint64_t req) {
    otf2_st *S = u;
    (void)time, (void)al;
    if (!open_task(S, loc)) return OTF2_CALLBACK_SUCCESS;
    call_row x = {OP_ISEND, 1, world(S, comm, receiver), (int64_t)len, tag, -1, req};
    return buffer(S, loc, x);
}

static OTF2_CallbackCode ev_irecv_request(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                          uint64_t req) {
    (void)time, (void)al;
    call_row x = {OP_IRECV, 1, -1, 0, 0, -1, req};
    return buffer(u, loc, x);
}

/* a completed request: a wait row for its isend/irecv (an irecv gets its peer, size and tag now) */
static OTF2_CallbackCode complete(otf2_st *S, OTF2_LocationRef loc, uint64_t req, const call_row *recv) {
    task_st *t = open_task(S, loc);
    if (!t) return OTF2_CALLBACK_SUCCESS;
    int64_t row = umap_pop(&S->pending, (uint64_t)(t - S->tasks), req);
    if (row < 0) return OTF2_CALLBACK_SUCCESS;
    if (recv) S->r_peer.a[row] = recv->peer, S->r_bytes.a[row] = recv->bytes, S->r_tag.a[row] = recv->tag;
    call_row x = {OP_WAIT, 0, S->r_peer.a[row], S->r_bytes.a[row], S->r_tag.a[row], S->r_seq.a[row], 0};
    return buffer(S, loc, x);
}

static OTF2_CallbackCode ev_isend_complete(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                           uint64_t req) {
    (void)time, (void)al;
    return complete(u, loc, req, NULL);
}

static OTF2_CallbackCode ev_irecv(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                  uint32_t sender, OTF2_CommRef comm, uint32_t tag, uint64_t len, uint64_t req) {
    otf2_st *S = u;
    (void)time, (void)al;
    if (!open_task(S, loc)) return OTF2_CALLBACK_SUCCESS;
    call_row x = {OP_IRECV, 0, world(S, comm, sender), (int64_t)len, tag, -1, 0};
    return complete(S, loc, req, &x);
}

static int coll_op(OTF2_CollectiveOp op) {
    switch (op) {
    case OTF2_COLLECTIVE_OP_BARRIER: return OP_BARRIER;
    case OTF2_COLLECTIVE_OP_BCAST: return OP_BCAST;
    case OTF2_COLLECTIVE_OP_REDUCE: return OP_REDUCE;
    case OTF2_COLLECTIVE_OP_ALLREDUCE: return OP_ALLREDUCE;
    case OTF2_COLLECTIVE_OP_GATHER: return OP_GATHER;
    case OTF2_COLLECTIVE_OP_GATHERV: return OP_GATHERV;
    case OTF2_COLLECTIVE_OP_SCATTER: return OP_SCATTER;
    case OTF2_COLLECTIVE_OP_SCATTERV: return OP_SCATTERV;
    case OTF2_COLLECTIVE_OP_ALLGATHER: return OP_ALLGATHER;
    case OTF2_COLLECTIVE_OP_ALLGATHERV: return OP_ALLGATHERV;
    case OTF2_COLLECTIVE_OP_ALLTOALL: return OP_ALLTOALL;
    case OTF2_COLLECTIVE_OP_ALLTOALLV: return OP_ALLTOALLV;
    default: return -1;
    }
}

static OTF2_CallbackCode ev_coll_end(OTF2_LocationRef loc, OTF2_TimeStamp time, void *u, OTF2_AttributeList *al,
                                     OTF2_CollectiveOp cop, OTF2_CommRef comm, uint32_t root, uint64_t sent,
                                     uint64_t received) {
    otf2_st *S = u;
    int op = coll_op(cop);
    (void)time, (void)al;
    if (op < 0 || !open_task(S, loc)) return OTF2_CALLBACK_SUCCESS;
    int rooted = op == OP_BCAST || op == OP_REDUCE || op == OP_GATHER || op == OP_GATHERV || op == OP_SCATTER ||
                 op == OP_SCATTERV;
    call_row x = {(int8_t)op, 0, rooted ? world(S, comm, root) : -1, (int64_t)(sent > received ? sent : received), 0,
                  -1,         0};
    return buffer(S, loc, x);
}

/* ---- the reader ---------------------------------------------------------------------------------- */

static char lib_msg[256]; /* the library's first message of a read (its error callback) */

static OTF2_ErrorCode on_error(void *u, const char *file, uint64_t line, const char *fn, OTF2_ErrorCode code,
                               const char *fmt, va_list va) {
    (void)u, (void)file, (void)line, (void)fn;
    if (!lib_msg[0] && fmt) vsnprintf(lib_msg, sizeof lib_msg, fmt, va);
    return code;
}

static int lib_fail(otf2_st *S, int err, OTF2_ErrorCode code, const char *what) {
    fail(S, err, "%s: %s%s%s", what, OTF2_Error_GetName(code), lib_msg[0] ? ": " : "", lib_msg);
    return -1;
}

static int read_global_defs(otf2_st *S, OTF2_Reader *rd) {
    OTF2_GlobalDefReader *gdr = OTF2_Reader_GetGlobalDefReader(rd);
    if (!gdr) return lib_fail(S, HV_OTF2_E_OPEN, OTF2_ERROR_INVALID, "no global definitions");
    OTF2_GlobalDefReaderCallbacks *cb = OTF2_GlobalDefReaderCallbacks_New();
    if (!cb) return nomem(S), -1;
    OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback(cb, def_clock);
    OTF2_GlobalDefReaderCallbacks_SetStringCallback(cb, def_string);
    OTF2_GlobalDefReaderCallbacks_SetRegionCallback(cb, def_region);
    OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback(cb, def_location_group);
    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(cb, def_location);
    OTF2_GlobalDefReaderCallbacks_SetGroupCallback(cb, def_group);
    OTF2_GlobalDefReaderCallbacks_SetCommCallback(cb, def_comm);
    OTF2_ErrorCode rc = OTF2_Reader_RegisterGlobalDefCallbacks(rd, gdr, cb, S);
    OTF2_GlobalDefReaderCallbacks_Delete(cb);
    uint64_t n = 0;
    if (rc == OTF2_SUCCESS) rc = OTF2_Reader_ReadAllGlobalDefinitions(rd, gdr, &n);
    OTF2_Reader_CloseGlobalDefReader(rd, gdr);
    if (S->c->err) return -1;
    if (rc != OTF2_SUCCESS) return lib_fail(S, HV_OTF2_E_OPEN, rc, "reading the global definitions");
    if (!S->have_clock) return fail(S, HV_OTF2_E_OPEN, "Trace has no ClockProperties definition."), -1;
    if (!S->res) return S->c->err_value = 0, fail(S, HV_OTF2_E_RESOLUTION, "timer resolution 0"), -1;
    return 0;
}

/* the task of every location of a process group; per-task state */
static int map_locations(otf2_st *S) {
    for (int64_t i = 0; i < S->locs.n; i++) {
        int64_t r = umap_get(&S->group_rank, S->loc_group.a[i], 0, -1);
        if (r >= 0 && umap_put(&S->loc_rank, S->locs.a[i], 0, r)) return nomem(S), -1;
    }
    S->tasks = calloc((size_t)S->ntasks + 1, sizeof *S->tasks);
    return S->tasks ? 0 : (nomem(S), -1);
}

/* every location selected, its local definitions (mappings) read, an event reader each (as the otf2
 * package's reader does) */
static int open_locations(otf2_st *S, OTF2_Reader *rd) {
    for (int64_t i = 0; i < S->locs.n; i++) OTF2_Reader_SelectLocation(rd, S->locs.a[i]);
    int defs_open = OTF2_Reader_OpenDefFiles(rd) == OTF2_SUCCESS;
    OTF2_Reader_OpenEvtFiles(rd);
    for (int64_t i = 0; i < S->locs.n; i++) {
        OTF2_DefReader *dr = defs_open ? OTF2_Reader_GetDefReader(rd, S->locs.a[i]) : NULL;
        uint64_t n = 0;
        OTF2_ErrorCode rc = dr ? OTF2_Reader_ReadAllLocalDefinitions(rd, dr, &n) : OTF2_SUCCESS;
        if (dr) OTF2_Reader_CloseDefReader(rd, dr);
        if (rc != OTF2_SUCCESS) return lib_fail(S, HV_OTF2_E_READ, rc, "reading the local definitions");
        OTF2_Reader_GetEvtReader(rd, S->locs.a[i]); /* none (a damaged file): the location has no events */
    }
    if (defs_open) OTF2_Reader_CloseDefFiles(rd);
    return 0;
}

static int read_events(otf2_st *S, OTF2_Reader *rd) {
    OTF2_GlobalEvtReader *ger = OTF2_Reader_GetGlobalEvtReader(rd);
    if (!ger) return lib_fail(S, HV_OTF2_E_READ, OTF2_ERROR_INVALID, "opening the events");
    OTF2_GlobalEvtReaderCallbacks *cb = OTF2_GlobalEvtReaderCallbacks_New();
    if (!cb) return OTF2_Reader_CloseGlobalEvtReader(rd, ger), nomem(S), -1;
    OTF2_GlobalEvtReaderCallbacks_SetEnterCallback(cb, ev_enter);
    OTF2_GlobalEvtReaderCallbacks_SetLeaveCallback(cb, ev_leave);
    OTF2_GlobalEvtReaderCallbacks_SetMpiSendCallback(cb, ev_send);
    OTF2_GlobalEvtReaderCallbacks_SetMpiRecvCallback(cb, ev_recv);
    OTF2_GlobalEvtReaderCallbacks_SetMpiIsendCallback(cb, ev_isend);
    OTF2_GlobalEvtReaderCallbacks_SetMpiIsendCompleteCallback(cb, ev_isend_complete);
    OTF2_GlobalEvtReaderCallbacks_SetMpiIrecvRequestCallback(cb, ev_irecv_request);
    OTF2_GlobalEvtReaderCallbacks_SetMpiIrecvCallback(cb, ev_irecv);
    OTF2_GlobalEvtReaderCallbacks_SetMpiCollectiveEndCallback(cb, ev_coll_end);
    OTF2_ErrorCode rc = OTF2_Reader_RegisterGlobalEvtCallbacks(rd, ger, cb, S);
    OTF2_GlobalEvtReaderCallbacks_Delete(cb);
    uint64_t n = 0;
    if (rc == OTF2_SUCCESS) rc = OTF2_Reader_ReadAllGlobalEvents(rd, ger, &n);
    OTF2_Reader_CloseGlobalEvtReader(rd, ger);
    OTF2_Reader_CloseEvtFiles(rd);
    if (S->c->err) return -1;
    return rc == OTF2_SUCCESS ? 0 : lib_fail(S, HV_OTF2_E_READ, rc, "reading the events");
}

/* rows per task with the added init (first) and finalize (last) rows; the earliest start */
static void count_rows(otf2_st *S) {
    hv_otf2_config *c = S->c;
    int64_t t0 = INT64_MAX;
    c->nrows = 0;
    for (int64_t r = 0; r < S->ntasks; r++) {
        const task_st *t = &S->tasks[r];
        int shift = !t->count || t->first_op != OP_INIT, fin = !t->count || t->last_op != OP_FINALIZE;
        int64_t first = t->count ? t->first_t : 0, last = t->count ? t->last_t : 0;
        if (shift && first < t0) t0 = first;
        if (fin && last < t0) t0 = last;
        c->nrows += t->count + shift + fin;
    }
    for (int64_t i = 0; i < S->r_ts.n; i++)
        if (S->r_ts.a[i] < t0) t0 = S->r_ts.a[i];
    S->t0 = t0;
}

int hv_otf2_config_size(void) { return (int)sizeof(hv_otf2_config); }

int hv_otf2_read(hv_otf2_config *c) {
    otf2_st *S = calloc(1, sizeof *S);
    c->state = S, c->err = HV_OTF2_OK, c->msg[0] = 0, c->nrows = c->ntasks = 0;
    if (!S) return -1;
    S->c = c;
    for (int i = 0; i < 256; i++) S->last_comm_locations[i] = -1;
    lib_msg[0] = 0;
    OTF2_ErrorCallback old = OTF2_Error_RegisterCallback(on_error, NULL);
    OTF2_Reader *rd = OTF2_Reader_Open(c->anchor);
    if (!rd) lib_fail(S, HV_OTF2_E_OPEN, OTF2_ERROR_INVALID, "not an OTF2 archive");
    else {
        OTF2_Reader_SetSerialCollectiveCallbacks(rd);
        if (!read_global_defs(S, rd) && !map_locations(S) && !open_locations(S, rd) && !read_events(S, rd)) {
            c->ntasks = S->ntasks;
            if (!S->ntasks) fail(S, HV_OTF2_E_NO_PROCESS, "no MPI process");
            else count_rows(S);
        }
        OTF2_Reader_Close(rd);
    }
    OTF2_Error_RegisterCallback(old, NULL);
    return c->err == HV_OTF2_E_MEMORY ? -1 : 0;
}

static void put_row(hv_otf2_config *c, int64_t j, int64_t r, int64_t seq, int op, int64_t t, int64_t t0) {
    c->task[j] = (int32_t)r, c->seq[j] = seq, c->op[j] = (int8_t)op, c->peer[j] = -1, c->bytes[j] = 0;
    c->tag[j] = 0, c->req[j] = -1, c->t_start[j] = c->t_end[j] = t - t0;
}

/* rows sorted by task then seq: an init row first where a task's first row is not one (its waits' req
 * shift by one), its rows, a finalize row where its last row is not one; times minus the earliest start */
void hv_otf2_fill(hv_otf2_config *c) {
    otf2_st *S = c->state;
    int64_t *off = malloc(((size_t)S->ntasks + 1) * sizeof *off), *shift = malloc(((size_t)S->ntasks + 1) * 8);
    if (!off || !shift) return free(off), free(shift), (void)(c->err = HV_OTF2_E_MEMORY);
    for (int64_t r = 0, j = 0; r < S->ntasks; r++) {
        const task_st *t = &S->tasks[r];
        shift[r] = !t->count || t->first_op != OP_INIT, off[r] = j;
        if (shift[r]) put_row(c, j, r, 0, OP_INIT, t->count ? t->first_t : 0, S->t0);
        j += shift[r] + t->count;
        if (!t->count || t->last_op != OP_FINALIZE)
            put_row(c, j, r, shift[r] + t->count, OP_FINALIZE, t->count ? t->last_t : 0, S->t0), j++;
    }
    for (int64_t i = 0; i < S->r_op.n; i++) {
        int64_t r = S->r_task.a[i], seq = shift[r] + S->r_seq.a[i], j = off[r] + seq, req = S->r_req.a[i];
        c->task[j] = (int32_t)r, c->seq[j] = seq, c->op[j] = S->r_op.a[i], c->peer[j] = (int32_t)S->r_peer.a[i];
        c->bytes[j] = S->r_bytes.a[i], c->tag[j] = (int32_t)S->r_tag.a[i];
        c->req[j] = S->r_op.a[i] == OP_WAIT && req >= 0 ? req + shift[r] : req;
        c->t_start[j] = S->r_ts.a[i] - S->t0, c->t_end[j] = S->r_te.a[i] - S->t0;
    }
    free(off), free(shift);
}

void hv_otf2_free(hv_otf2_config *c) {
    otf2_st *S = c->state;
    c->state = NULL;
    if (!S) return;
    umap *maps[] = {&S->strings, &S->regions, &S->groups, &S->comms, &S->loc_rank, &S->group_rank, &S->pending};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++) umap_free(maps[i]);
    for (int64_t i = 0; i < S->strs.n; i++) free(S->strs.a[i]);
    for (int64_t r = 0; S->tasks && r < S->ntasks; r++) free(S->tasks[r].rows.a);
    free(S->strs.a), free(S->region_defs.a), free(S->group_defs.a), free(S->mem.a), free(S->locs.a);
    free(S->loc_group.a), free(S->tasks), free(S->r_task.a), free(S->r_op.a), free(S->r_peer.a), free(S->r_bytes.a);
    free(S->r_tag.a), free(S->r_req.a), free(S->r_ts.a), free(S->r_te.a), free(S->r_seq.a), free(S);
}
