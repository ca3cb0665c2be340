#include "hv_timer.h"
#include <stdio.h>
#include <string.h>
#if HV_HAVE_TSC
#include <cpuid.h>
#endif

int hv_timer_parse(const char *name, hv_timer_kind *out) {
    if (strcmp(name, "tsc") == 0) {
        *out = HV_TIMER_TSC;
        return 0;
    }
    if (strcmp(name, "mono") == 0) {
        *out = HV_TIMER_MONO;
        return 0;
    }
    if (strcmp(name, "wtime") == 0) {
        *out = HV_TIMER_WTIME;
        return 0;
    }
    return -1;
}

const char *hv_timer_name(hv_timer_kind k) {
    switch (k) {
    case HV_TIMER_TSC: return "tsc";
    case HV_TIMER_MONO: return "mono";
    case HV_TIMER_WTIME: return "wtime";
    }
    return "unknown";
}

int hv_cpu_has_invariant_tsc(void) {
#if HV_HAVE_TSC
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1u; /* CPUID.80000007H:EDX[8] = invariant TSC */
#else
    return -1;
#endif
}

/* One calibration bracket: MONO, TSC, MONO at both ends of a busy span of
 * about span_ns. *width gets the uncertainty of the bracket (ns): the sum of
 * the two MONO read pairs around the TSC reads. */
static double calibrate_once(uint64_t span_ns, double *width) {
#if HV_HAVE_TSC
    uint64_t m0a = hv_mono_ns(), c0 = __rdtsc(), m0b = hv_mono_ns();
    uint64_t target = m0b + span_ns, m1a, c1, m1b;
    do { m1a = hv_mono_ns(); } while (m1a < target);
    c1 = __rdtsc();
    m1b = hv_mono_ns();
    double dns = (double)((m1a + m1b) / 2 - (m0a + m0b) / 2);
    *width = (double)(m0b - m0a) + (double)(m1b - m1a);
    return (double)(c1 - c0) / dns;
#else
    (void)span_ns;
    *width = 0;
    return 1.0;
#endif
}

static void measure_resolution(hv_timer *t) {
    /* cost: mean over a batch; resolution: smallest non-zero increment seen */
    enum { N = 20000 };
    uint64_t prev = hv_ticks(t), minstep = UINT64_MAX;
    uint64_t start = prev;
    for (int i = 0; i < N; i++) {
        uint64_t now = hv_ticks(t);
        if (now > prev && now - prev < minstep) minstep = now - prev;
        prev = now;
    }
    t->cost_ns = hv_ticks_to_ns(t, prev - start) / N;
    t->resolution_ns = minstep == UINT64_MAX ? 0.0 : hv_ticks_to_ns(t, minstep);
}

int hv_timer_init(hv_timer *t, hv_timer_kind kind, char *err, int errlen) {
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->ticks_per_ns = 1.0;
    t->invariant_tsc = hv_cpu_has_invariant_tsc();
    if (kind == HV_TIMER_TSC) {
        if (!HV_HAVE_TSC || t->invariant_tsc != 1) {
            snprintf(err, errlen,
                     "the TSC is not invariant on this CPU (CPUID 0x80000007 EDX bit 8); use --timer mono");
            return -1;
        }
        /* 5 brackets of 50 ms (250 ms in all). The estimate is taken from
         * the bracket whose MONO reads were tightest (an interrupt between the
         * reads widens a bracket); the spread (max-min over all brackets) is
         * reported so that an unstable clock shows. */
        double r, w, best_w = 1e300, lo = 1e300, hi = 0;
        for (int i = 0; i < 5; i++) {
            r = calibrate_once(50000000ull, &w);
            if (w < best_w) {
                best_w = w;
                t->ticks_per_ns = r;
            }
            if (r < lo) lo = r;
            if (r > hi) hi = r;
        }
        t->tsc_hz = t->ticks_per_ns * 1e9;
        t->calib_spread_ppm = (hi - lo) / t->ticks_per_ns * 1e6;
    } else if (kind == HV_TIMER_WTIME && t->wtime == NULL) {
        snprintf(err, errlen, "the wtime timer needs MPI (use hv_mpi_timer_init)");
        return -1;
    }
    measure_resolution(t);
    return 0;
}

uint64_t hv_spin_ns(const hv_timer *t, double ns) {
    uint64_t start = hv_ticks(t);
    uint64_t want = hv_ns_to_ticks(t, ns), now;
    do { now = hv_ticks(t); } while (now - start < want);
    return now - start;
}
