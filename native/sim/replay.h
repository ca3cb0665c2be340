/* Application replay core: the discrete-event engine of hpcvar.sim.replay_ref in C, and the
 * lowering of trace rows into its op arrays.
 *
 * The Python engine (hpcvar.sim.replay_ref, Simulator(engine="python")) is the reference: this core
 * processes the same events in the same order (a binary heap ordered by time, then insertion
 * counter) with the same floating-point operations, so both give the same times (tests compare
 * them). Models: none, maxmin, gige, myrinet (Stop&Go, exact or sampled, as
 * hpcvar.models.sharing); OS jitter on compute (jitSim's advance, as hpcvar.sim.jitter_ref). */
#ifndef HV_REPLAY_H
#define HV_REPLAY_H

#include <stdint.h>

enum { HV_RP_COMPUTE = 0, HV_RP_SEND = 1, HV_RP_RECV = 2, HV_RP_WAIT = 3, HV_RP_PROBE = 4 };
/* stream records: added to the kind of a task's last send on a key, or its last receive or probe on it */
enum { HV_RP_LAST_USE = 0x40 };
enum { HV_RP_NONE = 0, HV_RP_MAXMIN = 1, HV_RP_GIGE = 2, HV_RP_MYRINET = 3 };
enum { HV_RP_OK = 0, HV_RP_ENOMEM = -1, HV_RP_ESTATES = -2, HV_RP_EIO = -3, HV_RP_ESAMPLES = -4 };

typedef void (*hv_rp_progress_fn)(int64_t ops_done, int64_t nops);

typedef struct {
    /* sizes */
    int64_t ntasks, nops, nreqs, nkeys, nrows, nnodes;
    /* model */
    int32_t model, myr_method;     /* myrinet: 0 exact, 1 sample */
    double beta, gamma_in, gamma_out;
    int64_t myr_max_states, myr_samples, myr_seed;
    double eager; /* bytes: messages up to this size are eager */
    /* cluster: Cluster.link semantics (links[(a, b)] first, then links[(b, a)], then the defaults) */
    double bandwidth, latency, shm_bandwidth, shm_latency;
    double rndv_latency, shm_rndv_latency; /* added to the latency of a message above the eager limit */
    double send_buffer; /* > 0: a rendezvous send between nodes completes when at most this many bytes are left */
    double rndv_first; /* > 0: bytes of a rendezvous message between nodes sent with its request (before the match) */
    int64_t pair_serial; /* contention models: a pair of tasks' messages between nodes flow one after the other */
    int64_t nlinks;
    const int64_t *link_key; /* a * nnodes + b, sorted ascending */
    const double *link_bw, *link_lat;
    /* ops of task t: [task_off[t], task_off[t+1]) */
    const int64_t *task_off;
    const int8_t *kind; /* HV_RP_* per op */
    const int32_t *peer; /* send: destination task; recv, probe: source task; wait: number of requests */
    const double *val; /* compute: seconds; send/recv/probe: bytes */
    const int32_t *key; /* send/recv/probe: match key id in [0, nkeys) */
    const int32_t *req; /* send/recv/probe: request id in [0, nreqs); wait: offset into wreq */
    const int32_t *wreq; /* request ids of the waits */
    const int32_t *row; /* trace row id in [0, nrows) or -1 */
    const int32_t *node_of; /* node of each task */
    /* OS jitter (njtr = 0: none): trace j has events [jtr_off[j], jtr_off[j+1]) of d (jitter) and g
     * (gap) in ns, starts S at jtr_off[j] + j .. jtr_off[j+1] + j (S[0] = 0, last = the length);
     * task i uses trace i mod njtr from position jtr_pos[i]. */
    int64_t njtr;
    const int64_t *jtr_off, *jtr_d, *jtr_g, *jtr_S, *jtr_pos;
    /* outputs (arrays given by the caller) */
    double *clock; /* ntasks: time each task ends */
    double *comm; /* ntasks: simulated time inside the task's MPI rows */
    double *row_start; /* nrows or NULL: -1 if the row was never reached */
    double *row_end; /* nrows or NULL: -1 if never ended */
    double *pen_sum, *pen_n; /* ntasks */
    int64_t *kinds; /* ntasks x 4: conflicts met by the task's inter-node sends: none, out, in, in-out */
    int64_t *pc; /* ntasks: next op (diagnostics) */
    int64_t *blocked; /* ntasks: requests a blocked task still waits for */
    int64_t nevents, finished, unmatched, first_unmatched_op, error_size;
    hv_rp_progress_fn progress; /* or NULL: called every 2^20 events */
    /* streaming (byte_off != NULL): the ops are not in the arrays above (kind ... row are NULL) but in the file
     * stream_fd, task t's at bytes [byte_off[t], byte_off[t+1]) in the records of hv_rp_lower's stream mode (see
     * there), read through a per-task buffer of stream_buf bytes (at least the longest record, stream_maxrec);
     * row_start/row_end must be NULL. Request ids are recycled per task (a slot is posted again only after its
     * last wait): the core resets a request when it is posted. Match keys (nkeys: the ids given) get queues from
     * a pool through a hash map, a key's queues going back to the pool once both its sides made their last use
     * and they are empty: the core holds the keys in use, not every key. */
    const int64_t *byte_off;
    int64_t stream_fd, stream_buf, stream_maxrec;
    /* diagnostics (both modes): the row and destination of the first unmatched send (first_unmatched_op), and per
     * task (ntasks, or NULL) the row of the wait a blocked task is stuck at (-1 if none) */
    int64_t first_unmatched_row, first_unmatched_peer;
    int64_t *stuck_row;
    int64_t key_slots; /* streaming: the queue slots of match keys the core allocated (the peak of keys in use) */
} hv_rp_config;

/* Runs the replay. HV_RP_OK on success (deadlocks and unmatched sends are reported through
 * finished < ntasks and unmatched > 0), HV_RP_ENOMEM if memory runs out, HV_RP_ESTATES if a
 * myrinet component has more than myr_max_states exact states (error_size: its size), HV_RP_ESAMPLES if the
 * sampling method drew no state in which a member of a component sends (its penalty unknown; error_size: the
 * component's size). */
int hv_rp_run(hv_rp_config *c);
int hv_rp_config_size(void);

/* ---- lowering: trace rows (sorted by task, then seq = 0, 1, ...) -> the op arrays above ---- */

typedef struct {
    int64_t nrows, ntasks;
    int32_t algo;    /* 0 binomial, 1 recdoub, 2 ring */
    int32_t compute; /* 0: compute = the gap less the polls; 1: its CPU time where cpu[row] >= 0 (never more) */
    const int64_t *row_off; /* ntasks + 1: rows of task t */
    const int8_t *op; /* op codes of hpcvar.traces.parquet.OPS */
    const int32_t *peer, *tag, *comm;
    const int64_t *bytes, *t_start, *t_end, *req;
    const int64_t *poll, *cpu; /* or NULL: the optional columns poll_ns and cpu_ns */
    int64_t ncomms;
    const int32_t *comm_id; /* sorted ascending */
    const int64_t *comm_off; /* ncomms + 1 into comm_mem */
    const int32_t *comm_mem; /* world ranks of the members */
    /* outputs: counted by the first pass (ops == NULL), filled by the second */
    int64_t nops, nwreq, nkeys, nreqs;
    int64_t *task_off;
    int8_t *kind;
    int32_t *peer_out;
    double *val;
    int32_t *key;
    int32_t *req_out, *wreq;
    int32_t *row;
    /* the measured side, in the same pass (fill pass): per task the union of its MPI rows' [t_start,
     * t_end] (init/finalize excluded; ns, summed as hpcvar.sim.replay.mpi_time_s does) plus its polls, the first
     * start and
     * the last end of all its rows (a task whose MPI rows are not in (t_start, t_end) order has them
     * sorted first, as mpi_time_s does) */
    double *mpi_ns;
    int64_t *first_start, *last_end;
    /* errors: code and row */
    int32_t err, pad1; /* 1 recv from a non-task, 2 comm not described, 3 not a member */
    int64_t err_row;
    /* streaming (stream != NULL, from hv_rp_stream_open): the rows given are a chunk of whole tasks, tasks
     * [task_base, task_base + ntasks) and rows [row_base, row_base + nrows) of a trace of ntasks_all tasks and
     * nrows_all rows (0: ntasks, nrows); one pass (no counting pass), keys and collective counters carried from
     * chunk to chunk; each task's ops are appended to the stream's file as records instead of the arrays
     * (kind ... row stay NULL): task_off[t] is then the task's first op (global numbering), byte_off[t] its first
     * byte in the file (ntasks + 1 each); mpi_ns, first_start, last_end as above (per task of the chunk).
     * Records (native byte order, packed): int8 kind (+ HV_RP_LAST_USE on a task's last send on its key, or last
 * receive or probe: the core then recycles the key's queues, see hv_rp_config), then compute: f64 seconds; send/recv/probe: i32 peer, f64
     * bytes, i32 key, i32 request, i32 row; wait: i32 n, i32 row, n x i32 requests.
     * Requests are renumbered per task from a pool of slots (request id = the task's base + slot; a slot is
     * reused after the last wait of its request; a request never waited keeps its slot); id 0 is a request that
     * never completes (a wait for a request the task has not posted). */
    int64_t ntasks_all, nrows_all, task_base, row_base;
    void *stream;
    int64_t *byte_off;
} hv_rp_lower_config;

int hv_rp_lower(hv_rp_lower_config *c);

/* A stream of lowered ops written to the file descriptor fd (at its current offset, which must be 0); NULL if
 * memory runs out. The match keys of tasks all lowered leave its hash map once it holds 2 x (those left at the
 * last time) + prune_min of them (their ids stay given). hv_rp_stream_close frees it and gives out[0..4] = ops, keys, requests (the core's nreqs),
 * the longest record in bytes, the bytes written; 0, or -1 if a write failed (or one did earlier: errno kept in
 * out[5]). */
void *hv_rp_stream_open(int64_t fd, int64_t prune_min);
int hv_rp_stream_close(void *stream, int64_t *out);
int hv_rp_lower_config_size(void);

#endif
