/* seqadmin.c - the sequences on SQLite as an operator sees them
 * (docs/queues.md, "Sequences"): the list of the sequences held, each
 * with its head and the jobs behind it, and the skip and unblock of a
 * blocked one, in a transaction of their own. The push and the
 * completion are sequence.c's. Owns these statements; uses sqlite_int.h
 * (the conditions shared with sequence.c) and flow.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_SEQ_LIST, S_SEQ_COUNT, S_SEQ_BACK, S_SEQ_BLOCKED, S_SEQ_SKIP,
       S_SEQ_UNBLOCK, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* each sequence held, its head the job of its lowest place (the only
     * min() of the query: SQLite takes id and state from its row): the
     * heads and last jobs of jobs_seq_head (a sequence whose jobs all
     * wait holds its last) */
    [S_SEQ_LIST] =
        "SELECT sequence_key, id, state, min(seq_no),"
        " sum(state IN ('queued', 'running')"
        "  OR (state = 'waiting' AND parents_left = 0)),"
        " sum(state = 'dead' AND seq_fail = 'block') > 0, parents_left > 0"
        " FROM jobs WHERE " JR_SQLITE_SEQ_IN_HEADS " AND " JR_SQLITE_SEQ_HOLDS
        " GROUP BY sequence_key"
        " HAVING ?1 = 0 OR sum(state = 'dead' AND seq_fail = 'block') > 0"
        " ORDER BY sequence_key LIMIT ?2",
    /* the jobs waiting behind head ?1 of sequence ?2 */
    [S_SEQ_COUNT] = JR_SQLITE_SEQ_CHAIN " SELECT count(*) FROM w",
    /* a sequence whose jobs all wait (the one before its first is gone,
     * purged): the first, and how many, from the last (?1) back */
    [S_SEQ_BACK] =
        "WITH RECURSIVE w(id) AS (SELECT ?1 UNION"
        " SELECT d.parent_id FROM w JOIN job_deps d ON d.child_id = w.id"
        " JOIN jobs j ON j.id = d.parent_id WHERE j.sequence_key = ?2"
        " AND j.state = 'waiting' AND j.parents_left > 0)"
        " SELECT id, (SELECT count(*) FROM w) FROM jobs"
        " WHERE id IN w ORDER BY seq_no LIMIT 1",
    [S_SEQ_BLOCKED] =
        "SELECT id FROM jobs WHERE sequence_key = ?1 AND " JR_SQLITE_SEQ_IN_HEADS
        " AND state = 'dead' AND seq_fail = 'block' ORDER BY seq_no",
    [S_SEQ_SKIP] =
        "UPDATE jobs SET seq_fail = 'skip', updated_at = ?2 WHERE id = ?1"
        " AND state = 'dead' AND seq_fail = 'block'",
    /* as admin.c's dead retry */
    [S_SEQ_UNBLOCK] =
        "UPDATE jobs SET state = 'queued', attempts = 0, run_at = ?2,"
        " fair_tag = NULL,"
        " died_at = NULL, finished_at = NULL, cancel_requested = 0,"
        " updated_at = ?2 WHERE sequence_key = ?1 AND " JR_SQLITE_SEQ_IN_HEADS
        " AND state = 'dead' AND seq_fail = 'block'",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* The jobs waiting in sequence key behind *head, into *n; or, when
 * *head waits itself (for a job gone: its jobs all wait), *head the
 * first of them and *n how many. */
static int
waiting_of(jr_backend *b, const char *key, int64_t *head, int waits,
           long *n, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, waits ? S_SEQ_BACK : S_SEQ_COUNT, err);
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, *head);
    bind_text(s, 2, key);
    *n = 0;
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (waits)
            *head = sqlite3_column_int64(s, 0);
        *n = (long)sqlite3_column_int64(s, waits) - !waits;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading the sequences");
}

int
jr_sqlite_sequences(jr_backend *b, int blocked, int limit, jr_seq_cb cb,
                    void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_LIST, err);
    jr_seq_row r;
    long waiting;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int(s, 1, blocked != 0);
    sqlite3_bind_int(s, 2, limit > 0 ? limit : -1);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        r.key = col_text(s, 0);
        r.head = sqlite3_column_int64(s, 1);
        r.state = col_text(s, 2);
        r.jobs = (long)sqlite3_column_int64(s, 4);
        r.blocked = sqlite3_column_int(s, 5);
        if (waiting_of(b, r.key, &r.head, sqlite3_column_int(s, 6),
                       &waiting, err) < 0) {
            sqlite3_reset(s);
            return -1;
        }
        r.jobs += waiting;
        if (cb(&r, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading the sequences");
}

/* Skips the blocked jobs of sequence key: each stops holding it and
 * its end (dead) reaches the job behind it again, which now runs. */
static int
skip(jr_backend *b, const char *key, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_BLOCKED, err);
    int64_t ids[16];
    int n = 0, i, rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, key);
    /* one blocked job a sequence, but for jobs pushed with different
     * on_failure: 16 a call is plenty, the rest at the next */
    while (n < 16 && (rc = sqlite3_step(s)) == SQLITE_ROW)
        ids[n++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (n < 16 && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "skipping a sequence");
    for (i = 0; i < n; i++) {
        if ((s = stmt(b, S_SEQ_SKIP, err)) == NULL)
            return -1;
        sqlite3_bind_int64(s, 1, ids[i]);
        sqlite3_bind_double(s, 2, now);
        if (run(b, s, err, "skipping a sequence") < 0 ||
            jr_sqlite_flow_settle(b, ids[i], "dead", NULL, now, err) < 0)
            return -1;
    }
    return n;
}

static int
unblock(jr_backend *b, const char *key, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_UNBLOCK, err);

    if (s == NULL)
        return -1;
    bind_text(s, 1, key);
    sqlite3_bind_double(s, 2, now);
    return run(b, s, err, "unblocking a sequence");
}

int
jr_sqlite_seq_act(jr_backend *b, const char *key, int what, jr_err *err)
{
    double now = jr_now();
    int n;

    if (what != JR_SEQ_ACT_SKIP && what != JR_SEQ_ACT_UNBLOCK)
        return jr_fail(err, JR_EINPUT, "sequence '%s': unknown action %d",
                       key, what);
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    n = what == JR_SEQ_ACT_SKIP ? skip(b, key, now, err) :
        unblock(b, key, now, err);
    if (n < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : n;
}
