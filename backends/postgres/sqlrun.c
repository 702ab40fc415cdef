/* sqlrun.c - a job's jobrunner.sql statements (job.h's jr_result.sql),
 * run on the runner's connection in the transaction recording its
 * success, under SET LOCAL ROLE to the config's handler_role when one is
 * set, all of a batch in one pipeline (libpq's pipeline mode: one round
 * trip). First all of them in one savepoint; when a statement fails,
 * that is rolled back and they run again with a savepoint a job, so
 * that a failing statement rolls back its job's statements only and its
 * success becomes a failed attempt with the server's message and
 * SQLSTATE (sqlres.h).
 * Uses pg_int.h, arrays.h, sqlstmt.h, sqlres.h. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "postgres/arrays.h"
#include "base/sqlstmt.h"
#include "sqlres.h"

/* the jobs of the batch with statements that are still this runner's,
 * locked until the commit: no rescue takes one between its statements
 * and its end */
static const pg_stmt st_ours = {"jr_sql_ours", 2,
    "SELECT id FROM {{schema}}.jobs WHERE id = ANY($2::bigint[])"
    " AND state = 'running' AND locked_by = $1::text"
    " ORDER BY id FOR UPDATE"};

int
jr_pg_role_set(jr_backend *b, const char *role, jr_err *err)
{
    char q[140], *p = q;
    const char *s;

    b->role_sql[0] = '\0';
    if (role == NULL)
        return 0;
    if (*role == '\0' || strlen(role) > 63)
        return jr_fail(err, JR_EUSAGE, "postgres: handler_role '%s' must be "
                       "1 to 63 bytes", role);
    *p++ = '"';
    for (s = role; *s; s++) {
        if (*s == '"')
            *p++ = '"';
        *p++ = *s;
    }
    *p++ = '"';
    *p = '\0';
    snprintf(b->role_sql, sizeof b->role_sql, "SET LOCAL ROLE %s", q);
    return 0;
}

/* The ids of the successes of r[0..n) with statements that are ours,
 * sorted, into ids (n slots); how many, or -1. */
static int
ours(jr_backend *b, const char *token, const jr_result *r, int n,
     int64_t *ids, jr_err *err)
{
    const char *params[2] = {token, NULL};
    jr_buf a = {0};
    char num[24];
    PGresult *res;
    int i, m;

    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_DONE || r[i].nsql <= 0)
            continue;
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&a, num);
    }
    params[1] = sb_array(&a);
    if (a.oom) {
        free(a.p);
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    }
    res = jr_pg_run(b, &st_ours, params, "locking jobs with statements",
                    err);
    free(a.p);
    if (res == NULL)
        return -1;
    m = PQntuples(res);
    for (i = 0; i < m && i < n; i++)
        ids[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    PQclear(res);
    return i;
}

/* One parameter as text (into buf, 32 bytes, or borrowed from v), NULL
 * for NULL. */
static const char *
param_text(const jr_sqlval *v, char *buf, size_t size)
{
    switch (v->type) {
    case JR_SQLV_INT:
        buf[jr_put_int64(buf, v->i)] = '\0';
        return buf;
    case JR_SQLV_FLOAT:
        snprintf(buf, size, "%.17g", v->f);
        return buf;
    case JR_SQLV_BOOL:
        return v->i ? "true" : "false";
    case JR_SQLV_TEXT:
        return v->s;
    default:
        return NULL;
    }
}

/* The server's message of res, with its detail and SQLSTATE, in why. */
static void
describe(const PGresult *res, const PGconn *c, char *why, size_t size)
{
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    char msg[300], det[200];

    jr_pg_oneline(msg, sizeof msg, primary ? primary : PQerrorMessage(c));
    jr_pg_oneline(det, sizeof det, detail);
    snprintf(why, size, "%.250s%s%.180s%s (SQLSTATE %.5s)", msg,
             *det ? " (" : "", det, *det ? ")" : "", state ? state : "?");
}

/* Which job of the pipeline, and which of its statements, its i-th
 * command is. */
typedef struct cmd {
    int job;                    /* index into the pipeline's jobs */
    int stmt;                   /* 1, 2, ...; 0: a savepoint's or role's */
    int slot;                   /* a Parse of sqlc[slot]; -1: not one */
    uint64_t refuse;            /* a rows check (sqlrows.c): the hash of
                                   the text it refuses when it fails */
} cmd;

#define CHUNK 256               /* jobs a pipeline carries at most */

/* What one pipeline runs: jobs at[0..n) of r, each in a savepoint of its
 * own (each) or all in one. */
typedef struct plan {
    const jr_result *r;
    const int *at;
    int        n;
    int        each;
    int        bare;            /* no savepoint at all: the caller's */
    cmd       *c;               /* the commands sent */
    int        nc;
} plan;

/* The slot of sqlc holding st's text prepared on this connection, its
 * Parse queued now if it was not (noted as a command of p); -2 when no
 * slot can hold it (out of memory: the text goes unnamed), -1 when libpq
 * would not take the Parse. Most handlers send the same few texts: a
 * statement prepared once skips the server's parse and plan. */
static int
prepared(plan *p, jr_backend *b, const char *text, size_t len, int job,
         int stmt)
{
    jr_pg_sqlc *c;
    char *copy;
    int i;

    for (i = 0; i < JR_PG_SQL_CACHE; i++) {
        c = &b->sqlc[i];
        if (c->text != NULL && c->ready && c->conn == b->reconnects &&
            c->len == len && memcmp(c->text, text, len) == 0)
            return i;
    }
    if ((copy = malloc(len + 1)) == NULL)
        return -2;
    memcpy(copy, text, len + 1);
    i = (int)(b->sqlc_next++ % JR_PG_SQL_CACHE);
    c = &b->sqlc[i];
    if (c->text != NULL && c->ready && c->conn == b->reconnects) {
        /* the name it held goes: a Close would need libpq 17 */
        char drop[48];
        snprintf(drop, sizeof drop, "DEALLOCATE %s", c->name);
        if (PQsendQueryParams(b->conn, drop, 0, NULL, NULL, NULL, NULL,
                              0) != 1) {
            free(copy);
            return -1;
        }
        p->c[p->nc++] = (cmd){.job = job, .stmt = 0, .slot = -1};
    }
    free(c->text);
    c->text = copy;
    c->len = len;
    c->conn = b->reconnects;
    c->ready = 1;               /* unless its Parse fails (read_errors) */
    snprintf(c->name, sizeof c->name, "jr_h%u", b->sqlc_names++);
    if (PQsendPrepare(b->conn, c->name, text, 0, NULL) != 1) {
        c->ready = 0;
        return -1;
    }
    p->c[p->nc++] = (cmd){.job = job, .stmt = stmt, .slot = i};
    return i;
}

void
jr_pg_sql_forget(jr_backend *b)
{
    int i;

    for (i = 0; i < JR_PG_SQL_CACHE; i++) {
        free(b->sqlc[i].text);
        b->sqlc[i].text = NULL;
    }
}

/* Queues text with its n values, prepared once (cached) or not; 0, or
 * -1 when libpq would not take it. */
static int
send_text(plan *p, jr_backend *b, const char *text, size_t len, int cached,
          int n, const char *const *values, int job, int stmt)
{
    int slot;

    if (cached && (slot = prepared(p, b, text, len, job, stmt)) >= -1) {
        if (slot < 0 || PQsendQueryPrepared(b->conn, b->sqlc[slot].name, n,
                                            n ? values : NULL, NULL, NULL,
                                            0) != 1)
            return -1;
    } else if (PQsendQueryParams(b->conn, text, n, NULL, n ? values : NULL,
                                 NULL, NULL, 0) != 1) {
        return -1;
    }
    p->c[p->nc++] = (cmd){.job = job, .stmt = stmt, .slot = -1};
    return 0;
}

/* Queues one command (st: its text and parameters, or NULL: text); 0, or
 * -1 when libpq would not take it. */
static int
send(plan *p, jr_backend *b, const char *text, const jr_sqlstmt *st,
     int job, int stmt)
{
    char nums[JR_SQL_PARAMS_MAX][32];
    const char *values[JR_SQL_PARAMS_MAX];
    int i, n = st ? st->nparams : 0;

    for (i = 0; i < n; i++)
        values[i] = param_text(&st->params[i], nums[i], sizeof nums[i]);
    if (st == NULL)
        return send_text(p, b, text, strlen(text), 0, 0, NULL, job, stmt);
    return send_text(p, b, st->text, st->len, 1, n, values, job, stmt);
}

/* Queues a savepoint and the role (open), or the role's end and the
 * release, for job (-1: all). A role refused fails its first statement. */
static int
send_edge(plan *p, jr_backend *b, int open, int job)
{
    const char *sp = p->each ? "jr_sql" : "jr_sql_all";
    char text[40];
    int role = b->role_sql[0] != '\0';

    snprintf(text, sizeof text, "%s %s", open ? "SAVEPOINT" : "RELEASE", sp);
    if (open)
        return (!p->bare && send(p, b, text, NULL, job, 0) < 0) ||
               (role && send(p, b, b->role_sql, NULL, job, 1) < 0) ? -1 : 0;
    return (role && send(p, b, "RESET ROLE", NULL, job, 0) < 0) ||
           (!p->bare && send(p, b, text, NULL, job, 0) < 0) ? -1 : 0;
}

#define ROWS_MIN 8               /* consecutive statements of one text
                                   run as one INSERT from (sqlrows.c) */
#define ROWS_MAX 64              /* rows of one such INSERT at most */

/* One statement of a pipeline: its job, its number in that job, its
 * place in the job's encoding, its text and parameter count. */
typedef struct item {
    int         job;
    int         stmt;
    size_t      pos;
    const char *text;
    size_t      len;
    int         np;
} item;

static uint64_t
text_hash(const char *t, size_t n)
{
    uint64_t h = 1469598103934665603u;     /* FNV-1a */

    while (n-- > 0)
        h = (h ^ (unsigned char)*t++) * 1099511628211u;
    return h | 1;                           /* 0: an empty entry */
}

/* 1 when the table of the text hashed h refused its rows as one on this
 * connection. */
static int
refused(jr_backend *b, uint64_t h)
{
    size_t i;

    if (b->rows_conn != b->reconnects) {
        memset(b->rows_no, 0, sizeof b->rows_no);
        b->rows_conn = b->reconnects;
    }
    for (i = 0; i < sizeof b->rows_no / sizeof b->rows_no[0]; i++)
        if (b->rows_no[i] == h)
            return 1;
    return 0;
}

/* Queues it[0..n) (one text, shaped s, np parameters each) as INSERTs
 * of up to ROWS_MAX rows each, in order, after the check that their
 * table takes them so (a failed check refuses text hash h). */
static int
send_rows(plan *p, jr_backend *b, const item *it, int n, const jr_pg_rows *s,
          uint64_t h)
{
    char name[256], (*nums)[32], *text;
    const char **values, *v[1] = {name};
    const jr_result *r;
    jr_sqlstmt st;
    size_t pos;
    int done = 0, m, i, k, np = it[0].np, rc = -1;

    snprintf(name, sizeof name, "%.*s", (int)s->name_len, s->name);
    if (send_text(p, b, jr_pg_rows_check, strlen(jr_pg_rows_check), 1, 1, v,
                  it[0].job, it[0].stmt) < 0)
        return -1;
    p->c[p->nc - 1].refuse = h;
    values = malloc((size_t)(ROWS_MAX * np + 1) * sizeof *values);
    nums = malloc((size_t)(ROWS_MAX * np + 1) * sizeof *nums);
    while (values != NULL && nums != NULL && done < n) {
        m = n - done >= ROWS_MAX ? ROWS_MAX : n - done >= ROWS_MIN
            ? ROWS_MIN : 1;
        for (i = 0; i < m; i++) {
            r = &p->r[p->at[it[done + i].job]];
            pos = it[done + i].pos;
            if (jr_sql_next(r->sql, r->sql_len, &pos, &st) != 1)
                goto out;
            for (k = 0; k < np; k++)    /* strings stay in r->sql */
                values[i * np + k] = param_text(&st.params[k],
                                                nums[i * np + k], 32);
        }
        if (m == 1) {
            k = send(p, b, NULL, &st, it[done].job, it[done].stmt);
        } else if ((text = jr_pg_rows_text(it[0].text, it[0].len, s, np,
                                           m)) != NULL) {
            k = send_text(p, b, text, strlen(text), 1, m * np, values,
                          it[done].job, it[done].stmt);
            free(text);
        } else {
            k = -1;
        }
        if (k < 0)
            goto out;
        done += m;
    }
    rc = done == n ? 0 : -1;
out:
    free(values);
    free(nums);
    return rc;
}

/* Queues the statements of every job of p in order, consecutive ones of
 * one text as one INSERT where sqlrows.c allows it (a plan with no
 * savepoint a job: the attempt of all of them at once). */
static int
send_flat(plan *p, jr_backend *b)
{
    const jr_result *r;
    jr_sqlstmt st;
    jr_pg_rows s;
    item *it;
    size_t pos, at;
    uint64_t h;
    int i, k, a, z, ni = 0, total = 0, rc = -1;

    for (i = 0; i < p->n; i++)
        total += p->r[p->at[i]].nsql;
    if ((it = malloc((size_t)(total + 1) * sizeof *it)) == NULL)
        return -1;
    for (i = 0; i < p->n; i++) {
        r = &p->r[p->at[i]];
        for (pos = 0, k = 0; ni < total; ) {
            at = pos;
            if (jr_sql_next(r->sql, r->sql_len, &pos, &st) != 1)
                break;
            it[ni++] = (item){.job = i, .stmt = ++k, .pos = at,
                              .text = st.text, .len = st.len,
                              .np = st.nparams};
        }
    }
    for (a = 0; a < ni; a = z) {
        for (z = a + 1; z < ni && it[z].len == it[a].len &&
             it[z].np == it[a].np &&
             memcmp(it[z].text, it[a].text, it[a].len) == 0; z++)
            ;
        if (z - a >= ROWS_MIN &&
            jr_pg_rows_shape(it[a].text, it[a].len, it[a].np, &s) &&
            s.name_len < 200 &&
            !refused(b, h = text_hash(it[a].text, it[a].len))) {
            if (send_rows(p, b, it + a, z - a, &s, h) < 0)
                goto out;
            continue;
        }
        for (i = a; i < z; i++) {
            r = &p->r[p->at[it[i].job]];
            pos = it[i].pos;
            if (jr_sql_next(r->sql, r->sql_len, &pos, &st) != 1 ||
                send(p, b, NULL, &st, it[i].job, it[i].stmt) < 0)
                goto out;
        }
    }
    rc = 0;
out:
    free(it);
    return rc;
}

/* Queues every command of the pipeline. */
static int
send_all(plan *p, jr_backend *b)
{
    const jr_result *r;
    jr_sqlstmt st;
    size_t pos;
    int i, k;

    if (!p->each)
        return send_edge(p, b, 1, 0) < 0 || send_flat(p, b) < 0 ||
               send_edge(p, b, 0, p->n - 1) < 0 ? -1 : 0;
    for (i = 0; i < p->n; i++) {
        r = &p->r[p->at[i]];
        if (send_edge(p, b, 1, i) < 0)
            return -1;
        for (pos = 0, k = 0; jr_sql_next(r->sql, r->sql_len, &pos, &st) == 1;)
            if (send(p, b, NULL, &st, i, ++k) < 0)
                return -1;
        if (send_edge(p, b, 0, i) < 0)
            return -1;
    }
    return 0;
}

/* Sends what libpq holds, reading the server's answers meanwhile (so
 * that neither side waits on the other's full buffer). 0 or -1. */
static int
flush_all(jr_backend *b)
{
    struct pollfd fd = {.fd = PQsocket(b->conn), .events = POLLIN | POLLOUT};
    int rc;

    while ((rc = PQflush(b->conn)) == 1) {
        if (poll(&fd, 1, -1) < 0 && errno != EINTR)
            return -1;
        if ((fd.revents & POLLIN) && PQconsumeInput(b->conn) == 0)
            return -1;
    }
    return rc;
}

/* Reads the pipeline's results up to its sync: the index of the first
 * command that failed (the server's message in why), -1 none, -2 the
 * connection lost. */
static int
read_errors(jr_backend *b, const cmd *c, int ncmd, char *why, size_t size)
{
    int i = 0, failed = -1;
    ExecStatusType t;
    PGresult *res;

    for (;;) {
        if ((res = PQgetResult(b->conn)) == NULL) {
            if (PQstatus(b->conn) != CONNECTION_OK)
                return -2;
            continue;           /* the end of one command's results */
        }
        t = PQresultStatus(res);
        if (i < ncmd && c[i].slot >= 0 && t != PGRES_COMMAND_OK)
            b->sqlc[c[i].slot].ready = 0;   /* not prepared: again */
        if (t == PGRES_FATAL_ERROR && failed < 0 && i < ncmd) {
            failed = i;
            describe(res, b->conn, why, size);
        }
        PQclear(res);
        if (t == PGRES_PIPELINE_SYNC)
            return failed;
        i++;
    }
}

/* Runs pipeline p; *failed gets the job (its index in p->at) whose
 * command failed first, -1 none, and *stmt which statement, why what the
 * server said. 0, or -1 with err set (the connection's trouble). */
static int
run_pipe(plan *p, jr_backend *b, int *failed, int *stmt, char *why,
         size_t size, jr_err *err)
{
    int i, total = 4, f = -3, ok;

    for (i = 0; i < p->n; i++)        /* a Parse and a DEALLOCATE each */
        total += 3 * p->r[p->at[i]].nsql + 4;
    if ((p->c = malloc((size_t)total * sizeof *p->c)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    p->nc = 0;
    b->sql_ran = 1;
    ok = PQenterPipelineMode(b->conn) == 1;
    if (ok && PQsetnonblocking(b->conn, 1) == 0) {
        atomic_store(&b->in_sql, 1);
        if (send_all(p, b) == 0 && PQpipelineSync(b->conn) == 1 &&
            flush_all(b) == 0)
            f = read_errors(b, p->c, p->nc, why, size);
        atomic_store(&b->in_sql, 0);
        PQsetnonblocking(b->conn, 0);
    }
    if (ok && PQexitPipelineMode(b->conn) != 1) {
        /* results left unread (a send failed half-way): the session is
         * given up; the next call connects again (conn.c) */
        PQreset(b->conn);
        b->set_up = 0;
        b->reconnects++;
        jr_stmtmap_clear(&b->prepared);
        f = f < -1 ? f : -3;
    }
    if (f < -1) {
        free(p->c);
        return jr_pg_fail(b, NULL, "running a job's statements", err);
    }
    if (f >= 0 && p->c[f].refuse != 0)     /* its table: never as one */
        b->rows_no[b->rows_next++ % (sizeof b->rows_no /
                                     sizeof b->rows_no[0])] = p->c[f].refuse;
    *failed = f < 0 ? -1 : p->c[f].job;
    *stmt = f < 0 ? 0 : p->c[f].stmt > 0 ? p->c[f].stmt : 1;
    free(p->c);
    return 0;
}

/* The jobs at[0..n) of r, a pipeline a CHUNK, each job in a savepoint:
 * a job whose statement fails has its savepoint rolled back and becomes
 * a failed attempt, and the jobs after it go in a pipeline again. */
static int
run_each(jr_backend *b, jr_result *r, const int *at, int n, jr_err *err)
{
    char why[JR_SQL_ERR_MAX - 100];
    int from = 0, failed = -1, stmt = 0, m;
    plan p;

    while (from < n) {
        if (atomic_load(&b->cut)) {     /* stopping: the rest do not run */
            for (; from < n; from++)
                jr_sqlres_fail(&r[at[from]], 1, JR_SQLRES_CUT);
            break;
        }
        m = n - from < CHUNK ? n - from : CHUNK;
        p = (plan){.r = r, .at = at + from, .n = m, .each = 1};
        if (run_pipe(&p, b, &failed, &stmt, why, sizeof why, err) < 0)
            return -1;
        if (failed < 0) {
            from += m;
            continue;
        }
        if (jr_pg_run_plain(b, "ROLLBACK TO jr_sql; RELEASE jr_sql",
                            "rolling back a job's statements", err) < 0)
            return -1;
        jr_sqlres_fail(&r[at[from + failed]], stmt, why);
        from += failed + 1;
    }
    return 0;
}

int
jr_pg_sql_try(jr_backend *b, const jr_result *r, int n, const int64_t *done,
              int nd, jr_err *err)
{
    char why[JR_SQL_ERR_MAX - 100];
    int *at = malloc((size_t)n * sizeof *at);
    int i, k = 0, from, m, failed = -1, stmt = 0;
    plan p;

    if (at == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    for (i = 0; i < n; i++)
        if (r[i].kind == JR_DONE && r[i].nsql > 0 &&
            bsearch(&r[i].id, done, (size_t)nd, sizeof *done, jr_pg_cmp_id))
            at[k++] = i;
    if (k > 0 && atomic_load(&b->cut))  /* stopping: run_each fails them */
        failed = 0;
    for (from = 0; from < k && failed < 0; from += m) {
        m = k - from < CHUNK ? k - from : CHUNK;
        p = (plan){.r = r, .at = at + from, .n = m, .bare = 1};
        if (run_pipe(&p, b, &failed, &stmt, why, sizeof why, err) < 0) {
            free(at);
            return -1;
        }
    }
    free(at);
    return failed >= 0;
}

int
jr_pg_sql_run(jr_backend *b, const char *token, jr_result *r, int n,
              jr_err *err)
{
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    int *at = malloc((size_t)n * sizeof *at);
    int i, m, k = 0, rc = -1;

    if (ids == NULL || at == NULL) {
        jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    } else if ((m = ours(b, token, r, n, ids, err)) >= 0) {
        for (i = 0; i < n; i++)
            if (r[i].kind == JR_DONE && r[i].nsql > 0 &&
                bsearch(&r[i].id, ids, (size_t)m, sizeof *ids, jr_pg_cmp_id))
                at[k++] = i;
        rc = run_each(b, r, at, k, err);
    }
    free(ids);
    free(at);
    return rc;
}
