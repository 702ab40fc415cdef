/* round.c - the results of one round of the database thread, in one
 * transaction: the plain successes in one DELETE (those it left: kept
 * for their result_ttl, or left running for their worker's lines), every
 * other result one by one (complete.c), and the next claim in the same
 * transaction. Uses sqlite_int.h; complete.c applies one result,
 * sequence.c readies the jobs behind sequences' successes, claim.c
 * claims. */
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"
#include "sqlres.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_DONE_MANY, S_KEEP_MANY, S_KEPT_SQL, S_HELD_LEFT, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* plain successes of one batch: one statement, not one each */
    [S_DONE_MANY] =
        "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))"
        " AND state = 'running' AND locked_by = ?2 AND result_ttl IS NULL"
        " AND flow = 0",
    /* what S_DONE_MANY left of its ids: those with a result_ttl */
    [S_KEEP_MANY] =
        "UPDATE jobs SET state = 'completed', finished_at = ?3,"
        " locked_by = NULL, locked_until = NULL, cancel_requested = 0,"
        " updated_at = ?3, keep_until = ?3 + max(result_ttl, ?4)"
        " WHERE id IN (SELECT value FROM json_each(?1))"
        " AND state = 'running' AND locked_by = ?2"
        " AND result_ttl IS NOT NULL AND flow = 0",
    /* a success with statements that S_KEEP_MANY kept, now (?3) */
    [S_KEPT_SQL] =
        "UPDATE jobs SET sql_statements = ?2"
        " WHERE id = ?1 AND state = 'completed' AND finished_at = ?3",
    /* a success whose lines its worker holds, left by S_DONE_MANY: ours
     * and marked by a wait (held_left) */
    [S_HELD_LEFT] =
        "SELECT 1 FROM jobs WHERE id = ?1 AND state = 'running'"
        " AND locked_by = ?2 AND result_ttl IS NOT NULL",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* 1 if r is a success whose row is simply deleted (one that says why
 * its result was not stored goes alone: kept, it records why). */
static int
plain_done(const jr_backend *b, const jr_result *r)
{
    return r->kind == JR_DONE && r->npushes == 0 && b->keep_completed <= 0 &&
           r->result == NULL && r->error == NULL;
}

/* After the one DELETE left some plain successes: those whose lines
 * their worker holds (jr_result held 1) that are ours and marked by a
 * wait are left running for their lines (lines_wanted), and their ids
 * taken out of the JSON list ids (rewritten in place). Returns how
 * many, or -1. */
static int
held_left(jr_backend *b, const char *token, const jr_result *r, int n,
          char *ids, jr_err *err)
{
    sqlite3_stmt *s;
    char *p = ids;
    int i, k = 0, rc;

    for (i = 0; i < n; i++) {
        if (!plain_done(b, &r[i]) || r[i].held != 1 ||
            r[i].lines_wanted == NULL)
            continue;
        if ((s = stmt(b, S_HELD_LEFT, err)) == NULL)
            return -1;
        sqlite3_bind_int64(s, 1, r[i].id);
        bind_text(s, 2, token);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return jr_sqlite_fail(b, err, "recording results");
        if (rc == SQLITE_ROW) {
            *r[i].lines_wanted = 1;
            k++;
        }
    }
    if (k == 0)
        return 0;
    *p++ = '[';                 /* the others, for keep_many */
    for (i = 0; i < n; i++) {
        if (!plain_done(b, &r[i]) ||
            (r[i].lines_wanted != NULL && *r[i].lines_wanted))
            continue;
        if (p != ids + 1)
            *p++ = ',';
        p += jr_put_int64(p, r[i].id);
    }
    strcpy(p, "]");
    return k;
}

/* After S_DONE_MANY deleted ndone of the ids (JSON): the ones left that
 * are ours with a result_ttl stay completed. Returns ndone plus those. */
static int
keep_many(jr_backend *b, const char *token, const char *ids, int ndone,
          double now, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if ((s = stmt(b, S_KEEP_MANY, err)) == NULL)
        return -1;
    bind_text(s, 1, ids);
    bind_text(s, 2, token);
    sqlite3_bind_double(s, 3, now);
    sqlite3_bind_double(s, 4, b->keep_completed);
    rc = run(b, s, err, "recording results");
    return rc < 0 ? -1 : ndone + rc;
}

/* After S_KEEP_MANY kept some of the plain successes: the number of
 * statements of those that carried some (rare: a result_ttl and
 * statements), and their runs' logs. 0 or -1. */
static int
kept_sql(jr_backend *b, const jr_result *r, int n, double now, jr_err *err)
{
    sqlite3_stmt *s;
    int i;

    for (i = 0; i < n; i++) {
        if (!plain_done(b, &r[i]))
            continue;
        if (r[i].logs != NULL &&
            jr_sqlite_logs_kept(b, &r[i], now, err) < 0)
            return -1;
        if (r[i].nsql <= 0)
            continue;
        if ((s = stmt(b, S_KEPT_SQL, err)) == NULL)
            return -1;
        sqlite3_bind_int64(s, 1, r[i].id);
        sqlite3_bind_int(s, 2, r[i].nsql);
        sqlite3_bind_double(s, 3, now);
        if (run(b, s, err, "recording a result's statements") < 0)
            return -1;
    }
    return 0;
}

/* After the one DELETE of the plain successes left some rows: those
 * with a flow bit, one by one (the others are gone or not ours). */
static int
done_rest(jr_backend *b, const char *token, const jr_result *r, int n,
          double now, int applied, jr_err *err)
{
    int i, rc;

    for (i = 0; i < n; i++) {
        if (!plain_done(b, &r[i]) ||
            (r[i].lines_wanted != NULL && *r[i].lines_wanted))
            continue;           /* left for its lines: counted */
        if ((rc = jr_sqlite_complete_one(b, token, &r[i], r + n, now,
                                          err)) < 0)
            return -1;
        applied += rc;
    }
    return applied;
}

/* Applies r[0..n) in a transaction: the plain successes in one DELETE
 * after the others (a job's progress comes before its end, never after),
 * the rest one statement each, in order. Returns how many rows were
 * still ours. */
static int
complete_rows(jr_backend *b, const char *token, const jr_result *r, int n,
              double now, jr_err *err)
{
    sqlite3_stmt *s;
    char *ids = NULL, *p = NULL;
    int applied = 0, nplain = 0, i, rc;

    if (jr_sqlite_logs_put(b, token, r, n, err) < 0)
        return -1;
    for (i = 0; i < n; i++)
        nplain += plain_done(b, &r[i]);
    if (nplain > 1) {
        if ((p = ids = malloc((size_t)nplain * 22 + 3)) == NULL)
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        *p++ = '[';
    }
    for (i = 0; i < n; i++) {
        if (ids != NULL && plain_done(b, &r[i])) {
            if (p != ids + 1)
                *p++ = ',';
            p += jr_put_int64(p, r[i].id);
            continue;
        }
        if ((rc = jr_sqlite_complete_one(b, token, &r[i], r + n, now, err)) < 0) {
            free(ids);
            return -1;
        }
        applied += rc;
    }
    if (ids == NULL)
        return applied;
    strcpy(p, "]");
    if ((s = stmt(b, S_DONE_MANY, err)) == NULL) {
        free(ids);
        return -1;
    }
    if (b->seq_seen) {          /* sequences lately: one DELETE for both */
        rc = jr_sqlite_seq_done(b, token, ids, 1, now, err);
    } else {
        bind_text(s, 1, ids);
        bind_text(s, 2, token);
        rc = run(b, s, err, "recording results");
        if (rc >= 0 && rc < nplain) {   /* jobs of a sequence? */
            int deleted = rc, seq = jr_sqlite_seq_done(b, token, ids, 0,
                                                       now, err);
            rc = seq < 0 ? -1 : deleted + seq;
        }
    }
    if (rc >= 0 && rc < nplain) {       /* some have a result_ttl */
        int deleted = rc, left = held_left(b, token, r, n, ids, err);

        rc = left < 0 ? -1 : keep_many(b, token, ids, rc + left, now, err);
        if (rc > deleted && kept_sql(b, r, n, now, err) < 0)
            rc = -1;
    }
    free(ids);
    if (rc < 0)
        return -1;
    if (rc < nplain)            /* jobs with a flow bit, or fenced off */
        return done_rest(b, token, r, n, now, applied + rc, err);
    return applied + rc;
}

/* complete_rows, with the successes' statements when some carry any
 * (sqlrun.c); results without statements pay one loop. */
static int
complete_all(jr_backend *b, const char *token, const jr_result *r, int n,
             double now, jr_err *err)
{
    if (!jr_sqlres_any(r, n))
        return complete_rows(b, token, r, n, now, err);
    return jr_sqlite_sql_complete(b, token, r, n, now, complete_rows, err);
}

int
jr_sqlite_complete(jr_backend *b, const char *token, const jr_result *r,
                   int n, jr_err *err)
{
    int applied;

    if (n == 0)
        return 0;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((applied = complete_all(b, token, r, n, jr_now(), err)) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : applied;
}

/* Records the results and claims, in one transaction: one fsync a round
 * instead of two. */
int
jr_sqlite_complete_claim(jr_backend *b, const char *token,
                         const jr_result *r, int nr, int *applied,
                         double lease, const jr_claim_spec *spec,
                         jr_job **out, jr_err *err)
{
    double now = jr_now();
    int n;

    *applied = 0;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if (nr > 0 && (*applied = complete_all(b, token, r, nr, now, err)) < 0) {
        *applied = 0;
        jr_sqlite_rollback(b);
        return -1;
    }
    if ((n = jr_sqlite_claim_rows(b, token, lease, spec, out, now, err)) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit_claimed(b, out, n, err);
}
