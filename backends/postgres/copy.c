/* copy.c - a push by binary COPY: a batch of plain jobs due now, whose ids
 * are not asked, streams into jobs in one transaction; a batch that needs
 * limit_key_of, or goes into a fair queue, goes back to push.c's insert.
 * Uses arrays.h, conn.c. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"
#include "base/keyring.h"

/* A batch whose jobs are plain (no unique key), due now (no run_at or
 * run_in) and whose ids are not asked goes in by COPY: no unnest, and the
 * heap takes its rows a page at a time (docs/performance.md, "Batch
 * push"). The table's CHECKs, its statement triggers (NOTIFY, queues)
 * and defaults apply as to any insert. One simple query lists the names
 * with a limit path and the fair queues and starts the COPY, in one
 * transaction; if a job of the batch needs limit_key_of or goes into a
 * fair queue (its tag given in the insert, not by the trigger's UPDATE: a
 * second version of each row), the COPY ends with no rows (an error
 * would be logged by the server) and the batch goes by jr_pg_insert_jobs,
 * as do the next COPY_SKIP. One job goes by st_push_one, a round trip
 * less. */
#define COPY_PATHS 200          /* st_copy_paths' LIMIT: more, INSERT */
#define COPY_SKIP 100           /* batches by INSERT after a path hit */
/* The list, prepared once and run by EXECUTE in COPY_SQL's simple query
 * (parsing and planning it each batch was about 1% of a batch of 1000). */
static const pg_stmt st_copy_paths = {"jr_copy_paths", 0,
    "SELECT 'n' || name FROM {{schema}}.limit_paths"
    " UNION ALL SELECT 'q' || queue FROM {{schema}}.fair_paths"
    " UNION ALL SELECT 'f' || name FROM {{schema}}.fair_names"
    "  WHERE weights IS NOT NULL LIMIT 200"};
#define COPY_SQL \
    "EXECUTE jr_copy_paths;" \
    " COPY {{schema}}.jobs (name, payload, queue, priority, max_retries," \
    " limit_key, sealed) FROM STDIN (FORMAT binary)"

static int
copy_eligible(const jr_push *const *pp, int n, const int64_t *ids)
{
    int i;

    if (ids != NULL)
        return 0;
    for (i = 0; i < n; i++)
        if (pp[i]->unique_key != NULL || pp[i]->run_at != 0 ||
            pp[i]->run_in != 0)
            return 0;
    return 1;
}

/* Appends the COPY binary header, or one row of pp, or the trailer. */
static void
copy_header(jr_buf *d)
{
    static const char sig[11] = "PGCOPY\n\377\r\n";

    jr_buf_put(d, sig, sizeof sig);
    ba_u32(d, 0);                           /* flags */
    ba_u32(d, 0);                           /* header extension */
}

static void
copy_row(jr_buf *d, const jr_push *p)
{
    static const unsigned char fields[2] = {0, 7};
    const char *payload = p->payload ? p->payload : "{}";
    size_t n = strlen(payload);
    char stub[JR_SEAL_STUB_MAX];
    jr_buf raw = {0};
    int sealed = strncmp(payload, "{\"$jr_enc\"", 10) == 0 &&
                 jr_seal_split(payload, n, stub, &raw) > 0;

    if (sealed) {               /* stored as its stub and bytes */
        payload = stub;
        n = strlen(stub);
    }

    jr_buf_put(d, fields, 2);
    ba_text(d, p->name);
    ba_u32(d, (uint32_t)n + 1);             /* jsonb: version 1, text */
    jr_buf_put(d, "\1", 1);
    jr_buf_put(d, payload, n);
    ba_text(d, p->queue ? p->queue : "default");
    ba_int(d, p->priority);
    if (p->max_retries < 0)
        ba_null(d);
    else
        ba_int(d, p->max_retries);
    ba_text(d, p->key);
    if (sealed) {
        ba_u32(d, (uint32_t)raw.len);
        jr_buf_put(d, raw.p, raw.len);
    } else {
        ba_null(d);
    }
    jr_buf_free(&raw);
}

/* What a job of pp needs that a COPY does not give, from paths (COPY_SQL's
 * first result: 'n' and a name with a limit path, 'q' and a fair queue,
 * 'f' and a name whose weights make its queue fair): NEED_KEY if one
 * without a key has a name with a limit path (limit_key_of would give it
 * one), NEED_FAIR if one goes into a fair queue (st_push_fair tags it),
 * both if paths may not list them all; 0 for none. */
#define NEED_KEY  1
#define NEED_FAIR 2

static int
copy_needs(const PGresult *paths, const jr_push *const *pp, int n)
{
    int i, k, np = PQntuples(paths), need = 0;

    if (np >= COPY_PATHS)
        return NEED_KEY | NEED_FAIR;
    for (i = 0; np > 0 && i < n; i++) {
        const char *q = pp[i]->queue ? pp[i]->queue : "default";
        for (k = 0; k < np; k++) {
            const char *v = PQgetvalue(paths, k, 0);
            if (v[0] == 'n' && pp[i]->key == NULL &&
                strcmp(pp[i]->name, v + 1) == 0)
                need |= NEED_KEY;
            else if ((v[0] == 'q' && strcmp(q, v + 1) == 0) ||
                     (v[0] == 'f' && strcmp(pp[i]->name, v + 1) == 0))
                need |= NEED_FAIR;
        }
    }
    return need;
}

/* Reads the results of the query COPY_SQL until the COPY starts; *paths
 * gets the SELECT's (caller PQclears). -1 with err set on failure. */
static int
copy_start(jr_backend *b, PGresult **paths, const char *what, jr_err *err)
{
    PGresult *res;
    int rc = 0;

    *paths = NULL;
    while ((res = PQgetResult(b->conn)) != NULL) {
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_COPY_IN) {
            PQclear(res);
            return rc;
        }
        if (st == PGRES_TUPLES_OK && *paths == NULL && rc == 0) {
            *paths = res;
            continue;
        }
        if (rc == 0)
            rc = jr_pg_fail(b, res, what, err);
        PQclear(res);
    }
    return rc < 0 ? rc : jr_fail(err, JR_EDB, "postgres: %s: the COPY did "
                                 "not start", what);
}

/* Sends the COPY's data (len bytes at data) and ends it; reads its
 * result: 0 if n rows went in, else -1 with err set. */
static int
copy_end(jr_backend *b, const char *data, size_t len, int n,
         const char *what, jr_err *err)
{
    PGresult *res;
    int rc = 0;

    if (PQputCopyData(b->conn, data, (int)len) != 1 ||
        PQputCopyEnd(b->conn, NULL) != 1)
        rc = jr_pg_fail(b, NULL, what, err);
    while ((res = PQgetResult(b->conn)) != NULL) {
        if (rc == 0) {
            if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                b->insert_failed = 1;
                rc = jr_pg_fail(b, res, what, err);
            } else if (atoi(PQcmdTuples(res)) != n) {
                rc = jr_fail(err, JR_EDB, "postgres: %s: %s rows went in",
                             what, PQcmdTuples(res));
            }
        }
        PQclear(res);
    }
    return rc;
}

/* Pushes pp[0..n) by COPY if it can: 0 done, 1 not done (push it by
 * jr_pg_insert_jobs; nothing was written), -1 with err set. */
int
jr_pg_push_copy(jr_backend *b, const jr_push *const *pp, int n,
             const int64_t *ids, jr_err *err)
{
    PGresult *paths = NULL;
    jr_buf d = {0};
    char what[64], *sql;
    int i, rc, need, sent;

    b->insert_failed = 0;
    if (!copy_eligible(pp, n, ids))
        return 1;
    if (b->copy_skip > 0) {
        b->copy_skip--;
        return 1;
    }
    for (i = 0; i < n; i++)
        if (jr_push_check(pp[i], b->max_payload, err) < 0)
            return -1;
    if (jr_pg_prepare(b, &st_copy_paths, "pushing jobs", err) < 0)
        return -1;
    if ((sql = jr_pg_expand(b, COPY_SQL)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: pushing %d jobs: out of "
                       "memory", n);
    snprintf(what, sizeof what, "pushing %d job%s", n, n == 1 ? "" : "s");
    sent = PQsendQuery(b->conn, sql) == 1;
    free(sql);
    /* the rows are made while the server lists the paths and starts the
     * COPY (a batch of 1000: about 0.1 ms of ours, off its wait) */
    copy_header(&d);
    for (i = 0; sent && i < n; i++)
        copy_row(&d, pp[i]);
    jr_buf_put(&d, "\377\377", 2);          /* trailer: field count -1 */
    rc = sent ? copy_start(b, &paths, what, err) :
         jr_pg_fail(b, NULL, what, err);
    need = rc == 0 && paths != NULL ? copy_needs(paths, pp, n) : 0;
    if (rc == 0 && paths != NULL)
        jr_pg_push_fair_set(b, (need & NEED_FAIR) != 0);
    if (rc == 0 && (need != 0 || d.oom || d.len > INT32_MAX)) {
        static const char none[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0"
                                   "\377\377";
        if (need != 0)
            b->copy_skip = COPY_SKIP;
        rc = copy_end(b, none, sizeof none - 1, 0, what, err);
        rc = rc < 0 ? rc : need != 0 ? 1 :
             jr_fail(err, JR_ENOMEM, "postgres: %s: out of memory", what);
    } else if (rc == 0) {
        rc = copy_end(b, d.p, d.len, n, what, err);
    }
    PQclear(paths);
    free(d.p);
    for (i = 0; rc == 0 && i < n; i++)
        if (pp[i]->outcome != NULL)
            *pp[i]->outcome = JR_PUSH_NEW;
    return rc;
}
