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
 * (kind 6, a root-wide version of kind 7, is no longer written: docs/fanin.md) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hv_mpi.h"

enum { TAG_LARGE = 11, TAG_SMALL = 12, TAG_STOP = 13, TAG_ACK = 14 };
enum { ROLE_IDLE = 0, ROLE_LARGE = 1, ROLE_CHATTER = 2, ROLE_SERVER = 3 };
enum { NCOLS = 7, HDR = 8, MAX_BINS_MESSAGES = 1 << 16 };

typedef struct {
    int n;              /* slots in this queue */
    size_t bufsz;
    char *base;         /* n * bufsz bytes of the slab */
    MPI_Request *req;
    int *slot_pos;      /* exact: position in clients[] the slot targets, -1 inactive */
    int *clients;       /* local client indices served by this queue */
    int nclients, unfinished;
    int tag;            /* tag of "any" receives: MPI_ANY_TAG, TAG_LARGE or TAG_SMALL */
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

static int exact_mode;
static MPI_Comm comm;

static void post(hv_queue *q, const hv_clients *c, int s) {
    int src = MPI_ANY_SOURCE, tag = q->tag;
    if (exact_mode) {
        int k = q->clients[q->slot_pos[s]];
        src = c->rank[k];
        tag = c->role[k] == ROLE_LARGE ? TAG_LARGE : TAG_SMALL;
    }
    HV_MPI_CHECK(MPI_Irecv(q->base + (size_t)s * q->bufsz, (int)q->bufsz, MPI_BYTE, src, tag, comm, &q->req[s]));
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
    if (exact_mode) {
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
    if (!flag) HV_DIE("hv_fanin: a receive completed after every client had finished (from rank %d, tag %d)",
                      st.MPI_SOURCE, st.MPI_TAG);
    return 1;
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        {"servers", NULL, 0, "number of roots"},
        {"large", NULL, 0, "large-buffer message size in bytes"},
        {"small", NULL, 0, "chatter message size in bytes"},
        {"duration", NULL, 0, "measured window per point in seconds (0 with --messages)"},
        {"messages", NULL, 0, "messages per large client (0 with --duration)"},
        {"bin", NULL, 0, "time-series bin width in seconds"},
        {"max-samples", NULL, 0, "recorded round trips per chatter client (stride doubles beyond)"},
        {"rep", NULL, 0, "repetition index written into every point"},
        {"placement", NULL, 0, "fixed|shuffle rank-to-role mapping"},
        {"seed", NULL, 0, "seed of the shuffled placement"},
        {"p-clients", NULL, 0, "per point: large-buffer clients"},
        {"p-chatter", NULL, 0, "per point: chatter clients"},
        {"p-queues", NULL, 0, "per point: 0 single, 1 dual"},
        {"p-depth", NULL, 0, "per point: 0 deep, else posted receives per queue"},
        {"p-match", NULL, 0, "per point: 0 any, 1 exact"},
        {"wait-us", NULL, 0, "waiting: 0 spin in MPI, -1 yield, N sleep N us between tests"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    hv_ctx ctx;
    hv_ctx_init(&ctx, &argc, &argv, "hv_fanin", opts, nopts);
    comm = ctx.comm;

    char err[256];
    long S, large, small, messages, max_samples, rep, seed, wait_us;
    double duration, bin_s;
    int64_t *pl, *pc, *pq, *pd, *pm;
    size_t npl, npc, npq, npd, npm;
    if (hv_args_long(opts, nopts, "servers", 1, 1 << 20, &S, err, sizeof err) ||
        hv_args_long(opts, nopts, "large", HDR, 0x7fffffffL, &large, err, sizeof err) ||
        hv_args_long(opts, nopts, "small", HDR, 0x7fffffffL, &small, err, sizeof err) ||
        hv_args_double(opts, nopts, "duration", 0.0, 1e6, &duration, err, sizeof err) ||
        hv_args_long(opts, nopts, "messages", 0, 1L << 40, &messages, err, sizeof err) ||
        hv_args_double(opts, nopts, "bin", 1e-6, 1e6, &bin_s, err, sizeof err) ||
        hv_args_long(opts, nopts, "max-samples", 2, 1L << 30, &max_samples, err, sizeof err) ||
        hv_args_long(opts, nopts, "rep", 0, 1L << 30, &rep, err, sizeof err) ||
        hv_args_long(opts, nopts, "seed", 0, 0x7fffffffffffffffL, &seed, err, sizeof err) ||
        hv_args_long(opts, nopts, "wait-us", -1, 1000000, &wait_us, err, sizeof err) ||
        hv_args_list(opts, nopts, "p-clients", &pl, &npl, err, sizeof err) ||
        hv_args_list(opts, nopts, "p-chatter", &pc, &npc, err, sizeof err) ||
        hv_args_list(opts, nopts, "p-queues", &pq, &npq, err, sizeof err) ||
        hv_args_list(opts, nopts, "p-depth", &pd, &npd, err, sizeof err) ||
        hv_args_list(opts, nopts, "p-match", &pm, &npm, err, sizeof err))
        HV_DIE("hv_fanin: %s", err);
    hv_set_wait(&ctx, (int)wait_us);
    const char *placement = hv_args_get(opts, nopts, "placement");
    if (!placement || (strcmp(placement, "fixed") != 0 && strcmp(placement, "shuffle") != 0))
        HV_DIE("hv_fanin: --placement must be fixed or shuffle");
    if ((duration > 0) == (messages > 0)) HV_DIE("hv_fanin: give exactly one of --duration and --messages");
    max_samples &= ~1L; /* even: the stride doubling keeps sample i at sequence i * stride */
    const size_t np = npl;
    if (npc != np || npq != np || npd != np || npm != np) HV_DIE("hv_fanin: the --p-* lists differ in length");
    const int R = ctx.size;

    /* the rank permutation: position -> rank, and its inverse */
    int *perm = xcalloc((size_t)R, sizeof *perm), *pos_of = xcalloc((size_t)R, sizeof *pos_of);
    for (int i = 0; i < R; i++) perm[i] = i;
    if (strcmp(placement, "shuffle") == 0) {
        uint64_t st = (uint64_t)seed;
        for (int i = R - 1; i > 0; i--) {
            int j = (int)(splitmix64(&st) % (uint64_t)(i + 1));
            int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
    }
    for (int i = 0; i < R; i++) pos_of[perm[i]] = i;
    const int mypos = pos_of[ctx.rank];

    /* sizes of everything, maximised over the points, then one allocation each */
    long maxloc = 1, maxreq = 1, maxrows = 1;
    size_t slab = HDR;
    const long nbins_max = messages > 0 ? MAX_BINS_MESSAGES : (long)(duration / bin_s) + 2;
    for (size_t p = 0; p < np; p++) {
        long L = (long)pl[p], C = (long)pc[p], depth = (long)pd[p];
        if (L < 1) HV_DIE("hv_fanin: point %zu has no large-buffer client", p);
        if (S + L + C > R) HV_DIE("hv_fanin: point %zu needs %ld ranks (servers+clients+chatter), the job has %d",
                                  p, S + L + C, R);
        if (mypos < S) {
            long nl = L / S + (mypos < L % S), nc = C / S + (mypos < C % S);
            if (nl + nc > maxloc) maxloc = nl + nc;
            size_t need;
            long r0, r1 = 0;
            if (pq[p] == 0) {
                r0 = depth ? depth : nl + nc;
                need = (size_t)r0 * (size_t)(large > small ? large : small);
            } else {
                r0 = depth ? (nc ? depth : 0) : nc;
                r1 = depth ? depth : nl;
                need = (size_t)r0 * (size_t)small + (size_t)r1 * (size_t)large;
            }
            if (r0 > maxreq) maxreq = r0;
            if (r1 > maxreq) maxreq = r1;
            if (need > slab) slab = need;
            if (2 * (nl + nc) + nbins_max + 1 > maxrows) maxrows = 2 * (nl + nc) + nbins_max + 1;
        }
    }
    if (max_samples + 1 > maxrows) maxrows = max_samples + 1;

    const int is_server_rank = mypos < S;
    char *rbuf = is_server_rank ? hv_malloc_touched(slab) : NULL;
    hv_queue q[2];
    for (int i = 0; i < 2 && is_server_rank; i++) {
        q[i].req = xcalloc((size_t)maxreq, sizeof(MPI_Request));
        q[i].slot_pos = xcalloc((size_t)maxreq, sizeof(int));
        q[i].clients = xcalloc((size_t)maxloc, sizeof(int));
        q[i].idx = xcalloc((size_t)maxreq, sizeof(int));
        q[i].st = xcalloc((size_t)maxreq, sizeof(MPI_Status));
    }
    hv_clients cl = {0};
    if (is_server_rank) {
        size_t m = (size_t)maxloc;
        cl.rank = xcalloc(m, sizeof(int)); cl.role = xcalloc(m, sizeof(int));
        cl.final_total = xcalloc(m, sizeof(int64_t)); cl.recv_total = xcalloc(m, sizeof(int64_t));
        cl.recv_win = xcalloc(m, sizeof(int64_t)); cl.bytes_win = xcalloc(m, sizeof(int64_t));
        cl.after_first = xcalloc(m, sizeof(int64_t));
        cl.t_first = xcalloc(m, sizeof(uint64_t)); cl.t_last = xcalloc(m, sizeof(uint64_t));
        cl.finished = xcalloc(m, sizeof(int)); cl.queue = xcalloc(m, sizeof(int));
        cl.stop_req = xcalloc(m, sizeof(MPI_Request)); cl.ack_req = xcalloc(m, sizeof(MPI_Request));
    }
    int *local_of = xcalloc((size_t)R, sizeof(int));
    double *bin_large = is_server_rank ? hv_malloc_touched((size_t)nbins_max * sizeof(double)) : NULL;
    double *bin_small = is_server_rank ? hv_malloc_touched((size_t)nbins_max * sizeof(double)) : NULL;
    /* client buffers: every non-server rank may be a client in some point */
    char *lbuf = !is_server_rank ? hv_malloc_touched((size_t)large) : NULL;
    char *sbuf = !is_server_rank ? hv_malloc_touched((size_t)small) : NULL;
    uint64_t *rtt = !is_server_rank ? hv_malloc_touched((size_t)max_samples * sizeof(uint64_t)) : NULL;
    uint64_t *tsend = !is_server_rank ? hv_malloc_touched((size_t)max_samples * sizeof(uint64_t)) : NULL;
    double *rows = hv_malloc_touched((size_t)maxrows * NCOLS * sizeof(double));
    int64_t ackbuf = 0, stopbuf = 0, ackin = 0;

    const char *cols[] = {"kind", "rank", "peer", "idx", "a", "b", "c"};
    if (ctx.rank == 0) {
        hv_out_columns(&ctx.out, NCOLS, cols);
        fputs("#@placement_ranks=", ctx.out.f); /* position -> rank (roles are taken by position) */
        for (int i = 0; i < R; i++) fprintf(ctx.out.f, "%s%d", i ? "," : "", perm[i]);
        fputc('\n', ctx.out.f);
    }
    const uint64_t bin_ticks = hv_ns_to_ticks(&ctx.timer, bin_s * 1e9);
    const uint64_t dur_ticks = hv_ns_to_ticks(&ctx.timer, duration * 1e9);

    for (size_t p = 0; p < np; p++) {
        const int L = (int)pl[p], C = (int)pc[p], dual = pq[p] != 0;
        const int depth = (int)pd[p];
        exact_mode = pm[p] != 0;
        int role = ROLE_IDLE, server = -1, sidx = -1;
        if (mypos < S) {
            role = ROLE_SERVER;
            sidx = mypos;
        } else if (mypos < S + L) {
            role = ROLE_LARGE;
            server = perm[(mypos - S) % S];
        } else if (mypos < S + L + C) {
            role = ROLE_CHATTER;
            server = perm[(mypos - S - L) % S];
        }
        size_t nrows = 0;
        long cancelled = 0;

        if (role == ROLE_SERVER) {
            /* local clients: large first, then chatter */
            cl.n = 0;
            for (int i = sidx; i < L; i += (int)S) {
                cl.rank[cl.n] = perm[S + i]; cl.role[cl.n++] = ROLE_LARGE;
            }
            for (int j = sidx; j < C; j += (int)S) {
                cl.rank[cl.n] = perm[S + L + j]; cl.role[cl.n++] = ROLE_CHATTER;
            }
            int nlarge = 0;
            for (int k = 0; k < cl.n; k++) {
                local_of[cl.rank[k]] = k;
                cl.final_total[k] = cl.recv_total[k] = cl.recv_win[k] = cl.bytes_win[k] = cl.after_first[k] = 0;
                cl.t_first[k] = cl.t_last[k] = 0;
                cl.finished[k] = 0;
                cl.stop_req[k] = cl.ack_req[k] = MPI_REQUEST_NULL;
                nlarge += cl.role[k] == ROLE_LARGE;
            }
            /* queues: q[0] single (all) or small/control (chatter); q[1] large (dual only) */
            const int nq = dual ? 2 : 1;
            size_t off = 0;
            for (int i = 0; i < nq; i++) {
                hv_queue *Q = &q[i];
                Q->nclients = 0;
                for (int k = 0; k < cl.n; k++) {
                    int mine = !dual || (i == 0 ? cl.role[k] == ROLE_CHATTER : cl.role[k] == ROLE_LARGE);
                    if (mine) { Q->clients[Q->nclients++] = k; cl.queue[k] = i; }
                }
                Q->unfinished = Q->nclients;
                Q->n = depth ? (Q->nclients ? depth : 0) : Q->nclients;
                if (!dual) {
                    Q->bufsz = (size_t)(nlarge ? (large > small ? large : small) : small);
                    Q->tag = MPI_ANY_TAG;
                } else {
                    Q->bufsz = (size_t)(i == 0 ? small : large);
                    Q->tag = i == 0 ? TAG_SMALL : TAG_LARGE;
                }
                Q->base = rbuf + off;
                off += (size_t)Q->n * Q->bufsz;
                for (int s = 0; s < Q->n; s++) Q->slot_pos[s] = s % (Q->nclients ? Q->nclients : 1);
            }
            for (long b = 0; b < nbins_max; b++) bin_large[b] = bin_small[b] = 0.0;
            int nfinished = 0, large_finished = 0, stopped = 0;
            long posted = 0;
            for (int i = 0; i < nq; i++) {
                for (int s = 0; s < q[i].n; s++) post(&q[i], &cl, s);
                posted += q[i].n;
            }
            hv_barrier(&ctx);
            const uint64_t t0 = hv_ticks(&ctx.timer);
            uint64_t t_end = messages > 0 ? UINT64_MAX : t0 + dur_ticks;
            while (nfinished < cl.n) {
                int progressed = 0;
                for (int i = 0; i < nq; i++) {
                    hv_queue *Q = &q[i];
                    int outc = 0;
                    if (Q->n == 0) continue;
                    HV_MPI_CHECK(MPI_Testsome(Q->n, Q->req, &outc, Q->idx, Q->st));
                    if (outc == MPI_UNDEFINED || outc == 0) continue;
                    progressed = 1;
                    const uint64_t now = hv_ticks(&ctx.timer);
                    const int in_win = !stopped && now <= t_end;
                    for (int j = 0; j < outc; j++) {
                        const int s = Q->idx[j];
                        const MPI_Status *st = &Q->st[j];
                        int bytes = 0;
                        HV_MPI_CHECK(MPI_Get_count(st, MPI_BYTE, &bytes));
                        const int k = local_of[st->MPI_SOURCE];
                        int64_t hdr;
                        memcpy(&hdr, Q->base + (size_t)s * Q->bufsz, sizeof hdr);
                        cl.recv_total[k]++;
                        if (hdr > 0) cl.final_total[k] = hdr;
                        if (in_win) {
                            cl.recv_win[k]++;
                            cl.bytes_win[k] += bytes;
                            uint64_t b = (now - t0) / bin_ticks;
                            if (b < (uint64_t)nbins_max) {
                                if (cl.role[k] == ROLE_LARGE) bin_large[b] += bytes;
                                else bin_small[b] += bytes;
                            }
                            if (cl.role[k] == ROLE_LARGE) {
                                if (cl.t_first[k]) cl.after_first[k] += bytes;
                                else cl.t_first[k] = now;
                                cl.t_last[k] = now;
                            }
                        }
                        if (cl.role[k] == ROLE_CHATTER) {
                            if (cl.ack_req[k] != MPI_REQUEST_NULL) hv_wait(&ctx, &cl.ack_req[k]);
                            HV_MPI_CHECK(MPI_Isend(&ackbuf, HDR, MPI_BYTE, st->MPI_SOURCE, TAG_ACK, comm, &cl.ack_req[k]));
                        }
                        if (cl.final_total[k] > 0 && cl.recv_total[k] == cl.final_total[k]) {
                            hv_queue *K = &q[cl.queue[k]];
                            cl.finished[k] = 1;
                            nfinished++;
                            K->unfinished--;
                            if (cl.role[k] == ROLE_LARGE) large_finished++;
                            if (exact_mode) /* slots still waiting for k move on */
                                for (int s2 = 0; s2 < K->n; s2++)
                                    if (K->req[s2] != MPI_REQUEST_NULL && K->clients[K->slot_pos[s2]] == k) {
                                        cancelled += cancel_req(&K->req[s2]);
                                        repost(K, &cl, s2, 1);
                                    }
                        }
                        repost(Q, &cl, s, Q->n);
                    }
                }
                if (!stopped) {
                    const uint64_t now = hv_ticks(&ctx.timer);
                    int stop = messages > 0 ? large_finished == nlarge : now >= t_end;
                    if (stop) {
                        if (messages > 0) t_end = now;
                        stopped = 1;
                        for (int k = 0; k < cl.n; k++)
                            HV_MPI_CHECK(MPI_Isend(&stopbuf, HDR, MPI_BYTE, cl.rank[k], TAG_STOP, comm, &cl.stop_req[k]));
                    }
                }
                if (!progressed) hv_idle(&ctx);
            }
            for (int i = 0; i < nq; i++)
                for (int s = 0; s < q[i].n; s++)
                    if (q[i].req[s] != MPI_REQUEST_NULL) cancelled += cancel_req(&q[i].req[s]);
            hv_waitall(&ctx, cl.n, cl.stop_req);
            hv_waitall(&ctx, cl.n, cl.ack_req);
            if (!stopped) t_end = t0; /* a root without clients */
            const double window_ns = hv_ticks_to_ns(&ctx.timer, t_end - t0);
            for (int k = 0; k < cl.n; k++) {
                double *r = rows + nrows++ * NCOLS;
                r[0] = 1; r[1] = cl.rank[k]; r[2] = ctx.rank; r[3] = cl.role[k];
                r[4] = (double)cl.bytes_win[k]; r[5] = (double)cl.recv_win[k]; r[6] = (double)cl.recv_total[k];
            }
            long nb = (long)((t_end - t0) / bin_ticks) + 1;
            if (nb > nbins_max) nb = nbins_max;
            const double bin_ns = hv_ticks_to_ns(&ctx.timer, bin_ticks);
            for (long b = 0; b < nb; b++) {
                double *r = rows + nrows++ * NCOLS;
                r[0] = 2; r[1] = ctx.rank; r[2] = -1; r[3] = (double)b;
                r[4] = bin_large[b]; r[5] = bin_small[b]; r[6] = (double)b * bin_ns;
            }
            double *r = rows + nrows++ * NCOLS;
            r[0] = 4; r[1] = ctx.rank; r[2] = -1; r[3] = 0; r[4] = window_ns; r[5] = (double)cancelled;
            r[6] = (double)posted;
            for (int k = 0; k < cl.n; k++) {
                if (cl.role[k] != ROLE_LARGE) continue;
                r = rows + nrows++ * NCOLS;
                r[0] = 7; r[1] = cl.rank[k]; r[2] = ctx.rank; r[3] = 0;
                r[4] = cl.t_first[k] ? hv_ticks_to_ns(&ctx.timer, cl.t_first[k] - t0) : 0.0;
                r[5] = cl.t_first[k] ? hv_ticks_to_ns(&ctx.timer, cl.t_last[k] - t0) : 0.0;
                r[6] = (double)cl.after_first[k];
            }
        } else if (role == ROLE_LARGE) {
            MPI_Request stop_req;
            int stopflag = 0;
            int64_t sent = 0, hdr;
            HV_MPI_CHECK(MPI_Irecv(&stopbuf, HDR, MPI_BYTE, server, TAG_STOP, comm, &stop_req));
            hv_barrier(&ctx);
            for (;;) {
                if (!stopflag) HV_MPI_CHECK(MPI_Test(&stop_req, &stopflag, MPI_STATUS_IGNORE));
                int last = stopflag || (messages > 0 && sent + 1 == messages);
                int n = stopflag ? HDR : (int)large;
                hdr = last ? sent + 1 : 0;
                memcpy(lbuf, &hdr, sizeof hdr);
                MPI_Request sreq;
                HV_MPI_CHECK(MPI_Isend(lbuf, n, MPI_BYTE, server, TAG_LARGE, comm, &sreq));
                hv_wait(&ctx, &sreq);
                sent++;
                if (last) break;
            }
            if (!stopflag) hv_wait(&ctx, &stop_req);
        } else if (role == ROLE_CHATTER) {
            MPI_Request stop_req;
            int stopflag = 0;
            int64_t sent = 0, hdr, nrec = 0, stride = 1;
            HV_MPI_CHECK(MPI_Irecv(&stopbuf, HDR, MPI_BYTE, server, TAG_STOP, comm, &stop_req));
            hv_barrier(&ctx);
            const uint64_t t0 = hv_ticks(&ctx.timer);
            for (;;) {
                if (!stopflag) HV_MPI_CHECK(MPI_Test(&stop_req, &stopflag, MPI_STATUS_IGNORE));
                hdr = stopflag ? sent + 1 : 0;
                memcpy(sbuf, &hdr, sizeof hdr);
                const int n = stopflag ? HDR : (int)small;
                const uint64_t a = hv_ticks(&ctx.timer);
                MPI_Request rt[2];
                HV_MPI_CHECK(MPI_Irecv(&ackin, HDR, MPI_BYTE, server, TAG_ACK, comm, &rt[0]));
                HV_MPI_CHECK(MPI_Isend(sbuf, n, MPI_BYTE, server, TAG_SMALL, comm, &rt[1]));
                hv_waitall(&ctx, 2, rt);
                const uint64_t b = hv_ticks(&ctx.timer);
                if (!stopflag && sent % stride == 0) {
                    if (nrec == max_samples) { /* keep every other sample, double the stride */
                        for (int64_t i = 0; i < max_samples / 2; i++) {
                            rtt[i] = rtt[2 * i];
                            tsend[i] = tsend[2 * i];
                        }
                        nrec = max_samples / 2;
                        stride *= 2;
                    }
                    if (sent % stride == 0) {
                        rtt[nrec] = b - a;
                        tsend[nrec++] = a - t0;
                    }
                }
                sent++;
                if (stopflag) break;
            }
            for (int64_t i = 0; i < nrec; i++) {
                double *r = rows + nrows++ * NCOLS;
                r[0] = 3; r[1] = ctx.rank; r[2] = server; r[3] = (double)(i * stride);
                r[4] = hv_ticks_to_ns(&ctx.timer, rtt[i]); r[5] = hv_ticks_to_ns(&ctx.timer, tsend[i]); r[6] = 0;
            }
            double *r = rows + nrows++ * NCOLS;
            r[0] = 5; r[1] = ctx.rank; r[2] = server; r[3] = 0; r[4] = (double)(sent - 1); r[5] = (double)nrec;
            r[6] = (double)stride;
        } else {
            hv_barrier(&ctx);
        }

        char desc[320];
        snprintf(desc, sizeof desc,
                 "rep=%ld clients=%d chatter=%d queues=%s depth=%s%.0d match=%s servers=%ld large=%ld small=%ld "
                 "bin_ns=%.0f duration_s=%g messages=%ld placement=%s seed=%ld wait_us=%ld",
                 rep, L, C, dual ? "dual" : "single", depth ? "" : "deep", depth, exact_mode ? "exact" : "any", S,
                 large, small, bin_s * 1e9, duration, messages, placement, seed, wait_us);
        hv_gather_point(&ctx, desc, rows, nrows);
    }
    free(perm); free(pos_of); free(local_of); free(rows);
    free(pl); free(pc); free(pq); free(pd); free(pm);
    if (is_server_rank) {
        for (int i = 0; i < 2; i++) {
            free(q[i].req); free(q[i].slot_pos); free(q[i].clients); free(q[i].idx); free(q[i].st);
        }
        free(cl.rank); free(cl.role); free(cl.final_total); free(cl.recv_total); free(cl.recv_win);
        free(cl.bytes_win); free(cl.after_first); free(cl.t_first); free(cl.t_last); free(cl.finished); free(cl.queue); free(cl.stop_req); free(cl.ack_req);
        free(rbuf); free(bin_large); free(bin_small);
    } else {
        free(lbuf); free(sbuf); free(rtt); free(tsend);
    }
    hv_ctx_finish(&ctx);
    return 0;
}
