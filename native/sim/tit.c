/* SimGrid time-independent traces (TIT) into column arrays: the compiled twin of the Python reference
 * hpcvar.traces.tit (its _Parser), for ASCII input (Python sends any other text to the reference).
 * Lines end at \n, \r\n, \r, \v, \f, \x1c, \x1d, \x1e (str.splitlines); fields are separated by space,
 * \t, \x1f (str.split). Numbers follow Python's int() and float() grammars (signs, underscores between
 * digits, inf/nan, the int digit limit) so that the same tokens are accepted with the same values.
 * Rows are kept in file order (a task's rows in seq order); hv_tit_fill writes them sorted by task, then the
 * finalize rows added for tasks that do not end with one (in order of the tasks' first lines). The first
 * error stops the parse: its kind, file, line and token; Python writes the message (hpcvar.traces.tit). */
#include "hv_ops.h"
#include "tit.h"

#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TASKS (1 << 24)
#define MAX_NS 100000000000000000LL /* 10**17: hpcvar.traces.parquet.MAX_NS */
#define MAX_BYTES (1LL << 62)
#define MAX_SIZE 1125899906842624.0 /* 2**50: hpcvar.units.MAX_SIZE */
#define MAX_TOK 6

enum { C_TOK = 0, C_SPACE = 1, C_BREAK = 2, C_CR = 3, C_HIGH = 4 };

typedef struct {
    int64_t rank, clock, nrows;
    int8_t last_op;
    int64_t *pend; /* the pending isend/irecv: (file-order row index, seq) pairs, oldest first */
    int64_t npend, cappend;
} task_st;

typedef struct {
    int32_t *tid;
    int8_t *op;
    int32_t *peer;
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
} tit_st;

typedef struct {
    const char *p[MAX_TOK];
    int64_t len[MAX_TOK];
    int n; /* fields in the line, at most MAX_TOK counted */
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
    void *p[6] = {realloc(S->tid, (size_t)cap * 4), NULL, NULL, NULL, NULL, NULL};
    if (p[0]) S->tid = p[0];
    if ((p[1] = realloc(S->op, (size_t)cap))) S->op = p[1];
    if ((p[2] = realloc(S->peer, (size_t)cap * 4))) S->peer = p[2];
    if ((p[3] = realloc(S->bytes, (size_t)cap * 8))) S->bytes = p[3];
    if ((p[4] = realloc(S->req, (size_t)cap * 8))) S->req = p[4];
    if ((p[5] = realloc(S->t, (size_t)cap * 8))) S->t = p[5];
    for (int i = 0; i < 6; i++)
        if (!p[i]) return -1;
    S->cap = cap;
    return 0;
}

/* a row of task ti at its clock (every TIT row lasts 0 s); the row's index, -1 on no memory */
static int64_t add_row(tit_st *S, int64_t ti, int op, int64_t peer, int64_t nbytes, int64_t req, int64_t file,
                       int64_t line) {
    if (S->n == S->cap && rows_grow(S, 0)) return -1;
    task_st *t = &S->task[ti];
    int64_t i = S->n++;
    S->tid[i] = (int32_t)ti, S->op[i] = (int8_t)op, S->peer[i] = (int32_t)peer;
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

enum { A_INIT, A_FINALIZE, A_COMPUTE, A_SLEEP, A_P2P, A_WAIT, A_WAITALL, A_COLL, A_IGNORED, A_UNKNOWN };

typedef struct {
    const char *name;
    int action, op;
} action_def;

static int64_t action_len[32];

static const action_def ACTIONS[] = {
    {"init", A_INIT, OP_INIT},
    {"finalize", A_FINALIZE, OP_FINALIZE},
    {"compute", A_COMPUTE, -1},
    {"sleep", A_SLEEP, -1},
    {"send", A_P2P, OP_SEND},
    {"isend", A_P2P, OP_ISEND},
    {"recv", A_P2P, OP_RECV},
    {"irecv", A_P2P, OP_IRECV},
    {"wait", A_WAIT, OP_WAIT},
    {"waitall", A_WAITALL, OP_WAIT},
    {"barrier", A_COLL, OP_BARRIER},
    {"bcast", A_COLL, OP_BCAST},
    {"reduce", A_COLL, OP_REDUCE},
    {"allreduce", A_COLL, OP_ALLREDUCE},
    {"gather", A_COLL, OP_GATHER},
    {"scatter", A_COLL, OP_SCATTER},
    {"allgather", A_COLL, OP_ALLGATHER},
    {"alltoall", A_COLL, OP_ALLTOALL},
    {"comm_size", A_IGNORED, -1},
    {"comm_split", A_IGNORED, -1},
    {"comm_dup", A_IGNORED, -1},
    {"test", A_IGNORED, -1},
};

static void init_actions(void) {
    for (size_t i = 0; i < sizeof ACTIONS / sizeof *ACTIONS; i++) action_len[i] = (int64_t)strlen(ACTIONS[i].name);
}

static const action_def *action_of(const char *s, int64_t n) {
    static const action_def unknown = {"", A_UNKNOWN, -1};
    for (size_t i = 0; i < sizeof ACTIONS / sizeof *ACTIONS; i++)
        if (action_len[i] == n && ci_eq(s, n, ACTIONS[i].name, n)) return &ACTIONS[i];
    return &unknown;
}

typedef struct {
    tit_st *S;
    hv_tit_config *c;
    fields f;
    int64_t file, line, start, end, ti;
} line_ctx;

static int fail(line_ctx *L, int err, int tok, int64_t a, int64_t b) {
    hv_tit_config *c = L->c;
    c->err = err, c->err_tok = tok, c->err_a = a, c->err_b = b;
    c->err_file = L->file, c->err_line = L->line, c->err_start = L->start, c->err_end = L->end;
    return -1;
}

/* field i as a rank (``3`` or ``p3``) */
static int get_rank(line_ctx *L, int i, int64_t *r) {
    if (i >= L->f.n) return fail(L, HV_TIT_E_MISSING, i, 0, 0);
    const char *s = L->f.p[i];
    int64_t n = L->f.len[i];
    if (n && s[0] == 'p') s++, n--;
    if (py_int(s, n, L->c->max_digits, r) || *r < 0 || *r >= MAX_TASKS) return fail(L, HV_TIT_E_RANK, i, 0, 0);
    return 0;
}

static int get_size(line_ctx *L, int i, int64_t *v) {
    double x;
    if (i >= L->f.n) return fail(L, HV_TIT_E_MISSING, i, 0, 0);
    if (py_float(L->S, L->f.p[i], L->f.len[i], &x) || !(x >= 0 && x <= MAX_SIZE))
        return fail(L, HV_TIT_E_SIZE, i, 0, 0);
    *v = (int64_t)x;
    return 0;
}

/* field 2 as seconds (divided by ``divisor``) into ns, rounded half to even like Python's round() */
static int get_ns(line_ctx *L, double divisor, int err, int64_t *ns) {
    double x;
    if (2 >= L->f.n) return fail(L, HV_TIT_E_MISSING, 2, 0, 0);
    if (py_float(L->S, L->f.p[2], L->f.len[2], &x)) return fail(L, err, 2, 0, 0);
    double y = x / divisor * 1e9;
    if (!(y >= 0 && y <= (double)MAX_NS)) return fail(L, err, 2, 0, 0);
    *ns = (int64_t)nearbyint(y);
    return 0;
}

static int add(line_ctx *L, int op, int64_t peer, int64_t nbytes, int64_t req) {
    if (add_row(L->S, L->ti, op, peer, nbytes, req, L->file, L->line) < 0) return fail(L, HV_TIT_E_MEMORY, 0, 0, 0);
    return 0;
}

static int do_p2p(line_ctx *L, int op) {
    int64_t peer, nbytes;
    if (get_rank(L, 2, &peer) || get_size(L, 3, &nbytes)) return -1;
    int64_t row = add_row(L->S, L->ti, op, peer, nbytes, -1, L->file, L->line);
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
    return add(L, OP_WAIT, S->peer[row], S->bytes[row], seq);
}

/* wait: the most recent pending request, or with ``wait SRC DST`` the oldest one between them */
static int do_wait(line_ctx *L) {
    task_st *t = &L->S->task[L->ti];
    if (!t->npend) return fail(L, HV_TIT_E_WAIT_EMPTY, 0, 0, 0);
    int64_t pick = t->npend - 1, src, dst;
    if (L->f.n >= 4) {
        if (get_rank(L, 2, &src) || get_rank(L, 3, &dst)) return -1;
        for (pick = 0; pick < t->npend; pick++) {
            int64_t row = t->pend[2 * pick], op = L->S->op[row], peer = L->S->peer[row];
            if ((op == OP_ISEND && t->rank == src && peer == dst) || (op == OP_IRECV && t->rank == dst && peer == src))
                break;
        }
        if (pick == t->npend) return fail(L, HV_TIT_E_WAIT_NONE, 0, src, dst);
    }
    return complete(L, t, pick);
}

static int do_waitall(line_ctx *L) {
    task_st *t = &L->S->task[L->ti];
    while (t->npend)
        if (complete(L, t, 0)) return -1;
    return 0;
}

/* a collective: bytes from field 2 (not for barrier), the root (bcast: field 3; reduce, gather, scatter:
 * field 4; else 0) for rooted ones */
static int do_coll(line_ctx *L, int op) {
    int64_t nb = 0, root = -1;
    int nargs = L->f.n - 2, rooted = op == OP_BCAST || op == OP_REDUCE || op == OP_GATHER || op == OP_SCATTER;
    if (nargs > 0 && op != OP_BARRIER && get_size(L, 2, &nb)) return -1;
    if (op == OP_BCAST && nargs >= 2) {
        if (get_rank(L, 3, &root)) return -1;
    } else if (op != OP_BCAST && rooted && nargs >= 3) {
        if (get_rank(L, 4, &root)) return -1;
    } else if (rooted) root = 0;
    if (op == OP_ALLTOALL && get_size(L, 2, &nb)) return -1;
    return add(L, op, root, nb, -1);
}

static int do_action(line_ctx *L, const action_def *a) {
    task_st *t = &L->S->task[L->ti];
    int64_t ns;
    switch (a->action) {
    case A_INIT:
    case A_FINALIZE: return add(L, a->op, -1, 0, -1);
    case A_COMPUTE:
        if (get_ns(L, L->c->flops_rate, HV_TIT_E_COMPUTE, &ns)) return -1;
        t->clock += ns;
        return 0;
    case A_SLEEP:
        if (get_ns(L, 1.0, HV_TIT_E_SLEEP, &ns)) return -1;
        t->clock += ns;
        return 0;
    case A_P2P: return do_p2p(L, a->op);
    case A_WAIT: return do_wait(L);
    case A_WAITALL: return do_waitall(L);
    case A_COLL: return do_coll(L, a->op);
    default: return 0;
    }
}

/* a line with at least one field that is not a comment */
static int do_line(line_ctx *L) {
    int64_t rank;
    if (get_rank(L, 0, &rank)) return -1;
    if (L->f.n < 2) return fail(L, HV_TIT_E_MISSING, 1, 0, 0);
    if ((L->ti = task_of(L->S, rank)) < 0) return fail(L, HV_TIT_E_MEMORY, 0, 0, 0);
    const action_def *a = action_of(L->f.p[1], L->f.len[1]);
    if (a->action == A_UNKNOWN) return fail(L, HV_TIT_E_UNKNOWN, 1, 0, 0);
    if (do_action(L, a)) return -1;
    if (L->S->task[L->ti].clock > MAX_NS) return fail(L, HV_TIT_E_BEYOND, 0, rank, 0);
    return 0;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* the fields of the line from s[i]; returns the index after the line's break (\r\n is one break) */
static int64_t split_line(const char *s, int64_t n, int64_t i, fields *f, int64_t *end, int *high) {
    f->n = 0;
    for (;;) {
        while (i < n && cls[(unsigned char)s[i]] == C_SPACE) i++;
        if (i >= n || cls[(unsigned char)s[i]] == C_BREAK || cls[(unsigned char)s[i]] == C_CR) break;
        int64_t b = i;
        while (i < n && cls[(unsigned char)s[i]] == C_TOK) i++;
        if (i < n && cls[(unsigned char)s[i]] == C_HIGH) return *high = 1, i;
        if (f->n < MAX_TOK) f->p[f->n] = s + b, f->len[f->n] = i - b;
        if (f->n < MAX_TOK) f->n++;
    }
    *end = i;
    if (i < n && s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') return i + 2;
    return i < n ? i + 1 : i;
}

static int parse_file(tit_st *S, hv_tit_config *c, int64_t file) {
    const char *s = c->buf[file];
    int64_t n = c->len[file], i = 0;
    line_ctx L = {.S = S, .c = c, .file = file};
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

/* the file-order index of the first allToAll (by rank, then seq) of more than ``limit`` bytes per peer, -1 if
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

/* the checks after the last line: some action, peers and roots among the ranks, allToAll totals */
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
    free(S->tid), free(S->op), free(S->peer), free(S->bytes), free(S->req), free(S->t);
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
    init_actions();
    S->last_rank = -1, S->peer_max = -1;
    if (rows_grow(S, count_lines(c) + 1)) return -1;
    for (int64_t f = 0; f < c->nfiles && c->err == HV_TIT_OK; f++) parse_file(S, c, f);
    if (c->err == HV_TIT_OK) check_end(S, c);
    return c->err == HV_TIT_E_MEMORY ? -1 : 0;
}

/* rows sorted by task (each task's in seq order), allToAll bytes times ntasks, then a finalize row for
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
        c->peer[j] = S->peer[i], c->req[j] = S->req[i], c->t[j] = S->t[i];
        c->bytes[j] = S->op[i] == OP_ALLTOALL ? S->bytes[i] * c->ntasks : S->bytes[i];
    }
    for (int64_t t = 0, j = S->n; t < S->ntask; t++) {
        const task_st *ts = &S->task[t];
        if (ts->last_op == OP_FINALIZE) continue;
        c->task[j] = (int32_t)ts->rank, c->seq[j] = ts->nrows, c->op[j] = OP_FINALIZE;
        c->peer[j] = -1, c->bytes[j] = 0, c->req[j] = -1, c->t[j] = ts->clock;
        j++;
    }
    free(order), free(base), free(start);
}

void hv_tit_free(hv_tit_config *c) {
    free_state(c->state);
    c->state = NULL;
}
