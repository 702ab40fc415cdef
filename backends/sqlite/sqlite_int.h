/* sqlite_int.h - what the files of the SQLite engine share, as SQLite's
 * btreeInt.h is to its btree: the connection handle (struct jr_backend),
 * the names of the prepared statements and the cache that holds them, the
 * transaction and error helpers, and the claim's candidate types. Private
 * to backends/sqlite/: the folder exports nothing but jr_sqlite_ops
 * (ops.c). Functions named jr_sqlite_* are defined in the file the
 * comment above them names; the short static inline helpers live here.
 * Uses backend.h, limitpick.h, stmtmap.h and SQLite. */
#ifndef JR_SQLITE_INT_H
#define JR_SQLITE_INT_H

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <sqlite3.h>

#include "backend.h"
#include "fairpick.h"
#include "limitpick.h"
#include "stmtmap.h"

extern const char jr_sqlite_sql[];      /* schema.sql, build/sqlite_sql.c */

/* The statements of the cache (b->st). Each file keeps its own: an enum
 * of their slots and their SQL in a table, static const char *const
 * sql_text[S_COUNT], and asks the cache with the address of a text's
 * entry (&sql_text[S_X]), which names the statement on every connection;
 * the text is read only at the statement's first use on a connection: the
 * SQL sits beside the code that binds it, and a new statement is a name
 * and a text in its file. (push.c makes the S_INSERT_MANY* texts from
 * S_INSERT's at their first use, complete.c the _P ones from the results'
 * own: their entries are NULL.) */

#define NAME_BUF 129            /* a job or queue name (1 to 128 bytes), NUL */

/* The connection handle every op gets (opaque outside this folder). */
/* A handler statement kept prepared (sqlrun.c): its text, and it. */
#define JR_SQLITE_SQL_CACHE 8
typedef struct jr_sqlite_cached {
    char         *text;
    size_t        len;
    sqlite3_stmt *s;
} jr_sqlite_cached;

struct jr_backend {
    sqlite3      *db;
    jr_stmtmap    st;           /* sqlite3_stmt by its text's entry,
                                   prepared on first use */
    char         *path;
    char         *attach;       /* ATTACHed as app (opts), or NULL */
    jr_sqlite_cached sql_cache[JR_SQLITE_SQL_CACHE]; /* sqlrun.c's */
    int           sql_next;     /* the cache's slot to replace next */
    atomic_int    in_sql;       /* a handler's statement runs (sqlrun.c):
                                   what interrupt interrupts */
    atomic_int    cut;          /* interrupted at a stop: no handler's
                                   statement runs any more on db */
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
    int64_t       gone_id;      /* the flow job complete.c deleted last, */
    char          gone_trace[576]; /* and its trace context ("": none):
                                 * its batch's callbacks take it (batch.c) */
    char          fair_seen[NAME_BUF]; /* a queue looked up in fair_paths
                                 * in this transaction; "": none yet */
    int           fair_is;      /* it is fair */
    int64_t       fair_hi;      /* its jobs stamped up to this id */
    int           seq_seen;     /* the last batch of successes had jobs
                                 * of a sequence with one behind them
                                 * (sequence.c: the next is one DELETE) */
    int           fair_named;   /* with fair_seen: a name has weights of
                                 * its own (fairname.c) */
    jr_fair_seen  fair_wseen;   /* fair limits recorded by this
                                 * connection (fair.c) */
};

/* A fair key's value: the JSON doc's value at path (SQL expressions, a
 * JSON path "$.a.b": each step a field, as json_extract reads it) as
 * text, alike on both engines (PostgreSQL's fair_val, schema.sql's
 * migration 39): a string as it is, true and false as the words (not
 * json_extract's 1 and 0), a number by its value (an integer as its
 * digits: 1e3, 1000 and 1000.0 are "1000"; another as %.16g writes it),
 * else (null, missing, an object, an array) ''; capped at
 * JR_FAIR_KEY_CAP characters (fairpick.h). The triggers jobs_fair_key
 * and jobs_fair_name (migration 39) spell the same out. */
#define JR_SQLITE_FAIR_X(doc, path) "json_extract(" doc ", " path ")"
#define JR_SQLITE_FAIR_NUM(doc, path) \
    "CASE WHEN " JR_SQLITE_FAIR_X(doc, path) " = CAST(" \
    JR_SQLITE_FAIR_X(doc, path) " AS INTEGER) THEN CAST(CAST(" \
    JR_SQLITE_FAIR_X(doc, path) " AS INTEGER) AS TEXT) ELSE" \
    " printf('%.16g', " JR_SQLITE_FAIR_X(doc, path) ") END"
#define JR_SQLITE_FAIR_TEXT(doc, path, text) \
    "CASE json_type(" doc ", " path ") WHEN 'text' THEN " text \
    " WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'integer'" \
    " THEN " JR_SQLITE_FAIR_NUM(doc, path) " WHEN 'real' THEN " \
    JR_SQLITE_FAIR_NUM(doc, path) " ELSE '' END"
#define JR_SQLITE_FAIR_CAP(doc, path) \
    "substr(" JR_SQLITE_FAIR_X(doc, path) ", 1, " JR_FAIR_KEY_CAPS ")"
#define JR_SQLITE_FAIR_VAL(doc, path) \
    JR_SQLITE_FAIR_TEXT(doc, path, JR_SQLITE_FAIR_CAP(doc, path))

/* A key in a queue's scope: text k with a char(31) in front when it
 * holds one, so that no queue's key spells a name's scope (NAME,
 * char(31), value: a name starts with none); JR_SQLITE_FAIR_QKEY is the
 * value at path so (only a string can hold one). */
#define JR_SQLITE_FAIR_QK(k) \
    "(CASE WHEN instr(" k ", char(31)) THEN char(31) ELSE '' END || " k ")"
#define JR_SQLITE_FAIR_QKEY(doc, path) \
    JR_SQLITE_FAIR_TEXT(doc, path, JR_SQLITE_FAIR_QK( \
        JR_SQLITE_FAIR_CAP(doc, path)))

/* A job's key in its name's fair scope, in an UPDATE of jobs: NAME,
 * char(31), its payload's value at the name's path when the name has
 * weights of its own (fair_names.weights), the value alone (in the
 * queue's scope) when it has a path only, NULL when the name has
 * neither (the queue's key then). */
#define JR_SQLITE_FAIR_NKEY \
    "(SELECT CASE WHEN n.weights IS NOT NULL THEN jobs.name || char(31)" \
    " || " JR_SQLITE_FAIR_VAL("payload", "n.path") \
    " ELSE " JR_SQLITE_FAIR_QKEY("payload", "n.path") " END" \
    " FROM fair_names n WHERE n.name = jobs.name)"

/* The weight of fair key k (an SQL expression) when it is in a name's
 * scope (NAME, char(31), value) and the name has weights: fair set
 * --name's (fair_name_keys), else the handler's weights', else its
 * default; NULL otherwise. */
#define JR_SQLITE_FAIR_NW(k) \
    "CASE WHEN instr(" k ", char(31)) > 1 THEN (SELECT coalesce((SELECT" \
    " nk.weight FROM fair_name_keys nk WHERE nk.name = n.name AND nk.key =" \
    " substr(" k ", length(n.name) + 2)), (SELECT value FROM json_each(" \
    "n.weights) WHERE key = substr(" k ", length(n.name) + 2)), n.dflt)" \
    " FROM fair_names n WHERE n.name = substr(" k ", 1, instr(" k \
    ", char(31)) - 1) AND n.weights IS NOT NULL) END"

/* ---- sqlrun.c: a job's jobrunner.sql statements ---- */

/* How a batch's rows are recorded (round.c's complete_rows): how
 * many were still ours, or -1 with err set. */
typedef int (*jr_sqlite_rows_fn)(jr_backend *b, const char *token,
                                 const jr_result *r, int n, double now,
                                 jr_err *err);

/* Records r[0..n), some of them successes with statements, with rows in
 * the transaction the caller has just begun, and runs those statements
 * in it, each job's as in a savepoint of its own; a success whose
 * statement failed is recorded as the failed attempt its sql_kind says
 * (sqlres.h). Returns what rows returned, or -1 with err set when the
 * database is in trouble (the whole batch fails). */
int  jr_sqlite_sql_complete(jr_backend *b, const char *token,
                            const jr_result *r, int n, double now,
                            jr_sqlite_rows_fn rows, jr_err *err);
/* Finalizes the handler statements kept prepared (the connection
 * closes). */
void jr_sqlite_sql_forget(jr_backend *b);
/* ATTACHes b->attach as app, when set. 0 or -1 with err set. */
int  jr_sqlite_attach(jr_backend *b, jr_err *err);

/* ---- conn.c: errors, the statement cache, transactions ---- */

/* JR_EINPUT when SQLite refused the row itself (a constraint, a value of
 * the wrong type or too big), else JR_EDB. */
int  jr_sqlite_error_class(int rc);
/* Fills err with the connection's last error, what failed first; -1. */
int  jr_sqlite_fail(jr_backend *b, jr_err *err, const char *what);
/* Prepares sql (persistent) as the cache's statement key (a file's
 * &sql_text[S_X]) and keeps it there. Returns it, or NULL with err set. */
sqlite3_stmt *jr_sqlite_prepare(jr_backend *b, const char *const *key,
                                const char *sql, jr_err *err);

/* Returns the cache's statement of text *text (an entry of its file's
 * sql_text[]), reset and unbound; prepared at its first use on this
 * connection. NULL with err set. */
static inline sqlite3_stmt *
jr_sqlite_stmt(jr_backend *b, const char *const *text, jr_err *err)
{
    sqlite3_stmt *s = jr_stmtmap_get(&b->st, text);

    if (s == NULL)
        return jr_sqlite_prepare(b, text, *text, err);
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
/* crypt.c: -1 with err naming it when a push of p[0..n) with a sealed
 * payload and no key has a name with a limit path. */
int  jr_sqlite_sealed_keyless(jr_backend *b, const jr_push *p, int n,
                              jr_err *err);
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

/* jr_sqlite_<op> for each op of backend.h's list, defined in the file of
 * its concern (ops.c's table names it); the other functions the files
 * lend each other follow. */
#define JR_SQLITE_OP(ret, name, params) ret jr_sqlite_##name params;
JR_BACKEND_OPS(JR_SQLITE_OP)

/* A push's limit key: key as given, else its payload (doc) at the path
 * the runner declared for its name, by the fair key's rules, alike on
 * both engines (PostgreSQL's limit_key_of, schema.sql's migration 41):
 * each step a field of an object, a string as it is if of 1 to 256
 * bytes, a number by its value (JR_SQLITE_FAIR_NUM: 1e3 is "1000", not
 * json_extract's "1000.0"); else (true, false, null, an object, an
 * array, missing) NULL, unkeyed. A number's text is never over 256.
 * JR_SQLITE_LIMIT_KEY_OF is a push's: name ?1, payload ?2, key ?9 (push.c,
 * unique.c). */
#define JR_SQLITE_LIMIT_PATH "'$.' || lp.path"
#define JR_SQLITE_LIMIT_KEY(name, doc, key) \
    "coalesce(" key ", (SELECT CASE WHEN json_valid(" doc ") THEN CASE" \
    " json_type(" doc ", " JR_SQLITE_LIMIT_PATH ") WHEN 'text' THEN CASE WHEN" \
    " length(CAST(" JR_SQLITE_FAIR_X(doc, JR_SQLITE_LIMIT_PATH) " AS BLOB))" \
    " BETWEEN 1 AND 256 THEN " JR_SQLITE_FAIR_X(doc, JR_SQLITE_LIMIT_PATH) " END" \
    " WHEN 'integer' THEN " JR_SQLITE_FAIR_NUM(doc, JR_SQLITE_LIMIT_PATH) \
    " WHEN 'real' THEN " JR_SQLITE_FAIR_NUM(doc, JR_SQLITE_LIMIT_PATH) " END END" \
    " FROM limit_paths lp WHERE lp.name = " name "))"
#define JR_SQLITE_LIMIT_KEY_OF JR_SQLITE_LIMIT_KEY("?1", "?2", "?9")

/* push.c; insert_all and insert_row work in the open transaction; a
 * job with a unique key goes through insert_one (unique.c) */
int  jr_sqlite_insert_all(jr_backend *b, const jr_push *p, int n,
                          int64_t *ids, double now, jr_err *err);
/* insert_all without the push check, for the jobs the database composed
 * (a batch's callbacks): their parts were checked when pushed, and the
 * payload that wraps them may be nested two levels past the check's
 * depth; refused, the member's end could never be recorded */
int  jr_sqlite_insert_fired(jr_backend *b, const jr_push *p, int n,
                            int64_t *ids, double now, jr_err *err);
int  jr_sqlite_insert_row(jr_backend *b, const jr_push *p, double now,
                          int64_t *id, jr_err *err);
/* unique.c */
int  jr_sqlite_insert_one(jr_backend *b, const jr_push *p, double now,
                          int64_t *id, jr_err *err);
/* admin.c: the JR_CANCEL_* outcome of cancelling id in the open
 * transaction (a fire's cancel_previous too); -1 with err set */
int  jr_sqlite_cancel_one(jr_backend *b, int64_t id, double now,
                          jr_err *err);
/* claim.c; claim_rows works in the open transaction, commit_claimed ends
 * it */
int  jr_sqlite_claim_rows(jr_backend *b, const char *token, double lease,
                          const jr_claim_spec *spec, jr_job **out,
                          double now, jr_err *err);
int  jr_sqlite_commit_claimed(jr_backend *b, jr_job **out, int n,
                              jr_err *err);
/* candidates.c: which queues not paused have a job of names json ready
 * by now: 1 with *queue (the caller frees it) when one has, 0 when none
 * has, 2 when several have (the claim across queues decides), -1 on
 * failure. Stops at the second: one indexed probe per queue up to
 * there. */
int  jr_sqlite_ready_queue(jr_backend *b, const char *json, double now,
                           char **queue, jr_err *err);
/* What a claim reads of a job, first in each read a claim takes as it
 * reads (jr_sqlite_claim_read). */
#define JR_SQLITE_CLAIM_COLUMNS \
    "id, name, queue, payload, attempts, max_retries," \
    " priority, run_at, created_at, parents, batch_id, flow, steps, waits," \
    " trace, limit_key, sealed"
/* Called on each job a claim reads (i from 0) with the read's row, for
 * its columns after JR_SQLITE_CLAIM_COLUMNS. */
typedef void (*jr_sqlite_claim_row)(sqlite3_stmt *s, jr_job *j, int i,
                                    void *arg);
/* The jobs read by s, a one-queue read (?1 queue, ?2 now, ?3 names
 * json, ?4 max: its LIMIT), into out[] in the order it gives them,
 * row(s, job, i, arg) on each unless row is NULL, then marked running
 * under token in one statement: how many, or -1 with err set (a failed
 * read: what failed, what) and none in out. */
int  jr_sqlite_claim_read(jr_backend *b, sqlite3_stmt *s, const char *queue,
                          const char *json, int max, const char *token,
                          double lease, double now, jr_job **out,
                          jr_sqlite_claim_row row, void *arg,
                          const char *what, jr_err *err);
/* fairclaim.c: a fair queue's claim alone (fairpick.h's jr_fair_alone)
 * when it is the one queue with ready jobs of names json, in the open
 * transaction: how many, -1 with err set, or -2 if the claim under
 * limits is to run. */
int  jr_sqlite_fair_claim(jr_backend *b, const char *token, double lease,
                          const jr_claim_spec *spec, const char *json,
                          jr_job **out, double now, jr_err *err);
/* attempts.c: fills a[0..max) with job id's newest attempts, oldest
 * first (strings: free with jr_attempt_rows_clear); returns how many */
int  jr_sqlite_attempts(jr_backend *b, int64_t id, jr_attempt_row *a,
                        int max, jr_err *err);
/* flow.c; all in the open transaction. flow_any: 1 if one of p[0..n)
 * has after or batch. flow_link: their parents and batches, for p[0..n)
 * just inserted as ids[0..n). flow_settle: the end of job id in state st
 * (result: its JSON, or NULL) reaches its children and batch.
 * flow_check: the same when the job has a flow bit (read from its row). */
int  jr_sqlite_flow_any(const jr_push *p, int n);
int  jr_sqlite_flow_link(jr_backend *b, const jr_push *p, int n,
                         int64_t *ids, double now, jr_err *err);
/* Ends up to max queued jobs past their expiry, never started, in the
 * state expired (expire.c), in a transaction of its own; none found
 * takes no write lock. Returns how many, or -1. */
int  jr_sqlite_expire(jr_backend *b, int max, jr_err *err);
int  jr_sqlite_flow_settle(jr_backend *b, int64_t id, const char *st,
                           const char *result, double now, jr_err *err);
int  jr_sqlite_flow_check(jr_backend *b, int64_t id, const char *st,
                          double now, jr_err *err);
/* flow.c: job id (p), made waiting, waits for parent: the edge, the
 * parent's flow bit, and the parent's end at once when it ended. */
int  jr_sqlite_flow_wait(jr_backend *b, const jr_push *p, int64_t id,
                         int64_t parent, double now, jr_err *err);
/* sequence.c; in the open transaction, from flow.c: job *id (p), just
 * pushed, goes to the end of its sequence (docs/queues.md), or with
 * on_conflict replace or cancel_running gives its payload to the
 * sequence's pending last job and is dropped: *id is then that job's;
 * p->outcome (may be NULL) says which. */
int  jr_sqlite_seq_link(jr_backend *b, const jr_push *p, int64_t *id,
                        double now, jr_err *err);
/* sequence.c; from flow.c, before the links of a batch with jobs of
 * sequences: job id's fair turn back and its tag dropped when its tag is
 * its key's last (else kept). */
int  jr_sqlite_seq_give(jr_backend *b, int64_t id, jr_err *err);
/* sequence.c; from flow.c: 1 when a job of ids lo to hi is in a fair
 * queue, 0 when none, -1 on error. */
int  jr_sqlite_seq_fair(jr_backend *b, int64_t lo, int64_t hi,
                        jr_err *err);
/* seqretry.c; in the open transaction, from admin.c and rerun.c: runs
 * again (bound by the caller), the statement that queues job id again
 * (a dead retry, a rerun); when it changed the row and the job's
 * sequence had gone on past it, the job goes to the sequence's end as
 * a push does (*waits, when waits is not NULL, is set to 1 when it waits
 * there). Returns the statement's changes, or -1. seq_past_dead:
 * up to max dead jobs the sequences have gone on past, each sequence's
 * in their order, into ids; how many, or -1. */
int  jr_sqlite_seq_again(jr_backend *b, int64_t id, sqlite3_stmt *again,
                         double now, int *waits, jr_err *err);
int  jr_sqlite_seq_past_dead(jr_backend *b, int64_t *ids, int max,
                             jr_err *err);
/* complete.c; in the open transaction: applies one result r, one of a
 * round's that ends before end (a durable step followed by a later one
 * of its job in them is skipped); 1 if the row was still ours, 0 if
 * fenced off, -1 with err set. round.c applies a round's with it. */
int  jr_sqlite_complete_one(jr_backend *b, const char *token,
                            const jr_result *r, const jr_result *end,
                            double now, jr_err *err);
/* sequence.c; in the open transaction, from round.c: the successes
 * among ids (a JSON array) of jobs of a sequence with a job behind them
 * (flow bit 1 alone) deleted as plain successes are, and the jobs behind
 * them readied, a few statements for all; with all, the plain
 * successes among them too (round.c's one DELETE, when b->seq_seen).
 * Returns how many it deleted. */
int  jr_sqlite_seq_done(jr_backend *b, const char *token, const char *ids,
                        int all, double now, jr_err *err);
/* seqpath.c: the sequence_paths op; and in the open transaction, from
 * push.c: when a handler's sequence applies to some of p[0..n), *out
 * gets the push with it (free with jr_seq_apply_free) and 1 comes back;
 * 0 when none does, -1 on error. */
int  jr_sqlite_sequence_paths(jr_backend *b, const jr_handler *h, int n,
                              jr_err *err);
int  jr_sqlite_seq_defaults(jr_backend *b, const jr_push *p, int n,
                            jr_push **out, jr_err *err);
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
 * the batch's callbacks. */
int  jr_sqlite_batch_make(jr_backend *b, jr_batch_spec *spec, double now,
                          jr_err *err);
int  jr_sqlite_batch_join(jr_backend *b, const jr_push *p, int64_t id,
                          int64_t bid, jr_err *err);
int  jr_sqlite_batch_end(jr_backend *b, int64_t id, const char *st,
                         const char *result, double now, jr_err *err);

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
    char   *fkey;               /* of a fair queue: its fair key, its */
    double  fweight;            /* weight and the queue's clock; else */
    double  fclock;             /* NULL */
    long    cost;               /* with limits: its cost (1 without) */
    double  fpass;              /* of a fair queue: its key's pass read */
} candidate;

/* A limited claim's state between passes: the pick, its blocked lists
 * as JSON, and how many each queue gave so far. */
typedef struct limq {
    jr_lpick *pick;
    char     *names;            /* job names blocked whole */
    char     *pairs;            /* names and queues blocked for a key */
    char     *rates;            /* {scope: per-key rate} */
    char     *rooms;            /* {scope: room} (jr_lpick_rooms) */
    char    **qname;            /* queues that gave jobs, and how many */
    int      *qtaken;
    int       nq;
    const jr_claim_spec *spec;  /* the claim's: its fair queues */
} limq;

/* candidates.c: the ready jobs a claim may take, fairly ordered, into a
 * new array (freed with jr_sqlite_candidates_free); *n gets how many.
 * One short indexed read per queue not paused, so a backlog in one queue
 * costs no scan. With lim, a limited claim's: the jobs its lists block
 * skipped, their strings kept. NULL with err set on failure. */
candidate *jr_sqlite_candidates(jr_backend *b, const jr_claim_spec *spec,
                                const char *json, double now, int *n,
                                const limq *lim, jr_err *err);
void jr_sqlite_candidates_free(candidate *c, int n);

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

/* fair.c: the fair limit of queue in spec, or NULL when it is not fair. */
const jr_limit *jr_sqlite_fair_of(const jr_claim_spec *spec,
                                  const char *queue);
/* Appends the first cap ready jobs of fair queue (limit f) to c[*n..] as
 * queue_candidates does, by (priority, start tag, id), after tagging the
 * queue's untagged queued jobs. 0, or -1 with err set. */
int  jr_sqlite_fair_candidates(jr_backend *b, const jr_limit *f,
                               const char *queue, int cap, const char *json,
                               double now, candidate *c, int *n,
                               const limq *lim, jr_err *err);
/* Moves the clocks of the fair queues of the claimed candidates c[0..n)
 * to the highest tag each took (fairsave.c). */
int  jr_sqlite_fair_set(jr_backend *b, const char *queue, const char *key,
                        double weight, jr_err *err);
int  jr_sqlite_fair_save(jr_backend *b, const candidate *c, int n,
                         jr_err *err);
/* fair.c: records f's path and weights when new and tags fair queue's
 * untagged queued jobs due by now (what jr_sqlite_fair_candidates does
 * first). 0 or -1. */
int  jr_sqlite_fair_ready(jr_backend *b, const jr_limit *f,
                          const char *queue, double now, jr_err *err);
/* fairsave.c: moves queue's clock up to clock. 0, or -1 with err set. */
int  jr_sqlite_fair_tick(jr_backend *b, const char *queue, double clock,
                         jr_err *err);
/* Gives each fair job of out[0..n) the weight its candidate (of c[0..k),
 * in id order as claim_picked leaves them) was claimed with, and its
 * key's hash. */
void jr_sqlite_fair_mark(const candidate *c, int k, jr_job **out, int n);
/* fair.c: a job's fair_hash (job.h) from its stored fair key. */
uint64_t jr_sqlite_fair_hash(const char *key);
int  jr_sqlite_fair_use(jr_backend *b, const jr_limit *f, jr_fair_use_cb cb,
                        void *arg, jr_err *err);
/* agestats.c: an aging queue's ready jobs by effective priority (the
 * aging_use op). */
int  jr_sqlite_aging_use(jr_backend *b, const char *queue, double aging,
                         int max, jr_aging_use_cb cb, void *arg,
                         jr_err *err);
/* Records the key path, weights and default of each fair queue of
 * l[0..n) in fair_paths (a new or changed one stamps the keys of the
 * queue's jobs not ended and tags its queued jobs again), in
 * the open transaction. A queue that is fair no more keeps its row: its
 * pushes keep their key, which nothing reads (another runner's config
 * may still have it fair). */
int  jr_sqlite_fair_paths(jr_backend *b, const jr_limit *l, int n,
                          jr_err *err);
/* What the trigger jobs_fair_key does, for the library's inserts: the
 * jobs of ids lo to hi just pushed into queue get their fair key when
 * the queue is fair (one look-up in fair_paths a queue a transaction). */
int  jr_sqlite_fair_stamp(jr_backend *b, const char *queue, int64_t lo,
                          int64_t hi, jr_err *err);
/* After the keys: the start tags of the jobs of ids lo to hi just pushed
 * into fair queues and due by now (the push's time; a job due later is
 * tagged by a claim once due), and their keys' finishes. */
int  jr_sqlite_fair_tag(jr_backend *b, int64_t lo, int64_t hi, double now,
                        jr_err *err);
/* The same for the untagged queued jobs due now of job name name in fair
 * queues (fairname.c, after its weights changed). */
int  jr_sqlite_fair_tag_name(jr_backend *b, const char *name, jr_err *err);

/* aging.c: the priority aging period of queue in spec (seconds), 0
 * when it does not age. */
double jr_sqlite_aging_of(const jr_claim_spec *spec, const char *queue);
/* Appends the first cap ready jobs of aging queue to c[*n..] as
 * queue_candidates does, in the order of their effective priority
 * (base/limit.h), then run_at, id. 0, or -1 with err set. */
int  jr_sqlite_aged_candidates(jr_backend *b, double aging,
                               const char *queue, int cap, const char *json,
                               double now, candidate *c, int *n,
                               const limq *lim, jr_err *err);

/* A claim's test that a job is not past its expiry (?2: now; a job that
 * started once is not expired: schema.sql, migration 21; a snooze, a
 * wait or a cursor handed back gives its attempt back, the generation of
 * the handler that ran stays): one NULL test for a job without one. */
/* The middle key of jobs_claim (schema.sql, migration 45): a queued job's
 * start tag in a fair queue, else its run_at. Every claim read orders by
 * (priority, this, id), written as the index writes it, so that SQLite
 * reads the index in order: a plain queue's jobs by (priority, run_at,
 * id), a fair queue's tagged ones by (priority, tag, id) and its untagged
 * ones (not yet due) after them. */
#define JR_SQLITE_CLAIM_ORDER "coalesce(fair_tag, run_at)"

#define JR_SQLITE_UNEXPIRED \
    " AND (expires_at IS NULL OR attempts > 0 OR generation IS NOT NULL" \
    " OR expires_at > ?2)"

/* The limited claim's filter on its candidates (candidates.c, fair.c):
 * names ?3 and not ?5, no key at its cap (?6) and no bucket of a rate
 * (?7) empty at ?2. */
#define JR_SQLITE_LIM_FILTER \
    " AND name IN (SELECT value FROM json_each(?3))" \
    " AND name NOT IN (SELECT value FROM json_each(?5))" \
    " AND (limit_key IS NULL" \
    "  OR ('n' || name || char(31) || limit_key) NOT IN" \
    "   (SELECT value FROM json_each(?6))" \
    "  AND ('q' || queue || char(31) || limit_key) NOT IN" \
    "   (SELECT value FROM json_each(?6))" \
    "  AND NOT EXISTS (SELECT 1 FROM json_each(?7) r" \
    "   JOIN limit_buckets lb ON lb.scope = r.key" \
    "   AND lb.key = jobs.limit_key" \
    "   WHERE (r.key = jobs.name OR r.key = 'queue:' || jobs.queue)" \
    "   AND lb.tokens + (?2 - lb.updated_at) * r.value < 1))" \
    " AND (jobs.cost IS NULL OR jobs.cost <= coalesce((SELECT min(value)" \
    "  FROM json_each(?10) WHERE key = jobs.name" \
    "  OR key = 'queue:' || jobs.queue), jobs.cost))"

/* logs.c: each attempt's logs (migration 20). A run's logs (the text
 * parameter n, NULL: none) appended to the job's: the newest JR_LOGS_KEPT
 * runs, oldest first (complete.c's S_KEEP writes a success's with it). */
#define JR_SQLITE_STR_(x) #x
#define JR_SQLITE_STR(x) JR_SQLITE_STR_(x)
#define JR_SQLITE_LOGS_APPEND(n) \
    "json_insert(CASE WHEN json_array_length(logs) >= " \
    JR_SQLITE_STR(JR_LOGS_KEPT) " THEN json_remove(logs, '$[0]')" \
    " ELSE coalesce(logs, '[]') END, '$[#]', json(" n "))"
/* complete.c, lease.c: a failed attempt joins the job's history
 * (schema.sql, migration 12): the newest JR_ATTEMPTS_KEPT entries, oldest
 * first. SET expressions see the row as it was: attempts is this
 * attempt's number (counted at claim). */
#define JR_SQLITE_ATTEMPT_LOG(err, at, dur, runner, worker, gen) \
    " attempt_log = json_insert(CASE WHEN json_array_length(attempt_log)" \
    "  >= " JR_SQLITE_STR(JR_ATTEMPTS_KEPT) \
    " THEN json_remove(attempt_log, '$[0]')" \
    "  ELSE coalesce(attempt_log, '[]') END, '$[#]', json_object(" \
    "  'attempt', attempts, 'error', " err ", 'at', " at "," \
    "  'duration', " dur ", 'runner', " runner ", 'worker', " worker "," \
    "  'generation', " gen ")),"
/* The runs' logs of r[0..n) but the successes', each with its job while
 * it is still token's, before the results end them: one statement a job
 * that logged. 0 or -1. */
int  jr_sqlite_logs_put(jr_backend *b, const char *token, const jr_result *r,
                        int n, jr_err *err);
/* Binds at i the JSON text of r's logs (joblog.h's jr_joblog_json, made
 * only here, where a run's logs are stored), NULL for none (or out of
 * memory: the run's logs are lost, not its end). */
void jr_sqlite_bind_logs(sqlite3_stmt *s, int i, const jr_result *r);
/* The logs of success r, which S_KEEP_MANY kept now: 0 or -1. */
int  jr_sqlite_logs_kept(jr_backend *b, const jr_result *r, double now,
                         jr_err *err);

/* crypt.c: payloads sealed stored as bytes (schema migration 24). Binds
 * the payload text at ?pi and NULL at ?si, or, for an envelope as seal
 * writes it, its stub and its bytes (copied); */
void jr_sqlite_bind_sealed(sqlite3_stmt *s, int pi, int si,
                           const char *text);
/* the envelope again into out (appended) when the row's column pc is a
 * stub beside its bytes at column sc: 1, else 0 (the text as it is), -1
 * out of memory; and the SQL function jr_payload(payload, sealed) that
 * reads it so, added to each connection. */
struct jr_buf;
int jr_sqlite_sealed_text(sqlite3_stmt *s, int pc, int sc,
                          struct jr_buf *out);
int jr_sqlite_crypt_functions(jr_backend *b, jr_err *err);
/* fairname.c: the fair_names op; and in the open transaction, after
 * jr_sqlite_fair_stamp found a fair queue among them, the keys of the
 * jobs of ids lo to hi whose name has a fair path, at it */
int jr_sqlite_fair_names(jr_backend *b, const jr_handler *h, int n,
                         jr_err *err);
/* A push of ids lo to hi into queue, which is not fair: when one of
 * them is of a name with weights of its own, makes the queue fair (path
 * '') and keys its jobs not ended; 1 then, 0 when none is, -1 with err
 * set. */
int jr_sqlite_fair_name_queue(jr_backend *b, const char *queue, int64_t lo,
                              int64_t hi, jr_err *err);
int jr_sqlite_fair_name_set(jr_backend *b, const char *name,
                            const char *key, double weight, jr_err *err);
int jr_sqlite_fair_name_list(jr_backend *b, int names, jr_fair_queue_cb cb,
                             void *arg, jr_err *err);
int jr_sqlite_fair_name_use(jr_backend *b, const char *name,
                            jr_fair_use_cb cb, void *arg, jr_err *err);
int jr_sqlite_fair_name_stamp(jr_backend *b, int64_t lo, int64_t hi,
                              jr_err *err);
/* fairreplace.c, in the open transaction: job id, replaced by a newer
 * push (its payload and run_at the push's now), keyed and tagged again
 * as a push of it would be, its old turn given back when it was its
 * key's last; and that give-back alone, for a job about to be deleted
 * or put to wait (returns 1 when it gave the turn back, 0 when not) */
int jr_sqlite_fair_replaced(jr_backend *b, int64_t id, double now,
                            jr_err *err);
int jr_sqlite_fair_give(jr_backend *b, int64_t id, jr_err *err);

/* ---- sequences (sequence.c, seqadmin.c) ---- */

/* what holds a sequence: a job not ended, or dead with on_failure block */
#define JR_SQLITE_SEQ_HOLDS "(state IN ('queued', 'running', 'waiting')" \
              " OR (state = 'dead' AND seq_fail = 'block'))"

/* a job of a sequence not started yet: queued (a retry's backoff
 * included), or waiting for the job before it */
#define JR_SQLITE_SEQ_PENDING "(state = 'queued' OR (state = 'waiting'" \
                " AND parents_left > 0))"

/* The condition of the index jobs_seq_head (migration 36), written out
 * in each statement that reads through it (SQLite uses a partial index
 * only for a query whose terms imply its condition): a job of a
 * sequence that waits for none before it (its head: queued, running,
 * waiting for a signal, or the dead one that blocks it; and the ended
 * ones kept) or that was pushed into it last (seq_last). One entry a
 * sequence while it drains, where an entry a job put one in each of its
 * pages for a batch's deletes (the heads of a batch are of as many
 * sequences). parents_left, not state: a claim, which changes state
 * alone, then leaves the index alone (SQLite updates a partial index
 * only when a column of its condition or its key changes). */
#define JR_SQLITE_SEQ_IN_HEADS "sequence_key IS NOT NULL" \
                 " AND (parents_left = 0 OR seq_last = 1)"

/* A job of a sequence that the sequence has gone on past: ended, and
 * not the dead one that blocks it (seqretry.c). _DEAD: the same of a
 * dead job (state = 'dead' beside it), read through jobs_seq_head (a
 * dead job waits for none), which holds the sequences' jobs alone where
 * jobs_dead holds every dead job; NULL, not 0, for one of a sequence
 * whose seq_last is NULL and parents_left not 0 (none is dead). */
#define JR_SQLITE_SEQ_PAST "sequence_key IS NOT NULL" \
            " AND state IN ('completed', 'dead', 'cancelled', 'expired')" \
            " AND NOT (state = 'dead' AND coalesce(seq_fail, 'block') = 'block')"
#define JR_SQLITE_SEQ_PAST_DEAD "(" JR_SQLITE_SEQ_IN_HEADS \
            " AND coalesce(seq_fail, 'block') <> 'block')"

/* The jobs of sequence ?2 reached from job ?1 by the edges of the
 * sequence's waits (each job waits for the one before it; one whose
 * parent was cancelled for the one before that, flow.c's S_FLOW_PASS),
 * through the jobs that hold it: the waiting jobs, which jobs_seq_head
 * does not hold but for the last. */
#define JR_SQLITE_SEQ_CHAIN "WITH RECURSIVE w(id) AS (SELECT ?1 UNION" \
              " SELECT d.child_id FROM w JOIN job_deps d" \
              " ON d.parent_id = w.id JOIN jobs j ON j.id = d.child_id" \
              " WHERE j.sequence_key = ?2 AND j.state = 'waiting'" \
              " AND j.parents_left > 0)"

#endif
