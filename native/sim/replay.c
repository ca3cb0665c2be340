/* Application replay core (see replay.h). Mirrors hpcvar.sim.replay_ref.RefEngine step by step:
 * the names below (push, complete, recompute, start, finish, step) are those of the Python
 * engine, and every floating-point expression is written in the same order. */
#include "replay.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the event heap: ordered by (time, insertion counter) like Python's heapq of tuples ------ */

enum { EV_TASK = 0, EV_LATENCY = 1, EV_FINISH = 3, EV_SEND_DONE = 4, EV_PROBE = 5 }; /* shared: flow events */

typedef struct {
    double t;
    int64_t cnt;
    int64_t obj; /* task, transfer, or request (EV_PROBE) */
    int64_t ver; /* unused */
    int32_t kind, pad;
} hv_ev;

typedef struct {
    hv_ev *a;
    int64_t n, cap, counter;
} hv_heap;

static inline int ev_less(const hv_ev *x, const hv_ev *y) { return x->t < y->t || (x->t == y->t && x->cnt < y->cnt); }

static int heap_push(hv_heap *h, double t, int kind, int64_t obj, int64_t ver) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 1024;
        hv_ev *a = realloc(h->a, (size_t)cap * sizeof *a);
        if (!a) return -1;
        h->a = a;
        h->cap = cap;
    }
    hv_ev e = {t, ++h->counter, obj, ver, kind, 0};
    int64_t i = h->n++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!ev_less(&e, &h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
    return 0;
}

static hv_ev heap_pop(hv_heap *h) {
    hv_ev top = h->a[0];
    hv_ev last = h->a[--h->n];
    int64_t i = 0, n = h->n;
    for (;;) {
        int64_t l = 2 * i + 1;
        if (l >= n) break;
        int64_t m = (l + 1 < n && ev_less(&h->a[l + 1], &h->a[l])) ? l + 1 : l;
        if (!ev_less(&h->a[m], &last)) break;
        h->a[i] = h->a[m];
        i = m;
    }
    if (n > 0) h->a[i] = last;
    return top;
}

/* ---- transfers: slots reused once a transfer is done and matched -------------------------- */

typedef struct {
    double nbytes, bw, lat, remaining, rate, last, data_start, end, posted;
    double et, st;     /* a shared transfer's pending events: its data end, its send's completion (buffered) */
    int64_t ecnt, scnt; /* ... their heap counters (-1: none pending); see flow events below */
    double env;       /* a rendezvous message: when its request reaches the receiver (what a probe waits for) */
    int32_t probe_rq; /* an eager message: the probe waiting for its transfer to end (finish), or -1 */
    int32_t row;      /* the send's row (diagnostics) */
    int64_t op, sreq, rreq, next; /* next: FIFO link in the unsent queue of its key, or free list */
    /* pairs in series (pair_serial): the transfer whose data holds its pair of tasks is in its source's list of such
     * holders (pnext, pprev) and keeps the pair's transfers waiting behind it (qhead, qtail, linked by qnext) */
    int64_t pnext, pprev, qhead, qtail, qnext;
    /* a shared transfer (contention models): its penalty, its backward links in the lists of its two resources and
     * in its component's (the forward ones are in hv_hot), its entry in the flow heap (-1: none) */
    double pen;
    int64_t rprev[2], cprev, aprev;
    int32_t src, dst;
    /* buffered: send_buffer applies; sdone: and the send completed */
    int8_t inter, eager, started, done, kind, buffered, sdone, pad;
} hv_xfer;

/* What a walk over the shared transfers reads, per transfer, kept apart and small (a walk over a component
 * touches one cache line per transfer): its arrival number (the reference's order of its active list), its two
 * resources and its next transfer in their lists, its component and its next there, its visit stamp. */
typedef struct { /* 48 bytes: slot numbers and resources in 32 bits */
    int64_t seq, stamp;
    int32_t res[2], rnext[2], cnext, anext, comp, hpos; /* hpos: its entry in the flow heap (-1: none) */
} hv_hot;

typedef struct { /* an entry of the flow heap: a transfer's earliest pending flow event */
    double t;
    int64_t c, xi;
} hv_fk;

static const int KIND_RANK[4] = {0, 1, 1, 2}; /* none, out, in, in-out */

typedef struct {
    hv_rp_config *c;
    hv_heap heap;
    int64_t fmin; /* flow events: the shared transfer with the earliest pending one (-1: none) */
    int fmin_send; /* ... and whether it is its send's completion (else its data end) */
    /* the flow heap: the shared transfers with a pending flow event, by their earliest (a heap when fh_ok, else
     * in any order); fkey: the key of fmin's event. fglobal: one component holds every shared transfer, and fh is
     * not kept (keys are read from the transfers, the earliest found on the way) */
    hv_fk *fh, fkey;
    int64_t nfh;
    int fh_ok, fglobal;
    hv_xfer *x;
    int64_t nx, xcap, free_head;
    double *done_at; /* per request: completion time, or -1 */
    int32_t *waiting; /* per request: the task blocked on it, or -1 */
    int64_t *pending_row;
    int32_t *us_head, *us_tail; /* per key: FIFO of unsent transfers (slot ids) */
    int32_t *ur_head, *ur_tail; /* per key: FIFO of posted receives (their requests) */
    int32_t *ur_next; /* per request: the next receive in its FIFO */
    struct hv_cursor *cur; /* streaming: per task, its ops read from the file */
    /* streaming: the match keys in use -> their queue slots (the queues above are per slot): a hash map (km_*,
     * key -1: empty) and per slot its key, the sides done (1 send, 2 receive), a free list */
    int32_t *km_key, *km_slot;
    int64_t km_cap, km_n;
    int32_t *ks_key, *ks_free;
    int8_t *ks_done;
    int64_t ks_n, ks_cap, ks_nfree;
    int64_t *probing; /* per key: the request of a probe waiting for a send to be posted, or -1 */
    /* the transfers in their data phase (contention models): nactive of them, in the lists of their resources
     * (rhead: per resource, its first transfer; a resource is a node's link out, its number, or in, nnodes + it),
     * numbered in arrival order (seqc) */
    int64_t nactive, seqc, epoch, ahead, atail; /* ahead, atail: all of them in arrival order (anext, aprev) */
    int64_t *phead; /* pairs in series: per task, the first transfer holding one of its pairs as the source (or -1) */
    hv_hot *h; /* per transfer slot */
    int64_t *chead, *ctail, *csize, ncomp, cfree; /* the components (cfree: a free list linked by chead) */
    int64_t *rhead, *rstamp;
    /* the view the models compute over (one conflict component, in arrival order): its transfers, 2 resources
     * each, their penalties; upd: the transfers whose penalties were recomputed */
    int64_t *view, *vres, nview, *upd;
    double *pen;
    int8_t *frozen;
    /* per-task accounting of the current row (comm time) */
    int64_t *cur_row;
    double *cur_start, *cur_end;
    int64_t ops_done, next_progress;
    /* per-node scratch for the models */
    int64_t *n_out, *n_in, *top, *card, *top2, *card2;
    double *cap;
    int64_t *users;
    int64_t *deg; /* the shared transfers per resource (kept by res_link and res_unlink) */
    int8_t *mark;
    int64_t *touched;
    /* myrinet scratch, grown on demand */
    int64_t *members;
    uint64_t *bits;
    int64_t bits_cap;
    int64_t *coef, *hits, *order;
    /* myrinet memo: a component's penalties keyed by its members' (source node, destination node), in order */
    struct hv_memo *memo;
} hv_rp;

static int push(hv_rp *s, double t, int kind, int64_t obj, int64_t ver) {
    return heap_push(&s->heap, t, kind, obj, ver);
}

static int complete(hv_rp *s, int64_t rq, double t) {
    hv_rp_config *c = s->c;
    s->done_at[rq] = t;
    int64_t task = s->waiting[rq];
    if (task >= 0) {
        s->waiting[rq] = -1;
        c->blocked[task] -= 1;
        if (c->blocked[task] == 0) {
            if (t > c->clock[task]) c->clock[task] = t;
            return push(s, c->clock[task], EV_TASK, task, 0);
        }
    }
    return 0;
}

/* max-min fair shares (progressive filling, as hpcvar.models.sharing.maxmin_shares) -> pen: the reference's
 * operations in its order, over the compact resources of the shared transfers (s->vres). A resource is the
 * source node's link out (its node number) or the destination node's link in (nnodes + its node), capacity 1.
 * The view is a whole component (s->deg: its transfers per resource). */
static void maxmin(hv_rp *s) {
    const int64_t n = s->nview, *ar = s->vres;
    double *rate = s->pen, *cap = s->cap;
    int64_t *users = s->users, *touched = s->touched, nt = 0;
    int8_t *frozen = s->frozen;
    if (s->deg[ar[0]] == n || s->deg[ar[1]] == n) {
        /* A resource every transfer uses (a fan-in's link into its root; one of the first transfer's two): the
         * first round's increment is its 1.0 / n (no resource has more users, so none a smaller share), which
         * fills it (1 - n x (1/n) is within 1e-12 of 0) and freezes every transfer at 0.0 + 1.0 / n: the same
         * operations, and so the same results, as the rounds below. */
        const double pen = 1.0 / (0.0 + 1.0 / (double)n);
        for (int64_t k = 0; k < n; k++) rate[k] = pen;
        return;
    }
    for (int64_t k = 0; k < n; k++) { /* resources in order of first sight, and their users */
        for (int j = 0; j < 2; j++) {
            const int64_t r = ar[2 * k + j];
            if (!s->mark[r]) s->mark[r] = 1, cap[r] = 1.0, users[r] = 0, touched[nt++] = r;
            users[r]++;
        }
        rate[k] = 0.0;
        frozen[k] = 0;
    }
    for (int64_t left = n, round = 0; left > 0; round++) {
        if (round > 0) { /* the users still growing */
            for (int64_t i = 0; i < nt; i++) users[touched[i]] = 0;
            for (int64_t k = 0; k < n; k++)
                if (!frozen[k]) users[ar[2 * k]]++, users[ar[2 * k + 1]]++;
        }
        double inc = 0.0;
        int have = 0;
        for (int64_t i = 0; i < nt; i++) {
            const int64_t r = touched[i];
            if (users[r] > 0) {
                const double v = cap[r] / (double)users[r];
                if (!have || v < inc) inc = v, have = 1;
            }
        }
        for (int64_t i = 0; i < nt; i++) {
            const int64_t r = touched[i];
            if (users[r] > 0) cap[r] -= inc * (double)users[r];
        }
        for (int64_t k = 0; k < n; k++) { /* a transfer grows until one of its resources is full */
            if (frozen[k]) continue;
            rate[k] += inc;
            if (cap[ar[2 * k]] <= 1e-12 || cap[ar[2 * k + 1]] <= 1e-12) frozen[k] = 1, left--;
        }
    }
    for (int64_t i = 0; i < nt; i++) s->mark[touched[i]] = 0;
    for (int64_t k = 0; k < n; k++) rate[k] = 1.0 / rate[k];
}

static double side(int64_t deg, int strong, int64_t card, double beta, double gamma) {
    if (deg == 1) return 1.0;
    if (strong) return (double)deg * beta * (1.0 + gamma * (double)(deg - card));
    return (double)deg * beta * (1.0 - gamma / (double)card);
}

/* the gige degree model (as hpcvar.models.sharing._gige) -> pen */
static void gige(hv_rp *s) {
    hv_rp_config *c = s->c;
    const int64_t n = s->nview, nn = c->nnodes, *ar = s->vres; /* the nodes: ar[2k], ar[2k + 1] - nn */
    for (int64_t k = 0; k < n; k++) {
        s->n_out[ar[2 * k]]++;
        s->n_in[ar[2 * k + 1] - nn]++;
    }
    /* top[src]: the largest in-degree among the source's comms, card: how many reach it;
     * top2[dst]: the largest out-degree among the destination's comms, card2: how many */
    for (int64_t k = 0; k < n; k++) {
        int64_t a = ar[2 * k], b = ar[2 * k + 1] - nn, di = s->n_in[b], dout = s->n_out[a];
        if (di > s->top[a]) s->top[a] = di, s->card[a] = 1;
        else if (di == s->top[a]) s->card[a]++;
        if (dout > s->top2[b]) s->top2[b] = dout, s->card2[b] = 1;
        else if (dout == s->top2[b]) s->card2[b]++;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t a = ar[2 * k], b = ar[2 * k + 1] - nn, dout = s->n_out[a], di = s->n_in[b];
        double po = side(dout, di == s->top[a], s->card[a], c->beta, c->gamma_out);
        double pi = side(di, dout == s->top2[b], s->card2[b], c->beta, c->gamma_in);
        double p = 1.0;
        if (po > p) p = po;
        if (pi > p) p = pi;
        s->pen[k] = p;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t a = ar[2 * k], b = ar[2 * k + 1] - nn;
        s->n_out[a] = s->n_in[b] = s->top[a] = s->card[a] = s->top2[b] = s->card2[b] = 0;
    }
}

/* ---- myrinet: Stop&Go per connected component (as hpcvar.models.sharing._myrinet) ---------- */

/* Python's random.Random(seed): MT19937 seeded by init_by_array with abs(seed) in 32-bit words */
typedef struct {
    uint32_t mt[624];
    int mti;
} hv_mt;

static void mt_init(hv_mt *m, uint32_t s) {
    m->mt[0] = s;
    for (int i = 1; i < 624; i++) m->mt[i] = 1812433253u * (m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) + (uint32_t)i;
    m->mti = 624;
}

static void mt_seed(hv_mt *m, int64_t seed) {
    uint64_t a = seed < 0 ? (uint64_t)(-(seed + 1)) + 1 : (uint64_t)seed;
    uint32_t key[2] = {(uint32_t)a, (uint32_t)(a >> 32)};
    int len = key[1] ? 2 : 1;
    mt_init(m, 19650218u);
    int i = 1, j = 0;
    for (int k = 624 > len ? 624 : len; k; k--) {
        m->mt[i] = (m->mt[i] ^ ((m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++, j++;
        if (i >= 624) m->mt[0] = m->mt[623], i = 1;
        if (j >= len) j = 0;
    }
    for (int k = 623; k; k--) {
        m->mt[i] = (m->mt[i] ^ ((m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= 624) m->mt[0] = m->mt[623], i = 1;
    }
    m->mt[0] = 0x80000000u;
}

static uint32_t mt_next(hv_mt *m) {
    static const uint32_t mag01[2] = {0u, 0x9908b0dfu};
    uint32_t y;
    if (m->mti >= 624) {
        int kk;
        for (kk = 0; kk < 624 - 397; kk++) {
            y = (m->mt[kk] & 0x80000000u) | (m->mt[kk + 1] & 0x7fffffffu);
            m->mt[kk] = m->mt[kk + 397] ^ (y >> 1) ^ mag01[y & 1u];
        }
        for (; kk < 623; kk++) {
            y = (m->mt[kk] & 0x80000000u) | (m->mt[kk + 1] & 0x7fffffffu);
            m->mt[kk] = m->mt[kk + (397 - 624)] ^ (y >> 1) ^ mag01[y & 1u];
        }
        y = (m->mt[623] & 0x80000000u) | (m->mt[0] & 0x7fffffffu);
        m->mt[623] = m->mt[396] ^ (y >> 1) ^ mag01[y & 1u];
        m->mti = 0;
    }
    y = m->mt[m->mti++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

static int64_t mt_below(hv_mt *m, int64_t n) { /* random._randbelow_with_getrandbits, n < 2^32 */
    int k = 64 - __builtin_clzll((uint64_t)n);
    int64_t r = (int64_t)(mt_next(m) >> (32 - k));
    while (r >= n) r = (int64_t)(mt_next(m) >> (32 - k));
    return r;
}

typedef struct {
    int64_t n, W, count, max_states, budget;
    const uint64_t *compat; /* n x W */
    uint64_t *buf; /* per depth: r, p, x, cand (4 x W) */
    int64_t *coef;
    int err;
} hv_bk;

static void bk_expand(hv_bk *b, int64_t depth) {
    int64_t W = b->W;
    uint64_t *r = b->buf + 4 * W * depth, *p = r + W, *x = p + W, *cand = x + W;
    if (--b->budget < 0) {
        b->err = 1;
        return;
    }
    int empty = 1;
    for (int64_t w = 0; w < W; w++)
        if (p[w] | x[w]) {
            empty = 0;
            break;
        }
    if (empty) {
        if (++b->count > b->max_states) {
            b->err = 1;
            return;
        }
        for (int64_t w = 0; w < W; w++)
            for (uint64_t m = r[w]; m; m &= m - 1) b->coef[64 * w + __builtin_ctzll(m)]++;
        return;
    }
    int64_t best = -1, pivot = 0;
    for (int64_t w = 0; w < W; w++)
        for (uint64_t m = p[w] | x[w]; m; m &= m - 1) {
            int64_t u = 64 * w + __builtin_ctzll(m), cnt = 0;
            const uint64_t *cu = b->compat + W * u;
            for (int64_t v = 0; v < W; v++) cnt += __builtin_popcountll(cu[v] & p[v]);
            if (cnt > best) best = cnt, pivot = u;
        }
    const uint64_t *cp = b->compat + W * pivot;
    for (int64_t w = 0; w < W; w++) cand[w] = p[w] & ~cp[w];
    uint64_t *r2 = cand + W, *p2 = r2 + W, *x2 = p2 + W;
    for (int64_t w = 0; w < W; w++)
        for (uint64_t m = cand[w]; m; m &= m - 1) {
            uint64_t low = m & -m;
            int64_t v = 64 * w + __builtin_ctzll(m);
            const uint64_t *cv = b->compat + W * v;
            for (int64_t k = 0; k < W; k++) r2[k] = r[k], p2[k] = p[k] & cv[k], x2[k] = x[k] & cv[k];
            r2[w] |= low;
            bk_expand(b, depth + 1);
            if (b->err) return;
            p[w] &= ~low;
            x[w] |= low;
        }
}

static int myr_grow(hv_rp *s, int64_t need) {
    if (need <= s->bits_cap) return 0;
    uint64_t *p = realloc(s->bits, (size_t)need * sizeof *p);
    if (!p) return -1;
    s->bits = p;
    s->bits_cap = need;
    return 0;
}

/* The conflict masks (conf: the same source or destination node) and the complement graph (compat) of the
 * component's m communications, W words a row. */
static void conflict_masks(hv_rp *s, const int64_t *comp, int64_t m, int64_t W, uint64_t *conf, uint64_t *compat) {
    const int32_t *node = s->c->node_of;
    memset(conf, 0, (size_t)(2 * m * W) * sizeof *conf);
    for (int64_t i = 0; i < m; i++) {
        hv_xfer *a = &s->x[s->view[comp[i]]];
        for (int64_t j = 0; j < m; j++) {
            hv_xfer *b = &s->x[s->view[comp[j]]];
            if (i != j && (node[a->src] == node[b->src] || node[a->dst] == node[b->dst]))
                conf[i * W + j / 64] |= 1ull << (j % 64);
        }
        for (int64_t w = 0; w < W; w++) {
            uint64_t full = (w == W - 1 && m % 64) ? (1ull << (m % 64)) - 1 : ~0ull;
            compat[i * W + w] = full & ~conf[i * W + w];
        }
        compat[i * W + i / 64] &= ~(1ull << (i % 64));
    }
}

/* The exact method: every maximal state (Bron-Kerbosch on compat); cnt[i] the states in which i sends.
 * Returns the number of states, or -1 beyond myr_max_states. */
static int64_t count_states(hv_rp *s, int64_t m, int64_t W, uint64_t *conf, uint64_t *compat, int64_t *cnt) {
    hv_rp_config *c = s->c;
    hv_bk b = {m, W, 0, c->myr_max_states, 50 * c->myr_max_states + 10000, compat, conf + 2 * m * W, cnt, 0};
    for (int64_t i = 0; i < m; i++) cnt[i] = 0;
    uint64_t *r = b.buf, *p = r + W, *x = p + W;
    for (int64_t w = 0; w < W; w++) {
        r[w] = x[w] = 0;
        p[w] = (w == W - 1 && m % 64) ? (1ull << (m % 64)) - 1 : ~0ull;
    }
    bk_expand(&b, 0);
    return b.err ? -1 : b.count;
}

/* The sampling method: myr_samples random greedy maximal states; frac[i] the share in which i sends. */
static void sample_states(hv_rp *s, int64_t m, int64_t W, uint64_t *conf, int64_t *cnt, double *frac) {
    hv_rp_config *c = s->c;
    hv_mt mt;
    mt_seed(&mt, c->myr_seed);
    int64_t *order = s->order;
    uint64_t *blocked = conf + 2 * m * W;
    for (int64_t i = 0; i < m; i++) order[i] = i, cnt[i] = 0;
    for (int64_t k = 0; k < c->myr_samples; k++) {
        for (int64_t i = m - 1; i > 0; i--) {
            int64_t j = mt_below(&mt, i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        memset(blocked, 0, (size_t)W * sizeof *blocked);
        for (int64_t i = 0; i < m; i++) {
            int64_t v = order[i];
            if (!(blocked[v / 64] >> (v % 64) & 1)) {
                cnt[v]++;
                for (int64_t w = 0; w < W; w++) blocked[w] |= conf[v * W + w];
                blocked[v / 64] |= 1ull << (v % 64);
            }
        }
    }
    for (int64_t i = 0; i < m; i++) frac[i] = (double)cnt[i] / (double)c->myr_samples;
}

/* ---- myrinet memo ----------------------------------------------------------------------------------------
 *
 * A component's penalties depend only on its members' source and destination nodes, in order (the conflicts,
 * the states and the minimum over a source node compare nodes; the sampling method reseeds its generator per
 * component), and a replay meets the same components again and again (every iteration of a loop). The memo
 * keeps them: a hash table of MEMO_SLOTS slots over at most MEMO_MEMBERS members in all (then it stops
 * storing); a hit copies the stored penalties, the same doubles the computation gives. */

#define MEMO_SLOTS 4096 /* a power of two */
#define MEMO_PROBES 8 /* linear probing: slots tried per key */
#define MEMO_MEMBERS 262144 /* members stored at most (6 MiB of keys and penalties) */

typedef struct hv_memo {
    struct {
        uint64_t h;
        int64_t off, m; /* m = 0: empty */
    } slot[MEMO_SLOTS];
    int32_t *keys; /* 2 per stored member */
    double *pens; /* 1 per stored member */
    int64_t used, cap;
    int32_t *cur; /* the key being looked up (2 m) */
    int64_t cur_cap;
} hv_memo;

static void memo_free(hv_memo *mo) {
    if (!mo) return;
    free(mo->keys);
    free(mo->pens);
    free(mo->cur);
    free(mo);
}

/* The key of a component into mo->cur and its hash; -1 without memory (the memo is then not used). */
static int memo_key(hv_rp *s, hv_memo *mo, const int64_t *comp, int64_t m, uint64_t *h) {
    const int32_t *node = s->c->node_of;
    if (2 * m > mo->cur_cap) {
        int32_t *p = realloc(mo->cur, (size_t)(2 * m) * sizeof *p);
        if (!p) return -1;
        mo->cur = p;
        mo->cur_cap = 2 * m;
    }
    uint64_t x = 0xcbf29ce484222325ULL ^ (uint64_t)m;
    for (int64_t i = 0; i < m; i++) {
        const hv_xfer *t = &s->x[s->view[comp[i]]];
        mo->cur[2 * i] = node[t->src];
        mo->cur[2 * i + 1] = node[t->dst];
        x = (x ^ ((uint64_t)(uint32_t)node[t->src] << 32 | (uint32_t)node[t->dst])) * 0x100000001b3ULL;
        x ^= x >> 29;
    }
    *h = x;
    return 0;
}

/* 1 and the penalties written when the component is in the memo; else 0 and *free_slot a slot for it (-1:
 * none). */
static int memo_get(hv_rp *s, hv_memo *mo, const int64_t *comp, int64_t m, uint64_t h, int64_t *free_slot) {
    *free_slot = -1;
    for (int64_t k = 0; k < MEMO_PROBES; k++) {
        int64_t j = (int64_t)((h + (uint64_t)k) & (MEMO_SLOTS - 1));
        if (mo->slot[j].m == 0) {
            *free_slot = j;
            return 0;
        }
        if (mo->slot[j].h != h || mo->slot[j].m != m ||
            memcmp(mo->keys + 2 * mo->slot[j].off, mo->cur, (size_t)(2 * m) * sizeof *mo->cur))
            continue;
        const double *p = mo->pens + mo->slot[j].off;
        for (int64_t i = 0; i < m; i++) s->pen[comp[i]] = p[i];
        return 1;
    }
    return 0;
}

/* Store the component's penalties in slot j, while the memo has room (else nothing). */
static void memo_put(hv_rp *s, hv_memo *mo, const int64_t *comp, int64_t m, uint64_t h, int64_t j) {
    if (j < 0 || mo->used + m > MEMO_MEMBERS) return;
    if (mo->used + m > mo->cap) {
        int64_t cap = mo->cap ? mo->cap : 4096;
        while (cap < mo->used + m) cap *= 2;
        int32_t *k = realloc(mo->keys, (size_t)(2 * cap) * sizeof *k);
        if (!k) return;
        mo->keys = k;
        double *p = realloc(mo->pens, (size_t)cap * sizeof *p);
        if (!p) return;
        mo->pens = p;
        mo->cap = cap;
    }
    memcpy(mo->keys + 2 * mo->used, mo->cur, (size_t)(2 * m) * sizeof *mo->cur);
    for (int64_t i = 0; i < m; i++) mo->pens[mo->used + i] = s->pen[comp[i]];
    mo->slot[j].h = h;
    mo->slot[j].off = mo->used;
    mo->slot[j].m = m;
    mo->used += m;
}

static int myrinet_compute(hv_rp *s, const int64_t *comp, int64_t m);

/* one component: positions comp[0..m) of the active list -> pen (from the memo, or computed and stored) */
static int myrinet_component(hv_rp *s, const int64_t *comp, int64_t m) {
    if (m == 1) { /* one state in which it sends: penalty 1 (both methods) */
        s->pen[comp[0]] = 1.0;
        return 0;
    }
    if (!s->memo) s->memo = calloc(1, sizeof *s->memo);
    hv_memo *mo = s->memo;
    uint64_t h = 0;
    if (!mo || memo_key(s, mo, comp, m, &h)) return myrinet_compute(s, comp, m);
    int64_t j;
    if (memo_get(s, mo, comp, m, h, &j)) return 0;
    int rc = myrinet_compute(s, comp, m);
    if (!rc) memo_put(s, mo, comp, m, h, j);
    return rc;
}

/* The penalties of a component of m >= 2 members. */
static int myrinet_compute(hv_rp *s, const int64_t *comp, int64_t m) {
    hv_rp_config *c = s->c;
    const int32_t *node = c->node_of;
    int64_t W = (m + 63) / 64;
    if (myr_grow(s, 2 * m * W + 4 * W * (m + 2))) return HV_RP_ENOMEM;
    uint64_t *conf = s->bits, *compat = conf + m * W;
    conflict_masks(s, comp, m, W, conf, compat);
    double *frac = (double *)s->hits; /* reuse: hits as int64 first, then fractions below */
    int64_t *cnt = s->coef;
    int64_t states = 0;
    if (c->myr_method == 0) {
        states = count_states(s, m, W, conf, compat, cnt);
        if (states < 0) {
            c->error_size = m;
            return HV_RP_ESTATES;
        }
    } else {
        sample_states(s, m, W, conf, cnt, frac);
        for (int64_t i = 0; i < m; i++)
            if (cnt[i] == 0) { /* never sends in the samples: no penalty (the reference's error) */
                c->error_size = m;
                return HV_RP_ESAMPLES;
            }
    }
    /* each communication takes the minimum coefficient among those leaving its source node */
    for (int64_t i = 0; i < m; i++) {
        int32_t src = node[s->x[s->view[comp[i]]].src];
        int64_t mc = -1;
        double mf = 0.0;
        for (int64_t j = 0; j < m; j++) {
            if (node[s->x[s->view[comp[j]]].src] != src) continue;
            if (c->myr_method == 0) {
                if (mc < 0 || cnt[j] < mc) mc = cnt[j];
            } else if (mc < 0 || frac[j] < mf) {
                mf = frac[j];
                mc = 0;
            }
        }
        if (c->myr_method == 0) s->pen[comp[i]] = (double)states / (double)mc;
        else s->pen[comp[i]] = 1.0 / mf;
    }
    return 0;
}

/* ---- flow events -----------------------------------------------------------------------------------
 *
 * The reference pushes a new data-end event (and, for a buffered send, a send-completion event) for every
 * shared transfer whose rate a recomputation changes, and skips the stale ones when they come out of the heap:
 * with n transfers sharing a link, every start and end of one of them pushes n events. Here a shared transfer
 * keeps its one pending event of each kind, (time, counter), with the counter the reference's push would take
 * (the same global counter as the heap's), and the event loop takes the earliest of the heap's top and of these
 * flow events, in the same (time, counter) order: the same events run in the same order, without the stale
 * ones (which did nothing but count: c->nevents still counts them, as every push). */

static inline int key_less(double t1, int64_t c1, double t2, int64_t c2) { return t1 < t2 || (t1 == t2 && c1 < c2); }

/* The flow heap: the shared transfers with a pending flow event, an indexed binary heap ordered by the earliest of
 * their two events, (time, counter), as the event heap orders its events; the earliest pending flow event is at its
 * top. An entry carries its key (sifts compare entries, not transfers); a transfer knows its entry (hpos). */

static inline int fk_less(const hv_fk *a, const hv_fk *b) { return key_less(a->t, a->c, b->t, b->c); }

static void fh_up(hv_rp *s, int64_t i) {
    const hv_fk e = s->fh[i];
    while (i > 0) {
        const int64_t p = (i - 1) / 2;
        if (!fk_less(&e, &s->fh[p])) break;
        s->fh[i] = s->fh[p];
        s->h[s->fh[i].xi].hpos = i;
        i = p;
    }
    s->fh[i] = e;
    s->h[e.xi].hpos = i;
}

/* Sift entry i down; its moves recorded in the transfers when pos (else the caller records them). */
static void fh_down(hv_rp *s, int64_t i, int pos) {
    const hv_fk e = s->fh[i];
    const int64_t n = s->nfh;
    for (;;) {
        const int64_t l = 2 * i + 1;
        if (l >= n) break;
        const int64_t m = (l + 1 < n && fk_less(&s->fh[l + 1], &s->fh[l])) ? l + 1 : l;
        if (!fk_less(&s->fh[m], &e)) break;
        s->fh[i] = s->fh[m];
        if (pos) s->h[s->fh[i].xi].hpos = i;
        i = m;
    }
    s->fh[i] = e;
    if (pos) s->h[e.xi].hpos = i;
}

/* The earliest of the transfer's pending flow events (et, ecnt; st, scnt; counter -1: none) into e; 0: none. */
static inline int flow_key(const hv_xfer *x, int64_t xi, hv_fk *e) {
    if (x->scnt >= 0 && (x->ecnt < 0 || key_less(x->st, x->scnt, x->et, x->ecnt))) *e = (hv_fk){x->st, x->scnt, xi};
    else *e = (hv_fk){x->et, x->ecnt, xi};
    return x->ecnt >= 0 || x->scnt >= 0;
}

/* The transfer's pending flow events changed: its entry's key and place (in place when the entries are not a heap:
 * a removal takes the last entry's place). */
static void flow_update(hv_rp *s, int64_t xi) {
    if (s->fglobal) return; /* its key is read from it */
    hv_hot *x = &s->h[xi];
    hv_fk e;
    const int has = flow_key(&s->x[xi], xi, &e);
    if (!s->fh_ok) {
        if (has) {
            if (x->hpos < 0) x->hpos = (int32_t)s->nfh++;
            s->fh[x->hpos] = e;
        } else if (x->hpos >= 0) {
            const int64_t i = x->hpos;
            x->hpos = -1;
            if (i != --s->nfh) s->fh[i] = s->fh[s->nfh], s->h[s->fh[i].xi].hpos = i;
        }
        return;
    }
    if (x->hpos < 0) {
        if (!has) return;
        s->fh[s->nfh] = e;
        fh_up(s, s->nfh++);
        return;
    }
    const int64_t i = x->hpos;
    if (has) {
        s->fh[i] = e;
        fh_up(s, i);
        fh_down(s, x->hpos, 1);
        return;
    }
    x->hpos = -1;
    const hv_fk last = s->fh[--s->nfh];
    if (i == s->nfh) return;
    s->fh[i] = last;
    fh_up(s, i);
    fh_down(s, s->h[last.xi].hpos, 1);
}

/* The transfer's key changed, as one of many: its entry written in place (or added); the entries are no longer a
 * heap (the earliest is found by a scan, as long as many keys change at a time). */
static inline void flow_set(hv_rp *s, hv_xfer *x, int64_t xi) {
    hv_fk e;
    flow_key(x, xi, &e);
    hv_hot *h = &s->h[xi];
    if (h->hpos < 0) h->hpos = (int32_t)s->nfh++;
    s->fh[h->hpos] = e;
    s->fh_ok = 0;
}

/* The heap rebuilt bottom-up (linear in its size, where n sifts would take n log of it), then each entry's place
 * recorded. */
static void flow_rebuild(hv_rp *s) {
    for (int64_t i = s->nfh / 2 - 1; i >= 0; i--) fh_down(s, i, 0);
    for (int64_t i = 0; i < s->nfh; i++) s->h[s->fh[i].xi].hpos = i;
    s->fh_ok = 1;
}

/* The earliest pending flow event (s->fmin: its transfer, s->fkey: its key, s->fmin_send). */
static void flow_min(hv_rp *s) {
    s->fmin = -1;
    if (s->fglobal) { /* from the transfers */
        hv_fk e;
        for (int64_t xi = s->ahead; xi >= 0; xi = s->h[xi].anext)
            if (flow_key(&s->x[xi], xi, &e) && (s->fmin < 0 || fk_less(&e, &s->fkey))) s->fkey = e, s->fmin = xi;
    } else if (s->nfh) {
        int64_t b = 0;
        if (!s->fh_ok)
            for (int64_t i = 1; i < s->nfh; i++)
                if (fk_less(&s->fh[i], &s->fh[b])) b = i;
        s->fkey = s->fh[b];
        s->fmin = s->fkey.xi;
    }
    if (s->fmin >= 0) s->fmin_send = s->fkey.c == s->x[s->fmin].scnt;
}

/* Leave the global mode: every shared transfer's key into the flow heap's entries (not yet a heap). */
static void flow_entries(hv_rp *s) {
    hv_fk e;
    s->nfh = 0;
    for (int64_t xi = s->ahead; xi >= 0; xi = s->h[xi].anext) {
        s->h[xi].hpos = -1;
        if (flow_key(&s->x[xi], xi, &e)) s->fh[s->h[xi].hpos = (int32_t)s->nfh++] = e;
    }
    s->fh_ok = 0;
    s->fglobal = 0;
}

/* The kind of conflict each shared transfer meets (another one out of its source node, into its destination
 * node, both), kept as the worst so far, from the shared transfers per resource (s->deg, kept by res_link and
 * res_unlink: a resource's transfers are all in its component, the view). */
static void conflict_kinds(hv_rp *s) {
    const int64_t n = s->nview, *ar = s->vres, *deg = s->deg;
    for (int64_t k = 0; k < n; k++) {
        hv_xfer *x = &s->x[s->view[k]];
        const int o = deg[ar[2 * k]] > 1, i = deg[ar[2 * k + 1]] > 1;
        const int kd = o && i ? 3 : o ? 1 : i ? 2 : 0;
        if (KIND_RANK[kd] > KIND_RANK[(int)x->kind]) x->kind = (int8_t)kd;
    }
}

/* ---- recomputation by conflict component ----------------------------------------------------------------
 *
 * Every model computes a transfer's penalty from its conflict component alone (the transfers linked to it by a
 * shared source or destination node, step by step): gige from the degrees of its nodes and their neighbours',
 * myrinet per component (its memo keys on the component), maxmin by progressive filling per component (as the
 * reference, hpcvar.models.sharing.maxmin_shares). So when a transfer starts or ends, only its component can
 * change (two, when its end splits one): those are recomputed, their transfers in the reference's order (arrival),
 * and every other transfer keeps its rate, as it would in the reference's recomputation of all (its rate is
 * unchanged: no push).
 *
 * The components are kept as the transfers come and go: a graph whose vertices are the resources (a node's link
 * out, its number; its link in, nnodes + its number) and whose edges are the shared transfers. Each component
 * lists its transfers in arrival order (chead, ctail; cnext in hv_hot, cprev in hv_xfer). A transfer that starts
 * joins the component of its resources (merging two: their lists merged by arrival); one that ends may split its
 * component in two, which a search from both of its resources at once finds, at the cost of the smaller part. */

static int64_t comp_new(hv_rp *s) {
    int64_t c = s->cfree;
    if (c >= 0) s->cfree = s->chead[c];
    else c = s->ncomp++;
    s->chead[c] = s->ctail[c] = -1;
    s->csize[c] = 0;
    return c;
}

static void comp_append(hv_rp *s, int64_t c, int64_t xi) {
    s->h[xi].comp = c;
    s->h[xi].cnext = -1;
    s->x[xi].cprev = s->ctail[c];
    if (s->ctail[c] >= 0) s->h[s->ctail[c]].cnext = xi;
    else s->chead[c] = xi;
    s->ctail[c] = xi;
    s->csize[c]++;
}

static void comp_unlink(hv_rp *s, int64_t xi) {
    const int64_t c = s->h[xi].comp, p = s->x[xi].cprev, nx = s->h[xi].cnext;
    if (p >= 0) s->h[p].cnext = nx;
    else s->chead[c] = nx;
    if (nx >= 0) s->x[nx].cprev = p;
    else s->ctail[c] = p;
    s->csize[c]--;
}

/* Components a and b become one (a), its list merged by arrival. */
static int64_t comp_merge(hv_rp *s, int64_t a, int64_t b) {
    hv_hot *h = s->h;
    int64_t i = s->chead[a], j = s->chead[b];
    s->chead[a] = s->ctail[a] = -1;
    s->csize[a] = 0;
    while (i >= 0 || j >= 0) {
        int64_t xi;
        if (j < 0 || (i >= 0 && h[i].seq < h[j].seq)) xi = i, i = h[i].cnext;
        else xi = j, j = h[j].cnext;
        comp_append(s, a, xi);
    }
    s->chead[b] = s->cfree; /* b is free */
    s->cfree = b;
    return a;
}

/* A transfer joins the shared ones: at the head of its resources' lists, at the end of its component's. */
static void res_link(hv_rp *s, int64_t xi) {
    hv_xfer *x = &s->x[xi];
    hv_hot *h = &s->h[xi];
    h->seq = s->seqc++;
    h->stamp = 0;
    h->anext = -1;
    x->aprev = s->atail;
    if (s->atail >= 0) s->h[s->atail].anext = xi;
    else s->ahead = xi;
    s->atail = xi;
    h->res[0] = s->c->node_of[x->src];
    h->res[1] = s->c->nnodes + s->c->node_of[x->dst];
    const int64_t f0 = s->rhead[h->res[0]], f1 = s->rhead[h->res[1]];
    const int64_t ca = f0 >= 0 ? s->h[f0].comp : -1, cb = f1 >= 0 ? s->h[f1].comp : -1;
    int64_t c;
    if (ca < 0 && cb < 0) c = comp_new(s);
    else if (ca < 0) c = cb;
    else if (cb < 0 || ca == cb) c = ca;
    else c = s->csize[ca] >= s->csize[cb] ? comp_merge(s, ca, cb) : comp_merge(s, cb, ca);
    comp_append(s, c, xi); /* the latest arrival: last */
    for (int j = 0; j < 2; j++) {
        const int64_t r = h->res[j], first = s->rhead[r];
        s->deg[r]++;
        x->rprev[j] = -1;
        h->rnext[j] = first;
        if (first >= 0) s->x[first].rprev[j] = xi;
        s->rhead[r] = xi;
    }
}

static void res_unlink(hv_rp *s, int64_t xi) {
    hv_xfer *x = &s->x[xi];
    const hv_hot *h = &s->h[xi];
    if (x->aprev >= 0) s->h[x->aprev].anext = h->anext;
    else s->ahead = h->anext;
    if (h->anext >= 0) s->x[h->anext].aprev = x->aprev;
    else s->atail = x->aprev;
    for (int j = 0; j < 2; j++) {
        const int64_t p = x->rprev[j], nx = h->rnext[j];
        s->deg[h->res[j]]--;
        if (p >= 0) s->h[p].rnext[j] = nx;
        else s->rhead[h->res[j]] = nx;
        if (nx >= 0) s->x[nx].rprev[j] = p;
    }
    comp_unlink(s, xi);
}

/* Sort a[0..n) by arrival (seq): insertion for a few, heapsort beyond. */
static void sort_by_arrival(const hv_rp *s, int64_t *a, int64_t n) {
    const hv_hot *x = s->h;
    if (n <= 24) {
        for (int64_t i = 1; i < n; i++) {
            const int64_t v = a[i];
            int64_t j = i;
            for (; j > 0 && x[a[j - 1]].seq > x[v].seq; j--) a[j] = a[j - 1];
            a[j] = v;
        }
        return;
    }
    for (int64_t end = n, i = n / 2 - 1;;) { /* build the max-heap (i >= 0), then pop it (end > 1) */
        int64_t root;
        if (i >= 0) root = i--;
        else if (--end > 0) {
            const int64_t t = a[0];
            a[0] = a[end];
            a[end] = t;
            root = 0;
        } else break;
        const int64_t v = a[root];
        for (int64_t c = 2 * root + 1; c < end; c = 2 * root + 1) {
            if (c + 1 < end && x[a[c + 1]].seq > x[a[c]].seq) c++;
            if (x[a[c]].seq <= x[v].seq) break;
            a[root] = a[c];
            root = c;
        }
        a[root] = v;
    }
}

/* One side of the search: resource r reached with stamp e (the other side's: o). 1 when the sides meet. */
static int reach(hv_rp *s, int64_t r, int64_t e, int64_t o, int64_t *q, int64_t *n) {
    if (s->rstamp[r] == o) return 1;
    if (s->rstamp[r] == e) return 0;
    s->rstamp[r] = e;
    const int j = r >= s->c->nnodes;
    for (int64_t xi = s->rhead[r]; xi >= 0; xi = s->h[xi].rnext[j]) {
        if (s->h[xi].stamp == o) return 1;
        if (s->h[xi].stamp != e) s->h[xi].stamp = e, q[(*n)++] = xi;
    }
    return 0;
}

/* A transfer on r0 and r1 (both still used) left its component: if r0 and r1 are no longer linked, the side found
 * whole first (the search goes one transfer at a time on each side) leaves it as a new component, returned; else
 * -1. */
static int64_t comp_split(hv_rp *s, int64_t r0, int64_t r1) {
    int64_t *qa = s->view, *qb = s->upd, na = 0, nb = 0, ia = 0, ib = 0;
    const int64_t ea = ++s->epoch, eb = ++s->epoch;
    if (reach(s, r0, ea, eb, qa, &na) || reach(s, r1, eb, ea, qb, &nb)) return -1;
    for (;;) {
        if (ia == na) break; /* side a is whole */
        if (ib == nb) { /* side b is whole */
            qa = qb, na = nb;
            break;
        }
        const hv_hot *x = &s->h[qa[ia++]];
        if (reach(s, x->res[0], ea, eb, qa, &na) || reach(s, x->res[1], ea, eb, qa, &na)) return -1;
        const hv_hot *y = &s->h[qb[ib++]];
        if (reach(s, y->res[0], eb, ea, qb, &nb) || reach(s, y->res[1], eb, ea, qb, &nb)) return -1;
    }
    sort_by_arrival(s, qa, na);
    const int64_t cn = comp_new(s);
    for (int64_t k = 0; k < na; k++) {
        comp_unlink(s, qa[k]);
        comp_append(s, cn, qa[k]);
    }
    return cn;
}

/* The penalties of component c's transfers (view: them in arrival order; pen, and in each transfer when keep),
 * and the conflicts they meet. */
static int comp_penalties(hv_rp *s, int64_t c, int keep) {
    int64_t n = 0;
    for (int64_t xi = s->chead[c]; xi >= 0; xi = s->h[xi].cnext) {
        s->view[n] = xi;
        s->vres[2 * n] = s->h[xi].res[0];
        s->vres[2 * n + 1] = s->h[xi].res[1];
        n++;
    }
    s->nview = n;
    if (n > 1) {
        if (s->c->model == HV_RP_MAXMIN) maxmin(s);
        else if (s->c->model == HV_RP_GIGE) gige(s);
        else {
            int rc = myrinet_component(s, s->members, n);
            if (rc) return rc;
        }
        conflict_kinds(s);
    } else {
        s->pen[0] = 1.0;
    }
    if (keep)
        for (int64_t k = 0; k < n; k++) s->x[s->view[k]].pen = s->pen[k];
    return 0;
}

/* Components c0 and c1 (-1: none) changed: their penalties; a transfer whose rate changes gets new events, with
 * the counters the reference's pushes take (its order: arrival, over both). When c0 holds every shared transfer
 * (a fan-in), the earliest flow event is found on the way and the flow heap is not kept (global mode). */
static int recompute(hv_rp *s, double now, int64_t c0, int64_t c1) {
    int64_t nu = 0, *u = s->view;
    const int global = c1 < 0 && s->csize[c0] == s->nactive;
    if (!global && s->fglobal) flow_entries(s);
    if (c1 >= 0) {
        int rc = comp_penalties(s, c1, 1);
        if (rc) return rc;
    }
    if (c0 >= 0) {
        int rc = comp_penalties(s, c0, c1 >= 0);
        if (rc) return rc;
        nu = s->nview;
    }
    if (c1 >= 0) { /* both lists merged by arrival */
        u = s->upd;
        nu = 0;
        const hv_hot *h = s->h;
        int64_t i = c0 >= 0 ? s->chead[c0] : -1, j = s->chead[c1];
        while (i >= 0 || j >= 0) {
            if (j < 0 || (i >= 0 && h[i].seq < h[j].seq)) u[nu++] = i, i = h[i].cnext;
            else u[nu++] = j, j = h[j].cnext;
        }
    }
    const int batch = 4 * nu > s->nfh; /* many keys may change: written in place, no heap kept */
    if (!global && !batch && !s->fh_ok) flow_rebuild(s);
    s->fglobal = global;
    hv_fk e;
    if (global) s->fmin = -1;
    for (int64_t k = 0; k < nu; k++) {
        hv_xfer *x = &s->x[u[k]];
        double rate = x->bw / (c1 >= 0 ? x->pen : s->pen[k]);
        if (rate == x->rate) {
            if (global && flow_key(x, u[k], &e) && (s->fmin < 0 || fk_less(&e, &s->fkey))) s->fkey = e, s->fmin = u[k];
            continue;
        }
        x->remaining -= x->rate * (now - x->last);
        x->last = now;
        x->rate = rate;
        double rem = x->remaining > 0.0 ? x->remaining : 0.0;
        x->et = now + rem / rate;
        x->ecnt = ++s->heap.counter;
        if (x->buffered && !x->sdone) {
            double rs = x->remaining - s->c->send_buffer;
            x->st = now + (rs > 0.0 ? rs : 0.0) / rate;
            x->scnt = ++s->heap.counter;
        }
        if (global) {
            if (flow_key(x, u[k], &e) && (s->fmin < 0 || fk_less(&e, &s->fkey))) s->fkey = e, s->fmin = u[k];
        } else if (batch) {
            flow_set(s, x, u[k]);
        } else {
            flow_update(s, u[k]);
        }
    }
    if (!global) flow_min(s);
    else if (s->fmin >= 0) s->fmin_send = s->fkey.c == s->x[s->fmin].scnt;
    return 0;
}

static int start(hv_rp *s, int64_t xi, double now) {
    hv_xfer *x = &s->x[xi];
    x->started = 1;
    if (!x->eager && x->inter && s->c->rndv_first > 0) { /* the first bytes went with the request */
        double pre = s->c->rndv_first < x->nbytes ? s->c->rndv_first : x->nbytes;
        double w = now - x->posted;
        double sent = (w > 0.0 ? w : 0.0) * x->bw;
        x->nbytes = x->nbytes - (sent < pre ? sent : pre);
    }
    return push(s, now + x->lat, EV_LATENCY, xi, 0);
}

static void xfree(hv_rp *s, int64_t xi) {
    s->x[xi].next = s->free_head;
    s->free_head = xi;
}

static int finish(hv_rp *s, int64_t xi, double now) {
    hv_rp_config *c = s->c;
    hv_xfer *x = &s->x[xi];
    x->done = 1;
    x->end = now;
    if (x->inter) {
        double nominal = x->nbytes / x->bw;
        if (nominal > 0) {
            c->pen_sum[x->src] += (now - x->data_start) / nominal;
            c->pen_n[x->src] += 1;
        }
        c->kinds[4 * x->src + x->kind] += 1;
    }
    int64_t sreq = x->sreq, rreq = x->rreq, prq = x->probe_rq;
    int send_open = !x->eager && !x->sdone;
    x->probe_rq = -1;
    if (rreq >= 0) xfree(s, xi); /* matched and done: nothing refers to it any more */
    if (send_open && complete(s, sreq, now)) return -1;
    if (rreq >= 0 && complete(s, rreq, now)) return -1;
    if (prq >= 0 && complete(s, prq, now)) return -1;
    return 0;
}

/* the probe rq (at time t) completes when transfer xi is there: an eager message's transfer ended, a rendezvous
 * message's request arrived (replay_ref.RefEngine.probe_target) */
static int probe_target(hv_rp *s, int64_t xi, int64_t rq, double t) {
    hv_xfer *x = &s->x[xi];
    if (x->eager) {
        if (x->done) s->done_at[rq] = x->end;
        else x->probe_rq = (int32_t)rq;
        return 0;
    }
    if (x->env <= t) {
        s->done_at[rq] = x->env;
        return 0;
    }
    return push(s, x->env, EV_PROBE, rq, 0);
}

static int64_t xalloc(hv_rp *s) {
    if (s->free_head >= 0) {
        int64_t xi = s->free_head;
        s->free_head = s->x[xi].next;
        return xi;
    }
    if (s->nx == s->xcap) {
        int64_t cap = s->xcap ? 2 * s->xcap : 1024;
        hv_xfer *x = realloc(s->x, (size_t)cap * sizeof *x);
        if (!x) return -1;
        s->x = x;
        int64_t *ar = realloc(s->vres, (size_t)(2 * cap) * sizeof *ar);
        if (!ar) return -1;
        s->vres = ar;
        double *p = realloc(s->pen, (size_t)cap * sizeof *p);
        if (!p) return -1;
        s->pen = p;
        int8_t *f = realloc(s->frozen, (size_t)cap);
        if (!f) return -1;
        s->frozen = f;
#define GROW(field) \
    do { \
        int64_t *q = realloc(s->field, (size_t)cap * sizeof *q); \
        if (!q) return -1; \
        s->field = q; \
    } while (0)
        hv_hot *hh = realloc(s->h, (size_t)cap * sizeof *hh);
        if (!hh) return -1;
        s->h = hh;
        hv_fk *fk = realloc(s->fh, (size_t)cap * sizeof *fk);
        if (!fk) return -1;
        s->fh = fk;
        GROW(chead);
        GROW(ctail);
        GROW(csize);
        GROW(view);
        GROW(upd);
        if (s->c->model == HV_RP_MYRINET) {
            GROW(members);
            for (int64_t i = s->xcap; i < cap; i++) s->members[i] = i; /* a view's positions, in order */
            GROW(coef);
            GROW(hits);
            GROW(order);
#undef GROW
        }
        s->xcap = cap;
    }
    return s->nx++;
}

static void link_of(const hv_rp_config *c, int32_t a, int32_t b, double *bw, double *lat) {
    for (int dir = 0; dir < 2 && c->nlinks > 0; dir++) {
        int64_t key = dir ? (int64_t)b * c->nnodes + a : (int64_t)a * c->nnodes + b;
        int64_t lo = 0, hi = c->nlinks;
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (c->link_key[mid] < key) lo = mid + 1;
            else hi = mid;
        }
        if (lo < c->nlinks && c->link_key[lo] == key) {
            *bw = c->link_bw[lo];
            *lat = c->link_lat[lo];
            return;
        }
    }
    *bw = c->bandwidth;
    *lat = c->latency;
}

/* jitSim's advance (hpcvar.sim.jitter_ref.RefTrace.advance) on trace j */
static int64_t jadvance(const hv_rp_config *c, int64_t j, int64_t o, int64_t t, int64_t w) {
    if (w == 0) return t;
    const int64_t *d = c->jtr_d + c->jtr_off[j], *g = c->jtr_g + c->jtr_off[j], *S = c->jtr_S + c->jtr_off[j] + j;
    int64_t m = c->jtr_off[j + 1] - c->jtr_off[j], L = S[m];
    int64_t now = o + t, lap = now / L, p = now % L;
    int64_t lo = 0, hi = m + 1; /* bisect_right(S, p) - 1 */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (p < S[mid]) hi = mid;
        else lo = mid + 1;
    }
    int64_t k = lo - 1, remaining = w;
    for (;;) {
        int64_t base = lap * L + S[k], jend = base + d[k], gend = jend + g[k];
        if (now < jend) now = jend;
        int64_t avail = gend - now;
        if (avail >= remaining) return now + remaining - o;
        remaining -= avail;
        now = gend;
        if (++k == m) k = 0, lap++;
    }
}

/* ---- the ops: one accessor over the arrays (in memory) or the file (streaming) ------------------------ */

typedef struct {
    int kind, last; /* last: the task's last use of its key on its side (streaming) */
    int32_t peer; /* send: destination; recv, probe: source; wait: number of requests */
    double val;
    int32_t key, req, row;
    const uint8_t *wreq; /* a wait's requests: peer int32 values, not necessarily aligned (read with op_wreq) */
} hv_op;

static inline int32_t op_wreq(const hv_op *o, int32_t j) {
    int32_t r;
    memcpy(&r, o->wreq + 4 * (int64_t)j, sizeof r);
    return r;
}

/* streaming: a task's buffer over its bytes [foff, fend) of the file; buf[pos, len) not yet decoded */
typedef struct hv_cursor {
    uint8_t *buf;
    int64_t pos, len, foff, fend;
} hv_cursor;

/* at least n bytes decoded ahead (the buffer refilled by pread when it runs dry); 0, or -1 (read error, a
 * record longer than the buffer, or the file ends early) */
static int cur_need(const hv_rp_config *c, hv_cursor *k, int64_t n) {
    if (k->len - k->pos >= n) return 0;
    if (!k->buf) {
        k->buf = malloc((size_t)c->stream_buf);
        if (!k->buf) return -1;
    }
    int64_t keep = k->len - k->pos;
    memmove(k->buf, k->buf + k->pos, (size_t)keep);
    k->pos = 0, k->len = keep;
    while (k->len < n) {
        int64_t want = c->stream_buf - k->len, left = k->fend - k->foff;
        if (want > left) want = left;
        if (want <= 0) return -1;
        ssize_t r = pread((int)c->stream_fd, k->buf + k->len, (size_t)want, (off_t)k->foff);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        k->len += r, k->foff += r;
    }
    return 0;
}

#define GET(v) \
    do { \
        memcpy(&(v), k->buf + k->pos, sizeof(v)); \
        k->pos += (int64_t)sizeof(v); \
    } while (0)

/* op p (task's next) into *o; 0, or HV_RP_EIO */
static int load_op(hv_rp *s, int64_t task, int64_t p, hv_op *o) {
    const hv_rp_config *c = s->c;
    if (!c->byte_off) {
        o->kind = c->kind[p];
        o->last = 0;
        o->peer = c->peer[p];
        o->val = c->val[p];
        o->key = c->key[p];
        o->req = c->req[p];
        o->row = c->row[p];
        o->wreq = o->kind == HV_RP_WAIT ? (const uint8_t *)(c->wreq + o->req) : NULL;
        return 0;
    }
    hv_cursor *k = &s->cur[task];
    if (cur_need(c, k, 1)) return HV_RP_EIO;
    int8_t kind;
    GET(kind);
    o->last = (kind & HV_RP_LAST_USE) != 0;
    kind = (int8_t)(kind & ~HV_RP_LAST_USE);
    o->kind = kind;
    o->wreq = NULL;
    if (kind == HV_RP_COMPUTE) {
        if (cur_need(c, k, 8)) return HV_RP_EIO;
        GET(o->val);
        o->row = -1;
    } else if (kind == HV_RP_WAIT) {
        if (cur_need(c, k, 8)) return HV_RP_EIO;
        GET(o->peer);
        GET(o->row);
        if (o->peer < 0 || cur_need(c, k, 4 * (int64_t)o->peer)) return HV_RP_EIO;
        o->wreq = k->buf + k->pos; /* valid until the task's next load */
        k->pos += 4 * (int64_t)o->peer;
    } else {
        if (cur_need(c, k, 24)) return HV_RP_EIO;
        GET(o->peer);
        GET(o->val);
        GET(o->key);
        GET(o->req);
        GET(o->row);
    }
    return 0;
}
#undef GET

/* ---- streaming: match keys -> queue slots --------------------------------------------------------------- */

static uint64_t km_hash(int32_t key, int64_t cap) {
    return ((uint64_t)(uint32_t)key * 0x9E3779B97F4A7C15ull >> 20) & (uint64_t)(cap - 1);
}

/* the map at capacity cap (a power of two), its entries re-inserted; -1 if memory runs out */
static int km_rehash(hv_rp *s, int64_t cap) {
    int32_t *k = malloc((size_t)cap * sizeof *k), *v = malloc((size_t)cap * sizeof *v);
    if (!k || !v) {
        free(k), free(v);
        return -1;
    }
    for (int64_t i = 0; i < cap; i++) k[i] = -1;
    for (int64_t i = 0; i < s->km_cap; i++) {
        if (s->km_key[i] < 0) continue;
        uint64_t j = km_hash(s->km_key[i], cap);
        while (k[j] >= 0) j = (j + 1) & (uint64_t)(cap - 1);
        k[j] = s->km_key[i], v[j] = s->km_slot[i];
    }
    free(s->km_key), free(s->km_slot);
    s->km_key = k, s->km_slot = v, s->km_cap = cap;
    return 0;
}

/* room for twice as many slots, their queues empty; -1 if memory runs out */
static int ks_grow(hv_rp *s) {
    int64_t cap = s->ks_cap ? 2 * s->ks_cap : 1024;
#define KS_GROW(f) \
    do { \
        void *q_ = realloc(s->f, (size_t)cap * sizeof *s->f); \
        if (!q_) return -1; \
        s->f = q_; \
    } while (0)
    KS_GROW(us_head);
    KS_GROW(us_tail);
    KS_GROW(ur_head);
    KS_GROW(ur_tail);
    KS_GROW(probing);
    KS_GROW(ks_key);
    KS_GROW(ks_free);
    KS_GROW(ks_done);
#undef KS_GROW
    for (int64_t i = s->ks_cap; i < cap; i++)
        s->us_head[i] = s->us_tail[i] = s->ur_head[i] = s->ur_tail[i] = -1, s->probing[i] = -1, s->ks_done[i] = 0;
    s->ks_cap = cap;
    return 0;
}

/* the queue slot of match key `key` (a fresh one if the key is not in use); -1 if memory runs out */
static int64_t key_slot(hv_rp *s, int32_t key) {
    uint64_t j = km_hash(key, s->km_cap);
    while (s->km_key[j] >= 0) {
        if (s->km_key[j] == key) return s->km_slot[j];
        j = (j + 1) & (uint64_t)(s->km_cap - 1);
    }
    int64_t sl;
    if (s->ks_nfree > 0) {
        sl = s->ks_free[--s->ks_nfree];
    } else {
        if (s->ks_n == s->ks_cap && ks_grow(s)) return -1;
        sl = s->ks_n++;
    }
    s->ks_key[sl] = key, s->ks_done[sl] = 0;
    s->km_key[j] = key, s->km_slot[j] = (int32_t)sl;
    if (2 * ++s->km_n > s->km_cap && km_rehash(s, 2 * s->km_cap)) return -1;
    return sl;
}

/* after a post on slot sl by side (1 send, 2 receive or probe): once both sides made their last post and the
 * queues are empty, nothing will use the key again: its slot goes back to the pool (backward-shift deletion) */
static void key_posted(hv_rp *s, int64_t sl, int side, int last) {
    if (last) s->ks_done[sl] |= (int8_t)side;
    if (s->ks_done[sl] != 3 || s->us_head[sl] >= 0 || s->ur_head[sl] >= 0 || s->probing[sl] >= 0) return;
    const uint64_t m = (uint64_t)(s->km_cap - 1);
    uint64_t j = km_hash(s->ks_key[sl], s->km_cap);
    while (s->km_key[j] != s->ks_key[sl]) j = (j + 1) & m;
    s->km_key[j] = -1;
    for (uint64_t i = (j + 1) & m; s->km_key[i] >= 0; i = (i + 1) & m) {
        uint64_t h = km_hash(s->km_key[i], s->km_cap);
        if (j <= i ? (j < h && h <= i) : (j < h || h <= i)) continue; /* it stays where it is */
        s->km_key[j] = s->km_key[i], s->km_slot[j] = s->km_slot[i];
        s->km_key[i] = -1;
        j = i;
    }
    s->km_n--;
    s->ks_done[sl] = 0;
    s->ks_free[s->ks_nfree++] = (int32_t)sl;
}

static void row_flush(hv_rp *s, int64_t task) {
    if (s->cur_row[task] >= 0) {
        double st = s->cur_start[task], en = s->cur_end[task];
        s->c->comm[task] += (en >= 0 ? en : st) - st;
        s->cur_row[task] = -1;
    }
}

/* A send: its transfer, matched with a posted receive (started) or queued as unexpected (an eager one starts
 * at once and completes its send). 0, or -1 if memory runs out. */
static int post_send(hv_rp *s, int64_t task, const hv_op *o, int64_t p, double t) {
    hv_rp_config *c = s->c;
    const int32_t *node = c->node_of;
    int64_t xi = xalloc(s);
    if (xi < 0) return -1;
    hv_xfer *x = &s->x[xi];
    int32_t dst = o->peer;
    memset(x, 0, sizeof *x);
    x->op = p;
    x->row = o->row;
    x->src = (int32_t)task;
    x->dst = dst;
    x->nbytes = o->val;
    x->sreq = o->req;
    s->done_at[o->req] = -1.0; /* a recycled request (streaming) starts pending */
    s->waiting[o->req] = -1;
    x->rreq = -1;
    int32_t a = node[task], b = node[dst];
    x->inter = a != b;
    if (a == b) x->bw = c->shm_bandwidth, x->lat = c->shm_latency;
    else link_of(c, a, b, &x->bw, &x->lat);
    x->eager = o->val <= c->eager;
    x->env = t + x->lat;
    if (a != b && c->rndv_first > 0) x->env = x->env + (c->rndv_first < x->nbytes ? c->rndv_first : x->nbytes) / x->bw;
    if (!x->eager) x->lat = x->lat + (a == b ? c->shm_rndv_latency : c->rndv_latency);
    x->buffered = a != b && !x->eager && c->send_buffer > 0;
    x->posted = t;
    x->next = -1;
    x->end = -1.0;
    x->probe_rq = -1;
    int64_t key = o->key;
    int64_t q = s->ur_head[key];
    if (q >= 0) {
        x->rreq = q;
        s->ur_head[key] = s->ur_next[q];
        if (s->ur_head[key] < 0) s->ur_tail[key] = -1;
        if (start(s, xi, t)) return -1;
    } else {
        if (s->us_tail[key] >= 0) s->x[s->us_tail[key]].next = xi;
        else s->us_head[key] = (int32_t)xi;
        s->us_tail[key] = (int32_t)xi;
        if (x->eager && start(s, xi, t)) return -1;
        int64_t prq = s->probing[key]; /* a probe waiting for this key's next unexpected send */
        if (prq >= 0) {
            s->probing[key] = -1;
            if (probe_target(s, xi, prq, t)) return -1;
        }
    }
    if (s->x[xi].eager) s->done_at[s->x[xi].sreq] = t;
    return 0;
}

/* A probe: the first unexpected send of its key (no posted receive took it), or the next one posted. 0, or -1 if
 * memory runs out. */
static int post_probe(hv_rp *s, const hv_op *o, double t) {
    int64_t key = o->key, xi = s->us_head[key];
    s->done_at[o->req] = -1.0;
    s->waiting[o->req] = -1;
    if (xi >= 0) return probe_target(s, xi, o->req, t);
    s->probing[key] = o->req;
    return 0;
}

/* A receive: matched with the first unexpected send of its key (completed at once when its data has
 * arrived, else started), or posted. 0, or -1 if memory runs out. */
static int post_recv(hv_rp *s, const hv_op *o, double t) {
    int64_t key = o->key, rq = o->req;
    int64_t xi = s->us_head[key];
    s->done_at[rq] = -1.0;
    s->waiting[rq] = -1;
    if (xi >= 0) {
        hv_xfer *x = &s->x[xi];
        s->us_head[key] = (int32_t)x->next;
        if (x->next < 0) s->us_tail[key] = -1;
        x->rreq = rq;
        if (x->done) {
            s->done_at[rq] = t > x->end ? t : x->end;
            xfree(s, xi);
        } else if (!x->started && start(s, xi, t)) {
            return -1;
        }
    } else {
        s->ur_next[rq] = -1;
        if (s->ur_tail[key] >= 0) s->ur_next[s->ur_tail[key]] = (int32_t)rq;
        else s->ur_head[key] = (int32_t)rq;
        s->ur_tail[key] = (int32_t)rq;
    }
    return 0;
}

/* A wait for its requests: *t moves to the latest completion; returns how many are still pending (the task
 * is then registered as their waiter). */
static int64_t wait_requests(hv_rp *s, int64_t task, const hv_op *o, double *t) {
    int64_t need = 0;
    double latest = *t;
    for (int32_t j = 0; j < o->peer; j++) {
        int64_t rq = op_wreq(o, j);
        double d = s->done_at[rq];
        if (d < 0) {
            s->waiting[rq] = (int32_t)task;
            need++;
        } else if (d > latest) {
            latest = d;
        }
    }
    *t = latest;
    return need;
}

/* A compute op: the task's clock moves on by it (stretched by the task's jitter trace). */
static int compute(hv_rp *s, int64_t task, const hv_op *o, int64_t p, double t, int64_t p0) {
    hv_rp_config *c = s->c;
    double d = o->val;
    if (c->njtr > 0) {
        int64_t tt = (int64_t)(t * 1e9);
        int64_t w = llrint(d * 1e9);
        d = (double)(jadvance(c, task % c->njtr, c->jtr_pos[task], tt, w) - tt) * 1e-9;
    }
    c->pc[task] = p + 1;
    c->clock[task] = t + d;
    s->ops_done += p + 1 - p0;
    return push(s, t + d, EV_TASK, task, 0);
}

/* Runs the task's ops from its pc until it computes (an event at the end of the compute), blocks on a wait,
 * or ends. 0, HV_RP_ENOMEM, or HV_RP_EIO (streaming: the ops file cannot be read). */
static int step(hv_rp *s, int64_t task) {
    hv_rp_config *c = s->c;
    int64_t p = c->pc[task], end = c->task_off[task + 1];
    double t = c->clock[task];
    int64_t p0 = p;
    hv_op o;
    while (p < end) {
        if (load_op(s, task, p, &o)) return HV_RP_EIO;
        int k = o.kind;
        int64_t row = o.row;
        if (row >= 0 && row != s->cur_row[task]) {
            row_flush(s, task);
            s->cur_row[task] = row;
            s->cur_start[task] = t;
            s->cur_end[task] = -1.0;
            if (c->row_start) c->row_start[row] = t;
        }
        if (k == HV_RP_COMPUTE) return compute(s, task, &o, p, t, p0) ? HV_RP_ENOMEM : 0;
        if (s->km_cap && k != HV_RP_WAIT) { /* streaming: the key's queue slot */
            int64_t sl = key_slot(s, o.key);
            if (sl < 0) return HV_RP_ENOMEM;
            o.key = (int32_t)sl;
        }
        if (k == HV_RP_SEND) {
            if (post_send(s, task, &o, p, t)) return HV_RP_ENOMEM;
            if (s->km_cap) key_posted(s, o.key, 1, o.last);
        } else if (k == HV_RP_RECV) {
            if (post_recv(s, &o, t)) return HV_RP_ENOMEM;
            if (s->km_cap) key_posted(s, o.key, 2, o.last);
        } else if (k == HV_RP_PROBE) {
            if (post_probe(s, &o, t)) return HV_RP_ENOMEM;
            if (s->km_cap) key_posted(s, o.key, 2, o.last);
        } else { /* wait */
            int64_t need = wait_requests(s, task, &o, &t);
            if (need) {
                c->blocked[task] = need;
                c->pc[task] = p + 1;
                c->clock[task] = t;
                s->pending_row[task] = row;
                s->ops_done += p + 1 - p0;
                return 0;
            }
            if (row >= 0) {
                s->cur_end[task] = t;
                if (c->row_end) c->row_end[row] = t;
            }
        }
        p++;
    }
    c->pc[task] = p;
    c->clock[task] = t;
    c->finished++;
    s->ops_done += p - p0;
    if (s->cur) { /* its buffer is no longer needed */
        free(s->cur[task].buf);
        s->cur[task].buf = NULL;
    }
    return 0;
}

int hv_rp_config_size(void) { return (int)sizeof(hv_rp_config); }

#define ALLOC(ptr, n) \
    do { \
        (ptr) = calloc((size_t)((n) > 0 ? (n) : 1), sizeof *(ptr)); \
        if (!(ptr)) return -1; \
    } while (0)

/* The replay's arrays, zeroed; -1 if memory runs out (rp_free frees what was allocated). */
static int rp_alloc(hv_rp *s) {
    const hv_rp_config *c = s->c;
    int64_t nn = c->nnodes;
    ALLOC(s->done_at, c->nreqs);
    ALLOC(s->waiting, c->nreqs);
    ALLOC(s->pending_row, c->ntasks);
    ALLOC(s->phead, c->ntasks);
    ALLOC(s->cur_row, c->ntasks);
    ALLOC(s->cur_start, c->ntasks);
    ALLOC(s->cur_end, c->ntasks);
    if (c->byte_off) { /* streaming: the slots of the keys in use, grown on demand; the task cursors */
        if (ks_grow(s) || km_rehash(s, 1024)) return -1;
        ALLOC(s->cur, c->ntasks);
    } else {
        ALLOC(s->us_head, c->nkeys);
        ALLOC(s->us_tail, c->nkeys);
        ALLOC(s->ur_head, c->nkeys);
        ALLOC(s->ur_tail, c->nkeys);
        ALLOC(s->probing, c->nkeys);
    }
    ALLOC(s->ur_next, c->nreqs);
    ALLOC(s->n_out, nn);
    ALLOC(s->n_in, nn);
    ALLOC(s->top, nn);
    ALLOC(s->card, nn);
    ALLOC(s->top2, nn);
    ALLOC(s->card2, nn);
    ALLOC(s->cap, 2 * nn);
    ALLOC(s->users, 2 * nn);
    ALLOC(s->deg, 2 * nn);
    ALLOC(s->mark, 2 * nn);
    ALLOC(s->touched, 2 * nn);
    ALLOC(s->rhead, 2 * nn);
    ALLOC(s->rstamp, 2 * nn);
    return 0;
}

static void rp_free(hv_rp *s) {
    void *all[] = {s->heap.a,  s->x,       s->done_at, s->waiting, s->pending_row, s->cur_row, s->cur_start, s->cur_end,
                   s->us_head, s->us_tail, s->ur_head, s->ur_tail, s->ur_next,     s->fh,      s->view,      s->upd,
                   s->h,       s->chead,   s->ctail,   s->csize,   s->pen,         s->frozen,  s->n_out,     s->n_in,
                   s->top,     s->card,    s->top2,    s->card2,   s->cap,         s->users,   s->touched,   s->rhead,
                   s->rstamp,  s->members, s->bits,    s->coef,    s->hits,        s->order,   s->vres,      s->deg,
                   s->mark,    s->probing, s->phead};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    memo_free(s->memo);
    free(s->km_key), free(s->km_slot), free(s->ks_key), free(s->ks_free), free(s->ks_done);
    if (s->cur) {
        for (int64_t t = 0; t < s->c->ntasks; t++) free(s->cur[t].buf);
        free(s->cur);
    }
}

/* Every request pending, every queue empty, every task at its first op at time 0. */
static void rp_reset(hv_rp *s) {
    hv_rp_config *c = s->c;
    for (int64_t i = 0; i < c->nreqs; i++) s->done_at[i] = -1.0, s->waiting[i] = -1;
    const int64_t nk = s->km_cap ? 0 : c->nkeys; /* streaming: slots are reset when the pool grows or frees them */
    for (int64_t i = 0; i < nk; i++) s->us_head[i] = s->us_tail[i] = s->ur_head[i] = s->ur_tail[i] = -1;
    for (int64_t i = 0; i < nk; i++) s->probing[i] = -1;
    for (int64_t i = 0; i < 2 * c->nnodes; i++) s->rhead[i] = -1, s->deg[i] = 0;
    s->cfree = -1;
    s->ahead = s->atail = -1;
    s->fh_ok = 1;
    if (c->row_start)
        for (int64_t i = 0; i < c->nrows; i++) c->row_start[i] = c->row_end[i] = -1.0;
    for (int64_t t = 0; t < c->ntasks; t++) {
        s->pending_row[t] = -1;
        s->phead[t] = -1;
        s->cur_row[t] = -1;
        c->pc[t] = c->task_off[t];
        if (s->cur) s->cur[t] = (hv_cursor){NULL, 0, 0, c->byte_off[t], c->byte_off[t + 1]};
        c->clock[t] = 0.0;
        c->comm[t] = 0.0;
        c->blocked[t] = 0;
        c->pen_sum[t] = c->pen_n[t] = 0.0;
        for (int j = 0; j < 4; j++) c->kinds[4 * t + j] = 0;
    }
    c->nevents = c->finished = c->unmatched = c->error_size = 0;
    c->first_unmatched_op = c->first_unmatched_row = c->first_unmatched_peer = -1;
}

/* A shared transfer's data starts: it joins the others and their rates are recomputed. */
static int data_begin(hv_rp *s, int64_t xi, double now) {
    hv_xfer *x = &s->x[xi];
    x->data_start = now;
    x->remaining = x->nbytes;
    x->last = now;
    x->rate = 0.0;
    x->ecnt = x->scnt = -1;
    s->h[xi].hpos = -1;
    res_link(s, xi);
    s->nactive++;
    return recompute(s, now, s->h[xi].comp, -1);
}

/* Pairs in series: the transfer holding the pair of tasks of xi's (its source and destination), or -1. */
static int64_t pair_holder(const hv_rp *s, const hv_xfer *x) {
    int64_t p = s->phead[x->src];
    while (p >= 0 && s->x[p].dst != x->dst) p = s->x[p].pnext;
    return p;
}

/* Pairs in series: xi holds its pair now, in place of old (-1: the pair was free), and keeps the ones waiting. */
static void pair_take(hv_rp *s, int64_t xi, int64_t old) {
    hv_xfer *x = &s->x[xi];
    if (old < 0) {
        x->pprev = -1;
        x->pnext = s->phead[x->src];
        x->qhead = x->qtail = -1;
    } else {
        const hv_xfer *o = &s->x[old];
        x->pprev = o->pprev;
        x->pnext = o->pnext;
        x->qhead = x->qnext;
        x->qtail = x->qhead >= 0 ? o->qtail : -1;
    }
    if (x->pnext >= 0) s->x[x->pnext].pprev = xi;
    if (x->pprev >= 0) s->x[x->pprev].pnext = xi;
    else s->phead[x->src] = xi;
}

/* Pairs in series: xi's data ended; the next transfer of its pair (-1: none, and the pair is free). */
static int64_t pair_next(hv_rp *s, int64_t xi) {
    hv_xfer *x = &s->x[xi];
    const int64_t y = x->qhead;
    if (y >= 0) {
        pair_take(s, y, xi);
        return y;
    }
    if (x->pnext >= 0) s->x[x->pnext].pprev = x->pprev;
    if (x->pprev >= 0) s->x[x->pprev].pnext = x->pnext;
    else s->phead[x->src] = x->pnext;
    return -1;
}

/* A transfer's latency has passed: its data starts, shared with the others (contention) or alone; with pairs in
 * series, after the transfers of its pair of tasks whose data started before (it waits behind them). */
static int on_latency(hv_rp *s, int64_t xi, double now) {
    hv_rp_config *c = s->c;
    hv_xfer *x = &s->x[xi];
    x->data_start = now;
    if (x->inter && c->model != HV_RP_NONE) {
        if (c->pair_serial) {
            const int64_t p = pair_holder(s, x);
            if (p >= 0) { /* behind the pair's last */
                hv_xfer *h = &s->x[p];
                x->qnext = -1;
                if (h->qtail >= 0) s->x[h->qtail].qnext = xi;
                else h->qhead = xi;
                h->qtail = xi;
                return 0;
            }
            pair_take(s, xi, -1);
        }
        return data_begin(s, xi, now);
    }
    if (x->buffered) {
        double rs = x->nbytes - c->send_buffer;
        if (push(s, now + (rs > 0.0 ? rs : 0.0) / x->bw, EV_SEND_DONE, xi, 0)) return HV_RP_ENOMEM;
    }
    return push(s, now + x->nbytes / x->bw, EV_FINISH, xi, 0) ? HV_RP_ENOMEM : 0;
}

/* The earliest flow event (s->fmin): a shared transfer's data has all arrived (it leaves the shared ones, finish
 * completes its requests and the probe waiting for it, if any, and the others' rates are recomputed), or its send
 * completes (at most the send buffer left). */
static int on_flow_event(hv_rp *s) {
    const int64_t xi = s->fmin;
    hv_xfer *x = &s->x[xi];
    if (s->fmin_send) {
        const double now = x->st;
        x->sdone = 1;
        x->scnt = -1;
        flow_update(s, xi);
        flow_min(s);
        return complete(s, x->sreq, now) ? HV_RP_ENOMEM : 0;
    }
    const double now = x->et;
    const int64_t r0 = s->h[xi].res[0], r1 = s->h[xi].res[1], c = s->h[xi].comp;
    x->ecnt = x->scnt = -1; /* it leaves the shared transfers with its pending events */
    flow_update(s, xi);
    res_unlink(s, xi);
    s->nactive--;
    const int64_t next = s->c->pair_serial ? pair_next(s, xi) : -1; /* read before finish frees the slot */
    if (finish(s, xi, now)) return HV_RP_ENOMEM;
    if (s->csize[c] == 0) { /* it was alone */
        s->chead[c] = s->cfree;
        s->cfree = c;
        flow_min(s);
    } else {
        const int64_t cn = s->rhead[r0] >= 0 && s->rhead[r1] >= 0 ? comp_split(s, r0, r1) : -1;
        int rc = recompute(s, now, c, cn);
        if (rc) return rc;
    }
    return next >= 0 ? data_begin(s, next, now) : 0; /* the next of its pair follows it at once */
}

/* One event. HV_RP_OK, or an error code. */
static int on_event(hv_rp *s, const hv_ev *ev) {
    hv_rp_config *c = s->c;
    double now = ev->t;
    if (ev->kind == EV_TASK) {
        int64_t task = ev->obj, r = s->pending_row[task];
        if (r >= 0) {
            s->cur_end[task] = c->clock[task];
            if (c->row_end) c->row_end[r] = c->clock[task];
            s->pending_row[task] = -1;
        }
        return step(s, task);
    }
    if (ev->kind == EV_LATENCY) return on_latency(s, ev->obj, now);
    if (ev->kind == EV_SEND_DONE) { /* at most the send buffer left: the send completes */
        hv_xfer *x = &s->x[ev->obj];
        if (x->sdone || x->done) return 0; /* the slot is not reused before: this event comes before FINISH */
        x->sdone = 1;
        return complete(s, x->sreq, now) ? HV_RP_ENOMEM : 0;
    }
    if (ev->kind == EV_PROBE) return complete(s, ev->obj, now) ? HV_RP_ENOMEM : 0; /* a rendezvous request arrived */
    return finish(s, ev->obj, now) ? HV_RP_ENOMEM : 0;
}

/* The sends nobody received: their count and the first one's op. */
static void count_unmatched(hv_rp *s) {
    hv_rp_config *c = s->c;
    const int64_t nk = s->km_cap ? s->ks_n : c->nkeys;
    for (int64_t key = 0; key < nk; key++)
        for (int64_t xi = s->us_head[key]; xi >= 0; xi = s->x[xi].next) {
            c->unmatched++;
            if (c->first_unmatched_op < 0 || s->x[xi].op < c->first_unmatched_op) {
                c->first_unmatched_op = s->x[xi].op;
                c->first_unmatched_row = s->x[xi].row;
                c->first_unmatched_peer = s->x[xi].dst;
            }
        }
}

/* Every task starts at time 0; events until none is left. */
static int run_events(hv_rp *s) {
    hv_rp_config *c = s->c;
    for (int64_t t = 0; t < c->ntasks; t++)
        if (push(s, 0.0, EV_TASK, t, 0)) return HV_RP_ENOMEM;
    const int64_t every = (int64_t)1 << 20;
    int64_t done = 0;
    for (;;) {
        int e;
        if (s->fmin >= 0) {
            const double ft = s->fkey.t;
            const int64_t fc = s->fkey.c;
            if (s->heap.n == 0 || key_less(ft, fc, s->heap.a[0].t, s->heap.a[0].cnt)) {
                if (c->progress && (++done & (every - 1)) == 0) c->progress(s->ops_done, c->nops);
                if ((e = on_flow_event(s))) return e;
                continue;
            }
        } else if (s->heap.n == 0) {
            break;
        }
        hv_ev ev = heap_pop(&s->heap);
        if (c->progress && (++done & (every - 1)) == 0) c->progress(s->ops_done, c->nops);
        if ((e = on_event(s, &ev))) return e;
    }
    c->nevents = s->heap.counter; /* every event pushed, the reference's stale ones included, comes out once */
    c->key_slots = s->ks_n;
    for (int64_t t = 0; t < c->ntasks; t++) row_flush(s, t);
    if (c->stuck_row)
        for (int64_t t = 0; t < c->ntasks; t++) c->stuck_row[t] = c->blocked[t] > 0 ? s->pending_row[t] : -1;
    count_unmatched(s);
    if (c->progress) c->progress(s->ops_done, c->nops);
    return HV_RP_OK;
}

int hv_rp_run(hv_rp_config *c) {
    hv_rp s;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.free_head = -1;
    s.fmin = -1;
    int rc = HV_RP_ENOMEM;
    if (c->byte_off && (c->row_start || c->row_end || c->stream_buf < c->stream_maxrec || c->stream_buf < 32))
        return HV_RP_EIO;
    if (rp_alloc(&s) == 0) {
        rp_reset(&s);
        rc = run_events(&s);
    }
    rp_free(&s);
    return rc;
}
