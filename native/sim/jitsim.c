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

/* advance() for a task with its cached event. A task's time only moves forward (its
 * phase start, its receives and its sends follow each other), so a time before the
 * cached event's end lies inside that event. */
static inline int64_t advance_task(const hv_js_trace *tr, hv_js_task *k, int64_t t, int64_t w) {
    if (w == 0) return t;
    if (t < k->end) {
        int64_t a = k->cend - (k->end - t);
        if (a < k->cprev) a = k->cprev;
        const int64_t target = a + w;
        if (target <= k->cend) return k->end - (k->cend - target);
    }
    int64_t lap;
    const int64_t t2 = advance_lap(tr, k->offset, t, w, &k->hint, &lap);
    const hv_js_event *e = tr->ev + k->hint;
    k->end = lap * tr->length + e->end - k->offset;
    k->cend = lap * tr->compute + e->cend;
    k->cprev = lap * tr->compute + (k->hint ? e[-1].cend : 0);
    return t2;
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
        tasks[i].pad = 0;
    }
    return 0;
}

/* ---- the simulation ------------------------------------------------------------------------- */

typedef struct {
    int64_t a;
    int64_t c;
} hv_arrival;

static inline const hv_js_trace *trace_of(const hv_js_config *c, int64_t i) {
    if (__builtin_expect(c->trace_nodes > 1, 0))
        return &c->traces[((i / c->cores) % c->trace_nodes) * c->cores + i % c->cores];
    return &c->traces[c->cores == 1 ? 0 : i % c->cores];
}

/* One advance of task i, counting the jitter it absorbed. */
static inline int64_t step(const hv_js_config *c, int64_t i, int64_t t, int64_t w) {
    if (c->nojitter) return t + w;
    hv_js_task *k = &c->tasks[i];
    int64_t t2 = advance_task(trace_of(c, i), k, t, w);
    k->absorbed += t2 - t - w;
    return t2;
}

/* Prefetch the trace events task i will need for its work: only when the work will
 * not end inside its cached event (most often the next detour lies beyond it). */
static inline void prefetch_task(const hv_js_config *c, int64_t i) {
    if (c->nojitter || i < 0 || i >= c->ntasks) return;
    const hv_js_task *k = &c->tasks[i];
    if (k->hint >= 0 && k->t + c->work >= k->end) {
        const hv_js_event *e = trace_of(c, i)->ev + k->hint;
        __builtin_prefetch(e + 1);
        __builtin_prefetch(e + 4);
    }
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
        prefetch_task(c, i + HV_JS_PREFETCH);
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

static inline void prefetch_range(const hv_js_config *c, int64_t i, int64_t lo, int64_t hi) {
    if (i >= lo && i < hi) prefetch_task(c, i);
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
        prefetch_task(c, i - HV_JS_PREFETCH);
        up_one(c, ph, i, buf);
    }
    int64_t mx = 0;
    for (int64_t i = 0; i < n; i++) {
        prefetch_task(c, i + HV_JS_PREFETCH);
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
            prefetch_range(c, i - HV_JS_PREFETCH, lo, hi);
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
            prefetch_range(c, i + HV_JS_PREFETCH, lo, hi);
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
        prefetch_range(c, i + HV_JS_PREFETCH, me->lo, me->hi);
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

int hv_js_simulate(const hv_js_config *c) { return hv_js_simulate_threads(c, 1, 0); }

int hv_js_simulate_threads(const hv_js_config *c, int32_t threads, int64_t grain) {
    if (c->ntasks < 1 || c->phases < 0 || c->work < 0 || c->send < 0 || c->recv < 0 || c->lat_intra < 0 ||
        c->lat_inter < 0 || c->cores < 1 || c->arity < 1 || c->ntasks > INT64_MAX / (c->arity + 1))
        return -2;
    if (c->barrier != HV_JS_BARRIER_NONE && c->barrier != HV_JS_BARRIER_TREE) return -2;
    if (c->trace_nodes < 0 || c->trace_nodes > (1 << 20)) return -2;
    if (!c->nojitter)
        for (int32_t j = 0; j < c->cores * (c->trace_nodes > 1 ? c->trace_nodes : 1); j++)
            if (c->traces[j].n < 1 || c->traces[j].n > INT32_MAX || c->traces[j].compute < 1 ||
                c->traces[j].length < 1)
                return -2;
    if (threads < 1 || threads > 1024 || grain < 0) return -2;
    if (grain == 0) grain = HV_JS_GRAIN;
    for (int64_t i = 0; i < c->ntasks; i++) {
        c->tasks[i].t = c->tasks[i].slot = c->tasks[i].absorbed = c->tasks[i].cend = c->tasks[i].cprev = 0;
        c->tasks[i].end = -1;
        c->tasks[i].hint = -1;
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
    for (int64_t ph = 0; ph < c->phases; ph++) {
        if (c->barrier == HV_JS_BARRIER_NONE) phase_none(c, ph);
        else phase_tree(c, ph, buf);
    }
    free(buf);
    return 0;
}
