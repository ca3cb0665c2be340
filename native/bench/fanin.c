/* hv_fanin: many clients into few roots ("fan-in"), after the "Reservation"
 * tool of Jones & Settlemyer (docs/fanin.md).
 *
 * Roles, per point, by position in a rank permutation (identity with
 * --placement fixed, a seeded Fisher-Yates shuffle with --placement shuffle):
 *   positions [0, S)          servers (roots), S = --servers
 *   positions [S, S+L)        large-buffer clients; client i sends to server i % S
 *   positions [S+L, S+L+C)    chatter (small-buffer) clients; chatter j -> server j % S
 *   positions [S+L+C, np)     idle for this point (they only join the gathers)
 *
 * Clients (one message in flight each; MPI_Isend + hv_wait, i.e. MPI_Wait unless
 * --wait-us asks to yield or sleep between tests when ranks outnumber cores):
 *   large:   send --large bytes (tag LARGE) back to back;
 *   chatter: send --small bytes (tag SMALL), wait for the root's 8-byte ack
 *            (tag ACK); the round trip is timed on the chatter client.
 * The first 8 bytes of every message are a header: 0, or for a client's last
 * message the total number of messages it sent (the root then knows when it
 * has everything). A client stops when the root's STOP message (posted as an
 * Irecv at the start) has arrived: its last message is then header-only
 * (8 bytes). With --messages N, large clients send exactly N messages (the
 * N-th carries the header N) and chatter goes on until the root stops it.
 *
 * Root strategies (per point):
 *   queues single: one array of posted receives, each --max(large,small)
 *                  bytes, for every client and message kind;
 *   queues dual:   a small/control queue (chatter, --small buffers), tested
 *                  first, and a large queue (--large buffers);
 *   depth deep:    one posted receive per client of the queue;
 *   depth N:       N posted receives per queue;
 *   match any:     MPI_ANY_SOURCE, and MPI_ANY_TAG in a single queue (in a
 *                  dual queue the tag selects the queue);
 *   match exact:   each receive names one client and its tag; the N slots
 *                  rotate over the queue's clients (slot s serves position
 *                  s, s+N, s+2N, ... mod clients), skipping finished ones.
 * The root polls with MPI_Testsome, re-posts each completed slot, acks
 * chatter, counts bytes per client and per time bin inside the window
 * [t0, t0 + --duration] (or until the last large message with --messages),
 * then sends STOP to its clients, drains until every client's last message
 * is in, and cancels the receives that are still posted (each one is checked
 * with MPI_Test_cancelled). Everything is allocated before the first point.
 *
 * Raw rows (columns kind,rank,peer,idx,a,b,c):
 *   kind 1 client   (root)    rank=client peer=root idx=role(1 large,2 chatter)
 *                             a=bytes in window b=messages in window c=messages in total
 *   kind 2 bin      (root)    rank=root idx=bin a=large bytes b=small bytes c=bin start ns
 *   kind 3 rtt      (chatter) rank=client peer=root idx=sequence a=round trip ns b=send time ns since t0
 *   kind 4 root     (root)    rank=root a=window ns b=receives cancelled c=receives posted
 *   kind 5 chatter  (chatter) rank=client peer=root a=round trips b=recorded c=record stride
 *   kind 7 csteady  (root)    rank=client peer=root a=the client's first large completion ns b=its last
 *                             (both since t0, inside the window) c=its large bytes completed after the first
 * (kind 6, a root-wide version of kind 7, is no longer written: docs/fanin.md)
 *
 * Code: main reads the options into a fanin_config (the option table), allocates a root's
 * fanin_server or a client's fanin_client once, then per point calls
 * run_server, run_large_client or run_chatter_client (or only joins the
 * barrier when idle) and gathers the rows. No file-scope mutable state: the
 * matching mode and the communicator live in each hv_queue. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hv_mpi.h"

enum { TAG_LARGE = 11, TAG_SMALL = 12, TAG_STOP = 13, TAG_ACK = 14 };
enum { ROLE_IDLE = 0, ROLE_LARGE = 1, ROLE_CHATTER = 2, ROLE_SERVER = 3 };
enum { NCOLS = 7, HDR = 8, MAX_BINS_MESSAGES = 1 << 16 };

typedef struct {        /* the validated options */
    long servers, large, small, messages, max_samples, rep, seed, wait_us;
    double duration_s, bin_s;
    const char *placement;
    size_t npoints, npl, npc, npq, npd, npm;
    int64_t *p_clients, *p_chatter, *p_queues, *p_depth, *p_match; /* per point */
} fanin_config;

typedef struct {        /* one point */
    int clients, chatter, dual, depth, exact;
} fanin_point;

typedef struct {        /* what the largest point needs on this rank */
    long maxloc, maxreq, maxrows, nbins_max;
    size_t slab;
} fanin_sizes;

typedef struct {
    int n;              /* slots in this queue */
    size_t bufsz;
    char *base;         /* n * bufsz bytes of the slab */
    MPI_Request *req;
    int *slot_pos;      /* exact: position in clients[] the slot targets, -1 inactive */
    int *clients;       /* local client indices served by this queue */
    int nclients, unfinished;
    int tag;            /* tag of "any" receives: MPI_ANY_TAG, TAG_LARGE or TAG_SMALL */
    int exact;          /* match exact: each receive names one client and its tag */
    MPI_Comm comm;
    int *idx;           /* Testsome output */
    MPI_Status *st;
} hv_queue;

typedef struct {        /* a root's view of its clients, for one point */
    int n;
    int *rank, *role;
    int64_t *final_total, *recv_total, *recv_win, *bytes_win, *after_first;
    uint64_t *t_first, *t_last;
    int *finished, *queue;
    MPI_Request *stop_req, *ack_req;
} hv_clients;

typedef struct {        /* a root's buffers, allocated once for the largest point */
    hv_ctx *ctx;
    const fanin_config *cfg;
    hv_queue q[2];      /* q[0] single (all) or small/control (chatter); q[1] large (dual only) */
    int nq, nlarge;
    hv_clients cl;
    int *local_of;      /* world rank -> index in cl */
    char *rbuf;
    double *bin_large, *bin_small;
    long nbins_max;
    uint64_t bin_ticks, dur_ticks;
    int64_t ackbuf, stopbuf;
} fanin_server;

typedef struct {        /* one point's progress on a root */
    uint64_t t0, t_end;
    int nfinished, large_finished, stopped;
    long cancelled, posted;
} server_run;

typedef struct {        /* a client's buffers (every non-root rank may be a client in some point) */
    hv_ctx *ctx;
    const fanin_config *cfg;
    char *lbuf, *sbuf;
    uint64_t *rtt, *tsend;
    int64_t stopbuf, ackin;
} fanin_client;

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) HV_DIE("out of memory allocating %zu x %zu bytes", n, sz);
    return p;
}

/* ---- options, placement, sizes ------------------------------------------------------------ */

/* The checks that relate options (each one's range is in the option table). */
static void check_config(fanin_config *c) {
    if (!c->placement || (strcmp(c->placement, "fixed") != 0 && strcmp(c->placement, "shuffle") != 0))
        HV_DIE("hv_fanin: --placement must be fixed or shuffle");
    if ((c->duration_s > 0) == (c->messages > 0)) HV_DIE("hv_fanin: give exactly one of --duration and --messages");
    c->max_samples &= ~1L; /* even: the stride doubling keeps sample i at sequence i * stride */
    c->npoints = c->npl;
    if (c->npc != c->npl || c->npq != c->npl || c->npd != c->npl || c->npm != c->npl)
        HV_DIE("hv_fanin: the --p-* lists differ in length");
}

static void free_config(fanin_config *c) {
    free(c->p_clients);
    free(c->p_chatter);
    free(c->p_queues);
    free(c->p_depth);
    free(c->p_match);
}

static fanin_point point_at(const fanin_config *c, size_t p) {
    fanin_point pt = {(int)c->p_clients[p], (int)c->p_chatter[p], c->p_queues[p] != 0, (int)c->p_depth[p],
                      c->p_match[p] != 0};
    return pt;
}

/* The rank permutation, position -> rank: identity, or a seeded Fisher-Yates shuffle. */
static int *make_placement(const fanin_config *c, int R) {
    int *perm = xcalloc((size_t)R, sizeof *perm);
    for (int i = 0; i < R; i++) perm[i] = i;
    if (strcmp(c->placement, "shuffle") == 0) {
        uint64_t st = (uint64_t)c->seed;
        for (int i = R - 1; i > 0; i--) {
            int j = (int)(splitmix64(&st) % (uint64_t)(i + 1));
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    }
    return perm;
}

/* Grows z to what root position mypos needs for one point. */
static void size_server_point(const fanin_config *c, int mypos, long L, long C, int dual, long depth, fanin_sizes *z) {
    const long S = c->servers;
    long nl = L / S + (mypos < L % S), nc = C / S + (mypos < C % S);
    if (nl + nc > z->maxloc) z->maxloc = nl + nc;
    size_t need;
    long r0, r1 = 0;
    if (!dual) {
        r0 = depth ? depth : nl + nc;
        need = (size_t)r0 * (size_t)(c->large > c->small ? c->large : c->small);
    } else {
        r0 = depth ? (nc ? depth : 0) : nc;
        r1 = depth ? depth : nl;
        need = (size_t)r0 * (size_t)c->small + (size_t)r1 * (size_t)c->large;
    }
    if (r0 > z->maxreq) z->maxreq = r0;
    if (r1 > z->maxreq) z->maxreq = r1;
    if (need > z->slab) z->slab = need;
    if (2 * (nl + nc) + z->nbins_max + 1 > z->maxrows) z->maxrows = 2 * (nl + nc) + z->nbins_max + 1;
}

/* Checks every point against the job and sizes everything, maximised over the points. */
static fanin_sizes size_everything(const fanin_config *c, int R, int mypos) {
    fanin_sizes z = {1, 1, 1, 0, HDR};
    const long S = c->servers;
    z.nbins_max = c->messages > 0 ? MAX_BINS_MESSAGES : (long)(c->duration_s / c->bin_s) + 2;
    for (size_t p = 0; p < c->npoints; p++) {
        long L = (long)c->p_clients[p], C = (long)c->p_chatter[p];
        if (L < 1) HV_DIE("hv_fanin: point %zu has no large-buffer client", p);
        if (S + L + C > R)
            HV_DIE("hv_fanin: point %zu needs %ld ranks (servers+clients+chatter), the job has %d", p, S + L + C, R);
        if (mypos < S) size_server_point(c, mypos, L, C, c->p_queues[p] != 0, (long)c->p_depth[p], &z);
    }
    if (c->max_samples + 1 > z.maxrows) z.maxrows = c->max_samples + 1;
    return z;
}

/* ---- the root: allocation, queues ----------------------------------------------------------- */

static void server_alloc(fanin_server *sv, hv_ctx *ctx, const fanin_config *c, const fanin_sizes *z) {
    memset(sv, 0, sizeof *sv);
    sv->ctx = ctx;
    sv->cfg = c;
    sv->rbuf = hv_malloc_touched(z->slab);
    for (int i = 0; i < 2; i++) {
        hv_queue *Q = &sv->q[i];
        Q->comm = ctx->comm;
        Q->req = xcalloc((size_t)z->maxreq, sizeof(MPI_Request));
        Q->slot_pos = xcalloc((size_t)z->maxreq, sizeof(int));
        Q->clients = xcalloc((size_t)z->maxloc, sizeof(int));
        Q->idx = xcalloc((size_t)z->maxreq, sizeof(int));
        Q->st = xcalloc((size_t)z->maxreq, sizeof(MPI_Status));
    }
    hv_clients *cl = &sv->cl;
    size_t m = (size_t)z->maxloc;
    cl->rank = xcalloc(m, sizeof(int));
    cl->role = xcalloc(m, sizeof(int));
    cl->final_total = xcalloc(m, sizeof(int64_t));
    cl->recv_total = xcalloc(m, sizeof(int64_t));
    cl->recv_win = xcalloc(m, sizeof(int64_t));
    cl->bytes_win = xcalloc(m, sizeof(int64_t));
    cl->after_first = xcalloc(m, sizeof(int64_t));
    cl->t_first = xcalloc(m, sizeof(uint64_t));
    cl->t_last = xcalloc(m, sizeof(uint64_t));
    cl->finished = xcalloc(m, sizeof(int));
    cl->queue = xcalloc(m, sizeof(int));
    cl->stop_req = xcalloc(m, sizeof(MPI_Request));
    cl->ack_req = xcalloc(m, sizeof(MPI_Request));
    sv->local_of = xcalloc((size_t)ctx->size, sizeof(int));
    sv->nbins_max = z->nbins_max;
    sv->bin_large = hv_malloc_touched((size_t)z->nbins_max * sizeof(double));
    sv->bin_small = hv_malloc_touched((size_t)z->nbins_max * sizeof(double));
    sv->bin_ticks = hv_ns_to_ticks(&ctx->timer, c->bin_s * 1e9);
    sv->dur_ticks = hv_ns_to_ticks(&ctx->timer, c->duration_s * 1e9);
}

static void server_free(fanin_server *sv) {
    for (int i = 0; i < 2; i++) {
        hv_queue *Q = &sv->q[i];
        free(Q->req);
        free(Q->slot_pos);
        free(Q->clients);
        free(Q->idx);
        free(Q->st);
    }
    hv_clients *cl = &sv->cl;
    free(cl->rank);
    free(cl->role);
    free(cl->final_total);
    free(cl->recv_total);
    free(cl->recv_win);
    free(cl->bytes_win);
    free(cl->after_first);
    free(cl->t_first);
    free(cl->t_last);
    free(cl->finished);
    free(cl->queue);
    free(cl->stop_req);
    free(cl->ack_req);
    free(sv->local_of);
    free(sv->rbuf);
    free(sv->bin_large);
    free(sv->bin_small);
}

/* The root's local clients for one point: large first, then chatter; counters reset. */
static void server_set_clients(fanin_server *sv, const fanin_point *pt, const int *perm, int sidx) {
    hv_clients *cl = &sv->cl;
    const int S = (int)sv->cfg->servers;
    cl->n = 0;
    for (int i = sidx; i < pt->clients; i += S) {
        cl->rank[cl->n] = perm[S + i];
        cl->role[cl->n++] = ROLE_LARGE;
    }
    for (int j = sidx; j < pt->chatter; j += S) {
        cl->rank[cl->n] = perm[S + pt->clients + j];
        cl->role[cl->n++] = ROLE_CHATTER;
    }
    sv->nlarge = 0;
    for (int k = 0; k < cl->n; k++) {
        sv->local_of[cl->rank[k]] = k;
        cl->final_total[k] = cl->recv_total[k] = cl->recv_win[k] = cl->bytes_win[k] = cl->after_first[k] = 0;
        cl->t_first[k] = cl->t_last[k] = 0;
        cl->finished[k] = 0;
        cl->stop_req[k] = cl->ack_req[k] = MPI_REQUEST_NULL;
        sv->nlarge += cl->role[k] == ROLE_LARGE;
    }
}

/* The root's queues for one point, laid out one after the other in the slab. */
static void server_set_queues(fanin_server *sv, const fanin_point *pt) {
    const hv_clients *cl = &sv->cl;
    const long large = sv->cfg->large, small = sv->cfg->small;
    const int dual = pt->dual;
    size_t off = 0;
    sv->nq = dual ? 2 : 1;
    for (int i = 0; i < sv->nq; i++) {
        hv_queue *Q = &sv->q[i];
        Q->nclients = 0;
        for (int k = 0; k < cl->n; k++) {
            int mine = !dual || (i == 0 ? cl->role[k] == ROLE_CHATTER : cl->role[k] == ROLE_LARGE);
            if (mine) {
                Q->clients[Q->nclients++] = k;
                cl->queue[k] = i;
            }
        }
        Q->unfinished = Q->nclients;
        Q->n = pt->depth ? (Q->nclients ? pt->depth : 0) : Q->nclients;
        if (!dual) {
            Q->bufsz = (size_t)(sv->nlarge ? (large > small ? large : small) : small);
            Q->tag = MPI_ANY_TAG;
        } else {
            Q->bufsz = (size_t)(i == 0 ? small : large);
            Q->tag = i == 0 ? TAG_SMALL : TAG_LARGE;
        }
        Q->exact = pt->exact;
        Q->base = sv->rbuf + off;
        off += (size_t)Q->n * Q->bufsz;
        for (int s = 0; s < Q->n; s++) Q->slot_pos[s] = s % (Q->nclients ? Q->nclients : 1);
    }
}

static void post(hv_queue *q, const hv_clients *c, int s) {
    int src = MPI_ANY_SOURCE, tag = q->tag;
    if (q->exact) {
        int k = q->clients[q->slot_pos[s]];
        src = c->rank[k];
        tag = c->role[k] == ROLE_LARGE ? TAG_LARGE : TAG_SMALL;
    }
    HV_MPI_CHECK(MPI_Irecv(q->base + (size_t)s * q->bufsz, (int)q->bufsz, MPI_BYTE, src, tag, q->comm, &q->req[s]));
}

/* exact: the next unfinished position after pos + step (mod clients), or -1 */
static int next_pos(const hv_queue *q, const hv_clients *c, int pos, int step) {
    for (int t = 0; t < q->nclients; t++) {
        int p = (pos + step + t) % q->nclients;
        if (!c->finished[q->clients[p]]) return p;
    }
    return -1;
}

/* Re-post slot s after it completed (or was cancelled). */
static void repost(hv_queue *q, const hv_clients *c, int s, int step) {
    q->req[s] = MPI_REQUEST_NULL;
    if (q->exact) {
        q->slot_pos[s] = next_pos(q, c, q->slot_pos[s], step);
        if (q->slot_pos[s] >= 0) post(q, c, s);
    } else if (q->unfinished > 0) {
        post(q, c, s);
    }
}

static long cancel_req(MPI_Request *r) {
    MPI_Status st;
    int flag = 0;
    HV_MPI_CHECK(MPI_Cancel(r));
    HV_MPI_CHECK(MPI_Wait(r, &st));
    HV_MPI_CHECK(MPI_Test_cancelled(&st, &flag));
    if (!flag)
        HV_DIE("hv_fanin: a receive completed after every client had finished (from rank %d, tag %d)", st.MPI_SOURCE,
               st.MPI_TAG);
    return 1;
}

/* ---- the root: the poll loop ------------------------------------------------------------------ */

/* A message of client k completed at `now` inside the window: bytes, bins, steady-state times. */
static void server_count(fanin_server *sv, const server_run *run, int k, int bytes, uint64_t now) {
    hv_clients *cl = &sv->cl;
    cl->recv_win[k]++;
    cl->bytes_win[k] += bytes;
    uint64_t b = (now - run->t0) / sv->bin_ticks;
    if (b < (uint64_t)sv->nbins_max) {
        if (cl->role[k] == ROLE_LARGE) sv->bin_large[b] += bytes;
        else sv->bin_small[b] += bytes;
    }
    if (cl->role[k] == ROLE_LARGE) {
        if (cl->t_first[k]) cl->after_first[k] += bytes;
        else cl->t_first[k] = now;
        cl->t_last[k] = now;
    }
}

/* Client k's last message is in: with exact matching, slots still waiting for k move on. */
static void server_client_done(fanin_server *sv, server_run *run, int k) {
    hv_clients *cl = &sv->cl;
    hv_queue *K = &sv->q[cl->queue[k]];
    cl->finished[k] = 1;
    run->nfinished++;
    K->unfinished--;
    if (cl->role[k] == ROLE_LARGE) run->large_finished++;
    if (!K->exact) return;
    for (int s2 = 0; s2 < K->n; s2++)
        if (K->req[s2] != MPI_REQUEST_NULL && K->clients[K->slot_pos[s2]] == k) {
            run->cancelled += cancel_req(&K->req[s2]);
            repost(K, cl, s2, 1);
        }
}

/* The j-th completion of the last Testsome on queue Q. */
static void server_handle(fanin_server *sv, server_run *run, hv_queue *Q, int j, uint64_t now, int in_win) {
    hv_clients *cl = &sv->cl;
    const int s = Q->idx[j];
    const MPI_Status *st = &Q->st[j];
    int bytes = 0;
    HV_MPI_CHECK(MPI_Get_count(st, MPI_BYTE, &bytes));
    const int k = sv->local_of[st->MPI_SOURCE];
    int64_t hdr;
    memcpy(&hdr, Q->base + (size_t)s * Q->bufsz, sizeof hdr);
    cl->recv_total[k]++;
    if (hdr > 0) cl->final_total[k] = hdr;
    if (in_win) server_count(sv, run, k, bytes, now);
    if (cl->role[k] == ROLE_CHATTER) {
        if (cl->ack_req[k] != MPI_REQUEST_NULL) hv_wait(sv->ctx, &cl->ack_req[k]);
        HV_MPI_CHECK(MPI_Isend(&sv->ackbuf, HDR, MPI_BYTE, st->MPI_SOURCE, TAG_ACK, Q->comm, &cl->ack_req[k]));
    }
    if (cl->final_total[k] > 0 && cl->recv_total[k] == cl->final_total[k]) server_client_done(sv, run, k);
    repost(Q, cl, s, Q->n);
}

/* Tests queue Q once and handles what completed; returns 1 if anything did. */
static int server_poll_queue(fanin_server *sv, server_run *run, hv_queue *Q) {
    int outc = 0;
    if (Q->n == 0) return 0;
    HV_MPI_CHECK(MPI_Testsome(Q->n, Q->req, &outc, Q->idx, Q->st));
    if (outc == MPI_UNDEFINED || outc == 0) return 0;
    const uint64_t now = hv_ticks(&sv->ctx->timer);
    const int in_win = !run->stopped && now <= run->t_end;
    for (int j = 0; j < outc; j++) server_handle(sv, run, Q, j, now, in_win);
    return 1;
}

/* The window is over (time, or every large client's last message): send STOP to every client. */
static void server_maybe_stop(fanin_server *sv, server_run *run) {
    const uint64_t now = hv_ticks(&sv->ctx->timer);
    const int by_messages = sv->cfg->messages > 0;
    if (by_messages ? run->large_finished != sv->nlarge : now < run->t_end) return;
    if (by_messages) run->t_end = now;
    run->stopped = 1;
    for (int k = 0; k < sv->cl.n; k++)
        HV_MPI_CHECK(
            MPI_Isend(&sv->stopbuf, HDR, MPI_BYTE, sv->cl.rank[k], TAG_STOP, sv->ctx->comm, &sv->cl.stop_req[k]));
}

static void server_poll(fanin_server *sv, server_run *run) {
    while (run->nfinished < sv->cl.n) {
        int progressed = 0;
        for (int i = 0; i < sv->nq; i++) progressed |= server_poll_queue(sv, run, &sv->q[i]);
        if (!run->stopped) server_maybe_stop(sv, run);
        if (!progressed) hv_idle(sv->ctx);
    }
}

/* ---- the root: rows ---------------------------------------------------------------------------- */

static double *row(double *rows, size_t *nrows) { return rows + (*nrows)++ * NCOLS; }

/* Kinds 1 (per client), 2 (bins), 4 (root), 7 (per large client); returns the number of rows. */
static size_t server_rows(const fanin_server *sv, const server_run *run, double *rows) {
    const hv_clients *cl = &sv->cl;
    const hv_timer *tm = &sv->ctx->timer;
    const double me = sv->ctx->rank;
    size_t nrows = 0;
    double *r;
    for (int k = 0; k < cl->n; k++) {
        r = row(rows, &nrows);
        r[0] = 1;
        r[1] = cl->rank[k];
        r[2] = me;
        r[3] = cl->role[k];
        r[4] = (double)cl->bytes_win[k];
        r[5] = (double)cl->recv_win[k];
        r[6] = (double)cl->recv_total[k];
    }
    long nb = (long)((run->t_end - run->t0) / sv->bin_ticks) + 1;
    if (nb > sv->nbins_max) nb = sv->nbins_max;
    const double bin_ns = hv_ticks_to_ns(tm, sv->bin_ticks);
    for (long b = 0; b < nb; b++) {
        r = row(rows, &nrows);
        r[0] = 2;
        r[1] = me;
        r[2] = -1;
        r[3] = (double)b;
        r[4] = sv->bin_large[b];
        r[5] = sv->bin_small[b];
        r[6] = (double)b * bin_ns;
    }
    r = row(rows, &nrows);
    r[0] = 4;
    r[1] = me;
    r[2] = -1;
    r[3] = 0;
    r[4] = hv_ticks_to_ns(tm, run->t_end - run->t0);
    r[5] = (double)run->cancelled;
    r[6] = (double)run->posted;
    for (int k = 0; k < cl->n; k++) {
        if (cl->role[k] != ROLE_LARGE) continue;
        r = row(rows, &nrows);
        r[0] = 7;
        r[1] = cl->rank[k];
        r[2] = me;
        r[3] = 0;
        r[4] = cl->t_first[k] ? hv_ticks_to_ns(tm, cl->t_first[k] - run->t0) : 0.0;
        r[5] = cl->t_first[k] ? hv_ticks_to_ns(tm, cl->t_last[k] - run->t0) : 0.0;
        r[6] = (double)cl->after_first[k];
    }
    return nrows;
}

/* One point on root sidx: set up, post, poll until every client is done, cancel the rest, rows. */
static size_t run_server(fanin_server *sv, const fanin_point *pt, const int *perm, int sidx, double *rows) {
    server_run run = {0};
    server_set_clients(sv, pt, perm, sidx);
    server_set_queues(sv, pt);
    for (long b = 0; b < sv->nbins_max; b++) sv->bin_large[b] = sv->bin_small[b] = 0.0;
    for (int i = 0; i < sv->nq; i++) {
        for (int s = 0; s < sv->q[i].n; s++) post(&sv->q[i], &sv->cl, s);
        run.posted += sv->q[i].n;
    }
    hv_barrier(sv->ctx);
    run.t0 = hv_ticks(&sv->ctx->timer);
    run.t_end = sv->cfg->messages > 0 ? UINT64_MAX : run.t0 + sv->dur_ticks;
    server_poll(sv, &run);
    for (int i = 0; i < sv->nq; i++)
        for (int s = 0; s < sv->q[i].n; s++)
            if (sv->q[i].req[s] != MPI_REQUEST_NULL) run.cancelled += cancel_req(&sv->q[i].req[s]);
    hv_waitall(sv->ctx, sv->cl.n, sv->cl.stop_req);
    hv_waitall(sv->ctx, sv->cl.n, sv->cl.ack_req);
    if (!run.stopped) run.t_end = run.t0; /* a root without clients */
    return server_rows(sv, &run, rows);
}

/* ---- the clients ------------------------------------------------------------------------------- */

static void client_alloc(fanin_client *cc, hv_ctx *ctx, const fanin_config *c) {
    memset(cc, 0, sizeof *cc);
    cc->ctx = ctx;
    cc->cfg = c;
    cc->lbuf = hv_malloc_touched((size_t)c->large);
    cc->sbuf = hv_malloc_touched((size_t)c->small);
    cc->rtt = hv_malloc_touched((size_t)c->max_samples * sizeof(uint64_t));
    cc->tsend = hv_malloc_touched((size_t)c->max_samples * sizeof(uint64_t));
}

static void client_free(fanin_client *cc) {
    free(cc->lbuf);
    free(cc->sbuf);
    free(cc->rtt);
    free(cc->tsend);
}

/* Large messages back to back until STOP (or the --messages-th); no rows. */
static void run_large_client(fanin_client *cc, int server) {
    const hv_ctx *ctx = cc->ctx;
    const long messages = cc->cfg->messages;
    MPI_Request stop_req;
    int stopflag = 0;
    int64_t sent = 0, hdr;
    HV_MPI_CHECK(MPI_Irecv(&cc->stopbuf, HDR, MPI_BYTE, server, TAG_STOP, ctx->comm, &stop_req));
    hv_barrier(ctx);
    for (;;) {
        if (!stopflag) HV_MPI_CHECK(MPI_Test(&stop_req, &stopflag, MPI_STATUS_IGNORE));
        int last = stopflag || (messages > 0 && sent + 1 == messages);
        int n = stopflag ? HDR : (int)cc->cfg->large;
        hdr = last ? sent + 1 : 0;
        memcpy(cc->lbuf, &hdr, sizeof hdr);
        MPI_Request sreq;
        HV_MPI_CHECK(MPI_Isend(cc->lbuf, n, MPI_BYTE, server, TAG_LARGE, ctx->comm, &sreq));
        hv_wait(ctx, &sreq);
        sent++;
        if (last) break;
    }
    if (!stopflag) hv_wait(ctx, &stop_req);
}

typedef struct {        /* a chatter client's recorded round trips */
    int64_t nrec, stride;
} chatter_log;

/* Records round trip number `sent` (a..b, ticks) if it falls on the stride; past max_samples it keeps
 * every other sample and doubles the stride, so that sample i stays at sequence i * stride. */
static void chatter_record(fanin_client *cc, chatter_log *lg, int64_t sent, uint64_t a, uint64_t b, uint64_t t0) {
    const int64_t max_samples = cc->cfg->max_samples;
    if (sent % lg->stride != 0) return;
    if (lg->nrec == max_samples) {
        for (int64_t i = 0; i < max_samples / 2; i++) {
            cc->rtt[i] = cc->rtt[2 * i];
            cc->tsend[i] = cc->tsend[2 * i];
        }
        lg->nrec = max_samples / 2;
        lg->stride *= 2;
    }
    if (sent % lg->stride == 0) {
        cc->rtt[lg->nrec] = b - a;
        cc->tsend[lg->nrec++] = a - t0;
    }
}

/* Small messages, each waiting for the root's ack, until STOP; kinds 3 and 5. */
static size_t run_chatter_client(fanin_client *cc, int server, double *rows) {
    const hv_ctx *ctx = cc->ctx;
    MPI_Request stop_req;
    int stopflag = 0;
    int64_t sent = 0, hdr;
    chatter_log lg = {0, 1};
    HV_MPI_CHECK(MPI_Irecv(&cc->stopbuf, HDR, MPI_BYTE, server, TAG_STOP, ctx->comm, &stop_req));
    hv_barrier(ctx);
    const uint64_t t0 = hv_ticks(&ctx->timer);
    for (;;) {
        if (!stopflag) HV_MPI_CHECK(MPI_Test(&stop_req, &stopflag, MPI_STATUS_IGNORE));
        hdr = stopflag ? sent + 1 : 0;
        memcpy(cc->sbuf, &hdr, sizeof hdr);
        const int n = stopflag ? HDR : (int)cc->cfg->small;
        const uint64_t a = hv_ticks(&ctx->timer);
        MPI_Request rt[2];
        HV_MPI_CHECK(MPI_Irecv(&cc->ackin, HDR, MPI_BYTE, server, TAG_ACK, ctx->comm, &rt[0]));
        HV_MPI_CHECK(MPI_Isend(cc->sbuf, n, MPI_BYTE, server, TAG_SMALL, ctx->comm, &rt[1]));
        hv_waitall(ctx, 2, rt);
        const uint64_t b = hv_ticks(&ctx->timer);
        if (!stopflag) chatter_record(cc, &lg, sent, a, b, t0);
        sent++;
        if (stopflag) break;
    }
    size_t nrows = 0;
    double *r;
    for (int64_t i = 0; i < lg.nrec; i++) {
        r = row(rows, &nrows);
        r[0] = 3;
        r[1] = ctx->rank;
        r[2] = server;
        r[3] = (double)(i * lg.stride);
        r[4] = hv_ticks_to_ns(&ctx->timer, cc->rtt[i]);
        r[5] = hv_ticks_to_ns(&ctx->timer, cc->tsend[i]);
        r[6] = 0;
    }
    r = row(rows, &nrows);
    r[0] = 5;
    r[1] = ctx->rank;
    r[2] = server;
    r[3] = 0;
    r[4] = (double)(sent - 1);
    r[5] = (double)lg.nrec;
    r[6] = (double)lg.stride;
    return nrows;
}

/* ---- main ---------------------------------------------------------------------------------------- */

static void write_header(hv_ctx *ctx, const int *perm) {
    const char *cols[] = {"kind", "rank", "peer", "idx", "a", "b", "c"};
    if (ctx->rank != 0) return;
    hv_out_columns(&ctx->out, NCOLS, cols);
    fputs("#@placement_ranks=", ctx->out.f); /* position -> rank (roles are taken by position) */
    for (int i = 0; i < ctx->size; i++) fprintf(ctx->out.f, "%s%d", i ? "," : "", perm[i]);
    fputc('\n', ctx->out.f);
}

static void describe_point(const fanin_config *c, const fanin_point *pt, char *desc, size_t len) {
    snprintf(desc, len,
             "rep=%ld clients=%d chatter=%d queues=%s depth=%s%.0d match=%s servers=%ld large=%ld small=%ld "
             "bin_ns=%.0f duration_s=%g messages=%ld placement=%s seed=%ld wait_us=%ld",
             c->rep, pt->clients, pt->chatter, pt->dual ? "dual" : "single", pt->depth ? "" : "deep", pt->depth,
             pt->exact ? "exact" : "any", c->servers, c->large, c->small, c->bin_s * 1e9, c->duration_s, c->messages,
             c->placement, c->seed, c->wait_us);
}

/* This rank's part of one point, by its position; returns its number of rows. */
static size_t run_point(const fanin_config *c, const fanin_point *pt, int mypos, const int *perm, fanin_server *sv,
                        fanin_client *cc, double *rows) {
    const int S = (int)c->servers, L = pt->clients, C = pt->chatter;
    if (mypos < S) return run_server(sv, pt, perm, mypos, rows);
    if (mypos < S + L) {
        run_large_client(cc, perm[(mypos - S) % S]);
        return 0;
    }
    if (mypos < S + L + C) return run_chatter_client(cc, perm[(mypos - S - L) % S], rows);
    hv_barrier(cc->ctx);
    return 0;
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        HV_OPT_LONG(fanin_config, servers, "servers", 1, 1 << 20, "number of roots"),
        HV_OPT_LONG(fanin_config, large, "large", HDR, 0x7fffffffL, "large-buffer message size in bytes"),
        HV_OPT_LONG(fanin_config, small, "small", HDR, 0x7fffffffL, "chatter message size in bytes"),
        HV_OPT_DOUBLE(fanin_config, duration_s, "duration", 0.0, 1e6,
                      "measured window per point in seconds (0 with --messages)"),
        HV_OPT_LONG(fanin_config, messages, "messages", 0, 1L << 40, "messages per large client (0 with --duration)"),
        HV_OPT_DOUBLE(fanin_config, bin_s, "bin", 1e-6, 1e6, "time-series bin width in seconds"),
        HV_OPT_LONG(fanin_config, max_samples, "max-samples", 2, 1L << 30,
                    "recorded round trips per chatter client (stride doubles beyond)"),
        HV_OPT_LONG(fanin_config, rep, "rep", 0, 1L << 30, "repetition index written into every point"),
        HV_OPT_STRING_OR(fanin_config, placement, "placement", "fixed|shuffle rank-to-role mapping"),
        HV_OPT_LONG(fanin_config, seed, "seed", 0, 0x7fffffffffffffffL, "seed of the shuffled placement"),
        HV_OPT_LIST(fanin_config, p_clients, npl, "p-clients", "per point: large-buffer clients"),
        HV_OPT_LIST(fanin_config, p_chatter, npc, "p-chatter", "per point: chatter clients"),
        HV_OPT_LIST(fanin_config, p_queues, npq, "p-queues", "per point: 0 single, 1 dual"),
        HV_OPT_LIST(fanin_config, p_depth, npd, "p-depth", "per point: 0 deep, else posted receives per queue"),
        HV_OPT_LIST(fanin_config, p_match, npm, "p-match", "per point: 0 any, 1 exact"),
        HV_OPT_LONG(fanin_config, wait_us, "wait-us", -1, 1000000,
                    "waiting: 0 spin in MPI, -1 yield, N sleep N us between tests"),
    };
    hv_ctx ctx;
    fanin_config cfg = {0};
    hv_ctx_init_config(&ctx, &argc, &argv, "hv_fanin", opts, sizeof opts / sizeof opts[0], &cfg);
    check_config(&cfg);
    hv_set_wait(&ctx, (int)cfg.wait_us);

    int *perm = make_placement(&cfg, ctx.size), mypos = 0;
    for (int i = 0; i < ctx.size; i++)
        if (perm[i] == ctx.rank) mypos = i;
    const fanin_sizes z = size_everything(&cfg, ctx.size, mypos);
    fanin_server sv = {0};
    fanin_client cc = {0};
    if (mypos < cfg.servers) server_alloc(&sv, &ctx, &cfg, &z);
    else client_alloc(&cc, &ctx, &cfg);
    double *rows = hv_malloc_touched((size_t)z.maxrows * NCOLS * sizeof(double));
    write_header(&ctx, perm);

    for (size_t p = 0; p < cfg.npoints; p++) {
        const fanin_point pt = point_at(&cfg, p);
        const size_t nrows = run_point(&cfg, &pt, mypos, perm, &sv, &cc, rows);
        char desc[320];
        describe_point(&cfg, &pt, desc, sizeof desc);
        hv_gather_point(&ctx, desc, rows, nrows);
    }
    if (mypos < cfg.servers) server_free(&sv);
    else client_free(&cc);
    free(perm);
    free(rows);
    free_config(&cfg);
    hv_ctx_finish(&ctx);
    return 0;
}
