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
 * exactly and the recorded starts are s_0 + S_k. */
#include <errno.h>
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

/* ---- per-thread state ------------------------------------------------------ */
typedef struct {
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

static atomic_int g_ready;
static atomic_int g_go;
static uint64_t g_t0, g_t1;
static double g_threshold_ns;
static long g_tmin_samples;
static int g_rt_prio;
static double g_ticks_per_ns;
static int g_timer_method;        /* 0 spin (the paper's loop), 1 timer (sleep to deadlines, record lateness) */
static uint64_t g_interval_ticks; /* timer: time between deadlines */

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

/* The timer method: sleep to absolute deadlines every g_interval_ticks and record how late each wake-up
 * was. A wake-up later than the threshold is a detour that starts at its deadline and lasts the lateness
 * minus the usual lateness (stored as t_min). Costs a few microseconds per deadline instead of a whole CPU,
 * so that collectors of "nodes" that share one machine (the testbed) do not steal each other's time. */
static uint64_t timer_lateness(uint64_t deadline) {
    uint64_t now = __rdtsc();
    if (deadline > now) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                      (uint64_t)((double)(deadline - now) / g_ticks_per_ns);
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

static void timer_loop(cpu_state *c, uint64_t t0, uint64_t t1, uint64_t thr) {
    uint64_t *const st = c->start, *const dl = c->delta;
    const uint64_t iv = g_interval_ticks, usual = c->t_min;
    size_t n = 0;
    uint64_t iters = 0, k = 0, now = t0;
    for (;;) {
        const uint64_t deadline = t0 + k * iv;
        if (deadline >= t1) break;
        const uint64_t late = timer_lateness(deadline);
        now = deadline + late;
        iters++;
        if (late > thr) {
            st[n] = deadline - t0;
            dl[n] = late;  /* written as late - t_min: the detour beyond the usual wake-up */
            if (++n == c->cap) {
                c->flags |= FLAG_OVERFLOW;
                break;
            }
        }
        k = (now - t0) / iv + 1; /* deadlines that passed during a detour are not waited for */
    }
    (void)usual;
    c->length = (now > t1 ? now : t1) - t0;
    c->n = n;
    c->iters = iters;
}

static void *collector(void *arg) {
    cpu_state *c = arg;
    c->tid = (long)syscall(SYS_gettid);
    /* buffers on this CPU, touched (pre-faulted) and locked where allowed */
    c->start = malloc(c->cap * sizeof *c->start);
    c->delta = malloc(c->cap * sizeof *c->delta);
    if (!c->start || !c->delta) DIE("cannot allocate %zu events for CPU %d", c->cap, c->cpu);
    memset(c->start, 0, c->cap * sizeof *c->start);
    memset(c->delta, 0, c->cap * sizeof *c->delta);
    c->mlocked = mlock(c->start, c->cap * sizeof *c->start) == 0 && mlock(c->delta, c->cap * sizeof *c->delta) == 0;

    if (g_rt_prio > 0) {
        struct sched_param sp = {.sched_priority = g_rt_prio};
        c->rt = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
    }
    unsigned aux;
    __rdtscp(&aux);
    c->aux_start = aux;
    uint64_t thr = g_threshold_ns > 0 ? (uint64_t)(g_threshold_ns * g_ticks_per_ns + 0.5) : 0;
    if (g_timer_method) {
        /* the usual lateness: median over 200 wake-ups before the recording; default threshold
         * max(4 x usual, 20 us) */
        uint64_t lat[200];
        uint64_t d = __rdtsc() + g_interval_ticks;
        for (int i = 0; i < 200; i++, d += g_interval_ticks) {
            uint64_t now = __rdtsc();
            if (d <= now) d = now + g_interval_ticks;
            lat[i] = timer_lateness(d);
        }
        c->t_min = cmp_u64_median(lat, 200);
        if (thr == 0) {
            uint64_t floor = (uint64_t)(20000.0 * g_ticks_per_ns + 0.5);
            thr = 4 * c->t_min > floor ? 4 * c->t_min : floor;
        }
    } else {
        c->t_min = measure_tmin(g_tmin_samples);
        if (thr == 0) {
            uint64_t floor = (uint64_t)(100.0 * g_ticks_per_ns + 0.5);
            thr = 9 * c->t_min > floor ? 9 * c->t_min : floor;
        }
    }
    c->threshold = thr;
    thread_ctxsw(&c->vcs0, &c->nvcs0);
    atomic_fetch_add(&g_ready, 1);
    /* the spin method waits spinning (its loop starts hot); the timer method sleeps, so that its threads,
     * real-time ones included, leave the CPU to the process that agrees on the start */
    while (!atomic_load_explicit(&g_go, memory_order_acquire))
        if (g_timer_method) usleep(200);

    const uint64_t t0 = g_t0, t1 = g_t1, tmin = c->t_min;
    const unsigned want = aux & 0xfffu;
    if (g_timer_method) {
        timer_loop(c, t0, t1, thr);
        __rdtscp(&aux);
        c->aux_end = aux;
        if ((aux & 0xfffu) != want) c->flags |= FLAG_MIGRATED;
        thread_ctxsw(&c->vcs1, &c->nvcs1);
        c->t_min_end = c->t_min;
        return NULL;
    }
    uint64_t *const st = c->start, *const dl = c->delta;
    const size_t cap = c->cap;
    size_t n = 0;
    uint64_t iters = 0, mig = 0;
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
    (void)tmin;
    __rdtscp(&aux);
    c->aux_end = aux;
    if (mig || (aux & 0xfffu) != want) c->flags |= FLAG_MIGRATED;
    thread_ctxsw(&c->vcs1, &c->nvcs1);
    c->t_min_end = measure_tmin(g_tmin_samples);
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

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_OPT_RAW("cpus", 0, "comma list of CPUs to record on"),
        HV_OPT_RAW("duration", 0, "recording time in seconds"),
        HV_OPT_RAW("threshold-ns", 0, "detour threshold in ns; 0 = max(9 t_min, 100 ns)"),
        HV_OPT_RAW("max-events", 0, "buffer capacity per CPU (events)"),
        HV_OPT_RAW("tmin-samples", 0, "back-to-back reads for t_min (default 1000000)"),
        HV_OPT_RAW("out", 0, "output .jtr path"),
        HV_OPT_RAW("argv", 0, "the user's command line, stored in the metadata"),
        HV_OPT_RAW("rt-prio", 0, "SCHED_FIFO priority of the collector threads (0: normal scheduler)"),
        HV_OPT_RAW("method", 0, "spin (a tight TSC loop, default) or timer (sleep to deadlines, record lateness)"),
        HV_OPT_RAW("interval-ns", 0, "timer method: time between deadlines in ns (default 200000)"),
        HV_OPT_RAW("start-mono-ns", 0, "start at this CLOCK_MONOTONIC_RAW time in ns (default: 2 ms from now)"),
        HV_OPT_RAW("start-from-stdin", 1, "print 'ready' when calibrated, then read the start (as --start-mono-ns)"),
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    char err[256];
    int64_t *cpus;
    size_t ncpu;
    double duration, thr_ns = 0;
    long max_events, tmin_samples = 1000000, rt_prio = 0;
    double interval_ns = 200000.0, start_mono = 0.0;
    if (hv_args_parse(argc, argv, opts, nopts, err, sizeof err) ||
        hv_args_list(opts, nopts, "cpus", &cpus, &ncpu, err, sizeof err) ||
        hv_args_double(opts, nopts, "duration", 1e-3, 1e7, &duration, err, sizeof err) ||
        hv_args_long(opts, nopts, "max-events", 1, 1L << 40, &max_events, err, sizeof err) ||
        (hv_args_get(opts, nopts, "threshold-ns") &&
         hv_args_double(opts, nopts, "threshold-ns", 0, 1e9, &thr_ns, err, sizeof err)) ||
        (hv_args_get(opts, nopts, "tmin-samples") &&
         hv_args_long(opts, nopts, "tmin-samples", 1000, 1L << 40, &tmin_samples, err, sizeof err)) ||
        (hv_args_get(opts, nopts, "rt-prio") &&
         hv_args_long(opts, nopts, "rt-prio", 0, 99, &rt_prio, err, sizeof err)) ||
        (hv_args_get(opts, nopts, "interval-ns") &&
         hv_args_double(opts, nopts, "interval-ns", 1000, 1e9, &interval_ns, err, sizeof err)) ||
        (hv_args_get(opts, nopts, "start-mono-ns") &&
         hv_args_double(opts, nopts, "start-mono-ns", 0, 1.8e19, &start_mono, err, sizeof err)))
        DIE("%s", err);
    const char *method = hv_args_get(opts, nopts, "method");
    if (method && strcmp(method, "spin") != 0 && strcmp(method, "timer") != 0)
        DIE("unknown --method '%s' (spin or timer)", method);
    g_timer_method = method && strcmp(method, "timer") == 0;
    if (g_timer_method) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* threads inherit it: 1 ns, not 50 us */
    const char *out = hv_args_get(opts, nopts, "out");
    if (!out) DIE("option '--out' is required");
    /* the collector ends with whatever started it (hpcvar, or hv_noise_nodes), even after a SIGKILL there */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0UL, 0UL, 0UL);
    if (getppid() == 1) DIE("the process that started the collector is gone");
    hv_watch_start("hv_noise_collect"); /* also when started through ip netns exec or a shell (hv_watch.h) */
    long ncpu_sys = sysconf(_SC_NPROCESSORS_CONF);
    for (size_t i = 0; i < ncpu; i++)
        if (cpus[i] >= ncpu_sys || cpus[i] >= CPU_SETSIZE)
            DIE("CPU %lld does not exist (this machine has %ld)", (long long)cpus[i], ncpu_sys);

    hv_timer tm;
    if (hv_timer_init(&tm, HV_TIMER_TSC, err, sizeof err) != 0) DIE("%s", err);
    g_ticks_per_ns = tm.ticks_per_ns;
    g_threshold_ns = thr_ns;
    g_tmin_samples = tmin_samples;
    g_rt_prio = (int)rt_prio;
    g_interval_ticks = (uint64_t)(interval_ns * tm.ticks_per_ns + 0.5);

    cpu_state *cs = calloc(ncpu, sizeof *cs);
    if (!cs) DIE("out of memory");
    for (size_t i = 0; i < ncpu; i++) {
        cs[i].cpu = (int)cpus[i];
        cs[i].cap = (size_t)max_events;
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
    while (atomic_load(&g_ready) < (int)ncpu) usleep(1000);
    if (hv_args_get(opts, nopts, "start-from-stdin")) {
        /* started by hv_noise_nodes: say that every thread is calibrated, then read the agreed start
         * (CLOCK_MONOTONIC_RAW ns), so that no node's start-up time can make it miss the start */
        printf("ready\n");
        fflush(stdout);
        char line[64];
        if (!fgets(line, sizeof line, stdin) || sscanf(line, "%lf", &start_mono) != 1 || start_mono <= 0)
            DIE("no start time on standard input (--start-from-stdin)");
    }

    /* snapshots just before the start and just after the end */
    jbuf before = {0};
    jb_put(&before, "{", 1);
    jb_file(&before, "interrupts", "/proc/interrupts");
    jb_file(&before, "softirqs", "/proc/softirqs");
    jb_file(&before, "stat", "/proc/stat");
    jb_put(&before, "}", 1);
    uint64_t m0 = hv_mono_ns(), c0 = __rdtsc(), m0b = hv_mono_ns();
    if (start_mono > 0) {
        /* a start agreed with other nodes (hv_noise_nodes): that CLOCK_MONOTONIC_RAW time, in TSC */
        const double ahead_ns = start_mono - (double)(m0 + m0b) / 2.0;
        if (ahead_ns < 1e5)
            DIE("the agreed start (--start-mono-ns) passed %.3f ms before this collector was ready; give more margin",
                -ahead_ns / 1e6);
        g_t0 = c0 + (uint64_t)(ahead_ns * tm.ticks_per_ns);
    } else {
        g_t0 = c0 + (uint64_t)(2e6 * tm.ticks_per_ns);  /* start 2 ms from now, on every CPU */
    }
    g_t1 = g_t0 + (uint64_t)(duration * 1e9 * tm.ticks_per_ns);
    atomic_store_explicit(&g_go, 1, memory_order_release);
    for (size_t i = 0; i < ncpu; i++) pthread_join(cs[i].th, NULL);
    uint64_t m1 = hv_mono_ns(), c1 = __rdtsc(), m1b = hv_mono_ns();
    jbuf after = {0};
    jb_put(&after, "{", 1);
    jb_file(&after, "interrupts", "/proc/interrupts");
    jb_file(&after, "softirqs", "/proc/softirqs");
    jb_file(&after, "stat", "/proc/stat");
    jb_put(&after, "}", 1);
    /* TSC frequency over the whole run against CLOCK_MONOTONIC_RAW */
    double run_hz = (double)(c1 - c0) / ((double)((m1 + m1b) / 2 - (m0 + m0b) / 2)) * 1e9;

    jbuf m = {0};
    struct utsname un;
    uname(&un);
    jb_put(&m, "{", 1);
    jb_key(&m, "tool");
    jb_str(&m, "hv_noise_collect");
    jb_key(&m, "argv");
    jb_str(&m, hv_args_get(opts, nopts, "argv") ? hv_args_get(opts, nopts, "argv") : "");
    jb_key(&m, "kernel");
    jb_str(&m, un.release);
    jb_key(&m, "kernel_version");
    jb_str(&m, un.version);
    jb_key(&m, "hostname");
    jb_str(&m, un.nodename);
    jb_key(&m, "machine");
    jb_str(&m, un.machine);
    jb_file(&m, "kernel_cmdline", "/proc/cmdline");
    jb_file(&m, "smt_active", "/sys/devices/system/cpu/smt/active");
    jb_file(&m, "clocksource", "/sys/devices/system/clocksource/clocksource0/current_clocksource");
    jb_file(&m, "isolated", "/sys/devices/system/cpu/isolated");
    jb_file(&m, "nohz_full", "/sys/devices/system/cpu/nohz_full");
    jb_key(&m, "hypervisor");
    jb_printf(&m, "%d", hypervisor_bit());
    jb_key(&m, "invariant_tsc");
    jb_printf(&m, "%d", tm.invariant_tsc);
    jb_key(&m, "tsc_hz");
    jb_printf(&m, "%.3f", tm.tsc_hz);
    jb_key(&m, "ns_per_cycle");
    jb_printf(&m, "%.12g", 1.0 / tm.ticks_per_ns);
    jb_key(&m, "tsc_calib_method");
    jb_str(&m, "CLOCK_MONOTONIC_RAW, 5 brackets of 50 ms, tightest bracket");
    jb_key(&m, "tsc_calib_spread_ppm");
    jb_printf(&m, "%.3f", tm.calib_spread_ppm);
    jb_key(&m, "tsc_hz_over_run");
    jb_printf(&m, "%.3f", run_hz);
    jb_key(&m, "tsc_read_cost_ns");
    jb_printf(&m, "%.3f", tm.cost_ns);
    jb_key(&m, "duration_s");
    jb_printf(&m, "%.9g", duration);
    jb_key(&m, "threshold_ns_requested");
    jb_printf(&m, "%.3f", thr_ns);
    jb_key(&m, "tmin_samples");
    jb_printf(&m, "%ld", tmin_samples);
    jb_key(&m, "max_events");
    jb_printf(&m, "%ld", max_events);
    jb_key(&m, "proc_before");
    jb_put(&m, before.p, before.n);
    jb_key(&m, "proc_after");
    jb_put(&m, after.p, after.n);
    jb_key(&m, "t0_tsc");
    jb_printf(&m, "%llu", (unsigned long long)g_t0);
    jb_key(&m, "t0_mono_raw_ns");
    jb_printf(&m, "%.0f", (double)(m0 + m0b) / 2.0 + (double)(g_t0 - c0) / tm.ticks_per_ns);
    jb_key(&m, "method");
    jb_str(&m, g_timer_method ? "timer" : "spin");
    if (g_timer_method) {
        jb_key(&m, "interval_ns");
        jb_printf(&m, "%.0f", interval_ns);
    }
    jb_key(&m, "pid");
    jb_printf(&m, "%ld", (long)getpid());
    jb_key(&m, "window_mono_ns");
    jb_printf(&m, "%llu", (unsigned long long)((m1 + m1b) / 2 - (m0 + m0b) / 2));
    jb_put(&m, "}", 1);

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", out, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) DIE("cannot write '%s': %s", tmp, strerror(errno));
    fwrite("HVJTR\r\n\x1a", 1, 8, f);
    put_u32(f, 1);
    put_u32(f, (uint32_t)ncpu);
    double fhz = tm.tsc_hz;
    fwrite(&fhz, 8, 1, f);
    put_u64(f, m.n);
    fwrite(m.p, 1, m.n, f);
    for (size_t i = 0; i < ncpu; i++) {
        cpu_state *c = &cs[i];
        jbuf cm = {0};
        jb_put(&cm, "{", 1);
        jb_key(&cm, "t_min_cycles");
        jb_printf(&cm, "%llu", (unsigned long long)c->t_min);
        jb_key(&cm, "t_min_end_cycles");
        jb_printf(&cm, "%llu", (unsigned long long)c->t_min_end);
        jb_key(&cm, "threshold_cycles");
        jb_printf(&cm, "%llu", (unsigned long long)c->threshold);
        jb_key(&cm, "iterations");
        jb_printf(&cm, "%llu", (unsigned long long)c->iters);
        jb_key(&cm, "recorded_cycles");
        jb_printf(&cm, "%llu", (unsigned long long)c->length);
        jb_key(&cm, "overflow");
        jb_put(&cm, c->flags & FLAG_OVERFLOW ? "true" : "false", c->flags & FLAG_OVERFLOW ? 4 : 5);
        jb_key(&cm, "migrations");
        jb_printf(&cm, "%llu", (unsigned long long)c->mig_events);
        jb_key(&cm, "aux_cpu_start");
        jb_printf(&cm, "%u", c->aux_start & 0xfffu);
        jb_key(&cm, "aux_cpu_end");
        jb_printf(&cm, "%u", c->aux_end & 0xfffu);
        jb_key(&cm, "tid");
        jb_printf(&cm, "%ld", c->tid);
        jb_key(&cm, "rt_prio");
        jb_printf(&cm, "%d", c->rt ? g_rt_prio : 0);
        jb_key(&cm, "mlocked");
        jb_put(&cm, c->mlocked ? "true" : "false", c->mlocked ? 4 : 5);
        jb_key(&cm, "voluntary_ctxt_switches");
        jb_printf(&cm, "%ld", c->vcs1 >= 0 && c->vcs0 >= 0 ? c->vcs1 - c->vcs0 : -1);
        jb_key(&cm, "nonvoluntary_ctxt_switches");
        jb_printf(&cm, "%ld", c->nvcs1 >= 0 && c->nvcs0 >= 0 ? c->nvcs1 - c->nvcs0 : -1);
        jb_put(&cm, "}", 1);
        uint64_t lead = c->n ? c->start[0] : 0;
        put_u32(f, (uint32_t)c->cpu);
        put_u32(f, c->flags);
        put_u64(f, c->n);
        put_u64(f, lead);
        put_u64(f, cm.n);
        fwrite(cm.p, 1, cm.n, f);
        free(cm.p);
        /* durations: difference - t_min; gaps: to the next start, the last wraps */
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
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) DIE("cannot write '%s': %s", tmp, strerror(errno));
    if (rename(tmp, out) != 0) DIE("cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
    for (size_t i = 0; i < ncpu; i++) {
        fprintf(stderr, "cpu %d: %zu events, t_min %llu cycles, threshold %llu cycles%s%s\n", cs[i].cpu, cs[i].n,
                (unsigned long long)cs[i].t_min, (unsigned long long)cs[i].threshold,
                cs[i].flags & FLAG_OVERFLOW ? ", BUFFER FULL" : "", cs[i].flags & FLAG_MIGRATED ? ", MIGRATED" : "");
        free(cs[i].start);
        free(cs[i].delta);
    }
    free(cs);
    free(cpus);
    free(m.p);
    free(before.p);
    free(after.p);
    return 0;
}
