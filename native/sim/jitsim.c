/* jitSim fast core (see jitsim.h and docs/jitter-sim.md).
 *
 * advance() is amortized O(1): each task keeps an event cursor (hint) that only
 * moves forward with the task's time; the cursor is found again by galloping
 * (exponential then binary search), so a long wait costs O(log distance), and a
 * wrap or an unknown cursor costs one interpolation guess plus a gallop.
 * The phase loops prefetch the trace events of tasks a few iterations ahead:
 * with unsynchronized offsets every task touches a different part of a large
 * trace, and the loop is bound by those cache misses. */
#include "jitsim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HV_JS_PREFETCH 12 /* tasks ahead whose trace events are prefetched */
#define HV_JS_GRAIN 256   /* default: split-level nodes per thread at least */
#define HV_JS_BLOCK 4096  /* default: tasks per subtree block on one thread (at most) */

/* ---- searching the cumulative event arrays --------------------------------------------------- */

/* The event containing position p in [0, L): the first j with ev[j].end > p. */
static inline int64_t locate(const hv_js_event *ev, int64_t n, int64_t len, int64_t p, int64_t k) {
    if (k < 0 || k >= n) /* interpolation guess: events are spread over the trace */
        k = (int64_t)(((unsigned __int128)(uint64_t)p * (uint64_t)n) / (uint64_t)len);
    if (ev[k].end <= p) { /* answer > k: gallop forward; ev[n-1].end = L > p bounds it */
        int64_t lo = k, hi, step = 1;
        for (;;) {
            hi = lo + step;
            if (hi >= n - 1) {
                hi = n - 1;
                break;
            }
            if (ev[hi].end > p) break;
            lo = hi;
            step <<= 1;
        }
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (ev[mid].end > p) hi = mid;
            else lo = mid;
        }
        return hi;
    }
    if (k == 0 || ev[k - 1].end <= p) return k;
    int64_t hi = k - 1, lo, step = 1; /* ev[hi].end > p: gallop backward */
    for (;;) {
        lo = hi - step;
        if (lo < 0) {
            lo = -1;
            break;
        }
        if (ev[lo].end <= p) break;
        hi = lo;
        step <<= 1;
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ev[mid].end > p) hi = mid;
        else lo = mid;
    }
    return hi;
}

/* The first j in (k, n) with ev[j].cend >= target, knowing ev[k].cend < target <= ev[n-1].cend. */
static inline int64_t reach_from(const hv_js_event *ev, int64_t n, int64_t target, int64_t k) {
    int64_t lo = k, hi, step = 1;
    for (;;) {
        hi = lo + step;
        if (hi >= n - 1) {
            hi = n - 1;
            break;
        }
        if (ev[hi].cend >= target) break;
        lo = hi;
        step <<= 1;
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ev[mid].cend >= target) hi = mid;
        else lo = mid;
    }
    return hi;
}

/* The first j in [0, n) with ev[j].cend >= target (0 < target <= G). */
static inline int64_t reach_all(const hv_js_event *ev, int64_t n, int64_t target) {
    if (ev[0].cend >= target) return 0;
    return reach_from(ev, n, target, 0);
}

/* ---- advance ------------------------------------------------------------------------------------ */

/* The full advance from the trace; *hint is the event cursor; *lap_out the lap of the result. */
static inline int64_t advance_lap(const hv_js_trace *tr, int64_t o, int64_t t, int64_t w, int32_t *hint,
                                  int64_t *lap_out) {
    const hv_js_event *ev = tr->ev;
    const int64_t n = tr->n, len = tr->length, g = tr->compute;
    int64_t p = o + t, lap = 0;
    if (p >= len) {
        lap = p / len;
        p -= lap * len;
    }
    int64_t k = locate(ev, n, len, p, *hint);
    const int64_t cprev = k ? ev[k - 1].cend : 0;
    int64_t a = ev[k].cend - (ev[k].end - p); /* A(p): compute-available cycles in [0, p) */
    if (a < cprev) a = cprev;                   /* p is inside the jitter of event k */
    int64_t target = a + w;
    if (target > ev[k].cend) {
        if (target > g) { /* wraps: whole laps, then the rest from the start of the trace */
            int64_t m = (target - 1) / g;
            target -= m * g;
            lap += m;
            k = reach_all(ev, n, target);
        } else {
            k = reach_from(ev, n, target, k);
        }
    }
    *hint = (int32_t)k;
    *lap_out = lap;
    return lap * len + ev[k].end - (ev[k].cend - target) - o;
}

static inline int64_t advance(const hv_js_trace *tr, int64_t o, int64_t t, int64_t w, int32_t *hint) {
    if (w == 0) return t;
    int64_t lap;
    return advance_lap(tr, o, t, w, hint, &lap);
}

/* The first j > k with ev[j].end > p, knowing ev[k].end <= p < L (gallop from k + 1). */
static inline int64_t after(const hv_js_event *ev, int64_t n, int64_t p, int64_t k) {
    int64_t lo = k, hi, step = 1;
    for (;;) {
        hi = lo + step;
        if (hi >= n - 1) {
            hi = n - 1;
            break;
        }
        if (ev[hi].end > p) break;
        lo = hi;
        step <<= 1;
    }
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (ev[mid].end > p) hi = mid;
        else lo = mid;
    }
    return hi;
}

/* Cache event k of lap `lap` in the task (k's end found by a search: always > 0). cprev:
 * C_k when the caller knows it (the previous cached event's count: no read of its
 * trace line, which is often not cached any more), else -1. */
static inline void cache_event(const hv_js_trace *tr, hv_js_task *T, int64_t k, int64_t lap, int64_t cprev) {
    const hv_js_event *e = tr->ev + k;
    if (cprev < 0) cprev = k ? e[-1].cend : 0;
    T->hint = (int32_t)k;
    T->lap = lap <= INT32_MAX ? (int32_t)lap : -1;
    T->end = lap * tr->length + e->end - T->offset;
    T->cend = lap * tr->compute + e->cend;
    T->cprev = lap * tr->compute + cprev;
}

/* The end of the work whose compute target (in lap `lap`'s cycles) lies beyond event k:
 * ev[k].cend = ck < target. Caches the event it ends in. */
static inline int64_t finish_beyond(const hv_js_trace *tr, hv_js_task *T, int64_t k, int64_t ck, int64_t lap,
                                    int64_t target) {
    const hv_js_event *ev = tr->ev;
    const int64_t n = tr->n, g = tr->compute, k0 = k, wraps = target > g;
    if (wraps) { /* wraps: whole laps, then the rest from the start of the trace */
        const int64_t m = (target - 1) / g;
        target -= m * g;
        lap += m;
        k = reach_all(ev, n, target);
    } else {
        k = reach_from(ev, n, target, k);
    }
    cache_event(tr, T, k, lap, !wraps && k - 1 == k0 ? ck : -1);
    return T->end - (ev[k].cend - target);
}

/* advance() for a task with its cached event. A task's time only moves forward (its
 * phase start, its receives and its sends follow each other), so a time before the
 * cached event's end lies inside that event, and a later one (in the same lap of the
 * trace) lies in a later event: the trace is read from the next event on, never at the
 * cached one. Without a cached event (or past the lap), the full search. */
static __attribute__((noinline)) int64_t advance_slow(const hv_js_trace *tr, hv_js_task *T, int64_t t, int64_t w) {
    if (T->lap >= 0) {
        const int64_t lap = T->lap;
        if (t < T->end) {
            int64_t a = T->cend - (T->end - t);
            if (a < T->cprev) a = T->cprev;
            return finish_beyond(tr, T, T->hint, T->cend - lap * tr->compute, lap, a + w - lap * tr->compute);
        }
        const int64_t p = T->offset + t - lap * tr->length; /* >= ev[hint].end */
        if (p < tr->length) {
            const hv_js_event *ev = tr->ev;
            const int64_t k = after(ev, tr->n, p, T->hint);
            const int64_t cprev = k - 1 == T->hint ? T->cend - lap * tr->compute : ev[k - 1].cend;
            int64_t a = ev[k].cend - (ev[k].end - p);
            if (a < cprev) a = cprev;
            const int64_t target = a + w;
            if (target <= ev[k].cend) {
                cache_event(tr, T, k, lap, cprev);
                return T->end - (ev[k].cend - target);
            }
            return finish_beyond(tr, T, k, ev[k].cend, lap, target);
        }
    }
    int64_t lap;
    const int64_t t2 = advance_lap(tr, T->offset, t, w, &T->hint, &lap);
    cache_event(tr, T, T->hint, lap, -1);
    return t2;
}

/* The common case inline: the work ends inside the cached event (no trace read). A
 * task without a cached event has end = -1, so it takes the slow path. */
static inline __attribute__((always_inline)) int64_t advance_task(const hv_js_trace *tr, hv_js_task *T, int64_t t,
                                                                  int64_t w) {
    if (w == 0) return t;
    if (t < T->end) {
        int64_t a = T->cend - (T->end - t);
        if (a < T->cprev) a = T->cprev;
        const int64_t target = a + w;
        if (target <= T->cend) return T->end - (T->cend - target);
    }
    return advance_slow(tr, T, t, w);
}

int64_t hv_js_advance(const hv_js_trace *tr, int64_t o, int64_t t, int64_t w, int32_t *hint) {
    return advance(tr, o, t, w, hint);
}

int hv_js_task_size(void) { return (int)sizeof(hv_js_task); }

/* Zeroed memory on 2 MiB boundaries, backed by transparent huge pages where the kernel
 * allows it: the trace and the tasks are read at random places, and with 4 KiB pages
 * nearly every such read also misses the TLB. */
void *hv_js_alloc(int64_t bytes) {
    const size_t align = (size_t)2 << 20;
    size_t n = ((size_t)(bytes > 0 ? bytes : 1) + align - 1) / align * align;
    void *p = NULL;
    if (posix_memalign(&p, align, n)) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    memset(p, 0, n);
    return p;
}

void hv_js_free(void *p) { free(p); }

/* ---- seeded offsets -------------------------------------------------------------------------- */

#define HV_GOLDEN 0x9e3779b97f4a7c15ULL

static inline uint64_t mix64(uint64_t z) { /* splitmix64's output function */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline int64_t scale(uint64_t u, int64_t range) { /* floor(u * range / 2^64) in [0, range) */
    return (int64_t)(((unsigned __int128)u * (uint64_t)range) >> 64);
}

int hv_js_offsets(const hv_js_trace *traces, int32_t cores, hv_js_task *tasks, int64_t ntasks, int32_t align,
                  uint64_t seed, uint64_t replica, int64_t window, int64_t origin) {
    if (cores < 1 || ntasks < 0) return -2;
    if (align == HV_JS_ALIGN_COSCHED && window < 1) return -2;
    const uint64_t key = mix64(seed + HV_GOLDEN * (replica + 1));
    const uint64_t shared = mix64(key);
    for (int64_t i = 0; i < ntasks; i++) {
        const hv_js_trace *tr = &traces[cores == 1 ? 0 : i % cores];
        const uint64_t u = align == HV_JS_ALIGN_SYNC ? shared : mix64(key + HV_GOLDEN * (uint64_t)(i + 1));
        int64_t o;
        if (align == HV_JS_ALIGN_COSCHED) {
            const int64_t r = origin % window;
            if (r >= tr->length) return -2;
            const int64_t nw = (tr->length - 1 - r) / window + 1;
            o = r + scale(u, nw) * window;
        } else {
            o = scale(u, tr->length);
        }
        tasks[i].offset = o;
        tasks[i].t = tasks[i].slot = tasks[i].absorbed = tasks[i].cend = tasks[i].cprev = 0;
        tasks[i].end = -1;
        tasks[i].hint = -1;
        tasks[i].lap = -1;
    }
    return 0;
}

/* ---- the simulation ------------------------------------------------------------------------- */

typedef struct {
    int64_t a;
    int64_t c;
} hv_arrival;

/* The trace of task i: core i % cores of recorded node (i / cores) % trace_nodes. */
static inline int64_t trace_index(const hv_js_config *c, int64_t i) {
    if (__builtin_expect(c->trace_nodes > 1, 0)) return ((i / c->cores) % c->trace_nodes) * c->cores + i % c->cores;
    return c->cores == 1 ? 0 : i % c->cores;
}

static inline int32_t trace_count(const hv_js_config *c) {
    return c->cores * (c->trace_nodes > 1 ? c->trace_nodes : 1);
}

static inline const hv_js_trace *trace_of(const hv_js_config *c, int64_t i) { return &c->traces[trace_index(c, i)]; }

/* One advance of task i, counting the jitter it absorbed. */
static inline int64_t step(const hv_js_config *c, int64_t i, int64_t t, int64_t w) {
    if (c->nojitter) return t + w;
    hv_js_task *k = &c->tasks[i];
    int64_t t2 = advance_task(trace_of(c, i), k, t, w);
    k->absorbed += t2 - t - w;
    return t2;
}

/* Prefetch the next events of the trace of task i (those an advance beyond its cached
 * event reads first). */
static inline void prefetch_next(const hv_js_config *c, const hv_js_task *T, int64_t i) {
    const hv_js_trace *tr = trace_of(c, i);
    const int64_t h = T->hint;
    __builtin_prefetch(tr->ev + (h + 1 < tr->n ? h + 1 : h));
    __builtin_prefetch(tr->ev + (h + 2 < tr->n ? h + 2 : h));
}

/* Going up (or without a tree), task i computes from its phase start, then receives its
 * children's messages and sends: prefetch when that may leave the cached event. */
static inline void prefetch_up(const hv_js_config *c, int64_t i) {
    if (c->nojitter || i < 0 || i >= c->ntasks) return;
    const hv_js_task *T = &c->tasks[i];
    if (T->lap < 0) return;
    int64_t last = T->t + c->work + c->arity * c->recv + c->send;
    if (c->barrier == HV_JS_BARRIER_TREE) {
        const int64_t first = c->arity * i + 1;
        if (first < c->ntasks && c->tasks[first].slot + c->arity * c->recv + c->send > last)
            last = c->tasks[first].slot + c->arity * c->recv + c->send;
    }
    if (last >= T->end) prefetch_next(c, T, i);
}

/* Going down, task i receives its release (its slot, written by its parent), then sends. */
static inline void prefetch_down(const hv_js_config *c, int64_t i) {
    if (c->nojitter || i < 1 || i >= c->ntasks) return;
    const hv_js_task *T = &c->tasks[i];
    if (T->lap >= 0 && T->slot + c->recv + c->arity * c->send >= T->end) prefetch_next(c, T, i);
}

/* A task before its first phase (its offset kept). */
static inline void reset_task(hv_js_task *T) {
    T->t = T->slot = T->absorbed = T->cend = T->cprev = 0;
    T->end = -1;
    T->hint = -1;
    T->lap = -1;
}

/* The reset of every task and its starting cursor: the event holding its offset (lap 0), through a
 * bucket index of the trace (one int32 per 4 events), so that the first phase does not
 * search the whole trace at random places. A cursor at time 0 is valid for every later
 * time: a task's time only moves forward. */
static int init_cursors(const hv_js_config *c) {
    const int32_t nt = trace_count(c);
    int32_t **idx = calloc((size_t)nt, sizeof *idx);
    int64_t *width = calloc((size_t)nt, sizeof *width), *nb = calloc((size_t)nt, sizeof *nb);
    int rc = 0;
    if (!idx || !width || !nb) {
        rc = -1;
        goto out;
    }
    for (int32_t j = 0; j < nt; j++) {
        const hv_js_trace *tr = &c->traces[j];
        nb[j] = tr->n / 4 > 0 ? tr->n / 4 : 1;
        width[j] = (tr->length + nb[j] - 1) / nb[j];
        if (!(idx[j] = malloc((size_t)nb[j] * sizeof **idx))) {
            rc = -1;
            goto out;
        }
        int64_t e = 0;
        for (int64_t b = 0; b < nb[j]; b++) { /* the first event ending after the bucket's start */
            while (e < tr->n - 1 && tr->ev[e].end <= b * width[j]) e++;
            idx[j][b] = (int32_t)e;
        }
    }
    const int64_t n = c->ntasks;
    for (int64_t i = 0; i < n; i++) {
        if (i + HV_JS_PREFETCH < n) {
            const int64_t ip = i + HV_JS_PREFETCH, j = trace_index(c, ip);
            __builtin_prefetch(c->traces[j].ev + idx[j][c->tasks[ip].offset / width[j]]);
        }
        const int64_t j = trace_index(c, i);
        const hv_js_trace *tr = &c->traces[j];
        hv_js_task *T = &c->tasks[i];
        reset_task(T);
        const int64_t p = T->offset;
        if (p < 0 || p >= tr->length) continue; /* left to the full search (refused offsets) */
        int64_t k = idx[j][p / width[j]];
        if (tr->ev[k].end <= p) k = after(tr->ev, tr->n, p, k);
        cache_event(tr, T, k, 0, -1);
    }
out:
    if (idx)
        for (int32_t j = 0; j < nt; j++) free(idx[j]);
    free(idx);
    free(width);
    free(nb);
    return rc;
}

static inline int64_t latency(const hv_js_config *c, int64_t i, int64_t j) {
    if (c->cores == 1) return c->lat_inter; /* one core per node: every message leaves the node */
    return i / c->cores == j / c->cores ? c->lat_intra : c->lat_inter;
}

static int cmp_arrival(const void *x, const void *y) {
    const hv_arrival *a = x, *b = y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return a->c < b->c ? -1 : (a->c > b->c);
}

static void sort_arrivals(hv_arrival *v, int64_t m) {
    if (m > 16) {
        qsort(v, (size_t)m, sizeof *v, cmp_arrival);
        return;
    }
    for (int64_t i = 1; i < m; i++) { /* insertion sort by (arrival, child index) */
        hv_arrival x = v[i];
        int64_t j = i - 1;
        while (j >= 0 && cmp_arrival(&v[j], &x) > 0) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = x;
    }
}

static void phase_none(const hv_js_config *c, int64_t ph) {
    const int64_t n = c->ntasks;
    int64_t mx = 0;
    for (int64_t i = 0; i < n; i++) {
        prefetch_up(c, i + HV_JS_PREFETCH);
        int64_t f = step(c, i, c->tasks[i].t, c->work);
        if (c->compute_end) c->compute_end[ph * n + i] = f;
        if (f > mx) mx = f;
    }
    for (int64_t i = 0; i < n; i++) {
        c->tasks[i].t = mx;
        if (c->next_start) c->next_start[ph * n + i] = mx;
    }
    c->phase_end[ph] = mx;
}

/* ---- threads ---------------------------------------------------------------------------------
 *
 * Every task's state changes only through its own step() calls, whose inputs are its own
 * state and the slots its children (going up) or its parent (going down) wrote. Any order
 * that runs a task after its children going up and after its parent going down therefore
 * gives the same integers as the serial sweeps. The threaded phase splits the tree at a
 * "split level" whose nodes are dealt out in contiguous runs, one run per thread: the
 * descendants of nodes [a, b) one level down are [k a + 1, k b + 1), again contiguous, so a
 * thread sweeps its own subtrees level by level without waiting for anyone. Per phase:
 * every thread sweeps its subtrees up; barrier; thread 0 sweeps the few nodes above the
 * split level up and down; barrier; every thread sweeps its subtrees down; barrier. The
 * split points balance the number of tasks (the deepest level may be partial). */

typedef struct hv_team hv_team;

typedef struct {
    hv_team *team;
    int32_t id;
    int64_t lo, hi; /* this thread's nodes of the split level, or its tasks without a tree */
    int64_t mx;     /* this thread's max over tasks of the next phase's start */
    hv_arrival *buf;
    pthread_t th;
} hv_worker;

struct hv_team {
    const hv_js_config *c;
    int32_t n;               /* threads */
    int64_t split;           /* first index of the split level (tree) */
    pthread_barrier_t bar;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0: wait, 1: go, 2: abort */
    hv_worker *w;
};

static inline void prefetch_up_range(const hv_js_config *c, int64_t i, int64_t lo, int64_t hi) {
    if (i >= lo && i < hi) prefetch_up(c, i);
}

static inline void prefetch_down_range(const hv_js_config *c, int64_t i, int64_t lo, int64_t hi) {
    if (i >= lo && i < hi) prefetch_down(c, i);
}

/* The up step of task i (its work, its children's arrivals, its send to the parent). */
/* always_inline: used by the serial and the threaded sweeps, and only inlined is it as fast
 * as the original single loop. */
#define HV_INLINE static inline __attribute__((always_inline))

HV_INLINE void up_one(const hv_js_config *c, int64_t ph, int64_t i, hv_arrival *buf) {
    const int64_t n = c->ntasks, k = c->arity;
    hv_js_task *T = c->tasks;
    int64_t cur = step(c, i, T[i].t, c->work);
    if (c->compute_end) c->compute_end[ph * n + i] = cur;
    const int64_t first = k * i + 1;
    if (first < n) {
        const int64_t last = first + k - 1 < n - 1 ? first + k - 1 : n - 1;
        if (last == first) {
            cur = step(c, i, cur > T[first].slot ? cur : T[first].slot, c->recv);
        } else if (last == first + 1) { /* binary tree: two children, ties by index */
            int64_t a0 = T[first].slot, a1 = T[last].slot;
            int64_t x = a0 <= a1 ? a0 : a1, y = a0 <= a1 ? a1 : a0;
            cur = step(c, i, cur > x ? cur : x, c->recv);
            cur = step(c, i, cur > y ? cur : y, c->recv);
        } else {
            const int64_t m = last - first + 1;
            for (int64_t j = 0; j < m; j++) {
                buf[j].a = T[first + j].slot;
                buf[j].c = first + j;
            }
            sort_arrivals(buf, m);
            for (int64_t j = 0; j < m; j++) cur = step(c, i, cur > buf[j].a ? cur : buf[j].a, c->recv);
        }
    }
    if (i > 0) {
        cur = step(c, i, cur, c->send);
        T[i].slot = cur + latency(c, i, (i - 1) / k);
    }
    T[i].t = cur;
}

/* The down step of task i; returns its next phase start. */
HV_INLINE int64_t down_one(const hv_js_config *c, int64_t ph, int64_t i) {
    const int64_t n = c->ntasks, k = c->arity;
    hv_js_task *T = c->tasks;
    int64_t cur = T[i].t;
    if (i > 0) cur = step(c, i, T[i].slot, c->recv);
    const int64_t first = k * i + 1;
    if (first < n) {
        const int64_t last = first + k - 1 < n - 1 ? first + k - 1 : n - 1;
        for (int64_t ch = first; ch <= last; ch++) {
            cur = step(c, i, cur, c->send);
            T[ch].slot = cur + latency(c, i, ch);
        }
    }
    T[i].t = cur;
    if (c->next_start) c->next_start[ph * n + i] = cur;
    return cur;
}

/* One phase on one thread. Up: children have larger indices than their parent, so walk
 * the ranks downwards; down: parents before children. */
static void phase_tree(const hv_js_config *c, int64_t ph, hv_arrival *buf) {
    const int64_t n = c->ntasks;
    for (int64_t i = n - 1; i >= 0; i--) {
        prefetch_up(c, i - HV_JS_PREFETCH);
        up_one(c, ph, i, buf);
    }
    int64_t mx = 0;
    for (int64_t i = 0; i < n; i++) {
        prefetch_down(c, i + HV_JS_PREFETCH);
        const int64_t cur = down_one(c, ph, i);
        if (cur > mx) mx = cur;
    }
    c->phase_end[ph] = mx;
}

/* Tasks of the subtrees of split-level nodes [a, b): the sum over levels of the ranges. */
static int64_t subtree_tasks(int64_t n, int64_t k, int64_t a, int64_t b) {
    int64_t s = 0;
    while (a < n && a < b) {
        s += (b < n ? b : n) - a;
        if (a > (n - 1) / k) break; /* the next level starts beyond n */
        a = k * a + 1;
        b = b > (INT64_MAX - 1) / k ? INT64_MAX : k * b + 1;
    }
    return s;
}

static void worker_phase_tree(hv_worker *me, int64_t ph) {
    hv_team *tm = me->team;
    const hv_js_config *c = tm->c;
    const int64_t n = c->ntasks, k = c->arity;
    /* up: the levels of my subtrees, deepest first; each level's run from its end */
    int64_t lv[64][2], nl = 0;
    for (int64_t a = me->lo, b = me->hi; a < n && a < b;) {
        lv[nl][0] = a;
        lv[nl][1] = b < n ? b : n;
        nl++;
        if (a > (n - 1) / k) break;
        a = k * a + 1;
        b = b > (INT64_MAX - 1) / k ? INT64_MAX : k * b + 1;
    }
    for (int64_t l = nl - 1; l >= 0; l--) {
        const int64_t lo = lv[l][0], hi = lv[l][1];
        for (int64_t i = hi - 1; i >= lo; i--) {
            prefetch_up_range(c, i - HV_JS_PREFETCH, lo, hi);
            up_one(c, ph, i, me->buf);
        }
    }
    pthread_barrier_wait(&tm->bar);
    int64_t mx = 0;
    if (me->id == 0) { /* the top of the tree, above the split level */
        for (int64_t i = tm->split - 1; i >= 0; i--) up_one(c, ph, i, me->buf);
        for (int64_t i = 0; i < tm->split; i++) {
            const int64_t cur = down_one(c, ph, i);
            if (cur > mx) mx = cur;
        }
    }
    pthread_barrier_wait(&tm->bar);
    for (int64_t l = 0; l < nl; l++) {
        const int64_t lo = lv[l][0], hi = lv[l][1];
        for (int64_t i = lo; i < hi; i++) {
            prefetch_down_range(c, i + HV_JS_PREFETCH, lo, hi);
            const int64_t cur = down_one(c, ph, i);
            if (cur > mx) mx = cur;
        }
    }
    me->mx = mx;
    pthread_barrier_wait(&tm->bar);
    if (me->id == 0) {
        for (int32_t j = 1; j < tm->n; j++)
            if (tm->w[j].mx > mx) mx = tm->w[j].mx;
        c->phase_end[ph] = mx;
    }
}

static void worker_phase_none(hv_worker *me, int64_t ph) {
    hv_team *tm = me->team;
    const hv_js_config *c = tm->c;
    const int64_t n = c->ntasks;
    int64_t mx = 0;
    for (int64_t i = me->lo; i < me->hi; i++) {
        prefetch_up_range(c, i + HV_JS_PREFETCH, me->lo, me->hi);
        int64_t f = step(c, i, c->tasks[i].t, c->work);
        if (c->compute_end) c->compute_end[ph * n + i] = f;
        if (f > mx) mx = f;
    }
    me->mx = mx;
    pthread_barrier_wait(&tm->bar);
    for (int32_t j = 0; j < tm->n; j++)
        if (tm->w[j].mx > mx) mx = tm->w[j].mx;
    for (int64_t i = me->lo; i < me->hi; i++) {
        c->tasks[i].t = mx;
        if (c->next_start) c->next_start[ph * n + i] = mx;
    }
    if (me->id == 0) c->phase_end[ph] = mx;
    pthread_barrier_wait(&tm->bar); /* nobody overwrites its mx before all have read them */
}

static void *worker_run(void *arg) {
    hv_worker *me = arg;
    hv_team *tm = me->team;
    pthread_mutex_lock(&tm->mu);
    while (tm->state == 0) pthread_cond_wait(&tm->cv, &tm->mu);
    const int go = tm->state == 1;
    pthread_mutex_unlock(&tm->mu);
    if (!go) return NULL;
    for (int64_t ph = 0; ph < tm->c->phases; ph++) {
        if (tm->c->barrier == HV_JS_BARRIER_NONE) worker_phase_none(me, ph);
        else worker_phase_tree(me, ph);
    }
    return NULL;
}

/* The threaded simulation; returns 1 when the problem is too small to split (run it serially). */
static int simulate_team(const hv_js_config *c, int32_t threads, int64_t grain) {
    const int64_t n = c->ntasks, k = c->arity;
    hv_team tm = {.c = c, .n = threads, .split = 0, .state = 0};
    int64_t total, first = 0, size = n; /* the split level [first, first + size) */
    if (c->barrier == HV_JS_BARRIER_TREE) {
        if (k < 2) return 1; /* a chain: nothing runs side by side */
        first = 0;
        size = 1;
        while (size < (int64_t)threads * grain) {
            if (size >= n - first || size > INT64_MAX / k) return 1; /* no level below is wide enough */
            first += size;
            size *= k;
        }
        if (size > n - first) size = n - first; /* a partial deepest level */
        if (size < (int64_t)threads * grain) return 1;
        tm.split = first;
        total = subtree_tasks(n, k, first, first + size);
    } else {
        if (n < (int64_t)threads * grain) return 1;
        total = n;
    }
    hv_worker *w = calloc((size_t)threads, sizeof *w);
    if (!w) return -1;
    tm.w = w;
    int rc = 0;
    int64_t bufn = k > 2 ? (k < n ? k : n) : 0;
    for (int32_t j = 0; j < threads; j++) {
        w[j].team = &tm;
        w[j].id = j;
        if (bufn && !(w[j].buf = malloc((size_t)bufn * sizeof *w[j].buf))) rc = -1;
        /* w[j].lo: the first node whose run before it holds at least j / threads of the tasks */
        int64_t lo = first, hi = first + size;
        const int64_t want = (int64_t)((__int128)total * j / threads);
        if (c->barrier == HV_JS_BARRIER_TREE) {
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo) / 2;
                if (subtree_tasks(n, k, first, mid) >= want) hi = mid;
                else lo = mid + 1;
            }
            w[j].lo = lo;
        } else {
            w[j].lo = want;
        }
    }
    for (int32_t j = 0; j < threads; j++) w[j].hi = j + 1 < threads ? w[j + 1].lo : first + size;
    if (rc) goto out_bufs;
    if (pthread_barrier_init(&tm.bar, NULL, (unsigned)threads)) {
        rc = -1;
        goto out_bufs;
    }
    pthread_mutex_init(&tm.mu, NULL);
    pthread_cond_init(&tm.cv, NULL);
    int32_t started = 1;
    for (; started < threads; started++)
        if (pthread_create(&w[started].th, NULL, worker_run, &w[started])) break;
    pthread_mutex_lock(&tm.mu);
    tm.state = started == threads ? 1 : 2;
    pthread_cond_broadcast(&tm.cv);
    pthread_mutex_unlock(&tm.mu);
    if (started == threads) worker_run(&w[0]);
    else rc = -1;
    for (int32_t j = 1; j < started; j++) pthread_join(w[j].th, NULL);
    pthread_cond_destroy(&tm.cv);
    pthread_mutex_destroy(&tm.mu);
    pthread_barrier_destroy(&tm.bar);
out_bufs:
    for (int32_t j = 0; j < threads; j++) free(w[j].buf);
    free(w);
    return rc;
}

/* ---- one thread, subtree blocks ------------------------------------------------------------
 *
 * The same freedom of order as the threads (below) lets one thread fuse the down sweep of a
 * phase with the up sweep of the next: the tree is cut at a "block level" whose subtrees
 * hold about HV_JS_BLOCK tasks (64 bytes each: they stay in the L2 cache), and each subtree
 * runs its down sweep of phase p, then at once its up sweep of phase p + 1, while its tasks
 * and the trace lines its cursors just read are still cached. The few nodes above the block
 * level run down before the blocks and up after them. The task array is thus streamed once
 * per phase instead of twice, and the trace events a task's work reads in the up sweep are
 * mostly those its release just read in the down sweep. */

/* The levels of the subtrees of nodes [a, b): lv[l] = [first, end) of level l; returns their count. */
static int64_t subtree_levels(int64_t n, int64_t k, int64_t a, int64_t b, int64_t lv[][2]) {
    int64_t nl = 0;
    while (a < n && a < b && nl < 64) {
        lv[nl][0] = a;
        lv[nl][1] = b < n ? b : n;
        nl++;
        if (a > (n - 1) / k) break;
        a = k * a + 1;
        b = b > (INT64_MAX - 1) / k ? INT64_MAX : k * b + 1;
    }
    return nl;
}

HV_INLINE void block_up(const hv_js_config *c, int64_t ph, int64_t lv[][2], int64_t nl, hv_arrival *buf) {
    for (int64_t l = nl - 1; l >= 0; l--) {
        const int64_t lo = lv[l][0], hi = lv[l][1];
        for (int64_t i = hi - 1; i >= lo; i--) {
            prefetch_up_range(c, i - HV_JS_PREFETCH, lo, hi);
            up_one(c, ph, i, buf);
        }
    }
}

HV_INLINE int64_t block_down(const hv_js_config *c, int64_t ph, int64_t lv[][2], int64_t nl, int64_t mx) {
    for (int64_t l = 0; l < nl; l++) {
        const int64_t lo = lv[l][0], hi = lv[l][1];
        for (int64_t i = lo; i < hi; i++) {
            prefetch_down_range(c, i + HV_JS_PREFETCH, lo, hi);
            const int64_t cur = down_one(c, ph, i);
            if (cur > mx) mx = cur;
        }
    }
    return mx;
}

/* The whole tree simulation on one thread in subtree blocks of about `block` tasks; returns 1
 * when the tree is too small (or a chain) to cut, 0 when done. */
static int simulate_blocked(const hv_js_config *c, hv_arrival *buf, int64_t block) {
    const int64_t n = c->ntasks, k = c->arity;
    if (k < 2 || c->phases < 1) return 1;
    int64_t first = 0, size = 1; /* the block level [first, first + size) */
    while ((n - first) / size > block) {
        if (size >= n - first || size > INT64_MAX / k) return 1;
        first += size;
        size *= k;
    }
    if (size > n - first) size = n - first;
    if (first == 0) return 1; /* one block: the plain sweeps */
    int64_t lv[64][2];
    for (int64_t r = first + size - 1; r >= first; r--) block_up(c, 0, lv, subtree_levels(n, k, r, r + 1, lv), buf);
    for (int64_t i = first - 1; i >= 0; i--) up_one(c, 0, i, buf);
    for (int64_t ph = 0; ph < c->phases; ph++) {
        int64_t mx = 0;
        for (int64_t i = 0; i < first; i++) {
            const int64_t cur = down_one(c, ph, i);
            if (cur > mx) mx = cur;
        }
        const int next = ph + 1 < c->phases;
        for (int64_t r = first; r < first + size; r++) {
            const int64_t nl = subtree_levels(n, k, r, r + 1, lv);
            mx = block_down(c, ph, lv, nl, mx);
            if (next) block_up(c, ph + 1, lv, nl, buf);
        }
        c->phase_end[ph] = mx;
        if (next)
            for (int64_t i = first - 1; i >= 0; i--) up_one(c, ph + 1, i, buf);
    }
    return 0;
}

int hv_js_simulate(const hv_js_config *c) { return hv_js_simulate_threads(c, 1, 0); }

int hv_js_simulate_threads(const hv_js_config *c, int32_t threads, int64_t grain) {
    if (c->ntasks < 1 || c->phases < 0 || c->work < 0 || c->send < 0 || c->recv < 0 || c->lat_intra < 0 ||
        c->lat_inter < 0 || c->cores < 1 || c->arity < 1 || c->ntasks > INT64_MAX / (c->arity + 1))
        return -2;
    if (c->barrier != HV_JS_BARRIER_NONE && c->barrier != HV_JS_BARRIER_TREE) return -2;
    if (c->trace_nodes < 0 || c->trace_nodes > (1 << 20)) return -2;
    if (!c->nojitter)
        for (int32_t j = 0; j < c->cores * (c->trace_nodes > 1 ? c->trace_nodes : 1); j++)
            if (c->traces[j].n < 1 || c->traces[j].n > INT32_MAX || c->traces[j].compute < 1 || c->traces[j].length < 1)
                return -2;
    if (threads < 1 || threads > 1024 || grain < 0) return -2;
    const int64_t block = threads == 1 && grain > 0 ? grain : HV_JS_BLOCK;
    if (grain == 0) grain = HV_JS_GRAIN;
    if (!c->nojitter) {
        if (init_cursors(c)) return -1;
    } else {
        for (int64_t i = 0; i < c->ntasks; i++) reset_task(&c->tasks[i]);
    }
    if (threads > 1) {
        const int rc = simulate_team(c, threads, grain);
        if (rc != 1) return rc;
    }
    hv_arrival *buf = NULL;
    if (c->barrier == HV_JS_BARRIER_TREE && c->arity > 2) {
        int64_t m = c->arity < c->ntasks ? c->arity : c->ntasks;
        buf = malloc((size_t)m * sizeof *buf);
        if (!buf) return -1;
    }
    if (c->barrier == HV_JS_BARRIER_TREE && simulate_blocked(c, buf, block) == 0) {
        free(buf);
        return 0;
    }
    for (int64_t ph = 0; ph < c->phases; ph++) {
        if (c->barrier == HV_JS_BARRIER_NONE) phase_none(c, ph);
        else phase_tree(c, ph, buf);
    }
    free(buf);
    return 0;
}
