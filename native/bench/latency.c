/* hv_latency: ping-pong between ranks 0 and 1 over a list of message sizes.
 *
 * Per size: --warmup unmeasured round trips, then up to --iters measured ones,
 * fewer when the warm-up shows that --iters would exceed --time-per-size
 * seconds (never fewer than --min-iters). Rank 0 keeps every round trip's
 * duration in a preallocated buffer; the timed loop is read clock, send,
 * read clock, receive, read clock, store. Other ranks (if any) only take part
 * in the barriers. One point per size is written after its loop:
 *   columns: iter, rtt_ns, send_ns      point: size=<bytes> iters=<n>
 * send_ns is how long rank 0's MPI_Send took inside the round trip: with the
 * one-way time rtt/2 it tells how much of a message the transport buffers
 * when MPI_Send returns (hpcvar.bench.latency, "buffered_bytes"). It is read
 * for sizes of SEND_TIME_MIN bytes and up only (NaN below): the extra clock
 * read (about 10 ns) would add up to 1 % to a small message's round trip,
 * and is below 0.01 % of a 64 KiB one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hv_mpi.h"

enum { SEND_TIME_MIN = 65536 };

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        {"sizes", NULL, 0, "comma list of message sizes in bytes"},
        {"iters", NULL, 0, "maximum measured round trips per size"},
        {"min-iters", NULL, 0, "minimum measured round trips per size"},
        {"warmup", NULL, 0, "unmeasured round trips per size"},
        {"time-per-size", NULL, 0, "time budget per size in seconds"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    hv_ctx ctx;
    hv_ctx_init(&ctx, &argc, &argv, "hv_latency", opts, nopts);

    char err[256];
    int64_t *sizes;
    size_t nsizes;
    long iters, min_iters, warmup;
    double budget;
    if (hv_args_list(opts, nopts, "sizes", &sizes, &nsizes, err, sizeof err) ||
        hv_args_long(opts, nopts, "iters", 1, 100000000L, &iters, err, sizeof err) ||
        hv_args_long(opts, nopts, "min-iters", 1, 100000000L, &min_iters, err, sizeof err) ||
        hv_args_long(opts, nopts, "warmup", 0, 100000000L, &warmup, err, sizeof err) ||
        hv_args_double(opts, nopts, "time-per-size", 0.0, 1e6, &budget, err, sizeof err))
        HV_DIE("hv_latency: %s", err);
    if (ctx.size < 2) HV_DIE("hv_latency needs at least 2 ranks, got %d", ctx.size);

    int64_t maxsize = 0;
    for (size_t i = 0; i < nsizes; i++)
        if (sizes[i] > maxsize) maxsize = sizes[i];
    if (maxsize > 0x7fffffff) HV_DIE("message size %lld is above the MPI count limit", (long long)maxsize);
    char *buf = hv_malloc_touched((size_t)maxsize);
    double *rows = hv_malloc_touched((size_t)iters * 3 * sizeof *rows);
    uint64_t *t = hv_malloc_touched((size_t)iters * sizeof *t), *ts = hv_malloc_touched((size_t)iters * sizeof *ts);
    const char *cols[] = {"iter", "rtt_ns", "send_ns"};
    if (ctx.rank == 0) hv_out_columns(&ctx.out, 3, cols);

    const int peer = ctx.rank == 0 ? 1 : 0;
    const int active = ctx.rank < 2;
    for (size_t s = 0; s < nsizes; s++) {
        const int n = (int)sizes[s];
        HV_MPI_CHECK(MPI_Barrier(ctx.comm));
        uint64_t w0 = hv_ticks(&ctx.timer);
        for (long i = 0; active && i < warmup; i++) {
            if (ctx.rank == 0) {
                HV_MPI_CHECK(MPI_Send(buf, n, MPI_BYTE, peer, 1, ctx.comm));
                HV_MPI_CHECK(MPI_Recv(buf, n, MPI_BYTE, peer, 1, ctx.comm, MPI_STATUS_IGNORE));
            } else {
                HV_MPI_CHECK(MPI_Recv(buf, n, MPI_BYTE, peer, 1, ctx.comm, MPI_STATUS_IGNORE));
                HV_MPI_CHECK(MPI_Send(buf, n, MPI_BYTE, peer, 1, ctx.comm));
            }
        }
        /* rank 0 chooses the iteration count from the warm-up's mean round trip */
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
        const int send_times = n >= SEND_TIME_MIN;
        if (ctx.rank == 0 && send_times) {
            for (long i = 0; i < count; i++) {
                uint64_t a = hv_ticks(&ctx.timer);
                HV_MPI_CHECK(MPI_Send(buf, n, MPI_BYTE, peer, 2, ctx.comm));
                uint64_t b = hv_ticks(&ctx.timer);
                HV_MPI_CHECK(MPI_Recv(buf, n, MPI_BYTE, peer, 2, ctx.comm, MPI_STATUS_IGNORE));
                t[i] = hv_ticks(&ctx.timer) - a;
                ts[i] = b - a;
            }
        } else if (ctx.rank == 0) { /* the loop as it was: read clock, send, receive, read clock */
            for (long i = 0; i < count; i++) {
                uint64_t a = hv_ticks(&ctx.timer);
                HV_MPI_CHECK(MPI_Send(buf, n, MPI_BYTE, peer, 2, ctx.comm));
                HV_MPI_CHECK(MPI_Recv(buf, n, MPI_BYTE, peer, 2, ctx.comm, MPI_STATUS_IGNORE));
                t[i] = hv_ticks(&ctx.timer) - a;
            }
        } else if (active) {
            for (long i = 0; i < count; i++) {
                HV_MPI_CHECK(MPI_Recv(buf, n, MPI_BYTE, peer, 2, ctx.comm, MPI_STATUS_IGNORE));
                HV_MPI_CHECK(MPI_Send(buf, n, MPI_BYTE, peer, 2, ctx.comm));
            }
        }
        size_t nrows = 0;
        if (ctx.rank == 0) {
            for (long i = 0; i < count; i++) {
                rows[3 * i] = (double)i;
                rows[3 * i + 1] = hv_ticks_to_ns(&ctx.timer, t[i]);
                rows[3 * i + 2] = send_times ? hv_ticks_to_ns(&ctx.timer, ts[i]) : NAN;
            }
            nrows = (size_t)count;
        }
        char desc[96];
        snprintf(desc, sizeof desc, "size=%d iters=%ld", n, count);
        hv_gather_point(&ctx, desc, rows, nrows);
    }
    free(buf);
    free(rows);
    free(t);
    free(ts);
    free(sizes);
    hv_ctx_finish(&ctx);
    return 0;
}
