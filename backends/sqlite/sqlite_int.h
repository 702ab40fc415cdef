/* sqlite_int.h - what the files of the SQLite engine share, as SQLite's
 * btreeInt.h is to its btree: the connection handle (struct jr_backend),
 * the names of the prepared statements and the cache that holds them, the
 * transaction and error helpers, and the claim's candidate types. Private
 * to backends/sqlite/: the folder exports nothing but jr_sqlite_ops
 * (ops.c). Functions named jr_sqlite_* are defined in the file the
 * comment above them names; the short static inline helpers live here.
 * Uses backend.h, limitpick.h and SQLite. */
#ifndef JR_SQLITE_INT_H
#define JR_SQLITE_INT_H

#include <math.h>
#include <stdint.h>
#include <sys/types.h>

#include <sqlite3.h>

#include "backend.h"
#include "limitpick.h"

extern const char jr_sqlite_sql[];      /* schema.sql, build/sqlite_sql.c */

/* The statements of the cache (b->st[]), grouped by the one file that
 * runs each. That file holds their SQL in a table of its own, static
 * const char *const sql_text[S_COUNT] (designated initializers: the other
 * files' names are NULL there), and asks the cache with its own text,
 * which is read only at the statement's first use on a connection: the
 * SQL sits beside the code that binds it, and a cached statement costs
 * what it did when one file held them all. A new statement: a name here,
 * its text in its file's table. (push.c makes the S_INSERT_MANY* texts
 * from S_INSERT's at their first use.) */
enum {
    /* conn.c: transactions, the trigger set, the wake-up check */
    S_BEGIN, S_COMMIT, S_ROLLBACK, S_SCHEMA_VERSION, S_TRIGGERS,
    S_DATA_VERSION,
    /* push.c (S_UNIQUE_HOLDER, S_UNIQUE_WINDOW in this order) */
    S_INSERT, S_INSERT_BARE, S_INSERT_MANY, S_INSERT_MANY_IDS,
    S_INSERT_MANY_BARE, S_INSERT_MANY_BARE_IDS, S_LIMIT_PATH,
    S_UNIQUE_HOLDER, S_UNIQUE_WINDOW, S_UNIQUE_TAKE, S_UNIQUE_REPLACE,
    S_QUEUE_SEEN, S_QUEUE_KNOWN, S_RESULT_TTL,
    /* claim.c */
    S_CLAIM_QUEUES, S_QUEUE_READY, S_CLAIM_CANDIDATES, S_LIM_CANDIDATES,
    S_CLAIM, S_CLAIM_READ, S_CLAIM_ONE,
    /* limits.c */
    S_LIM_RUNNING, S_LIM_BUCKET, S_LIM_BUCKET_SET, S_LIM_PRUNE,
    S_LIM_PATH_SET, S_LIM_USE, S_LIM_USE_TOP, S_LIM_TOKENS,
    /* complete.c */
    S_DONE, S_DONE_FLOW, S_RESCUE_FLOW, S_DONE_MANY, S_KEEP, S_KEEP_MANY,
    /* complete.c: the result statements without RETURNING, for jobs
     * without a flow bit (made from the others' text) */
    S_KEEP_P, S_RETRY_P, S_DEAD_P, S_SNOOZE_P, S_RELEASE_P, S_EXPIRED_P,
    S_CANCELLED_P,
    S_RETRY, S_DEAD, S_SNOOZE, S_RELEASE, S_EXPIRED, S_CANCELLED,
    S_PROGRESS, S_RENEW, S_RESCUE,
    /* admin.c */
    S_DEAD_RETRY, S_DEAD_RETRY_ALL, S_DEAD_PURGE, S_DEAD_DELETE,
    S_PRUNE_COMPLETED, S_PRUNE_KEPT, S_PRUNE_CANCELLED, S_PRUNE_DEAD,
    S_PRUNE_UNIQUE,
    S_PRUNE_DEPS, S_PRUNE_MEMBERS, S_PRUNE_BATCHES,
    S_CANCEL_QUEUED, S_CANCEL_RUNNING, S_EXISTS, S_CANCEL_POLL,
    S_PAUSE, S_RESUME, S_QUEUE_PRUNE,
    /* inspect.c */
    S_STATS, S_DEAD_LIST, S_QUEUE_LIST, S_PAUSED, S_READY_BY_QUEUE,
    S_SHOW, S_LIST, S_LIST_ASC,
    /* wait.c */
    S_WATCH, S_OUTCOMES, S_LAST_ID,
    /* flow.c and batch.c */
    S_FLOW_BATCH_NEW, S_FLOW_BATCH_JOIN, S_FLOW_BATCH_EXISTS,
    S_FLOW_MEMBER_ADD, S_FLOW_JOB_BATCH, S_FLOW_WAIT, S_FLOW_PARENT_MARK,
    S_FLOW_DEP_ADD, S_FLOW_DEPS_END, S_FLOW_EDGE, S_FLOW_PARENTS,
    S_FLOW_MEMBER_END, S_FLOW_BATCH_DEC, S_FLOW_BATCH_PAYLOAD,
    S_FLOW_BATCH_RESULTS, S_FLOW_BATCH_FIRED, S_FLOW_FLAG, S_FLOW_LINKS,
    S_FLOW_BATCH_ROW, S_FLOW_MEMBERS,
    S_COUNT
};

#define NAME_BUF 129            /* a job or queue name (1 to 128 bytes), NUL */

/* The connection handle every op gets (opaque outside this folder). */
struct jr_backend {
    sqlite3      *db;
    sqlite3_stmt *st[S_COUNT];  /* prepared on first use */
    char         *path;
    int           inotify_fd;   /* -1 until wake_fd is asked for */
    int           wal_watch;    /* inotify watch of the -wal file, or -1 */
    int           fin_fd;       /* wait.c: inotify on the file's folder
                                   (a -wal file deleted and made again
                                   is still seen), -1 until asked for */
    sqlite3_int64 data_version; /* last seen PRAGMA data_version */
    dev_t         dev;          /* identity of the file we opened */
    ino_t         ino;          /* 0: not a file */
    int           sync_normal;
    int           durable_push; /* pushes commit FULL (jr_backend_opts) */
    unsigned      reconnects;   /* reopened: the file was put back */
    int           busy_ms;
    int           must_exist;   /* never create the file or the tables */
    double        keep_completed; /* seconds; 0: delete at success */
    int           opf;          /* JR_OPF_* of pushes that give none */
    double        result_ttl;     /* seconds a job with a result stays */
    unsigned      rotate;       /* claims so far: which queue leads */
    int           triggers_off; /* the schema's triggers are off (see
                                 * conn.c, "the schema's triggers") */
    sqlite3_int64 schema_seen;  /* PRAGMA schema_version they were set for;
                                 * -1: to be read */
    char          queue_known[NAME_BUF]; /* made known in this
                                 * transaction; "": none yet */
    char          pathless[NAME_BUF]; /* a job name without a limit path,
                                 * in this transaction; "": none yet */
    char         *lim_keys[JR_LIMIT_TOP]; /* limit_use's top keys */
};

/* ---- conn.c: errors, the statement cache, transactions ---- */

/* JR_EINPUT when SQLite refused the row itself (a constraint, a value of
 * the wrong type or too big), else JR_EDB. */
int  jr_sqlite_error_class(int rc);
/* Fills err with the connection's last error, what failed first; -1. */
int  jr_sqlite_fail(jr_backend *b, jr_err *err, const char *what);
/* Prepares sql (persistent) as the cache's statement which and keeps it
 * there. Returns it, or NULL with err set. */
sqlite3_stmt *jr_sqlite_prepare(jr_backend *b, int which, const char *sql,
                                jr_err *err);

/* Returns the cache's statement which, reset and unbound; prepared from
 * sql at its first use on this connection (each file passes its own
 * sql_text[which]). NULL with err set. */
static inline sqlite3_stmt *
jr_sqlite_stmt(jr_backend *b, int which, const char *sql, jr_err *err)
{
    sqlite3_stmt *s = b->st[which];

    if (s == NULL)
        return jr_sqlite_prepare(b, which, sql, err);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

/* Runs a statement that returns no rows. Returns changes or -1. */
static inline int
run(jr_backend *b, sqlite3_stmt *s, jr_err *err, const char *what)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return jr_sqlite_fail(b, err, what);
    return sqlite3_changes(b->db);
}

static inline void
bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v == NULL)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* A finite number, else NULL (progress not known). */
static inline void
bind_number(sqlite3_stmt *s, int i, double v)
{
    if (isfinite(v))
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

static inline const char *
col_text(sqlite3_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(s, i);
}

/* Every write of the library is in one of these transactions: begin
 * checks the file and the trigger set inside it, so no write runs with a
 * stale one. Each returns 0 or -1 with err set; a failed commit rolls
 * back. */
int  jr_sqlite_begin(jr_backend *b, jr_err *err);
int  jr_sqlite_commit(jr_backend *b, jr_err *err);
void jr_sqlite_rollback(jr_backend *b);
/* Ends the transaction of a single write that returned rc (changes, or
 * -1 with err set): committed, or rolled back. Returns rc or -1. */
int  jr_sqlite_write_end(jr_backend *b, int rc, jr_err *err);
/* Reopens the connection if the file at its path is another one now. */
int  jr_sqlite_file_check(jr_backend *b, jr_err *err);
/* Turns the connection's copy of the schema's triggers off (1) or on. */
int  jr_sqlite_triggers_set(jr_backend *b, int off, jr_err *err);
/* ["a","b",...] of the (validated, quote-free) names in a new string;
 * NULL when out of memory. */
char *jr_sqlite_names_json(const char *const *names, int n);

/* ---- the ops, each in the file of its concern ---- */

/* conn.c */
jr_backend *jr_sqlite_open(const char *path, const jr_backend_opts *o,
                           jr_err *err);
void     jr_sqlite_close(jr_backend *b);
int      jr_sqlite_wake_fd(jr_backend *b);
int      jr_sqlite_changed(jr_backend *b, jr_err *err);
unsigned jr_sqlite_reconnects(jr_backend *b);
/* wait.c */
int  jr_sqlite_outcomes(jr_backend *b, const int64_t *ids, int n,
                        double keep, jr_outcome *out, int64_t *last,
                        jr_err *err);
int  jr_sqlite_finished_fd(jr_backend *b);
int  jr_sqlite_finished(jr_backend *b, int64_t *ids, int max, jr_err *err);
/* migrate.c */
int  jr_sqlite_migrate(jr_backend *b, jr_err *err);
/* push.c; insert_all and insert_one work in the open transaction */
int  jr_sqlite_push(jr_backend *b, const jr_push *p, int n, int64_t *ids,
                    jr_err *err);
int  jr_sqlite_insert_all(jr_backend *b, const jr_push *p, int n,
                          int64_t *ids, double now, jr_err *err);
/* insert_all without the push check, for the jobs the database composed
 * (a batch's callbacks): their parts were checked when pushed, and the
 * payload that wraps them may be nested two levels past the check's
 * depth; refused, the member's end could never be recorded */
int  jr_sqlite_insert_fired(jr_backend *b, const jr_push *p, int n,
                            int64_t *ids, double now, jr_err *err);
int  jr_sqlite_insert_one(jr_backend *b, const jr_push *p, double now,
                          int64_t *id, jr_err *err);
/* claim.c; claim_rows works in the open transaction, commit_claimed ends
 * it */
int  jr_sqlite_claim(jr_backend *b, const char *token, double lease,
                     const jr_claim_spec *spec, jr_job **out, jr_err *err);
int  jr_sqlite_claim_rows(jr_backend *b, const char *token, double lease,
                          const jr_claim_spec *spec, jr_job **out,
                          double now, jr_err *err);
int  jr_sqlite_commit_claimed(jr_backend *b, jr_job **out, int n,
                              jr_err *err);
/* complete.c */
int  jr_sqlite_complete(jr_backend *b, const char *token, const jr_result *r,
                        int n, jr_err *err);
int  jr_sqlite_complete_claim(jr_backend *b, const char *token,
                              const jr_result *r, int nr, int *applied,
                              double lease, const jr_claim_spec *spec,
                              jr_job **out, jr_err *err);
int  jr_sqlite_renew(jr_backend *b, const char *token, double lease,
                     const int64_t *ids, int n, jr_err *err);
int  jr_sqlite_rescue(jr_backend *b, jr_err *err);
/* admin.c */
int  jr_sqlite_dead_retry(jr_backend *b, const int64_t *ids, int n,
                          jr_err *err);
int  jr_sqlite_dead_purge(jr_backend *b, double older_than, jr_err *err);
int  jr_sqlite_dead_delete(jr_backend *b, const int64_t *ids, int n,
                           jr_err *err);
int  jr_sqlite_prune(jr_backend *b, double older_completed,
                     double older_cancelled, double older_dead, int limit,
                     jr_err *err);
int  jr_sqlite_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
                      jr_err *err);
int  jr_sqlite_cancelled(jr_backend *b, const char *token, int64_t *ids,
                         int max, jr_err *err);
int  jr_sqlite_pause(jr_backend *b, const char *queue, jr_err *err);
int  jr_sqlite_resume(jr_backend *b, const char *queue, jr_err *err);
int  jr_sqlite_queue_prune(jr_backend *b, double idle,
                           const char *const *keep, int nkeep, int limit,
                           jr_err *err);
/* inspect.c */
int  jr_sqlite_stats(jr_backend *b, jr_stat_cb cb, void *arg, jr_err *err);
int  jr_sqlite_dead_list(jr_backend *b, int limit, jr_dead_cb cb, void *arg,
                         jr_err *err);
int  jr_sqlite_queue_list(jr_backend *b, jr_queue_cb cb, void *arg,
                          jr_err *err);
int  jr_sqlite_paused(jr_backend *b, jr_name_cb cb, void *arg, jr_err *err);
int  jr_sqlite_ready_by_queue(jr_backend *b, const char *const *names,
                              int nnames, long limit, jr_count_cb cb,
                              void *arg, jr_err *err);
int  jr_sqlite_show(jr_backend *b, int64_t id, jr_job_cb cb, void *arg,
                    jr_err *err);
int  jr_sqlite_list(jr_backend *b, const jr_list_filter *f, jr_job_cb cb,
                    void *arg, jr_err *err);
/* attempts.c: fills a[0..max) with job id's newest attempts, oldest
 * first (strings: free with jr_attempt_rows_clear); returns how many */
int  jr_sqlite_attempts(jr_backend *b, int64_t id, jr_attempt_row *a,
                        int max, jr_err *err);
/* fire.c */
int  jr_sqlite_fire(jr_backend *b, jr_fire *f, int n, int keep,
                    jr_err *err);
int  jr_sqlite_last_fires(jr_backend *b, jr_fire_cb cb, void *arg,
                          jr_err *err);
/* flow.c; all in the open transaction. flow_any: 1 if one of p[0..n)
 * has after or batch. flow_link: their parents and batches, for p[0..n)
 * just inserted as ids[0..n). flow_settle: the end of job id in state st
 * (result: its JSON, or NULL) reaches its children and batch.
 * flow_check: the same when the job has a flow bit (read from its row). */
int  jr_sqlite_flow_any(const jr_push *p, int n);
int  jr_sqlite_flow_link(jr_backend *b, const jr_push *p, int n,
                         const int64_t *ids, double now, jr_err *err);
int  jr_sqlite_flow_settle(jr_backend *b, int64_t id, const char *st,
                           const char *result, double now, jr_err *err);
int  jr_sqlite_flow_check(jr_backend *b, int64_t id, const char *st,
                          double now, jr_err *err);
int  jr_sqlite_links(jr_backend *b, int64_t id, jr_link_cb cb, void *arg,
                     jr_err *err);
/* Steps s, which returns at most one row: column 0 as text into buf
 * (size), or as an int64 into *out when buf is NULL. 1 with a row, 0
 * without, -1 on error (what: the error's context). */
int  jr_sqlite_step_one(jr_backend *b, sqlite3_stmt *s, char *buf,
                        size_t size, int64_t *out, jr_err *err,
                        const char *what);
/* batch.c; in the open transaction, from flow.c. batch_make: the batch
 * spec stands for, once a push call (spec->id 0 until then). batch_join:
 * job id (p) joins batch bid. batch_end: a member's end (state st, its
 * result or NULL) reaches its batch, if it is in one; the last pushes
 * the batch's callbacks. batch_show: the read of batch show. */
int  jr_sqlite_batch_make(jr_backend *b, jr_batch_spec *spec, double now,
                          jr_err *err);
int  jr_sqlite_batch_join(jr_backend *b, const jr_push *p, int64_t id,
                          int64_t bid, jr_err *err);
int  jr_sqlite_batch_end(jr_backend *b, int64_t id, const char *st,
                         const char *result, double now, jr_err *err);
int  jr_sqlite_batch_show(jr_backend *b, int64_t id, jr_batch_cb bcb,
                          jr_link_cb mcb, void *arg, jr_err *err);
int  jr_sqlite_sched_ctl(jr_backend *b, const char *name, int what,
                         double *at, jr_err *err);
int  jr_sqlite_sched_states(jr_backend *b, jr_sched_cb cb, void *arg,
                            jr_err *err);
/* limits.c */
int  jr_sqlite_limit_paths(jr_backend *b, const jr_limit *l, int n,
                           jr_err *err);
int  jr_sqlite_limit_use(jr_backend *b, const jr_limit *l, jr_limit_use *u,
                         jr_err *err);

/* ---- the claim under limits: claim.c's passes, limits.c's tables ---- */

/* A ready job one queue offers to a claim: its rank in that queue, then
 * what orders it within the rank. */
typedef struct candidate {
    int64_t id;
    int     rank;               /* 0: the queue's first ready job */
    int     turn;               /* the queue's place in this claim's round */
    int     priority;
    double  run_at;
    char   *name;               /* with limits: the job's name, queue and */
    char   *queue;              /* limit key (NULL: none), else NULL */
    char   *key;
} candidate;

/* A limited claim's state between passes: the pick, its blocked lists
 * as JSON, and how many each queue gave so far. */
typedef struct limq {
    jr_lpick *pick;
    char     *names;            /* job names blocked whole */
    char     *pairs;            /* names and queues blocked for a key */
    char     *rates;            /* {scope: per-key rate} */
    char    **qname;            /* queues that gave jobs, and how many */
    int      *qtaken;
    int       nq;
} limq;

/* limits.c: reads the running jobs and the scopes' own buckets into
 * lim's new pick, and the per-key rates. 0, or -1 with err set (lim is
 * then to clear all the same). */
int  jr_sqlite_lim_load(jr_backend *b, const jr_claim_spec *spec, double now,
                        limq *lim, jr_err *err);
/* Keeps the candidates c[0..nc) (fair order) the limits let through, at
 * most max, at the front of c; *rejected counts the others. Returns how
 * many, or -1 with err set. */
int  jr_sqlite_lim_filter(jr_backend *b, limq *lim, candidate *c, int nc,
                          int max, int *rejected, jr_err *err);
/* Writes back the buckets the claim took from. */
int  jr_sqlite_lim_save(jr_backend *b, const jr_claim_spec *spec,
                        const jr_lpick *p, double now, jr_err *err);
void jr_sqlite_lim_clear(limq *lim);

#endif
