/* jitSim fast core: trace-driven OS-jitter simulation of BSP phases (compute + barrier).
 *
 * The semantics are those of docs/jitter-sim.md; src/hpcvar/sim/jitter_ref.py is the
 * slow, obvious Python reference and the tests require identical integer results.
 * All times are int64 cycles at the trace's frequency. Loaded through ctypes by
 * src/hpcvar/sim/jitter.py (the struct layouts below are mirrored there). */
#ifndef HV_JITSIM_H
#define HV_JITSIM_H

#include <stdint.h>

/* Event k of a trace in cumulative form: end = S_{k+1} (end of its compute gap),
 * cend = C_{k+1} = sum_{j<=k} g_j (compute-available cycles up to that end).
 * Event k covers trace positions [S_k, S_{k+1}): jitter first, then its gap. */
typedef struct {
    int64_t end;
    int64_t cend;
} hv_js_event;

typedef struct {
    const hv_js_event *ev;
    int64_t n;       /* E events (>= 1) */
    int64_t length;  /* L = S_E */
    int64_t compute; /* G = C_E (> 0) */
} hv_js_trace;

/* A task's state in two arrays (48 bytes in all, docs/jitter-sim.md "How the C core is verified and why it is
 * fast").
 *
 * The hot part, 32 bytes (two tasks per cache line), is what every step reads and writes. The task caches the
 * event its last advance ended in as the start of that event's compute gap and its end, both in the task's own
 * time: work from t inside the cached event ends at max(t, gstart) + W when that is at most end, without
 * touching the trace. `m` is the task's time and its mailbox, which are never live at once: between phases (and
 * at the end) the start of its next phase; after its up sweep its arrival at its parent (the root: its cursor);
 * in the down sweep its release from its parent. */
typedef struct {
    int64_t m;
    int64_t gstart; /* cached event: the start of its compute gap, in task time */
    int64_t end;    /* cached event: its end S_{k+1} in task time (-1: no cached event) */
    int32_t hint;   /* the cached event's index k (-1: unknown) */
    int32_t lap;    /* the cached event's lap (-1: no cached event, or a lap beyond 32 bits) */
} hv_js_task;

/* The cold part, 16 bytes: read by the advances that leave the cached event for a later one than the next (the
 * offset), written once per sweep (the jitter absorbed). */
typedef struct {
    int64_t absorbed; /* jitter absorbed so far: sum over advance() calls of (t' - t - W) */
    int64_t offset;   /* o: trace position of global time 0, in [0, L) */
} hv_js_cursor;

enum { HV_JS_BARRIER_NONE = 0, HV_JS_BARRIER_TREE = 1 };
enum { HV_JS_ALIGN_UNSYNC = 0, HV_JS_ALIGN_SYNC = 1, HV_JS_ALIGN_COSCHED = 2 };

typedef struct {
    int64_t ntasks, phases, work, send, recv, lat_intra, lat_inter;
    int32_t barrier, arity, cores, nojitter;
    int32_t trace_nodes, pad;  /* recorded nodes (1: one node's traces for every node) */
    /* cores * trace_nodes traces: task i (node i / cores, core i % cores) uses
     * traces[((i / cores) % trace_nodes) * cores + i % cores] */
    const hv_js_trace *traces;
    hv_js_task *tasks;         /* ntasks: the hot part */
    hv_js_cursor *cursors;     /* ntasks: the cold part (the offsets are set before simulating) */
    int64_t *phase_end;        /* phases: max over tasks of the start of the next phase */
    int64_t *compute_end;      /* optional (NULL): phases * ntasks, [phase * ntasks + task] */
    int64_t *next_start;       /* optional (NULL): same layout */
} hv_js_config;

/* advance(): the earliest t' >= t at which W compute-available cycles have elapsed
 * for a task of offset o (see docs/jitter-sim.md). *hint is the task's event cursor. */
int64_t hv_js_advance(const hv_js_trace *tr, int64_t o, int64_t t, int64_t w, int32_t *hint);

/* The seeded offsets of `ntasks` tasks into their cursors. */
int hv_js_offsets(const hv_js_trace *traces, int32_t cores, hv_js_cursor *cursors, int64_t ntasks, int32_t align,
                  uint64_t seed, uint64_t replica, int64_t window, int64_t origin);

/* Reset the tasks and the cursors (offsets kept), then simulate. 0 on success, -1 on memory, -2 on bad config. */
int hv_js_simulate(const hv_js_config *c);

/* hv_js_simulate() on `threads` POSIX threads (same integers as one thread). grain: the
 * least number of tasks per thread (barrier none), or of nodes per thread in the tree level
 * where the tree is split among the threads (0: the default, 256). Too small a problem (or
 * an arity-1 chain) runs on one thread. With threads = 1, grain is the largest number of
 * tasks per subtree block of a tree (0: the default, 4096; see jitsim.c). */
int hv_js_simulate_threads(const hv_js_config *c, int32_t threads, int64_t grain);

/* Zeroed, 2 MiB aligned memory (transparent huge pages where allowed); NULL on failure. */
void *hv_js_alloc(int64_t bytes);
void hv_js_free(void *p);

/* sizeof(hv_js_task) and sizeof(hv_js_cursor), for the Python side to check its layout. */
int hv_js_task_size(void);
int hv_js_cursor_size(void);

#endif
