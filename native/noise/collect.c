/* hv_noise_collect: the TraceCollector (jitSim paper, section 3.1), one pinned
 * thread per CPU reading the TSC in a tight loop.
 *
 * Per thread (pinned before it starts, SCHED_FIFO --rt-prio where asked and
 * allowed, buffers allocated, touched and mlocked on its own CPU):
 *   1. t_min = the smallest difference between two back-to-back rdtsc reads
 *      (minimum over --tmin-samples reads); threshold = --threshold-ns, or
 *      max(9 * t_min, 100 ns) when it is 0.
 *   2. All threads start at one common TSC value and stop --duration seconds
 *      later. The loop is: read TSC, subtract, compare with the threshold,
 *      compare with the end; nothing else (no syscall, allocation or store).
 *      A difference above the threshold is a jitter event: its start (the
 *      read before the gap, relative to the common start) and its duration
 *      (difference - t_min) go into the preallocated buffer; then rdtscp reads
 *      the aux value (TSC_AUX = node << 12 | cpu), which detects a migration
 *      off the pinned CPU. The clock is not re-based on that read: the stores
 *      and the rdtscp count towards the next difference, so a detour that
 *      starts while an event is being stored is not hidden. A thread that
 *      starts after the common start records the delay as a detour at 0.
 *   3. t_min is measured again after the loop (its drift is reported).
 * A full buffer stops that CPU early (flag "overflow", recorded length shorter).
 *
 * The metadata holds the common start as a raw TSC value (t0_tsc) and each thread's
 * kernel id (tid), so that kernel trace events stamped with trace_clock x86-tsc can
 * be aligned with the events (hpcvar noise record --attribute).
 *
 * Output: the native jitter trace (.jtr, docs/formats.md "Jitter traces"):
 *   header  "HVJTR\r\n\x1a", u32 version=1, u32 ncpus, f64 freq_hz, u64 meta_len
 *   meta    JSON object (machine, kernel, TSC calibration, /proc snapshots)
 *   per CPU u32 cpu, u32 flags, u64 nevents, u64 lead_in_cycles, u64 meta_len,
 *           JSON meta, nevents x i64 duration_cycles, nevents x i64 gap_cycles
 * (d, g) from starts s_k and durations d_k over the recorded length T:
 *   g_k = s_{k+1} - s_k - d_k, and g_{E-1} = T - s_{E-1} - d_{E-1} + s_0 (the
 * lead-in before the first event wraps onto the last gap), so sum(d + g) = T
 * exactly and the recorded starts are s_0 + S_k.
 *
 * Code: main reads the options into a collect_config, starts one collector
 * thread per CPU (start_threads), agrees on the start (start_time), lets them
 * run, then writes the trace (write_jtr: the metadata of meta_json, each CPU's
 * cpu_json and events). The threads share a collect_shared (the start and end,
 * the clock, the method; no file-scope mutable state); each thread sets itself
 * up (thread_setup), then runs the spin loop (spin_loop, the timed loop) or the
 * timer loop (timer_loop). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "hv_args.h"
#include "hv_cgroup.h"
#include "hv_timer.h"
#include "hv_watch.h"
#if HV_HAVE_TSC
#include <cpuid.h>
#endif

#define DIE(...) \
    do { \
        fprintf(stderr, "hv_noise_collect: " __VA_ARGS__); \
        fputc('\n', stderr); \
        exit(1); \
    } while (0)
#define FLAG_OVERFLOW 1u
#define FLAG_MIGRATED 2u

/* ---- a growable text buffer for the JSON metadata -------------------------- */
typedef struct {
    char *p;
    size_t n, cap;
} jbuf;

static void jb_put(jbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->n + n + 1 > cap) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) DIE("out of memory for the metadata");
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void jb_printf(jbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    jb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
static void jb_str(jbuf *b, const char *s) { /* a JSON string literal */
    jb_put(b, "\"", 1);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            jb_put(b, e, 2);
        } else if (c == '\n') jb_put(b, "\\n", 2);
        else if (c == '\t') jb_put(b, "\\t", 2);
        else if (c < 0x20 || c >= 0x7f) jb_printf(b, "\\u%04x", c);
        else jb_put(b, (const char *)&c, 1);
    }
    jb_put(b, "\"", 1);
}
static void jb_key(jbuf *b, const char *k) {
    if (b->n && b->p[b->n - 1] != '{') jb_put(b, ",", 1);
    jb_str(b, k);
    jb_put(b, ":", 1);
}

static char *read_file(const char *path) { /* whole file, NUL-terminated; NULL if unreadable */
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    jbuf b = {0};
    char tmp[8192];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) jb_put(&b, tmp, n);
    fclose(f);
    if (!b.p) jb_put(&b, "", 0);
    return b.p;
}
static void jb_file(jbuf *b, const char *key, const char *path) {
    char *s = read_file(path);
    jb_key(b, key);
    if (s) {
        size_t l = strlen(s);
        while (l && s[l - 1] == '\n') s[--l] = 0;
        jb_str(b, s);
        free(s);
    } else jb_put(b, "null", 4);
}

/* ---- the options, and what the threads share ------------------------------- */
typedef struct {
    int64_t *cpus;
    size_t ncpu;
    double duration_s, threshold_ns, interval_ns, start_mono_ns;
    long max_events, tmin_samples, rt_prio;
    const char *method, *out, *argv;
    int start_from_stdin;
} collect_config;

typedef struct {
    atomic_int ready;         /* threads calibrated and waiting */
    atomic_int go;            /* set once t0 and t1 are known */
    uint64_t t0, t1;          /* the common start and end, TSC */
    double ticks_per_ns;
    double threshold_ns;
    long tmin_samples;
    int rt_prio;
    int timer_method;         /* 0 spin (the paper's loop), 1 timer (sleep to deadlines, record lateness) */
    uint64_t interval_ticks;  /* timer: time between deadlines */
} collect_shared;

/* ---- per-thread state ------------------------------------------------------ */
typedef struct {
    collect_shared *sh;
    int cpu;
    size_t cap, n;
    uint64_t *start, *delta;   /* event start (relative to t0) and raw difference, cycles */
    uint64_t t_min, t_min_end, threshold, iters, length;
    uint64_t mig_events;
    unsigned flags, aux_start, aux_end;
    int mlocked, rt;
    long tid;
    long vcs0, nvcs0, vcs1, nvcs1;
    pthread_t th;
} cpu_state;

static uint64_t measure_tmin(long samples) {
    uint64_t best = UINT64_MAX, prev = __rdtsc();
    for (long i = 0; i < samples; i++) {
        uint64_t now = __rdtsc();
        if (now - prev < best) best = now - prev;
        prev = now;
    }
    return best;
}

static void thread_ctxsw(long *vol, long *nonvol) {
    *vol = *nonvol = -1;
    char *s = read_file("/proc/thread-self/status");
    if (!s) return;
    char *p = strstr(s, "\nvoluntary_ctxt_switches:");
    if (p) *vol = strtol(p + 25, NULL, 10);
    p = strstr(s, "\nnonvoluntary_ctxt_switches:");
    if (p) *nonvol = strtol(p + 28, NULL, 10);
    free(s);
}

/* The timer method: sleep to (dithered) deadlines about every interval_ticks and record how late each
 * wake-up was. A wake-up later than the threshold is a detour that ends at the wake-up minus the usual
 * lateness (stored as t_min) and starts midway between the previous wake-up and the deadline (timer_loop).
 * Costs a few microseconds per deadline instead of a whole CPU, so that collectors of "nodes" that share
 * one machine (the testbed) do not steal each other's time. */
static uint64_t timer_lateness(uint64_t deadline, double ticks_per_ns) {
    uint64_t now = __rdtsc();
    if (deadline > now) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                      (uint64_t)((double)(deadline - now) / ticks_per_ns);
        ts.tv_sec = (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
    }
    now = __rdtsc();
    return now > deadline ? now - deadline : 0;
}

static uint64_t cmp_u64_median(uint64_t *v, size_t n) {
    for (size_t i = 1; i < n; i++) /* insertion sort: n is small, once, outside the recording */
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n ? v[n / 2] : 0;
}

/* Deadline k of the timer method: t0 + k x interval + a pseudo-random offset in [0, interval) (splitmix64 of k and
 * the CPU), so that the deadlines keep their mean spacing but do not fall at the same point of noise whose period is
 * a multiple of the interval (50 Hz at 200 us: every burst would have been seen the same time after it began, and
 * the midpoint estimate of its start off by the same amount all through the recording). Increasing in k. */
static uint64_t timer_deadline(uint64_t t0, uint64_t k, uint64_t iv, int cpu) {
    uint64_t z = (k + 1) * 0x9e3779b97f4a7c15ULL + (uint64_t)cpu * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return t0 + k * iv + (iv ? z % iv : 0);
}

static void timer_loop(cpu_state *c, uint64_t t0, uint64_t t1, uint64_t thr) {
    uint64_t *const st = c->start, *const dl = c->delta;
    const uint64_t iv = c->sh->interval_ticks, usual = c->t_min;
    const double ticks_per_ns = c->sh->ticks_per_ns;
    size_t n = 0;
    uint64_t iters = 0, k = 0, now = t0;
    for (;;) {
        const uint64_t deadline = timer_deadline(t0, k, iv, c->cpu);
        if (deadline >= t1) break;
        const uint64_t woke = now; /* the thread ran then: a detour seen at this deadline started after it */
        const uint64_t late = timer_lateness(deadline, ticks_per_ns);
        now = deadline + late;
        iters++;
        if (late > thr) {
            /* The detour ended at `now` (exactly), and began somewhere in (woke, deadline]: the thread slept
             * there and cannot tell. Recorded from the midpoint, the estimate of an unknown start spread
             * evenly over that span, so that a detour longer than the interval is recorded with its length
             * unbiased (from the deadline it was short by half an interval on average: 1.89 ms for the
             * testbed's 2 ms bursts at the default 200 us). */
            const uint64_t from = deadline - (deadline - (woke < deadline ? woke : deadline)) / 2;
            st[n] = from - t0;
            dl[n] = now - from; /* written as that - t_min: the detour beyond the usual wake-up */
            if (++n == c->cap) {
                c->flags |= FLAG_OVERFLOW;
                break;
            }
        }
        k = (now - t0) / iv; /* deadlines that passed during a detour are not waited for */
        if (timer_deadline(t0, k, iv, c->cpu) <= now) k++;
    }
    (void)usual;
    c->length = (now > t1 ? now : t1) - t0;
    c->n = n;
    c->iters = iters;
}

/* The usual lateness of the timer method (median over 200 wake-ups before the recording), or the spin
 * method's t_min; returns the threshold: --threshold-ns, else max(4 x usual, 20 us) for the timer,
 * max(9 x t_min, 100 ns) for the spin. */
static uint64_t calibrate_threshold(cpu_state *c) {
    const collect_shared *sh = c->sh;
    uint64_t thr = sh->threshold_ns > 0 ? (uint64_t)(sh->threshold_ns * sh->ticks_per_ns + 0.5) : 0;
    if (sh->timer_method) {
        uint64_t lat[200];
        uint64_t d = __rdtsc() + sh->interval_ticks;
        for (int i = 0; i < 200; i++, d += sh->interval_ticks) {
            uint64_t now = __rdtsc();
            if (d <= now) d = now + sh->interval_ticks;
            lat[i] = timer_lateness(d, sh->ticks_per_ns);
        }
        c->t_min = cmp_u64_median(lat, 200);
        if (thr == 0) {
            uint64_t floor = (uint64_t)(20000.0 * sh->ticks_per_ns + 0.5);
            thr = 4 * c->t_min > floor ? 4 * c->t_min : floor;
        }
    } else {
        c->t_min = measure_tmin(sh->tmin_samples);
        if (thr == 0) {
            uint64_t floor = (uint64_t)(100.0 * sh->ticks_per_ns + 0.5);
            thr = 9 * c->t_min > floor ? 9 * c->t_min : floor;
        }
    }
    return thr;
}

/* Buffers on this CPU, touched (pre-faulted) and locked where allowed; the scheduling; the threshold.
 * Returns the aux value (CPU) read at the start. */
static unsigned thread_setup(cpu_state *c) {
    c->tid = (long)syscall(SYS_gettid);
    c->start = malloc(c->cap * sizeof *c->start);
    c->delta = malloc(c->cap * sizeof *c->delta);
    if (!c->start || !c->delta) DIE("cannot allocate %zu events for CPU %d", c->cap, c->cpu);
    memset(c->start, 0, c->cap * sizeof *c->start);
    memset(c->delta, 0, c->cap * sizeof *c->delta);
    c->mlocked = mlock(c->start, c->cap * sizeof *c->start) == 0 && mlock(c->delta, c->cap * sizeof *c->delta) == 0;
    if (c->sh->rt_prio > 0) {
        struct sched_param sp = {.sched_priority = c->sh->rt_prio};
        c->rt = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
    }
    unsigned aux;
    __rdtscp(&aux);
    c->aux_start = aux;
    c->threshold = calibrate_threshold(c);
    return aux;
}

/* The spin method from t0 to t1: the paper's loop. */
static void spin_loop(cpu_state *c, uint64_t t0, uint64_t t1, uint64_t thr, unsigned want) {
    uint64_t *const st = c->start, *const dl = c->delta;
    const size_t cap = c->cap;
    size_t n = 0;
    uint64_t iters = 0, mig = 0;
    unsigned aux;
    uint64_t prev = __rdtsc();
    while (prev < t0) prev = __rdtsc();
    prev = t0;  /* a thread that was late (descheduled) sees the delay as its first detour */
    uint64_t now = prev;
    /* the timed loop */
    for (;;) {
        now = __rdtsc();
        iters++;
        if (__builtin_expect(now - prev > thr, 0)) {
            st[n] = prev - t0;
            dl[n] = now - prev;
            if (++n == cap) {
                c->flags |= FLAG_OVERFLOW;
                break;
            }
            __rdtscp(&aux);  /* its time counts towards the next difference (nothing is hidden) */
            if (__builtin_expect((aux & 0xfffu) != want, 0)) mig++;
        }
        if (__builtin_expect(now >= t1, 0)) break;
        prev = now;
    }
    c->length = now - t0;
    c->n = n;
    c->iters = iters;
    c->mig_events = mig;
}

static void *collector(void *arg) {
    cpu_state *c = arg;
    collect_shared *sh = c->sh;
    unsigned aux = thread_setup(c);
    const uint64_t thr = c->threshold;
    thread_ctxsw(&c->vcs0, &c->nvcs0);
    atomic_fetch_add(&sh->ready, 1);
    /* the spin method waits spinning (its loop starts hot); the timer method sleeps, so that its threads,
     * real-time ones included, leave the CPU to the process that agrees on the start */
    while (!atomic_load_explicit(&sh->go, memory_order_acquire))
        if (sh->timer_method) usleep(200);

    const uint64_t t0 = sh->t0, t1 = sh->t1;
    const unsigned want = aux & 0xfffu;
    if (sh->timer_method) timer_loop(c, t0, t1, thr);
    else spin_loop(c, t0, t1, thr, want);
    __rdtscp(&aux);
    c->aux_end = aux;
    if (c->mig_events || (aux & 0xfffu) != want) c->flags |= FLAG_MIGRATED;
    thread_ctxsw(&c->vcs1, &c->nvcs1);
    c->t_min_end = sh->timer_method ? c->t_min : measure_tmin(sh->tmin_samples);
    return NULL;
}

static int hypervisor_bit(void) {
#if HV_HAVE_TSC
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return -1;
    return (int)((c >> 31) & 1u);
#else
    return -1;
#endif
}

static void put_u32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void put_u64(FILE *f, uint64_t v) { fwrite(&v, 8, 1, f); }

/* ---- main: options, threads, the start, the trace -------------------------- */
static void check_config(const collect_config *c) {
    if (c->method && strcmp(c->method, "spin") != 0 && strcmp(c->method, "timer") != 0)
        DIE("unknown --method '%s' (spin or timer)", c->method);
    if (!c->out) DIE("option '--out' is required");
    long ncpu_sys = sysconf(_SC_NPROCESSORS_CONF);
    for (size_t i = 0; i < c->ncpu; i++)
        if (c->cpus[i] >= ncpu_sys || c->cpus[i] >= CPU_SETSIZE)
            DIE("CPU %lld does not exist (this machine has %ld)", (long long)c->cpus[i], ncpu_sys);
}

static cpu_state *start_threads(const collect_config *cfg, collect_shared *sh) {
    cpu_state *cs = calloc(cfg->ncpu, sizeof *cs);
    if (!cs) DIE("out of memory");
    for (size_t i = 0; i < cfg->ncpu; i++) {
        cs[i].sh = sh;
        cs[i].cpu = (int)cfg->cpus[i];
        cs[i].cap = (size_t)cfg->max_events;
        pthread_attr_t at;
        pthread_attr_init(&at);
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cs[i].cpu, &set);
        if (pthread_attr_setaffinity_np(&at, sizeof set, &set) != 0) DIE("cannot pin a thread to CPU %d", cs[i].cpu);
        int rc = pthread_create(&cs[i].th, &at, collector, &cs[i]);
        if (rc) DIE("cannot start the thread for CPU %d: %s", cs[i].cpu, strerror(rc));
        pthread_attr_destroy(&at);
    }
    while (atomic_load(&sh->ready) < (int)cfg->ncpu) usleep(1000);
    return cs;
}

/* Started by hv_noise_nodes: say that every thread is calibrated, then read the agreed start
 * (CLOCK_MONOTONIC_RAW ns), so that no node's start-up time can make it miss the start. */
static double start_from_stdin(void) {
    double start_mono = 0.0;
    printf("ready\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin) || sscanf(line, "%lf", &start_mono) != 1 || start_mono <= 0)
        DIE("no start time on standard input (--start-from-stdin)");
    return start_mono;
}

/* /proc's interrupt, softirq and CPU counters, and the time this process's cgroup was throttled by a CPU quota
 * (hv_cgroup.h; null when not visible), as a JSON object. */
static void proc_snapshot(jbuf *b) {
    jb_put(b, "{", 1);
    jb_file(b, "interrupts", "/proc/interrupts");
    jb_file(b, "softirqs", "/proc/softirqs");
    jb_file(b, "stat", "/proc/stat");
    const double thr = hv_cgroup_throttled_ns();
    jb_key(b, "cgroup_throttled_ns");
    if (isfinite(thr)) jb_printf(b, "%.0f", thr);
    else jb_put(b, "null", 4);
    jb_put(b, "}", 1);
}

/* The common start in TSC: the agreed CLOCK_MONOTONIC_RAW time (hv_noise_nodes), else 2 ms from now. */
static uint64_t start_tsc(double start_mono, uint64_t m0, uint64_t c0, uint64_t m0b, double ticks_per_ns) {
    if (start_mono <= 0) return c0 + (uint64_t)(2e6 * ticks_per_ns); /* start 2 ms from now, on every CPU */
    const double ahead_ns = start_mono - (double)(m0 + m0b) / 2.0;
    if (ahead_ns < 1e5)
        DIE("the agreed start (--start-mono-ns) passed %.3f ms before this collector was ready; give more margin",
            -ahead_ns / 1e6);
    return c0 + (uint64_t)(ahead_ns * ticks_per_ns);
}

typedef struct { /* the clocks around the recording and the /proc snapshots, for the metadata */
    uint64_t m0, c0, m0b, m1, c1, m1b;
    jbuf before, after;
} collect_window;

static void meta_machine(jbuf *m, const collect_config *cfg) {
    struct utsname un;
    uname(&un);
    jb_key(m, "tool");
    jb_str(m, "hv_noise_collect");
    jb_key(m, "argv");
    jb_str(m, cfg->argv ? cfg->argv : "");
    jb_key(m, "kernel");
    jb_str(m, un.release);
    jb_key(m, "kernel_version");
    jb_str(m, un.version);
    jb_key(m, "hostname");
    jb_str(m, un.nodename);
    jb_key(m, "machine");
    jb_str(m, un.machine);
    jb_file(m, "kernel_cmdline", "/proc/cmdline");
    jb_file(m, "smt_active", "/sys/devices/system/cpu/smt/active");
    jb_file(m, "clocksource", "/sys/devices/system/clocksource/clocksource0/current_clocksource");
    jb_file(m, "isolated", "/sys/devices/system/cpu/isolated");
    jb_file(m, "nohz_full", "/sys/devices/system/cpu/nohz_full");
    jb_key(m, "hypervisor");
    jb_printf(m, "%d", hypervisor_bit());
}

static void meta_clock(jbuf *m, const hv_timer *tm, double run_hz) {
    jb_key(m, "invariant_tsc");
    jb_printf(m, "%d", tm->invariant_tsc);
    jb_key(m, "tsc_hz");
    jb_printf(m, "%.3f", tm->tsc_hz);
    jb_key(m, "ns_per_cycle");
    jb_printf(m, "%.12g", 1.0 / tm->ticks_per_ns);
    jb_key(m, "tsc_calib_method");
    jb_str(m, "CLOCK_MONOTONIC_RAW, 5 brackets of 50 ms, tightest bracket");
    jb_key(m, "tsc_calib_spread_ppm");
    jb_printf(m, "%.3f", tm->calib_spread_ppm);
    jb_key(m, "tsc_hz_over_run");
    jb_printf(m, "%.3f", run_hz);
    jb_key(m, "tsc_read_cost_ns");
    jb_printf(m, "%.3f", tm->cost_ns);
}

/* The trace's metadata (a JSON object): machine, clock, recording, /proc before and after. */
static void meta_json(jbuf *m, const collect_config *cfg, const collect_shared *sh, const hv_timer *tm,
                      const collect_window *w) {
    /* TSC frequency over the whole run against CLOCK_MONOTONIC_RAW */
    double run_hz = (double)(w->c1 - w->c0) / ((double)((w->m1 + w->m1b) / 2 - (w->m0 + w->m0b) / 2)) * 1e9;
    jb_put(m, "{", 1);
    meta_machine(m, cfg);
    meta_clock(m, tm, run_hz);
    jb_key(m, "duration_s");
    jb_printf(m, "%.9g", cfg->duration_s);
    jb_key(m, "threshold_ns_requested");
    jb_printf(m, "%.3f", cfg->threshold_ns);
    jb_key(m, "tmin_samples");
    jb_printf(m, "%ld", cfg->tmin_samples);
    jb_key(m, "max_events");
    jb_printf(m, "%ld", cfg->max_events);
    jb_key(m, "proc_before");
    jb_put(m, w->before.p, w->before.n);
    jb_key(m, "proc_after");
    jb_put(m, w->after.p, w->after.n);
    jb_key(m, "t0_tsc");
    jb_printf(m, "%llu", (unsigned long long)sh->t0);
    jb_key(m, "t0_mono_raw_ns");
    jb_printf(m, "%.0f", (double)(w->m0 + w->m0b) / 2.0 + (double)(sh->t0 - w->c0) / tm->ticks_per_ns);
    jb_key(m, "method");
    jb_str(m, sh->timer_method ? "timer" : "spin");
    if (sh->timer_method) {
        jb_key(m, "interval_ns");
        jb_printf(m, "%.0f", cfg->interval_ns);
        jb_key(m, "detour_start"); /* where a detour's unknown start is placed (timer_loop) */
        jb_str(m, "midpoint");
        jb_key(m, "deadlines"); /* timer_deadline */
        jb_str(m, "dithered");
    }
    jb_key(m, "pid");
    jb_printf(m, "%ld", (long)getpid());
    jb_key(m, "window_mono_ns");
    jb_printf(m, "%llu", (unsigned long long)((w->m1 + w->m1b) / 2 - (w->m0 + w->m0b) / 2));
    jb_put(m, "}", 1);
}

/* One CPU's metadata (a JSON object). */
static void cpu_json(jbuf *cm, const cpu_state *c) {
    jb_put(cm, "{", 1);
    jb_key(cm, "t_min_cycles");
    jb_printf(cm, "%llu", (unsigned long long)c->t_min);
    jb_key(cm, "t_min_end_cycles");
    jb_printf(cm, "%llu", (unsigned long long)c->t_min_end);
    jb_key(cm, "threshold_cycles");
    jb_printf(cm, "%llu", (unsigned long long)c->threshold);
    jb_key(cm, "iterations");
    jb_printf(cm, "%llu", (unsigned long long)c->iters);
    jb_key(cm, "recorded_cycles");
    jb_printf(cm, "%llu", (unsigned long long)c->length);
    jb_key(cm, "overflow");
    jb_put(cm, c->flags & FLAG_OVERFLOW ? "true" : "false", c->flags & FLAG_OVERFLOW ? 4 : 5);
    jb_key(cm, "migrations");
    jb_printf(cm, "%llu", (unsigned long long)c->mig_events);
    jb_key(cm, "aux_cpu_start");
    jb_printf(cm, "%u", c->aux_start & 0xfffu);
    jb_key(cm, "aux_cpu_end");
    jb_printf(cm, "%u", c->aux_end & 0xfffu);
    jb_key(cm, "tid");
    jb_printf(cm, "%ld", c->tid);
    jb_key(cm, "rt_prio");
    jb_printf(cm, "%d", c->rt ? c->sh->rt_prio : 0);
    jb_key(cm, "mlocked");
    jb_put(cm, c->mlocked ? "true" : "false", c->mlocked ? 4 : 5);
    jb_key(cm, "voluntary_ctxt_switches");
    jb_printf(cm, "%ld", c->vcs1 >= 0 && c->vcs0 >= 0 ? c->vcs1 - c->vcs0 : -1);
    jb_key(cm, "nonvoluntary_ctxt_switches");
    jb_printf(cm, "%ld", c->nvcs1 >= 0 && c->nvcs0 >= 0 ? c->nvcs1 - c->nvcs0 : -1);
    jb_put(cm, "}", 1);
}

/* One CPU's block: its header and metadata, the durations (difference - t_min), the gaps to the next
 * start (the last wraps onto the lead-in). */
static void write_cpu(FILE *f, const cpu_state *c) {
    jbuf cm = {0};
    cpu_json(&cm, c);
    uint64_t lead = c->n ? c->start[0] : 0;
    put_u32(f, (uint32_t)c->cpu);
    put_u32(f, c->flags);
    put_u64(f, c->n);
    put_u64(f, lead);
    put_u64(f, cm.n);
    fwrite(cm.p, 1, cm.n, f);
    free(cm.p);
    for (size_t k = 0; k < c->n; k++) {
        int64_t d = (int64_t)(c->delta[k] - c->t_min);
        fwrite(&d, 8, 1, f);
    }
    for (size_t k = 0; k < c->n; k++) {
        uint64_t end = c->start[k] + (c->delta[k] - c->t_min);
        int64_t g = k + 1 < c->n ? (int64_t)(c->start[k + 1] - end) : (int64_t)(c->length - end + lead);
        fwrite(&g, 8, 1, f);
    }
}

/* The .jtr file, written to a temporary name, synced and renamed. */
static void write_jtr(const collect_config *cfg, const hv_timer *tm, const jbuf *m, const cpu_state *cs) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", cfg->out, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) DIE("cannot write '%s': %s", tmp, strerror(errno));
    fwrite("HVJTR\r\n\x1a", 1, 8, f);
    put_u32(f, 1);
    put_u32(f, (uint32_t)cfg->ncpu);
    double fhz = tm->tsc_hz;
    fwrite(&fhz, 8, 1, f);
    put_u64(f, m->n);
    fwrite(m->p, 1, m->n, f);
    for (size_t i = 0; i < cfg->ncpu; i++) write_cpu(f, &cs[i]);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) DIE("cannot write '%s': %s", tmp, strerror(errno));
    if (rename(tmp, cfg->out) != 0) DIE("cannot rename '%s' to '%s': %s", tmp, cfg->out, strerror(errno));
}

/* The threads' start (t0, t1) and their run, between the /proc snapshots. */
static void record(const collect_config *cfg, collect_shared *sh, cpu_state *cs, collect_window *w) {
    proc_snapshot(&w->before);
    w->m0 = hv_mono_ns(), w->c0 = __rdtsc(), w->m0b = hv_mono_ns();
    sh->t0 = start_tsc(cfg->start_mono_ns, w->m0, w->c0, w->m0b, sh->ticks_per_ns);
    sh->t1 = sh->t0 + (uint64_t)(cfg->duration_s * 1e9 * sh->ticks_per_ns);
    atomic_store_explicit(&sh->go, 1, memory_order_release);
    for (size_t i = 0; i < cfg->ncpu; i++) pthread_join(cs[i].th, NULL);
    w->m1 = hv_mono_ns(), w->c1 = __rdtsc(), w->m1b = hv_mono_ns();
    proc_snapshot(&w->after);
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_OPT_LIST(collect_config, cpus, ncpu, "cpus", "comma list of CPUs to record on"),
        HV_OPT_DOUBLE(collect_config, duration_s, "duration", 1e-3, 1e7, "recording time in seconds"),
        HV_OPT_DOUBLE_OR(collect_config, threshold_ns, "threshold-ns", 0, 1e9,
                         "detour threshold in ns; 0 = max(9 t_min, 100 ns)"),
        HV_OPT_LONG(collect_config, max_events, "max-events", 1, 1L << 40, "buffer capacity per CPU (events)"),
        HV_OPT_LONG_OR(collect_config, tmin_samples, "tmin-samples", 1000, 1L << 40,
                       "back-to-back reads for t_min (default 1000000)"),
        HV_OPT_STRING_OR(collect_config, out, "out", "output .jtr path"),
        HV_OPT_STRING_OR(collect_config, argv, "argv", "the user's command line, stored in the metadata"),
        HV_OPT_LONG_OR(collect_config, rt_prio, "rt-prio", 0, 99,
                       "SCHED_FIFO priority of the collector threads (0: normal scheduler)"),
        HV_OPT_STRING_OR(collect_config, method, "method",
                         "spin (a tight TSC loop, default) or timer (sleep to deadlines, record lateness)"),
        HV_OPT_DOUBLE_OR(collect_config, interval_ns, "interval-ns", 1000, 1e9,
                         "timer method: time between deadlines in ns (default 200000)"),
        HV_OPT_DOUBLE_OR(collect_config, start_mono_ns, "start-mono-ns", 0, 1.8e19,
                         "start at this CLOCK_MONOTONIC_RAW time in ns (default: 2 ms from now)"),
        HV_OPT_FLAG(collect_config, start_from_stdin, "start-from-stdin",
                    "print 'ready' when calibrated, then read the start (as --start-mono-ns)"),
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    char err[256];
    collect_config cfg = {.tmin_samples = 1000000, .interval_ns = 200000.0};
    if (hv_args_parse(argc, argv, opts, nopts, err, sizeof err) || hv_args_config(opts, nopts, &cfg, err, sizeof err))
        DIE("%s", err);
    check_config(&cfg);
    collect_shared sh = {.threshold_ns = cfg.threshold_ns,
                         .tmin_samples = cfg.tmin_samples,
                         .rt_prio = (int)cfg.rt_prio,
                         .timer_method = cfg.method && strcmp(cfg.method, "timer") == 0};
    if (sh.timer_method) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* threads inherit it: 1 ns, not 50 us */
    /* the collector ends with whatever started it (hpcvar, or hv_noise_nodes), even after a SIGKILL there */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0UL, 0UL, 0UL);
    if (getppid() == 1) DIE("the process that started the collector is gone");
    hv_watch_start("hv_noise_collect"); /* also when started through ip netns exec or a shell (hv_watch.h) */

    hv_timer tm;
    if (hv_timer_init(&tm, HV_TIMER_TSC, err, sizeof err) != 0) DIE("%s", err);
    sh.ticks_per_ns = tm.ticks_per_ns;
    sh.interval_ticks = (uint64_t)(cfg.interval_ns * tm.ticks_per_ns + 0.5);
    cpu_state *cs = start_threads(&cfg, &sh);
    if (cfg.start_from_stdin) cfg.start_mono_ns = start_from_stdin();
    collect_window w = {0};
    record(&cfg, &sh, cs, &w);
    jbuf m = {0};
    meta_json(&m, &cfg, &sh, &tm, &w);
    write_jtr(&cfg, &tm, &m, cs);
    for (size_t i = 0; i < cfg.ncpu; i++) {
        fprintf(stderr, "cpu %d: %zu events, t_min %llu cycles, threshold %llu cycles%s%s\n", cs[i].cpu, cs[i].n,
                (unsigned long long)cs[i].t_min, (unsigned long long)cs[i].threshold,
                cs[i].flags & FLAG_OVERFLOW ? ", BUFFER FULL" : "", cs[i].flags & FLAG_MIGRATED ? ", MIGRATED" : "");
        free(cs[i].start);
        free(cs[i].delta);
    }
    free(cs);
    free(cfg.cpus);
    free(m.p);
    free(w.before.p);
    free(w.after.p);
    return 0;
}
