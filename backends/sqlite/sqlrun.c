/* sqlrun.c - a job's jobrunner.sql statements (job.h's jr_result.sql),
 * run on the runner's connection in the transaction recording its
 * success, each job's in a savepoint of its own: a statement that fails
 * rolls back that job's statements only, and its success becomes a
 * failed attempt (sqlres.h). The file named by the config's attach is
 * ATTACHed as "app" on the connection (conn.c). Uses sqlite_int.h,
 * sqlstmt.h, sqlres.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sqlite/sqlite_int.h"
#include "base/sqlstmt.h"
#include "sqlres.h"

/* the jobs of the batch still this runner's, whose statements may run
 * (one writer at a time: nothing changes their rows before the commit);
 * one statement a batch */
static const char *const st_ours =
    "SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?1))"
    " AND state = 'running' AND locked_by = ?2 ORDER BY id";

/* the savepoint of a job's statements, prepared once a connection */
static const char *const st_save = "SAVEPOINT jr_sql";
static const char *const st_release = "RELEASE jr_sql";
static const char *const st_undo = "ROLLBACK TO jr_sql";

/* Runs one of the savepoint statements above; 0 or -1 with err set. */
static int
simple(jr_backend *b, const char *const *text, jr_err *err)
{
    sqlite3_stmt *s = jr_sqlite_stmt(b, text, err);

    return s == NULL || run(b, s, err, "a job's savepoint") < 0 ? -1 : 0;
}

/* 1 when the text after a statement holds no other: blanks, ';' and
 * comments only. */
static int
blank(const char *p)
{
    for (;;) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' ||
            *p == '\f' || *p == '\v' || *p == ';') {
            p++;
        } else if (p[0] == '-' && p[1] == '-') {
            while (*p != '\0' && *p != '\n')
                p++;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            if (end == NULL)
                return 1;       /* SQLite ends a comment at the end */
            p = end + 2;
        } else {
            return *p == '\0';
        }
    }
}

/* The prepared statement of text from the connection's cache of handler
 * statements (most handlers send the same few texts), or a new one put
 * there in place of the oldest. NULL and SQLite's code in *rc, with *tail
 * set, when it does not prepare. A text holding a second statement is
 * not kept (*tail says so to each caller, so that none runs its first
 * statement alone). */
static sqlite3_stmt *
cached(jr_backend *b, const jr_sqlstmt *st, int *rc, const char **tail)
{
    jr_sqlite_cached *c;
    sqlite3_stmt *s = NULL;
    char *copy;
    int i;

    *tail = NULL;
    for (i = 0; i < JR_SQLITE_SQL_CACHE; i++) {
        c = &b->sql_cache[i];
        if (c->text != NULL && c->len == st->len &&
            memcmp(c->text, st->text, st->len) == 0) {
            sqlite3_reset(c->s);
            sqlite3_clear_bindings(c->s);
            *rc = SQLITE_OK;
            return c->s;
        }
    }
    *rc = sqlite3_prepare_v3(b->db, st->text, (int)st->len + 1,
                             SQLITE_PREPARE_PERSISTENT, &s, tail);
    if (*rc != SQLITE_OK || s == NULL || !blank(*tail) ||
        (copy = malloc(st->len + 1)) == NULL)
        return s;               /* an uncached one is finalized by run_one */
    memcpy(copy, st->text, st->len + 1);
    c = &b->sql_cache[b->sql_next];
    b->sql_next = (b->sql_next + 1) % JR_SQLITE_SQL_CACHE;
    sqlite3_finalize(c->s);
    free(c->text);
    c->text = copy;
    c->len = st->len;
    c->s = s;
    return s;
}

/* 1 when s is in the cache (kept, not finalized after its run). */
static int
in_cache(const jr_backend *b, const sqlite3_stmt *s)
{
    int i;

    for (i = 0; i < JR_SQLITE_SQL_CACHE; i++)
        if (b->sql_cache[i].s == s)
            return 1;
    return 0;
}

void
jr_sqlite_sql_forget(jr_backend *b)
{
    int i;

    for (i = 0; i < JR_SQLITE_SQL_CACHE; i++) {
        sqlite3_finalize(b->sql_cache[i].s);
        free(b->sql_cache[i].text);
        b->sql_cache[i].s = NULL;
        b->sql_cache[i].text = NULL;
    }
    b->sql_next = 0;
}

/* 1 when SQLite's rc is the database's trouble (a retry of the whole
 * batch may pass), not the statement's. */
static int
db_trouble(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_NOMEM:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return 1;
    default:
        return 0;
    }
}

static int
cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* The ids of the successes of r[0..n) with statements that are ours,
 * sorted, into ids (n slots); how many, or -1. */
static int
ours(jr_backend *b, const char *token, const jr_result *r, int n,
     int64_t *ids, jr_err *err)
{
    char *list = malloc((size_t)n * 22 + 3), *p = list;
    sqlite3_stmt *s;
    int i, m = 0, rc;

    if (list == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    *p++ = '[';
    for (i = 0; i < n; i++)
        if (r[i].kind == JR_DONE && r[i].nsql > 0)
            p += sprintf(p, "%s%lld", p == list + 1 ? "" : ",",
                         (long long)r[i].id);
    strcpy(p, "]");
    if ((s = jr_sqlite_stmt(b, &st_ours, err)) == NULL) {
        free(list);
        return -1;
    }
    bind_text(s, 1, list);
    bind_text(s, 2, token);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && m < n)
        ids[m++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    free(list);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "checking jobs before their "
                              "statements");
    return m;
}

static void
bind(sqlite3_stmt *s, const jr_sqlstmt *st)
{
    const jr_sqlval *v;
    int i;

    for (i = 0; i < st->nparams; i++) {
        v = &st->params[i];
        if (v->type == JR_SQLV_INT || v->type == JR_SQLV_BOOL)
            sqlite3_bind_int64(s, i + 1, v->i);
        else if (v->type == JR_SQLV_FLOAT)
            sqlite3_bind_double(s, i + 1, v->f);
        else if (v->type == JR_SQLV_TEXT)
            sqlite3_bind_text(s, i + 1, v->s, (int)v->len, SQLITE_STATIC);
        else
            sqlite3_bind_null(s, i + 1);
    }
}

/* Runs one statement; 0, or SQLite's code with its message in why. A
 * text holding more than one statement is refused: the others would not
 * run. */
static int
run_one(jr_backend *b, const jr_sqlstmt *st, char *why, size_t size)
{
    const char *tail;
    int rc, np;
    sqlite3_stmt *s = cached(b, st, &rc, &tail);

    if (rc == SQLITE_OK && tail != NULL && !blank(tail)) {
        snprintf(why, size, "the text holds more than one statement");
        rc = SQLITE_ERROR;
    } else if (rc == SQLITE_OK && s != NULL &&
        (np = sqlite3_bind_parameter_count(s)) != st->nparams) {
        snprintf(why, size, "the statement takes %d parameters, %d given",
                 np, st->nparams);
        rc = SQLITE_RANGE;
    } else if (rc == SQLITE_OK && s != NULL) {
        bind(s, st);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
            ;
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        if (rc != SQLITE_OK)
            snprintf(why, size, "%s (%s)", sqlite3_errmsg(b->db),
                     sqlite3_errstr(rc));
        sqlite3_reset(s);
    } else if (rc != SQLITE_OK) {
        snprintf(why, size, "%s (%s)", sqlite3_errmsg(b->db),
                 sqlite3_errstr(rc));
    }
    if (s != NULL && !in_cache(b, s))
        sqlite3_finalize(s);
    return rc;
}

/* Runs r's statements in a savepoint; 0 (r a failed attempt if one of
 * them failed), or -1 with err set for the database's trouble. A job of
 * one statement takes none: SQLite backs out a failed statement's own
 * changes (its statement journal), which is all a savepoint would undo.
 * A statement that ended the transaction (INSERT OR ROLLBACK) took the
 * batch with it: refused as input, so that the caller records the batch
 * again one result at a time (db/dbthread.c) and this job ends dead. */
static int
run_job(jr_backend *b, jr_result *r, jr_err *err)
{
    int k = 0, rc = SQLITE_OK, save = r->nsql > 1;
    char why[JR_SQL_ERR_MAX - 100];
    jr_sqlstmt st;
    size_t pos = 0;

    if (atomic_load(&b->cut)) {         /* stopping: none runs */
        jr_sqlres_fail(r, 1, JR_SQLRES_CUT);
        return 0;
    }
    if (save && simple(b, &st_save, err) < 0)
        return -1;
    atomic_store(&b->in_sql, 1);
    while (jr_sql_next(r->sql, r->sql_len, &pos, &st) == 1) {
        k++;
        if (atomic_load(&b->cut) && k > 1) {
            snprintf(why, sizeof why, "%s", JR_SQLRES_CUT);
            rc = SQLITE_INTERRUPT;
            break;
        }
        if ((rc = run_one(b, &st, why, sizeof why)) != SQLITE_OK)
            break;
    }
    atomic_store(&b->in_sql, 0);
    if (rc == SQLITE_OK) {
        r->sql_error[0] = '\0';
        return save ? simple(b, &st_release, err) : 0;
    }
    if (sqlite3_get_autocommit(b->db))
        return jr_fail(err, JR_EINPUT, "sqlite: job %lld: statement %d "
                       "ended the transaction: %s", (long long)r->id, k,
                       why);
    if (save && (simple(b, &st_undo, err) < 0 ||
                 simple(b, &st_release, err) < 0))
        return -1;
    if (db_trouble(rc))
        return jr_fail(err, JR_EDB, "sqlite: a job's statement: %s", why);
    jr_sqlres_fail(r, k, why);
    return 0;
}

/* A handler's statements are plain SQL: the schema's triggers, which
 * the connection otherwise keeps off (conn.c), hold them to the push
 * rules, and give a row they make dead its died_at (jobs_died_at, _set:
 * dead list, dead retry --all and the prune read it). A statement can
 * reach the jobs table only by naming it (a trigger of yours turns them
 * all on anyway), so the triggers are turned on for a batch whose
 * statements name it, and off again after them: each turn expires the
 * prepared statements, which a batch writing only its own tables does
 * not pay. */
static int
names_jobs(const jr_result *r, int n)
{
    int i;
    size_t k;

    for (i = 0; i < n; i++)
        if (r[i].kind == JR_DONE && r[i].nsql > 0)
            for (k = 0; k + 4 <= r[i].sql_len; k++)
                if (strncasecmp(r[i].sql + k, "jobs", 4) == 0)
                    return 1;
    return 0;
}

/* Turns the triggers on for r[0..n)'s statements when they name jobs;
 * *was_off says to turn them off again (triggers_back). */
static int
triggers_on(jr_backend *b, const jr_result *r, int n, int *was_off,
            jr_err *err)
{
    *was_off = b->triggers_off && names_jobs(r, n);
    return *was_off ? jr_sqlite_triggers_set(b, 0, err) : 0;
}

static int
triggers_back(jr_backend *b, int was_off, int rc, jr_err *err)
{
    jr_err e2;

    if (!was_off)
        return rc;
    if (jr_sqlite_triggers_set(b, 1, rc < 0 ? &e2 : err) < 0)
        return -1;
    return rc;
}

/* Runs the statements of the successes of r[0..n) still held by token,
 * each job's in a savepoint; a success whose statement failed becomes
 * the failed attempt its sql_kind says (sqlres.h). Returns 0, or -1 with
 * err set when the database is in trouble (the whole batch fails). */
static int
sql_run(jr_backend *b, const char *token, jr_result *r, int n, jr_err *err)
{
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    int i, m, rc = 0, was_off = 0;

    if (ids == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if ((m = ours(b, token, r, n, ids, err)) < 0)
        rc = -1;
    else
        rc = triggers_on(b, r, n, &was_off, err);
    for (i = 0; i < n && rc == 0; i++)
        if (r[i].kind == JR_DONE && r[i].nsql > 0 &&
            bsearch(&r[i].id, ids, (size_t)m, sizeof *ids, cmp_id))
            rc = run_job(b, &r[i], err);
    free(ids);
    return triggers_back(b, was_off, rc, err);
}

/* Runs the statements of every success of r[0..n) that has some, with
 * no look at whose the jobs are; 0 when all of them passed, 1 when one
 * failed (nothing of it to keep: the caller rolls the transaction
 * back), or -1 with err set as sql_run. */
static int
sql_all(jr_backend *b, jr_result *r, int n, jr_err *err)
{
    int i, was_off, rc = 0;

    if (triggers_on(b, r, n, &was_off, err) < 0)
        return -1;
    for (i = 0; i < n && rc == 0; i++) {
        if (r[i].kind != JR_DONE || r[i].nsql <= 0)
            continue;
        if (run_job(b, &r[i], err) < 0)
            rc = -1;
        else if (r[i].sql_error[0] != '\0')
            rc = 1;
    }
    return triggers_back(b, was_off, rc, err);
}

/* First as if every statement passes (PostgreSQL does the same): the
 * completion's own fenced writes tell whether every row of the batch was
 * still ours, and then the statements run, with no look of their own at
 * the jobs (a look a batch, its ids through json_each, cost about 5,100
 * instructions a job beside the INSERT's 6,500). When a row was not ours
 * or a statement failed, the transaction (which holds nothing else yet)
 * is rolled back and begun again, and the statements run first, of the
 * jobs still ours only, on a copy of the results in which a success
 * whose statement failed is a failed attempt. */
int
jr_sqlite_sql_complete(jr_backend *b, const char *token, const jr_result *r,
                       int n, double now, jr_sqlite_rows_fn rows,
                       jr_err *err)
{
    jr_result *own;
    int rc;

    if ((own = jr_sqlres_copy(r, n)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    rc = rows(b, token, r, n, now, err);
    if (rc == n) {
        int failed = sql_all(b, own, n, err);
        if (failed <= 0) {
            free(own);
            return failed < 0 ? -1 : rc;
        }
    }
    if (rc >= 0) {
        free(own);
        jr_sqlite_rollback(b);
        if (jr_sqlite_begin(b, err) < 0)
            return -1;
        if ((own = jr_sqlres_copy(r, n)) == NULL)
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        rc = sql_run(b, token, own, n, err) < 0 ? -1 :
             rows(b, token, own, n, now, err);
    }
    free(own);
    return rc;
}

int
jr_sqlite_attach(jr_backend *b, jr_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc;

    if (b->attach == NULL)
        return 0;
    rc = sqlite3_prepare_v2(b->db, "ATTACH DATABASE ?1 AS app", -1, &s,
                            NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(s, 1, b->attach, -1, SQLITE_STATIC);
        rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_OK)
        return jr_fail(err, JR_EDB, "sqlite: attaching '%s' as app "
                       "(attach): %s", b->attach, sqlite3_errmsg(b->db));
    return 0;
}

/* No handler's statement runs on b from now on; one running now is
 * interrupted (sqlite3_interrupt is safe from another thread while the
 * connection is open: the statement running fails with
 * SQLITE_INTERRUPT). */
void
jr_sqlite_interrupt(jr_backend *b)
{
    atomic_store(&b->cut, 1);
    if (atomic_load(&b->in_sql))
        sqlite3_interrupt(b->db);
}
