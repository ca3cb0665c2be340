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
 * Header metadata: placement.comm<k>=send:<rank>@host<h>,recv:<rank>@host<h> and host.<h>=<identity>. */
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

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        {"comms", NULL, 0, "comma list of source,destination node indices, one pair per communication"},
        {"sizes", NULL, 0, "comma list of message sizes in bytes, one per communication"},
        {"reps", NULL, 0, "measured repetitions"},
        {"warmup", NULL, 0, "unmeasured repetitions first"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    hv_ctx ctx;
    hv_ctx_init(&ctx, &argc, &argv, "hv_sharing", opts, nopts);

    char err[256];
    int64_t *nodes, *sizes;
    size_t nn, ns;
    long reps, warmup;
    if (hv_args_list(opts, nopts, "comms", &nodes, &nn, err, sizeof err) ||
        hv_args_list(opts, nopts, "sizes", &sizes, &ns, err, sizeof err) ||
        hv_args_long(opts, nopts, "reps", 1, 1000000L, &reps, err, sizeof err) ||
        hv_args_long(opts, nopts, "warmup", 0, 1000000L, &warmup, err, sizeof err))
        HV_DIE("hv_sharing: %s", err);
    if (nn == 0 || nn % 2) HV_DIE("hv_sharing: --comms needs source,destination pairs, got %zu values", nn);
    const int ncomms = (int)(nn / 2);
    if ((int)ns != ncomms) HV_DIE("hv_sharing: --sizes has %zu values for %d communications", ns, ncomms);
    int nnodes = 0;
    for (size_t i = 0; i < nn; i++)
        if (nodes[i] + 1 > nnodes) nnodes = (int)nodes[i] + 1;
    int64_t maxsize = 0;
    for (int k = 0; k < ncomms; k++) {
        if (nodes[2 * k] == nodes[2 * k + 1])
            HV_DIE("communication %d goes from node %lld to itself", k, (long long)nodes[2 * k]);
        if (sizes[k] < 1 || sizes[k] > 0x7fffffff)
            HV_DIE("size %lld of communication %d is outside [1, 2^31)", (long long)sizes[k], k);
        if (sizes[k] > maxsize) maxsize = sizes[k];
    }

    /* placement: host of every rank, then roles */
    char *ids = hv_malloc_touched((size_t)ctx.size * ID_LEN);
    char mine[ID_LEN];
    host_identity(mine);
    HV_MPI_CHECK(MPI_Allgather(mine, ID_LEN, MPI_CHAR, ids, ID_LEN, MPI_CHAR, ctx.comm));
    int *host = hv_malloc_touched((size_t)ctx.size * sizeof *host);
    int nhosts = 0;
    for (int r = 0; r < ctx.size; r++) {
        host[r] = -1;
        for (int q = 0; q < r; q++)
            if (strncmp(ids + (size_t)q * ID_LEN, ids + (size_t)r * ID_LEN, ID_LEN) == 0) {
                host[r] = host[q];
                break;
            }
        if (host[r] < 0) host[r] = nhosts++;
    }
    if (nhosts > 1 && nhosts < nnodes)
        HV_DIE("the scheme has %d nodes but the job spans %d hosts: start it on at least %d hosts (one per node)",
               nnodes, nhosts, nnodes);
    int *taken = hv_malloc_touched((size_t)ctx.size * sizeof *taken);
    int *snd = hv_malloc_touched((size_t)ncomms * sizeof *snd), *rcv = hv_malloc_touched((size_t)ncomms * sizeof *rcv);
    for (int r = 0; r < ctx.size; r++) taken[r] = 0;
    for (int k = 0; k < 2 * ncomms; k++) {
        const int node = (int)nodes[k];
        const int want = nhosts == 1 ? 0 : node;
        int got = -1;
        for (int r = 0; r < ctx.size && got < 0; r++)
            if (!taken[r] && host[r] == want) got = r;
        if (got < 0)
            HV_DIE("not enough ranks on the host of scheme node %d (%s) for its communication ends: "
                   "start more ranks per host (--ranks-per-node)",
                   node, nhosts == 1 ? "the only host" : "its host");
        taken[got] = 1;
        if (k % 2) rcv[k / 2] = got;
        else snd[k / 2] = got;
    }
    int my_send = -1, my_recv = -1;
    for (int k = 0; k < ncomms; k++) {
        if (snd[k] == ctx.rank) my_send = k;
        if (rcv[k] == ctx.rank) my_recv = k;
    }
    if (ctx.rank == 0) {
        for (int h = 0; h < nhosts; h++)
            for (int r = 0; r < ctx.size; r++)
                if (host[r] == h) {
                    char key[32];
                    snprintf(key, sizeof key, "host.%d", h);
                    hv_out_meta(&ctx.out, key, "%s", ids + (size_t)r * ID_LEN);
                    break;
                }
        for (int k = 0; k < ncomms; k++) {
            char key[32];
            snprintf(key, sizeof key, "placement.comm%d", k);
            hv_out_meta(&ctx.out, key, "send:%d@host%d,recv:%d@host%d", snd[k], host[snd[k]], rcv[k], host[rcv[k]]);
        }
        hv_out_meta(&ctx.out, "nhosts", "%d", nhosts);
    }

    char *buf = hv_malloc_touched((size_t)maxsize);
    uint64_t *t_ref = hv_malloc_touched((size_t)reps * sizeof *t_ref);
    uint64_t *t_com = hv_malloc_touched((size_t)reps * sizeof *t_com);
    const char *cols[] = {"rep", "comm", "t_ns"};
    if (ctx.rank == 0) hv_out_columns(&ctx.out, 3, cols);

    for (long it = -warmup; it < reps; it++) {
        /* phase 1: the reference transfer alone */
        HV_MPI_CHECK(MPI_Barrier(ctx.comm));
        if (ctx.rank == snd[0]) {
            uint64_t a = hv_ticks(&ctx.timer);
            HV_MPI_CHECK(MPI_Send(buf, (int)sizes[0], MPI_BYTE, rcv[0], TAG_REF, ctx.comm));
            uint64_t b = hv_ticks(&ctx.timer);
            if (it >= 0) t_ref[it] = b - a;
        } else if (ctx.rank == rcv[0]) {
            HV_MPI_CHECK(MPI_Recv(buf, (int)sizes[0], MPI_BYTE, MPI_ANY_SOURCE, TAG_REF, ctx.comm, MPI_STATUS_IGNORE));
        }
        /* phase 2: every communication at once */
        HV_MPI_CHECK(MPI_Barrier(ctx.comm));
        if (my_send >= 0) {
            uint64_t a = hv_ticks(&ctx.timer);
            HV_MPI_CHECK(MPI_Send(buf, (int)sizes[my_send], MPI_BYTE, rcv[my_send], TAG_DATA, ctx.comm));
            uint64_t b = hv_ticks(&ctx.timer);
            if (it >= 0) t_com[it] = b - a;
        } else if (my_recv >= 0) {
            HV_MPI_CHECK(
                MPI_Recv(buf, (int)sizes[my_recv], MPI_BYTE, MPI_ANY_SOURCE, TAG_DATA, ctx.comm, MPI_STATUS_IGNORE));
        }
    }

    /* rows: this rank's measurements (reference and/or its communication) */
    size_t nrows = 0;
    double *rows = hv_malloc_touched((size_t)reps * 2 * 3 * sizeof *rows);
    if (ctx.rank == snd[0])
        for (long i = 0; i < reps; i++, nrows++) {
            rows[3 * nrows] = (double)i;
            rows[3 * nrows + 1] = -1.0;
            rows[3 * nrows + 2] = hv_ticks_to_ns(&ctx.timer, t_ref[i]);
        }
    if (my_send >= 0)
        for (long i = 0; i < reps; i++, nrows++) {
            rows[3 * nrows] = (double)i;
            rows[3 * nrows + 1] = (double)my_send;
            rows[3 * nrows + 2] = hv_ticks_to_ns(&ctx.timer, t_com[i]);
        }
    char desc[96];
    snprintf(desc, sizeof desc, "size=%lld reps=%ld ncomms=%d", (long long)sizes[0], reps, ncomms);
    hv_gather_point(&ctx, desc, rows, nrows);
    free(rows);
    free(buf);
    free(t_ref);
    free(t_com);
    free(ids);
    free(host);
    free(taken);
    free(snd);
    free(rcv);
    free(nodes);
    free(sizes);
    hv_ctx_finish(&ctx);
    return 0;
}
