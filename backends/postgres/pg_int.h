/* pg_int.h - what the files of the PostgreSQL engine share, and nothing
 * outside backends/postgres/ sees (as SQLite keeps btreeInt.h): struct
 * jr_backend, the engine's connection handle; the pg_stmt that carries
 * a statement; the SQL fragment the claims share; the functions each file
 * lends its neighbours, and the ops that ops.c puts in jr_postgres_ops
 * (the folder's one exported symbol).
 * Uses backend.h, stmtmap.h, util.h and libpq. */
#ifndef JR_PG_INT_H
#define JR_PG_INT_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "backend.h"
#include "fairpick.h"
#include "stmtmap.h"
#include "base/util.h"

/* Shared between the folder's files only: kept out of the shared library's
 * symbol table, as static functions of one file were. */
#pragma GCC visibility push(hidden)

/* The engine's connection handle (backend.h's opaque jr_backend): made by
 * conn.c's jr_pg_open, read and written by every file of the folder. */
/* A handler statement prepared on the connection (sqlrun.c): its text,
 * its name, and the connection it was prepared on. */
#define JR_PG_SQL_CACHE 16
typedef struct jr_pg_sqlc {
    char       *text;           /* NULL: a free slot */
    size_t      len;
    char        name[24];       /* jr_h<N> */
    unsigned    conn;           /* reconnects when prepared */
    int         ready;          /* its Parse succeeded */
} jr_pg_sqlc;

struct jr_backend {
    PGconn     *conn;           /* queries; never NULL once open */
    PGconn     *listen;         /* LISTEN connection, NULL until needed */
    PGconn     *finished;       /* wait.c's LISTEN on <schema>_finished,
                                   NULL until needed */
    char       *url;            /* as given, to open the LISTEN connection */
    char        masked[512];    /* url with the password hidden, for messages */
    char        schema[64];     /* validated schema name */
    char        qschema[68];    /* the same, double-quoted for SQL */
    char        channel[72];    /* NOTIFY channel: schema_jobs, cut to 63 */
    size_t      max_payload;    /* bytes; 0: no limit */
    jr_stmtmap  prepared;       /* the pg_stmts prepared on conn (each
                                   to conn) */
    char        sqlstate[6];    /* SQLSTATE of the last failed statement */
    int         insert_failed;  /* the last jr_pg_insert_jobs failed in the db */
    int         copy_skip;      /* batches left that skip jr_pg_push_copy
                                   (a job of the last tried needed
                                   limit_key_of) */
    int         push_fair;      /* a fair queue exists: inserts go by
                                   st_push_fair (push.c) */
    double      push_fair_at;   /* when push_fair was learnt (mono), by
                                   COPY_SQL's list or st_fair_any; 0 */
    char        pgmsg[400];     /* its message and detail */
    jr_pg_sqlc  sqlc[JR_PG_SQL_CACHE]; /* handler statements prepared
                                   on conn (sqlrun.c) */
    unsigned    sqlc_next;      /* the slot to replace next */
    unsigned    sqlc_names;     /* names given so far: jr_h<N> */
    char        role_sql[160];  /* "SET LOCAL ROLE \"r\"" for
                                   handler_role, or "" (sqlrun.c) */
    int         must_exist;     /* migrate creates no schema */
    int         async_commit;   /* synchronous_commit = off on conn */
    unsigned    reconnects;     /* connections opened again after a loss */
    int         claims;         /* no seq or bitmap scans on conn */
    int         own_timeouts;   /* session timeouts set by session_setup */
    int         set_up;         /* session_setup done on conn since its
                                   last (re)connect */
    int         sql_ran;        /* handlers' statements ran on conn since
                                   its last (re)connect (sqlrun.c) */
    int         renew;          /* conn is opened again at the next call
                                   (jr_pg_fail, jr_pg_ready) */
    atomic_int  in_sql;         /* a pipeline of handlers' statements is
                                   out (sqlrun.c): what interrupt cancels */
    atomic_int  cut;            /* interrupted at a stop: no handler's
                                   statement runs any more on conn */
    double      keep_completed; /* seconds; 0: delete at success */
    int         opf;            /* JR_OPF_* of pushes that give none */
    double      result_ttl;     /* seconds a job with a result stays */
    unsigned    rotate;         /* claims so far: which queue leads */
    unsigned    fair_only;      /* claims left before st_claim_one is tried
                                   again (it found several queues) */
    PGresult   *lim_top;        /* limit_use's top keys, kept till next */
    int         woken;          /* jr_pg_woken read a wake-up (or opened
                                   the LISTEN) that jr_pg_changed is still
                                   to report */
    /* claim.c's place in the one queue with work: where its last full
     * batch ended, so the next claim starts there and not at the front
     * of jobs_claim (whose claimed entries a held snapshot keeps); ""
     * when there is none. Forgotten at any wake-up (listen.c), after
     * place_secs and when a claim from it comes back short. */
    char        place_queue[129];
    int         place_priority;
    char        place_run_at[40]; /* as the server wrote it */
    int64_t     place_id;
    uint64_t    place_names;    /* jr_pg_names_hash of its names */
    char        vacuum_horizon[24]; /* prune.c: the oldest transaction
                                   holding back removal at the last vacuum
                                   ("": none) */
    double      place_set;      /* jr_mono() of the full claim that set it */
    double      place_secs;     /* how long it holds (claim.c) */
    PGresult   *seqp;           /* seqpath.c: sequence_paths as last read,
                                   NULL: not yet */
    double      seqp_at;        /* jr_mono() of that read */
    uint64_t    rows_no[8];     /* hashes of handler statements whose
                                   table refused their rows as one
                                   (sqlrows.c), on conn since rows_conn */
    unsigned    rows_next;      /* the entry to replace next */
    unsigned    rows_conn;      /* reconnects when rows_no was emptied */
    int         seq_seen;       /* the last batch of successes had jobs of
                                   a sequence with one behind them
                                   (sequence.c: the next is one DELETE) */
    jr_fair_seen fair_wseen;    /* fair limits recorded by this
                                   connection (fair.c) */
    unsigned    fair_busy;      /* claims left before a fair queue's own
                                   claim (jr_pg_fair_claim) is tried
                                   again (other queues had work) */
    /* fairclaim.c's place in a fair queue claimed alone, as
     * place_queue's in a plain one: the (priority, start tag, id) its
     * last full batch ended at, for the names and queue of fplace_names;
     * fplace_on 0 when there is none. Forgotten where place_queue is, and
     * when the claim gave tags. */
    int         fplace_on;
    int         fplace_priority;
    char        fplace_tag[40]; /* as the server wrote it */
    int64_t     fplace_id;
    uint64_t    fplace_names;
    double      fplace_set;     /* jr_mono() of the claim from the front */
    double      fplace_secs;
};

/* A statement, prepared on first use, once per connection: its name on
 * the server, its parameters, its text, where {{schema}} becomes the
 * quoted schema. Each file keeps its own statements next to the code
 * that runs them, as static const pg_stmt st_*: the connection knows
 * which it prepared by their address (stmtmap.h), so a new one is its
 * definition alone. */
typedef struct pg_stmt {
    const char *name;           /* "jr_x", the prepared statement's name */
    int         nparams;
    const char *sql;            /* with {{schema}} marks */
} pg_stmt;

/* A claim's test that a job is not past its expiry (a job that started
 * once is not expired: schema.sql, migration 21; a snooze, a wait or a
 * cursor handed back gives its attempt back, the generation of the
 * handler that ran stays): one NULL test for a job without one. At the
 * statement's time, not now(): a claim under limits first waits for
 * their lock in its transaction, whose start may be past by then. */
#define JR_PG_UNEXPIRED \
    " AND (expires_at IS NULL OR attempts > 0 OR generation IS NOT NULL" \
    " OR expires_at > statement_timestamp())"
/* A fair key's value: the JSON doc's value at path (SQL expressions) as
 * text, as SQLite's JR_SQLITE_FAIR_VAL gives it (fair_val, schema.sql's
 * migration 39: each step a field, a number by its value, true and false
 * as the words, else ''), capped at JR_FAIR_KEY_CAP characters
 * (fairpick.h) so an index entry holds it. */
#define JR_PG_FAIR_VAL(doc, path) "{{schema}}.fair_val(" doc ", " path ")"
/* A job's fair key (fair_key, migration 39): of name nm and payload doc,
 * in a queue of path qp, its name's path np and weights nw (NULL: none):
 * in the name's scope (NAME, chr(31), value) when it has weights, else
 * the value with a chr(31) in front when it holds one (fair_qkey), so a
 * queue's key never spells a name's scope. */
#define JR_PG_FAIR_KEY(nm, doc, qp, np, nw) \
    "{{schema}}.fair_key(" nm ", " doc ", " qp ", " np ", " nw ")"

/* The filter of the candidates a fair or an aging claim reads in queue
 * $2 (fair.c, aging.c; limits.c's st_lim_candidates has the same with
 * its own numbers): the queue not paused, names $1 and not $4, no key at
 * its cap ($5, "n<name>\x1f<key>" or "q<queue>\x1f<key>"), no bucket of
 * a per-key rate (scopes $6, rates $7) short of a token at $8, a cost
 * within the room its name's or queue's limit has left ($10, {scope:
 * room}). */
#define JR_PG_PICK_FILTER \
    " AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues p" \
    "  WHERE p.name = $2::text AND p.paused)" \
    " AND name = ANY($1::text[]) AND name <> ALL($4::text[])" \
    " AND (limit_key IS NULL" \
    "  OR (('n' || name || chr(31) || limit_key) <> ALL($5::text[])" \
    "  AND ('q' || queue || chr(31) || limit_key) <> ALL($5::text[])" \
    "  AND NOT EXISTS (SELECT 1" \
    "   FROM unnest($6::text[], $7::float8[]) AS r(scope, rate)" \
    "   JOIN {{schema}}.limit_buckets lb ON lb.scope = r.scope" \
    "   AND lb.key = limit_key" \
    "   WHERE r.scope IN (name, 'queue:' || queue)" \
    "   AND lb.tokens + ($8::float8 - lb.updated_at) * r.rate < 1)))" \
    " AND (cost IS NULL OR cost <= coalesce((SELECT min(rm.value::bigint)" \
    "  FROM jsonb_each_text($10::jsonb) AS rm" \
    "  WHERE rm.key IN (name, 'queue:' || queue)), cost))"

/* A claim's deadline: set by the first, from the job's deadline (NULL
 * for a job without one). */
/* Encrypted payloads stored as bytes (schema migration 24; keyring.h's
 * jr_seal_split): the payload's text of a row (t: its alias and a dot,
 * or ""), the envelope again when it is a stub beside its bytes (replace,
 * not translate: a third of the time of a 1 KiB payload's). The
 * text P of a push: its payload, the stub when it is an envelope as seal
 * writes it, and its bytes (else NULL). */
#define JR_PG_PAYLOAD(t) \
    "(CASE WHEN " t "sealed IS NOT NULL" \
    " AND " t "payload->>'$jr_enc' LIKE 'v1:%:sealed'" \
    " THEN '{\"$jr_enc\":\"' || left(" t "payload->>'$jr_enc', -6)" \
    " || replace(encode(" t "sealed, 'base64'), E'\\n', '') || '\"}'" \
    " ELSE " t "payload::text END)"
#define JR_PG_SEALED_RE \
    "'^\\{\"\\$jr_enc\":\"v1:[A-Za-z0-9._-]{1,32}:" \
    "((?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)" \
    "\"\\}$'"
#define JR_PG_IS_SEALED(P) \
    "(left(" P ", 15) = '{\"$jr_enc\":\"v1:' AND " P " ~ " JR_PG_SEALED_RE ")"
#define JR_PG_STUB(P) \
    "(CASE WHEN " JR_PG_IS_SEALED(P) " THEN regexp_replace(" P "," \
    " ':[A-Za-z0-9+/=]+\"\\}$', ':sealed\"}') ELSE " P " END)::jsonb"
#define JR_PG_BYTES(P) \
    "(CASE WHEN " JR_PG_IS_SEALED(P) " THEN decode(substring(" P \
    " FROM " JR_PG_SEALED_RE "), 'base64') END)"

#define JR_PG_DEADLINE_SET \
    " deadline_at = coalesce(j.deadline_at," \
    " now() + j.deadline * interval '1 second')"
/* A job of a sequence that the sequence has gone on past: ended, and
 * not the dead one that blocks it (seqretry.c). */
#define JR_PG_SEQ_PAST "(sequence_key IS NOT NULL" \
    " AND state IN ('completed', 'dead', 'cancelled', 'expired')" \
    " AND NOT (state = 'dead' AND coalesce(seq_fail, 'block') = 'block'))"

/* A list of job ids (parameter p, bigint[]) to test with = ANY(...) in a
 * prepared statement that runs per round: read through an InitPlan, so
 * that the planner estimates it at 10 ids whatever it holds. Given the
 * array itself, each bind planned the statement again (0.1 to 0.2 ms of
 * the server's, ten times its execution): a custom plan for one id is
 * priced below the generic plan's 10, so the generic plan was never
 * chosen, and rounds of one or a few jobs are the common case. Only where
 * the ids are the one index condition to take (no state test that a
 * partial index such as jobs_lease is proved by): the generic plan does
 * not know how few they are. */
#define JR_PG_IDS(p) "(SELECT " p "::bigint[])::bigint[]"

/* The claims' queues qq (name, paused): those with a queued job, found
 * by a skip scan of jobs_claim (one seek per such queue), less the
 * paused ones, so a claim's cost follows the queues with work, not the
 * rows of the queues table. Opens the statement's WITH list. */
#define WORK_QUEUES \
    "WITH RECURSIVE wq(name) AS (SELECT (SELECT min(queue)" \
    "  FROM {{schema}}.jobs WHERE state = 'queued')" \
    " UNION ALL SELECT (SELECT min(queue) FROM {{schema}}.jobs" \
    "  WHERE state = 'queued' AND queue > wq.name)" \
    " FROM wq WHERE wq.name IS NOT NULL)," \
    " qq AS (SELECT wq.name, false AS paused FROM wq" \
    "  WHERE wq.name IS NOT NULL AND NOT EXISTS (SELECT 1" \
    "  FROM {{schema}}.queues p WHERE p.name = wq.name AND p.paused)),"

/* What a claim sets on its rows, and returns (jr_pg_row_job's columns).
 * The attempt counted stops at the integer's top: a row a plain INSERT
 * gave attempts = 2147483647 would make every claim that meets it fail
 * ("integer out of range"), every job of every queue stuck behind it. */
#define JR_PG_ATTEMPT_NEXT "least(j.attempts, 2147483646) + 1"
#define CLAIM_SET \
    "state = 'running', attempts = " JR_PG_ATTEMPT_NEXT "," \
    " locked_by = $1::text," \
    " locked_until = now() + $2::float8 * interval '1 second'," \
    " updated_at = now(), started_at = now(), progress_done = NULL," \
    " progress_total = NULL, progress_note = NULL," JR_PG_DEADLINE_SET
#define CLAIM_COLUMNS \
    "j.id, j.name, j.queue, " JR_PG_PAYLOAD("j.") ", j.attempts," \
    " coalesce(j.max_retries, -1), j.priority," \
    " extract(epoch FROM j.run_at)::float8," \
    " extract(epoch FROM j.created_at)::float8, j.parents::text," \
    " coalesce(j.batch_id, 0), j.flow, j.waits::text"
/* The job's steps and trace context, last in every claim's RETURNING
 * (found by their names): NULL, and no cost but a null, for a job that
 * records none or was pushed with no context. */
#define CLAIM_STEPS ", j.steps::text AS steps, j.trace AS trace," \
    " j.limit_key AS limit_key"

/* How long a place is trusted without a wake-up: a job queued before
 * it makes a wake-up (schema.sql, jobs_requeued), but a job of a higher
 * priority that only became due does not, nor one whose claim by
 * another runner was rolled back; they wait this long at most, or 50
 * times what the last claim from the front took, when that is longer
 * (that claim walked the dead entries: a fiftieth of the time goes to
 * it). */
#define JR_PG_PLACE_SECS 0.5
#define JR_PG_PLACE_COST 50

/* jr_pg_<op> for each op of backend.h's list (its contract there),
 * defined in the file of its concern; ops.c's table names it. */
#define JR_PG_OP(ret, name, params) ret jr_pg_##name params;
JR_BACKEND_OPS(JR_PG_OP)

/* Each file's functions that others call: their contracts are at their
 * definitions. */

/* claim.c */
jr_job *jr_pg_row_job(const PGresult *res, int r);
int jr_pg_row_jobs(const PGresult *res, jr_job **out, jr_err *err);
int jr_pg_claim_arrays(const jr_claim_spec *spec, jr_buf *a, jr_err *err);
void jr_pg_fair_order(const PGresult *res, jr_job **out, int n);
int jr_pg_claim_stmt(jr_backend *b, const char *token, double lease,
                  const jr_claim_spec *spec, jr_job **out, jr_err *err);
uint64_t jr_pg_names_hash(const char *s);

/* fairclaim.c: a fair queue's claim alone, in whatever transaction is
 * open: how many, -1 with err set, -2 when it is another claim or
 * another queue has work (the claim under limits is to run). */
int jr_pg_fair_claim(jr_backend *b, const char *token, double lease,
                     const jr_claim_spec *spec, jr_job **out, jr_err *err);

/* crypt.c: -1 with err naming it when a push of p[0..n) with a sealed
 * payload and no key has a name with a limit path. */
int jr_pg_sealed_keyless(jr_backend *b, const jr_push *p, int n, jr_err *err);

/* conn.c */
void jr_pg_oneline(char *dst, size_t size, const char *src);
char *jr_pg_expand_n(const jr_backend *b, const char *tmpl, size_t len);
char *jr_pg_expand(const jr_backend *b, const char *tmpl);
int jr_pg_fail(jr_backend *b, const PGresult *res, const char *what, jr_err *err);
int jr_pg_run_plain(jr_backend *b, const char *sql, const char *what,
                 jr_err *err);
void jr_pg_rollback(jr_backend *b);
/* A deadlock victim's or serialization failure's work run again, at most
 * this many times (jr_pg_retry, conn.c). */
#define JR_PG_RETRIES 3
int jr_pg_retry(jr_backend *b, int own, int *tries);
int jr_pg_idle(jr_backend *b);
/* fair set (of a queue's key, or of a name's: scope), one transaction
 * run by once, again when the server ends it as a deadlock's victim
 * (fairset.c) */
typedef int (*jr_pg_weight_fn)(jr_backend *b, const char *scope,
                               const char *key, double weight, jr_err *err);
/* Hands each row of a keys' use statement (key, ready, running,
 * weight) to cb until it returns nonzero, then clears res (fairset.c). */
void jr_pg_fair_use_rows(PGresult *res, jr_fair_use_cb cb, void *arg);
int jr_pg_fair_weight_tx(jr_backend *b, jr_pg_weight_fn once,
                         const char *scope, const char *key, double weight,
                         jr_err *err);
int jr_pg_ready(jr_backend *b, jr_err *err);
int jr_pg_prepare(jr_backend *b, const pg_stmt *st, const char *what,
                  jr_err *err);
PGresult *jr_pg_run_params(jr_backend *b, const pg_stmt *st,
                        const char *const *params,
                        const int *lens, const char *what, jr_err *err);
PGresult *jr_pg_run(jr_backend *b, const pg_stmt *st, const char *const *params,
                 const char *what, jr_err *err);
int jr_pg_run_count(jr_backend *b, const pg_stmt *st,
                 const char *const *params,
                 const char *what, jr_err *err);
PGconn *jr_pg_connect(jr_backend *b, jr_err *err);

/* copy.c */
int jr_pg_push_copy(jr_backend *b, const jr_push *const *pp, int n,
                 const int64_t *ids, jr_err *err);

/* flow.c: flow_any, 1 if one of pp[0..n) has after or batch;
 * flow_link, their parents and batches once inserted as ids[0..n), in
 * the open transaction; insert_linked, jr_pg_insert_all then flow_link
 * (ids may be NULL); push_linked, the same in a transaction of its own. */
int jr_pg_flow_any(const jr_push *const *pp, int n);
int jr_pg_flow_link(jr_backend *b, const jr_push *const *pp, int n,
                 int64_t *ids, jr_err *err);
/* sequence.c: job *id (p), just inserted, goes to the end of its
 * sequence, in the open transaction, or (on_conflict) gives its payload
 * to the sequence's pending last job, whose id *id then gets;
 * p->outcome (may be NULL) says which. */
int jr_pg_seq_link(jr_backend *b, const jr_push *p, int64_t *id, jr_err *err);
/* sequence.c, from flow.c around the links of a batch with jobs of
 * sequences: the turns of its jobs ids[0..n) (in push order) given back, the last first, each
 * whose tag is then its key's last (again 0, before); those queued
 * untagged tagged again, in push order (again 1, after). */
int jr_pg_seq_turns(jr_backend *b, const int64_t *ids, int n, int again,
                    jr_err *err);
/* seqretry.c: seq_to_end, in the open transaction, from rerun.c: job
 * id, just queued again, leaves its place in sequence key and goes to
 * its end as a push does (fail: its on_failure, NULL block; *waits,
 * when waits is not NULL, is set to whether it waits there).
 * seq_retry_ids: of the ids (an array literal), the dead or expired
 * ones their sequences have gone on past are queued again at their
 * sequences' ends, in a transaction of their own; seq_retry_dead: every
 * such dead job, JR_BULK_ROWS a transaction, each sequence's in their
 * order. They return how many, or -1 (the transactions before stay
 * done). */
int jr_pg_seq_to_end(jr_backend *b, const char *id, const char *key,
                     const char *fail, int *waits, jr_err *err);
int jr_pg_seq_retry_ids(jr_backend *b, const char *ids, jr_err *err);
int jr_pg_seq_retry_dead(jr_backend *b, jr_err *err);
/* sequence.c, in the open transaction, from complete.c: the successes
 * among r[0..n) of jobs of a sequence with a job behind them, deleted as
 * plain successes are, and the jobs behind them readied; the ids it
 * deleted go to done[*nd..]. Returns how many, or -1. */
int jr_pg_seq_done(jr_backend *b, const char *token, const jr_result *r,
                   int n, int64_t *done, int *nd, jr_err *err);
/* The same, with the plain successes among r[0..n) (complete.c's
 * st_done) in its DELETE: when b->seq_seen. Returns how many successes
 * it was given, or -1. Both run in a transaction of their own when none
 * is open. */
int jr_pg_seq_done_all(jr_backend *b, const char *token, const jr_result *r,
                       int n, int64_t *done, int *nd, jr_err *err);
/* seqpath.c: the sequence_paths op; a push's handlers' sequences: when
 * one applies to some of p[0..n), *out gets the push with it (free with
 * jr_seq_apply_free) and 1 comes back, 0 when none does, -1 on error;
 * _pp the same over pointers, *qpp (free with free()) pointing into
 * *q. */
int jr_pg_sequence_paths(jr_backend *b, const jr_handler *h, int n,
                         jr_err *err);
int jr_pg_seq_defaults(jr_backend *b, const jr_push *p, int n,
                       jr_push **out, jr_err *err);
int jr_pg_seq_defaults_pp(jr_backend *b, const jr_push *const *pp, int n,
                          jr_push **q, const jr_push ***qpp, jr_err *err);
/* push.c: the costs of pp[0..n) (limits by cost) on the jobs ids[0..n)
 * that hold them, after their insert (and their sequences), by their
 * outcomes oc (NULL: all new): a duplicate's holder keeps its own, a
 * replaced job takes the push's. */
int jr_pg_set_costs(jr_backend *b, const jr_push *const *pp, int n,
                    const int64_t *ids, const int *oc, jr_err *err);
/* push.c: pp[0..n) as cost_track gives them to the insert: copies whose
 * outcomes go to oc, when one has a cost or may replace a job (else pp
 * itself, oc NULL); cost_done gives the callers' outcomes theirs (rc 0)
 * and frees. */
typedef struct jr_pg_costed {
    const jr_push *const *pp;
    jr_push        *q;
    const jr_push **own;
    int            *oc;
} jr_pg_costed;
int  jr_pg_cost_track(const jr_push *const *pp, int n, jr_pg_costed *t,
                      jr_err *err);
void jr_pg_cost_done(const jr_push *const *pp, int n, jr_pg_costed *t,
                     int rc);
int jr_pg_insert_linked(jr_backend *b, const jr_push *const *pp, int n,
                     int64_t *ids, jr_err *err);
int jr_pg_push_linked(jr_backend *b, const jr_push *const *pp, int n,
                   int64_t *ids, jr_err *err);
/* attempts.c: fills a[0..max) with job id's newest attempts, oldest
 * first (strings: free with jr_attempt_rows_clear); returns how many */
int jr_pg_attempts(jr_backend *b, int64_t id, jr_attempt_row *a, int max,
                jr_err *err);

/* limits.c */
/* fair.c: the picked jobs of the fair queues of a claim under limits,
 * each with its rank in its queue's turn (1, 2, ...), locked; strings
 * point into res. */
typedef struct jr_pg_fair_row {
    const char *id, *name, *queue, *key, *fkey;
    long        rank;
    double      weight, clock;
    long        cost;           /* its cost (1 without one) */
} jr_pg_fair_row;
typedef struct jr_pg_fair_rows {
    jr_pg_fair_row *row;
    int             n, cap;
    PGresult       *res[16];    /* a fair queue's rows each, at most 16 */
    int             nres;
} jr_pg_fair_rows;
/* The fair limit of queue in spec (NULL: any fair queue's), or NULL. */
const struct jr_limit *jr_pg_fair_of(const jr_claim_spec *spec,
                                    const char *queue);
/* Appends the picked jobs of spec's fair queues, at most max each, to
 * fr; lists: the claim's names, names blocked, pairs blocked, per-key
 * rate scopes and rates, now, the scopes' rooms (limits.c's). 0, or -1
 * with err set. */
int  jr_pg_fair_read(jr_backend *b, const jr_claim_spec *spec, int max,
                     const char *const *lists, jr_pg_fair_rows *fr,
                     jr_err *err);
void jr_pg_fair_rows_clear(jr_pg_fair_rows *fr);
/* Records the key path of each fair queue of l[0..n) in fair_paths (a
 * new or changed path stamps the keys of the queue's jobs not ended).
 * A queue that is fair no more keeps its row (another runner's config may
 * still have it fair). 0, or -1 with err set. */
int  jr_pg_fair_paths(jr_backend *b, const struct jr_limit *l, int n,
                      jr_err *err);
/* Gives each fair job of out[0..k) the weight its row of taken[0..n)
 * was claimed with (the master deals its local queue by it). */
void jr_pg_fair_mark(const jr_pg_fair_row *const *taken, int n,
                     jr_job **out, int k);
/* aging.c: whether spec has an aging queue; appends the first jobs of
 * spec's aging queues, at most max each, by effective priority, locked,
 * to fr (rows with no fair key); lists as jr_pg_fair_read's. */
int  jr_pg_aging_any(const jr_claim_spec *spec);
int  jr_pg_aging_read(jr_backend *b, const jr_claim_spec *spec, int max,
                      const char *const *lists, jr_pg_fair_rows *fr,
                      jr_err *err);
/* Orders fr's rows by their rank in their queue, the queues in the
 * order they were read on a tie: each fair or aging queue's rows are
 * appended whole, and a claim taking them as they stand filled its batch
 * with the first queue's (a second fair queue's new key waited behind
 * the first's whole backlog). */
void jr_pg_fair_rows_order(jr_pg_fair_rows *fr);
/* Counts the claimed fair rows taken[0..n) in their keys' passes. */
int  jr_pg_fair_save(jr_backend *b, const jr_pg_fair_row *const *taken,
                     int n, jr_err *err);
int  jr_pg_fair_set(jr_backend *b, const char *queue, const char *key,
                    double weight, jr_err *err);
int  jr_pg_fair_use(jr_backend *b, const struct jr_limit *f,
                    jr_fair_use_cb cb, void *arg, jr_err *err);
/* agestats.c: an aging queue's ready jobs by effective priority (the
 * aging_use op). */
int  jr_pg_aging_use(jr_backend *b, const char *queue, double aging,
                     int max, jr_aging_use_cb cb, void *arg, jr_err *err);
int jr_pg_claim_limited(jr_backend *b, const char *token, double lease,
                     const jr_claim_spec *spec, jr_job **out, jr_err *err);

/* listen.c */
int jr_pg_woken(jr_backend *b);

/* push.c */
int jr_pg_cmp_id(const void *a, const void *b);
/* Whether a fair queue exists, as learnt now (copy.c's list). */
void jr_pg_push_fair_set(jr_backend *b, int fair);
int jr_pg_insert_jobs(jr_backend *b, const jr_push *const *pp, int n,
                   int64_t *ids, jr_err *err);
void jr_pg_explain_push_error(jr_backend *b, const jr_push *const *pp, int n,
                           jr_err *err);

/* pushafter.c: jr_pg_insert_jobs, then what the pushes that have one
 * set after it (a result_ttl, an expiry, a deadline, a trace context, a
 * cost), in the open transaction; whether a push of pp[0..n) has any;
 * such pushes in a transaction of their own. */
int jr_pg_insert_all(jr_backend *b, const jr_push *const *pp, int n,
                  int64_t *ids, jr_err *err);
int jr_pg_any_ttl(const jr_push *const *pp, int n);
int jr_pg_push_kept(jr_backend *b, const jr_push *const *pp, int n,
                    int64_t *ids, jr_err *err);

/* Statement text shared by complete.c, reports.c and lease.c. */
#define JR_PG_STR_(x) #x
#define JR_PG_STR(x) JR_PG_STR_(x)
/* A run's logs (text, NULL: none) join the job's (migration 20): the
 * newest JR_LOGS_KEPT runs, oldest first. */
#define JR_PG_LOGS_APPEND(v) \
    "(CASE WHEN jsonb_array_length(j.logs) >= " JR_PG_STR(JR_LOGS_KEPT) \
    " THEN j.logs - 0 ELSE coalesce(j.logs, '[]') END)" \
    " || jsonb_build_array(" v "::jsonb)"
/* A failed attempt joins the job's history (schema.sql, migration 12):
 * the newest JR_ATTEMPTS_KEPT entries, oldest first. SET expressions see
 * the row as it was: attempts is this attempt's number (counted at
 * claim). */
#define JR_PG_ATTEMPT_LOG(err, dur, runner, worker, gen) \
    "(CASE WHEN jsonb_array_length(j.attempt_log) >= " \
    JR_PG_STR(JR_ATTEMPTS_KEPT) " THEN j.attempt_log - 0" \
    "  ELSE coalesce(j.attempt_log, '[]') END) || jsonb_build_array(" \
    "  jsonb_build_object('attempt', j.attempts, 'error', " err "," \
    "  'at', extract(epoch FROM now()), 'duration', " dur "," \
    "  'runner', " runner ", 'worker', " worker ", 'generation', " gen "))"

/* reports.c: the PROGRESS, STEP and the runs' logs of results r[0..n)
 * other than successes' (complete.c's transaction): how many rows, or -1
 * with err set. */
int jr_pg_finish_progress(jr_backend *b, const char *token,
                          const jr_result *r, int n, jr_err *err);
int jr_pg_finish_steps(jr_backend *b, const char *token, const jr_result *r,
                       int n, jr_err *err);
int jr_pg_finish_logs(jr_backend *b, const char *token, const jr_result *r,
                      int n, jr_err *err);

#pragma GCC visibility pop

/* ---- sqlrun.c: a job's jobrunner.sql statements ---- */

/* Frees the cache of prepared handler statements (the backend closes). */
void jr_pg_sql_forget(jr_backend *b);
/* Sets the role jobrunner.sql statements run under (NULL: the runner's
 * own). 0, or -1 with err set for a name PostgreSQL cannot hold. */
int  jr_pg_role_set(jr_backend *b, const char *role, jr_err *err);
/* Runs the statements of the successes of r[0..n) whose ids are in
 * done[0..nd) (sorted: the completion's fenced writes matched them), in
 * one pipeline a chunk, no savepoint of their own (the caller's). 0 when
 * all passed, 1 when one failed (the caller rolls back), -1 with err set
 * when the connection is in trouble. */
int  jr_pg_sql_try(jr_backend *b, const jr_result *r, int n,
                   const int64_t *done, int nd, jr_err *err);
/* Runs the statements of the successes of r[0..n) still held by token,
 * each job's in a savepoint; a success whose statement failed becomes
 * the failed attempt its sql_kind says (sqlres.h). Returns 0, or -1 with
 * err set when the connection is in trouble (the whole batch fails). */
int  jr_pg_sql_run(jr_backend *b, const char *token, jr_result *r, int n,
                   jr_err *err);

/* ---- sqlrows.c: identical statements of a round as one ---- */
#pragma GCC visibility push(hidden)

/* Where the one row of an INSERT ... VALUES (...) lies in its text. */
typedef struct jr_pg_rows {
    const char *name;           /* the table as written, name_len bytes */
    size_t      name_len;
    size_t      row, row_end;   /* its "(" and past its ")" */
} jr_pg_rows;

/* The statement checking a table named $1 may take rows as one (fails
 * with SQLSTATE 22012 when not). */
extern const char jr_pg_rows_check[];
/* 1 when text (len bytes, np parameters) is an INSERT whose rows several
 * of it may run as one (its shape into s), else 0. */
int   jr_pg_rows_shape(const char *text, size_t len, int np, jr_pg_rows *s);
/* The text of m rows of it in one INSERT, the parameters of row i
 * numbered from i * np + 1 (malloc'd; NULL when out of memory). */
char *jr_pg_rows_text(const char *text, size_t len, const jr_pg_rows *s,
                      int np, int m);

/* fairname.c: the fair_names op, and the fair_name_* ops */
int jr_pg_fair_names(jr_backend *b, const jr_handler *h, int n, jr_err *err);
int jr_pg_fair_name_set(jr_backend *b, const char *name, const char *key,
                        double weight, jr_err *err);
int jr_pg_fair_name_list(jr_backend *b, int names, jr_fair_queue_cb cb,
                         void *arg, jr_err *err);
int jr_pg_fair_name_use(jr_backend *b, const char *name, jr_fair_use_cb cb,
                        void *arg, jr_err *err);
/* Tags queue's untagged queued jobs, their keys' finishes moved
 * (fair.c), in the open transaction. 0, or -1 with err set. */
int jr_pg_fair_tag_queue(jr_backend *b, const char *queue, jr_err *err);
/* A claim whose one limit is a fair queue (spec->limits[0]) with no
 * cap, rate, key or aging, every queue served uncapped (fairpick.h's
 * jr_fair_alone): 1 with its path and weights recorded (fairclaim.c
 * then claims it in one statement);
 * 0 when it is another claim, or another queue had work lately (the
 * claim under limits is to run); -1 with err set. */
int jr_pg_fair_alone(jr_backend *b, const jr_claim_spec *spec, jr_err *err);
/* For that claim when its queue has untagged jobs: the limits' lock
 * taken, bitmap scans off and the queue's untagged jobs tagged, in the
 * open transaction. 0, or -1 with err set. */
/* Takes the limits' advisory lock, to the transaction's end: claims
 * under limits, the tags they give and fair set's serialize on it. */
int jr_pg_fair_lock(jr_backend *b, jr_err *err);
int jr_pg_fair_tag_alone(jr_backend *b, const char *queue, jr_err *err);
/* Tags queue's queued jobs again from its clock (fair.c); with cw, its
 * config weights become weights (a JSON object, or NULL: none). 0, or
 * -1 with err set. */
int jr_pg_fair_retag(jr_backend *b, const char *queue, int cw,
                     const char *weights, jr_err *err);

#pragma GCC visibility pop

#endif
