/* hv_probe: describes this machine's clocks without MPI, as key=value lines:
 * invariant TSC, calibrated TSC frequency, resolution and cost of each timer.
 * Used by `hpcvar info` and the run metadata. */
#include <stdio.h>
#include "hv_timer.h"

int main(void) {
    char err[256];
    printf("invariant_tsc=%d\n", hv_cpu_has_invariant_tsc());
    hv_timer_kind kinds[] = {HV_TIMER_TSC, HV_TIMER_MONO};
    for (int i = 0; i < 2; i++) {
        hv_timer t;
        const char *name = hv_timer_name(kinds[i]);
        if (hv_timer_init(&t, kinds[i], err, sizeof err) != 0) {
            printf("%s_error=%s\n", name, err);
            continue;
        }
        if (kinds[i] == HV_TIMER_TSC) {
            printf("tsc_hz=%.1f\n", t.tsc_hz);
            printf("tsc_calib_spread_ppm=%.3f\n", t.calib_spread_ppm);
        }
        printf("%s_resolution_ns=%.3f\n", name, t.resolution_ns);
        printf("%s_cost_ns=%.3f\n", name, t.cost_ns);
    }
    return 0;
}
