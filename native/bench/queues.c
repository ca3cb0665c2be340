/* hv_queues: latency in the presence of long MPI queues (Underwood & Brightwell,
 * "The Impact of MPI Queue Usage on Message Latency", Figures 1 and 2).
 *
 * --mode posted      (Figure 1) per point (length L, traversed percent P, size S):
 *     both ranks post k = round(L * P / 100) receives that will be traversed
 *     (tag TAG_EXTRA: never matches the ping), then the latency receive
 *     (tag TAG_PING), then the L - k remaining receives; sync_rank1_first();
 *     rank 0 times Send(ping) + Wait(latency receive); rank 1 waits for the
 *     ping and answers. Then each rank clears the peer's L extra receives by
 *     sending it L zero-byte TAG_EXTRA messages (Isend + Waitall).
 *     Every extra receive has its own S-byte buffer (an application posts
 *     receives into distinct buffers); the posting and the clearing are not
 *     timed. --any-source posts every receive with MPI_ANY_SOURCE.
 * --mode unexpected  (Figure 2) per point (length U, size S):
 *     both ranks Isend U zero-byte TAG_UNEXP messages to the peer (nobody has
 *     posted a matching receive: they wait in the peer's unexpected queue);
 *     sync_rank1_first(); rank 0 times Isend(ping) + Irecv(pong) (the post
 *     traverses the unexpected queue) + Waitall; rank 1 receives (its post
 *     traverses its own unexpected queue) and answers. Then each rank receives
 *     its U unexpected messages (untimed) and completes its U sends.
 *
 * sync_rank1_first() is the barrier "designed so that node 1 exits first"
 * (not MPI_Barrier): rank 0 sends a zero-byte TAG_SYNC message to rank 1 and
 * waits for rank 1's answer; rank 1 receives it and answers. Rank 1 returns as
 * soon as its answer is sent, rank 0 only when the answer has arrived, so
 * rank 1 always leaves first; neither leaves before the other has finished
 * its set-up (both posted their queues / sent their unexpected messages
 * before the sync messages, and MPI does not let messages from one sender
 * overtake each other on a channel, so the unexpected messages have arrived
 * when the sync message is received).
 *
 * Per point: --warmup unmeasured iterations, then up to --iters measured ones
 * (fewer when the warm-up shows that --iters would exceed --time-per-point
 * seconds, never fewer than --min-iters). Every measured iteration is one
 * sample: only the ping-pong is inside the timer, its duration goes into a
 * preallocated array. Every buffer and request array is allocated (and
 * touched) for the largest point before the first point is measured.
 * Points are given as parallel lists: point i = (--lengths[i], --traversed[i],
 * --sizes[i]).
 *   columns: iter, rtt_ns
 *   point:   mode=posted length=L traversed=P entries=k size=S any_source=0|1 iters=n
 *            mode=unexpected length=U size=S iters=n
 *
 * Code: main reads the options into a queues_config, allocates every buffer for
 * the largest point (queues_alloc), then per point calls run_point: warm-up,
 * iteration count, the timed iterations (posted_iter or unexpected_iter), and
 * the gather. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hv_mpi.h"

enum { TAG_PING = 1, TAG_EXTRA = 2, TAG_SYNC = 3, TAG_UNEXP = 4 };
enum { MODE_POSTED = 0, MODE_UNEXPECTED = 1 };

typedef struct { /* the validated options */
    const char *mode_s;
    int64_t *lengths, *sizes, *pcts; /* per point; pcts: posted only */
    size_t nlen, nsizes, npcts;
    long iters, min_iters, warmup;
    double budget_s;
    int any_source, pin;
} queues_config;

typedef struct {
    hv_ctx *ctx;
    int peer;
    int mode;
    int any_source;
    char *sbuf, *rbuf;    /* ping/pong payload, max size */
    char *xbuf;           /* extra receive buffers: L * S bytes for the largest point */
    MPI_Request *xreq;    /* extra receives (posted) */
    MPI_Request *sreq;    /* clearing sends (posted) or unexpected sends (unexpected) */
} hv_queues;

/* The barrier in which rank 1 leaves first (see the file comment). */
static void sync_rank1_first(const hv_queues *q) {
    MPI_Comm comm = q->ctx->comm;
    if (q->ctx->rank == 0) {
        HV_MPI_CHECK(MPI_Send(q->sbuf, 0, MPI_BYTE, 1, TAG_SYNC, comm));
        HV_MPI_CHECK(MPI_Recv(q->rbuf, 0, MPI_BYTE, 1, TAG_SYNC, comm, MPI_STATUS_IGNORE));
    } else {
        HV_MPI_CHECK(MPI_Recv(q->rbuf, 0, MPI_BYTE, 0, TAG_SYNC, comm, MPI_STATUS_IGNORE));
        HV_MPI_CHECK(MPI_Send(q->sbuf, 0, MPI_BYTE, 0, TAG_SYNC, comm));
    }
}

/* One iteration of Figure 1; returns the round trip in ticks on rank 0 (0 on rank 1). */
static uint64_t posted_iter(const hv_queues *q, int len, int entries, int size) {
    MPI_Comm comm = q->ctx->comm;
    const int src = q->any_source ? MPI_ANY_SOURCE : q->peer;
    MPI_Request lat;
    for (int k = 0; k < entries; k++)
        HV_MPI_CHECK(MPI_Irecv(q->xbuf + (size_t)k * (size_t)size, size, MPI_BYTE, src, TAG_EXTRA, comm, &q->xreq[k]));
    HV_MPI_CHECK(MPI_Irecv(q->rbuf, size, MPI_BYTE, src, TAG_PING, comm, &lat));
    for (int k = entries; k < len; k++)
        HV_MPI_CHECK(MPI_Irecv(q->xbuf + (size_t)k * (size_t)size, size, MPI_BYTE, src, TAG_EXTRA, comm, &q->xreq[k]));
    sync_rank1_first(q);
    uint64_t dt = 0;
    if (q->ctx->rank == 0) {
        uint64_t a = hv_ticks(&q->ctx->timer);
        HV_MPI_CHECK(MPI_Send(q->sbuf, size, MPI_BYTE, q->peer, TAG_PING, comm));
        HV_MPI_CHECK(MPI_Wait(&lat, MPI_STATUS_IGNORE));
        dt = hv_ticks(&q->ctx->timer) - a;
    } else {
        HV_MPI_CHECK(MPI_Wait(&lat, MPI_STATUS_IGNORE));
        HV_MPI_CHECK(MPI_Send(q->sbuf, size, MPI_BYTE, q->peer, TAG_PING, comm));
    }
    /* clear_receives(): match every extra receive the peer posted */
    for (int k = 0; k < len; k++) HV_MPI_CHECK(MPI_Isend(q->sbuf, 0, MPI_BYTE, q->peer, TAG_EXTRA, comm, &q->sreq[k]));
    if (len > 0) {
        HV_MPI_CHECK(MPI_Waitall(len, q->sreq, MPI_STATUSES_IGNORE));
        HV_MPI_CHECK(MPI_Waitall(len, q->xreq, MPI_STATUSES_IGNORE));
    }
    return dt;
}

/* One iteration of Figure 2; returns the round trip in ticks on rank 0 (0 on rank 1). */
static uint64_t unexpected_iter(const hv_queues *q, int len, int size) {
    MPI_Comm comm = q->ctx->comm;
    for (int k = 0; k < len; k++) HV_MPI_CHECK(MPI_Isend(q->sbuf, 0, MPI_BYTE, q->peer, TAG_UNEXP, comm, &q->sreq[k]));
    sync_rank1_first(q);
    uint64_t dt = 0;
    if (q->ctx->rank == 0) {
        MPI_Request r[2];
        uint64_t a = hv_ticks(&q->ctx->timer);
        HV_MPI_CHECK(MPI_Isend(q->sbuf, size, MPI_BYTE, q->peer, TAG_PING, comm, &r[0]));
        HV_MPI_CHECK(MPI_Irecv(q->rbuf, size, MPI_BYTE, q->peer, TAG_PING, comm, &r[1]));
        HV_MPI_CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        dt = hv_ticks(&q->ctx->timer) - a;
    } else {
        HV_MPI_CHECK(MPI_Recv(q->rbuf, size, MPI_BYTE, q->peer, TAG_PING, comm, MPI_STATUS_IGNORE));
        HV_MPI_CHECK(MPI_Send(q->sbuf, size, MPI_BYTE, q->peer, TAG_PING, comm));
    }
    /* clear_unexpected_messages(): each receive matches the head of the queue */
    for (int k = 0; k < len; k++)
        HV_MPI_CHECK(MPI_Recv(q->rbuf, 0, MPI_BYTE, q->peer, TAG_UNEXP, comm, MPI_STATUS_IGNORE));
    if (len > 0) HV_MPI_CHECK(MPI_Waitall(len, q->sreq, MPI_STATUSES_IGNORE));
    return dt;
}

static uint64_t one_iter(const hv_queues *q, int len, int entries, int size) {
    return q->mode == MODE_POSTED ? posted_iter(q, len, entries, size) : unexpected_iter(q, len, size);
}

/* The mode, and the point lists checked against each other and the MPI count limit. */
static int check_config(const hv_ctx *ctx, const queues_config *c) {
    int mode;
    if (c->mode_s && strcmp(c->mode_s, "posted") == 0) mode = MODE_POSTED;
    else if (c->mode_s && strcmp(c->mode_s, "unexpected") == 0) mode = MODE_UNEXPECTED;
    else HV_DIE("hv_queues: --mode must be 'posted' or 'unexpected'");
    if (mode == MODE_POSTED && !c->pcts) HV_DIE("hv_queues: option '--traversed' is required");
    if (ctx->size < 2) HV_DIE("hv_queues needs at least 2 ranks, got %d", ctx->size);
    if (c->nsizes != c->nlen || (mode == MODE_POSTED && c->npcts != c->nlen))
        HV_DIE("hv_queues: --lengths, --sizes%s must have the same number of items",
               mode == MODE_POSTED ? " and --traversed" : "");
    for (size_t i = 0; i < c->nlen; i++) {
        if (c->lengths[i] > 0x7fffffff)
            HV_DIE("hv_queues: length %lld is above the MPI count limit", (long long)c->lengths[i]);
        if (c->sizes[i] > 0x7fffffff)
            HV_DIE("hv_queues: message size %lld is above the MPI count limit", (long long)c->sizes[i]);
        if (c->pcts && c->pcts[i] > 100)
            HV_DIE("hv_queues: --traversed %lld is above 100 percent", (long long)c->pcts[i]);
    }
    return mode;
}

/* Every buffer and request array for the largest point, allocated and touched before measuring. */
static void queues_alloc(hv_queues *q, const queues_config *c) {
    int64_t maxlen = 0, maxsize = 0, maxbytes = 0;
    for (size_t i = 0; i < c->nlen; i++) {
        if (c->lengths[i] > maxlen) maxlen = c->lengths[i];
        if (c->sizes[i] > maxsize) maxsize = c->sizes[i];
        if (q->mode == MODE_POSTED && c->lengths[i] * c->sizes[i] > maxbytes) maxbytes = c->lengths[i] * c->sizes[i];
    }
    q->sbuf = hv_malloc_touched((size_t)maxsize);
    q->rbuf = hv_malloc_touched((size_t)maxsize);
    q->xbuf = hv_malloc_touched((size_t)maxbytes);
    q->xreq = hv_malloc_touched((size_t)(maxlen ? maxlen : 1) * sizeof *q->xreq);
    q->sreq = hv_malloc_touched((size_t)(maxlen ? maxlen : 1) * sizeof *q->sreq);
}

static void queues_free(hv_queues *q) {
    free(q->sbuf);
    free(q->rbuf);
    free(q->xbuf);
    free(q->xreq);
    free(q->sreq);
}

/* Pins the ranks when asked, and writes the header on rank 0 (the CPU of ranks 0 and 1 included). */
static void write_header(hv_ctx *ctx, const queues_config *c) {
    int cpu = c->pin ? hv_pin_rank(ctx->rank) : -1;
    int *cpus = hv_malloc_touched((size_t)ctx->size * sizeof *cpus);
    HV_MPI_CHECK(MPI_Gather(&cpu, 1, MPI_INT, cpus, 1, MPI_INT, 0, ctx->comm));
    const char *cols[] = {"iter", "rtt_ns"};
    if (ctx->rank == 0) {
        hv_out_meta(&ctx->out, "queues_sync", "rank0 send+recv, rank1 recv+send (rank 1 leaves first)");
        hv_out_meta(&ctx->out, "queues_cpu_rank0", "%d", cpus[0]);
        hv_out_meta(&ctx->out, "queues_cpu_rank1", "%d", cpus[1]);
        hv_out_columns(&ctx->out, 2, cols);
    }
    free(cpus);
}

/* Point i: warm-up, iteration count, the measured iterations (each one sample), the rows gathered. */
static void run_point(const hv_queues *q, const queues_config *c, size_t i, double *rows, uint64_t *t) {
    hv_ctx *ctx = q->ctx;
    const int active = ctx->rank < 2;
    const int len = (int)c->lengths[i], size = (int)c->sizes[i];
    const int pct = c->pcts ? (int)c->pcts[i] : 0;
    /* traversed entries: L * P / 100 rounded half up, in integers */
    const int entries = (int)((c->lengths[i] * pct + 50) / 100);
    HV_MPI_CHECK(MPI_Barrier(ctx->comm));
    uint64_t w0 = hv_ticks(&ctx->timer);
    for (long w = 0; active && w < c->warmup; w++) (void)one_iter(q, len, entries, size);
    const long count = hv_iters_for_budget(ctx, w0, c->warmup, c->budget_s, c->iters, c->min_iters);
    HV_MPI_CHECK(MPI_Barrier(ctx->comm));
    for (long k = 0; active && k < count; k++) t[k] = one_iter(q, len, entries, size);
    size_t nrows = 0;
    if (ctx->rank == 0) {
        for (long k = 0; k < count; k++) {
            rows[2 * k] = (double)k;
            rows[2 * k + 1] = hv_ticks_to_ns(&ctx->timer, t[k]);
        }
        nrows = (size_t)count;
    }
    char desc[160];
    if (q->mode == MODE_POSTED)
        snprintf(desc, sizeof desc, "mode=posted length=%d traversed=%d entries=%d size=%d any_source=%d iters=%ld",
                 len, pct, entries, size, q->any_source, count);
    else snprintf(desc, sizeof desc, "mode=unexpected length=%d size=%d iters=%ld", len, size, count);
    hv_gather_point(ctx, desc, rows, nrows);
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        HV_OPT_STRING(queues_config, mode_s, "mode", "posted|unexpected"),
        HV_OPT_LIST(queues_config, lengths, nlen, "lengths", "comma list: queue length of each point"),
        HV_OPT_LIST_OR(queues_config, pcts, npcts, "traversed",
                       "comma list: percent of the posted queue traversed, per point (posted)"),
        HV_OPT_LIST(queues_config, sizes, nsizes, "sizes", "comma list: message size in bytes of each point"),
        HV_OPT_FLAG(queues_config, any_source, "any-source", "post the receives with MPI_ANY_SOURCE (posted)"),
        HV_OPT_FLAG(queues_config, pin, "pin", "pin rank r to the (r mod n)-th of the n allowed CPUs"),
        HV_OPT_LONG(queues_config, iters, "iters", 1, 100000000L, "maximum measured iterations per point"),
        HV_OPT_LONG(queues_config, min_iters, "min-iters", 1, 100000000L, "minimum measured iterations per point"),
        HV_OPT_LONG(queues_config, warmup, "warmup", 0, 100000000L, "unmeasured iterations per point"),
        HV_OPT_DOUBLE(queues_config, budget_s, "time-per-point", 0.0, 1e6, "time budget per point in seconds"),
    };
    hv_ctx ctx;
    queues_config cfg = {0};
    hv_ctx_init_config(&ctx, &argc, &argv, "hv_queues", opts, sizeof opts / sizeof opts[0], &cfg);
    const int mode = check_config(&ctx, &cfg);
    hv_queues q = {.ctx = &ctx, .peer = ctx.rank == 0 ? 1 : 0, .mode = mode, .any_source = cfg.any_source};
    queues_alloc(&q, &cfg);
    double *rows = hv_malloc_touched((size_t)cfg.iters * 2 * sizeof *rows);
    uint64_t *t = hv_malloc_touched((size_t)cfg.iters * sizeof *t);
    write_header(&ctx, &cfg);

    for (size_t i = 0; i < cfg.nlen; i++) run_point(&q, &cfg, i, rows, t);
    queues_free(&q);
    free(rows);
    free(t);
    free(cfg.lengths);
    free(cfg.sizes);
    free(cfg.pcts);
    hv_ctx_finish(&ctx);
    return 0;
}
