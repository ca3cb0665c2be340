/* hv_timer: cycle-accurate timing with a run-time choice of clock.
 *
 * Two clocks are offered, chosen at run time (never at compile time):
 *   HV_TIMER_TSC    rdtsc on x86-64 with an invariant TSC, calibrated against
 *                   CLOCK_MONOTONIC_RAW (minimum-bracket method, >= 200 ms);
 *   HV_TIMER_MONO   clock_gettime(CLOCK_MONOTONIC_RAW) in ns (portable fallback).
 * MPI programs may also use MPI_Wtime through hv_mpi.h (HV_TIMER_WTIME).
 * The resolution (smallest observed non-zero increment) and the cost of one
 * read are measured at start-up and written into every raw output header. */
#ifndef HV_TIMER_H
#define HV_TIMER_H
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HV_HAVE_TSC 1
#else
#define HV_HAVE_TSC 0
#endif

typedef enum { HV_TIMER_TSC = 0, HV_TIMER_MONO = 1, HV_TIMER_WTIME = 2 } hv_timer_kind;

typedef struct {
    hv_timer_kind kind;
    double ticks_per_ns;       /* TSC: calibrated GHz; MONO: 1.0 */
    double tsc_hz;             /* calibrated TSC frequency (0 when not TSC) */
    double calib_spread_ppm;   /* spread of the calibration brackets (ppm) */
    int invariant_tsc;         /* 1 if CPUID reports invariant TSC, 0 if not, -1 unknown */
    double resolution_ns;      /* smallest observed non-zero increment */
    double cost_ns;            /* cost of one read */
    double (*wtime)(void);     /* used for HV_TIMER_WTIME (set by hv_mpi) */
} hv_timer;

/* Parse "tsc", "mono" or "wtime"; returns -1 on an unknown name. */
int hv_timer_parse(const char *name, hv_timer_kind *out);
const char *hv_timer_name(hv_timer_kind k);
/* Initialise and calibrate; returns 0 or -1 with a message in err. TSC falls
 * back to an error (not silently to another clock) when not invariant. */
int hv_timer_init(hv_timer *t, hv_timer_kind kind, char *err, int errlen);
int hv_cpu_has_invariant_tsc(void);

static inline uint64_t hv_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Read the clock in ticks. The branch is perfectly predictable. */
static inline uint64_t hv_ticks(const hv_timer *t) {
#if HV_HAVE_TSC
    if (t->kind == HV_TIMER_TSC) return __rdtsc();
#endif
    if (t->kind == HV_TIMER_WTIME) return (uint64_t)(t->wtime() * 1e9);
    return hv_mono_ns();
}

static inline double hv_ticks_to_ns(const hv_timer *t, uint64_t ticks) { return (double)ticks / t->ticks_per_ns; }
static inline uint64_t hv_ns_to_ticks(const hv_timer *t, double ns) { return (uint64_t)(ns * t->ticks_per_ns + 0.5); }

/* Busy-wait for ns nanoseconds on the timer, touching no memory. Returns the
 * ticks actually elapsed. */
uint64_t hv_spin_ns(const hv_timer *t, double ns);
#endif
