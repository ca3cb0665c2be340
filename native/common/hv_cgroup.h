/* hv_cgroup: how long the CPU bandwidth control of this process's cgroup (and its ancestors) kept it from
 * running. A group that used its quota (cpu.cfs_quota_us in cgroup v1, cpu.max in v2) is throttled, every
 * thread of it, until its period ends: the CPUs may sit idle or run other processes meanwhile, and what the
 * group lost looks like OS noise from inside. The kernel counts it in the group's cpu.stat (v1
 * throttled_time in ns, v2 throttled_usec), summed over the CPUs whose run queues were throttled; a group is
 * also held back by an ancestor's quota, counted in the ancestor's cpu.stat, so the sum runs up to the root
 * of the hierarchy. The hierarchy is found through /proc/self/mountinfo, so a bind mount of it elsewhere
 * (a network namespace's fresh /sys hides /sys/fs/cgroup) is found too. */
#ifndef HV_CGROUP_H
#define HV_CGROUP_H

/* The cpu.stat files of this process's cgroup and its ancestors (found once); the count (0: none visible). */
int hv_cgroup_open(void);

/* Throttled time so far (ns), summed over those files; NAN when none could be read. */
double hv_cgroup_throttled_ns(void);

#endif
