/* Application replay core (see replay.h). Mirrors hpcvar.sim.app.Simulator.run step by step:
 * the names below (push, complete, recompute, start, finish, step) are those of the Python
 * engine, and every floating-point expression is written in the same order. */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

/* ---- the event heap: ordered by (time, insertion counter) like Python's heapq of tuples ------ */

enum { EV_TASK = 0, EV_LATENCY = 1, EV_DATA_END = 2, EV_FINISH = 3 };

typedef struct {
    double t;
    int64_t cnt;
    int64_t obj; /* task or transfer */
    int64_t ver; /* EV_DATA_END: the transfer's rate version */
    int32_t kind, pad;
} hv_ev;

typedef struct {
    hv_ev *a;
    int64_t n, cap, counter;
} hv_heap;

static inline int ev_less(const hv_ev *x, const hv_ev *y) { return x->t < y->t || (x->t == y->t && x->cnt < y->cnt); }

static int heap_push(hv_heap *h, double t, int kind, int64_t obj, int64_t ver) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 1024;
        hv_ev *a = realloc(h->a, (size_t)cap * sizeof *a);
        if (!a) return -1;
        h->a = a;
        h->cap = cap;
    }
    hv_ev e = {t, ++h->counter, obj, ver, kind, 0};
    int64_t i = h->n++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!ev_less(&e, &h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
    return 0;
}

static hv_ev heap_pop(hv_heap *h) {
    hv_ev top = h->a[0];
    hv_ev last = h->a[--h->n];
    int64_t i = 0, n = h->n;
    for (;;) {
        int64_t l = 2 * i + 1;
        if (l >= n) break;
        int64_t m = (l + 1 < n && ev_less(&h->a[l + 1], &h->a[l])) ? l + 1 : l;
        if (!ev_less(&h->a[m], &last)) break;
        h->a[i] = h->a[m];
        i = m;
    }
    if (n > 0) h->a[i] = last;
    return top;
}

/* ---- transfers: one per send op --------------------------------------------------------------- */

typedef struct {
    double nbytes, bw, lat, remaining, rate, last, data_start, end;
    int64_t op, sreq, rreq, version, next; /* next: FIFO link in the unsent queue of its key */
    int32_t src, dst;
    int8_t inter, eager, started, done, kind, pad[3];
} hv_xfer;

static const int KIND_RANK[4] = {0, 1, 1, 2}; /* none, out, in, in-out */

typedef struct {
    hv_rp_config *c;
    hv_heap heap;
    hv_xfer *x;
    int64_t nx;
    double *done_at;    /* per request: completion time, or -1 */
    int64_t *waiting;   /* per request: the task blocked on it, or -1 */
    int64_t *pending_row;
    int64_t *us_head, *us_tail; /* per key: FIFO of unsent transfers */
    int64_t *ur_head, *ur_tail; /* per key: FIFO of posted receives (op indices) */
    int64_t *ur_next;           /* per op: next receive in its FIFO */
    int64_t *active;            /* transfers in their data phase (contention models), in arrival order */
    int64_t nactive;
    double *pen;                /* penalties of the active transfers */
    /* per-node scratch for the models */
    int64_t *n_out, *n_in, *top, *card, *top2, *card2;
    double *cap;
    int64_t *users;
    int8_t *frozen;
    int64_t *touched;
} hv_rp;

static int push(hv_rp *s, double t, int kind, int64_t obj, int64_t ver) {
    return heap_push(&s->heap, t, kind, obj, ver);
}

static int complete(hv_rp *s, int64_t rq, double t) {
    hv_rp_config *c = s->c;
    s->done_at[rq] = t;
    int64_t task = s->waiting[rq];
    if (task >= 0) {
        s->waiting[rq] = -1;
        c->blocked[task] -= 1;
        if (c->blocked[task] == 0) {
            if (t > c->clock[task]) c->clock[task] = t;
            return push(s, c->clock[task], EV_TASK, task, 0);
        }
    }
    return 0;
}

/* max-min fair shares (progressive filling, as hpcvar.models.sharing.maxmin_shares) -> pen */
static void maxmin(hv_rp *s) {
    int64_t n = s->nactive, nn = s->c->nnodes, nt = 0;
    const int32_t *node = s->c->node_of;
    double *rate = s->pen;
    for (int64_t k = 0; k < n; k++) {
        hv_xfer *x = &s->x[s->active[k]];
        int64_t r[2] = {node[x->src], nn + node[x->dst]};
        for (int j = 0; j < 2; j++)
            if (s->users[r[j]] == 0 && s->cap[r[j]] == 0.0) { /* first sight: capacity 1 */
                s->cap[r[j]] = 1.0;
                s->touched[nt++] = r[j];
                s->users[r[j]] = -1; /* marks it touched until counted below */
            }
        rate[k] = 0.0;
        s->frozen[k] = 0;
    }
    int64_t left = n;
    while (left > 0) {
        for (int64_t i = 0; i < nt; i++) s->users[s->touched[i]] = 0;
        for (int64_t k = 0; k < n; k++) {
            if (s->frozen[k]) continue;
            hv_xfer *x = &s->x[s->active[k]];
            s->users[node[x->src]]++;
            s->users[nn + node[x->dst]]++;
        }
        double inc = 0.0;
        int have = 0;
        for (int64_t i = 0; i < nt; i++) {
            int64_t r = s->touched[i];
            if (s->users[r] > 0) {
                double v = s->cap[r] / (double)s->users[r];
                if (!have || v < inc) inc = v, have = 1;
            }
        }
        for (int64_t k = 0; k < n; k++)
            if (!s->frozen[k]) rate[k] += inc;
        for (int64_t i = 0; i < nt; i++) {
            int64_t r = s->touched[i];
            if (s->users[r] > 0) s->cap[r] -= inc * (double)s->users[r];
        }
        for (int64_t k = 0; k < n; k++) {
            if (s->frozen[k]) continue;
            hv_xfer *x = &s->x[s->active[k]];
            int64_t ra = node[x->src], rb = nn + node[x->dst];
            if ((s->users[ra] > 0 && s->cap[ra] <= 1e-12) || (s->users[rb] > 0 && s->cap[rb] <= 1e-12)) {
                s->frozen[k] = 1;
                left--;
            }
        }
    }
    for (int64_t i = 0; i < nt; i++) s->cap[s->touched[i]] = 0.0, s->users[s->touched[i]] = 0;
    for (int64_t k = 0; k < n; k++) rate[k] = 1.0 / rate[k];
}

static double side(int64_t deg, int strong, int64_t card, double beta, double gamma) {
    if (deg == 1) return 1.0;
    if (strong) return (double)deg * beta * (1.0 + gamma * (double)(deg - card));
    return (double)deg * beta * (1.0 - gamma / (double)card);
}

/* the gige degree model (as hpcvar.models.sharing._gige) -> pen */
static void gige(hv_rp *s) {
    hv_rp_config *c = s->c;
    int64_t n = s->nactive;
    const int32_t *node = c->node_of;
    for (int64_t k = 0; k < n; k++) {
        hv_xfer *x = &s->x[s->active[k]];
        s->n_out[node[x->src]]++;
        s->n_in[node[x->dst]]++;
    }
    /* top[src]: the largest in-degree among the source's comms, card: how many reach it;
     * top2[dst]: the largest out-degree among the destination's comms, card2: how many */
    for (int64_t k = 0; k < n; k++) {
        hv_xfer *x = &s->x[s->active[k]];
        int64_t a = node[x->src], b = node[x->dst], di = s->n_in[b], dout = s->n_out[a];
        if (di > s->top[a]) s->top[a] = di, s->card[a] = 1;
        else if (di == s->top[a]) s->card[a]++;
        if (dout > s->top2[b]) s->top2[b] = dout, s->card2[b] = 1;
        else if (dout == s->top2[b]) s->card2[b]++;
    }
    for (int64_t k = 0; k < n; k++) {
        hv_xfer *x = &s->x[s->active[k]];
        int64_t a = node[x->src], b = node[x->dst], dout = s->n_out[a], di = s->n_in[b];
        double po = side(dout, di == s->top[a], s->card[a], c->beta, c->gamma_out);
        double pi = side(di, dout == s->top2[b], s->card2[b], c->beta, c->gamma_in);
        double p = 1.0;
        if (po > p) p = po;
        if (pi > p) p = pi;
        s->pen[k] = p;
    }
    for (int64_t k = 0; k < n; k++) {
        hv_xfer *x = &s->x[s->active[k]];
        int64_t a = node[x->src], b = node[x->dst];
        s->n_out[a] = s->n_in[b] = s->top[a] = s->card[a] = s->top2[b] = s->card2[b] = 0;
    }
}

static int recompute(hv_rp *s, double now) {
    hv_rp_config *c = s->c;
    int64_t n = s->nactive;
    if (n == 0) return 0;
    const int32_t *node = c->node_of;
    if (n > 1) {
        if (c->model == HV_RP_MAXMIN) maxmin(s);
        else gige(s);
        for (int64_t k = 0; k < n; k++) {
            hv_xfer *x = &s->x[s->active[k]];
            s->n_out[node[x->src]]++;
            s->n_in[node[x->dst]]++;
        }
        for (int64_t k = 0; k < n; k++) {
            hv_xfer *x = &s->x[s->active[k]];
            int o = s->n_out[node[x->src]] > 1, i = s->n_in[node[x->dst]] > 1;
            int kd = o && i ? 3 : o ? 1 : i ? 2 : 0;
            if (KIND_RANK[kd] > KIND_RANK[(int)x->kind]) x->kind = (int8_t)kd;
        }
        for (int64_t k = 0; k < n; k++) {
            hv_xfer *x = &s->x[s->active[k]];
            s->n_out[node[x->src]] = 0;
            s->n_in[node[x->dst]] = 0;
        }
    } else {
        s->pen[0] = 1.0;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t xi = s->active[k];
        hv_xfer *x = &s->x[xi];
        double rate = x->bw / s->pen[k];
        if (rate != x->rate) {
            x->remaining -= x->rate * (now - x->last);
            x->last = now;
            x->rate = rate;
            x->version += 1;
            double rem = x->remaining > 0.0 ? x->remaining : 0.0;
            if (push(s, now + rem / rate, EV_DATA_END, xi, x->version)) return -1;
        }
    }
    return 0;
}

static int start(hv_rp *s, int64_t xi, double now) {
    s->x[xi].started = 1;
    return push(s, now + s->x[xi].lat, EV_LATENCY, xi, 0);
}

static int finish(hv_rp *s, int64_t xi, double now) {
    hv_rp_config *c = s->c;
    hv_xfer *x = &s->x[xi];
    x->done = 1;
    x->end = now;
    if (x->inter) {
        double nominal = x->nbytes / x->bw;
        if (nominal > 0) {
            c->pen_sum[x->src] += (now - x->data_start) / nominal;
            c->pen_n[x->src] += 1;
        }
        c->kinds[4 * x->src + x->kind] += 1;
    }
    if (!x->eager && complete(s, x->sreq, now)) return -1;
    if (x->rreq >= 0 && complete(s, x->rreq, now)) return -1;
    return 0;
}

static int step(hv_rp *s, int64_t task, int64_t *xid) {
    hv_rp_config *c = s->c;
    int64_t p = c->pc[task], end = c->task_off[task + 1];
    double t = c->clock[task];
    const int32_t *node = c->node_of;
    while (p < end) {
        int k = c->kind[p];
        int64_t row = c->row[p];
        if (row >= 0 && c->row_start[row] < 0) c->row_start[row] = t;
        if (k == HV_RP_COMPUTE) {
            double d = c->val[p];
            c->pc[task] = p + 1;
            c->clock[task] = t + d;
            return push(s, t + d, EV_TASK, task, 0);
        }
        if (k == HV_RP_SEND) {
            int64_t xi = (*xid)++;
            hv_xfer *x = &s->x[xi];
            int32_t dst = c->peer[p];
            memset(x, 0, sizeof *x);
            x->op = p;
            x->src = (int32_t)task;
            x->dst = dst;
            x->nbytes = c->val[p];
            x->sreq = c->req[p];
            x->rreq = -1;
            x->inter = c->inter[p];
            x->bw = c->bw[p];
            x->lat = c->lat[p];
            x->eager = c->val[p] <= c->eager;
            x->next = -1;
            x->end = -1.0;
            (void)node;
            int64_t key = c->key[p];
            int64_t q = s->ur_head[key];
            if (q >= 0) {
                x->rreq = c->req[q];
                s->ur_head[key] = s->ur_next[q];
                if (s->ur_head[key] < 0) s->ur_tail[key] = -1;
                if (start(s, xi, t)) return -1;
            } else {
                if (s->us_tail[key] >= 0) s->x[s->us_tail[key]].next = xi;
                else s->us_head[key] = xi;
                s->us_tail[key] = xi;
                if (x->eager && start(s, xi, t)) return -1;
            }
            if (x->eager) s->done_at[x->sreq] = t;
        } else if (k == HV_RP_RECV) {
            int64_t key = c->key[p], rq = c->req[p];
            int64_t xi = s->us_head[key];
            if (xi >= 0) {
                hv_xfer *x = &s->x[xi];
                s->us_head[key] = x->next;
                if (x->next < 0) s->us_tail[key] = -1;
                x->rreq = rq;
                if (x->done) s->done_at[rq] = t > x->end ? t : x->end;
                else if (!x->started && start(s, xi, t)) return -1;
            } else {
                s->ur_next[p] = -1;
                if (s->ur_tail[key] >= 0) s->ur_next[s->ur_tail[key]] = p;
                else s->ur_head[key] = p;
                s->ur_tail[key] = p;
            }
        } else { /* wait */
            int64_t need = 0, off = c->req[p];
            double latest = t;
            for (int32_t j = 0; j < c->nwait[p]; j++) {
                int64_t rq = c->wreq[off + j];
                double d = s->done_at[rq];
                if (d < 0) {
                    s->waiting[rq] = task;
                    need++;
                } else if (d > latest) {
                    latest = d;
                }
            }
            t = latest;
            if (need) {
                c->blocked[task] = need;
                c->pc[task] = p + 1;
                c->clock[task] = t;
                s->pending_row[task] = row;
                return 0;
            }
            if (row >= 0) c->row_end[row] = t;
        }
        p++;
    }
    c->pc[task] = p;
    c->clock[task] = t;
    c->finished++;
    return 0;
}

int hv_rp_config_size(void) { return (int)sizeof(hv_rp_config); }

#define ALLOC(ptr, n) \
    do { \
        (ptr) = calloc((size_t)((n) > 0 ? (n) : 1), sizeof *(ptr)); \
        if (!(ptr)) goto oom; \
    } while (0)

int hv_rp_run(hv_rp_config *c) {
    hv_rp s;
    int rc = -1;
    memset(&s, 0, sizeof s);
    s.c = c;
    int64_t nsend = 0;
    for (int64_t i = 0; i < c->nops; i++) nsend += c->kind[i] == HV_RP_SEND;
    int64_t nn = c->nnodes;
    ALLOC(s.x, nsend);
    ALLOC(s.done_at, c->nreqs);
    ALLOC(s.waiting, c->nreqs);
    ALLOC(s.pending_row, c->ntasks);
    ALLOC(s.us_head, c->nkeys);
    ALLOC(s.us_tail, c->nkeys);
    ALLOC(s.ur_head, c->nkeys);
    ALLOC(s.ur_tail, c->nkeys);
    ALLOC(s.ur_next, c->nops);
    ALLOC(s.active, nsend);
    ALLOC(s.pen, nsend);
    ALLOC(s.n_out, nn);
    ALLOC(s.n_in, nn);
    ALLOC(s.top, nn);
    ALLOC(s.card, nn);
    ALLOC(s.top2, nn);
    ALLOC(s.card2, nn);
    ALLOC(s.cap, 2 * nn);
    ALLOC(s.users, 2 * nn);
    ALLOC(s.touched, 2 * nn);
    ALLOC(s.frozen, nsend);
    for (int64_t i = 0; i < c->nreqs; i++) s.done_at[i] = -1.0, s.waiting[i] = -1;
    for (int64_t i = 0; i < c->nkeys; i++) s.us_head[i] = s.us_tail[i] = s.ur_head[i] = s.ur_tail[i] = -1;
    for (int64_t i = 0; i < c->nrows; i++) c->row_start[i] = c->row_end[i] = -1.0;
    for (int64_t t = 0; t < c->ntasks; t++) {
        s.pending_row[t] = -1;
        c->pc[t] = c->task_off[t];
        c->clock[t] = 0.0;
        c->blocked[t] = 0;
        c->pen_sum[t] = c->pen_n[t] = 0.0;
        for (int j = 0; j < 4; j++) c->kinds[4 * t + j] = 0;
    }
    c->nevents = c->finished = c->unmatched = 0;
    c->first_unmatched_op = -1;
    int contention = c->model != HV_RP_NONE;
    int64_t xid = 0;
    for (int64_t t = 0; t < c->ntasks; t++)
        if (push(&s, 0.0, EV_TASK, t, 0)) goto oom;
    while (s.heap.n > 0) {
        hv_ev e = heap_pop(&s.heap);
        double now = e.t;
        c->nevents++;
        if (e.kind == EV_TASK) {
            int64_t task = e.obj, r = s.pending_row[task];
            if (r >= 0) {
                c->row_end[r] = c->clock[task];
                s.pending_row[task] = -1;
            }
            if (step(&s, task, &xid)) goto oom;
        } else if (e.kind == EV_LATENCY) {
            hv_xfer *x = &s.x[e.obj];
            x->data_start = now;
            if (x->inter && contention) {
                x->remaining = x->nbytes;
                x->last = now;
                x->rate = 0.0;
                s.active[s.nactive++] = e.obj;
                if (recompute(&s, now)) goto oom;
            } else if (push(&s, now + x->nbytes / x->bw, EV_FINISH, e.obj, 0)) {
                goto oom;
            }
        } else if (e.kind == EV_DATA_END) {
            hv_xfer *x = &s.x[e.obj];
            if (e.ver != x->version || x->done) continue;
            int64_t k = 0;
            while (s.active[k] != e.obj) k++;
            memmove(&s.active[k], &s.active[k + 1], (size_t)(s.nactive - k - 1) * sizeof *s.active);
            s.nactive--;
            if (finish(&s, e.obj, now) || recompute(&s, now)) goto oom;
        } else if (finish(&s, e.obj, now)) {
            goto oom;
        }
    }
    for (int64_t key = 0; key < c->nkeys; key++)
        for (int64_t xi = s.us_head[key]; xi >= 0; xi = s.x[xi].next) {
            c->unmatched++;
            if (c->first_unmatched_op < 0 || s.x[xi].op < c->first_unmatched_op) c->first_unmatched_op = s.x[xi].op;
        }
    rc = 0;
oom:
    free(s.heap.a);
    free(s.x);
    free(s.done_at);
    free(s.waiting);
    free(s.pending_row);
    free(s.us_head);
    free(s.us_tail);
    free(s.ur_head);
    free(s.ur_tail);
    free(s.ur_next);
    free(s.active);
    free(s.pen);
    free(s.n_out);
    free(s.n_in);
    free(s.top);
    free(s.card);
    free(s.top2);
    free(s.card2);
    free(s.cap);
    free(s.users);
    free(s.touched);
    free(s.frozen);
    return rc;
}
