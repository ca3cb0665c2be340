/* Lowering of trace rows into the replay's op arrays (see replay.h): the compiled twin of
 * hpcvar.sim.replay_ref.lower + hpcvar.sim.replay_native.encode. Rows arrive sorted by task and seq;
 * each task's ops are, in order: a compute op for a positive gap since the previous row's end (less the
 * row's polls, or its CPU time: replay_ref.compute_ns), then the row's own ops (a send, receive or probe
 * post, a wait, or a collective's steps as posts + a wait per step, as hpcvar.traces.collectives). Match keys become dense ids in order of first use; the request
 * of a point-to-point row is its row index, a wait for a request that does not exist gets the id nrows
 * (never completed), and the requests of collective steps follow. */
#include "hv_ops.h"
#include "replay.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ALGO_BINOMIAL = 0, ALGO_RECDOUB = 1, ALGO_RING = 2 };

/* ---- a hash map of 5 x int64 -> int64 (open addressing) ------------------------------------ */

typedef struct {
    int64_t *k; /* 5 per slot */
    int64_t *v;
    int8_t *used;
    int64_t cap, n;
} hmap;

static uint64_t hkey(const int64_t *k) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 5; i++) {
        h ^= (uint64_t)k[i] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
        h *= 0xBF58476D1CE4E5B9ull;
    }
    return h ^ (h >> 31);
}

/* The map rebuilt with cap slots (a power of 2 above twice what stays), without the entries drop(key, arg) names
 * (drop NULL: none); -1 if memory runs out (the map is then unchanged). */
static int hmap_rehash(hmap *m, int64_t cap, int (*drop)(const int64_t *, int64_t), int64_t arg) {
    hmap n = {calloc((size_t)cap * 5, sizeof(int64_t)), calloc((size_t)cap, sizeof(int64_t)), calloc((size_t)cap, 1),
              cap, 0};
    if (!n.k || !n.v || !n.used) {
        free(n.k), free(n.v), free(n.used);
        return -1;
    }
    for (int64_t i = 0; i < m->cap; i++) {
        if (!m->used[i] || (drop && drop(&m->k[5 * i], arg))) continue;
        uint64_t j = hkey(&m->k[5 * i]) & (uint64_t)(cap - 1);
        while (n.used[j]) j = (j + 1) & (uint64_t)(cap - 1);
        memcpy(&n.k[5 * j], &m->k[5 * i], 5 * sizeof(int64_t));
        n.v[j] = m->v[i];
        n.used[j] = 1;
        n.n++;
    }
    free(m->k), free(m->v), free(m->used);
    *m = n;
    return 0;
}

static int hmap_grow(hmap *m) { return hmap_rehash(m, m->cap ? 2 * m->cap : 1024, NULL, 0); }

/* the slot of key k; *fresh = 1 if it was inserted (value set to dflt) */
static int64_t *hmap_get(hmap *m, const int64_t *k, int64_t dflt, int *fresh) {
    if (2 * (m->n + 1) > m->cap && hmap_grow(m)) return NULL;
    uint64_t j = hkey(k) & (uint64_t)(m->cap - 1);
    while (m->used[j]) {
        if (!memcmp(&m->k[5 * j], k, 5 * sizeof(int64_t))) {
            *fresh = 0;
            return &m->v[j];
        }
        j = (j + 1) & (uint64_t)(m->cap - 1);
    }
    memcpy(&m->k[5 * j], k, 5 * sizeof(int64_t));
    m->used[j] = 1;
    m->v[j] = dflt;
    m->n++;
    *fresh = 1;
    return &m->v[j];
}

static void hmap_free(hmap *m) { free(m->k), free(m->v), free(m->used); }

/* The map without the entries drop(key, arg) names, rebuilt at the size of what stays; -1 if memory runs out
 * (the map is then unchanged). */
static int hmap_prune(hmap *m, int (*drop)(const int64_t *, int64_t), int64_t arg) {
    int64_t keep = 0;
    for (int64_t i = 0; i < m->cap; i++) keep += m->used[i] && !drop(&m->k[5 * i], arg);
    int64_t cap = 1024;
    while (cap < 2 * (keep + 1)) cap *= 2;
    return hmap_rehash(m, cap, drop, arg);
}

/* ---- collectives.steps in C --------------------------------------------------------------- */

typedef struct {
    int64_t peer, bytes;
} msg;
typedef struct {
    int64_t s0, ns, r0, nr;
} step; /* sends [s0, s0+ns), recvs [r0, r0+nr) of msgs */

typedef struct {
    step *st;
    int64_t nst, cst;
    msg *m;
    int64_t nm, cm;
    int oom;
} steps_t;

static void st_begin(steps_t *S) {
    if (S->nst == S->cst) {
        int64_t c = S->cst ? 2 * S->cst : 64;
        step *p = realloc(S->st, (size_t)c * sizeof *p);
        if (!p) {
            S->oom = 1;
            return;
        }
        S->st = p, S->cst = c;
    }
    S->st[S->nst++] = (step){S->nm, 0, 0, 0};
}

static void st_add(steps_t *S, int64_t peer, int64_t bytes) {
    if (S->nm == S->cm) {
        int64_t c = S->cm ? 2 * S->cm : 256;
        msg *p = realloc(S->m, (size_t)c * sizeof *p);
        if (!p) {
            S->oom = 1;
            return;
        }
        S->m = p, S->cm = c;
    }
    S->m[S->nm++] = (msg){peer, bytes};
}

/* a step is built as: st_begin, sends (st_add), st_mid, recvs (st_add) */
static void st_mid(steps_t *S) {
    step *s = &S->st[S->nst - 1];
    s->ns = S->nm - s->s0;
    s->r0 = S->nm;
}
static void st_end(steps_t *S) {
    step *s = &S->st[S->nst - 1];
    s->nr = S->nm - s->r0;
}
/* one step with at most one send and one receive (peer < 0: none) */
static void st_one(steps_t *S, int64_t sp, int64_t sb, int64_t rp, int64_t rb) {
    if (S->oom) return;
    st_begin(S);
    if (S->oom) return;
    if (sp >= 0) st_add(S, sp, sb);
    st_mid(S);
    if (rp >= 0) st_add(S, rp, rb);
    st_end(S);
}

static int64_t fdiv(int64_t a, int64_t b) { /* Python's a // b */
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}
static int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); } /* -(-a // b) */
static int64_t pmod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

/* relative rank -> comm rank: (p + root) % n, applied to steps [from, nst) */
static void relative(steps_t *S, int64_t from, int64_t first_msg, int64_t root, int64_t n) {
    (void)from;
    for (int64_t i = first_msg; i < S->nm; i++) S->m[i].peer = pmod(S->m[i].peer + root, n);
}

static void bcast_binomial(steps_t *S, int64_t n, int64_t vr, int64_t b) {
    int64_t mask = 1;
    while (mask < n) {
        if (vr & mask) {
            st_one(S, -1, 0, vr - mask, b);
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while (mask > 0) {
        if (vr + mask < n) st_one(S, vr + mask, b, -1, 0);
        mask >>= 1;
    }
}

static void reduce_binomial(steps_t *S, int64_t n, int64_t vr, int64_t b) {
    int64_t mask = 1;
    while (mask < n) {
        if (vr & mask) {
            st_one(S, vr - mask, b, -1, 0);
            break;
        }
        if (vr + mask < n) st_one(S, -1, 0, vr + mask, b);
        mask <<= 1;
    }
}

static int64_t subtree(int64_t n, int64_t vr) {
    if (vr == 0) return n;
    int64_t low = vr & -vr;
    return low < n - vr ? low : n - vr;
}

static void gather_binomial(steps_t *S, int64_t n, int64_t vr, int64_t b, int reversed_scatter) {
    /* gather steps; for scatter: the same steps in reverse order with sends and receives swapped */
    int64_t first = S->nst;
    int64_t mask = 1;
    while (mask < n) {
        if (vr & mask) {
            st_one(S, vr - mask, b * subtree(n, vr), -1, 0);
            break;
        }
        if (vr + mask < n) st_one(S, -1, 0, vr + mask, b * subtree(n, vr + mask));
        mask <<= 1;
    }
    if (reversed_scatter && !S->oom) {
        for (int64_t i = first, j = S->nst - 1; i < j; i++, j--) {
            step t = S->st[i];
            S->st[i] = S->st[j];
            S->st[j] = t;
        }
        for (int64_t i = first; i < S->nst; i++) { /* swap sends and receives */
            step *s = &S->st[i];
            step t = {s->r0, s->nr, s->s0, s->ns};
            *s = t;
        }
    }
}

static void chain(steps_t *S, int64_t n, int64_t vr, int64_t b, int towards_root) {
    if (!towards_root) {
        if (vr > 0) st_one(S, -1, 0, vr - 1, b);
        if (vr < n - 1) st_one(S, vr + 1, b, -1, 0);
    } else {
        if (vr < n - 1) st_one(S, -1, 0, vr + 1, b);
        if (vr > 0) st_one(S, vr - 1, b, -1, 0);
    }
}

static void ring_steps(steps_t *S, int64_t n, int64_t me, int64_t b, int64_t count) {
    for (int64_t i = 0; i < count; i++) st_one(S, pmod(me + 1, n), b, pmod(me - 1, n), b);
}

static void recdoub_allreduce(steps_t *S, int64_t n, int64_t me, int64_t b) {
    int64_t p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    int64_t rem = n - p2, newrank;
    if (me < 2 * rem) {
        if (me % 2 == 0) {
            st_one(S, me + 1, b, -1, 0);
            st_one(S, -1, 0, me + 1, b);
            return;
        }
        st_one(S, -1, 0, me - 1, b);
        newrank = me / 2;
    } else {
        newrank = me - rem;
    }
    for (int64_t mask = 1; mask < p2; mask <<= 1) {
        int64_t nr = newrank ^ mask;
        int64_t peer = nr < rem ? nr * 2 + 1 : nr + rem;
        st_one(S, peer, b, peer, b);
    }
    if (me < 2 * rem) st_one(S, me - 1, b, -1, 0);
}

static void linear(steps_t *S, int gather, int64_t n, int64_t me, int64_t root, int64_t b) {
    if (S->oom) return;
    if (gather) {
        if (me == root) {
            st_begin(S);
            if (S->oom) return;
            st_mid(S);
            for (int64_t p = 0; p < n; p++)
                if (p != root) st_add(S, p, b);
            st_end(S);
        } else {
            st_one(S, root, b, -1, 0);
        }
    } else {
        if (me == root) {
            st_begin(S);
            if (S->oom) return;
            for (int64_t p = 0; p < n; p++)
                if (p != root) st_add(S, p, b);
            st_mid(S);
            st_end(S);
        } else {
            st_one(S, -1, 0, root, b);
        }
    }
}

static void barrier_steps(steps_t *S, int64_t n, int64_t me, int algo) {
    if (algo == ALGO_RECDOUB) {
        for (int64_t k = 1; k < n; k *= 2) st_one(S, pmod(me + k, n), 0, pmod(me - k, n), 0);
    } else if (algo == ALGO_RING) {
        if (me == 0) {
            for (int i = 0; i < 2; i++) {
                st_one(S, pmod(me + 1, n), 0, -1, 0);
                st_one(S, -1, 0, n - 1, 0);
            }
        } else {
            for (int i = 0; i < 2; i++) {
                st_one(S, -1, 0, me - 1, 0);
                st_one(S, pmod(me + 1, n), 0, -1, 0);
            }
        }
    } else {
        reduce_binomial(S, n, me, 0);
        bcast_binomial(S, n, me, 0);
    }
}

static void allgather_steps(steps_t *S, int op, int64_t n, int64_t me, int64_t b, int algo) {
    int64_t blk = op == OP_ALLGATHER ? b : cdiv(b, n);
    if (algo == ALGO_BINOMIAL) {
        gather_binomial(S, n, me, blk, 0);
        bcast_binomial(S, n, me, blk * n);
    } else if (algo == ALGO_RECDOUB && (n & (n - 1)) == 0) {
        for (int64_t mask = 1; mask < n; mask <<= 1) st_one(S, me ^ mask, blk * mask, me ^ mask, blk * mask);
    } else {
        ring_steps(S, n, me, blk, n - 1);
    }
}

/* collectives.steps(op, n, me, root, nbytes, algo) */
static void coll_steps(steps_t *S, int op, int64_t n, int64_t me, int64_t root, int64_t b, int algo) {
    S->nst = S->nm = 0;
    if (n <= 1) return;
    if (root < 0) root = 0;
    int64_t vr = pmod(me - root, n);
    int64_t m0 = S->nm;
    switch (op) {
    case OP_BARRIER: barrier_steps(S, n, me, algo); break;
    case OP_BCAST:
        if (algo == ALGO_RING) chain(S, n, vr, b, 0);
        else bcast_binomial(S, n, vr, b);
        relative(S, 0, m0, root, n);
        break;
    case OP_REDUCE:
        if (algo == ALGO_RING) chain(S, n, vr, b, 1);
        else reduce_binomial(S, n, vr, b);
        relative(S, 0, m0, root, n);
        break;
    case OP_ALLREDUCE:
        if (algo == ALGO_RECDOUB) recdoub_allreduce(S, n, me, b);
        else if (algo == ALGO_RING) ring_steps(S, n, me, cdiv(b, n), 2 * (n - 1));
        else {
            reduce_binomial(S, n, me, b);
            bcast_binomial(S, n, me, b);
        }
        break;
    case OP_GATHER:
    case OP_SCATTER:
        if (algo == ALGO_RING) linear(S, op == OP_GATHER, n, me, root, b);
        else {
            gather_binomial(S, n, vr, b, op == OP_SCATTER);
            relative(S, 0, m0, root, n);
        }
        break;
    case OP_GATHERV:
    case OP_SCATTERV: {
        int64_t per = me != root ? b : cdiv(b, n - 1 > 1 ? n - 1 : 1);
        linear(S, op == OP_GATHERV, n, me, root, per);
        break;
    }
    case OP_ALLGATHER:
    case OP_ALLGATHERV: allgather_steps(S, op, n, me, b, algo); break;
    case OP_ALLTOALL:
    case OP_ALLTOALLV: {
        int64_t per = cdiv(b, n);
        for (int64_t k = 1; k < n; k++) st_one(S, pmod(me + k, n), per, pmod(me - k, n), per);
        break;
    }
    default: break;
    }
}

/* ---- the lowering ------------------------------------------------------------------------- */

typedef struct {
    int64_t ts, te;
} ival;

/* The stream mode's state (hv_rp_stream_open): what carries from chunk to chunk, the task being lowered, and the
 * scratch of its requests' renumbering. */
typedef struct hv_rp_stream {
    int64_t fd, err_no;
    int ioerr;
    hmap keys, coll;
    /* keys: the ids given (the map keeps only the keys a task still to lower may name), the map's size at the
     * last prune, the size from which it is pruned */
    int64_t nkeys, kept, prune_min;
    int64_t ncreq, nops, nreqs, maxrec, bytes; /* nreqs: the next task's base */
    /* the task's ops (req: the lowering's ids; a wait's req: the offset of its requests in wreq) */
    int64_t op0, cap;
    int8_t *kind;
    int32_t *peer, *key, *row;
    double *val;
    int64_t *req;
    int64_t cw;
    int64_t *wreq;
    /* renumbering: per request of the task (its rows, then its collectives' requests) */
    int64_t cl;
    int8_t *posted;
    int64_t *last;
    int32_t *slot, *freel;
    int64_t cset;
    int64_t *set;    /* scratch: the (key, side) seen in the backward pass (st_last_uses) */
    int8_t *lastuse; /* per op of the task: 1 on the last op of its key's side */
    uint8_t *out;
    int64_t cout;
} hv_rp_stream;

typedef struct {
    hv_rp_lower_config *c;
    int fill;
    int64_t nops, nwreq, ncreq;
    int oom;
    hmap keys_own, coll_own;
    hmap *keys, *coll;
    hv_rp_stream *st; /* or NULL */
    ival *iv; /* scratch: one task's MPI intervals, when they need a sort (mpi_resorted) */
    int64_t civ;
} lw;

/* ---- the measured side: the union of a task's MPI rows' [t_start, t_end] ---------------------------- */

/* the union accumulated row by row with the operations of hpcvar.sim.app.mpi_time_s: covered =
 * max(0, end - max(start, the latest end so far)) in doubles, summed in row order */
typedef struct {
    double sum;
    int64_t reach, ts, te;
    int have, unsorted; /* unsorted: a row before its predecessor in (t_start, t_end) order */
} mpi_acc;

static void mpi_add(mpi_acc *a, int64_t ts, int64_t te) {
    if (a->have && (ts < a->ts || (ts == a->ts && te < a->te))) a->unsorted = 1;
    double lo = a->have ? ((double)ts > (double)a->reach ? (double)ts : (double)a->reach) : (double)ts;
    double cov = (double)te - lo;
    a->sum += cov > 0.0 ? cov : 0.0;
    if (!a->have || te > a->reach) a->reach = te;
    a->ts = ts, a->te = te, a->have = 1;
}

static int ival_cmp(const void *pa, const void *pb) {
    const ival *a = pa, *b = pb;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return (a->te > b->te) - (a->te < b->te);
}

/* the union over rows [lo, hi) of a task whose MPI rows are not in time order: the intervals sorted by
 * (t_start, t_end) as mpi_time_s's lexsort orders them (equal pairs add equal amounts, so stability does
 * not matter), then accumulated; -1 if memory runs out */
static int mpi_resorted(lw *L, int64_t lo, int64_t hi, double *out) {
    const hv_rp_lower_config *c = L->c;
    if (hi - lo > L->civ) {
        ival *p = realloc(L->iv, (size_t)(hi - lo) * sizeof *p);
        if (!p) return -1;
        L->iv = p, L->civ = hi - lo;
    }
    int64_t n = 0;
    for (int64_t g = lo; g < hi; g++)
        if (c->op[g] != OP_INIT && c->op[g] != OP_FINALIZE) L->iv[n++] = (ival){c->t_start[g], c->t_end[g]};
    qsort(L->iv, (size_t)n, sizeof *L->iv, ival_cmp);
    mpi_acc a = {0};
    for (int64_t i = 0; i < n; i++) mpi_add(&a, L->iv[i].ts, L->iv[i].te);
    *out = a.sum;
    return 0;
}

#define GROW_TO(ptr, need) \
    do { \
        void *q_ = realloc((ptr), (size_t)(need) * sizeof *(ptr)); \
        if (!q_) return -1; \
        (ptr) = q_; \
    } while (0)

static int st_grow_ops(hv_rp_stream *st, int64_t need) {
    if (need <= st->cap) return 0;
    int64_t cap = st->cap ? 2 * st->cap : 4096;
    while (cap < need) cap *= 2;
    GROW_TO(st->kind, cap);
    GROW_TO(st->peer, cap);
    GROW_TO(st->key, cap);
    GROW_TO(st->row, cap);
    GROW_TO(st->val, cap);
    GROW_TO(st->req, cap);
    st->cap = cap;
    return 0;
}

static int emit(lw *L, int kind, int32_t peer, double val, int32_t key, int64_t req, int64_t row) {
    hv_rp_lower_config *c = L->c;
    if (L->st) {
        hv_rp_stream *st = L->st;
        int64_t i = L->nops - st->op0;
        if (st_grow_ops(st, i + 1)) {
            L->oom = 1;
            return -1;
        }
        st->kind[i] = (int8_t)kind;
        st->peer[i] = peer;
        st->val[i] = val;
        st->key[i] = key;
        st->req[i] = req;
        st->row[i] = (int32_t)row;
    } else if (L->fill) {
        int64_t i = L->nops;
        c->kind[i] = (int8_t)kind;
        c->peer_out[i] = peer;
        c->val[i] = val;
        c->key[i] = key;
        c->req_out[i] = (int32_t)req;
        c->row[i] = (int32_t)row;
    }
    L->nops++;
    return 0;
}

static int64_t key_id(lw *L, int64_t a, int64_t b, int64_t x, int64_t y, int64_t z) {
    if (!L->fill) return 0;
    int64_t k[5] = {a, b, x, y, z};
    int fresh;
    int64_t *ctr = L->st ? &L->st->nkeys : NULL; /* stream mode: ids outlive their entries (st_prune_keys) */
    int64_t *v = hmap_get(L->keys, k, ctr ? *ctr : L->keys->n, &fresh);
    if (!v) L->oom = 1;
    if (v && fresh && ctr) (*ctr)++;
    return v ? *v : -1;
}

static void wait_req(lw *L, int64_t rq) {
    if (L->st) {
        hv_rp_stream *st = L->st;
        if (L->nwreq >= st->cw) {
            int64_t cap = st->cw ? 2 * st->cw : 4096;
            int64_t *q = realloc(st->wreq, (size_t)cap * sizeof *q);
            if (!q) {
                L->oom = 1;
                return;
            }
            st->wreq = q, st->cw = cap;
        }
        st->wreq[L->nwreq] = rq;
    } else if (L->fill) {
        L->c->wreq[L->nwreq] = (int32_t)rq;
    }
    L->nwreq++;
}

static int comm_index(const hv_rp_lower_config *c, int32_t comm) {
    int64_t lo = 0, hi = c->ncomms;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (c->comm_id[mid] < comm) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->ncomms && c->comm_id[lo] == comm ? (int)lo : -1;
}

/* One task's state while its rows are lowered. */
typedef struct {
    int64_t t, tg, base, nrow_t, never, gbase; /* t: in the chunk, tg: in the trace; gbase: the trace's row of base */
    int have_prev;
    int64_t prev_end, polls;
    mpi_acc mpi;
} task_pass;

/* The compute before a row whose gap since the previous row's end is gap > 0 (replay_ref.compute_ns): the gap
 * less the row's polls; with compute = 1, its CPU time where recorded, never above that. */
static int64_t compute_ns(const hv_rp_lower_config *c, int64_t g, int64_t gap) {
    int64_t w = gap - (c->poll ? c->poll[g] : 0);
    if (c->compute == 1 && c->cpu && c->cpu[g] >= 0 && c->cpu[g] < w) w = c->cpu[g];
    return w;
}

/* The compute before row g, and the measured side: span, the union of the MPI rows' intervals, the polls. */
static void gap_and_measure(lw *L, task_pass *x, int64_t g) {
    hv_rp_lower_config *c = L->c;
    int64_t ts = c->t_start[g], te = c->t_end[g];
    if (x->have_prev) {
        int64_t gap = ts - x->prev_end;
        if (gap > 0) {
            int64_t w = compute_ns(c, g, gap);
            if (w > 0) emit(L, HV_RP_COMPUTE, -1, (double)w * 1e-9, -1, -1, -1);
        }
        if (te > x->prev_end) x->prev_end = te;
    } else {
        x->prev_end = te;
        x->have_prev = 1;
    }
    if (L->fill) {
        const int64_t t = x->t;
        if (ts < c->first_start[t]) c->first_start[t] = ts;
        if (te > c->last_end[t]) c->last_end[t] = te;
        if (c->op[g] != OP_INIT && c->op[g] != OP_FINALIZE) mpi_add(&x->mpi, ts, te);
        if (c->poll) x->polls += c->poll[g];
    }
}

static int64_t ntasks_all(const hv_rp_lower_config *c) { return c->ntasks_all > 0 ? c->ntasks_all : c->ntasks; }
static int64_t nrows_all(const hv_rp_lower_config *c) { return c->nrows_all > 0 ? c->nrows_all : c->nrows; }

static int fail_row(hv_rp_lower_config *c, int err, int64_t g) {
    c->err = err;
    c->err_row = g;
    return -1;
}

/* A point-to-point row (or init, finalize, wait): its ops. 0, or -1 with an error in c->err. */
static int lower_p2p(lw *L, const task_pass *x, int64_t g, int op) {
    hv_rp_lower_config *c = L->c;
    const int64_t t = x->tg, never = x->never, seq = g - x->base, G = x->gbase + seq, NT = ntasks_all(c);
    int32_t peer = c->peer[g], tag = c->tag[g], comm = c->comm[g];
    int64_t b = c->bytes[g];
    switch (op) {
    case OP_SEND:
    case OP_ISEND:
    case OP_SENDRECV:
        if (peer < 0 || peer >= NT) break;
        emit(L, HV_RP_SEND, peer, (double)b, (int32_t)key_id(L, 0, t, peer, comm, tag), G, G);
        if (op == OP_SEND) {
            emit(L, HV_RP_WAIT, 1, 0.0, -1, L->nwreq, G);
            wait_req(L, G);
        }
        return 0;
    case OP_RECV:
    case OP_IRECV:
    case OP_SENDRECV_RECV:
        if (peer < 0 || peer >= NT) {
            if (op == OP_IRECV) break;
            return fail_row(c, 1, g);
        }
        emit(L, HV_RP_RECV, peer, (double)b, (int32_t)key_id(L, 0, peer, t, comm, tag), G, G);
        if (op == OP_RECV) {
            emit(L, HV_RP_WAIT, 1, 0.0, -1, L->nwreq, G);
            wait_req(L, G);
        } else if (op == OP_SENDRECV_RECV) {
            emit(L, HV_RP_WAIT, 2, 0.0, -1, L->nwreq, G);
            wait_req(L, seq >= 1 ? G - 1 : never);
            wait_req(L, G);
        }
        return 0;
    case OP_PROBE: /* waits for the message its receive will match; a probe of no task has none */
        if (peer < 0 || peer >= NT) break;
        emit(L, HV_RP_PROBE, peer, (double)b, (int32_t)key_id(L, 0, peer, t, comm, tag), G, G);
        emit(L, HV_RP_WAIT, 1, 0.0, -1, L->nwreq, G);
        wait_req(L, G);
        return 0;
    case OP_WAIT: {
        int64_t r = c->req[g];
        if (r < 0) break;
        emit(L, HV_RP_WAIT, 1, 0.0, -1, L->nwreq, G);
        wait_req(L, r < x->nrow_t ? x->gbase + r : never);
        return 0;
    }
    default: break; /* init, finalize: a wait for nothing */
    }
    emit(L, HV_RP_WAIT, 0, 0.0, -1, L->nwreq, G);
    return 0;
}

/* The messages of a collective's steps, each step a wait for its own requests. */
static void emit_steps(lw *L, const steps_t *S, const int32_t *mem, const task_pass *x, int64_t g, int32_t comm,
                       int64_t k) {
    const int64_t t = x->tg, never = x->never;
    g = x->gbase + (g - x->base); /* the trace's row */
    if (S->nst == 0) emit(L, HV_RP_WAIT, 0, 0.0, -1, L->nwreq, g);
    for (int64_t si = 0; si < S->nst; si++) {
        const step *st = &S->st[si];
        int64_t r0 = never + 1 + L->ncreq;
        for (int64_t j = 0; j < st->ns; j++) {
            int32_t dst = mem[S->m[st->s0 + j].peer];
            emit(L, HV_RP_SEND, dst, (double)S->m[st->s0 + j].bytes, (int32_t)key_id(L, 1, comm, k, t, dst),
                 never + 1 + L->ncreq++, g);
        }
        for (int64_t j = 0; j < st->nr; j++) {
            int32_t src = mem[S->m[st->r0 + j].peer];
            emit(L, HV_RP_RECV, src, (double)S->m[st->r0 + j].bytes, (int32_t)key_id(L, 1, comm, k, src, t),
                 never + 1 + L->ncreq++, g);
        }
        int64_t nreq = st->ns + st->nr;
        emit(L, HV_RP_WAIT, (int32_t)nreq, 0.0, -1, L->nwreq, g);
        for (int64_t j = 0; j < nreq; j++) wait_req(L, r0 + j);
    }
}

/* A collective row: its steps (collectives.steps) as messages. 0, or -1 (an error in c->err, or no memory). */
static int lower_collective(lw *L, steps_t *S, const task_pass *x, int64_t g, int op) {
    hv_rp_lower_config *c = L->c;
    const int64_t t = x->tg;
    int32_t peer = c->peer[g], comm = c->comm[g];
    int ci = comm_index(c, comm);
    if (ci < 0) return fail_row(c, 2, g);
    const int32_t *mem = c->comm_mem + c->comm_off[ci];
    int64_t n = c->comm_off[ci + 1] - c->comm_off[ci], me = -1, root = 0;
    for (int64_t i = 0; i < n; i++) /* the last one, as the dict of the reference */
        if (mem[i] == t) me = i;
    if (me < 0) return fail_row(c, 3, g);
    int64_t k = 0;
    if (L->fill) {
        int64_t ck[5] = {t, comm, 0, 0, 0};
        int fresh;
        int64_t *v = hmap_get(L->coll, ck, 0, &fresh);
        if (!v) return -1;
        k = (*v)++;
    }
    if (peer >= 0) {
        root = 0;
        for (int64_t i = 0; i < n; i++)
            if (mem[i] == peer) root = i;
    }
    coll_steps(S, op, n, me, root, c->bytes[g], c->algo);
    if (S->oom) return -1;
    emit_steps(L, S, mem, x, g, comm, k);
    return 0;
}

static int is_p2p(int op) {
    return op == OP_INIT || op == OP_FINALIZE || op == OP_SEND || op == OP_ISEND || op == OP_SENDRECV ||
           op == OP_RECV || op == OP_IRECV || op == OP_SENDRECV_RECV || op == OP_WAIT || op == OP_PROBE;
}

/* ---- stream mode: a task's ops, their requests renumbered, appended to the file ------------------------- */

static int st_write(hv_rp_stream *st, const uint8_t *p, int64_t n) {
    while (n > 0) {
        ssize_t w = write((int)st->fd, p, (size_t)n);
        if (w < 0) {
            if (errno == EINTR) continue;
            st->ioerr = 1, st->err_no = errno;
            return -1;
        }
        p += w, n -= w;
    }
    return 0;
}

#define PUT(ptr, v) \
    do { \
        memcpy((ptr), &(v), sizeof(v)); \
        (ptr) += sizeof(v); \
    } while (0)

/* The task's request ids -> the task's slots: a request of one of its rows is id gb + its seq (gb = the trace's
 * row of its seq 0), a collective step's id cb + i (i in [0, ncoll)), the never-completed one anything else. */
static int64_t st_loc(int64_t id, int64_t gb, int64_t nrow, int64_t cb, int64_t ncoll) {
    if (id >= gb && id < gb + nrow) return id - gb;
    if (id >= cb && id < cb + ncoll) return nrow + (id - cb);
    return -1;
}

/* Per op of the task (n ops): whether it is the last of its match key's side in the task (its last send on that
 * key, or its last receive or probe): each side of a key is one task, so after it the core can give the key's
 * slot to another key once the other side is done too and its queues are empty. 0, or -1 (memory). */
static int st_last_uses(hv_rp_stream *st, int64_t n) {
    int64_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    if (cap > st->cset) {
        GROW_TO(st->set, cap);
        st->cset = cap;
    }
    GROW_TO(st->lastuse, n > 0 ? n : 1);
    for (int64_t i = 0; i < cap; i++) st->set[i] = -1;
    for (int64_t i = n - 1; i >= 0; i--) {
        int k = st->kind[i];
        st->lastuse[i] = 0;
        if (k != HV_RP_SEND && k != HV_RP_RECV && k != HV_RP_PROBE) continue;
        int64_t v = 2 * (int64_t)st->key[i] + (k == HV_RP_SEND);
        uint64_t j = ((uint64_t)v * 0x9E3779B97F4A7C15ull >> 17) & (uint64_t)(cap - 1);
        while (st->set[j] >= 0 && st->set[j] != v) j = (j + 1) & (uint64_t)(cap - 1);
        if (st->set[j] < 0) st->set[j] = v, st->lastuse[i] = 1;
    }
    return 0;
}

/* The task's ops (emitted since st->op0) written as records, with its requests renumbered: a request takes a slot
 * when posted and gives it back after the last wait that names it once posted (a wait before the post, or for no
 * request of the task, waits for id 0: never). 0, or -1 (memory, or a failed write: st->ioerr). */
static int st_task_end(lw *L, const task_pass *x, int64_t creq0) {
    hv_rp_stream *st = L->st;
    const int64_t n = L->nops - st->op0, nrow = x->nrow_t, ncoll = L->ncreq - creq0;
    const int64_t gb = x->gbase, cb = x->never + 1 + creq0, nloc = nrow + ncoll;
    if (nloc > st->cl) {
        GROW_TO(st->posted, nloc);
        GROW_TO(st->last, nloc);
        GROW_TO(st->slot, nloc);
        GROW_TO(st->freel, nloc);
        st->cl = nloc;
    }
    memset(st->posted, 0, (size_t)nloc);
    for (int64_t i = 0; i < nloc; i++) st->last[i] = -1;
    for (int64_t i = 0; i < n; i++) { /* each request's last wait after its post */
        int k = st->kind[i];
        if (k == HV_RP_SEND || k == HV_RP_RECV || k == HV_RP_PROBE) {
            int64_t r = st_loc(st->req[i], gb, nrow, cb, ncoll);
            if (r >= 0) st->posted[r] = 1;
        } else if (k == HV_RP_WAIT) {
            for (int64_t j = 0; j < st->peer[i]; j++) {
                int64_t r = st_loc(st->wreq[st->req[i] + j], gb, nrow, cb, ncoll);
                if (r >= 0 && st->posted[r]) st->last[r] = i;
            }
        }
    }
    int64_t bound = 25 * n + 4 * L->nwreq + 16;
    if (bound > st->cout) {
        GROW_TO(st->out, bound);
        st->cout = bound;
    }
    if (st_last_uses(st, n)) return -1;
    memset(st->posted, 0, (size_t)nloc);
    int64_t nfree = 0, npool = 0;
    const int64_t base = st->nreqs;
    uint8_t *o = st->out;
    for (int64_t i = 0; i < n; i++) {
        const int8_t k = st->kind[i], kb = (int8_t)(k | (st->lastuse[i] ? HV_RP_LAST_USE : 0));
        uint8_t *rec = o;
        PUT(o, kb);
        if (k == HV_RP_COMPUTE) {
            PUT(o, st->val[i]);
        } else if (k == HV_RP_WAIT) {
            int32_t cnt = st->peer[i], row = st->row[i];
            PUT(o, cnt);
            PUT(o, row);
            for (int64_t j = 0; j < cnt; j++) {
                int64_t r = st_loc(st->wreq[st->req[i] + j], gb, nrow, cb, ncoll);
                int32_t id = r >= 0 && st->posted[r] == 1 ? (int32_t)(base + st->slot[r]) : 0;
                PUT(o, id);
            }
            for (int64_t j = 0; j < cnt; j++) { /* slots free after their last wait */
                int64_t r = st_loc(st->wreq[st->req[i] + j], gb, nrow, cb, ncoll);
                if (r >= 0 && st->posted[r] == 1 && st->last[r] == i)
                    st->posted[r] = 2, st->freel[nfree++] = st->slot[r];
            }
        } else {
            int64_t r = st_loc(st->req[i], gb, nrow, cb, ncoll);
            int32_t id = 0;
            if (r >= 0) {
                st->slot[r] = nfree > 0 ? st->freel[--nfree] : (int32_t)npool++;
                st->posted[r] = 1;
                id = (int32_t)(base + st->slot[r]);
            }
            PUT(o, st->peer[i]);
            PUT(o, st->val[i]);
            PUT(o, st->key[i]);
            PUT(o, id);
            PUT(o, st->row[i]);
        }
        if (o - rec > st->maxrec) st->maxrec = o - rec;
    }
    st->nreqs += npool;
    int64_t len = o - st->out;
    if (st_write(st, st->out, len)) return -1;
    st->bytes += len;
    return 0;
}

/* One task's rows into ops; 0, or -1 to stop. */
static int lower_task(lw *L, steps_t *S, int64_t t) {
    hv_rp_lower_config *c = L->c;
    if (L->fill) c->task_off[t] = L->nops;
    if (L->fill) c->first_start[t] = INT64_MAX, c->last_end[t] = INT64_MIN;
    task_pass x = {.t = t,
                   .tg = c->task_base + t,
                   .base = c->row_off[t],
                   .nrow_t = c->row_off[t + 1] - c->row_off[t],
                   .never = nrows_all(c),
                   .gbase = c->row_base + c->row_off[t]};
    const int64_t creq0 = L->ncreq;
    if (L->st) {
        L->st->op0 = L->nops;
        L->nwreq = 0; /* a wait's requests: an offset into the task's own */
        c->byte_off[t] = L->st->bytes;
    }
    for (int64_t g = x.base; g < c->row_off[t + 1]; g++) {
        gap_and_measure(L, &x, g);
        const int op = c->op[g];
        if ((is_p2p(op) ? lower_p2p(L, &x, g, op) : lower_collective(L, S, &x, g, op)) != 0) return -1;
        if (L->oom) return -1;
    }
    if (L->fill) {
        c->mpi_ns[t] = x.mpi.sum;
        if (x.mpi.unsorted && mpi_resorted(L, x.base, c->row_off[t + 1], &c->mpi_ns[t])) return -1;
        c->mpi_ns[t] = c->mpi_ns[t] + (double)x.polls;
    }
    if (L->st && st_task_end(L, &x, creq0)) return -1;
    return 0;
}

/* a match key both of whose tasks are lowered (below `next`): (0, src, dst, comm, tag) or (1, comm, k, src, dst) */
static int key_done(const int64_t *k, int64_t next) {
    int64_t a = k[0] == 0 ? k[1] : k[3], b = k[0] == 0 ? k[2] : k[4];
    return a < next && b < next;
}

/* Stream mode: the keys no task still to lower can name leave the map (their ids stay given), when the map has
 * doubled since the last prune: the map then holds the keys of messages between a lowered and a later task (a
 * collective's messages have keys of their own per call). 0, or -1 if memory runs out. */
static int st_prune_keys(hv_rp_stream *st, int64_t next) {
    if (st->keys.n < 2 * st->kept + st->prune_min) return 0;
    if (hmap_prune(&st->keys, key_done, next)) return -1;
    st->kept = st->keys.n;
    return 0;
}

static int pass(lw *L) {
    hv_rp_lower_config *c = L->c;
    steps_t S;
    memset(&S, 0, sizeof S);
    int rc = 0;
    L->nops = L->nwreq = L->ncreq = 0;
    if (L->st) L->nops = L->st->nops, L->ncreq = L->st->ncreq;
    for (int64_t t = 0; t < c->ntasks && rc == 0; t++) rc = lower_task(L, &S, t);
    if (rc == 0 && L->fill) c->task_off[c->ntasks] = L->nops;
    if (rc == 0 && L->st) {
        c->byte_off[c->ntasks] = L->st->bytes;
        L->st->nops = L->nops, L->st->ncreq = L->ncreq;
        rc = st_prune_keys(L->st, c->task_base + c->ntasks);
    }
    free(S.st);
    free(S.m);
    return rc;
}

int hv_rp_lower_config_size(void) { return (int)sizeof(hv_rp_lower_config); }

int hv_rp_lower(hv_rp_lower_config *c) {
    lw L;
    memset(&L, 0, sizeof L);
    L.c = c;
    c->err = 0;
    L.st = c->stream;
    L.fill = c->kind != NULL || L.st != NULL;
    L.keys = L.st ? &L.st->keys : &L.keys_own;
    L.coll = L.st ? &L.st->coll : &L.coll_own;
    int rc = pass(&L);
    if (rc == 0) {
        c->nops = L.nops;
        c->nwreq = L.nwreq;
        c->nkeys = L.keys->n;
        c->nreqs = c->nrows + 1 + L.ncreq;
    }
    if (c->err) rc = 0; /* reported through err */
    hmap_free(&L.keys_own);
    hmap_free(&L.coll_own);
    free(L.iv);
    return rc;
}

void *hv_rp_stream_open(int64_t fd, int64_t prune_min) {
    hv_rp_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->fd = fd;
    st->prune_min = prune_min;
    st->nreqs = 1; /* id 0: never completed */
    return st;
}

int hv_rp_stream_close(void *stream, int64_t *out) {
    hv_rp_stream *st = stream;
    if (!st) return -1;
    out[0] = st->nops, out[1] = st->nkeys, out[2] = st->nreqs, out[3] = st->maxrec, out[4] = st->bytes;
    out[5] = st->err_no;
    int rc = st->ioerr ? -1 : 0;
    hmap_free(&st->keys);
    hmap_free(&st->coll);
    void *all[] = {st->kind,   st->peer, st->key,  st->row,   st->val, st->req,     st->wreq,
                   st->posted, st->last, st->slot, st->freel, st->out, st->lastuse, st->set};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(st);
    return rc;
}
