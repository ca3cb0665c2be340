/* Application replay core: the discrete-event engine of hpcvar.sim.app in C.
 *
 * The Python engine (hpcvar.sim.app.Simulator, engine "python") is the reference: this core
 * processes the same events in the same order (a binary heap ordered by time, then insertion
 * counter) with the same floating-point operations, so both give the same times (tests compare
 * them). Inputs are the lowered per-task op lists encoded as flat arrays by
 * hpcvar.sim.app.encode(); models: none, maxmin, gige (myrinet and jitter stay in Python). */
#ifndef HV_REPLAY_H
#define HV_REPLAY_H

#include <stdint.h>

enum { HV_RP_COMPUTE = 0, HV_RP_SEND = 1, HV_RP_RECV = 2, HV_RP_WAIT = 3 };
enum { HV_RP_NONE = 0, HV_RP_MAXMIN = 1, HV_RP_GIGE = 2 };

typedef struct {
    /* sizes */
    int64_t ntasks, nops, nreqs, nkeys, nrows, nnodes;
    /* model */
    int32_t model, pad0;
    double beta, gamma_in, gamma_out;
    double eager; /* bytes: messages up to this size are eager */
    /* ops of task t: [task_off[t], task_off[t+1]) */
    const int64_t *task_off;
    const int8_t *kind;   /* HV_RP_* per op */
    const int32_t *peer;  /* send: destination task; recv: source task */
    const double *val;    /* compute: seconds; send/recv: bytes */
    const int64_t *key;   /* send/recv: match key id in [0, nkeys) */
    const int64_t *req;   /* send/recv: request id; wait: offset into wreq */
    const int32_t *nwait; /* wait: number of requests */
    const int64_t *wreq;  /* request ids of the waits */
    const int64_t *row;   /* trace row id in [0, nrows) or -1 */
    const double *bw;     /* send: bandwidth of this message (bytes/s) */
    const double *lat;    /* send: latency of this message (s) */
    const int8_t *inter;  /* send: 1 if it crosses the network */
    const int32_t *node_of; /* node of each task */
    /* outputs (arrays given by the caller) */
    double *clock;     /* ntasks: time each task ends */
    double *row_start; /* nrows: -1 if the row was never reached */
    double *row_end;   /* nrows: -1 if never ended */
    double *pen_sum, *pen_n; /* ntasks */
    int64_t *kinds;    /* ntasks x 4: conflicts met by the task's inter-node sends: none, out, in, in-out */
    int64_t *pc;       /* ntasks: next op (diagnostics) */
    int64_t *blocked;  /* ntasks: requests a blocked task still waits for */
    int64_t nevents, finished, unmatched, first_unmatched_op;
} hv_rp_config;

/* Runs the replay. 0 on success (deadlocks and unmatched sends are reported through
 * finished < ntasks and unmatched > 0), -1 if memory runs out. */
int hv_rp_run(hv_rp_config *c);
int hv_rp_config_size(void);

#endif
