/* hv_noise_inject: a user-space noise injector for experiments.
 *
 * On each CPU of --cpus, one pinned thread (SCHED_FIFO priority --rt-prio
 * where allowed, else the normal scheduler, reported on stderr) either
 *   - periodic mode: wakes at t0 + phase + k * period (absolute
 *     clock_nanosleep on CLOCK_MONOTONIC, so that errors do not accumulate)
 *     and burns on the TSC until --burn-ns after that wake-up time, for
 *     --time seconds (see burst()); or
 *   - replay mode (--replay FILE): FILE holds one "start_ns duration_ns" pair
 *     per line, starts relative to the injector's start and increasing; the
 *     thread sleeps until each start and burns its duration. --time bounds the
 *     replay; --loop repeats the file (period = its last line's "length_ns"
 *     given by --replay-length-ns).
 * At the end, one line per CPU on stdout:
 * "cpu=C bursts=N burned_ns=X late_ns_p50=P late_ns_max=Y overruns=K rt=0|1"
 * (P: the median wake-up lateness, to 1 us; -1 without bursts). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include "hv_args.h"
#include "hv_timer.h"
#include "hv_watch.h"

#define DIE(...) \
    do { \
        fprintf(stderr, "hv_noise_inject: " __VA_ARGS__); \
        fputc('\n', stderr); \
        exit(1); \
    } while (0)

enum { LATE_BINS = 10000 }; /* 0 .. 10 ms */

typedef struct {
    int cpu, rt;
    long bursts, overruns;
    double burned_ns, late_max_ns;
    uint32_t late_hist[LATE_BINS + 1]; /* wake-up lateness in 1 us bins; the last one is "later" */
    pthread_t th;
} inj_state;

static hv_timer g_tm;
static double g_period_ns, g_burn_ns, g_phase_ns, g_time_ns, g_replay_len_ns;
static int g_prio, g_loop;
static uint64_t g_t0_ns;
static double *g_rs, *g_rd; /* replay starts and durations (ns) */
static size_t g_rn;

static void sleep_until(uint64_t mono_ns) {
    struct timespec ts = {(time_t)(mono_ns / 1000000000ull), (long)(mono_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}
static uint64_t mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A burst is due at due_ns and ends at due_ns + burn_ns: the time the thread
 * took to run after its timer fired (interrupt, wake-up, switch in) is part of
 * the CPU the burst takes from whatever ran there, so the spin covers only
 * the rest. A wake-up later than the whole burst burns nothing: that detour
 * is the wake-up's length, longer than promised (counted in "overruns").
 * What remains on top of the promised length is the switch back. */
static void burst(inj_state *s, uint64_t due_ns, double burn_ns) {
    sleep_until(due_ns);
    uint64_t now = mono_now();
    double late = now > due_ns ? (double)(now - due_ns) : 0.0;
    if (late > s->late_max_ns) s->late_max_ns = late;
    s->late_hist[late < LATE_BINS * 1e3 ? (size_t)(late / 1e3) : LATE_BINS]++;
    if (late < burn_ns) s->burned_ns += hv_ticks_to_ns(&g_tm, hv_spin_ns(&g_tm, burn_ns - late));
    else s->overruns++;
    s->bursts++;
}

/* median wake-up lateness (ns, to the 1 us bin's middle); -1 when there was no burst */
static double late_p50(const inj_state *s) {
    if (s->bursts == 0) return -1;
    long half = (s->bursts + 1) / 2, seen = 0;
    for (size_t b = 0; b <= LATE_BINS; b++) {
        seen += s->late_hist[b];
        if (seen >= half) return b == LATE_BINS ? LATE_BINS * 1e3 : ((double)b + 0.5) * 1e3;
    }
    return -1;
}

static void *injector(void *arg) {
    inj_state *s = arg;
    struct sched_param sp = {.sched_priority = g_prio};
    s->rt = g_prio > 0 && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
    /* the kernel may defer a normal thread's timer by its slack (50 us by default) */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    const uint64_t t0 = g_t0_ns, end = t0 + (uint64_t)g_time_ns;
    if (g_rn == 0) {
        for (long k = 0;; k++) {
            uint64_t due = t0 + (uint64_t)(g_phase_ns + (double)k * g_period_ns);
            if (due + (uint64_t)g_burn_ns > end) break;
            burst(s, due, g_burn_ns);
        }
    } else {
        for (long rep = 0;; rep++) {
            double base = (double)rep * g_replay_len_ns;
            int stop = 0;
            for (size_t i = 0; i < g_rn; i++) {
                uint64_t due = t0 + (uint64_t)(base + g_rs[i]);
                if (due + (uint64_t)g_rd[i] > end) {
                    stop = 1;
                    break;
                }
                burst(s, due, g_rd[i]);
            }
            if (stop || !g_loop) break;
        }
    }
    return NULL;
}

static void load_replay(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) DIE("cannot read '%s': %s", path, strerror(errno));
    size_t cap = 1024;
    g_rs = malloc(cap * sizeof *g_rs);
    g_rd = malloc(cap * sizeof *g_rd);
    char line[256];
    long ln = 0;
    double last = -1;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (line[0] == '#' || line[0] == '\n') continue;
        double a, b;
        char extra;
        if (sscanf(line, "%lf %lf %c", &a, &b, &extra) != 2 || a < 0 || b < 0 || a < last)
            DIE("%s:%ld: expected 'start_ns duration_ns' with increasing starts", path, ln);
        if (g_rn == cap) {
            cap *= 2;
            g_rs = realloc(g_rs, cap * sizeof *g_rs);
            g_rd = realloc(g_rd, cap * sizeof *g_rd);
            if (!g_rs || !g_rd) DIE("out of memory reading '%s'", path);
        }
        g_rs[g_rn] = a;
        g_rd[g_rn++] = b;
        last = a;
    }
    fclose(f);
    if (g_rn == 0) DIE("%s: no 'start_ns duration_ns' line", path);
}

/* The start on every CPU: 20 ms from now; with at_clock, the first burst at the next multiple of the period of
 * CLOCK_REALTIME (plus --phase-ns), so that injectors started separately on nodes whose clocks agree (NTP/PTP;
 * one clock on the testbed) burst at the same instants. */
static uint64_t start_ns(int at_clock) {
    if (!at_clock) return mono_now() + 20000000ull;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    const uint64_t m = mono_now();
    const double r = (double)rt.tv_sec * 1e9 + (double)rt.tv_nsec;
    const double next = (double)((uint64_t)((r + 20e6) / g_period_ns) + 1) * g_period_ns;
    return m + (uint64_t)(next - r);
}

/* One CPU's line on stdout (and a note on stderr when SCHED_FIFO was refused). */
static void report(inj_state *s) {
    if (g_prio > 0 && !s->rt)
        fprintf(stderr,
                "hv_noise_inject: SCHED_FIFO refused on CPU %d (needs root or CAP_SYS_NICE); "
                "bursts may be delayed or sliced\n",
                s->cpu);
    printf("cpu=%d bursts=%ld burned_ns=%.0f late_ns_p50=%.0f late_ns_max=%.0f overruns=%ld rt=%d\n", s->cpu, s->bursts,
           s->burned_ns, late_p50(s), s->late_max_ns, s->overruns, s->rt);
}

int main(int argc, char **argv) {
    hv_opt opts[] = {
        HV_OPT_RAW("cpus", 0, "comma list of CPUs"),
        HV_OPT_RAW("time", 0, "injection time in seconds"),
        HV_OPT_RAW("period-ns", 0, "period of the bursts (ns)"),
        HV_OPT_RAW("burn-ns", 0, "length of one burst (ns)"),
        HV_OPT_RAW("phase-ns", 0, "offset of the first burst (ns)"),
        HV_OPT_RAW("at-clock", 1, "periodic: bursts at multiples of the period of CLOCK_REALTIME, plus the phase"),
        HV_OPT_RAW("rt-prio", 0, "SCHED_FIFO priority (0: normal scheduler)"),
        HV_OPT_RAW("replay", 0, "file of 'start_ns duration_ns' lines to replay"),
        HV_OPT_RAW("replay-length-ns", 0, "length of the replayed trace (for --loop)"),
        HV_OPT_RAW("loop", 1, "repeat the replay until --time"),
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    char err[256];
    int64_t *cpus;
    size_t ncpu;
    long prio = 50;
    if (hv_args_parse(argc, argv, opts, nopts, err, sizeof err) ||
        hv_args_list(opts, nopts, "cpus", &cpus, &ncpu, err, sizeof err) ||
        hv_args_double(opts, nopts, "time", 1e-3, 1e7, &g_time_ns, err, sizeof err) ||
        (hv_args_get(opts, nopts, "rt-prio") && hv_args_long(opts, nopts, "rt-prio", 0, 99, &prio, err, sizeof err)) ||
        (hv_args_get(opts, nopts, "phase-ns") &&
         hv_args_double(opts, nopts, "phase-ns", 0, 1e15, &g_phase_ns, err, sizeof err)))
        DIE("%s", err);
    g_time_ns *= 1e9;
    hv_watch_start("hv_noise_inject"); /* ends with the hpcvar that started it (hv_watch.h) */
    g_prio = (int)prio;
    const char *rp = hv_args_get(opts, nopts, "replay");
    if (rp) {
        load_replay(rp);
        g_loop = hv_args_get(opts, nopts, "loop") != NULL;
        if (g_loop && hv_args_double(opts, nopts, "replay-length-ns", 1, 1e18, &g_replay_len_ns, err, sizeof err))
            DIE("%s", err);
    } else if (hv_args_double(opts, nopts, "period-ns", 1000, 1e12, &g_period_ns, err, sizeof err) ||
               hv_args_double(opts, nopts, "burn-ns", 1, 1e12, &g_burn_ns, err, sizeof err)) {
        DIE("%s", err);
    } else if (g_burn_ns >= g_period_ns) {
        DIE("--burn-ns (%g) must be shorter than --period-ns (%g)", g_burn_ns, g_period_ns);
    }
    if (hv_timer_init(&g_tm, HV_TIMER_TSC, err, sizeof err) != 0 &&
        hv_timer_init(&g_tm, HV_TIMER_MONO, err, sizeof err) != 0)
        DIE("%s", err);

    inj_state *ss = calloc(ncpu, sizeof *ss);
    if (!ss) DIE("out of memory");
    g_t0_ns = start_ns(hv_args_get(opts, nopts, "at-clock") && !hv_args_get(opts, nopts, "replay"));
    for (size_t i = 0; i < ncpu; i++) {
        ss[i].cpu = (int)cpus[i];
        pthread_attr_t at;
        pthread_attr_init(&at);
        cpu_set_t set;
        CPU_ZERO(&set);
        if (cpus[i] >= CPU_SETSIZE) DIE("CPU %lld does not exist", (long long)cpus[i]);
        CPU_SET(ss[i].cpu, &set);
        if (pthread_attr_setaffinity_np(&at, sizeof set, &set) != 0) DIE("cannot pin a thread to CPU %d", ss[i].cpu);
        int rc = pthread_create(&ss[i].th, &at, injector, &ss[i]);
        if (rc) DIE("cannot start the thread for CPU %d: %s", ss[i].cpu, strerror(rc));
        pthread_attr_destroy(&at);
    }
    for (size_t i = 0; i < ncpu; i++) {
        pthread_join(ss[i].th, NULL);
        report(&ss[i]);
    }
    free(ss);
    free(cpus);
    free(g_rs);
    free(g_rd);
    return 0;
}
