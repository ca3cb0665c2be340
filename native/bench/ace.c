/* hv_ace: the application communication emulator (ACE, paper section 4).
 *
 * One or more emulated applications (EAs) run at once, each on its own
 * communicator (MPI_Comm_split over contiguous blocks of world ranks; ranks in
 * no EA only take part in the global barriers and the gather).
 *
 * Phase 1 (benchmark, skipped for an EA given alpha_ns and beta_ns): every
 * process of the EA times its pattern's communication at 100% load (barrier on
 * the EA's communicator, read clock, exchange, read clock) for every size of
 * bench_sizes, bench_iters times after bench_warmup unmeasured ones. Each
 * process fits per-message cost = t / msgs against the size by least squares
 * (alpha = intercept, beta = slope); the fits are averaged over the EA
 * (MPI_Allreduce) so that all its processes use the same values. All EAs
 * benchmark in parallel; a world barrier then starts phase 2 for all.
 *
 * Phase 2 (run): T_comm = msgs * (alpha + beta * size), T_comp = T_comm * 100 /
 * load - T_comm (paper eq. 6). Each of `cycles` cycles is: busy-wait T_comp on
 * the timer (hv_spin_ns, no memory traffic), the pattern's communication, a
 * barrier on the EA's communicator; the three durations are stored per cycle
 * in preallocated arrays.
 *
 * msgs (messages per cycle in the cost model) is computed by the Python side
 * (hpcvar.bench.ace.messages_per_cycle) and passed in; see docs/ace.md.
 *
 * Options: --eas "EA;EA;..." where an EA is a comma list of key=value:
 *   name=<id> first=<world rank> ranks=<n> pattern=pairs|ring|cart2d|cart3d|
 *   alltoall|allreduce|bcast mode=blocking|nonblocking size=<bytes>
 *   cycles=<n> load=<1..100> msgs=<model messages per cycle> dims=AxB[xC]
 *   periodic=0|1 bench_sizes=<b:b:...> bench_iters=<n> bench_warmup=<n>
 *   [alpha_ns=<ns> beta_ns=<ns per byte>]
 * --label "k=v ..." is copied at the start of the point's #@point line.
 *
 * Output: one point per launch, columns
 *   phase (0 = phase-1 sample, 1 = run cycle), ea, rank (in the EA),
 *   world_rank, iter, size_bytes, t_comp_req_ns, t_comp_ns, t_comm_ns, t_barr_ns
 * (NaN where a column does not apply), and per EA in the #@point line:
 *   eaK_alpha_ns eaK_beta_ns_per_byte eaK_t_comm_ns eaK_t_comp_ns (used)
 *   eaK_fit_fallback=1 when the averaged line predicted a non-positive time
 *   at the EA's size and the measured mean time per message there was used
 *   (alpha = it, beta = 0);
 *   eaK_run_ns / eaK_run_min_ns (max / min over the EA's processes of the
 *   phase-2 wall time) eaK_check=1 when every received buffer held the EA's
 *   own byte marker (communicators never mixed messages). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hv_mpi.h"

#define MAX_EAS 16
#define MAX_BENCH 32
#define NCOLS 10

enum { P_PAIRS, P_RING, P_CART2D, P_CART3D, P_ALLTOALL, P_ALLREDUCE, P_BCAST, P_COUNT };
static const char *const pattern_names[P_COUNT] = {"pairs", "ring", "cart2d", "cart3d",
                                                   "alltoall", "allreduce", "bcast"};

typedef struct {
    char name[32];
    long first, nranks, cycles, bench_iters, bench_warmup;
    int pattern, nonblocking, periodic, ndims, fixed;
    int dims[3];
    long long size;
    double load, msgs, alpha_ns, beta_ns;
    long long bench[MAX_BENCH];
    int nbench;
} ea_spec;

typedef struct {
    const ea_spec *s;
    int index;
    MPI_Comm comm; /* the EA's communicator (cartesian for cart patterns) */
    int rank, size;
    int nb_minus[3], nb_plus[3], coord[3];
    unsigned char marker;
    unsigned char *sbuf, *rbuf;
    size_t rbuf_bytes;
    MPI_Request req[12];
} ea_state;

/* ---- strict parsing of --eas ------------------------------------------------ */

static int parse_ll(const char *v, long long lo, long long hi, long long *out) {
    char *end;
    if (!*v) return -1;
    long long x = strtoll(v, &end, 10);
    if (*end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int parse_dbl(const char *v, double lo, double hi, double *out) {
    char *end;
    if (!*v) return -1;
    double x = strtod(v, &end);
    if (*end || !(x >= lo && x <= hi)) return -1;
    *out = x;
    return 0;
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static int parse_ea(char *text, ea_spec *e, char *err, size_t errlen) {
    memset(e, 0, sizeof *e);
    e->pattern = -1;
    e->nonblocking = -1;
    e->first = e->nranks = e->cycles = -1;
    e->size = -1;
    e->load = e->msgs = -1;
    e->bench_iters = -1;
    e->bench_warmup = -1;
    int have_alpha = 0, have_beta = 0, have_name = 0;
    char *save = NULL;
    for (char *kv = strtok_r(text, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) BAD("'%s' is not key=value", kv);
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        long long x;
        if (strcmp(k, "name") == 0) {
            if (!*v || strlen(v) >= sizeof e->name) BAD("name '%s' is empty or too long", v);
            strcpy(e->name, v);
            have_name = 1;
        } else if (strcmp(k, "first") == 0) {
            if (parse_ll(v, 0, 1 << 24, &x)) BAD("first='%s' is not a rank", v);
            e->first = (long)x;
        } else if (strcmp(k, "ranks") == 0) {
            if (parse_ll(v, 1, 1 << 24, &x)) BAD("ranks='%s' is not a positive count", v);
            e->nranks = (long)x;
        } else if (strcmp(k, "pattern") == 0) {
            for (int p = 0; p < P_COUNT; p++)
                if (strcmp(v, pattern_names[p]) == 0) e->pattern = p;
            if (e->pattern < 0) BAD("unknown pattern '%s'", v);
        } else if (strcmp(k, "mode") == 0) {
            if (strcmp(v, "blocking") == 0) e->nonblocking = 0;
            else if (strcmp(v, "nonblocking") == 0) e->nonblocking = 1;
            else BAD("unknown mode '%s' (blocking or nonblocking)", v);
        } else if (strcmp(k, "size") == 0) {
            if (parse_ll(v, 0, 0x7fffffffLL, &x)) BAD("size='%s' is not a byte count up to 2^31-1", v);
            e->size = x;
        } else if (strcmp(k, "cycles") == 0) {
            if (parse_ll(v, 1, 100000000LL, &x)) BAD("cycles='%s' is not in [1, 1e8]", v);
            e->cycles = (long)x;
        } else if (strcmp(k, "load") == 0) {
            if (parse_dbl(v, 1.0, 100.0, &e->load)) BAD("load='%s' is not in [1, 100]", v);
        } else if (strcmp(k, "msgs") == 0) {
            if (parse_dbl(v, 1e-9, 1e9, &e->msgs)) BAD("msgs='%s' is not a positive number", v);
        } else if (strcmp(k, "periodic") == 0) {
            if (parse_ll(v, 0, 1, &x)) BAD("periodic='%s' is not 0 or 1", v);
            e->periodic = (int)x;
        } else if (strcmp(k, "dims") == 0) {
            char buf[64];
            if (strlen(v) >= sizeof buf) BAD("dims='%s' is too long", v);
            strcpy(buf, v);
            char *s2 = NULL;
            e->ndims = 0;
            for (char *d = strtok_r(buf, "x", &s2); d; d = strtok_r(NULL, "x", &s2)) {
                if (e->ndims == 3 || parse_ll(d, 0, 1 << 24, &x)) BAD("dims='%s' is not AxB or AxBxC", v);
                e->dims[e->ndims++] = (int)x;
            }
        } else if (strcmp(k, "bench_sizes") == 0) {
            char buf[1024];
            if (strlen(v) >= sizeof buf) BAD("bench_sizes is too long");
            strcpy(buf, v);
            char *s2 = NULL;
            e->nbench = 0;
            for (char *d = strtok_r(buf, ":", &s2); d; d = strtok_r(NULL, ":", &s2)) {
                if (e->nbench == MAX_BENCH || parse_ll(d, 0, 0x7fffffffLL, &x))
                    BAD("bench_sizes='%s' is not up to %d sizes separated by ':'", v, MAX_BENCH);
                e->bench[e->nbench++] = x;
            }
        } else if (strcmp(k, "bench_iters") == 0) {
            if (parse_ll(v, 1, 100000000LL, &x)) BAD("bench_iters='%s' is not in [1, 1e8]", v);
            e->bench_iters = (long)x;
        } else if (strcmp(k, "bench_warmup") == 0) {
            if (parse_ll(v, 0, 100000000LL, &x)) BAD("bench_warmup='%s' is not in [0, 1e8]", v);
            e->bench_warmup = (long)x;
        } else if (strcmp(k, "alpha_ns") == 0) {
            if (parse_dbl(v, 0.0, 1e12, &e->alpha_ns)) BAD("alpha_ns='%s' is not a non-negative number", v);
            have_alpha = 1;
        } else if (strcmp(k, "beta_ns") == 0) {
            if (parse_dbl(v, 0.0, 1e12, &e->beta_ns)) BAD("beta_ns='%s' is not a non-negative number", v);
            have_beta = 1;
        } else {
            BAD("unknown EA key '%s'", k);
        }
    }
    if (!have_name || e->first < 0 || e->nranks < 0 || e->pattern < 0 || e->nonblocking < 0 || e->size < 0 ||
        e->cycles < 0 || e->load < 0 || e->msgs < 0)
        BAD("an EA needs name, first, ranks, pattern, mode, size, cycles, load and msgs");
    if (have_alpha != have_beta) BAD("EA '%s': give both alpha_ns and beta_ns, or neither", e->name);
    e->fixed = have_alpha;
    if (!e->fixed) {
        if (e->nbench < 2) BAD("EA '%s': phase 1 needs at least 2 bench_sizes", e->name);
        if (e->bench_iters < 1 || e->bench_warmup < 0) BAD("EA '%s': phase 1 needs bench_iters and bench_warmup", e->name);
    }
    int want_dims = e->pattern == P_CART2D ? 2 : e->pattern == P_CART3D ? 3 : 0;
    if (want_dims) {
        if (e->ndims != want_dims) BAD("EA '%s': pattern %s needs dims with %d sides", e->name, pattern_names[e->pattern], want_dims);
    } else if (e->ndims) {
        BAD("EA '%s': dims only apply to cart2d and cart3d", e->name);
    }
    if ((e->pattern == P_PAIRS || (e->pattern == P_RING && !e->nonblocking)) && e->nranks % 2)
        BAD("EA '%s': %s %s needs an even number of ranks, got %ld", e->name, pattern_names[e->pattern],
            e->nonblocking ? "nonblocking" : "blocking", e->nranks);
    return 0;
}

static int parse_eas(const char *text, ea_spec *eas, int *neas, int world, char *err, size_t errlen) {
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (!copy) BAD("out of memory");
    memcpy(copy, text, len + 1);
    int n = 0, rc = 0;
    char *save = NULL;
    for (char *one = strtok_r(copy, ";", &save); one && rc == 0; one = strtok_r(NULL, ";", &save)) {
        if (n == MAX_EAS) { snprintf(err, errlen, "more than %d EAs", MAX_EAS); rc = -1; break; }
        rc = parse_ea(one, &eas[n], err, errlen);
        n++;
    }
    free(copy);
    if (rc) return rc;
    if (n == 0) BAD("--eas holds no EA");
    for (int i = 0; i < n; i++) {
        if (eas[i].first + eas[i].nranks > world)
            BAD("EA '%s' needs ranks %ld..%ld but the job has %d", eas[i].name, eas[i].first,
                eas[i].first + eas[i].nranks - 1, world);
        for (int j = 0; j < i; j++)
            if (eas[i].first < eas[j].first + eas[j].nranks && eas[j].first < eas[i].first + eas[i].nranks)
                BAD("EAs '%s' and '%s' share ranks", eas[j].name, eas[i].name);
    }
    *neas = n;
    return 0;
}

/* ---- communication kernels ---------------------------------------------------- */

/* The blocking directional shift of a cartesian/ring exchange: ranks with an
 * even coordinate send first, odd ones receive first (deadlock-free for
 * non-periodic sides and for periodic sides of even length). */
static void shift_blocking(ea_state *e, int to, int from, int parity, int n, unsigned char *rb, int tag) {
    if (parity == 0) {
        HV_MPI_CHECK(MPI_Send(e->sbuf, n, MPI_BYTE, to, tag, e->comm));
        HV_MPI_CHECK(MPI_Recv(rb, n, MPI_BYTE, from, tag, e->comm, MPI_STATUS_IGNORE));
    } else {
        HV_MPI_CHECK(MPI_Recv(rb, n, MPI_BYTE, from, tag, e->comm, MPI_STATUS_IGNORE));
        HV_MPI_CHECK(MPI_Send(e->sbuf, n, MPI_BYTE, to, tag, e->comm));
    }
}

static void communicate(ea_state *e, int n) {
    const ea_spec *s = e->s;
    int k = 0;
    switch (s->pattern) {
    case P_PAIRS: {
        int partner = e->rank ^ 1;
        if (s->nonblocking) {
            HV_MPI_CHECK(MPI_Irecv(e->rbuf, n, MPI_BYTE, partner, 1, e->comm, &e->req[0]));
            HV_MPI_CHECK(MPI_Isend(e->sbuf, n, MPI_BYTE, partner, 1, e->comm, &e->req[1]));
            HV_MPI_CHECK(MPI_Waitall(2, e->req, MPI_STATUSES_IGNORE));
        } else {
            shift_blocking(e, partner, partner, e->rank & 1, n, e->rbuf, 1);
        }
        break;
    }
    case P_RING: {
        int right = (e->rank + 1) % e->size, left = (e->rank + e->size - 1) % e->size;
        if (s->nonblocking) {
            HV_MPI_CHECK(MPI_Irecv(e->rbuf, n, MPI_BYTE, left, 2, e->comm, &e->req[0]));
            HV_MPI_CHECK(MPI_Isend(e->sbuf, n, MPI_BYTE, right, 2, e->comm, &e->req[1]));
            HV_MPI_CHECK(MPI_Waitall(2, e->req, MPI_STATUSES_IGNORE));
        } else {
            shift_blocking(e, right, left, e->rank & 1, n, e->rbuf, 2);
        }
        break;
    }
    case P_CART2D:
    case P_CART3D:
        for (int d = 0; d < s->ndims; d++) {
            unsigned char *rb_up = e->rbuf + (size_t)(2 * d) * (size_t)n;
            unsigned char *rb_down = e->rbuf + (size_t)(2 * d + 1) * (size_t)n;
            if (s->nonblocking) {
                HV_MPI_CHECK(MPI_Irecv(rb_up, n, MPI_BYTE, e->nb_minus[d], 10 + 2 * d, e->comm, &e->req[k++]));
                HV_MPI_CHECK(MPI_Irecv(rb_down, n, MPI_BYTE, e->nb_plus[d], 11 + 2 * d, e->comm, &e->req[k++]));
                HV_MPI_CHECK(MPI_Isend(e->sbuf, n, MPI_BYTE, e->nb_plus[d], 10 + 2 * d, e->comm, &e->req[k++]));
                HV_MPI_CHECK(MPI_Isend(e->sbuf, n, MPI_BYTE, e->nb_minus[d], 11 + 2 * d, e->comm, &e->req[k++]));
            } else {
                shift_blocking(e, e->nb_plus[d], e->nb_minus[d], e->coord[d] & 1, n, rb_up, 10 + 2 * d);
                shift_blocking(e, e->nb_minus[d], e->nb_plus[d], e->coord[d] & 1, n, rb_down, 11 + 2 * d);
            }
        }
        if (k) HV_MPI_CHECK(MPI_Waitall(k, e->req, MPI_STATUSES_IGNORE));
        break;
    case P_ALLTOALL:
        if (s->nonblocking) {
            HV_MPI_CHECK(MPI_Ialltoall(e->sbuf, n, MPI_BYTE, e->rbuf, n, MPI_BYTE, e->comm, &e->req[0]));
            HV_MPI_CHECK(MPI_Wait(&e->req[0], MPI_STATUS_IGNORE));
        } else {
            HV_MPI_CHECK(MPI_Alltoall(e->sbuf, n, MPI_BYTE, e->rbuf, n, MPI_BYTE, e->comm));
        }
        break;
    case P_ALLREDUCE:
        if (s->nonblocking) {
            HV_MPI_CHECK(MPI_Iallreduce(e->sbuf, e->rbuf, n, MPI_UNSIGNED_CHAR, MPI_BOR, e->comm, &e->req[0]));
            HV_MPI_CHECK(MPI_Wait(&e->req[0], MPI_STATUS_IGNORE));
        } else {
            HV_MPI_CHECK(MPI_Allreduce(e->sbuf, e->rbuf, n, MPI_UNSIGNED_CHAR, MPI_BOR, e->comm));
        }
        break;
    case P_BCAST: {
        unsigned char *b = e->rank == 0 ? e->sbuf : e->rbuf;
        if (s->nonblocking) {
            HV_MPI_CHECK(MPI_Ibcast(b, n, MPI_BYTE, 0, e->comm, &e->req[0]));
            HV_MPI_CHECK(MPI_Wait(&e->req[0], MPI_STATUS_IGNORE));
        } else {
            HV_MPI_CHECK(MPI_Bcast(b, n, MPI_BYTE, 0, e->comm));
        }
        break;
    }
    }
}

/* Bytes of receive buffer the pattern writes for messages of n bytes. */
static size_t recv_bytes(const ea_state *e, long long n) {
    switch (e->s->pattern) {
    case P_CART2D: return (size_t)(4 * n);
    case P_CART3D: return (size_t)(6 * n);
    case P_ALLTOALL: return (size_t)e->size * (size_t)n;
    default: return (size_t)n;
    }
}

/* 1 if every byte the last exchange received holds the EA's marker. */
static int check_received(const ea_state *e) {
    size_t n = (size_t)e->s->size, len = recv_bytes(e, e->s->size);
    if (e->s->pattern == P_BCAST && e->rank == 0) return 1;
    for (size_t i = 0; i < len; i++) {
        if ((e->s->pattern == P_CART2D || e->s->pattern == P_CART3D)) {
            int d = (int)(i / n) / 2, up = ((int)(i / n) % 2) == 0;
            if ((up ? e->nb_minus[d] : e->nb_plus[d]) == MPI_PROC_NULL) continue;
        }
        if (e->rbuf[i] != e->marker) return 0;
    }
    return 1;
}

static void setup_ea(ea_state *e, const ea_spec *s, int index, MPI_Comm sub) {
    memset(e, 0, sizeof *e);
    e->s = s;
    e->index = index;
    e->marker = (unsigned char)(0x10 + index);
    if (s->pattern == P_CART2D || s->pattern == P_CART3D) {
        int periods[3] = {s->periodic, s->periodic, s->periodic}, dims[3];
        memcpy(dims, s->dims, sizeof dims);
        int sz;
        HV_MPI_CHECK(MPI_Comm_size(sub, &sz));
        HV_MPI_CHECK(MPI_Dims_create(sz, s->ndims, dims)); /* fills zero sides, checks the given ones */
        for (int d = 0; d < s->ndims; d++)
            if (s->dims[d] && dims[d] != s->dims[d]) HV_DIE("EA '%s': dims do not match %d ranks", s->name, sz);
        HV_MPI_CHECK(MPI_Cart_create(sub, s->ndims, dims, periods, 0, &e->comm));
        HV_MPI_CHECK(MPI_Comm_free(&sub));
        HV_MPI_CHECK(MPI_Comm_set_errhandler(e->comm, MPI_ERRORS_RETURN));
        HV_MPI_CHECK(MPI_Comm_rank(e->comm, &e->rank));
        HV_MPI_CHECK(MPI_Cart_coords(e->comm, e->rank, s->ndims, e->coord));
        for (int d = 0; d < s->ndims; d++) {
            HV_MPI_CHECK(MPI_Cart_shift(e->comm, d, 1, &e->nb_minus[d], &e->nb_plus[d]));
            if (s->periodic && !s->nonblocking && dims[d] % 2)
                HV_DIE("EA '%s': a blocking periodic exchange needs even sides, side %d is %d", s->name, d, dims[d]);
        }
    } else {
        e->comm = sub;
        HV_MPI_CHECK(MPI_Comm_set_errhandler(e->comm, MPI_ERRORS_RETURN));
    }
    HV_MPI_CHECK(MPI_Comm_rank(e->comm, &e->rank));
    HV_MPI_CHECK(MPI_Comm_size(e->comm, &e->size));
    if (e->size != s->nranks) HV_DIE("EA '%s' has %d ranks, expected %ld", s->name, e->size, s->nranks);
    long long maxn = s->size;
    for (int i = 0; i < s->nbench; i++)
        if (s->bench[i] > maxn) maxn = s->bench[i];
    size_t sendb = s->pattern == P_ALLTOALL ? (size_t)e->size * (size_t)maxn : (size_t)maxn;
    e->sbuf = hv_malloc_touched(sendb);
    e->rbuf_bytes = recv_bytes(e, maxn);
    e->rbuf = hv_malloc_touched(e->rbuf_bytes);
    memset(e->sbuf, e->marker, sendb);
}

/* Least squares y = a + b x; returns 0 or -1 when x has no spread. */
static int fit_line(const double *x, const double *y, int n, double *a, double *b) {
    double mx = 0, my = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
    mx /= n;
    my /= n;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    if (sxx <= 0) return -1;
    *b = sxy / sxx;
    *a = my - *b * mx;
    return 0;
}

static void put_row(double *r, double phase, double ea, double rank, double wrank, double iter, double size,
                    double req, double comp, double comm, double barr) {
    r[0] = phase; r[1] = ea; r[2] = rank; r[3] = wrank; r[4] = iter; r[5] = size;
    r[6] = req; r[7] = comp; r[8] = comm; r[9] = barr;
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        {"eas", NULL, 0, "the emulated applications (see the file comment)"},
        {"label", NULL, 0, "key=value pairs copied into the point line"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    hv_ctx ctx;
    hv_ctx_init(&ctx, &argc, &argv, "hv_ace", opts, nopts);

    char err[512];
    static ea_spec eas[MAX_EAS];
    int neas = 0;
    const char *spec = hv_args_get(opts, nopts, "eas");
    const char *label = hv_args_get(opts, nopts, "label");
    if (!spec) HV_DIE("hv_ace: option '--eas' is required");
    if (parse_eas(spec, eas, &neas, ctx.size, err, sizeof err)) HV_DIE("hv_ace: --eas: %s", err);
    if (label && (strchr(label, '\n') || strlen(label) > 512)) HV_DIE("hv_ace: --label is too long or has a newline");

    int mine = -1;
    for (int i = 0; i < neas; i++)
        if (ctx.rank >= eas[i].first && ctx.rank < eas[i].first + eas[i].nranks) mine = i;
    MPI_Comm sub;
    HV_MPI_CHECK(MPI_Comm_split(ctx.comm, mine < 0 ? MPI_UNDEFINED : mine, ctx.rank, &sub));
    ea_state st;
    ea_state *e = NULL;
    if (mine >= 0) {
        setup_ea(&st, &eas[mine], mine, sub);
        e = &st;
    }

    /* preallocated sample storage */
    const ea_spec *s = e ? e->s : NULL;
    size_t nb_samples = s && !s->fixed ? (size_t)s->nbench * (size_t)s->bench_iters : 0;
    size_t ncycles = s ? (size_t)s->cycles : 0;
    uint64_t *bt = hv_malloc_touched((nb_samples ? nb_samples : 1) * sizeof *bt);
    uint64_t *tc = hv_malloc_touched((ncycles ? ncycles : 1) * sizeof *tc);
    uint64_t *tm = hv_malloc_touched((ncycles ? ncycles : 1) * sizeof *tm);
    uint64_t *tb = hv_malloc_touched((ncycles ? ncycles : 1) * sizeof *tb);
    double *rows = hv_malloc_touched((nb_samples + ncycles + 1) * NCOLS * sizeof *rows);
    const char *cols[NCOLS] = {"phase", "ea", "rank", "world_rank", "iter", "size_bytes",
                               "t_comp_req_ns", "t_comp_ns", "t_comm_ns", "t_barr_ns"};
    if (ctx.rank == 0) hv_out_columns(&ctx.out, NCOLS, cols);
    const hv_timer *tm_ = &ctx.timer;

    /* ---- phase 1: all EAs benchmark in parallel ---- */
    double alpha = 0, beta = 0;
    int fallback = 0; /* 1 when the fitted line was replaced by the measured time at the EA's size */
    if (e && !s->fixed) {
        double xs[MAX_BENCH], ys[MAX_BENCH];
        for (int b = 0; b < s->nbench; b++) {
            const int n = (int)s->bench[b];
            for (long w = 0; w < s->bench_warmup; w++) {
                HV_MPI_CHECK(MPI_Barrier(e->comm));
                communicate(e, n);
            }
            uint64_t *out = bt + (size_t)b * (size_t)s->bench_iters;
            for (long i = 0; i < s->bench_iters; i++) {
                HV_MPI_CHECK(MPI_Barrier(e->comm));
                uint64_t t0 = hv_ticks(tm_);
                communicate(e, n);
                out[i] = hv_ticks(tm_) - t0;
            }
        }
        for (int b = 0; b < s->nbench; b++) {
            double sum = 0;
            for (long i = 0; i < s->bench_iters; i++) sum += hv_ticks_to_ns(tm_, bt[(size_t)b * (size_t)s->bench_iters + (size_t)i]);
            xs[b] = (double)s->bench[b];
            ys[b] = sum / (double)s->bench_iters / s->msgs;
        }
        double ab[3];
        if (fit_line(xs, ys, s->nbench, &ab[0], &ab[1]) != 0) HV_DIE("EA '%s': bench_sizes need two different sizes", s->name);
        ab[2] = ys[s->nbench - 1]; /* mean time per message at the largest benchmark size */
        HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, ab, 3, MPI_DOUBLE, MPI_SUM, e->comm));
        alpha = ab[0] / e->size;
        beta = ab[1] / e->size;
        if (alpha + beta * (double)s->size <= 0 && s->bench[s->nbench - 1] == s->size) {
            /* a noisy benchmark can fit a line that predicts a negative time at the EA's size:
             * use the measured time per message at that size instead (alpha = it, beta = 0) */
            alpha = ab[2] / e->size;
            beta = 0;
            fallback = 1;
        }
    } else if (e) {
        alpha = s->alpha_ns;
        beta = s->beta_ns;
    }
    double t_comm = 0, t_comp = 0;
    if (e) {
        t_comm = s->msgs * (alpha + beta * (double)s->size);
        if (t_comm < 0) t_comm = 0; /* a fit with a negative intercept at a tiny size */
        t_comp = t_comm * 100.0 / s->load - t_comm;
        memset(e->rbuf, 0, e->rbuf_bytes);
    }
    HV_MPI_CHECK(MPI_Barrier(ctx.comm));

    /* ---- phase 2: the run ---- */
    uint64_t run0 = hv_ticks(tm_), run1 = run0;
    if (e) {
        const int n = (int)s->size;
        for (size_t c = 0; c < ncycles; c++) {
            uint64_t t0 = hv_ticks(tm_);
            hv_spin_ns(tm_, t_comp);
            uint64_t t1 = hv_ticks(tm_);
            communicate(e, n);
            uint64_t t2 = hv_ticks(tm_);
            HV_MPI_CHECK(MPI_Barrier(e->comm));
            uint64_t t3 = hv_ticks(tm_);
            tc[c] = t1 - t0;
            tm[c] = t2 - t1;
            tb[c] = t3 - t2;
        }
        run1 = hv_ticks(tm_);
    }
    HV_MPI_CHECK(MPI_Barrier(ctx.comm));

    /* ---- outside the timed part: rows, per-EA values, gather ---- */
    size_t nrows = 0;
    double run_ns = hv_ticks_to_ns(tm_, run1 - run0);
    enum { K = 9 };
    double vals[MAX_EAS * K];
    memset(vals, 0, sizeof vals);
    if (e) {
        const double nan = NAN;
        for (int b = 0; b < s->nbench && !s->fixed; b++)
            for (long i = 0; i < s->bench_iters; i++)
                put_row(rows + NCOLS * nrows++, 0, mine, e->rank, ctx.rank, (double)i, (double)s->bench[b], nan, nan,
                        hv_ticks_to_ns(tm_, bt[(size_t)b * (size_t)s->bench_iters + (size_t)i]), nan);
        for (size_t c = 0; c < ncycles; c++)
            put_row(rows + NCOLS * nrows++, 1, mine, e->rank, ctx.rank, (double)c, (double)s->size, t_comp,
                    hv_ticks_to_ns(tm_, tc[c]), hv_ticks_to_ns(tm_, tm[c]), hv_ticks_to_ns(tm_, tb[c]));
        double mx = run_ns, mn = run_ns;
        int ok = check_received(e);
        HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_DOUBLE, MPI_MAX, e->comm));
        HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_DOUBLE, MPI_MIN, e->comm));
        HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, e->comm));
        if (e->rank == 0) {
            double *v = vals + K * mine;
            v[0] = alpha; v[1] = beta; v[2] = t_comm; v[3] = t_comp; v[4] = mx; v[5] = mn; v[6] = ok; v[7] = 1; v[8] = fallback;
        }
    }
    HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, vals, MAX_EAS * K, MPI_DOUBLE, MPI_SUM, ctx.comm));
    char desc[8192];
    int pos = snprintf(desc, sizeof desc, "%s%sneas=%d", label ? label : "", label && *label ? " " : "", neas);
    for (int i = 0; i < neas && pos > 0 && (size_t)pos < sizeof desc; i++) {
        const double *v = vals + K * i;
        pos += snprintf(desc + pos, sizeof desc - (size_t)pos,
                        " ea%d_name=%s ea%d_alpha_ns=%.9g ea%d_beta_ns_per_byte=%.9g ea%d_t_comm_ns=%.6f"
                        " ea%d_t_comp_ns=%.6f ea%d_run_ns=%.1f ea%d_run_min_ns=%.1f ea%d_check=%d ea%d_fixed=%d"
                        " ea%d_fit_fallback=%d",
                        i, eas[i].name, i, v[0], i, v[1], i, v[2], i, v[3], i, v[4], i, v[5], i, (int)v[6],
                        i, eas[i].fixed, i, (int)v[8]);
    }
    if (pos < 0 || (size_t)pos >= sizeof desc) HV_DIE("hv_ace: point description too long");
    hv_gather_point(&ctx, desc, rows, nrows);

    if (e) {
        free(e->sbuf);
        free(e->rbuf);
        HV_MPI_CHECK(MPI_Comm_free(&e->comm));
    }
    free(bt);
    free(tc);
    free(tm);
    free(tb);
    free(rows);
    hv_ctx_finish(&ctx);
    return 0;
}
