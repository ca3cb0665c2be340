/* hv_sharing: bandwidth sharing of concurrent communications (Vienne et al., Cluster 2008, IV-B).
 *
 * --comms "s0,d0,s1,d1,...": communication k goes from scheme node s_k to node d_k (node indices).
 * Placement: every rank finds its host (hostname plus its first non-loopback IPv4 address, so that
 * network-namespace hosts that share a hostname differ); hosts are ordered by their lowest rank.
 * With one host, every scheme node is that host. With several, scheme node j runs on host j.
 * Each communication gets its own sender rank on its source node and its own receiver rank on
 * its destination node, taken in rank order among the ranks of that host; other ranks idle.
 *
 * Per repetition (after --warmup unmeasured rounds of the same two phases):
 *   1. reference: communication 0's sender sends --size bytes alone (T_ref);
 *   2. concurrent: every sender starts a blocking MPI_Send of its size at once after a barrier.
 * Times are taken at the source around MPI_Send; receivers use MPI_ANY_SOURCE.
 *   columns: rep, comm, t_ns   (comm = -1 for the reference transfer)
 *   point:   size=<bytes> reps=<n> ncomms=<n>
 * Header metadata: placement.comm<k>=send:<rank>@host<h>,recv:<rank>@host<h> and host.<h>=<identity>.
 *
 * Code: main reads the options into a sharing_config, finds the hosts (find_hosts), gives every
 * communication end its rank (assign_roles), then run_reps times the repetitions and the rows are
 * gathered as one point. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hv_mpi.h"

#define ID_LEN 160
#define TAG_REF 11
#define TAG_DATA 12

typedef struct { /* the validated options */
    int64_t *nodes, *sizes; /* nodes: source, destination per communication; sizes: one per communication */
    size_t nn, ns;
    long reps, warmup;
    int ncomms, nnodes;
    int64_t maxsize;
} sharing_config;

typedef struct { /* where every rank is and what it does */
    char *ids;       /* host identity of every rank */
    int *host;       /* host index of every rank, hosts ordered by their lowest rank */
    int nhosts;
    int *snd, *rcv;  /* the sender and receiver rank of every communication */
    int my_send, my_recv;
} sharing_place;

static void host_identity(char *out) {
    char host[64] = "?";
    char addr[INET_ADDRSTRLEN] = "-";
    gethostname(host, sizeof host - 1);
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
            const struct sockaddr_in *sa = (const struct sockaddr_in *)(const void *)i->ifa_addr;
            if ((ntohl(sa->sin_addr.s_addr) >> 24) == 127) continue;
            inet_ntop(AF_INET, &sa->sin_addr, addr, sizeof addr);
            break;
        }
        freeifaddrs(ifs);
    }
    memset(out, 0, ID_LEN);
    snprintf(out, ID_LEN, "%s/%s", host, addr);
}

static void check_config(sharing_config *c) {
    if (c->nn == 0 || c->nn % 2) HV_DIE("hv_sharing: --comms needs source,destination pairs, got %zu values", c->nn);
    c->ncomms = (int)(c->nn / 2);
    if ((int)c->ns != c->ncomms) HV_DIE("hv_sharing: --sizes has %zu values for %d communications", c->ns, c->ncomms);
    for (size_t i = 0; i < c->nn; i++)
        if (c->nodes[i] + 1 > c->nnodes) c->nnodes = (int)c->nodes[i] + 1;
    for (int k = 0; k < c->ncomms; k++) {
        if (c->nodes[2 * k] == c->nodes[2 * k + 1])
            HV_DIE("communication %d goes from node %lld to itself", k, (long long)c->nodes[2 * k]);
        if (c->sizes[k] < 1 || c->sizes[k] > 0x7fffffff)
            HV_DIE("size %lld of communication %d is outside [1, 2^31)", (long long)c->sizes[k], k);
        if (c->sizes[k] > c->maxsize) c->maxsize = c->sizes[k];
    }
}

/* The host of every rank (hosts numbered by their lowest rank). */
static void find_hosts(const hv_ctx *ctx, const sharing_config *c, sharing_place *pl) {
    pl->ids = hv_malloc_touched((size_t)ctx->size * ID_LEN);
    char mine[ID_LEN];
    host_identity(mine);
    HV_MPI_CHECK(MPI_Allgather(mine, ID_LEN, MPI_CHAR, pl->ids, ID_LEN, MPI_CHAR, ctx->comm));
    pl->host = hv_malloc_touched((size_t)ctx->size * sizeof *pl->host);
    pl->nhosts = 0;
    for (int r = 0; r < ctx->size; r++) {
        pl->host[r] = -1;
        for (int q = 0; q < r; q++)
            if (strncmp(pl->ids + (size_t)q * ID_LEN, pl->ids + (size_t)r * ID_LEN, ID_LEN) == 0) {
                pl->host[r] = pl->host[q];
                break;
            }
        if (pl->host[r] < 0) pl->host[r] = pl->nhosts++;
    }
    if (pl->nhosts > 1 && pl->nhosts < c->nnodes)
        HV_DIE("the scheme has %d nodes but the job spans %d hosts: start it on at least %d hosts (one per node)",
               c->nnodes, pl->nhosts, c->nnodes);
}

/* Each communication end gets the next free rank of its node's host. */
static void assign_roles(const hv_ctx *ctx, const sharing_config *c, sharing_place *pl) {
    int *taken = hv_malloc_touched((size_t)ctx->size * sizeof *taken);
    pl->snd = hv_malloc_touched((size_t)c->ncomms * sizeof *pl->snd);
    pl->rcv = hv_malloc_touched((size_t)c->ncomms * sizeof *pl->rcv);
    for (int r = 0; r < ctx->size; r++) taken[r] = 0;
    for (int k = 0; k < 2 * c->ncomms; k++) {
        const int node = (int)c->nodes[k];
        const int want = pl->nhosts == 1 ? 0 : node;
        int got = -1;
        for (int r = 0; r < ctx->size && got < 0; r++)
            if (!taken[r] && pl->host[r] == want) got = r;
        if (got < 0)
            HV_DIE("not enough ranks on the host of scheme node %d (%s) for its communication ends: "
                   "start more ranks per host (--ranks-per-node)",
                   node, pl->nhosts == 1 ? "the only host" : "its host");
        taken[got] = 1;
        if (k % 2) pl->rcv[k / 2] = got;
        else pl->snd[k / 2] = got;
    }
    free(taken);
    pl->my_send = pl->my_recv = -1;
    for (int k = 0; k < c->ncomms; k++) {
        if (pl->snd[k] == ctx->rank) pl->my_send = k;
        if (pl->rcv[k] == ctx->rank) pl->my_recv = k;
    }
}

static void write_header(hv_ctx *ctx, const sharing_config *c, const sharing_place *pl) {
    if (ctx->rank != 0) return;
    for (int h = 0; h < pl->nhosts; h++)
        for (int r = 0; r < ctx->size; r++)
            if (pl->host[r] == h) {
                char key[32];
                snprintf(key, sizeof key, "host.%d", h);
                hv_out_meta(&ctx->out, key, "%s", pl->ids + (size_t)r * ID_LEN);
                break;
            }
    for (int k = 0; k < c->ncomms; k++) {
        char key[32];
        snprintf(key, sizeof key, "placement.comm%d", k);
        hv_out_meta(&ctx->out, key, "send:%d@host%d,recv:%d@host%d", pl->snd[k], pl->host[pl->snd[k]], pl->rcv[k],
                    pl->host[pl->rcv[k]]);
    }
    hv_out_meta(&ctx->out, "nhosts", "%d", pl->nhosts);
}

/* The repetitions (the warm-up ones first): the reference alone, then every communication at once. */
static void run_reps(hv_ctx *ctx, const sharing_config *c, const sharing_place *pl, char *buf, uint64_t *t_ref,
                     uint64_t *t_com) {
    const int64_t *sizes = c->sizes;
    const int *snd = pl->snd, *rcv = pl->rcv;
    const int my_send = pl->my_send, my_recv = pl->my_recv;
    for (long it = -c->warmup; it < c->reps; it++) {
        /* phase 1: the reference transfer alone */
        HV_MPI_CHECK(MPI_Barrier(ctx->comm));
        if (ctx->rank == snd[0]) {
            uint64_t a = hv_ticks(&ctx->timer);
            HV_MPI_CHECK(MPI_Send(buf, (int)sizes[0], MPI_BYTE, rcv[0], TAG_REF, ctx->comm));
            uint64_t b = hv_ticks(&ctx->timer);
            if (it >= 0) t_ref[it] = b - a;
        } else if (ctx->rank == rcv[0]) {
            HV_MPI_CHECK(MPI_Recv(buf, (int)sizes[0], MPI_BYTE, MPI_ANY_SOURCE, TAG_REF, ctx->comm, MPI_STATUS_IGNORE));
        }
        /* phase 2: every communication at once */
        HV_MPI_CHECK(MPI_Barrier(ctx->comm));
        if (my_send >= 0) {
            uint64_t a = hv_ticks(&ctx->timer);
            HV_MPI_CHECK(MPI_Send(buf, (int)sizes[my_send], MPI_BYTE, rcv[my_send], TAG_DATA, ctx->comm));
            uint64_t b = hv_ticks(&ctx->timer);
            if (it >= 0) t_com[it] = b - a;
        } else if (my_recv >= 0) {
            HV_MPI_CHECK(
                MPI_Recv(buf, (int)sizes[my_recv], MPI_BYTE, MPI_ANY_SOURCE, TAG_DATA, ctx->comm, MPI_STATUS_IGNORE));
        }
    }
}

/* This rank's rows (the reference and/or its communication) gathered as the one point. */
static void gather_rows(hv_ctx *ctx, const sharing_config *c, const sharing_place *pl, const uint64_t *t_ref,
                        const uint64_t *t_com) {
    size_t nrows = 0;
    double *rows = hv_malloc_touched((size_t)c->reps * 2 * 3 * sizeof *rows);
    if (ctx->rank == pl->snd[0])
        for (long i = 0; i < c->reps; i++, nrows++) {
            rows[3 * nrows] = (double)i;
            rows[3 * nrows + 1] = -1.0;
            rows[3 * nrows + 2] = hv_ticks_to_ns(&ctx->timer, t_ref[i]);
        }
    if (pl->my_send >= 0)
        for (long i = 0; i < c->reps; i++, nrows++) {
            rows[3 * nrows] = (double)i;
            rows[3 * nrows + 1] = (double)pl->my_send;
            rows[3 * nrows + 2] = hv_ticks_to_ns(&ctx->timer, t_com[i]);
        }
    char desc[96];
    snprintf(desc, sizeof desc, "size=%lld reps=%ld ncomms=%d", (long long)c->sizes[0], c->reps, c->ncomms);
    hv_gather_point(ctx, desc, rows, nrows);
    free(rows);
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        HV_OPT_LIST(sharing_config, nodes, nn, "comms",
                    "comma list of source,destination node indices, one pair per communication"),
        HV_OPT_LIST(sharing_config, sizes, ns, "sizes", "comma list of message sizes in bytes, one per communication"),
        HV_OPT_LONG(sharing_config, reps, "reps", 1, 1000000L, "measured repetitions"),
        HV_OPT_LONG(sharing_config, warmup, "warmup", 0, 1000000L, "unmeasured repetitions first"),
    };
    hv_ctx ctx;
    sharing_config cfg = {0};
    hv_ctx_init_config(&ctx, &argc, &argv, "hv_sharing", opts, sizeof opts / sizeof opts[0], &cfg);
    check_config(&cfg);
    sharing_place pl = {0};
    find_hosts(&ctx, &cfg, &pl);
    assign_roles(&ctx, &cfg, &pl);
    write_header(&ctx, &cfg, &pl);

    char *buf = hv_malloc_touched((size_t)cfg.maxsize);
    uint64_t *t_ref = hv_malloc_touched((size_t)cfg.reps * sizeof *t_ref);
    uint64_t *t_com = hv_malloc_touched((size_t)cfg.reps * sizeof *t_com);
    const char *cols[] = {"rep", "comm", "t_ns"};
    if (ctx.rank == 0) hv_out_columns(&ctx.out, 3, cols);
    run_reps(&ctx, &cfg, &pl, buf, t_ref, t_com);
    gather_rows(&ctx, &cfg, &pl, t_ref, t_com);
    free(buf);
    free(t_ref);
    free(t_com);
    free(pl.ids);
    free(pl.host);
    free(pl.snd);
    free(pl.rcv);
    free(cfg.nodes);
    free(cfg.sizes);
    hv_ctx_finish(&ctx);
    return 0;
}
