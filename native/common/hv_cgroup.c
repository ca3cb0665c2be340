/* hv_cgroup: throttled time of this process's cgroup from cpu.stat (see hv_cgroup.h). */
#include "hv_cgroup.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HV_CG_MAX 16 /* levels summed: deeper hierarchies count their 16 lowest */

static char cg_files[HV_CG_MAX][PATH_MAX];
static int cg_count = -1;

/* Does the comma-separated list `list` hold `word`? */
static int has_word(const char *list, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, word, n) == 0 && (p[n] == ',' || p[n] == '\0' || p[n] == '\n')) return 1;
    return 0;
}

/* This process's path in the cpu hierarchy: the v1 line naming the cpu controller, else the v2 line. */
static int own_path(char *v1, char *v2, size_t len) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[PATH_MAX + 128];
    v1[0] = v2[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = '\0';
        c2[1 + strcspn(c2 + 1, "\n")] = '\0';
        if (has_word(c1 + 1, "cpu")) snprintf(v1, len, "%s", c2 + 1);
        else if (strcmp(line, "0") == 0 && c1[1] == '\0') snprintf(v2, len, "%s", c2 + 1);
    }
    if (f) fclose(f);
    return v1[0] || v2[0];
}

/* The directory of `path` in a mount of the hierarchy (v1 with the cpu controller, or cgroup2): its mount
 * point plus the path below the mount's root. 0 when no such mount holds it. */
static int mounted_dir(const char *path, int v2, char *dir, size_t len, char *top, size_t toplen) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[3 * PATH_MAX], root[PATH_MAX], point[PATH_MAX], type[64], opts[512];
    int found = 0;
    while (!found && f && fgets(line, sizeof line, f)) {
        char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2 ||
            sscanf(dash + 3, "%63s %*s %511s", type, opts) != 2)
            continue;
        const int ok = v2 ? strcmp(type, "cgroup2") == 0 : strcmp(type, "cgroup") == 0 && has_word(opts, "cpu");
        const size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
        if (!ok || strncmp(path, root, rl) != 0 || (path[rl] != '/' && path[rl] != '\0')) continue;
        snprintf(dir, len, "%s%s", point, path + rl);
        snprintf(top, toplen, "%s", point);
        found = 1;
    }
    if (f) fclose(f);
    return found;
}

int hv_cgroup_open(void) {
    char v1[PATH_MAX], v2[PATH_MAX], dir[PATH_MAX], top[PATH_MAX];
    cg_count = 0;
    if (!own_path(v1, v2, sizeof v1)) return 0;
    /* the v1 cpu hierarchy where it is mounted, else the unified one (a hybrid system may list both) */
    if (!(v1[0] && mounted_dir(v1, 0, dir, sizeof dir, top, sizeof top)) &&
        !(v2[0] && mounted_dir(v2, 1, dir, sizeof dir, top, sizeof top)))
        return 0;
    const size_t toplen = strlen(top);
    for (;;) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
        if (cg_count < HV_CG_MAX) snprintf(cg_files[cg_count++], PATH_MAX, "%.4085s/cpu.stat", dir);
        if (n <= toplen) break;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < toplen) break;
        *slash = '\0';
    }
    return cg_count;
}

double hv_cgroup_throttled_ns(void) {
    if (cg_count < 0) hv_cgroup_open();
    double sum = 0;
    int read = 0;
    for (int i = 0; i < cg_count; i++) {
        FILE *f = fopen(cg_files[i], "r");
        char key[64];
        unsigned long long v;
        while (f && fscanf(f, "%63s %llu", key, &v) == 2) {
            if (strcmp(key, "throttled_time") == 0) sum += (double)v, read = 1;
            else if (strcmp(key, "throttled_usec") == 0) sum += (double)v * 1e3, read = 1;
        }
        if (f) fclose(f);
    }
    return read ? sum : NAN;
}
