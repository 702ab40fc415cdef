/* conn.c - the PostgreSQL engine's connection: open and close, the
 * session's settings and its own timeouts, the reconnect that the next call
 * makes (jr_pg_ready), the prepared-statement cache (jr_pg_run_params prepares a
 * pg_stmt once per connection) and the helpers that run statements and
 * report their failures. Owns struct jr_backend's life. Uses pg_int.h. */

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"

static void
quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;              /* notices ("already exists, skipping") */
}

/* Copies src into dst on one line: runs of white space (libpq's messages
 * span lines) become one space; no trailing space. */
void
jr_pg_oneline(char *dst, size_t size, const char *src)
{
    size_t n = 0;

    if (size == 0)
        return;
    for (; src != NULL && *src && n + 1 < size; src++) {
        if (isspace((unsigned char)*src)) {
            if (n > 0 && dst[n - 1] != ' ')
                dst[n++] = ' ';
        } else {
            dst[n++] = *src;
        }
    }
    while (n > 0 && dst[n - 1] == ' ')
        n--;
    dst[n] = '\0';
}

/* Returns a new string: tmpl[0..len) with every {{schema}} replaced by the
 * quoted schema; NULL when out of memory. */
char *
jr_pg_expand_n(const jr_backend *b, const char *tmpl, size_t len)
{
    static const char mark[] = "{{schema}}";
    const char *end = tmpl + len, *p;
    jr_buf s = {0};

    while ((p = strstr(tmpl, mark)) != NULL && p < end) {
        jr_buf_put(&s, tmpl, (size_t)(p - tmpl));
        sb_adds(&s, b->qschema);
        tmpl = p + strlen(mark);
    }
    jr_buf_put(&s, tmpl, (size_t)(end - tmpl));
    jr_buf_put(&s, "", 1);
    if (s.oom) {
        free(s.p);
        return NULL;
    }
    return s.p;
}

/* jr_pg_expand_n over all of tmpl. */
char *
jr_pg_expand(const jr_backend *b, const char *tmpl)
{
    return jr_pg_expand_n(b, tmpl, strlen(tmpl));
}

/* Fills err for a failed statement (res may be NULL): what failed, then
 * "connection lost" if so, then the server's message and detail. */
int
jr_pg_fail(jr_backend *b, const PGresult *res, const char *what, jr_err *err)
{
    const char *primary = NULL, *detail = NULL, *state = NULL;
    char msg[400], det[300], tag[24] = "";

    if (res != NULL) {
        primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
        state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    }
    snprintf(b->sqlstate, sizeof b->sqlstate, "%s", state ? state : "");
    jr_pg_oneline(msg, sizeof msg, primary ? primary : PQerrorMessage(b->conn));
    jr_pg_oneline(det, sizeof det, detail);
    /* class 57 (operator intervention): a statement_timeout or a cancel
     * (57014), a shutdown; the code tells them apart in a log */
    if (strncmp(b->sqlstate, "57", 2) == 0)
        snprintf(tag, sizeof tag, " [SQLSTATE %s]", b->sqlstate);
    snprintf(b->pgmsg, sizeof b->pgmsg, "%.250s%s%.120s%s%s", msg,
             *det ? " (" : "", det, *det ? ")" : "", tag);
    /* handlers' statements may have changed the session for good (a
     * DEALLOCATE, set_config(..., false) of role or read-only): a new one
     * after such a failure, which is no input's */
    if (b->sql_ran && strncmp(b->sqlstate, "22", 2) != 0 &&
        strncmp(b->sqlstate, "23", 2) != 0)
        b->renew = 1;
    if (PQstatus(b->conn) != CONNECTION_OK)
        return jr_fail(err, JR_EDB, "postgres: %s: connection to '%s' lost "
                       "(%s); will reconnect on the next call", what,
                       b->masked, b->pgmsg);
    /* class 22 (data exception) and 23 (integrity constraint): the rows
     * were refused and would be again; the rest (08 connection, 53
     * resources, 57 operator intervention...) is the database's trouble */
    return jr_fail(err, strncmp(b->sqlstate, "22", 2) == 0 ||
                   strncmp(b->sqlstate, "23", 2) == 0 ? JR_EINPUT : JR_EDB,
                   "postgres: %s: %s", what, b->pgmsg);
}

/* Runs sql (no parameters) and checks it worked. */
int
jr_pg_run_plain(jr_backend *b, const char *sql, const char *what, jr_err *err)
{
    PGresult *res = PQexec(b->conn, sql);
    ExecStatusType st = PQresultStatus(res);
    int rc = 0;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = jr_pg_fail(b, res, what, err);
    PQclear(res);
    return rc;
}

/* Ends any transaction left open, if the connection is up. */
void
jr_pg_rollback(jr_backend *b)
{
    if (PQstatus(b->conn) == CONNECTION_OK &&
        PQtransactionStatus(b->conn) != PQTRANS_IDLE)
        PQclear(PQexec(b->conn, "ROLLBACK"));
}

/* Whether what just failed in a transaction of ours (own: none was open
 * before it; the failure rolled it back) was the server's deadlock
 * victim or a serialization failure (SQLSTATE 40P01, 40001), which the
 * same statements run again may pass: the other transaction went on.
 * Counts *tries; JR_PG_RETRIES at most. */
int
jr_pg_retry(jr_backend *b, int own, int *tries)
{
    if (!own || *tries >= JR_PG_RETRIES || b->conn == NULL ||
        PQstatus(b->conn) != CONNECTION_OK ||
        PQtransactionStatus(b->conn) != PQTRANS_IDLE ||
        (strcmp(b->sqlstate, "40P01") != 0 &&
         strcmp(b->sqlstate, "40001") != 0))
        return 0;
    ++*tries;
    return 1;
}

/* Whether no transaction is open on b (a caller's own, around ours). */
int
jr_pg_idle(jr_backend *b)
{
    return b->conn != NULL && PQstatus(b->conn) == CONNECTION_OK &&
           PQtransactionStatus(b->conn) == PQTRANS_IDLE;
}

/* The session's settings, on a new connection and after a reconnect. No
 * JIT: with a deep backlog the planner's row estimates pass
 * jit_above_cost and every claim compiled for a second (1M jobs: 300
 * jobs/s); our statements are short and gain nothing from it. With
 * async_commit (the runner's own connection: claims, results, renewals)
 * a commit does not wait for its WAL flush: a crash can only undo the
 * last few of them, and an undone claim or result makes its job run
 * again, which at-least-once allows; the flush is a third of an idle
 * claim's round (docs/performance.md). A connection that claims plans
 * no sequential or bitmap scan: every statement it runs walks an index
 * in order by design, and on the statistics of a table analyzed empty
 * (after a drain) the planner priced a claim's sequential scan, or its
 * bitmap scan, and a sort at one row: a plan that then read every queued
 * job at every claim of a backlog filled since. */
static void
session_setup(const jr_backend *b, PGconn *conn)
{
    char sql[128];

    snprintf(sql, sizeof sql, "SET jit = off%s%s",
             b->async_commit ? "; SET synchronous_commit = off" : "",
             b->claims ? "; SET enable_seqscan = off;"
                         " SET enable_bitmapscan = off" : "");
    PQclear(PQexec(conn, sql));
}

/* The runner's connections (own_timeouts) set their own timeouts, first
 * thing: a statement_timeout, lock_timeout or idle timeout set on the role
 * or the database is meant for the application's sessions, and inherited
 * it cancelled the runner's claims, or closed its idle connections, and
 * kept doing so after it was reset (a session keeps what it started
 * with). None (0) for each: the runner's statements are short by design,
 * the waits it makes are meant (the migration lock, a row a producer's
 * transaction holds), a vacuum or a migration may take minutes, and its
 * connections idle between rounds and LISTEN for wake-ups (docs/storage.md,
 * "PostgreSQL"). This runs under the role's timeouts: if it fails, the
 * error says why and the next call tries again. */
static int
session_timeouts(const jr_backend *b, PGconn *conn, jr_err *err)
{
    char sql[192], msg[300];
    const char *state, *primary;
    PGresult *res;

    if (!b->own_timeouts)
        return 0;
    snprintf(sql, sizeof sql, "SET statement_timeout = 0; SET lock_timeout "
             "= 0; SET idle_in_transaction_session_timeout = 0%s%s",
             PQserverVersion(conn) >= 140000 ?
             "; SET idle_session_timeout = 0" : "",
             PQserverVersion(conn) >= 170000 ?
             "; SET transaction_timeout = 0" : "");
    res = PQexec(conn, sql);
    if (PQresultStatus(res) == PGRES_COMMAND_OK) {
        PQclear(res);
        return 0;
    }
    state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    jr_pg_oneline(msg, sizeof msg, primary ? primary : PQerrorMessage(conn));
    jr_fail(err, JR_EDB, "postgres: setting the session's own timeouts "
            "(statement_timeout, lock_timeout, idle timeouts: 0) on '%s' "
            "failed: %s [SQLSTATE %s]; tried again at the next call",
            b->masked, msg, state ? state : "none");
    PQclear(res);
    return -1;
}

/* No handler's statement runs on b from now on, and a cancel request for
 * the pipeline of them conn runs, if one is out: its backend's key is
 * read while the other thread waits on conn in the pipeline, which it
 * does not change then (in_sql is set before the pipeline is sent and
 * cleared before conn may be reset). */
void
jr_pg_interrupt(jr_backend *b)
{
    char buf[256];
    PGcancel *c;

    atomic_store(&b->cut, 1);
    if (!atomic_load(&b->in_sql) || (c = PQgetCancel(b->conn)) == NULL)
        return;
    PQcancel(c, buf, sizeof buf);
    PQfreeCancel(c);
}

/* Called first by every op: reconnects once if the connection went bad,
 * ends any transaction a failure left open, and sets the session up if
 * that has not worked yet. */
int
jr_pg_ready(jr_backend *b, jr_err *err)
{
    if (b->renew || PQstatus(b->conn) != CONNECTION_OK) {
        PQreset(b->conn);
        jr_stmtmap_clear(&b->prepared);
        b->set_up = 0;
        b->renew = 0;
        b->sql_ran = 0;
        if (PQstatus(b->conn) == CONNECTION_OK)
            b->reconnects++;
        if (PQstatus(b->conn) != CONNECTION_OK) {
            char msg[300];
            jr_pg_oneline(msg, sizeof msg, PQerrorMessage(b->conn));
            return jr_fail(err, JR_EDB, "postgres: connection to '%s' lost "
                           "and reconnecting failed: %s", b->masked, msg);
        }
    }
    jr_pg_rollback(b);
    if (!b->set_up) {
        if (session_timeouts(b, b->conn, err) < 0)
            return -1;
        session_setup(b, b->conn);
        b->set_up = 1;
    }
    return 0;
}

/* Prepares statement st on this connection if it has not been; -1 with
 * err set on failure. */
int
jr_pg_prepare(jr_backend *b, const pg_stmt *st, const char *what,
              jr_err *err)
{
    PGresult *res;
    char *sql;

    if (jr_stmtmap_get(&b->prepared, st) != NULL)
        return 0;
    sql = jr_stmtmap_room(&b->prepared) < 0 ? NULL : jr_pg_expand(b, st->sql);
    if (sql == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: %s: out of memory", what);
    res = PQprepare(b->conn, st->name, sql, st->nparams, NULL);
    free(sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        jr_pg_fail(b, res, what, err);
        PQclear(res);
        return -1;
    }
    PQclear(res);
    jr_stmtmap_put(&b->prepared, st, b->conn);     /* has room */
    return 0;
}

/* Runs statement st with params, preparing it first if this connection has
 * not; lens NULL: params are text, else all binary, of those lengths.
 * Returns its result (caller PQclears) or NULL with err set. */
PGresult *
jr_pg_run_params(jr_backend *b, const pg_stmt *st, const char *const *params,
              const int *lens, const char *what, jr_err *err)
{
    static const int binary[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1};
    PGresult *res;
    ExecStatusType rs;

    if (jr_pg_prepare(b, st, what, err) < 0)
        return NULL;
    assert(lens == NULL || st->nparams <= 16);
    res = PQexecPrepared(b->conn, st->name, st->nparams, params,
                         lens, lens != NULL ? binary : NULL, 0);
    rs = PQresultStatus(res);
    if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
        jr_pg_fail(b, res, what, err);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* jr_pg_run_params with text parameters. */
PGresult *
jr_pg_run(jr_backend *b, const pg_stmt *st, const char *const *params,
       const char *what, jr_err *err)
{
    return jr_pg_run_params(b, st, params, NULL, what, err);
}

/* Runs a statement for its row count; -1 with err set on failure. */
int
jr_pg_run_count(jr_backend *b, const pg_stmt *st, const char *const *params,
             const char *what, jr_err *err)
{
    PGresult *res = jr_pg_run(b, st, params, what, err);
    int n;

    if (res == NULL)
        return -1;
    n = atoi(PQcmdTuples(res));
    PQclear(res);
    return n;
}

static int
schema_check(const char *s, jr_err *err)
{
    size_t n;

    for (n = 0; s[n]; n++) {
        unsigned char c = (unsigned char)s[n];
        if (!(c == '_' || (c >= 'a' && c <= 'z') ||
              (n > 0 && c >= '0' && c <= '9')))
            break;
    }
    if (n == 0 || s[n] != '\0' || n > 63)
        return jr_fail(err, JR_EINPUT, "invalid PostgreSQL schema name "
                       "'%.80s': must match ^[a-z_][a-z0-9_]{0,62}$", s);
    if (strncmp(s, "pg_", 3) == 0)
        return jr_fail(err, JR_EINPUT, "invalid PostgreSQL schema name "
                       "'%s': the prefix pg_ is reserved for system "
                       "schemas", s);
    if (strcmp(s, "information_schema") == 0)
        return jr_fail(err, JR_EINPUT, "invalid PostgreSQL schema name "
                       "'%s': a system schema (the SQL standard's views)",
                       s);
    return 0;
}

/* Opens a connection to b->url; NULL with err set on failure. */
PGconn *
jr_pg_connect(jr_backend *b, jr_err *err)
{
    static const char *const keys[] = {"dbname", "fallback_application_name",
                                       NULL};
    const char *vals[] = {b->url, "jobrunner", NULL};
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    char msg[300];

    if (conn == NULL) {
        jr_fail(err, JR_ENOMEM, "cannot connect to PostgreSQL at '%s': out "
                "of memory", b->masked);
        return NULL;
    }
    PQsetNoticeProcessor(conn, quiet, NULL);
    if (PQstatus(conn) != CONNECTION_OK) {
        jr_pg_oneline(msg, sizeof msg, PQerrorMessage(conn));
        jr_fail(err, JR_EDB, "cannot connect to PostgreSQL at '%s': %s",
                b->masked, msg);
        PQfinish(conn);
        return NULL;
    }
    if (session_timeouts(b, conn, err) < 0) {
        PQfinish(conn);
        return NULL;
    }
    session_setup(b, conn);
    return conn;
}

void
jr_pg_close(jr_backend *b)
{
    if (b == NULL)
        return;
    PQclear(b->lim_top);
    PQclear(b->seqp);
    PQfinish(b->listen);
    PQfinish(b->finished);
    PQfinish(b->conn);
    jr_pg_sql_forget(b);
    free(b->url);
    jr_stmtmap_free(&b->prepared);
    free(b);
}

jr_backend *
jr_pg_open(const char *url, const jr_backend_opts *o, jr_err *err)
{
    const char *schema = o && o->schema ? o->schema : "jobrunner";
    jr_backend *b;

    if (schema_check(schema, err) < 0)
        return NULL;
    if ((b = calloc(1, sizeof *b)) == NULL ||
        (b->url = strdup(url)) == NULL) {
        free(b);
        jr_fail(err, JR_ENOMEM, "cannot open PostgreSQL: out of memory");
        return NULL;
    }
    if (jr_url_mask(url, b->masked, sizeof b->masked) < 0) {
        /* never handed to libpq, whose errors would quote pieces of it */
        jr_fail(err, JR_EUSAGE, "cannot connect to PostgreSQL: %s",
                b->masked);
        jr_pg_close(b);
        return NULL;
    }
    snprintf(b->schema, sizeof b->schema, "%s", schema);
    snprintf(b->qschema, sizeof b->qschema, "\"%s\"", schema);
    snprintf(b->channel, sizeof b->channel, "%s_jobs", schema);
    b->channel[63] = '\0';     /* left(schema || '_jobs', 63) in SQL */
    b->max_payload = o ? o->max_payload : 0;
    b->must_exist = o ? o->must_exist : 0;
    b->async_commit = o ? o->async_commit : 0;
    b->claims = o ? o->claims : 0;
    b->own_timeouts = o ? o->own_timeouts : 0;
    b->keep_completed = o ? o->keep_completed : 0;
    b->opf = o ? o->on_parent_failure : 0;
    b->result_ttl = o && o->result_ttl > 0 ? o->result_ttl : 3600;
    if (jr_pg_role_set(b, o ? o->handler_role : NULL, err) < 0) {
        jr_pg_close(b);
        return NULL;
    }
    if ((b->conn = jr_pg_connect(b, err)) == NULL) {
        jr_pg_close(b);
        return NULL;
    }
    b->set_up = 1;
    return b;
}

unsigned
jr_pg_reconnects(jr_backend *b)
{
    return b->reconnects;
}
