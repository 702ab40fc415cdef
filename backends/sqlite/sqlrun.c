/* sqlrun.c - a job's jobrunner.sql statements (job.h's jr_result.sql),
 * run on the runner's connection in the transaction recording its
 * success, each job's in a savepoint of its own: a statement that fails
 * rolls back that job's statements only, and its success becomes a
 * failed attempt (sqlres.h). The file named by the config's attach is
 * ATTACHed as "app" on the connection (conn.c). Uses sqlite_int.h,
 * sqlstmt.h, sqlres.h. */
#include <stdio.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/sqlstmt.h"
#include "sqlres.h"

/* the job is still this runner's: its statements may run (one writer at
 * a time: nothing changes the row before the commit) */
static const char *const st_ours =
    "SELECT 1 FROM jobs WHERE id = ?1 AND state = 'running'"
    " AND locked_by = ?2";

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
ours(jr_backend *b, const char *token, int64_t id, jr_err *err)
{
    sqlite3_stmt *s = jr_sqlite_stmt(b, &st_ours, err);
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, token);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return jr_sqlite_fail(b, err, "checking a job before its statements");
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
    sqlite3_stmt *s = NULL;
    const char *tail = NULL;
    int rc;

    rc = sqlite3_prepare_v2(b->db, st->text, (int)st->len + 1, &s, &tail);
    if (rc == SQLITE_OK && tail != NULL) {
        while (*tail == ' ' || *tail == '\t' || *tail == '\n' ||
               *tail == '\r' || *tail == ';')
            tail++;
        if (*tail != '\0') {
            sqlite3_finalize(s);
            snprintf(why, size, "the text holds more than one statement");
            return SQLITE_ERROR;
        }
    }
    if (rc == SQLITE_OK && s != NULL &&
        sqlite3_bind_parameter_count(s) != st->nparams) {
        snprintf(why, size, "the statement takes %d parameters, %d given",
                 sqlite3_bind_parameter_count(s), st->nparams);
        sqlite3_finalize(s);
        return SQLITE_RANGE;
    }
    if (rc == SQLITE_OK && s != NULL) {
        bind(s, st);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
            ;
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    if (rc != SQLITE_OK)
        snprintf(why, size, "%s (%s)", sqlite3_errmsg(b->db),
                 sqlite3_errstr(rc));
    sqlite3_finalize(s);
    return rc;
}

/* Runs r's statements in a savepoint; 0 (r a failed attempt if one of
 * them failed), or -1 with err set for the database's trouble. */
static int
run_job(jr_backend *b, jr_result *r, jr_err *err)
{
    jr_sqlstmt st;
    size_t pos = 0;
    char why[JR_SQL_ERR_MAX - 100];
    int k = 0, rc = SQLITE_OK;

    if (sqlite3_exec(b->db, "SAVEPOINT jr_sql", NULL, NULL, NULL) != 0)
        return jr_sqlite_fail(b, err, "a savepoint for a job's statements");
    while (jr_sql_next(r->sql, r->sql_len, &pos, &st) == 1) {
        k++;
        if ((rc = run_one(b, &st, why, sizeof why)) != SQLITE_OK)
            break;
    }
    if (rc == SQLITE_OK) {
        if (sqlite3_exec(b->db, "RELEASE jr_sql", NULL, NULL, NULL) != 0)
            return jr_sqlite_fail(b, err, "releasing a job's savepoint");
        r->sql_error[0] = '\0';
        return 0;
    }
    if (sqlite3_exec(b->db, "ROLLBACK TO jr_sql; RELEASE jr_sql", NULL, NULL,
                     NULL) != 0)
        return jr_sqlite_fail(b, err, "rolling back a job's statements");
    if (db_trouble(rc))
        return jr_fail(err, JR_EDB, "sqlite: a job's statement: %s", why);
    jr_sqlres_fail(r, k, why);
    return 0;
}

int
jr_sqlite_sql_run(jr_backend *b, const char *token, jr_result *r, int n,
                  jr_err *err)
{
    int i, rc;

    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_DONE || r[i].nsql <= 0)
            continue;
        if ((rc = ours(b, token, r[i].id, err)) < 0)
            return -1;
        if (rc == 1 && run_job(b, &r[i], err) < 0)
            return -1;
    }
    return 0;
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
