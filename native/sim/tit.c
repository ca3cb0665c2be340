/* SimGrid time-independent traces (TIT) into column arrays: the compiled twin of the Python reference
 * hpcvar.traces.tit (its _Parser), for ASCII input (Python sends any other text to the reference). Both dialects
 * of SimGrid (native/sim/tit_dialect.c): each file's grammar is chosen by its first line that only one grammar
 * reads (or by the dialect given), then its lines are read in order.
 * Lines end at \n, \r\n, \r, \v, \f, \x1c, \x1d, \x1e (str.splitlines); fields are separated by space,
 * \t, \x1f (str.split). Numbers follow Python's int() and float() grammars (signs, underscores between
 * digits, inf/nan, the int digit limit) so that the same tokens are accepted with the same values.
 * Rows are kept in file order (a task's rows in seq order); hv_tit_fill writes them sorted by task, then the
 * finalize rows added for tasks that do not end with one (in order of the tasks' first lines). The first
 * error stops the parse: its kind, file, line and token; Python writes the message (hpcvar.traces.tit). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strtod_l, qsort_r: also when built outside CMake (a developer's gcc line) */
#endif
#include "hv_ops.h"
#include "tit.h"
#include "tit_dialect.h"

#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TASKS (1 << 24)
#define MAX_NS 100000000000000000LL /* 10**17: hpcvar.traces.parquet.MAX_NS */
#define MAX_BYTES (1LL << 62)
#define MAX_SIZE 1125899906842624.0 /* 2**50: hpcvar.units.MAX_SIZE */
#define MAX_TAG 2147483647LL

enum { C_TOK = 0, C_SPACE = 1, C_BREAK = 2, C_CR = 3, C_HIGH = 4 };

typedef struct {
    int64_t rank, clock, nrows, default_size; /* default_size: bytes of a count without a datatype */
    int8_t last_op;
    int64_t *pend; /* the pending isend/irecv: (file-order row index, seq) pairs, oldest first */
    int64_t npend, cappend;
} task_st;

typedef struct {
    int32_t *tid;
    int8_t *op;
    int32_t *peer, *tag;
    int64_t *bytes, *req, *t;
    int64_t n, cap;
    task_st *task;
    int64_t ntask, captask;
    int64_t *hk, *hv; /* rank -> task index, open addressing (key -1: empty) */
    int64_t hcap;
    int64_t last_rank, last_tid;
    int64_t peer_max, peer_file, peer_line;
    char *scratch;
    int64_t capscratch;
    int64_t world; /* the ranks of the trace (the highest first field + 1), counted for a v-collective; 0: not yet */
} tit_st;

typedef struct {
    const char **p; /* the fields of the line (all of them: a v-collective has a count per rank) */
    int64_t *len;
    int64_t n, cap;
} fields;

static unsigned char cls[256];

static void init_classes(void) {
    for (int i = 0; i < 256; i++) cls[i] = i >= 0x80 ? C_HIGH : C_TOK;
    cls[' '] = cls['\t'] = cls[0x1f] = C_SPACE;
    cls['\n'] = cls['\v'] = cls['\f'] = cls[0x1c] = cls[0x1d] = cls[0x1e] = C_BREAK;
    cls['\r'] = C_CR;
}

/* ---- numbers as Python reads them ------------------------------------------------------------- */

static int isdig(char ch) { return ch >= '0' && ch <= '9'; }

/* int(tok) of Python, base 10: [+-] digits with single underscores between digits; -1 if invalid or
 * beyond the digit limit, else 0 with the value (saturated at 2^40, enough for a range check) */
static int py_int(const char *s, int64_t n, int64_t max_digits, int64_t *out) {
    int64_t i = 0, v = 0, digits = 0;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i >= n || !isdig(s[i])) return -1;
    for (; i < n; i++) {
        if (s[i] == '_') {
            if (i + 1 >= n || !isdig(s[i + 1])) return -1;
            continue;
        }
        if (!isdig(s[i])) return -1;
        digits++;
        if (v < (1LL << 40)) v = v * 10 + (s[i] - '0');
    }
    if (max_digits > 0 && digits > max_digits) return -1;
    *out = neg ? -v : v;
    return 0;
}

static int ci_eq(const char *s, int64_t n, const char *word, int64_t k) {
    if (n != k) return 0;
    for (int64_t i = 0; i < n; i++)
        if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]) != word[i]) return 0;
    return 1;
}

/* the decimal part of Python's float grammar (after the sign, underscores removed): digits [. digits]
 * [e [sign] digits] with at least one mantissa digit */
static int decimal_ok(const char *s, int64_t n) {
    int64_t i = 0, mant = 0;
    while (i < n && isdig(s[i])) i++, mant++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && isdig(s[i])) i++, mant++;
    }
    if (!mant) return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || !isdig(s[i])) return 0;
        while (i < n && isdig(s[i])) i++;
    }
    return i == n;
}

/* the token without its underscores into the scratch buffer, NUL-terminated; -1 when an underscore is
 * not between two digits (Python's rule) or on no memory */
static int64_t strip_underscores(tit_st *S, const char *s, int64_t n) {
    if (n + 1 > S->capscratch) {
        char *b = realloc(S->scratch, (size_t)n + 1);
        if (!b) return -1;
        S->scratch = b, S->capscratch = n + 1;
    }
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (s[i] != '_') {
            S->scratch[k++] = s[i];
            continue;
        }
        if (i == 0 || !isdig(s[i - 1]) || i + 1 >= n || !isdig(s[i + 1])) return -1;
    }
    S->scratch[k] = 0;
    return k;
}

static locale_t c_locale(void) {
    static locale_t loc;
    if (!loc) loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    return loc;
}

/* a plain decimal (digits [. digits] [e [sign] digits], no sign, no underscore) whose value one IEEE
 * operation gives correctly rounded (Clinger's fast path: at most 15 significant digits, an exact power of
 * ten up to 1e22); 0 if the token is not of that kind */
static int fast_decimal(const char *s, int64_t n, double *out) {
    static const double P10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    int64_t i = 0, m = 0, nd = 0, frac = 0, e = 0, esign = 1;
    for (; i < n && isdig(s[i]) && nd <= 15; i++) m = m * 10 + (s[i] - '0'), nd += m > 0;
    if (i < n && s[i] == '.')
        for (i++; i < n && isdig(s[i]) && nd <= 15; i++) m = m * 10 + (s[i] - '0'), nd += m > 0, frac++;
    if (nd > 15 || i == 0 || (i == 1 && s[0] == '.')) return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i < n && (s[i] == '+' || s[i] == '-')) esign = s[i++] == '-' ? -1 : 1;
        if (i >= n) return 0;
        for (; i < n && isdig(s[i]) && e < 1000; i++) e = e * 10 + (s[i] - '0');
    }
    int64_t p = esign * e - frac;
    if (i != n || p < -22 || p > 22) return 0;
    *out = p >= 0 ? (double)m * P10[p] : (double)m / P10[-p];
    return 1;
}

/* float(tok) of Python: -1 if invalid, else 0 and the correctly rounded value */
static int py_float(tit_st *S, const char *s, int64_t n, double *out) {
    if (fast_decimal(s, n, out)) return 0;
    int64_t k = strip_underscores(S, s, n);
    if (k < 0) return -1;
    const char *b = S->scratch;
    int64_t j = (k > 0 && (b[0] == '+' || b[0] == '-')) ? 1 : 0;
    double sign = (j && b[0] == '-') ? -1.0 : 1.0;
    if (ci_eq(b + j, k - j, "inf", 3) || ci_eq(b + j, k - j, "infinity", 8)) return *out = sign * INFINITY, 0;
    if (ci_eq(b + j, k - j, "nan", 3)) return *out = NAN, 0;
    if (!decimal_ok(b + j, k - j)) return -1;
    *out = strtod_l(b, NULL, c_locale());
    return 0;
}

/* ---- tasks: rank -> dense index in order of first appearance ----------------------------------- */

static int hash_grow(tit_st *S) {
    int64_t cap = S->hcap ? 2 * S->hcap : 64;
    int64_t *k = malloc((size_t)cap * sizeof *k), *v = malloc((size_t)cap * sizeof *v);
    if (!k || !v) return free(k), free(v), -1;
    for (int64_t i = 0; i < cap; i++) k[i] = -1;
    for (int64_t i = 0; i < S->hcap; i++) {
        if (S->hk[i] < 0) continue;
        uint64_t j = ((uint64_t)S->hk[i] * 0x9E3779B97F4A7C15ull >> 20) & (uint64_t)(cap - 1);
        while (k[j] >= 0) j = (j + 1) & (uint64_t)(cap - 1);
        k[j] = S->hk[i], v[j] = S->hv[i];
    }
    free(S->hk), free(S->hv);
    S->hk = k, S->hv = v, S->hcap = cap;
    return 0;
}

static int64_t new_task(tit_st *S, int64_t rank) {
    if (S->ntask == S->captask) {
        int64_t cap = S->captask ? 2 * S->captask : 64;
        task_st *t = realloc(S->task, (size_t)cap * sizeof *t);
        if (!t) return -1;
        S->task = t, S->captask = cap;
    }
    task_st *t = &S->task[S->ntask];
    memset(t, 0, sizeof *t);
    t->rank = rank;
    t->last_op = -1;
    t->default_size = 1;
    return S->ntask++;
}

/* the task index of a rank, added on its first line; -1 on no memory */
static int64_t task_of(tit_st *S, int64_t rank) {
    if (rank == S->last_rank) return S->last_tid;
    if (2 * (S->ntask + 1) > S->hcap && hash_grow(S)) return -1;
    uint64_t j = ((uint64_t)rank * 0x9E3779B97F4A7C15ull >> 20) & (uint64_t)(S->hcap - 1);
    while (S->hk[j] >= 0 && S->hk[j] != rank) j = (j + 1) & (uint64_t)(S->hcap - 1);
    if (S->hk[j] < 0) {
        int64_t t = new_task(S, rank);
        if (t < 0) return -1;
        S->hk[j] = rank, S->hv[j] = t;
    }
    S->last_rank = rank;
    return S->last_tid = S->hv[j];
}

/* ---- rows ------------------------------------------------------------------------------------ */

/* room for at least ``want`` rows (at least twice the current room) */
static int rows_grow(tit_st *S, int64_t want) {
    int64_t cap = S->cap ? 2 * S->cap : 4096;
    if (want > cap) cap = want;
    void *p[7] = {realloc(S->tid, (size_t)cap * 4), NULL, NULL, NULL, NULL, NULL, NULL};
    if (p[0]) S->tid = p[0];
    if ((p[1] = realloc(S->op, (size_t)cap))) S->op = p[1];
    if ((p[2] = realloc(S->peer, (size_t)cap * 4))) S->peer = p[2];
    if ((p[3] = realloc(S->bytes, (size_t)cap * 8))) S->bytes = p[3];
    if ((p[4] = realloc(S->req, (size_t)cap * 8))) S->req = p[4];
    if ((p[5] = realloc(S->t, (size_t)cap * 8))) S->t = p[5];
    if ((p[6] = realloc(S->tag, (size_t)cap * 4))) S->tag = p[6];
    for (int i = 0; i < 7; i++)
        if (!p[i]) return -1;
    S->cap = cap;
    return 0;
}

/* a row of task ti at its clock (every TIT row lasts 0 s); the row's index, -1 on no memory */
static int64_t add_row(tit_st *S, int64_t ti, int op, int64_t peer, int64_t nbytes, int64_t tag, int64_t req,
                       int64_t file, int64_t line) {
    if (S->n == S->cap && rows_grow(S, 0)) return -1;
    task_st *t = &S->task[ti];
    int64_t i = S->n++;
    S->tid[i] = (int32_t)ti, S->op[i] = (int8_t)op, S->peer[i] = (int32_t)peer, S->tag[i] = (int32_t)tag;
    S->bytes[i] = nbytes, S->req[i] = req, S->t[i] = t->clock;
    t->nrows++;
    t->last_op = (int8_t)op;
    if (peer > S->peer_max) S->peer_max = peer, S->peer_file = file, S->peer_line = line;
    return i;
}

static int push_pending(task_st *t, int64_t row) {
    if (t->npend == t->cappend) {
        int64_t cap = t->cappend ? 2 * t->cappend : 8;
        int64_t *p = realloc(t->pend, (size_t)cap * 2 * sizeof *p);
        if (!p) return -1;
        t->pend = p, t->cappend = cap;
    }
    t->pend[2 * t->npend] = row, t->pend[2 * t->npend + 1] = t->nrows - 1;
    t->npend++;
    return 0;
}

/* ---- one line ------------------------------------------------------------------------------- */

typedef struct {
    tit_st *S;
    hv_tit_config *c;
    fields f;
    int64_t file, line, start, end, ti, chosen_at;
    int grammar;
} line_ctx;

static int fail(line_ctx *L, int err, int tok, int64_t a, int64_t b) {
    hv_tit_config *c = L->c;
    c->err = err, c->err_tok = tok, c->err_a = a, c->err_b = b;
    c->err_file = L->file, c->err_line = L->line, c->err_start = L->start, c->err_end = L->end;
    return -1;
}

static const tit_action *action_of(line_ctx *L) { return tit_action_of(L->f.p[1], L->f.len[1]); }

/* field i as a rank (``3`` or ``p3``) */
static int get_rank(line_ctx *L, int i, int64_t *r) {
    const char *s = L->f.p[i];
    int64_t n = L->f.len[i];
    if (n && s[0] == 'p') s++, n--;
    if (py_int(s, n, L->c->max_digits, r) || *r < 0 || *r >= MAX_TASKS) return fail(L, HV_TIT_E_RANK, i, 0, 0);
    return 0;
}

/* field i as a rank, or ``dflt`` when the line has no field i */
static int opt_rank(line_ctx *L, int i, int64_t dflt, int64_t *r) {
    if (i >= L->f.n) return *r = dflt, 0;
    return get_rank(L, i, r);
}

static int get_tag(line_ctx *L, int i, int64_t *v) {
    if (py_int(L->f.p[i], L->f.len[i], L->c->max_digits, v) || *v < 0 || *v > MAX_TAG)
        return fail(L, HV_TIT_E_TAG, i, 0, 0);
    return 0;
}

/* field i as a count: float() truncated, in 0..MAX_SIZE */
static int get_count(line_ctx *L, int i, int64_t *v) {
    double x;
    if (py_float(L->S, L->f.p[i], L->f.len[i], &x) || !(x >= 0 && x <= MAX_SIZE))
        return fail(L, HV_TIT_E_SIZE, i, 0, 0);
    *v = (int64_t)x;
    return 0;
}

/* field i as seconds (divided by ``divisor``) into ns, rounded half to even like Python's round() */
static int get_ns(line_ctx *L, int i, double divisor, int err, int64_t *ns) {
    double x;
    if (py_float(L->S, L->f.p[i], L->f.len[i], &x)) return fail(L, err, i, 0, 0);
    double y = x / divisor * 1e9;
    if (!(y >= 0 && y <= (double)MAX_NS)) return fail(L, err, i, 0, 0);
    *ns = (int64_t)nearbyint(y);
    return 0;
}

/* the size of the datatype at field i (absent: the task's default) */
static int get_datatype(line_ctx *L, int i, int64_t *size) {
    if (i >= L->f.n) return *size = L->S->task[L->ti].default_size, 0;
    int s = tit_datatype_size(L->f.p[i], L->f.len[i], L->c->dialect, L->grammar);
    if (s < 0) return fail(L, HV_TIT_E_DATATYPE, i, -s, L->grammar);
    *size = s;
    return 0;
}

/* count (field i) times size, at most MAX_SIZE */
static int bytes_of(line_ctx *L, int i, int64_t count, int64_t size, int64_t *out) {
    if (count * size > (int64_t)MAX_SIZE) return fail(L, HV_TIT_E_BYTES, i, size, 0); /* <= 2^50 * 32 */
    *out = count * size;
    return 0;
}

static int add(line_ctx *L, int op, int64_t peer, int64_t nbytes, int64_t tag, int64_t req) {
    if (add_row(L->S, L->ti, op, peer, nbytes, tag, req, L->file, L->line) < 0)
        return fail(L, HV_TIT_E_MEMORY, 0, 0, 0);
    return 0;
}

/* PEER [TAG] COUNT [DATATYPE] (the tag: in the 3.20 grammar only) */
static int do_p2p(line_ctx *L, int op) {
    int64_t peer, tag = 0, count, size, nbytes;
    int neu = L->grammar == HV_TIT_NEW, ci = neu ? 4 : 3;
    if (get_rank(L, 2, &peer) || (neu && get_tag(L, 3, &tag)) || get_count(L, ci, &count) ||
        get_datatype(L, ci + 1, &size) || bytes_of(L, ci, count, size, &nbytes))
        return -1;
    int64_t row = add_row(L->S, L->ti, op, peer, nbytes, tag, -1, L->file, L->line);
    if (row < 0 || ((op == OP_ISEND || op == OP_IRECV) && push_pending(&L->S->task[L->ti], row)))
        return fail(L, HV_TIT_E_MEMORY, 0, 0, 0);
    return 0;
}

/* the wait row of pending request k of the task (removed from its list) */
static int complete(line_ctx *L, task_st *t, int64_t k) {
    tit_st *S = L->S;
    int64_t row = t->pend[2 * k], seq = t->pend[2 * k + 1];
    memmove(&t->pend[2 * k], &t->pend[2 * k + 2], (size_t)(t->npend - k - 1) * 2 * sizeof *t->pend);
    t->npend--;
    return add(L, OP_WAIT, S->peer[row], S->bytes[row], S->tag[row], seq);
}

/* 3.19: the most recent pending request; 3.20: ``wait SRC DST TAG``, the oldest pending one with that key */
static int do_wait(line_ctx *L) {
    task_st *t = &L->S->task[L->ti];
    if (L->grammar != HV_TIT_NEW) {
        if (!t->npend) return fail(L, HV_TIT_E_WAIT_EMPTY, 0, 0, 0);
        return complete(L, t, t->npend - 1);
    }
    int64_t src, dst, tag;
    if (get_rank(L, 2, &src) || get_rank(L, 3, &dst) || get_tag(L, 4, &tag)) return -1;
    for (int64_t k = 0; k < t->npend; k++) {
        int64_t row = t->pend[2 * k], op = L->S->op[row], peer = L->S->peer[row];
        if (L->S->tag[row] == tag &&
            ((op == OP_ISEND && t->rank == src && peer == dst) || (op == OP_IRECV && t->rank == dst && peer == src)))
            return complete(L, t, k);
    }
    return fail(L, HV_TIT_E_WAIT_NONE, 4, src, dst);
}

static int do_test(line_ctx *L) {
    int64_t src, dst, tag;
    if (L->grammar != HV_TIT_NEW) return 0;
    return get_rank(L, 2, &src) || get_rank(L, 3, &dst) || get_tag(L, 4, &tag) ? -1 : 0;
}

static int do_waitall(line_ctx *L) {
    task_st *t = &L->S->task[L->ti];
    while (t->npend)
        if (complete(L, t, 0)) return -1;
    return 0;
}

/* SEND RECV [ROOT] [DT1 [DT2]] of gather, scatter (rooted), allgather, alltoall: this rank's bytes */
static int coll_blocks(line_ctx *L, int op, int64_t count, int64_t *root, int64_t *nbytes) {
    int64_t recv, ss, rs, sb, rb;
    int rooted = op == OP_GATHER || op == OP_SCATTER, d = rooted ? 5 : 4;
    if (get_count(L, 3, &recv) || (rooted && opt_rank(L, 4, 0, root)) || get_datatype(L, d, &ss) ||
        get_datatype(L, d + 1, &rs) || bytes_of(L, 2, count, ss, &sb) || bytes_of(L, 3, recv, rs, &rb))
        return -1;
    *nbytes = op == OP_SCATTER ? rb : sb; /* scatter: the block received (significant everywhere) */
    return 0;
}

/* a collective row (bytes: this rank's contribution), then the FLOPS of reduce and allreduce */
static int do_coll(line_ctx *L, int op) {
    int64_t count, ns = 0, root = -1, size, nbytes;
    if (op == OP_BARRIER) return add(L, op, -1, 0, 0, -1);
    if (get_count(L, 2, &count)) return -1;
    if (op == OP_REDUCE || op == OP_ALLREDUCE) {
        int d = op == OP_REDUCE ? 5 : 4;
        if (get_ns(L, 3, L->c->flops_rate, HV_TIT_E_COMPUTE, &ns) || (op == OP_REDUCE && opt_rank(L, 4, 0, &root)) ||
            get_datatype(L, d, &size) || bytes_of(L, 2, count, size, &nbytes))
            return -1;
    } else if (op == OP_BCAST) {
        if (opt_rank(L, 3, 0, &root) || get_datatype(L, 4, &size) || bytes_of(L, 2, count, size, &nbytes)) return -1;
    } else if (coll_blocks(L, op, count, &root, &nbytes)) return -1;
    if (add(L, op, root, nbytes, 0, -1)) return -1;
    L->S->task[L->ti].clock += ns;
    return 0;
}

/* sendRecv SEND_COUNT DST RECV_COUNT SRC [DT1 [DT2]] (SimGrid 3.32; tag 0 on both sides) */
static int do_sendrecv(line_ctx *L) {
    int64_t sc, dst, rc, src, ss, rs, sb, rb;
    if (get_count(L, 2, &sc) || get_rank(L, 3, &dst) || get_count(L, 4, &rc) || get_rank(L, 5, &src) ||
        get_datatype(L, 6, &ss) || get_datatype(L, 7, &rs) || bytes_of(L, 2, sc, ss, &sb) ||
        bytes_of(L, 4, rc, rs, &rb))
        return -1;
    return add(L, OP_SENDRECV, dst, sb, 0, -1) || add(L, OP_SENDRECV_RECV, src, rb, 0, -1) ? -1 : 0;
}

/* the first field of every line that is not a comment, as a rank: the highest + 1 (computed once) */
static int64_t world_size(line_ctx *L) {
    tit_st *S = L->S;
    if (S->world) return S->world;
    for (int64_t file = 0; file < L->c->nfiles; file++) {
        const char *s = L->c->buf[file];
        int64_t n = L->c->len[file], i = 0, r;
        while (i < n) {
            while (i < n && cls[(unsigned char)s[i]] == C_SPACE) i++;
            int64_t b = i;
            while (i < n && cls[(unsigned char)s[i]] == C_TOK) i++;
            const char *t = s + b;
            int64_t k = i - b;
            if (k && t[0] != '#' && (i >= n || cls[(unsigned char)s[i]] != C_HIGH)) {
                if (t[0] == 'p') t++, k--;
                if (!py_int(t, k, L->c->max_digits, &r) && r >= 0 && r < MAX_TASKS && r + 1 > S->world)
                    S->world = r + 1;
            }
            while (i < n && cls[(unsigned char)s[i]] != C_BREAK && cls[(unsigned char)s[i]] != C_CR) i++;
            i += (i < n && s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') ? 2 : 1;
        }
    }
    return S->world;
}

/* the sum of the n counts from field i */
static int get_counts(line_ctx *L, int64_t i, int64_t n, int64_t *total) {
    int64_t v;
    *total = 0;
    for (int64_t k = i; k < i + n; k++) {
        if (get_count(L, (int)k, &v)) return -1;
        *total += v; /* each at most 2^50; saturated below: beyond MAX_SIZE is an error anyway */
        if (*total > (1LL << 62)) *total = 1LL << 62;
    }
    return 0;
}

static int total_of(line_ctx *L, int64_t i, int64_t total, int64_t size, int64_t *out) {
    if (total > (int64_t)MAX_SIZE || total * size > (int64_t)MAX_SIZE) return fail(L, HV_TIT_E_TOTAL, (int)i, size, 0);
    *out = total * size;
    return 0;
}

/* gatherv, scatterv, allgatherv, alltoallv with a count per rank (bytes: this rank's, the root's the sum);
 * reducescatter as a reduce to rank 0 of the sum, a scatterv of each rank's count, then its flops */
static int do_vcoll(line_ctx *L, int op) {
    int64_t n = world_size(L), r = L->S->task[L->ti].rank, a, total, total2, root = -1, ss, rs, b1, b2, ns = 0;
    if (op == OP_GATHERV) {
        if (get_count(L, 2, &a) || get_counts(L, 3, n, &total) || opt_rank(L, (int)(3 + n), 0, &root) ||
            get_datatype(L, (int)(4 + n), &ss) || get_datatype(L, (int)(5 + n), &rs) || bytes_of(L, 2, a, ss, &b1) ||
            total_of(L, 3, total, rs, &b2))
            return -1;
        return add(L, op, root, r == root ? b2 : b1, 0, -1);
    }
    if (op == OP_SCATTERV) {
        if (get_counts(L, 2, n, &total) || get_count(L, (int)(2 + n), &a) || opt_rank(L, (int)(3 + n), 0, &root) ||
            get_datatype(L, (int)(4 + n), &ss) || get_datatype(L, (int)(5 + n), &rs) ||
            total_of(L, 2, total, ss, &b2) || bytes_of(L, (int)(2 + n), a, rs, &b1))
            return -1;
        return add(L, op, root, r == root ? b2 : b1, 0, -1);
    }
    if (op == OP_ALLGATHERV) {
        if (get_count(L, 2, &a) || get_counts(L, 3, n, &total) || get_datatype(L, (int)(3 + n), &ss) ||
            get_datatype(L, (int)(4 + n), &rs) || bytes_of(L, 2, a, ss, &b1) || total_of(L, 3, total, rs, &b2))
            return -1;
        return add(L, op, -1, b2, 0, -1);
    }
    if (op == OP_ALLTOALLV) {
        if (get_count(L, 2, &a) || get_counts(L, 3, n, &total) || get_count(L, (int)(3 + n), &a) ||
            get_counts(L, 4 + n, n, &total2) || get_datatype(L, (int)(4 + 2 * n), &ss) ||
            get_datatype(L, (int)(5 + 2 * n), &rs) || total_of(L, 3, total, ss, &b1) ||
            total_of(L, 4 + n, total2, rs, &b2))
            return -1;
        return add(L, op, -1, b1, 0, -1);
    }
    if (get_counts(L, 2, n, &total) || get_ns(L, (int)(2 + n), L->c->flops_rate, HV_TIT_E_COMPUTE, &ns) ||
        get_datatype(L, (int)(3 + n), &ss) || total_of(L, 2, total, ss, &b2) || get_count(L, (int)(2 + r), &a))
        return -1;
    if (add(L, OP_REDUCE, 0, b2, 0, -1) || add(L, OP_SCATTERV, 0, r == 0 ? b2 : a * ss, 0, -1)) return -1;
    L->S->task[L->ti].clock += ns;
    return 0;
}

static int do_action(line_ctx *L, const tit_action *a) {
    task_st *t = &L->S->task[L->ti];
    int64_t ns;
    switch (a->kind) {
    case K_INIT:
        t->default_size = L->f.n > 2 ? 8 : 1; /* SimGrid: MPI_DOUBLE after 'init X', else MPI_BYTE */
        return add(L, OP_INIT, -1, 0, 0, -1);
    case K_FINALIZE: return add(L, OP_FINALIZE, -1, 0, 0, -1);
    case K_COMPUTE:
        if (get_ns(L, 2, L->c->flops_rate, HV_TIT_E_COMPUTE, &ns)) return -1;
        t->clock += ns;
        return 0;
    case K_SLEEP:
        if (get_ns(L, 2, 1.0, HV_TIT_E_SLEEP, &ns)) return -1;
        t->clock += ns;
        return 0;
    case K_P2P: return do_p2p(L, a->op);
    case K_WAIT: return do_wait(L);
    case K_TEST: return do_test(L);
    case K_WAITALL: return do_waitall(L);
    case K_COLL: return do_coll(L, a->op);
    case K_SENDRECV: return do_sendrecv(L);
    case K_UNSUPPORTED: return fail(L, HV_TIT_E_UNSUPPORTED, 1, 0, 0);
    case K_VCOLL: return do_vcoll(L, a->op);
    default: return 0;
    }
}

/* the line's action and number of arguments against the file's grammar and the action's layout */
static int check_dialect(line_ctx *L, const tit_action *a) {
    int64_t nargs = L->f.n - 2;
    int cl = tit_classify(a, nargs);
    if (cl == CL_UNKNOWN) return fail(L, HV_TIT_E_UNKNOWN, 1, 0, L->grammar);
    if ((cl == CL_OLD || cl == CL_NEW) && cl != L->grammar)
        return fail(L, HV_TIT_E_DIALECT, 1, L->chosen_at, L->grammar);
    if (cl == CL_AMBIGUOUS && L->grammar == HV_TIT_UNDECIDED) return fail(L, HV_TIT_E_AMBIGUOUS, 1, 0, 0);
    int64_t world = a->kind == K_VCOLL ? world_size(L) : 0;
    if (!tit_nargs_ok(a, L->grammar, nargs, world)) return fail(L, HV_TIT_E_NARGS, 1, L->grammar, world);
    return 0;
}

/* a line with at least one field that is not a comment */
static int do_line(line_ctx *L) {
    int64_t rank;
    if (get_rank(L, 0, &rank)) return -1;
    if (L->f.n < 2) return fail(L, HV_TIT_E_MISSING, 1, 0, 0);
    if ((L->ti = task_of(L->S, rank)) < 0) return fail(L, HV_TIT_E_MEMORY, 0, 0, 0);
    const tit_action *a = action_of(L);
    if (check_dialect(L, a) || do_action(L, a)) return -1;
    if (L->S->task[L->ti].clock > MAX_NS) return fail(L, HV_TIT_E_BEYOND, 0, rank, 0);
    return 0;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* room for one more field */
static int fields_grow(fields *f) {
    int64_t cap = f->cap ? 2 * f->cap : 16;
    const char **p = realloc(f->p, (size_t)cap * sizeof *p);
    if (p) f->p = p;
    int64_t *len = realloc(f->len, (size_t)cap * sizeof *len);
    if (len) f->len = len;
    if (!p || !len) return -1;
    f->cap = cap;
    return 0;
}

/* the fields of the line from s[i]; returns the index after the line's break (\r\n is one break); *flag: 1 on a
 * byte >= 0x80, 2 on no memory */
static int64_t split_line(const char *s, int64_t n, int64_t i, fields *f, int64_t *end, int *flag) {
    int64_t k = 0, cap = f->cap; /* locals: the stores below could alias f's fields */
    const char **p = f->p;
    int64_t *len = f->len;
    for (;;) {
        while (i < n && cls[(unsigned char)s[i]] == C_SPACE) i++;
        if (i >= n || cls[(unsigned char)s[i]] == C_BREAK || cls[(unsigned char)s[i]] == C_CR) break;
        int64_t b = i;
        while (i < n && cls[(unsigned char)s[i]] == C_TOK) i++;
        if (i < n && cls[(unsigned char)s[i]] == C_HIGH) return f->n = k, *flag = 1, i;
        if (k == cap) {
            f->n = k;
            if (fields_grow(f)) return *flag = 2, i;
            cap = f->cap, p = f->p, len = f->len;
        }
        p[k] = s + b, len[k] = i - b;
        k++;
    }
    f->n = k;
    *end = i;
    if (i < n && s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') return i + 2;
    return i < n ? i + 1 : i;
}

/* the grammar of a file: of its first line only one grammar reads (and that line's number), else undecided */
static int detect(line_ctx *L, const char *s, int64_t n, int64_t *at) {
    int64_t i = 0, line = 0, end;
    while (i < n) {
        int flag = 0;
        line++;
        i = split_line(s, n, i, &L->f, &end, &flag);
        if (flag) break; /* the parse stops there */
        if (L->f.n < 2 || L->f.p[0][0] == '#') continue;
        int cl = tit_classify(action_of(L), L->f.n - 2);
        if (cl == CL_OLD || cl == CL_NEW) return *at = line, cl;
    }
    return *at = 0, HV_TIT_UNDECIDED;
}

static int parse_file(tit_st *S, hv_tit_config *c, int64_t file) {
    const char *s = c->buf[file];
    int64_t n = c->len[file], i = 0;
    line_ctx L = {.S = S, .c = c, .file = file};
    if (c->dialect == HV_TIT_AUTO) L.grammar = detect(&L, s, n, &L.chosen_at);
    else L.grammar = c->dialect == HV_TIT_V319 ? HV_TIT_OLD : HV_TIT_NEW;
    c->grammars[file] = L.grammar;
    while (i < n) {
        int high = 0;
        L.start = i;
        L.line++;
        i = split_line(s, n, i, &L.f, &L.end, &high);
        if (high) return fail(&L, HV_TIT_E_NOT_ASCII, 0, 0, 0);
        if (L.f.n == 0 || L.f.p[0][0] == '#') continue;
        if (do_line(&L)) return -1;
    }
    return 0;
}

static int cmp_rank(const void *a, const void *b, void *tasks) {
    const task_st *t = tasks;
    int64_t ra = t[*(const int64_t *)a].rank, rb = t[*(const int64_t *)b].rank;
    return (ra > rb) - (ra < rb);
}

/* the file-order index of the first alltoall (by rank, then seq) of more than ``limit`` bytes per peer, -1 if
 * none, -2 on no memory */
static int64_t first_big_alltoall(tit_st *S, int64_t limit) {
    int64_t best = -1, best_seq = 0, *seq = calloc((size_t)S->ntask, sizeof *seq);
    if (!seq) return -2;
    for (int64_t i = 0; i < S->n; i++) {
        int64_t s = seq[S->tid[i]]++;
        if (S->op[i] != OP_ALLTOALL || S->bytes[i] <= limit) continue;
        int64_t r = S->task[S->tid[i]].rank, rb = best < 0 ? 0 : S->task[S->tid[best]].rank;
        if (best < 0 || r < rb || (r == rb && s < best_seq)) best = i, best_seq = s;
    }
    free(seq);
    return best;
}

/* the checks after the last line: some action, peers and roots among the ranks, alltoall totals */
static void check_end(tit_st *S, hv_tit_config *c) {
    line_ctx L = {.S = S, .c = c, .file = -1};
    if (!S->ntask) return (void)fail(&L, HV_TIT_E_NO_ACTION, 0, 0, 0);
    int64_t ntasks = 0, best = -1;
    for (int64_t t = 0; t < S->ntask; t++)
        if (S->task[t].rank + 1 > ntasks) ntasks = S->task[t].rank + 1;
    c->ntasks = ntasks;
    if (S->peer_max >= ntasks) {
        L.file = S->peer_file, L.line = S->peer_line;
        return (void)fail(&L, HV_TIT_E_PEER, 0, S->peer_max, ntasks);
    }
    best = first_big_alltoall(S, MAX_BYTES / ntasks);
    if (best == -2) return (void)fail(&L, HV_TIT_E_MEMORY, 0, 0, 0);
    if (best >= 0) return (void)fail(&L, HV_TIT_E_ALLTOALL, 0, S->bytes[best], ntasks);
    c->nrows = S->n;
    for (int64_t t = 0; t < S->ntask; t++) c->nrows += S->task[t].last_op != OP_FINALIZE;
}

static void free_state(tit_st *S) {
    if (!S) return;
    for (int64_t t = 0; t < S->ntask; t++) free(S->task[t].pend);
    free(S->tid), free(S->op), free(S->peer), free(S->tag), free(S->bytes), free(S->req), free(S->t);
    free(S->task), free(S->hk), free(S->hv), free(S->scratch), free(S);
}

/* the \n bytes of every file: the rows are about as many (waitall adds some, comments remove some) */
static int64_t count_lines(const hv_tit_config *c) {
    int64_t lines = 0;
    for (int64_t f = 0; f < c->nfiles; f++) {
        const char *p = c->buf[f], *end = c->buf[f] + c->len[f];
        while (p < end && (p = memchr(p, '\n', (size_t)(end - p)))) p++, lines++;
    }
    return lines;
}

int hv_tit_config_size(void) { return (int)sizeof(hv_tit_config); }

int hv_tit_parse(hv_tit_config *c) {
    tit_st *S = calloc(1, sizeof *S);
    c->state = S, c->err = HV_TIT_OK, c->nrows = 0, c->ntasks = 0;
    if (!S || !c_locale()) return -1;
    init_classes();
    tit_dialect_init();
    S->last_rank = -1, S->peer_max = -1;
    if (rows_grow(S, count_lines(c) + 1)) return -1;
    for (int64_t f = 0; f < c->nfiles && c->err == HV_TIT_OK; f++) parse_file(S, c, f);
    if (c->err == HV_TIT_OK) check_end(S, c);
    return c->err == HV_TIT_E_MEMORY ? -1 : 0;
}

/* rows sorted by task (each task's in seq order), alltoall bytes times ntasks, then a finalize row for
 * each task whose last row is not one, in order of the tasks' first lines */
void hv_tit_fill(hv_tit_config *c) {
    tit_st *S = c->state;
    size_t nt = (size_t)S->ntask + 1;
    int64_t *order = malloc(nt * 8), *base = malloc(nt * 8), *start = malloc(nt * 8);
    if (!order || !base || !start) return free(order), free(base), free(start), (void)(c->err = HV_TIT_E_MEMORY);
    for (int64_t t = 0; t < S->ntask; t++) order[t] = t;
    qsort_r(order, (size_t)S->ntask, sizeof *order, cmp_rank, S->task);
    for (int64_t k = 0, off = 0; k < S->ntask; k++)
        start[order[k]] = base[order[k]] = off, off += S->task[order[k]].nrows;
    for (int64_t i = 0; i < S->n; i++) {
        int64_t ti = S->tid[i], j = base[ti]++;
        c->task[j] = (int32_t)S->task[ti].rank, c->seq[j] = j - start[ti], c->op[j] = S->op[i];
        c->peer[j] = S->peer[i], c->tag[j] = S->tag[i], c->req[j] = S->req[i], c->t[j] = S->t[i];
        c->bytes[j] = S->op[i] == OP_ALLTOALL ? S->bytes[i] * c->ntasks : S->bytes[i];
    }
    for (int64_t t = 0, j = S->n; t < S->ntask; t++) {
        const task_st *ts = &S->task[t];
        if (ts->last_op == OP_FINALIZE) continue;
        c->task[j] = (int32_t)ts->rank, c->seq[j] = ts->nrows, c->op[j] = OP_FINALIZE;
        c->peer[j] = -1, c->bytes[j] = 0, c->tag[j] = 0, c->req[j] = -1, c->t[j] = ts->clock;
        j++;
    }
    free(order), free(base), free(start);
}

void hv_tit_free(hv_tit_config *c) {
    free_state(c->state);
    c->state = NULL;
}
