/* hv_watch: a native program stops when the hpcvar process that started it is gone, even after kill -9
 * there (docs/robustness.md). MPI ranks are children of hydra proxies, Open MPI daemons or slurmstepd,
 * not of hpcvar, so a parent-death signal cannot reach them: instead hpcvar exports
 *   HPCVAR_WATCH_PID    its pid            HPCVAR_WATCH_START  its start time (/proc/PID/stat field 22)
 *   HPCVAR_WATCH_BOOT   the boot id        HPCVAR_WATCH_PIDNS  its pid namespace (/proc/self/ns/pid link)
 * and hv_watch_start, when the program runs on the same machine and in the same pid namespace, opens a
 * pidfd on that process and starts a thread blocked in poll() on it: no periodic wake-up disturbs what is
 * measured. When hpcvar exits the thread prints one line and ends the process (_exit(1)). Elsewhere
 * (another node under srun, no variables) it does nothing: srun's own teardown applies there.
 * Without pidfd_open (Linux < 5.3) the thread checks the start time every 0.5 s. */
#ifndef HV_WATCH_H
#define HV_WATCH_H
/* Returns 1 when watching, 0 when there is nothing to watch; exits at once if hpcvar is already gone. */
int hv_watch_start(const char *prog);
#endif
