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
 *            mode=unexpected length=U size=S iters=n */
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

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        {"mode", NULL, 0, "posted|unexpected"},
        {"lengths", NULL, 0, "comma list: queue length of each point"},
        {"traversed", NULL, 0, "comma list: percent of the posted queue traversed, per point (posted)"},
        {"sizes", NULL, 0, "comma list: message size in bytes of each point"},
        {"any-source", NULL, 1, "post the receives with MPI_ANY_SOURCE (posted)"},
        {"pin", NULL, 1, "pin rank r to the (r mod n)-th of the n allowed CPUs"},
        {"iters", NULL, 0, "maximum measured iterations per point"},
        {"min-iters", NULL, 0, "minimum measured iterations per point"},
        {"warmup", NULL, 0, "unmeasured iterations per point"},
        {"time-per-point", NULL, 0, "time budget per point in seconds"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    hv_ctx ctx;
    hv_ctx_init(&ctx, &argc, &argv, "hv_queues", opts, nopts);

    char err[256];
    const char *mode_s = hv_args_get(opts, nopts, "mode");
    int mode;
    if (mode_s && strcmp(mode_s, "posted") == 0) mode = MODE_POSTED;
    else if (mode_s && strcmp(mode_s, "unexpected") == 0) mode = MODE_UNEXPECTED;
    else HV_DIE("hv_queues: --mode must be 'posted' or 'unexpected'");
    int64_t *lengths, *sizes, *pcts = NULL;
    size_t nlen, nsizes, npcts = 0;
    long iters, min_iters, warmup;
    double budget;
    if (hv_args_list(opts, nopts, "lengths", &lengths, &nlen, err, sizeof err) ||
        hv_args_list(opts, nopts, "sizes", &sizes, &nsizes, err, sizeof err) ||
        (mode == MODE_POSTED && hv_args_list(opts, nopts, "traversed", &pcts, &npcts, err, sizeof err)) ||
        hv_args_long(opts, nopts, "iters", 1, 100000000L, &iters, err, sizeof err) ||
        hv_args_long(opts, nopts, "min-iters", 1, 100000000L, &min_iters, err, sizeof err) ||
        hv_args_long(opts, nopts, "warmup", 0, 100000000L, &warmup, err, sizeof err) ||
        hv_args_double(opts, nopts, "time-per-point", 0.0, 1e6, &budget, err, sizeof err))
        HV_DIE("hv_queues: %s", err);
    if (ctx.size < 2) HV_DIE("hv_queues needs at least 2 ranks, got %d", ctx.size);
    const size_t npoints = nlen;
    if (nsizes != npoints || (mode == MODE_POSTED && npcts != npoints))
        HV_DIE("hv_queues: --lengths, --sizes%s must have the same number of items",
               mode == MODE_POSTED ? " and --traversed" : "");

    /* the largest point decides every allocation, all made before measuring */
    int64_t maxlen = 0, maxsize = 0, maxbytes = 0;
    for (size_t i = 0; i < npoints; i++) {
        if (lengths[i] > 0x7fffffff)
            HV_DIE("hv_queues: length %lld is above the MPI count limit", (long long)lengths[i]);
        if (sizes[i] > 0x7fffffff)
            HV_DIE("hv_queues: message size %lld is above the MPI count limit", (long long)sizes[i]);
        if (pcts && pcts[i] > 100) HV_DIE("hv_queues: --traversed %lld is above 100 percent", (long long)pcts[i]);
        if (lengths[i] > maxlen) maxlen = lengths[i];
        if (sizes[i] > maxsize) maxsize = sizes[i];
        if (mode == MODE_POSTED && lengths[i] * sizes[i] > maxbytes) maxbytes = lengths[i] * sizes[i];
    }
    hv_queues q = {.ctx = &ctx,
                   .peer = ctx.rank == 0 ? 1 : 0,
                   .mode = mode,
                   .any_source = hv_args_get(opts, nopts, "any-source") != NULL};
    q.sbuf = hv_malloc_touched((size_t)maxsize);
    q.rbuf = hv_malloc_touched((size_t)maxsize);
    q.xbuf = hv_malloc_touched((size_t)maxbytes);
    q.xreq = hv_malloc_touched((size_t)(maxlen ? maxlen : 1) * sizeof *q.xreq);
    q.sreq = hv_malloc_touched((size_t)(maxlen ? maxlen : 1) * sizeof *q.sreq);
    double *rows = hv_malloc_touched((size_t)iters * 2 * sizeof *rows);
    uint64_t *t = hv_malloc_touched((size_t)iters * sizeof *t);
    int cpu = hv_args_get(opts, nopts, "pin") ? hv_pin_rank(ctx.rank) : -1;
    int *cpus = hv_malloc_touched((size_t)ctx.size * sizeof *cpus);
    HV_MPI_CHECK(MPI_Gather(&cpu, 1, MPI_INT, cpus, 1, MPI_INT, 0, ctx.comm));
    const char *cols[] = {"iter", "rtt_ns"};
    if (ctx.rank == 0) {
        hv_out_meta(&ctx.out, "queues_sync", "rank0 send+recv, rank1 recv+send (rank 1 leaves first)");
        hv_out_meta(&ctx.out, "queues_cpu_rank0", "%d", cpus[0]);
        hv_out_meta(&ctx.out, "queues_cpu_rank1", "%d", cpus[1]);
        hv_out_columns(&ctx.out, 2, cols);
    }

    const int active = ctx.rank < 2;
    for (size_t i = 0; i < npoints; i++) {
        const int len = (int)lengths[i], size = (int)sizes[i];
        const int pct = pcts ? (int)pcts[i] : 0;
        /* traversed entries: L * P / 100 rounded half up, in integers */
        const int entries = (int)((lengths[i] * pct + 50) / 100);
        HV_MPI_CHECK(MPI_Barrier(ctx.comm));
        uint64_t w0 = hv_ticks(&ctx.timer);
        for (long w = 0; active && w < warmup; w++) (void)one_iter(&q, len, entries, size);
        long count = iters;
        if (ctx.rank == 0 && warmup > 0 && budget > 0) {
            double per = hv_ticks_to_ns(&ctx.timer, hv_ticks(&ctx.timer) - w0) / (double)warmup;
            double fit = per > 0 ? budget * 1e9 / per : (double)iters;
            if (fit < (double)count) count = (long)fit;
            if (count < min_iters) count = min_iters;
            if (count > iters) count = iters;
        }
        HV_MPI_CHECK(MPI_Bcast(&count, 1, MPI_LONG, 0, ctx.comm));
        HV_MPI_CHECK(MPI_Barrier(ctx.comm));
        for (long k = 0; active && k < count; k++) t[k] = one_iter(&q, len, entries, size);
        size_t nrows = 0;
        if (ctx.rank == 0) {
            for (long k = 0; k < count; k++) {
                rows[2 * k] = (double)k;
                rows[2 * k + 1] = hv_ticks_to_ns(&ctx.timer, t[k]);
            }
            nrows = (size_t)count;
        }
        char desc[160];
        if (mode == MODE_POSTED)
            snprintf(desc, sizeof desc, "mode=posted length=%d traversed=%d entries=%d size=%d any_source=%d iters=%ld",
                     len, pct, entries, size, q.any_source, count);
        else snprintf(desc, sizeof desc, "mode=unexpected length=%d size=%d iters=%ld", len, size, count);
        hv_gather_point(&ctx, desc, rows, nrows);
    }
    free(q.sbuf);
    free(q.rbuf);
    free(q.xbuf);
    free(q.xreq);
    free(q.sreq);
    free(rows);
    free(t);
    free(cpus);
    free(lengths);
    free(sizes);
    free(pcts);
    hv_ctx_finish(&ctx);
    return 0;
}
