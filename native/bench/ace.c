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
 * Options: flat, already validated by the Python side (hpcvar.bench.ace
 * native_options); the checks here are a second line of defence. Every --ea-*
 * option is a comma list with one value per EA, in EA order:
 *   --ea-name <id>  --ea-first <world rank>  --ea-ranks <n>
 *   --ea-pattern <code: 0 pairs 1 ring 2 cart2d 3 cart3d 4 alltoall
 *                  5 allreduce 6 bcast (the order of hpcvar.models.ace.PATTERNS)>
 *   --ea-mode <0 blocking, 1 nonblocking>  --ea-size <bytes>  --ea-cycles <n>
 *   --ea-load <1..100>  --ea-msgs <model messages per cycle>
 *   --ea-dims <three sides per EA: A,B,0 for cart2d, A,B,C for cart3d, 0,0,0
 *              otherwise>  --ea-periodic <0|1>
 *   --ea-fixed <1: alpha and beta given, phase 1 skipped>  --ea-alpha-ns <ns>
 *   --ea-beta-ns <ns per byte> (both 0 where not fixed)
 *   --ea-bench-count <phase-1 sizes of the EA: 0 where fixed, else 2..32>
 *   --ea-bench-sizes <every EA's phase-1 sizes, one after the other; left
 *                     out when no EA has phase 1>
 *   --bench-iters <n> --bench-warmup <n> (every EA with phase 1)
 * --label "k=v ..." is copied at the start of the point's #@point line.
 *
 * Code: main reads the options (read_eas), splits the communicator
 * (setup_ea), then phase1, phase2 and the gather (ea_rows, describe_point),
 * each over an ea_state and preallocated ace_samples.
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
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

enum { P_PAIRS, P_RING, P_CART2D, P_CART3D, P_ALLTOALL, P_ALLREDUCE, P_BCAST, P_COUNT };
static const char *const pattern_names[P_COUNT] = {"pairs",    "ring",      "cart2d", "cart3d",
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

/* ---- flat, already-validated options ----------------------------------------------------- */

typedef struct {
    ea_spec eas[MAX_EAS];
    int neas;
    const char *label;
} ace_config;

/* One integer per EA (count values in all), each in [lo, hi]. */
static void read_ints(const hv_opt *opts, size_t nopts, const char *name, size_t count, long long lo, long long hi,
                      long long *out) {
    char err[512];
    int64_t *xs;
    size_t n;
    if (hv_args_list(opts, nopts, name, &xs, &n, err, sizeof err)) HV_DIE("hv_ace: %s", err);
    if (n != count) HV_DIE("hv_ace: --%s holds %zu values, expected %zu", name, n, count);
    for (size_t i = 0; i < n; i++) {
        if (xs[i] < lo || xs[i] > hi)
            HV_DIE("hv_ace: --%s: value %zu (%lld) is outside [%lld, %lld]", name, i, (long long)xs[i], lo, hi);
        out[i] = xs[i];
    }
    free(xs);
}

/* One number per EA, each in [lo, hi]. */
static void read_reals(const hv_opt *opts, size_t nopts, const char *name, int neas, double lo, double hi,
                       double *out) {
    const char *v = hv_args_get(opts, nopts, name);
    if (!v) HV_DIE("hv_ace: option '--%s' is required", name);
    int n = 0;
    for (const char *p = v;; n++) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !(x >= lo && x <= hi) || n == neas)
            HV_DIE("hv_ace: --%s: '%s' is not %d numbers in [%g, %g]", name, v, neas, lo, hi);
        out[n] = x;
        if (!*end) break;
        p = end + 1;
    }
    if (n + 1 != neas) HV_DIE("hv_ace: --%s holds %d values, expected %d", name, n + 1, neas);
}

/* The EA names (short words: they go into the #@point line); sets c->neas. */
static void read_names(const hv_opt *opts, size_t nopts, ace_config *c) {
    const char *v = hv_args_get(opts, nopts, "ea-name");
    if (!v || !*v) HV_DIE("hv_ace: option '--ea-name' is required");
    c->neas = 0;
    for (const char *p = v;; p++) {
        size_t len = strcspn(p, ",");
        if (c->neas == MAX_EAS) HV_DIE("hv_ace: more than %d EAs", MAX_EAS);
        if (len == 0 || len >= sizeof c->eas[0].name || strspn(p, NAME_CHARS) < len)
            HV_DIE("hv_ace: --ea-name: '%.*s' is not a name of 1 to 31 letters, digits, '_', '-' or '.'", (int)len, p);
        memcpy(c->eas[c->neas++].name, p, len);
        p += len;
        if (!*p) break;
    }
}

/* Integer fields of every EA. */
static void read_ea_ints(const hv_opt *opts, size_t nopts, ace_config *c) {
    const size_t n = (size_t)c->neas;
    long long first[MAX_EAS], ranks[MAX_EAS], pattern[MAX_EAS], mode[MAX_EAS], size[MAX_EAS], cycles[MAX_EAS],
        periodic[MAX_EAS], fixed[MAX_EAS], dims[3 * MAX_EAS], iters, warmup;
    read_ints(opts, nopts, "ea-first", n, 0, 1 << 24, first);
    read_ints(opts, nopts, "ea-ranks", n, 1, 1 << 24, ranks);
    read_ints(opts, nopts, "ea-pattern", n, 0, P_COUNT - 1, pattern);
    read_ints(opts, nopts, "ea-mode", n, 0, 1, mode);
    read_ints(opts, nopts, "ea-size", n, 0, 0x7fffffffLL, size);
    read_ints(opts, nopts, "ea-cycles", n, 1, 100000000LL, cycles);
    read_ints(opts, nopts, "ea-periodic", n, 0, 1, periodic);
    read_ints(opts, nopts, "ea-fixed", n, 0, 1, fixed);
    read_ints(opts, nopts, "ea-dims", 3 * n, 0, 1 << 24, dims);
    read_ints(opts, nopts, "bench-iters", 1, 1, 100000000LL, &iters);
    read_ints(opts, nopts, "bench-warmup", 1, 0, 100000000LL, &warmup);
    for (size_t i = 0; i < n; i++) {
        ea_spec *e = &c->eas[i];
        e->first = (long)first[i];
        e->nranks = (long)ranks[i];
        e->pattern = (int)pattern[i];
        e->nonblocking = (int)mode[i];
        e->size = size[i];
        e->cycles = (long)cycles[i];
        e->periodic = (int)periodic[i];
        e->fixed = (int)fixed[i];
        for (int d = 0; d < 3; d++) e->dims[d] = (int)dims[3 * i + (size_t)d];
        e->ndims = e->dims[2] ? 3 : e->dims[1] ? 2 : e->dims[0] ? 1 : 0;
        e->bench_iters = (long)iters;
        e->bench_warmup = (long)warmup;
    }
}

/* Real fields and the phase-1 sizes of every EA. */
static void read_ea_reals_and_bench(const hv_opt *opts, size_t nopts, ace_config *c) {
    const int n = c->neas;
    double load[MAX_EAS], msgs[MAX_EAS], alpha[MAX_EAS], beta[MAX_EAS];
    long long count[MAX_EAS], sizes[MAX_EAS * MAX_BENCH];
    read_reals(opts, nopts, "ea-load", n, 1.0, 100.0, load);
    read_reals(opts, nopts, "ea-msgs", n, 1e-9, 1e9, msgs);
    read_reals(opts, nopts, "ea-alpha-ns", n, 0.0, 1e12, alpha);
    read_reals(opts, nopts, "ea-beta-ns", n, 0.0, 1e12, beta);
    read_ints(opts, nopts, "ea-bench-count", (size_t)n, 0, MAX_BENCH, count);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)count[i];
    if (total) read_ints(opts, nopts, "ea-bench-sizes", total, 0, 0x7fffffffLL, sizes);
    else if (hv_args_get(opts, nopts, "ea-bench-sizes")) HV_DIE("hv_ace: --ea-bench-sizes without phase-1 EAs");
    for (int i = 0, k = 0; i < n; i++) {
        ea_spec *e = &c->eas[i];
        e->load = load[i];
        e->msgs = msgs[i];
        e->alpha_ns = alpha[i];
        e->beta_ns = beta[i];
        e->nbench = (int)count[i];
        for (int b = 0; b < e->nbench; b++) e->bench[b] = sizes[k++];
    }
}

#define BAD(...) HV_DIE("hv_ace: " __VA_ARGS__)

/* What needs the EA as a whole: phase 1 or fixed, sides, even counts. */
static void check_ea(const ea_spec *e) {
    if (e->fixed ? e->nbench != 0 : e->nbench < 2)
        BAD("EA '%s': phase 1 needs 2 to %d bench sizes, a fixed EA none (got %d)", e->name, MAX_BENCH, e->nbench);
    int want_dims = e->pattern == P_CART2D ? 2 : e->pattern == P_CART3D ? 3 : 0;
    for (int d = 0; d < 3; d++)
        if ((d < want_dims) != (e->dims[d] > 0))
            BAD("EA '%s': pattern %s needs %d sides and zeros after them in --ea-dims", e->name,
                pattern_names[e->pattern], want_dims);
    if ((e->pattern == P_PAIRS || (e->pattern == P_RING && !e->nonblocking)) && e->nranks % 2)
        BAD("EA '%s': %s %s needs an even number of ranks, got %ld", e->name, pattern_names[e->pattern],
            e->nonblocking ? "nonblocking" : "blocking", e->nranks);
}

/* Reads and checks every EA against the job of `world` ranks. */
static void read_eas(const hv_opt *opts, size_t nopts, int world, ace_config *c) {
    read_names(opts, nopts, c);
    read_ea_ints(opts, nopts, c);
    read_ea_reals_and_bench(opts, nopts, c);
    for (int i = 0; i < c->neas; i++) {
        const ea_spec *a = &c->eas[i];
        check_ea(a);
        if (a->first + a->nranks > world)
            BAD("EA '%s' needs ranks %ld..%ld but the job has %d", a->name, a->first, a->first + a->nranks - 1, world);
        for (int j = 0; j < i; j++) {
            const ea_spec *b = &c->eas[j];
            if (a->first < b->first + b->nranks && b->first < a->first + a->nranks)
                BAD("EAs '%s' and '%s' share ranks", b->name, a->name);
        }
    }
    c->label = hv_args_get(opts, nopts, "label");
    if (c->label && (strchr(c->label, '\n') || strlen(c->label) > 512)) BAD("--label is too long or has a newline");
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

/* Point-to-point patterns: pairs, ring, cart2d, cart3d. */
static void exchange_p2p(ea_state *e, int n) {
    const ea_spec *s = e->s;
    int k = 0;
    if (s->pattern == P_PAIRS || s->pattern == P_RING) {
        const int pairs = s->pattern == P_PAIRS, tag = pairs ? 1 : 2;
        const int to = pairs ? e->rank ^ 1 : (e->rank + 1) % e->size;
        const int from = pairs ? e->rank ^ 1 : (e->rank + e->size - 1) % e->size;
        if (s->nonblocking) {
            HV_MPI_CHECK(MPI_Irecv(e->rbuf, n, MPI_BYTE, from, tag, e->comm, &e->req[0]));
            HV_MPI_CHECK(MPI_Isend(e->sbuf, n, MPI_BYTE, to, tag, e->comm, &e->req[1]));
            HV_MPI_CHECK(MPI_Waitall(2, e->req, MPI_STATUSES_IGNORE));
        } else {
            shift_blocking(e, to, from, e->rank & 1, n, e->rbuf, tag);
        }
        return;
    }
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
}

/* Collective patterns: alltoall, allreduce, bcast (blocking, or the I-version and a wait). */
static void exchange_collective(ea_state *e, int n) {
    const int nb = e->s->nonblocking;
    switch (e->s->pattern) {
    case P_ALLTOALL:
        if (nb) HV_MPI_CHECK(MPI_Ialltoall(e->sbuf, n, MPI_BYTE, e->rbuf, n, MPI_BYTE, e->comm, &e->req[0]));
        else HV_MPI_CHECK(MPI_Alltoall(e->sbuf, n, MPI_BYTE, e->rbuf, n, MPI_BYTE, e->comm));
        break;
    case P_ALLREDUCE:
        if (nb) HV_MPI_CHECK(MPI_Iallreduce(e->sbuf, e->rbuf, n, MPI_UNSIGNED_CHAR, MPI_BOR, e->comm, &e->req[0]));
        else HV_MPI_CHECK(MPI_Allreduce(e->sbuf, e->rbuf, n, MPI_UNSIGNED_CHAR, MPI_BOR, e->comm));
        break;
    default: { /* P_BCAST */
        unsigned char *b = e->rank == 0 ? e->sbuf : e->rbuf;
        if (nb) HV_MPI_CHECK(MPI_Ibcast(b, n, MPI_BYTE, 0, e->comm, &e->req[0]));
        else HV_MPI_CHECK(MPI_Bcast(b, n, MPI_BYTE, 0, e->comm));
        break;
    }
    }
    if (nb) HV_MPI_CHECK(MPI_Wait(&e->req[0], MPI_STATUS_IGNORE));
}

static void communicate(ea_state *e, int n) {
    if (e->s->pattern <= P_CART3D) exchange_p2p(e, n);
    else exchange_collective(e, n);
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
    for (int i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
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

static void put_row(double *r, double phase, double ea, double rank, double wrank, double iter, double size, double req,
                    double comp, double comm, double barr) {
    r[0] = phase;
    r[1] = ea;
    r[2] = rank;
    r[3] = wrank;
    r[4] = iter;
    r[5] = size;
    r[6] = req;
    r[7] = comp;
    r[8] = comm;
    r[9] = barr;
}

/* ---- the run ---------------------------------------------------------------------------------- */

typedef struct {        /* preallocated sample storage of this rank */
    size_t nb_samples, ncycles;
    uint64_t *bt;       /* phase-1 exchange times, bench size-major */
    uint64_t *tc, *tm, *tb; /* phase-2 compute, communication and barrier times per cycle */
    double *rows;
} ace_samples;

typedef struct {        /* the cost model an EA runs with */
    double alpha, beta, t_comm, t_comp;
    int fallback;       /* 1 when the fitted line was replaced by the measured time at the EA's size */
} ace_model;

static void samples_alloc(ace_samples *sm, const ea_spec *s) {
    sm->nb_samples = s && !s->fixed ? (size_t)s->nbench * (size_t)s->bench_iters : 0;
    sm->ncycles = s ? (size_t)s->cycles : 0;
    const size_t nc = sm->ncycles ? sm->ncycles : 1;
    sm->bt = hv_malloc_touched((sm->nb_samples ? sm->nb_samples : 1) * sizeof *sm->bt);
    sm->tc = hv_malloc_touched(nc * sizeof *sm->tc);
    sm->tm = hv_malloc_touched(nc * sizeof *sm->tm);
    sm->tb = hv_malloc_touched(nc * sizeof *sm->tb);
    sm->rows = hv_malloc_touched((sm->nb_samples + sm->ncycles + 1) * NCOLS * sizeof *sm->rows);
}

static void samples_free(ace_samples *sm) {
    free(sm->bt);
    free(sm->tc);
    free(sm->tm);
    free(sm->tb);
    free(sm->rows);
}

/* Phase 1's timed exchanges: per bench size, warm-up then bench_iters timed ones after a barrier. */
static void bench_exchanges(ea_state *e, const hv_timer *tm, uint64_t *bt) {
    const ea_spec *s = e->s;
    for (int b = 0; b < s->nbench; b++) {
        const int n = (int)s->bench[b];
        for (long w = 0; w < s->bench_warmup; w++) {
            HV_MPI_CHECK(MPI_Barrier(e->comm));
            communicate(e, n);
        }
        uint64_t *out = bt + (size_t)b * (size_t)s->bench_iters;
        for (long i = 0; i < s->bench_iters; i++) {
            HV_MPI_CHECK(MPI_Barrier(e->comm));
            uint64_t t0 = hv_ticks(tm);
            communicate(e, n);
            out[i] = hv_ticks(tm) - t0;
        }
    }
}

/* Phase 1: time the exchanges, fit per process, average the fits over the EA. */
static void phase1(ea_state *e, const hv_timer *tm, uint64_t *bt, ace_model *m) {
    const ea_spec *s = e->s;
    double xs[MAX_BENCH], ys[MAX_BENCH], ab[3];
    bench_exchanges(e, tm, bt);
    for (int b = 0; b < s->nbench; b++) {
        double sum = 0;
        const uint64_t *at = bt + (size_t)b * (size_t)s->bench_iters;
        for (long i = 0; i < s->bench_iters; i++) sum += hv_ticks_to_ns(tm, at[i]);
        xs[b] = (double)s->bench[b];
        ys[b] = sum / (double)s->bench_iters / s->msgs;
    }
    if (fit_line(xs, ys, s->nbench, &ab[0], &ab[1]) != 0)
        HV_DIE("EA '%s': bench_sizes need two different sizes", s->name);
    ab[2] = ys[s->nbench - 1]; /* mean time per message at the largest benchmark size */
    HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, ab, 3, MPI_DOUBLE, MPI_SUM, e->comm));
    m->alpha = ab[0] / e->size;
    m->beta = ab[1] / e->size;
    if (m->alpha + m->beta * (double)s->size <= 0 && s->bench[s->nbench - 1] == s->size) {
        /* a noisy benchmark can fit a line that predicts a negative time at the EA's size:
         * use the measured time per message at that size instead (alpha = it, beta = 0) */
        m->alpha = ab[2] / e->size;
        m->beta = 0;
        m->fallback = 1;
    }
}

/* Alpha and beta (phase 1 or given), then T_comm and T_comp (paper eq. 6). */
static void make_model(ea_state *e, const hv_timer *tm, uint64_t *bt, ace_model *m) {
    const ea_spec *s = e->s;
    if (!s->fixed) {
        phase1(e, tm, bt, m);
    } else {
        m->alpha = s->alpha_ns;
        m->beta = s->beta_ns;
    }
    m->t_comm = s->msgs * (m->alpha + m->beta * (double)s->size);
    if (m->t_comm < 0) m->t_comm = 0; /* a fit with a negative intercept at a tiny size */
    m->t_comp = m->t_comm * 100.0 / s->load - m->t_comm;
    memset(e->rbuf, 0, e->rbuf_bytes);
}

/* Phase 2: per cycle spin T_comp, communicate, barrier; returns the wall time in ticks. */
static uint64_t phase2(ea_state *e, const hv_timer *tm, const ace_model *m, ace_samples *sm) {
    const int n = (int)e->s->size;
    const uint64_t run0 = hv_ticks(tm);
    for (size_t c = 0; c < sm->ncycles; c++) {
        uint64_t t0 = hv_ticks(tm);
        hv_spin_ns(tm, m->t_comp);
        uint64_t t1 = hv_ticks(tm);
        communicate(e, n);
        uint64_t t2 = hv_ticks(tm);
        HV_MPI_CHECK(MPI_Barrier(e->comm));
        uint64_t t3 = hv_ticks(tm);
        sm->tc[c] = t1 - t0;
        sm->tm[c] = t2 - t1;
        sm->tb[c] = t3 - t2;
    }
    return hv_ticks(tm) - run0;
}

enum { K = 9 }; /* per-EA values summed over the world: alpha beta t_comm t_comp run_max run_min check 1 fallback */

/* This rank's rows (phase-1 samples, cycles) and, on the EA's rank 0, its values in vals[K * index]. */
static size_t ea_rows(ea_state *e, int world_rank, const hv_timer *tm, const ace_model *m, const ace_samples *sm,
                      double run_ns, double *vals) {
    const ea_spec *s = e->s;
    const double nan = NAN;
    size_t nrows = 0;
    for (int b = 0; b < s->nbench && !s->fixed; b++)
        for (long i = 0; i < s->bench_iters; i++)
            put_row(sm->rows + NCOLS * nrows++, 0, e->index, e->rank, world_rank, (double)i, (double)s->bench[b], nan,
                    nan, hv_ticks_to_ns(tm, sm->bt[(size_t)b * (size_t)s->bench_iters + (size_t)i]), nan);
    for (size_t c = 0; c < sm->ncycles; c++)
        put_row(sm->rows + NCOLS * nrows++, 1, e->index, e->rank, world_rank, (double)c, (double)s->size, m->t_comp,
                hv_ticks_to_ns(tm, sm->tc[c]), hv_ticks_to_ns(tm, sm->tm[c]), hv_ticks_to_ns(tm, sm->tb[c]));
    double mx = run_ns, mn = run_ns;
    int ok = check_received(e);
    HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_DOUBLE, MPI_MAX, e->comm));
    HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_DOUBLE, MPI_MIN, e->comm));
    HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, e->comm));
    if (e->rank == 0) {
        double *v = vals + K * e->index;
        v[0] = m->alpha;
        v[1] = m->beta;
        v[2] = m->t_comm;
        v[3] = m->t_comp;
        v[4] = mx;
        v[5] = mn;
        v[6] = ok;
        v[7] = 1;
        v[8] = m->fallback;
    }
    return nrows;
}

/* The #@point line: the label, then neas and the eaK_* values of every EA. */
static void describe_point(const ace_config *c, const double *vals, char *desc, size_t len) {
    const char *label = c->label;
    int pos = snprintf(desc, len, "%s%sneas=%d", label ? label : "", label && *label ? " " : "", c->neas);
    for (int i = 0; i < c->neas && pos > 0 && (size_t)pos < len; i++) {
        const double *v = vals + K * i;
        pos += snprintf(desc + pos, len - (size_t)pos,
                        " ea%d_name=%s ea%d_alpha_ns=%.9g ea%d_beta_ns_per_byte=%.9g ea%d_t_comm_ns=%.6f"
                        " ea%d_t_comp_ns=%.6f ea%d_run_ns=%.1f ea%d_run_min_ns=%.1f ea%d_check=%d ea%d_fixed=%d"
                        " ea%d_fit_fallback=%d",
                        i, c->eas[i].name, i, v[0], i, v[1], i, v[2], i, v[3], i, v[4], i, v[5], i, (int)v[6], i,
                        c->eas[i].fixed, i, (int)v[8]);
    }
    if (pos < 0 || (size_t)pos >= len) HV_DIE("hv_ace: point description too long");
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_COMMON_OPTS,
        HV_OPT_RAW("ea-name", 0, "per EA: name"),
        HV_OPT_RAW("ea-first", 0, "per EA: first world rank"),
        HV_OPT_RAW("ea-ranks", 0, "per EA: ranks"),
        HV_OPT_RAW("ea-pattern", 0, "per EA: pattern code"),
        HV_OPT_RAW("ea-mode", 0, "per EA: 0 blocking, 1 nonblocking"),
        HV_OPT_RAW("ea-size", 0, "per EA: bytes"),
        HV_OPT_RAW("ea-cycles", 0, "per EA: cycles"),
        HV_OPT_RAW("ea-load", 0, "per EA: load in percent"),
        HV_OPT_RAW("ea-msgs", 0, "per EA: model messages per cycle"),
        HV_OPT_RAW("ea-dims", 0, "per EA: three sides"),
        HV_OPT_RAW("ea-periodic", 0, "per EA: 0|1"),
        HV_OPT_RAW("ea-fixed", 0, "per EA: 1 alpha and beta given"),
        HV_OPT_RAW("ea-alpha-ns", 0, "per EA: alpha in ns"),
        HV_OPT_RAW("ea-beta-ns", 0, "per EA: beta in ns per byte"),
        HV_OPT_RAW("ea-bench-count", 0, "per EA: phase-1 sizes"),
        HV_OPT_RAW("ea-bench-sizes", 0, "all phase-1 sizes"),
        HV_OPT_RAW("bench-iters", 0, "timed phase-1 exchanges per size"),
        HV_OPT_RAW("bench-warmup", 0, "untimed phase-1 exchanges per size"),
        HV_OPT_RAW("label", 0, "key=value pairs copied into the point line"),
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    hv_ctx ctx;
    hv_ctx_init(&ctx, &argc, &argv, "hv_ace", opts, nopts);
    static ace_config cfg;
    read_eas(opts, nopts, ctx.size, &cfg);

    int mine = -1;
    for (int i = 0; i < cfg.neas; i++)
        if (ctx.rank >= cfg.eas[i].first && ctx.rank < cfg.eas[i].first + cfg.eas[i].nranks) mine = i;
    MPI_Comm sub;
    HV_MPI_CHECK(MPI_Comm_split(ctx.comm, mine < 0 ? MPI_UNDEFINED : mine, ctx.rank, &sub));
    ea_state st;
    ea_state *e = NULL;
    if (mine >= 0) {
        setup_ea(&st, &cfg.eas[mine], mine, sub);
        e = &st;
    }
    ace_samples sm;
    samples_alloc(&sm, e ? e->s : NULL);
    const char *cols[NCOLS] = {"phase",         "ea",        "rank",      "world_rank", "iter", "size_bytes",
                               "t_comp_req_ns", "t_comp_ns", "t_comm_ns", "t_barr_ns"};
    if (ctx.rank == 0) hv_out_columns(&ctx.out, NCOLS, cols);
    const hv_timer *tm = &ctx.timer;

    ace_model m = {0};
    if (e) make_model(e, tm, sm.bt, &m); /* phase 1: all EAs benchmark in parallel */
    HV_MPI_CHECK(MPI_Barrier(ctx.comm));
    const uint64_t run_ticks = e ? phase2(e, tm, &m, &sm) : 0;
    HV_MPI_CHECK(MPI_Barrier(ctx.comm));

    /* outside the timed part: rows, per-EA values, gather */
    double vals[MAX_EAS * K];
    memset(vals, 0, sizeof vals);
    const size_t nrows = e ? ea_rows(e, ctx.rank, tm, &m, &sm, hv_ticks_to_ns(tm, run_ticks), vals) : 0;
    HV_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, vals, MAX_EAS * K, MPI_DOUBLE, MPI_SUM, ctx.comm));
    char desc[8192];
    describe_point(&cfg, vals, desc, sizeof desc);
    hv_gather_point(&ctx, desc, sm.rows, nrows);

    if (e) {
        free(e->sbuf);
        free(e->rbuf);
        HV_MPI_CHECK(MPI_Comm_free(&e->comm));
    }
    samples_free(&sm);
    hv_ctx_finish(&ctx);
    return 0;
}
