/* jitSim fast core (see jitsim.h and docs/jitter-sim.md).
 *
 * advance() is amortized O(1): each task caches the event its last advance ended in, so most
 * advances (sends, receives, work that ends before the next detour) are answered from two numbers
 * of the task's hot state without touching the trace; one that leaves the cached event reads the
 * trace from the next event on and gallops (exponential then binary search), so a long wait costs
 * O(log distance), and a wrap or an unknown cursor costs one interpolation guess plus a gallop.
 *
 * The sweeps are compiled once per kind of run (with or without jitter, one trace or several):
 * the steps of the no-jitter baseline are additions, those of a one-trace run never compute a
 * trace index. Every variant runs the same code on the same integers. */
#include "jitsim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HV_JS_PREFETCH 12 /* tasks ahead whose first trace event is prefetched (init_cursors) */
#define HV_JS_GRAIN 256   /* default: split-level nodes per thread at least */
#define HV_JS_BLOCK 4096  /* default: tasks per subtree block on one thread (at most) */
/* always_inline: the sweeps are written once and compiled into each variant, their constant flags
 * folded away; only inlined are they as fast as loops written out by hand. */
#define HV_INLINE static inline __attribute__((always_inline))
/* the flags of a variant (see variant()) */
enum { HV_JIT = 1, HV_ONE = 2, HV_BIN = 4 };

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

/* ---- the cached event ------------------------------------------------------------------------------ */

/* Cache event k of lap `lap` in the task: its end and the start of its gap, in task time. cprev: C_k, the
 * compute-available cycles up to the event's start (in its lap). */
static inline void cache_event(const hv_js_trace *tr, hv_js_task *T, hv_js_cursor *C, int64_t k, int64_t lap,
                               int64_t cprev) {
    const hv_js_event *e = tr->ev + k;
    T->hint = (int32_t)k;
    T->lap = lap <= INT32_MAX ? (int32_t)lap : -1;
    T->end = lap * tr->length + e->end - C->offset;
    T->gstart = T->end - (e->cend - cprev);
}

static inline int64_t cprev_of(const hv_js_event *ev, int64_t k) { return k ? ev[k - 1].cend : 0; }

/* The end of the work whose compute target (in lap `lap`'s cycles) lies beyond event k:
 * ev[k].cend = ck < target. Caches the event it ends in. */
static inline int64_t finish_beyond(const hv_js_trace *tr, hv_js_task *T, hv_js_cursor *C, int64_t k, int64_t ck,
                                    int64_t lap, int64_t target) {
    const hv_js_event *ev = tr->ev;
    const int64_t n = tr->n, g = tr->compute, k0 = k;
    int64_t cprev;
    if (target > g) { /* wraps: whole laps, then the rest from the start of the trace */
        const int64_t m = (target - 1) / g;
        target -= m * g;
        lap += m;
        k = reach_all(ev, n, target);
        cprev = cprev_of(ev, k);
    } else {
        k = reach_from(ev, n, target, k);
        cprev = k - 1 == k0 ? ck : ev[k - 1].cend;
    }
    cache_event(tr, T, C, k, lap, cprev);
    return T->end - (ev[k].cend - target);
}

/* advance() for a task whose work does not end inside its cached event. A task's time only moves
 * forward (its phase start, its receives and its sends follow each other), so a time before the
 * cached event's end lies inside that event (and the work ends beyond it), and a later one (in the
 * same lap of the trace) lies in a later event: the trace is read from the next event on. Without a
 * cached event (or past the lap), the full search. */
static __attribute__((noinline)) int64_t advance_slow(const hv_js_trace *tr, hv_js_task *T, hv_js_cursor *C, int64_t t,
                                                      int64_t w) {
    if (T->lap >= 0) {
        const hv_js_event *ev = tr->ev;
        const int64_t lap = T->lap, h = T->hint;
        if (t < T->end) { /* compute-available cycles at t (in the lap): the gap's cycles before it (no trace read) */
            const int64_t ck = ev[h].cend, s = t > T->gstart ? t : T->gstart;
            return finish_beyond(tr, T, C, h, ck, lap, ck - (T->end - s) + w);
        }
        const int64_t p = C->offset + t - lap * tr->length; /* >= ev[h].end: read from the next event on */
        if (p < tr->length) {
            const int64_t k = after(ev, tr->n, p, h), cprev = ev[k - 1].cend;
            int64_t a = ev[k].cend - (ev[k].end - p);
            if (a < cprev) a = cprev; /* p is inside the jitter of event k */
            const int64_t target = a + w;
            if (target <= ev[k].cend) {
                cache_event(tr, T, C, k, lap, cprev);
                return T->end - (ev[k].cend - target);
            }
            return finish_beyond(tr, T, C, k, ev[k].cend, lap, target);
        }
    }
    int64_t lap;
    const int64_t t2 = advance_lap(tr, C->offset, t, w, &T->hint, &lap);
    cache_event(tr, T, C, T->hint, lap, cprev_of(tr->ev, T->hint));
    return t2;
}

int64_t hv_js_advance(const hv_js_trace *tr, int64_t o, int64_t t, int64_t w, int32_t *hint) {
    return advance(tr, o, t, w, hint);
}

int hv_js_task_size(void) { return (int)sizeof(hv_js_task); }
int hv_js_cursor_size(void) { return (int)sizeof(hv_js_cursor); }

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

int hv_js_offsets(const hv_js_trace *traces, int32_t cores, hv_js_cursor *cursors, int64_t ntasks, int32_t align,
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
        cursors[i] = (hv_js_cursor){0, o};
    }
    return 0;
}

/* ---- the sweeps -------------------------------------------------------------------------------------
 *
 * What a sweep needs, copied out of the configuration into a local of the variant (no store into the task
 * arrays can change it, so the compiler keeps it in registers). JIT: jitter (else the baseline: a step is
 * an addition); ONE: one trace and one core per node (the trace and the latency of every task are known). */

typedef struct {
    int64_t a;
    int64_t c;
} hv_arrival;

typedef struct {
    hv_js_task *T;
    hv_js_cursor *C;
    const hv_js_trace *traces;
    int64_t n, k, W, S, R, lat_intra, lat_inter, cores, trace_nodes;
    int64_t *compute_end, *next_start;
    hv_arrival *buf;
} hv_sw;

static hv_sw sweep_of(const hv_js_config *c, hv_arrival *buf) {
    return (hv_sw){c->tasks, c->cursors,     c->traces,      c->ntasks,     c->arity,
                   c->work,  c->send,        c->recv,        c->lat_intra,  c->lat_inter,
                   c->cores, c->trace_nodes, c->compute_end, c->next_start, buf};
}

/* The trace of task i: core i % cores of recorded node (i / cores) % trace_nodes. */
static inline int64_t trace_index(int64_t cores, int64_t trace_nodes, int64_t i) {
    if (__builtin_expect(trace_nodes > 1, 0)) return ((i / cores) % trace_nodes) * cores + i % cores;
    return cores == 1 ? 0 : i % cores;
}

HV_INLINE const hv_js_trace *trace_of(const hv_sw *w, int64_t i, const int f) {
    return f & HV_ONE ? w->traces : &w->traces[trace_index(w->cores, w->trace_nodes, i)];
}

HV_INLINE int64_t latency(const hv_sw *w, int64_t i, int64_t j, const int f) {
    if ((f & HV_ONE) || w->cores == 1) return w->lat_inter; /* one core per node: every message leaves the node */
    return i / w->cores == j / w->cores ? w->lat_intra : w->lat_inter;
}

/* A task's cached event while it steps: in registers, written back by the slow path. */
typedef struct {
    int64_t gstart, end, absorbed; /* absorbed: by this task's steps of one sweep */
    int64_t hint;
} hv_cur;

HV_INLINE hv_cur cur_of(const hv_sw *w, int64_t i, const int f) {
    if (!(f & HV_JIT)) return (hv_cur){0, 0, 0, 0};
    return (hv_cur){w->T[i].gstart, w->T[i].end, 0, w->T[i].hint};
}

HV_INLINE void cur_done(const hv_sw *w, int64_t i, const hv_cur *x, const int f) {
    /* unconditional: a task leaves its cached event in about half of its phases, so a test of x->absorbed would
     * be a branch the CPU cannot predict (its misses cost more than the add) */
    if (f & HV_JIT) w->C[i].absorbed += x->absorbed;
}

/* One advance of task i by W: inline while the work ends inside the cached event. */
HV_INLINE int64_t step(const hv_sw *w, int64_t i, hv_cur *x, int64_t t, int64_t W, const int f) {
    if (!(f & HV_JIT)) return t + W;
    if (W == 0) return t;
    if (t < x->end) {
        const int64_t s = t > x->gstart ? t : x->gstart;
        if (s + W <= x->end) {
            x->absorbed += s - t;
            return s + W;
        }
    }
    const hv_js_trace *tr = trace_of(w, i, f);
    const int64_t h = x->hint;
    if (h >= 0 && h + 1 < tr->n) { /* the next event, from the cached one's end: no offset, no lap, no cold part */
        const hv_js_event e0 = tr->ev[h], e1 = tr->ev[h + 1];
        const int64_t end1 = x->end + (e1.end - e0.end), gs1 = end1 - (e1.cend - e0.cend);
        int64_t t2 = -1;
        if (t < x->end) { /* the work starts in the cached event and ends beyond it: the rest in the next gap */
            const int64_t rest = (t > x->gstart ? t : x->gstart) + W - x->end;
            if (rest <= end1 - gs1) t2 = gs1 + rest;
        } else if (t < end1) { /* the work starts in the next event */
            const int64_t s = t > gs1 ? t : gs1;
            if (s + W <= end1) t2 = s + W;
        }
        if (t2 >= 0) {
            hv_js_task *T = &w->T[i];
            x->gstart = T->gstart = gs1;
            x->end = T->end = end1;
            x->hint = h + 1;
            T->hint = (int32_t)(h + 1);
            x->absorbed += t2 - t - W;
            return t2;
        }
    }
    const int64_t t2 = advance_slow(tr, &w->T[i], &w->C[i], t, W);
    x->gstart = w->T[i].gstart;
    x->end = w->T[i].end;
    x->hint = w->T[i].hint;
    x->absorbed += t2 - t - W;
    return t2;
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

/* Task i receives from its children [first, last] in order of arrival (ties by child index). */
HV_INLINE int64_t receive_children(const hv_sw *w, int64_t i, hv_cur *x, int64_t cur, int64_t first, int64_t last,
                                   const int f) {
    const hv_js_task *T = w->T;
    if (last == first) return step(w, i, x, cur > T[first].m ? cur : T[first].m, w->R, f);
    if (last == first + 1) { /* binary tree: two children, ties by index */
        const int64_t a0 = T[first].m, a1 = T[last].m;
        const int64_t lo = a0 <= a1 ? a0 : a1, hi = a0 <= a1 ? a1 : a0;
        cur = step(w, i, x, cur > lo ? cur : lo, w->R, f);
        return step(w, i, x, cur > hi ? cur : hi, w->R, f);
    }
    const int64_t m = last - first + 1;
    for (int64_t j = 0; j < m; j++) w->buf[j] = (hv_arrival){T[first + j].m, first + j};
    sort_arrivals(w->buf, m);
    for (int64_t j = 0; j < m; j++) cur = step(w, i, x, cur > w->buf[j].a ? cur : w->buf[j].a, w->R, f);
    return cur;
}

/* The up step of task i: its work from its phase start, its children's arrivals, its send to the parent
 * (its m becomes its arrival there; the root's, its cursor). */
HV_INLINE void up_one(const hv_sw *w, int64_t ph, int64_t i, const int f) {
    const int64_t k = f & HV_BIN ? 2 : w->k, n = w->n, first = k * i + 1;
    hv_cur x = cur_of(w, i, f);
    int64_t cur = step(w, i, &x, w->T[i].m, w->W, f);
    if (w->compute_end) w->compute_end[ph * n + i] = cur;
    if (first < n) cur = receive_children(w, i, &x, cur, first, first + k - 1 < n - 1 ? first + k - 1 : n - 1, f);
    if (i > 0) {
        cur = step(w, i, &x, cur, w->S, f);
        cur += latency(w, i, (i - 1) / k, f);
    }
    w->T[i].m = cur;
    cur_done(w, i, &x, f);
}

/* The down step of task i (its release, its sends to its children); returns its next phase start. */
HV_INLINE int64_t down_one(const hv_sw *w, int64_t ph, int64_t i, const int f) {
    const int64_t k = f & HV_BIN ? 2 : w->k, n = w->n, first = k * i + 1;
    hv_cur x = cur_of(w, i, f);
    hv_js_task *T = w->T;
    int64_t cur = T[i].m;
    if (i > 0) cur = step(w, i, &x, cur, w->R, f);
    const int64_t last = first + k - 1 < n - 1 ? first + k - 1 : n - 1;
    for (int64_t ch = first; ch <= last; ch++) {
        cur = step(w, i, &x, cur, w->S, f);
        T[ch].m = cur + latency(w, i, ch, f);
    }
    T[i].m = cur;
    cur_done(w, i, &x, f);
    if (w->next_start) w->next_start[ph * n + i] = cur;
    return cur;
}

/* Levels [lo, hi) of the sweeps: up from the end (children before their parent), down from the start. */
HV_INLINE void up_range(const hv_sw *w, int64_t ph, int64_t lo, int64_t hi, const int f) {
    for (int64_t i = hi - 1; i >= lo; i--) up_one(w, ph, i, f);
}

HV_INLINE int64_t down_range(const hv_sw *w, int64_t ph, int64_t lo, int64_t hi, int64_t mx, const int f) {
    for (int64_t i = lo; i < hi; i++) {
        const int64_t cur = down_one(w, ph, i, f);
        if (cur > mx) mx = cur;
    }
    return mx;
}

/* Without a tree: every task computes [lo, hi); returns the latest end. */
HV_INLINE int64_t none_up(const hv_sw *w, int64_t ph, int64_t lo, int64_t hi, const int f) {
    int64_t mx = 0;
    for (int64_t i = lo; i < hi; i++) {
        hv_cur x = cur_of(w, i, f);
        const int64_t end = step(w, i, &x, w->T[i].m, w->W, f);
        cur_done(w, i, &x, f);
        if (w->compute_end) w->compute_end[ph * w->n + i] = end;
        if (end > mx) mx = end;
    }
    return mx;
}

/* ... and all of them start the next phase at the latest end. */
static void none_down(const hv_sw *w, int64_t ph, int64_t lo, int64_t hi, int64_t mx) {
    for (int64_t i = lo; i < hi; i++) {
        w->T[i].m = mx;
        if (w->next_start) w->next_start[ph * w->n + i] = mx;
    }
}

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

HV_INLINE void levels_up(const hv_sw *w, int64_t ph, int64_t lv[][2], int64_t nl, const int f) {
    for (int64_t l = nl - 1; l >= 0; l--) up_range(w, ph, lv[l][0], lv[l][1], f);
}

HV_INLINE int64_t levels_down(const hv_sw *w, int64_t ph, int64_t lv[][2], int64_t nl, int64_t mx, const int f) {
    for (int64_t l = 0; l < nl; l++) mx = down_range(w, ph, lv[l][0], lv[l][1], mx, f);
    return mx;
}

/* ---- one thread -----------------------------------------------------------------------------------------
 *
 * Subtree blocks. Any order that runs a task after its children going up and after its parent going down
 * gives the serial result (threads below), so one thread can fuse the down sweep of a phase with the up sweep
 * of the next: the tree is cut at a "block level" whose subtrees hold about HV_JS_BLOCK tasks (their hot
 * state stays in the L2 cache), and each subtree runs its down sweep of phase p, then at once its up sweep of
 * phase p + 1, while its tasks and the trace lines its cursors just read are still cached. The few nodes
 * above the block level run down before the blocks and up after them: the task array is streamed once per
 * phase instead of twice. */

/* The plain sweeps (a chain, a small tree); returns 0. */
HV_INLINE int plain_tree(const hv_js_config *c, const hv_sw *w, const int f) {
    for (int64_t ph = 0; ph < c->phases; ph++) {
        up_range(w, ph, 0, w->n, f);
        c->phase_end[ph] = down_range(w, ph, 0, w->n, 0, f);
    }
    return 0;
}

HV_INLINE int plain_none(const hv_js_config *c, const hv_sw *w, const int f) {
    for (int64_t ph = 0; ph < c->phases; ph++) {
        const int64_t mx = none_up(w, ph, 0, w->n, f);
        none_down(w, ph, 0, w->n, mx);
        c->phase_end[ph] = mx;
    }
    return 0;
}

/* The block level [*first, *first + *size) for blocks of at most `block` tasks; 0 when the tree is too small
 * (or a chain) to cut. */
static int block_level(int64_t n, int64_t k, int64_t block, int64_t *first, int64_t *size) {
    int64_t f = 0, s = 1;
    if (k < 2) return 0;
    while ((n - f) / s > block) {
        if (s >= n - f || s > INT64_MAX / k) return 0;
        f += s;
        s *= k;
    }
    if (s > n - f) s = n - f;
    *first = f;
    *size = s;
    return f > 0;
}

HV_INLINE int blocked_tree(const hv_js_config *c, const hv_sw *w, int64_t block, const int f) {
    const int64_t n = w->n, k = w->k;
    int64_t first, size, lv[64][2];
    if (c->phases < 1 || !block_level(n, k, block, &first, &size)) return plain_tree(c, w, f);
    for (int64_t r = first + size - 1; r >= first; r--) levels_up(w, 0, lv, subtree_levels(n, k, r, r + 1, lv), f);
    up_range(w, 0, 0, first, f);
    for (int64_t ph = 0; ph < c->phases; ph++) {
        int64_t mx = down_range(w, ph, 0, first, 0, f);
        const int next = ph + 1 < c->phases;
        for (int64_t r = first; r < first + size; r++) {
            const int64_t nl = subtree_levels(n, k, r, r + 1, lv);
            mx = levels_down(w, ph, lv, nl, mx, f);
            if (next) levels_up(w, ph + 1, lv, nl, f);
        }
        c->phase_end[ph] = mx;
        if (next) up_range(w, ph + 1, 0, first, f);
    }
    return 0;
}

HV_INLINE int serial_t(const hv_js_config *c, hv_arrival *buf, int64_t block, const int f) {
    const hv_sw w = sweep_of(c, buf);
    if (c->barrier == HV_JS_BARRIER_NONE) return plain_none(c, &w, f);
    return blocked_tree(c, &w, block, f);
}

/* The variants: with or without jitter (the baseline: steps are additions), one trace and one core per node
 * (every task's trace and latency known), a binary tree. */
static int serial_v(const hv_js_config *c, hv_arrival *b, int64_t block, int f) {
    switch (f) {
    case HV_JIT | HV_ONE | HV_BIN: return serial_t(c, b, block, HV_JIT | HV_ONE | HV_BIN);
    case HV_JIT | HV_ONE: return serial_t(c, b, block, HV_JIT | HV_ONE);
    case HV_JIT: return serial_t(c, b, block, HV_JIT);
    case HV_ONE | HV_BIN: return serial_t(c, b, block, HV_ONE | HV_BIN);
    case HV_ONE: return serial_t(c, b, block, HV_ONE);
    default: return serial_t(c, b, block, 0);
    }
}

/* The variant of a run: jitter, one trace and latency for every task (one core per node, one recorded node), a
 * binary tree (HV_BIN only with HV_ONE: the variants compiled are those of serial_v). */
static int variant(const hv_js_config *c) {
    const int one = c->cores == 1 && c->trace_nodes <= 1;
    return (c->nojitter ? 0 : HV_JIT) | (one ? HV_ONE : 0) | (one && c->arity == 2 ? HV_BIN : 0);
}

/* ---- threads ---------------------------------------------------------------------------------
 *
 * Every task's state changes only through its own steps, whose inputs are its own state and the
 * mailbox its children (going up) or its parent (going down) wrote. Any order that runs a task after
 * its children going up and after its parent going down therefore gives the same integers as the
 * serial sweeps. The threaded phase splits the tree at a "split level" whose nodes are dealt out in
 * contiguous runs, one run per thread: the descendants of nodes [a, b) one level down are
 * [k a + 1, k b + 1), again contiguous, so a thread sweeps its own subtrees level by level without
 * waiting for anyone. Per phase: every thread sweeps its subtrees up; barrier; thread 0 sweeps the
 * few nodes above the split level up and down; barrier; every thread sweeps its subtrees down;
 * barrier. The split points balance the number of tasks (the deepest level may be partial). */

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
    void (*phase)(hv_worker *, int64_t); /* the variant's phase */
    int32_t n;                           /* threads */
    int64_t split;                       /* first index of the split level (tree) */
    pthread_barrier_t bar;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0: wait, 1: go, 2: abort */
    hv_worker *w;
};

/* The largest of the threads' maxima (each thread's own in me->mx). */
static int64_t team_max(const hv_team *tm, int64_t mx) {
    for (int32_t j = 0; j < tm->n; j++)
        if (tm->w[j].mx > mx) mx = tm->w[j].mx;
    return mx;
}

HV_INLINE void worker_tree_t(hv_worker *me, int64_t ph, const int f) {
    hv_team *tm = me->team;
    const hv_sw w = sweep_of(tm->c, me->buf);
    int64_t lv[64][2];
    const int64_t nl = subtree_levels(w.n, w.k, me->lo, me->hi, lv);
    levels_up(&w, ph, lv, nl, f);
    pthread_barrier_wait(&tm->bar);
    int64_t mx = 0;
    if (me->id == 0) { /* the top of the tree, above the split level */
        up_range(&w, ph, 0, tm->split, f);
        mx = down_range(&w, ph, 0, tm->split, 0, f);
    }
    pthread_barrier_wait(&tm->bar);
    me->mx = levels_down(&w, ph, lv, nl, mx, f);
    pthread_barrier_wait(&tm->bar);
    if (me->id == 0) tm->c->phase_end[ph] = team_max(tm, me->mx);
}

HV_INLINE void worker_none_t(hv_worker *me, int64_t ph, const int f) {
    hv_team *tm = me->team;
    const hv_sw w = sweep_of(tm->c, me->buf);
    me->mx = none_up(&w, ph, me->lo, me->hi, f);
    pthread_barrier_wait(&tm->bar);
    const int64_t mx = team_max(tm, me->mx);
    none_down(&w, ph, me->lo, me->hi, mx);
    if (me->id == 0) tm->c->phase_end[ph] = mx;
    pthread_barrier_wait(&tm->bar); /* nobody overwrites its mx before all have read them */
}

static void worker_tree_job(hv_worker *me, int64_t ph) { worker_tree_t(me, ph, HV_JIT | HV_ONE | HV_BIN); }
static void worker_tree_jo(hv_worker *me, int64_t ph) { worker_tree_t(me, ph, HV_JIT | HV_ONE); }
static void worker_tree_j(hv_worker *me, int64_t ph) { worker_tree_t(me, ph, HV_JIT); }
static void worker_tree_ob(hv_worker *me, int64_t ph) { worker_tree_t(me, ph, HV_ONE | HV_BIN); }
static void worker_tree_o(hv_worker *me, int64_t ph) { worker_tree_t(me, ph, HV_ONE); }
static void worker_tree_0(hv_worker *me, int64_t ph) { worker_tree_t(me, ph, 0); }
static void worker_none_jo(hv_worker *me, int64_t ph) { worker_none_t(me, ph, HV_JIT | HV_ONE); }
static void worker_none_j(hv_worker *me, int64_t ph) { worker_none_t(me, ph, HV_JIT); }
static void worker_none_0(hv_worker *me, int64_t ph) { worker_none_t(me, ph, 0); }

static void *worker_run(void *arg) {
    hv_worker *me = arg;
    hv_team *tm = me->team;
    pthread_mutex_lock(&tm->mu);
    while (tm->state == 0) pthread_cond_wait(&tm->cv, &tm->mu);
    const int go = tm->state == 1;
    pthread_mutex_unlock(&tm->mu);
    if (!go) return NULL;
    for (int64_t ph = 0; ph < tm->c->phases; ph++) tm->phase(me, ph);
    return NULL;
}

/* Tasks of the subtrees of split-level nodes [a, b): the sum over levels of the ranges. */
static int64_t subtree_tasks(int64_t n, int64_t k, int64_t a, int64_t b) {
    int64_t lv[64][2], s = 0;
    const int64_t nl = subtree_levels(n, k, a, b, lv);
    for (int64_t l = 0; l < nl; l++) s += lv[l][1] - lv[l][0];
    return s;
}

/* The split level [*first, *first + *size) with at least threads * grain nodes and the tasks below it; 1 when
 * no level is wide enough (or the tree is a chain). */
static int split_level(const hv_js_config *c, int32_t threads, int64_t grain, int64_t *first, int64_t *size,
                       int64_t *total) {
    const int64_t n = c->ntasks, k = c->arity, want = (int64_t)threads * grain;
    if (c->barrier != HV_JS_BARRIER_TREE) {
        *first = 0;
        *size = *total = n;
        return n < want;
    }
    if (k < 2) return 1; /* a chain: nothing runs side by side */
    int64_t f = 0, s = 1;
    while (s < want) {
        if (s >= n - f || s > INT64_MAX / k) return 1; /* no level below is wide enough */
        f += s;
        s *= k;
    }
    if (s > n - f) s = n - f; /* a partial deepest level */
    if (s < want) return 1;
    *first = f;
    *size = s;
    *total = subtree_tasks(n, k, f, f + s);
    return 0;
}

/* Each thread's run [lo, hi) of the split level: w[j].lo the first node whose run before it holds at least
 * j / threads of the tasks (without a tree: of the tasks themselves). */
static void deal_out(const hv_js_config *c, hv_worker *w, int32_t threads, int64_t first, int64_t size, int64_t total) {
    for (int32_t j = 0; j < threads; j++) {
        const int64_t want = (int64_t)((__int128)total * j / threads);
        int64_t lo = first, hi = first + size;
        if (c->barrier == HV_JS_BARRIER_TREE) {
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo) / 2;
                if (subtree_tasks(c->ntasks, c->arity, first, mid) >= want) hi = mid;
                else lo = mid + 1;
            }
            w[j].lo = lo;
        } else {
            w[j].lo = want;
        }
    }
    for (int32_t j = 0; j < threads; j++) w[j].hi = j + 1 < threads ? w[j + 1].lo : first + size;
}

static void (*team_phase(const hv_js_config *c))(hv_worker *, int64_t) {
    const int f = variant(c);
    if (c->barrier != HV_JS_BARRIER_TREE)
        return f & HV_JIT ? (f & HV_ONE ? worker_none_jo : worker_none_j) : worker_none_0;
    switch (f) {
    case HV_JIT | HV_ONE | HV_BIN: return worker_tree_job;
    case HV_JIT | HV_ONE: return worker_tree_jo;
    case HV_JIT: return worker_tree_j;
    case HV_ONE | HV_BIN: return worker_tree_ob;
    case HV_ONE: return worker_tree_o;
    default: return worker_tree_0;
    }
}

/* Start the team's threads (thread 0 is the caller), run, join; -1 when a thread could not start. */
static int run_team(hv_team *tm) {
    if (pthread_barrier_init(&tm->bar, NULL, (unsigned)tm->n)) return -1;
    pthread_mutex_init(&tm->mu, NULL);
    pthread_cond_init(&tm->cv, NULL);
    int32_t started = 1;
    for (; started < tm->n; started++)
        if (pthread_create(&tm->w[started].th, NULL, worker_run, &tm->w[started])) break;
    pthread_mutex_lock(&tm->mu);
    tm->state = started == tm->n ? 1 : 2;
    pthread_cond_broadcast(&tm->cv);
    pthread_mutex_unlock(&tm->mu);
    if (started == tm->n) worker_run(&tm->w[0]);
    for (int32_t j = 1; j < started; j++) pthread_join(tm->w[j].th, NULL);
    pthread_cond_destroy(&tm->cv);
    pthread_mutex_destroy(&tm->mu);
    pthread_barrier_destroy(&tm->bar);
    return started == tm->n ? 0 : -1;
}

/* The threaded simulation; returns 1 when the problem is too small to split (run it serially). */
static int simulate_team(const hv_js_config *c, int32_t threads, int64_t grain) {
    int64_t first, size, total;
    if (split_level(c, threads, grain, &first, &size, &total)) return 1;
    hv_team tm = {.c = c, .phase = team_phase(c), .n = threads, .split = c->barrier == HV_JS_BARRIER_TREE ? first : 0};
    hv_worker *w = calloc((size_t)threads, sizeof *w);
    if (!w) return -1;
    tm.w = w;
    int rc = 0;
    const int64_t bufn = c->arity > 2 ? (c->arity < c->ntasks ? c->arity : c->ntasks) : 0;
    for (int32_t j = 0; j < threads; j++) {
        w[j].team = &tm;
        w[j].id = j;
        if (bufn && !(w[j].buf = malloc((size_t)bufn * sizeof *w[j].buf))) rc = -1;
    }
    deal_out(c, w, threads, first, size, total);
    if (rc == 0) rc = run_team(&tm);
    for (int32_t j = 0; j < threads; j++) free(w[j].buf);
    free(w);
    return rc;
}

/* ---- reset, cursors, entry points --------------------------------------------------------------- */

/* Every task before its first phase (its offset kept), without a cached event. */
static void reset_tasks(const hv_js_config *c) {
    for (int64_t i = 0; i < c->ntasks; i++) {
        c->tasks[i] = (hv_js_task){0, 0, -1, -1, -1};
        c->cursors[i].absorbed = 0;
    }
}

static int32_t trace_count(const hv_js_config *c) { return c->cores * (c->trace_nodes > 1 ? c->trace_nodes : 1); }

/* A bucket index of trace j (one int32 per 4 events: the first event ending after the bucket's start). */
static int32_t *bucket_index(const hv_js_trace *tr, int64_t *nb, int64_t *width) {
    *nb = tr->n / 4 > 0 ? tr->n / 4 : 1;
    *width = (tr->length + *nb - 1) / *nb;
    int32_t *idx = malloc((size_t)*nb * sizeof *idx);
    if (!idx) return NULL;
    int64_t e = 0;
    for (int64_t b = 0; b < *nb; b++) {
        while (e < tr->n - 1 && tr->ev[e].end <= b * *width) e++;
        idx[b] = (int32_t)e;
    }
    return idx;
}

/* The reset of every task and its starting cursor: the event holding its offset (lap 0), through a bucket
 * index of each trace, so that the first phase does not search the whole trace at random places. A cursor at
 * time 0 is valid for every later time: a task's time only moves forward. */
static int init_cursors(const hv_js_config *c) {
    const int32_t nt = trace_count(c);
    int32_t **idx = calloc((size_t)nt, sizeof *idx);
    int64_t *width = calloc((size_t)nt, sizeof *width), *nb = calloc((size_t)nt, sizeof *nb);
    int rc = !idx || !width || !nb ? -1 : 0;
    for (int32_t j = 0; j < nt && rc == 0; j++)
        if (!(idx[j] = bucket_index(&c->traces[j], &nb[j], &width[j]))) rc = -1;
    for (int64_t i = 0; i < c->ntasks && rc == 0; i++) {
        if (i + HV_JS_PREFETCH < c->ntasks) {
            const int64_t ip = i + HV_JS_PREFETCH, j = trace_index(c->cores, c->trace_nodes, ip);
            __builtin_prefetch(c->traces[j].ev + idx[j][c->cursors[ip].offset / width[j]]);
        }
        const int64_t j = trace_index(c->cores, c->trace_nodes, i);
        const hv_js_trace *tr = &c->traces[j];
        hv_js_task *T = &c->tasks[i];
        hv_js_cursor *C = &c->cursors[i];
        *T = (hv_js_task){0, 0, -1, -1, -1};
        C->absorbed = 0;
        const int64_t p = C->offset;
        if (p < 0 || p >= tr->length) continue; /* left to the full search (refused offsets) */
        int64_t k = idx[j][p / width[j]];
        if (tr->ev[k].end <= p) k = after(tr->ev, tr->n, p, k);
        cache_event(tr, T, C, k, 0, cprev_of(tr->ev, k));
    }
    if (idx)
        for (int32_t j = 0; j < nt; j++) free(idx[j]);
    free(idx);
    free(width);
    free(nb);
    return rc;
}

int hv_js_simulate(const hv_js_config *c) { return hv_js_simulate_threads(c, 1, 0); }

static int bad_config(const hv_js_config *c, int32_t threads, int64_t grain) {
    if (c->ntasks < 1 || c->phases < 0 || c->work < 0 || c->send < 0 || c->recv < 0 || c->lat_intra < 0 ||
        c->lat_inter < 0 || c->cores < 1 || c->arity < 1 || c->ntasks > INT64_MAX / (c->arity + 1))
        return 1;
    if (c->barrier != HV_JS_BARRIER_NONE && c->barrier != HV_JS_BARRIER_TREE) return 1;
    if (c->trace_nodes < 0 || c->trace_nodes > (1 << 20)) return 1;
    if (!c->nojitter)
        for (int32_t j = 0; j < trace_count(c); j++)
            if (c->traces[j].n < 1 || c->traces[j].n > INT32_MAX || c->traces[j].compute < 1 || c->traces[j].length < 1)
                return 1;
    return threads < 1 || threads > 1024 || grain < 0;
}

int hv_js_simulate_threads(const hv_js_config *c, int32_t threads, int64_t grain) {
    if (bad_config(c, threads, grain)) return -2;
    const int64_t block = threads == 1 && grain > 0 ? grain : HV_JS_BLOCK;
    if (grain == 0) grain = HV_JS_GRAIN;
    if (!c->nojitter) {
        if (init_cursors(c)) return -1;
    } else {
        reset_tasks(c);
    }
    if (threads > 1) {
        const int rc = simulate_team(c, threads, grain);
        if (rc != 1) return rc;
    }
    hv_arrival *buf = NULL;
    if (c->barrier == HV_JS_BARRIER_TREE && c->arity > 2) {
        const int64_t m = c->arity < c->ntasks ? c->arity : c->ntasks;
        if (!(buf = malloc((size_t)m * sizeof *buf))) return -1;
    }
    const int rc = serial_v(c, buf, block, variant(c));
    free(buf);
    return rc;
}
