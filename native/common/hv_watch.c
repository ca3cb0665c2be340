#include "hv_watch.h"
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

typedef struct {
    long pid;
    char start[32];
    int pidfd; /* -1: poll the start time */
    const char *prog;
} hv_watch_ctx;

static hv_watch_ctx hv_watch_state; /* one watchdog per process, set once before its thread starts */

static int read_line(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *ok = fgets(buf, (int)len, f);
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

/* Field 22 (starttime) of /proc/PID/stat into out; -1 if the process does not exist. */
static int start_time(long pid, char *out, size_t len) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p++;
    /* after the command: field 3 (state) ... field 22 (starttime) is the 20th token */
    char *save = NULL, *tok = strtok_r(p, " ", &save);
    for (int i = 1; tok && i < 20; i++) tok = strtok_r(NULL, " ", &save);
    if (!tok) return -1;
    snprintf(out, len, "%s", tok);
    return 0;
}

static int alive(const hv_watch_ctx *w) {
    char now[32];
    return start_time(w->pid, now, sizeof now) == 0 && strcmp(now, w->start) == 0;
}

static void gone(const hv_watch_ctx *w) {
    char msg[256];
    int n = snprintf(msg, sizeof msg, "hpcvar: %s stops: the hpcvar process that started it (pid %ld) is gone\n",
                     w->prog, w->pid);
    if (n > 0) {
        ssize_t rc = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)rc;
    }
    _exit(1);
}

static void *watch(void *arg) {
    hv_watch_ctx *w = arg;
    if (w->pidfd >= 0) {
        struct pollfd p = {w->pidfd, POLLIN, 0};
        for (;;) {
            int rc = poll(&p, 1, -1);
            if (rc > 0) gone(w);
            if (rc < 0 && errno != EINTR) break; /* cannot watch any more: fall back to polling */
        }
    }
    for (;;) {
        struct timespec ts = {0, 500000000L};
        nanosleep(&ts, NULL);
        if (!alive(w)) gone(w);
    }
    return NULL;
}

int hv_watch_start(const char *prog) {
    const char *pid_s = getenv("HPCVAR_WATCH_PID"), *start = getenv("HPCVAR_WATCH_START");
    const char *boot = getenv("HPCVAR_WATCH_BOOT"), *pidns = getenv("HPCVAR_WATCH_PIDNS");
    if (!pid_s || !start || !boot || !pidns) return 0;
    char mine[128] = "", ns[128] = "";
    if (read_line("/proc/sys/kernel/random/boot_id", mine, sizeof mine) != 0 || strcmp(mine, boot) != 0) return 0;
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    if (n <= 0) return 0;
    ns[n] = 0;
    if (strcmp(ns, pidns) != 0) return 0;
    char *end = NULL;
    long pid = strtol(pid_s, &end, 10);
    if (!end || *end || pid <= 0 || strlen(start) >= sizeof hv_watch_state.start) return 0;
    hv_watch_ctx *w = &hv_watch_state;
    w->pid = pid;
    snprintf(w->start, sizeof w->start, "%s", start);
    w->prog = prog;
    w->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    /* checked after opening the pidfd: if it is the right process now, the pidfd follows that process */
    if (!alive(w)) gone(w);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread takes no signal meant for the program */
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 * 1024);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int rc = pthread_create(&th, &at, watch, w);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc == 0;
}
