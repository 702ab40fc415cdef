/* push.c - pushes: a batch as binary array parameters expanded by unnest
 * (with unique keys through the SQL function push_keyed; into a fair queue
 * tagged by fair_stamp), one job with scalar parameters, and which job
 * made a batch fail. Hands plain batches
 * due now to copy.c. Owns the push statements. Uses arrays.h, conn.c. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/seqkey.h"
#include "postgres/arrays.h"
#include "base/util.h"

/* The limit key a job of name NAME with payload DOC (text) takes when it
 * is given none: schema.sql's limit_val (migration 41: the fair key's
 * rules, alike on both engines) at its name's path in limit_paths, if of
 * 1 to 256 bytes. Spelled out, not limit_key_of: a SQL function with a
 * subquery is planned at each call, and this is planned with the
 * statement (20,000 keys: 107 ms of server time for integers, 65 for
 * strings, where limit_key_of took 188 and 159, and before the rules
 * 118 and 113); OFFSET 0 reads the payload once. */
#define LIMIT_KEY_OF(NAME, DOC) \
    "(SELECT v FROM (SELECT CASE jsonb_typeof(x) WHEN 'string'" \
    "  THEN x #>> '{}' WHEN 'number' THEN {{schema}}.fair_num(x::numeric)" \
    "  END AS v FROM {{schema}}.limit_paths lp CROSS JOIN LATERAL (SELECT" \
    "  {{schema}}.fair_at((" DOC ")::jsonb, string_to_array(lp.path, '.'))" \
    "  AS x OFFSET 0) a WHERE lp.name = " NAME ") y" \
    "  WHERE octet_length(v) BETWEEN 1 AND 256)"

/* A batch of plain jobs, in the batch's order (ids increase along it).
 * No join: a hashed subplan tells the names with a limit path, so the
 * unnest feeds the insert directly and, ordered by its ordinality, needs no
 * sort (a LEFT JOIN on limit_paths hashed the batch and sorted it back,
 * about a tenth of the statement). LIMIT_KEY_OF only for a name with a
 * path: a key's look-up per row (then limit_key_of's call) cost about
 * half of the statement (docs/performance.md, "Batch push"). */
#define PUSH_INSERT(COLS, VALS, JOIN) \
    "INSERT INTO {{schema}}.jobs" \
    " (name, payload, queue, priority, max_retries, run_at, limit_key," \
    " sealed" COLS ")" \
    " SELECT u.name, " JR_PG_STUB("u.payload") ", u.queue, u.priority," \
    "  u.max_retries, coalesce(to_timestamp(u.run_at)," \
    "  now() + u.run_in * interval '1 second')," \
    "  CASE WHEN u.key IS NOT NULL THEN u.key WHEN u.name IN" \
    "  (SELECT lp.name FROM {{schema}}.limit_paths lp)" \
    "  THEN " LIMIT_KEY_OF("u.name", "u.payload") " END," \
    "  " JR_PG_BYTES("u.payload") VALS \
    " FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]," \
    "  $5::int[], $6::float8[], $7::float8[], $8::text[]) WITH ORDINALITY" \
    "  AS u(name, payload, queue, priority, max_retries, run_at," \
    "  run_in, key, ord)" JOIN \
    " ORDER BY u.ord"
#define PUSH_SQL PUSH_INSERT("", "", "")

/* qsort and bsearch order of int64_t ids. */
int
jr_pg_cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

#define PUSH_ARRAYS 11

/* The element types of push_arrays' arrays, in order. */
static const uint32_t push_types[PUSH_ARRAYS] = {
    OID_TEXT, OID_TEXT, OID_TEXT, OID_INT4, OID_INT4, OID_FLOAT8,
    OID_FLOAT8, OID_TEXT, OID_TEXT, OID_FLOAT8, OID_TEXT};

static const pg_stmt st_push = {"jr_push", 8,
    PUSH_SQL " RETURNING id"};

/* PUSH_SQL for a batch into a fair queue: each job's fair key, tag and
 * weight from the SQL function fair_stamp, which moves each key's finish
 * first, given in the insert (a job not yet due by its run_at or run_in
 * gets its key only: a claim tags it once due); the trigger
 * jobs_queue_known tags only the rows without a key, and writes no second
 * version of these. */
#define PUSH_FAIR_SQL \
    PUSH_INSERT(", fair_key, fair_tag, fair_w", ", f.j_key, f.j_tag, f.j_w", \
                " LEFT JOIN {{schema}}.fair_stamp($3::text[], $1::text[]," \
                "  $2::text[], $6::float8[], $7::float8[]) f" \
                " ON f.j_ord = u.ord")

/* Whether a queue is fair, or a name's weights make one so: tells
 * jr_pg_insert_jobs which statement a batch takes, learnt anew after
 * FAIR_ANY_SECS (COPY_SQL's list tells it too). Either statement is
 * right for any batch: st_push tags by the trigger's UPDATE, a second
 * version of each row, st_push_fair calls fair_stamp, a sort more. */
#define FAIR_ANY_SECS 5.0
static const pg_stmt st_fair_any = {"jr_fair_any", 0,
    "SELECT EXISTS (SELECT 1 FROM {{schema}}.fair_paths)"
    " OR EXISTS (SELECT 1 FROM {{schema}}.fair_names"
    "  WHERE weights IS NOT NULL)"};

void
jr_pg_push_fair_set(jr_backend *b, int fair)
{
    b->push_fair = fair;
    b->push_fair_at = jr_mono();
}

/* b->push_fair, asked of the server when not learnt for FAIR_ANY_SECS;
 * -1 with err set. */
static int
push_fair(jr_backend *b, jr_err *err)
{
    PGresult *res;

    if (b->push_fair_at > 0 && jr_mono() - b->push_fair_at < FAIR_ANY_SECS)
        return b->push_fair;
    if ((res = jr_pg_run(b, &st_fair_any, NULL, "pushing jobs", err)) ==
        NULL)
        return -1;
    jr_pg_push_fair_set(b, PQntuples(res) == 1 &&
                        PQgetvalue(res, 0, 0)[0] == 't');
    PQclear(res);
    return b->push_fair;
}

static const pg_stmt st_push_fair = {"jr_push_fair", 8,
    PUSH_FAIR_SQL " RETURNING id"};
static const pg_stmt st_push_fair_noids = {"jr_push_fair_noids", 8,
    PUSH_FAIR_SQL};

/* a batch with a unique key: each push through the SQL function,
 * the one rule (docs/schedules.md, "Unique jobs"), in the batch's order */
static const pg_stmt st_push_unique = {"jr_push_unique", 11,
    "SELECT u.ord, r.id, r.outcome"
    " FROM unnest($1::text[], $2::text[], $3::text[], $4::int[],"
    "  $5::int[], $6::float8[], $7::float8[], $8::text[], $9::text[],"
    "  $10::float8[], $11::text[]) WITH ORDINALITY"
    "  AS u(name, payload, queue, priority, max_retries, run_at,"
    "  run_in, key, ukey, ufor, conflict, ord)"
    " CROSS JOIN LATERAL {{schema}}.push_keyed(u.name,"
    "  u.payload::jsonb, coalesce(to_timestamp(u.run_at),"
    "  now() + u.run_in * interval '1 second'), u.priority, u.queue,"
    "  u.max_retries, u.ukey, CASE WHEN u.ufor > 0"
    "  THEN u.ufor * interval '1 second' END, u.conflict, u.key) AS r"
    " ORDER BY u.ord"};

/* Checks pp[0..n) and builds the binary array parameters of st_push (the
 * first eight: the job and its limit key) and st_push_unique (all eleven:
 * and its unique options) into a[]; -1 with err set on bad input or no
 * memory. */
static int
push_arrays(jr_backend *b, const jr_push *const *pp, int n, jr_buf *a,
            jr_err *err)
{
    static const char zero[BA_HEADER];
    int i;

    for (i = 0; i < PUSH_ARRAYS; i++)
        jr_buf_put(&a[i], zero, BA_HEADER);
    for (i = 0; i < n; i++) {
        const jr_push *p = pp[i];
        if (jr_push_check(p, b->max_payload, err) < 0)
            return -1;
        ba_text(&a[0], p->name);
        ba_text(&a[1], p->payload ? p->payload : "{}");
        ba_text(&a[2], p->queue ? p->queue : "default");
        ba_int(&a[3], p->priority);
        if (p->max_retries < 0)
            ba_null(&a[4]);
        else
            ba_int(&a[4], p->max_retries);
        if (p->run_at != 0)
            ba_float8(&a[5], p->run_at);
        else
            ba_null(&a[5]);
        ba_float8(&a[6], p->run_in);
        ba_text(&a[7], p->key);
        ba_text(&a[8], p->unique_key);
        ba_float8(&a[9], p->unique_for);
        /* a sequence's on_conflict is sequence_put's (flow.c): push_keyed
         * refuses one without a unique key */
        ba_text(&a[10], jr_conflict_name(p->unique_key != NULL ?
                                         p->on_conflict : JR_CONFLICT_KEEP));
    }
    for (i = 0; i < PUSH_ARRAYS; i++) {
        if (a[i].oom || a[i].len > INT32_MAX)
            return jr_fail(err, JR_ENOMEM, "postgres: pushing %d jobs: out "
                           "of memory", n);
        ba_finish(&a[i], push_types[i], n);
    }
    return 0;
}

/* jr_pg_insert_jobs for a batch where some push has a unique key: one
 * statement, each row through the SQL function push_unique; ids (may be
 * NULL) and each push's outcome say what became of it. */
static int
push_unique(jr_backend *b, const jr_push *const *pp, int n, int64_t *ids,
            const char *const *params, const int *lens, const char *what,
            jr_err *err)
{
    PGresult *res;
    int i;

    res = jr_pg_run_params(b, &st_push_unique, params, lens, what, err);
    if (res == NULL) {
        b->insert_failed = 1;
        return -1;
    }
    if (PQntuples(res) != n) {
        i = PQntuples(res);
        PQclear(res);
        return jr_fail(err, JR_EDB, "postgres: %s: %d ids came back", what,
                       i);
    }
    for (i = 0; i < n; i++) {
        int k = atoi(PQgetvalue(res, i, 0)) - 1;
        const char *o = PQgetvalue(res, i, 2);
        if (k < 0 || k >= n)
            continue;
        if (ids != NULL)
            ids[k] = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        if (pp[k]->outcome != NULL)
            *pp[k]->outcome = strcmp(o, "new") == 0 ? JR_PUSH_NEW :
                              strcmp(o, "replaced") == 0 ?
                              JR_PUSH_REPLACED :
                              strcmp(o, "superseded") == 0 ?
                              JR_PUSH_SUPERSEDED : JR_PUSH_DUPLICATE;
    }
    PQclear(res);
    return 0;
}

static const pg_stmt st_push_noids = {"jr_push_noids", 8,
    PUSH_SQL};

/* Inserts pp[0..n) with one statement; ids (may be NULL) gets their ids in
 * order. On a database error, b->sqlstate and b->pgmsg say why. */
int
jr_pg_insert_jobs(jr_backend *b, const jr_push *const *pp, int n, int64_t *ids,
               jr_err *err)
{
    jr_buf a[PUSH_ARRAYS];
    const char *params[PUSH_ARRAYS];
    int lens[PUSH_ARRAYS];
    PGresult *res = NULL;
    char what[64];
    int i, got, rc = -1, unique = 0, fair;

    memset(a, 0, sizeof a);
    b->insert_failed = 0;
    if (push_arrays(b, pp, n, a, err) < 0)
        goto out;
    for (i = 0; i < PUSH_ARRAYS; i++) {
        params[i] = a[i].p;
        lens[i] = (int)a[i].len;
    }
    for (i = 0; i < n && !unique; i++)
        unique = pp[i]->unique_key != NULL;
    snprintf(what, sizeof what, "pushing %d job%s", n, n == 1 ? "" : "s");
    if (unique) {
        rc = push_unique(b, pp, n, ids, params, lens, what, err);
        goto out;
    }
    if ((fair = push_fair(b, err)) < 0)
        goto out;
    /* ids only when asked: 1000 rows back cost the server and us */
    res = jr_pg_run_params(b, fair ?
                           (ids != NULL ? &st_push_fair : &st_push_fair_noids)
                           : ids != NULL ? &st_push : &st_push_noids, params,
                           lens, what, err);
    if (res == NULL) {
        b->insert_failed = 1;
        goto out;
    }
    got = ids != NULL ? PQntuples(res) : atoi(PQcmdTuples(res));
    if (got != n) {
        jr_fail(err, JR_EDB, "postgres: %s: %d %s came back", what, got,
                ids != NULL ? "ids" : "rows");
        goto out;
    }
    for (i = 0; i < n; i++)
        if (pp[i]->outcome != NULL)
            *pp[i]->outcome = JR_PUSH_NEW;
    if (ids != NULL) {
        /* ids are increasing in insertion order, which is pp's order */
        for (i = 0; i < n; i++)
            ids[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        qsort(ids, (size_t)n, sizeof *ids, jr_pg_cmp_id);
    }
    rc = 0;
out:
    PQclear(res);
    for (i = 0; i < PUSH_ARRAYS; i++)
        free(a[i].p);
    return rc;
}

/* st_push for one job, with scalar parameters: &st_push, planned for
 * arrays of unknown length, was planned anew at every call (0.2 ms of
 * an idle push's 0.4 ms on the server, before the runner could hear
 * of the job), where this plan is made once and kept */
static const pg_stmt st_push_one = {"jr_push_one", 8,
    "INSERT INTO {{schema}}.jobs"
    " (name, payload, queue, priority, max_retries, run_at, limit_key,"
    " sealed)"
    " VALUES ($1::text, " JR_PG_STUB("$2::text") ", $3::text, $4::int,"
    "  $5::int,"
    "  coalesce(to_timestamp($6::float8),"
    "  now() + $7::float8 * interval '1 second'),"
    "  CASE WHEN $8::text IS NOT NULL THEN $8::text"
    "  WHEN EXISTS (SELECT 1 FROM {{schema}}.limit_paths lp"
    "   WHERE lp.name = $1::text)"
    "  THEN " LIMIT_KEY_OF("$1::text", "$2::text") " END, " JR_PG_BYTES("$2::text") ")"
    " RETURNING id"};

/* One plain job (no unique key) through st_push_one. */
static int
insert_one(jr_backend *b, const jr_push *p, int64_t *ids, jr_err *err)
{
    char prio[16], retries[16], at[32], in[32];
    const char *params[8];
    PGresult *res;

    b->insert_failed = 0;
    if (jr_push_check(p, b->max_payload, err) < 0)
        return -1;
    snprintf(prio, sizeof prio, "%d", p->priority);
    snprintf(retries, sizeof retries, "%d", p->max_retries);
    snprintf(at, sizeof at, "%.17g", p->run_at);
    snprintf(in, sizeof in, "%.17g", p->run_in);
    params[0] = p->name;
    params[1] = p->payload ? p->payload : "{}";
    params[2] = p->queue ? p->queue : "default";
    params[3] = prio;
    params[4] = p->max_retries < 0 ? NULL : retries;
    params[5] = p->run_at != 0 ? at : NULL;
    params[6] = in;
    params[7] = p->key;
    if ((res = jr_pg_run(b, &st_push_one, params, "pushing 1 job",
                      err)) == NULL) {
        b->insert_failed = 1;
        return -1;
    }
    if (PQntuples(res) != 1) {
        PQclear(res);
        return jr_fail(err, JR_EDB, "postgres: pushing 1 job: no id came "
                       "back");
    }
    if (p->outcome != NULL)
        *p->outcome = JR_PUSH_NEW;
    if (ids != NULL)
        ids[0] = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return 0;
}

static const pg_stmt st_payload_error = {
    "jr_payload_error", 1,
    "SELECT u.ord FROM unnest($1::text[]) WITH ORDINALITY AS u(p, ord)"
    " WHERE {{schema}}.payload_error(u.p) IS NOT NULL"
    " ORDER BY u.ord LIMIT 1"};

/* After jr_pg_insert_jobs failed with a data error and the transaction ended:
 * finds the first job whose payload the database refuses and names it. */
void
jr_pg_explain_push_error(jr_backend *b, const jr_push *const *pp, int n,
                      jr_err *err)
{
    char pgmsg[sizeof b->pgmsg];
    const char *params[1];
    jr_buf s = {0};
    PGresult *res;
    jr_err ignored;
    int i;

    if (!b->insert_failed || strncmp(b->sqlstate, "22", 2) != 0 ||
        PQstatus(b->conn) != CONNECTION_OK)
        return;
    memcpy(pgmsg, b->pgmsg, sizeof pgmsg);
    for (i = 0; i < n; i++)
        sb_elem(&s, pp[i]->payload ? pp[i]->payload : "{}");
    params[0] = sb_array(&s);
    if (s.oom) {
        free(s.p);
        return;
    }
    res = jr_pg_run(b, &st_payload_error, params, "checking payloads", &ignored);
    free(s.p);
    if (res != NULL && PQntuples(res) == 1) {
        i = atoi(PQgetvalue(res, 0, 0)) - 1;
        if (i >= 0 && i < n)
            jr_fail(err, JR_EINPUT, "job '%s': invalid JSON payload: %s",
                    pp[i]->name, pgmsg);
    } else if (n == 1) {
        jr_fail(err, JR_EINPUT, "job '%s': %s", pp[0]->name, pgmsg);
    }
    PQclear(res);
}

/* pp[0..n) by the path their options take, once. */
static int
push_once(jr_backend *b, const jr_push *const *pp, int n, int64_t *ids,
          jr_err *err)
{
    int rc;

    if (jr_pg_flow_any(pp, n))
        return jr_pg_push_linked(b, pp, n, ids, err);
    if (jr_pg_any_ttl(pp, n))
        return jr_pg_push_kept(b, pp, n, ids, err);
    if (n == 1 && pp[0]->unique_key == NULL)
        return insert_one(b, pp[0], ids, err);
    if ((rc = jr_pg_push_copy(b, pp, n, ids, err)) == 1)
        rc = jr_pg_insert_jobs(b, pp, n, ids, err);
    return rc;
}

int
jr_pg_push(jr_backend *b, const jr_push *p, int n, int64_t *ids, jr_err *err)
{
    const jr_push **pp;
    jr_push *q = NULL;
    int i, rc, own, tries = 0;

    if (n <= 0)
        return 0;
    if ((pp = malloc((size_t)n * sizeof *pp)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: pushing %d jobs: out of "
                       "memory", n);
    for (i = 0; i < n; i++)
        pp[i] = &p[i];
    /* one statement (or a COPY): atomic without BEGIN/COMMIT round trips;
     * one job by st_push_one, a round trip less than the COPY */
    if ((rc = jr_pg_ready(b, err)) == 0 &&
        (rc = jr_pg_seq_defaults(b, p, n, &q, err)) >= 0 &&
        (rc = jr_pg_sealed_keyless(b, p, n, err)) == 0) {
        for (i = 0; q != NULL && i < n; i++)    /* their handlers' */
            pp[i] = &q[i];
        /* in a transaction of our own, a deadlock's victim (pushes into
         * a fair queue lock their keys' rows) is pushed again */
        own = jr_pg_idle(b);
        do
            rc = push_once(b, pp, n, ids, err);
        while (rc < 0 && jr_pg_retry(b, own, &tries));
        if (rc < 0)
            jr_pg_explain_push_error(b, pp, n, err);
    }
    jr_seq_apply_free(q, n);
    free(pp);
    return rc;
}
