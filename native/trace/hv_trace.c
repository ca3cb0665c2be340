/* libhv_trace: a PMPI interposition library that records, per rank, every MPI
 * call that moves data or synchronizes (LD_PRELOAD it, or link it before the
 * MPI library).
 *
 * Hot path: read the clock, call PMPI, read the clock, fill one 88-byte record
 * in a preallocated chunk (chunks of HV_CHUNK records, allocated and touched
 * ahead of use, so no allocation happens in a call except once per
 * HV_CHUNK records). Nothing is written before MPI_Finalize (or MPI_Abort /
 * exit, best effort).
 *
 * Polls: a call that finds nothing (MPI_Iprobe without a message, MPI_Test*
 * without a completed request) writes no record; its time is added to the next
 * record's poll time (and counted), so a program that spins on MPI_Iprobe or
 * MPI_Test shows that time as time inside MPI, not as computation. A successful
 * MPI_Iprobe (or MPI_Probe) is a record of its own (OP_PROBE).
 *
 * Clock: the cheaper of rdtsc (only where the CPU reports an invariant TSC)
 * and vDSO clock_gettime(CLOCK_MONOTONIC_RAW), both costs measured at
 * MPI_Init (minimum of 7 batches) and written in the header. TSC ticks are
 * converted to CLOCK_MONOTONIC_RAW nanoseconds at the end with two anchor
 * pairs (MPI_Init exit, MPI_Finalize entry), so the rate is exact over the
 * run. HV_TRACE_CLOCK=tsc|mono forces a clock.
 *
 * CPU time (HV_TRACE_CPU=1 or thread, or user; off by default: a CPU clock
 * read is a system call, 0.3-1 us here): the calling thread's
 * CLOCK_THREAD_CPUTIME_ID (or its user time, getrusage(RUSAGE_THREAD)) at
 * each call's entry and exit, and the CPU time inside the polls, so that the
 * CPU time of the computation between two calls is known as well as its wall
 * time (docs/replay.md, "Compute as CPU time").
 *
 * Output: $HV_TRACE_DIR/rank.<world rank>.hvt (default: the current
 * directory): a text header of key=value lines ended by "end\n", the records
 * (little-endian, 88 bytes: int64 t_start_ns, t_end_ns, bytes, req, cpu_start_ns,
 * cpu_end_ns, poll_ns, poll_cpu_ns; int32 op, peer, tag, comm, npoll, rdelay_us: HV_TRACE_RUNDELAY), then
 * one line per communicator "comm <id> <n> <world ranks...>". hpcvar trace
 * merges the files into the native Parquet trace. Format history: HVTRACE 1,
 * 48-byte records (no CPU time, no polls); HVTRACE 2, this one. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RUSAGE_THREAD */
#endif
#include <mpi.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hv_ops.h"
#include "hv_timer.h"
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct {
    int64_t t0, t1, bytes, req;
    int64_t cpu0, cpu1;     /* thread CPU clock at entry and exit (ns); -1 without HV_TRACE_CPU */
    int64_t poll, poll_cpu; /* since the previous record: time in failed polls (ticks until written, then ns), and
                               the CPU time in them (ns; 0 without HV_TRACE_CPU) */
    int32_t op, peer, tag, comm;
    int32_t npoll; /* failed polls since the previous record */
    int32_t rdelay_us; /* HV_TRACE_RUNDELAY=1: the thread's run-queue delay inside MPI (calls and polls) since
                          MPI_Init, up to this call's exit (us; a call of several records counted once) */
} hv_rec;

#define HV_CHUNK (1 << 16) /* records per chunk: 5.5 MiB */

static hv_rec **chunks;
static size_t nchunks, chunks_cap, nrec;
static hv_rec *cur;       /* current chunk */
static size_t cur_left;   /* free records in it */
enum { CPU_NONE = 0, CPU_THREAD = 1, CPU_USER = 2 };
static int tsc_mode, cpu_mode, rd_mode, rd_fd = -1, world_rank = -1, world_size, written, active;
static int64_t rd_init; /* the run-queue delay at MPI_Init's exit */
static uint64_t anchor_tick0, anchor_ns0, anchor_tick1, anchor_ns1;
static double cost_tsc_ns, cost_mono_ns, cost_cpu_ns;
static uint64_t poll_ticks; /* failed polls since the last record: their time, CPU time and count */
static int64_t poll_cpu;
static int32_t npoll;
/* the spin threshold (HV_TRACE_SPIN_NS, default 10 us) in clock ticks: a gap shorter than this between a failed
 * poll and the next call is the loop that polls, counted as polling, not computation */
static uint64_t spin_ticks;

static inline uint64_t now(void) {
#if HV_HAVE_TSC
    if (tsc_mode) return __rdtsc();
#endif
    return hv_mono_ns();
}

/* the CPU clock of HV_TRACE_CPU: 1 (or thread) the thread's CPU clock, user its user-mode time. A kernel that does
 * not account interrupt time apart (no CONFIG_IRQ_TIME_ACCOUNTING) adds the softirq work done on a CPU (the
 * network stack's receive and transmit) to the thread it interrupts, computing or not: the user time leaves it
 * out, at the granularity the kernel splits user from system time (its tick where accounting is tick-based) */
static inline int64_t cpu_now(void) {
    if (cpu_mode == CPU_USER) {
        struct rusage ru;
        getrusage(RUSAGE_THREAD, &ru);
        return (int64_t)ru.ru_utime.tv_sec * 1000000000 + (int64_t)ru.ru_utime.tv_usec * 1000;
    }
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* HV_TRACE_RUNDELAY=1: the time the thread has waited for a CPU, runnable (ns: the second field of
 * /proc/thread-self/schedstat, the scheduler's run_delay), read at the points where the CPU clock is, so that the
 * waits inside MPI (a rank whose message has arrived, waiting for a core taken by others) are told from those while
 * it computes. A diagnostic (docs/replay.md): a pread of a /proc file, 0.33 us here. -1 when off or unreadable. */
static inline int64_t rd_now(void) {
    if (!rd_mode) return -1;
    char buf[96];
    ssize_t n = pread(rd_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = strchr(buf, ' ');
    return p ? strtoll(p + 1, NULL, 10) : -1;
}

/* a call's entry or exit: the clock, and the thread's CPU clock with HV_TRACE_CPU (the CPU clock is read inside
 * the wall-clock reads, so the CPU time between two calls lies within their wall-clock gap) */
typedef struct {
    uint64_t t;
    int64_t c;
    int run; /* the entry of a poll that continues a run of polls (its CPU clock was not read) */
    int64_t d; /* HV_TRACE_RUNDELAY: the run-queue delay (rd_now), read with the CPU clock */
} hv_st;

/* Runs of polls: failed polls separated by gaps shorter than the spin threshold. A run's time, gaps included, is
 * polling (MPI time); with HV_TRACE_CPU its CPU time is the CPU clock from the run's first entry to its last exit
 * (read at each poll's exit and at a run's first entry only: one system call per poll, not two). */
static hv_st last_poll; /* the exit of the last poll of the current run, or its entry (polled()); t = 0: no run */
static int64_t run_c0;  /* HV_TRACE_CPU: the CPU clock at the entry of the run's first poll */
static int64_t run_d0, poll_rd; /* HV_TRACE_RUNDELAY: the same for the run-queue delay, and the polls' since the
                                    last record */
static int64_t rd_mpi;          /* HV_TRACE_RUNDELAY: the run-queue delay inside MPI so far (ns) */
static uint64_t rd_exit;        /* the exit (clock) of the call last added to rd_mpi */

static inline hv_st enter(void) {
    hv_st s;
    s.t = now();
    s.c = cpu_mode ? cpu_now() : -1;
    s.d = rd_now();
    s.run = 0;
    return s;
}

static inline hv_st leave(void) {
    hv_st s;
    s.d = rd_now();
    s.c = cpu_mode ? cpu_now() : -1;
    s.t = now();
    s.run = 0;
    return s;
}

static void die(const char *what) {
    fprintf(stderr, "hv_trace: rank %d: %s\n", world_rank, what);
    PMPI_Abort(MPI_COMM_WORLD, 70);
}

static void new_chunk(void) {
    if (nchunks == chunks_cap) {
        chunks_cap = chunks_cap ? 2 * chunks_cap : 64;
        hv_rec **c = realloc(chunks, chunks_cap * sizeof *c);
        if (!c) die("out of memory for the trace chunk table");
        chunks = c;
    }
    hv_rec *c = malloc(HV_CHUNK * sizeof *c);
    if (!c) die("out of memory for a trace chunk (5.5 MiB)");
    memset(c, 0, HV_CHUNK * sizeof *c); /* touch now, not inside a timed call */
    chunks[nchunks++] = c;
    cur = c;
    cur_left = HV_CHUNK;
}

static inline hv_rec *rec_at(size_t i) { return &chunks[i / HV_CHUNK][i % HV_CHUNK]; }

/* The next record (its index is nrec - 1 after the call). */
static inline hv_rec *next_rec(void) {
    if (cur_left == 0) new_chunk();
    cur_left--;
    nrec++;
    return &cur[HV_CHUNK - cur_left - 1];
}

static inline int in_spin(uint64_t t) { return last_poll.t && t >= last_poll.t && t - last_poll.t < spin_ticks; }

/* the run of polls ends; its CPU time, from its first entry to the CPU clock c, is polling */
static inline void run_end(hv_st e) {
    if (cpu_mode) poll_cpu += e.c - run_c0;
    if (rd_mode) poll_rd += e.d - run_d0;
    last_poll.t = 0;
}

/* a recorded call entered at a (its CPU clock read): a run of polls that ended within the spin threshold extends to
 * this entry (the loop around the polls); an older one ended at its last poll */
static inline void before_record(hv_st a) {
    if (!last_poll.t) return;
    if (in_spin(a.t)) {
        poll_ticks += a.t - last_poll.t;
        run_end(a);
    } else {
        run_end(last_poll);
    }
}

static inline void put(int op, hv_st a, hv_st b, int peer, int64_t bytes, int tag, int comm, int64_t req) {
    int64_t c0 = a.c, d0 = a.d;
    if (a.run) { /* a poll that continued a run and found something: the run ends at its exit */
        c0 = b.c, d0 = b.d;
        if (last_poll.t) run_end(b);
    } else {
        before_record(a);
    }
    hv_rec *r = next_rec();
    r->t0 = (int64_t)a.t;
    r->t1 = (int64_t)b.t;
    r->bytes = bytes;
    r->req = req;
    r->cpu0 = c0;
    r->cpu1 = b.c;
    r->poll = (int64_t)poll_ticks;
    r->poll_cpu = poll_cpu;
    r->op = op;
    r->peer = peer;
    r->tag = tag;
    r->comm = comm;
    r->npoll = npoll;
    if (rd_mode && b.t != rd_exit) { /* once per call: MPI_Waitall and MPI_Sendrecv put several records */
        rd_mpi += b.d - d0;
        rd_exit = b.t;
    }
    rd_mpi += poll_rd;
    r->rdelay_us = rd_mpi / 1000 < INT32_MAX ? (int32_t)(rd_mpi / 1000) : INT32_MAX; /* saturates at 35 min */
    poll_ticks = 0, poll_cpu = 0, npoll = 0, poll_rd = 0;
}

/* the entry of a call that may find nothing (MPI_Iprobe, MPI_Test*): the clock, and the CPU clock only when it
 * starts a run of polls (c = -1 when it continues one) */
static inline hv_st poll_enter(void) {
    hv_st s;
    s.t = now();
    s.c = -1;
    s.d = -1;
    s.run = in_spin(s.t);
    if (s.run) { /* the gap since the last poll is the loop around the polls */
        poll_ticks += s.t - last_poll.t;
    } else {
        if (last_poll.t) run_end(last_poll);
        if (cpu_mode) s.c = run_c0 = cpu_now();
        if (rd_mode) s.d = run_d0 = rd_now();
    }
    return s;
}

/* it found nothing (or nothing the tracer follows): no record, its time goes to the next one. A call that found
 * something is recorded with put(), which ends the run (the CPU time of a call that continued a run is the run's).
 * b: its exit, or NULL when it was not read: then, without HV_TRACE_CPU, the run goes on from the poll's entry (its
 * duration is counted with the gap after it when the next call continues the run; the last poll of a run, a few tens
 * of ns, goes to the computation after it), so that a failed poll costs one clock read, not two (hpcc's
 * MPIRandomAccess fails 6 million polls a second: docs/replay.md); with HV_TRACE_CPU the exit is read, for the CPU
 * clock at the run's last exit. */
static inline void polled(hv_st a, const hv_st *b) {
    npoll++;
    if (!b && !cpu_mode && !rd_mode) {
        last_poll = a;
        return;
    }
    hv_st e = b ? *b : leave();
    poll_ticks += e.t - a.t;
    last_poll = e;
}

/* ---- communicators: a small table, handle -> id and rank translation ---- */
typedef struct {
    MPI_Comm comm;
    int id, size, *world; /* world[i]: world rank of rank i */
    int live;
} hv_comm;
static hv_comm *comms;
static int ncomms, comms_cap;
static int last_comm = -1;

static int comm_index(MPI_Comm c) {
    if (last_comm >= 0 && comms[last_comm].live && comms[last_comm].comm == c) return last_comm;
    for (int i = 0; i < ncomms; i++)
        if (comms[i].live && comms[i].comm == c) return last_comm = i;
    if (ncomms == comms_cap) {
        comms_cap = comms_cap ? 2 * comms_cap : 16;
        hv_comm *n = realloc(comms, (size_t)comms_cap * sizeof *n);
        if (!n) die("out of memory for the communicator table");
        comms = n;
    }
    hv_comm *e = &comms[ncomms];
    e->comm = c;
    e->id = ncomms;
    e->live = 1;
    int inter = 0;
    PMPI_Comm_test_inter(c, &inter);
    if (inter) PMPI_Comm_remote_size(c, &e->size);
    else PMPI_Comm_size(c, &e->size);
    e->world = malloc((size_t)e->size * sizeof(int));
    int *idx = malloc((size_t)e->size * sizeof(int));
    if (!e->world || !idx) die("out of memory for a communicator's rank table");
    MPI_Group g, wg;
    if (inter) PMPI_Comm_remote_group(c, &g);
    else PMPI_Comm_group(c, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    for (int i = 0; i < e->size; i++) idx[i] = i;
    PMPI_Group_translate_ranks(g, e->size, idx, wg, e->world);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    free(idx);
    return last_comm = ncomms++;
}

static inline int world_of(int ci, int r) {
    if (r < 0) return r; /* MPI_ANY_SOURCE, MPI_PROC_NULL, MPI_ROOT... kept as given */
    return r < comms[ci].size ? comms[ci].world[r] : -1;
}

static inline int64_t tbytes(int count, MPI_Datatype t) {
    int s = 0;
    if (t != MPI_DATATYPE_NULL) PMPI_Type_size(t, &s);
    return (int64_t)count * s;
}

/* ---- pending requests: open addressing, request handle -> record index ---- */
#define HV_REQ_BITS 14
#define HV_REQ_SLOTS (1u << HV_REQ_BITS)
typedef struct {
    uint64_t key;  /* request handle bits; 0 = empty */
    int64_t idx;   /* record index of the Isend/Irecv */
    int ci;        /* communicator index (for Irecv peer translation) */
} hv_pend;
static hv_pend pend[HV_REQ_SLOTS];

static inline uint64_t req_key(MPI_Request r) {
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}
static inline uint32_t req_hash(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> (64 - HV_REQ_BITS));
}
static void pend_put(MPI_Request r, int64_t idx, int ci) {
    uint64_t k = req_key(r);
    if (!k) return;
    for (uint32_t h = req_hash(k), n = 0; n < HV_REQ_SLOTS; n++, h = (h + 1) & (HV_REQ_SLOTS - 1))
        if (pend[h].key == 0 || pend[h].key == k) {
            pend[h].key = k;
            pend[h].idx = idx;
            pend[h].ci = ci;
            return;
        }
    die("more than 16384 outstanding nonblocking requests");
}
/* Remove and return the entry of r (idx -1 when unknown). */
static hv_pend pend_take(uint64_t k) {
    hv_pend out = {0, -1, 0};
    if (!k) return out;
    uint32_t h = req_hash(k);
    for (uint32_t n = 0; n < HV_REQ_SLOTS && pend[h].key; n++, h = (h + 1) & (HV_REQ_SLOTS - 1))
        if (pend[h].key == k) {
            out = pend[h];
            /* backward-shift deletion keeps the probe chains intact */
            uint32_t i = h, j = h;
            pend[i].key = 0;
            for (;;) {
                j = (j + 1) & (HV_REQ_SLOTS - 1);
                if (!pend[j].key) return out;
                uint32_t home = req_hash(pend[j].key);
                int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
                if (stays) continue;
                pend[i] = pend[j];
                pend[j].key = 0;
                i = j;
            }
        }
    return out;
}

/* A request completed: record one wait row; patch an Irecv's peer/bytes/tag. */
static inline int completed(uint64_t key, const MPI_Status *st, hv_st a, hv_st b) {
    hv_pend p = pend_take(key);
    if (p.idx < 0) return 0; /* not ours (persistent, generalized, file I/O) */
    hv_rec *r = rec_at((size_t)p.idx);
    if (r->op == OP_IRECV && st && st != MPI_STATUS_IGNORE && st->MPI_SOURCE >= 0) {
        int cnt = 0;
        PMPI_Get_count(st, MPI_BYTE, &cnt);
        r->peer = world_of(p.ci, st->MPI_SOURCE);
        r->tag = st->MPI_TAG;
        if (cnt != MPI_UNDEFINED) r->bytes = cnt;
    }
    put(OP_WAIT, a, b, r->peer, r->bytes, r->tag, r->comm, p.idx);
    return 1;
}

/* ---- output ---- */
static void write_trace(const char *why) {
    if (written || world_rank < 0) return;
    written = 1;
    if (!anchor_tick1) {
        anchor_tick1 = now();
        anchor_ns1 = hv_mono_ns();
    }
    double tpn = 1.0;
    if (tsc_mode && anchor_ns1 > anchor_ns0 && anchor_tick1 > anchor_tick0)
        tpn = (double)(anchor_tick1 - anchor_tick0) / (double)(anchor_ns1 - anchor_ns0);
    const char *dir = getenv("HV_TRACE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/rank.%d.hvt", dir && *dir ? dir : ".", world_rank);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "hv_trace: rank %d: cannot write %s\n", world_rank, path);
        return;
    }
    fprintf(f,
            "HVTRACE 2\nrank=%d\nsize=%d\nclock=%s\nticks_per_ns=%.9f\nclock_cost_tsc_ns=%.2f\n"
            "clock_cost_mono_ns=%.2f\ncpu=%s\nclock_cost_cpu_ns=%.2f\nspin_ns=%.0f\nend_reason=%s\nrecords=%zu\n"
            "record_bytes=%zu\nrun_delay_ns=%lld\nend\n",
            world_rank, world_size, tsc_mode ? "tsc" : "mono", tpn, cost_tsc_ns, cost_mono_ns,
            cpu_mode == CPU_USER ? "user"
            : cpu_mode           ? "thread"
                                 : "none",
            cost_cpu_ns, (double)spin_ticks / tpn, why, nrec, sizeof(hv_rec),
            rd_mode ? (long long)(rd_now() - rd_init) : -1LL);
    for (size_t i = 0; i < nrec; i++) {
        hv_rec r = *rec_at(i);
        if (tsc_mode) {
            r.t0 = (int64_t)anchor_ns0 + (int64_t)((double)((int64_t)((uint64_t)r.t0 - anchor_tick0)) / tpn);
            r.t1 = (int64_t)anchor_ns0 + (int64_t)((double)((int64_t)((uint64_t)r.t1 - anchor_tick0)) / tpn);
            r.poll = (int64_t)((double)r.poll / tpn);
        }
        fwrite(&r, sizeof r, 1, f);
    }
    for (int i = 0; i < ncomms; i++) {
        fprintf(f, "comm %d %d", comms[i].id, comms[i].size);
        for (int j = 0; j < comms[i].size; j++) fprintf(f, " %d", comms[i].world[j]);
        fputc('\n', f);
    }
    fclose(f);
}

static void at_exit(void) { write_trace("exit-without-finalize"); }

/* Cost of one read of the thread CPU clock (ns): the minimum over 7 batches of 64 reads. */
static double cpu_clock_cost(void) {
    double best = 1e30;
    volatile int64_t sink = 0;
    for (int b = 0; b < 7; b++) {
        uint64_t a = hv_mono_ns();
        for (int i = 0; i < 64; i++) sink += cpu_now();
        double c = (double)(hv_mono_ns() - a) / 64.0;
        if (c < best) best = c;
    }
    (void)sink;
    return best;
}

/* Cost of one clock read (ns): the minimum over 7 batches of 256 reads. */
static double clock_cost(int tsc) {
    double best = 1e30;
    volatile uint64_t sink = 0;
    for (int b = 0; b < 7; b++) {
        uint64_t a = hv_mono_ns();
        for (int i = 0; i < 256; i++) {
#if HV_HAVE_TSC
            sink += tsc ? __rdtsc() : hv_mono_ns();
#else
            (void)tsc;
            sink += hv_mono_ns();
#endif
        }
        double c = (double)(hv_mono_ns() - a) / 256.0;
        if (c < best) best = c;
    }
    (void)sink;
    return best;
}

/* TSC ticks per ns over about 2 ms: enough for the spin threshold (the trace's times use the exact rate, taken
 * over the whole run at the end) */
static double tick_rate(void) {
#if HV_HAVE_TSC
    uint64_t m0 = hv_mono_ns(), c0 = __rdtsc(), m1;
    do m1 = hv_mono_ns();
    while (m1 - m0 < 2000000);
    return (double)(__rdtsc() - c0) / (double)(m1 - m0);
#else
    return 1.0;
#endif
}

static void after_init(void) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    /* the cheaper exact clock: rdtsc only with an invariant TSC; HV_TRACE_CLOCK=tsc|mono overrides */
    const char *ck = getenv("HV_TRACE_CLOCK");
    int tsc_ok = HV_HAVE_TSC && hv_cpu_has_invariant_tsc() == 1;
    cost_tsc_ns = tsc_ok ? clock_cost(1) : 0.0;
    cost_mono_ns = clock_cost(0);
    if (ck && strcmp(ck, "tsc") == 0) tsc_mode = tsc_ok;
    else if (ck && strcmp(ck, "mono") == 0) tsc_mode = 0;
    else tsc_mode = tsc_ok && cost_tsc_ns <= cost_mono_ns;
    const char *spin = getenv("HV_TRACE_SPIN_NS");
    double spin_ns = spin && *spin ? atof(spin) : 10000.0;
    spin_ticks = (uint64_t)(spin_ns > 0 ? spin_ns * (tsc_mode ? tick_rate() : 1.0) : 0.0);
    const char *cpu = getenv("HV_TRACE_CPU");
    cpu_mode = !cpu || !*cpu || strcmp(cpu, "0") == 0 ? CPU_NONE : strcmp(cpu, "user") == 0 ? CPU_USER : CPU_THREAD;
    cost_cpu_ns = cpu_mode ? cpu_clock_cost() : 0.0;
    const char *rd = getenv("HV_TRACE_RUNDELAY");
    if (rd && strcmp(rd, "1") == 0) {
        rd_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        rd_mode = rd_fd >= 0;
    }
    comm_index(MPI_COMM_WORLD); /* id 0 */
    new_chunk();
    atexit(at_exit);
    anchor_ns0 = hv_mono_ns();
    anchor_tick0 = now();
    active = 1;
    /* the init record marks the start of the traced run (MPI_Init itself is not timed) */
    rd_init = rd_now();
    hv_st s = {anchor_tick0, cpu_mode ? cpu_now() : -1, 0, rd_init};
    put(OP_INIT, s, s, -1, 0, 0, 0, -1);
}

/* ---- wrappers ---- */
int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    after_init();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    after_init();
    return rc;
}

int MPI_Finalize(void) {
    if (active) {
        hv_st s = enter();
        put(OP_FINALIZE, s, s, -1, 0, 0, 0, -1);
        anchor_tick1 = now();
        anchor_ns1 = hv_mono_ns();
        write_trace("finalize");
        active = 0;
    }
    return PMPI_Finalize();
}

int MPI_Abort(MPI_Comm comm, int code) {
    if (active) write_trace("abort");
    return PMPI_Abort(comm, code);
}

int MPI_Comm_free(MPI_Comm *comm) {
    if (active && comm) {
        for (int i = 0; i < ncomms; i++)
            if (comms[i].live && comms[i].comm == *comm) comms[i].live = 0;
        last_comm = -1;
    }
    return PMPI_Comm_free(comm);
}

#define P2P(OPC, CALL, PEER, COUNT, TYPE, TAG, COMM) \
    hv_st a = enter(); \
    int rc = CALL; \
    hv_st b = leave(); \
    if (active) { \
        int ci = comm_index(COMM); \
        put(OPC, a, b, world_of(ci, PEER), tbytes(COUNT, TYPE), TAG, comms[ci].id, -1); \
    } \
    return rc;

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    P2P(OP_SEND, PMPI_Send(buf, count, type, dest, tag, comm), dest, count, type, tag, comm)
}
int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    P2P(OP_SEND, PMPI_Ssend(buf, count, type, dest, tag, comm), dest, count, type, tag, comm)
}
int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    P2P(OP_SEND, PMPI_Rsend(buf, count, type, dest, tag, comm), dest, count, type, tag, comm)
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st) {
    MPI_Status mine;
    MPI_Status *s = st == MPI_STATUS_IGNORE ? &mine : st;
    hv_st a = enter();
    int rc = PMPI_Recv(buf, count, type, src, tag, comm, s);
    hv_st b = leave();
    if (active) {
        int ci = comm_index(comm), cnt = 0;
        PMPI_Get_count(s, MPI_BYTE, &cnt);
        put(OP_RECV, a, b, world_of(ci, s->MPI_SOURCE), cnt == MPI_UNDEFINED ? tbytes(count, type) : cnt, s->MPI_TAG,
            comms[ci].id, -1);
    }
    return rc;
}

static inline int nb(int op, int rc, hv_st a, hv_st b, int peer, int count, MPI_Datatype type, int tag, MPI_Comm comm,
                     MPI_Request *req) {
    if (active) {
        int ci = comm_index(comm);
        put(op, a, b, world_of(ci, peer), tbytes(count, type), tag, comms[ci].id, -1);
        if (rc == MPI_SUCCESS) pend_put(*req, (int64_t)nrec - 1, ci);
    }
    return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    hv_st a = enter();
    int rc = PMPI_Isend(buf, count, type, dest, tag, comm, req);
    return nb(OP_ISEND, rc, a, leave(), dest, count, type, tag, comm, req);
}
int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    hv_st a = enter();
    int rc = PMPI_Issend(buf, count, type, dest, tag, comm, req);
    return nb(OP_ISEND, rc, a, leave(), dest, count, type, tag, comm, req);
}
int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    hv_st a = enter();
    int rc = PMPI_Irsend(buf, count, type, dest, tag, comm, req);
    return nb(OP_ISEND, rc, a, leave(), dest, count, type, tag, comm, req);
}
int MPI_Irecv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Request *req) {
    hv_st a = enter();
    int rc = PMPI_Irecv(buf, count, type, src, tag, comm, req);
    return nb(OP_IRECV, rc, a, leave(), src, count, type, tag, comm, req);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st) {
    MPI_Status mine;
    MPI_Status *s = st == MPI_STATUS_IGNORE ? &mine : st;
    hv_st a = enter();
    int rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, s);
    hv_st b = leave();
    if (active) {
        int ci = comm_index(comm), cnt = 0;
        PMPI_Get_count(s, MPI_BYTE, &cnt);
        put(OP_SENDRECV, a, b, world_of(ci, dest), tbytes(scount, stype), stag, comms[ci].id, -1);
        put(OP_SENDRECV_RECV, a, b, world_of(ci, s->MPI_SOURCE), cnt == MPI_UNDEFINED ? tbytes(rcount, rtype) : cnt,
            s->MPI_TAG, comms[ci].id, -1);
    }
    return rc;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) {
    MPI_Status mine;
    MPI_Status *s = st == MPI_STATUS_IGNORE ? &mine : st;
    uint64_t key = req ? req_key(*req) : 0;
    hv_st a = enter();
    int rc = PMPI_Wait(req, s);
    hv_st b = leave();
    if (active) completed(key, s, a, b);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) {
    MPI_Status mine;
    MPI_Status *s = st == MPI_STATUS_IGNORE ? &mine : st;
    uint64_t key = req ? req_key(*req) : 0;
    hv_st a = poll_enter();
    int rc = PMPI_Test(req, flag, s);
    if (!active) return rc;
    if (!*flag) {
        polled(a, NULL);
        return rc;
    }
    hv_st b = leave();
    if (!completed(key, s, a, b)) polled(a, &b);
    return rc;
}

/* Up to HV_MANY requests are tracked per Waitall/Testall/...; more are completed untraced. */
#define HV_MANY 256

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    uint64_t keys[HV_MANY];
    MPI_Status mine[HV_MANY];
    int m = n < HV_MANY ? n : HV_MANY;
    for (int i = 0; i < m; i++) keys[i] = req_key(reqs[i]);
    MPI_Status *s = (sts == MPI_STATUSES_IGNORE && n <= HV_MANY) ? mine : sts;
    hv_st a = enter();
    int rc = PMPI_Waitall(n, reqs, s);
    hv_st b = leave();
    if (active)
        for (int i = 0; i < m; i++) completed(keys[i], s == MPI_STATUSES_IGNORE ? NULL : &s[i], a, b);
    return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    uint64_t keys[HV_MANY];
    MPI_Status mine[HV_MANY];
    int m = n < HV_MANY ? n : HV_MANY;
    for (int i = 0; i < m; i++) keys[i] = req_key(reqs[i]);
    MPI_Status *s = (sts == MPI_STATUSES_IGNORE && n <= HV_MANY) ? mine : sts;
    hv_st a = poll_enter();
    int rc = PMPI_Testall(n, reqs, flag, s);
    if (!active) return rc;
    if (!*flag) {
        polled(a, NULL);
        return rc;
    }
    hv_st b = leave();
    int rec = 0;
    for (int i = 0; i < m; i++) rec |= completed(keys[i], s == MPI_STATUSES_IGNORE ? NULL : &s[i], a, b);
    if (!rec) polled(a, &b);
    return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st) {
    uint64_t keys[HV_MANY];
    MPI_Status mine;
    MPI_Status *s = st == MPI_STATUS_IGNORE ? &mine : st;
    int m = n < HV_MANY ? n : HV_MANY;
    for (int i = 0; i < m; i++) keys[i] = req_key(reqs[i]);
    hv_st a = enter();
    int rc = PMPI_Waitany(n, reqs, index, s);
    hv_st b = leave();
    if (active && *index != MPI_UNDEFINED && *index < m) completed(keys[*index], s, a, b);
    return rc;
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st) {
    uint64_t keys[HV_MANY];
    MPI_Status mine;
    MPI_Status *s = st == MPI_STATUS_IGNORE ? &mine : st;
    int m = n < HV_MANY ? n : HV_MANY;
    for (int i = 0; i < m; i++) keys[i] = req_key(reqs[i]);
    hv_st a = poll_enter();
    int rc = PMPI_Testany(n, reqs, index, flag, s);
    if (!active) return rc;
    if (!*flag) {
        polled(a, NULL);
        return rc;
    }
    hv_st b = leave();
    if (!(*index != MPI_UNDEFINED && *index < m && completed(keys[*index], s, a, b))) polled(a, &b);
    return rc;
}

/* MPI_Waitsome, or MPI_Testsome (test: a poll when it completes nothing the tracer follows) */
static int some(int (*fn)(int, MPI_Request[], int *, int[], MPI_Status[]), int test, int n, MPI_Request reqs[],
                int *outc, int idx[], MPI_Status sts[]) {
    uint64_t keys[HV_MANY];
    MPI_Status mine[HV_MANY];
    int m = n < HV_MANY ? n : HV_MANY;
    for (int i = 0; i < m; i++) keys[i] = req_key(reqs[i]);
    MPI_Status *s = (sts == MPI_STATUSES_IGNORE && n <= HV_MANY) ? mine : sts;
    hv_st a = test ? poll_enter() : enter();
    int rc = fn(n, reqs, outc, idx, s);
    if (test && active && (*outc == MPI_UNDEFINED || *outc == 0)) { /* completed nothing: a poll */
        polled(a, NULL);
        return rc;
    }
    hv_st b = leave();
    int rec = 0;
    if (active && *outc != MPI_UNDEFINED)
        for (int i = 0; i < *outc; i++)
            if (idx[i] < m) rec |= completed(keys[idx[i]], s == MPI_STATUSES_IGNORE ? NULL : &s[i], a, b);
    if (active && test && !rec) polled(a, &b);
    return rc;
}
int MPI_Waitsome(int n, MPI_Request reqs[], int *outc, int idx[], MPI_Status sts[]) {
    return some(PMPI_Waitsome, 0, n, reqs, outc, idx, sts);
}
int MPI_Testsome(int n, MPI_Request reqs[], int *outc, int idx[], MPI_Status sts[]) {
    return some(PMPI_Testsome, 1, n, reqs, outc, idx, sts);
}

/* ---- probes: a message found is a record (the receive follows); nothing found is a poll ---- */
static void probed(hv_st a, hv_st b, const MPI_Status *s, MPI_Comm comm) {
    int ci = comm_index(comm), cnt = 0;
    PMPI_Get_count(s, MPI_BYTE, &cnt);
    put(OP_PROBE, a, b, world_of(ci, s->MPI_SOURCE), cnt == MPI_UNDEFINED ? 0 : cnt, s->MPI_TAG, comms[ci].id, -1);
}

int MPI_Iprobe(int src, int tag, MPI_Comm comm, int *flag, MPI_Status *st) {
    MPI_Status mine;
    MPI_Status *s = st == MPI_STATUS_IGNORE ? &mine : st;
    hv_st a = poll_enter();
    int rc = PMPI_Iprobe(src, tag, comm, flag, s);
    if (!active) return rc;
    if (rc == MPI_SUCCESS && *flag && s->MPI_SOURCE >= 0) probed(a, leave(), s, comm);
    else polled(a, NULL);
    return rc;
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status *st) {
    MPI_Status mine;
    MPI_Status *s = st == MPI_STATUS_IGNORE ? &mine : st;
    hv_st a = enter();
    int rc = PMPI_Probe(src, tag, comm, s);
    hv_st b = leave();
    if (active && rc == MPI_SUCCESS && s->MPI_SOURCE >= 0) probed(a, b, s, comm);
    return rc;
}

/* ---- collectives: bytes = what this rank contributes (see docs/formats.md) ---- */
#define COLL(OPC, CALL, ROOT, BYTES, COMM) \
    hv_st a = enter(); \
    int rc = CALL; \
    hv_st b = leave(); \
    if (active) { \
        int ci = comm_index(COMM); \
        put(OPC, a, b, world_of(ci, ROOT), BYTES, 0, comms[ci].id, -1); \
    } \
    return rc;

static int64_t sum_counts(const int *counts, MPI_Datatype t, MPI_Comm comm) {
    int n = 0;
    PMPI_Comm_size(comm, &n);
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += counts[i];
    return s * tbytes(1, t);
}
static int is_root(int root, MPI_Comm c) {
    int r = -2;
    PMPI_Comm_rank(c, &r);
    return r == root;
}

int MPI_Barrier(MPI_Comm comm) { COLL(OP_BARRIER, PMPI_Barrier(comm), -1, 0, comm) }
int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm) {
    COLL(OP_BCAST, PMPI_Bcast(buf, count, t, root, comm), root, tbytes(count, t), comm)
}
int MPI_Reduce(const void *s, void *r, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm) {
    COLL(OP_REDUCE, PMPI_Reduce(s, r, count, t, op, root, comm), root, tbytes(count, t), comm)
}
int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    COLL(OP_ALLREDUCE, PMPI_Allreduce(s, r, count, t, op, comm), -1, tbytes(count, t), comm)
}
int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm) {
    COLL(OP_GATHER, PMPI_Gather(s, sc, st, r, rc_, rt, root, comm), root,
         s == MPI_IN_PLACE ? tbytes(rc_, rt) : tbytes(sc, st), comm)
}
int MPI_Gatherv(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[], const int displs[], MPI_Datatype rt,
                int root, MPI_Comm comm) {
    COLL(OP_GATHERV, PMPI_Gatherv(s, sc, st, r, rcs, displs, rt, root, comm), root,
         is_root(root, comm) ? sum_counts(rcs, rt, comm) : tbytes(sc, st), comm)
}
int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm) {
    COLL(OP_SCATTER, PMPI_Scatter(s, sc, st, r, rc_, rt, root, comm), root,
         r == MPI_IN_PLACE ? tbytes(sc, st) : tbytes(rc_, rt), comm)
}
int MPI_Scatterv(const void *s, const int scs[], const int displs[], MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
                 int root, MPI_Comm comm) {
    COLL(OP_SCATTERV, PMPI_Scatterv(s, scs, displs, st, r, rc_, rt, root, comm), root,
         is_root(root, comm) ? sum_counts(scs, st, comm) : tbytes(rc_, rt), comm)
}
int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm comm) {
    COLL(OP_ALLGATHER, PMPI_Allgather(s, sc, st, r, rc_, rt, comm), -1,
         s == MPI_IN_PLACE ? tbytes(rc_, rt) : tbytes(sc, st), comm)
}
int MPI_Allgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[], const int displs[],
                   MPI_Datatype rt, MPI_Comm comm) {
    COLL(OP_ALLGATHERV, PMPI_Allgatherv(s, sc, st, r, rcs, displs, rt, comm), -1, sum_counts(rcs, rt, comm), comm)
}
int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm comm) {
    int n = 0;
    PMPI_Comm_size(comm, &n);
    COLL(OP_ALLTOALL, PMPI_Alltoall(s, sc, st, r, rc_, rt, comm), -1,
         s == MPI_IN_PLACE ? tbytes(rc_, rt) * n : tbytes(sc, st) * n, comm)
}
int MPI_Alltoallv(const void *s, const int scs[], const int sd[], MPI_Datatype st, void *r, const int rcs[],
                  const int rd[], MPI_Datatype rt, MPI_Comm comm) {
    COLL(OP_ALLTOALLV, PMPI_Alltoallv(s, scs, sd, st, r, rcs, rd, rt, comm), -1,
         s == MPI_IN_PLACE ? sum_counts(rcs, rt, comm) : sum_counts(scs, st, comm), comm)
}
