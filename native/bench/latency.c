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
 * and is below 0.01 % of a 64 KiB one.
 *
 * Code: main reads the options into a latency_config, allocates once for the
 * largest size, then per size calls run_size: the warm-up, the iteration count
 * (hv_iters_for_budget), then rank 0's timed loop (ping_timed) or rank 1's
 * answers (pong), and gathers the rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hv_mpi.h"

enum { SEND_TIME_MIN = 65536 };

typedef struct { /* the validated options */
    int64_t *sizes;
    size_t nsizes;
    long iters, min_iters, warmup;
    double budget_s;
} latency_config;

typedef struct { /* buffers for the largest size, allocated and touched before the first */
    hv_ctx *ctx;
    const latency_config *cfg;
    char *buf;
    double *rows;
    uint64_t *t, *ts;
    int peer, active;
} latency_run;

static void check_config(const hv_ctx *ctx, const latency_config *c) {
    if (ctx->size < 2) HV_DIE("hv_latency needs at least 2 ranks, got %d", ctx->size);
    for (size_t i = 0; i < c->nsizes; i++)
        if (c->sizes[i] > 0x7fffffff) HV_DIE("message size %lld is above the MPI count limit", (long long)c->sizes[i]);
}

static void warm_up(const latency_run *r, int n) {
    hv_ctx *ctx = r->ctx;
    for (long i = 0; r->active && i < r->cfg->warmup; i++) {
        if (ctx->rank == 0) {
            HV_MPI_CHECK(MPI_Send(r->buf, n, MPI_BYTE, r->peer, 1, ctx->comm));
            HV_MPI_CHECK(MPI_Recv(r->buf, n, MPI_BYTE, r->peer, 1, ctx->comm, MPI_STATUS_IGNORE));
        } else {
            HV_MPI_CHECK(MPI_Recv(r->buf, n, MPI_BYTE, r->peer, 1, ctx->comm, MPI_STATUS_IGNORE));
            HV_MPI_CHECK(MPI_Send(r->buf, n, MPI_BYTE, r->peer, 1, ctx->comm));
        }
    }
}

/* Rank 0's timed loop: each round trip into t[], and with send_times the send's own duration into ts[]. */
static void ping_timed(const latency_run *r, int n, long count, int send_times) {
    hv_ctx *ctx = r->ctx;
    uint64_t *t = r->t, *ts = r->ts;
    char *buf = r->buf;
    const int peer = r->peer;
    if (send_times) {
        for (long i = 0; i < count; i++) {
            uint64_t a = hv_ticks(&ctx->timer);
            HV_MPI_CHECK(MPI_Send(buf, n, MPI_BYTE, peer, 2, ctx->comm));
            uint64_t b = hv_ticks(&ctx->timer);
            HV_MPI_CHECK(MPI_Recv(buf, n, MPI_BYTE, peer, 2, ctx->comm, MPI_STATUS_IGNORE));
            t[i] = hv_ticks(&ctx->timer) - a;
            ts[i] = b - a;
        }
    } else { /* the loop as it was: read clock, send, receive, read clock */
        for (long i = 0; i < count; i++) {
            uint64_t a = hv_ticks(&ctx->timer);
            HV_MPI_CHECK(MPI_Send(buf, n, MPI_BYTE, peer, 2, ctx->comm));
            HV_MPI_CHECK(MPI_Recv(buf, n, MPI_BYTE, peer, 2, ctx->comm, MPI_STATUS_IGNORE));
            t[i] = hv_ticks(&ctx->timer) - a;
        }
    }
}

static void pong(const latency_run *r, int n, long count) {
    for (long i = 0; i < count; i++) {
        HV_MPI_CHECK(MPI_Recv(r->buf, n, MPI_BYTE, r->peer, 2, r->ctx->comm, MPI_STATUS_IGNORE));
        HV_MPI_CHECK(MPI_Send(r->buf, n, MPI_BYTE, r->peer, 2, r->ctx->comm));
    }
}

/* One size: warm-up, iteration count, the timed loop, the rows gathered as one point. */
static void run_size(const latency_run *r, int n) {
    hv_ctx *ctx = r->ctx;
    const latency_config *c = r->cfg;
    HV_MPI_CHECK(MPI_Barrier(ctx->comm));
    uint64_t w0 = hv_ticks(&ctx->timer);
    warm_up(r, n);
    /* rank 0 chooses the iteration count from the warm-up's mean round trip */
    const long count = hv_iters_for_budget(ctx, w0, c->warmup, c->budget_s, c->iters, c->min_iters);
    HV_MPI_CHECK(MPI_Barrier(ctx->comm));
    const int send_times = n >= SEND_TIME_MIN;
    if (ctx->rank == 0) ping_timed(r, n, count, send_times);
    else if (r->active) pong(r, n, count);
    size_t nrows = 0;
    if (ctx->rank == 0) {
        for (long i = 0; i < count; i++) {
            r->rows[3 * i] = (double)i;
            r->rows[3 * i + 1] = hv_ticks_to_ns(&ctx->timer, r->t[i]);
            r->rows[3 * i + 2] = send_times ? hv_ticks_to_ns(&ctx->timer, r->ts[i]) : NAN;
        }
        nrows = (size_t)count;
    }
    char desc[96];
    snprintf(desc, sizeof desc, "size=%d iters=%ld", n, count);
    hv_gather_point(ctx, desc, r->rows, nrows);
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        HV_OPT_LIST(latency_config, sizes, nsizes, "sizes", "comma list of message sizes in bytes"),
        HV_OPT_LONG(latency_config, iters, "iters", 1, 100000000L, "maximum measured round trips per size"),
        HV_OPT_LONG(latency_config, min_iters, "min-iters", 1, 100000000L, "minimum measured round trips per size"),
        HV_OPT_LONG(latency_config, warmup, "warmup", 0, 100000000L, "unmeasured round trips per size"),
        HV_OPT_DOUBLE(latency_config, budget_s, "time-per-size", 0.0, 1e6, "time budget per size in seconds"),
    };
    hv_ctx ctx;
    latency_config cfg = {0};
    hv_ctx_init_config(&ctx, &argc, &argv, "hv_latency", opts, sizeof opts / sizeof opts[0], &cfg);
    check_config(&ctx, &cfg);

    int64_t maxsize = 0;
    for (size_t i = 0; i < cfg.nsizes; i++)
        if (cfg.sizes[i] > maxsize) maxsize = cfg.sizes[i];
    latency_run r = {.ctx = &ctx, .cfg = &cfg, .peer = ctx.rank == 0 ? 1 : 0, .active = ctx.rank < 2};
    r.buf = hv_malloc_touched((size_t)maxsize);
    r.rows = hv_malloc_touched((size_t)cfg.iters * 3 * sizeof *r.rows);
    r.t = hv_malloc_touched((size_t)cfg.iters * sizeof *r.t);
    r.ts = hv_malloc_touched((size_t)cfg.iters * sizeof *r.ts);
    const char *cols[] = {"iter", "rtt_ns", "send_ns"};
    if (ctx.rank == 0) hv_out_columns(&ctx.out, 3, cols);

    for (size_t s = 0; s < cfg.nsizes; s++) run_size(&r, (int)cfg.sizes[s]);
    free(r.buf);
    free(r.rows);
    free(r.t);
    free(r.ts);
    free(cfg.sizes);
    hv_ctx_finish(&ctx);
    return 0;
}
