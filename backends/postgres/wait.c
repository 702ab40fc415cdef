/* wait.c - waiting for outcomes: the mark that keeps a waited-on job
 * completed after success (its result_ttl), where each job stands (state,
 * result, error) and the highest id ever given, and the wake-ups: a
 * connection of its own LISTENs on "<schema>_finished", whose payloads
 * ("<id> <state>", schema.sql's jobs_notify_finished) say which job
 * ended. Owns their statements. Uses conn.c, arrays.h. */

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"

/* its own statement, committed before the read: a success that raced
 * with it either deleted the row first (the read sees it gone) or finds
 * the mark and keeps the row, which notifies */
static const pg_stmt st_watch = {"jr_watch", 2,
    "UPDATE {{schema}}.jobs SET result_ttl = $2::float8"
    " WHERE id = ANY($1::bigint[])"
    " AND state NOT IN ('completed', 'dead', 'cancelled', 'expired')"
    " AND result_ttl IS NULL"};

/* one row per id asked, in the order asked (row r is the r-th id), with
 * the highest id given, read once. A job whose row is gone may have left
 * its success behind: as a batch's member, or as a parent for its
 * children (written by the transaction that recorded it; a dead end
 * there may have been retried since, a success is final) */
static const pg_stmt st_outcomes = {"jr_outcomes", 1,
    "SELECT u.id, coalesce(j.state, m.state,"
    "  (SELECT d.parent_state FROM {{schema}}.job_deps d"
    "   WHERE d.parent_id = u.id AND d.parent_state = 'completed' LIMIT 1)),"
    " CASE WHEN j.id IS NOT NULL THEN j.result::text"
    "  WHEN m.state = 'completed' THEN m.result::text"
    "  ELSE (SELECT d.parent_result::text FROM {{schema}}.job_deps d"
    "   WHERE d.parent_id = u.id AND d.parent_state = 'completed' LIMIT 1)"
    " END, j.last_error,"
    " (SELECT coalesce(pg_sequence_last_value("
    "  pg_get_serial_sequence('{{schema}}.jobs', 'id')), 0))"
    " FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, n)"
    " LEFT JOIN {{schema}}.jobs j ON j.id = u.id"
    " LEFT JOIN {{schema}}.batch_jobs m ON j.id IS NULL AND m.job_id = u.id"
    "  AND m.state = 'completed' ORDER BY u.n"};

static char *
dup_val(const PGresult *res, int r, int c, int *oom)
{
    char *d;

    if (PQgetisnull(res, r, c))
        return NULL;
    *oom |= (d = strdup(PQgetvalue(res, r, c))) == NULL;
    return d;
}

/* Fills out[0..n) from st_outcomes' rows, row r for out[r]. */
static int
fill(const PGresult *res, int n, jr_outcome *out, int64_t *last)
{
    int r, oom = 0;

    if (PQntuples(res) != n)
        return -2;
    for (r = 0; r < n; r++) {
        *last = strtoll(PQgetvalue(res, r, 4), NULL, 10);
        if (PQgetisnull(res, r, 1))
            continue;
        out[r].state = jr_state_parse(PQgetvalue(res, r, 1));
        out[r].result = dup_val(res, r, 2, &oom);
        out[r].error = dup_val(res, r, 3, &oom);
    }
    return oom ? -1 : 0;
}

int
jr_pg_outcomes(jr_backend *b, const int64_t *ids, int n, double keep,
            jr_outcome *out, int64_t *last, jr_err *err)
{
    char num[32];
    const char *params[2] = {NULL, num};
    jr_buf s = {0};
    PGresult *res = NULL;
    int i, rc = -1;

    *last = 0;
    for (i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].id = ids[i];
        out[i].state = -1;
        snprintf(num, sizeof num, "%lld", (long long)ids[i]);
        sb_num(&s, num);
    }
    if (n <= 0)
        return 0;
    params[0] = sb_array(&s);
    snprintf(num, sizeof num, "%.17g", keep);
    if (s.oom)
        jr_fail(err, JR_ENOMEM, "postgres: reading outcomes: out of memory");
    else if (jr_pg_ready(b, err) == 0 &&
             (keep <= 0 || jr_pg_run_count(b, &st_watch, params,
                                        "marking waited-on jobs", err) >= 0) &&
             (res = jr_pg_run(b, &st_outcomes, params, "reading outcomes",
                           err)) != NULL)
        rc = fill(res, n, out, last);
    if (res != NULL && rc < 0) {
        if (rc == -2)
            jr_fail(err, JR_EDB, "postgres: reading outcomes: %d rows for "
                    "%d ids", PQntuples(res), n);
        else
            jr_fail(err, JR_ENOMEM, "postgres: reading outcomes: out of "
                    "memory");
        rc = -1;
        for (i = 0; i < n; i++) {
            free(out[i].result);
            free(out[i].error);
            out[i].result = out[i].error = NULL;
        }
    }
    PQclear(res);
    free(s.p);
    return rc;
}

/* Opens the finished connection if there is none. */
static int
finished_open(jr_backend *b, jr_err *err)
{
    char sql[96], chan[80], msg[300];
    PGresult *res;

    if (b->finished != NULL)
        return 0;
    if ((b->finished = jr_pg_connect(b, err)) == NULL)
        return -1;
    snprintf(chan, sizeof chan, "%s_finished", b->schema);
    chan[63] = '\0';            /* left(schema || '_finished', 63) */
    snprintf(sql, sizeof sql, "LISTEN \"%s\"", chan);
    res = PQexec(b->finished, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        jr_pg_oneline(msg, sizeof msg, PQresultErrorMessage(res));
        PQclear(res);
        PQfinish(b->finished);
        b->finished = NULL;
        return jr_fail(err, JR_EDB, "postgres: LISTEN on '%s' failed: %s",
                       chan, msg);
    }
    PQclear(res);
    return 0;
}

int
jr_pg_finished_fd(jr_backend *b)
{
    if (b->finished == NULL && finished_open(b, NULL) < 0)
        return -1;
    return PQsocket(b->finished);
}

int
jr_pg_finished(jr_backend *b, int64_t *ids, int max, jr_err *err)
{
    struct pollfd p;
    PGnotify *note;
    char msg[300];
    int n = 0;

    if (b->finished == NULL)    /* first call, or after a loss */
        return finished_open(b, err) < 0 ? -1 : JR_FINISHED_SOME;
    p.fd = PQsocket(b->finished);
    p.events = POLLIN;
    do {
        if (!PQconsumeInput(b->finished) ||
            PQstatus(b->finished) != CONNECTION_OK) {
            jr_pg_oneline(msg, sizeof msg, PQerrorMessage(b->finished));
            PQfinish(b->finished);
            b->finished = NULL;
            return jr_fail(err, JR_EDB, "postgres: LISTEN connection to "
                           "'%s' lost (%s)", b->masked, msg);
        }
    } while (poll(&p, 1, 0) == 1 && !(p.revents & (POLLHUP | POLLERR)));
    while ((note = PQnotifies(b->finished)) != NULL) {
        if (n >= 0 && n < max)
            ids[n++] = strtoll(note->extra, NULL, 10);
        else
            n = JR_FINISHED_SOME;
        PQfreemem(note);
    }
    return n;
}
