/* seqretry.c - a job of a sequence run again by hand (dead retry, rerun;
 * docs/queues.md, "Sequences"): one the sequence has gone on past (it
 * ended, and is not the dead one that blocks the sequence) goes back to
 * the sequence's end, behind the job that holds it, as a push does; the
 * dead job that blocks it is its head and keeps its place (the caller's
 * statement alone). Runs in the caller's transaction. Owns these
 * statements; uses sqlite_int.h and sequence.c. */
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_PAST, S_PAST_DEAD, S_CLEAR, S_UNLINK, S_WAITS, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* job ?1 when its sequence has gone on past it */
    [S_PAST] =
        "SELECT sequence_key, seq_fail, name FROM jobs WHERE id = ?1"
        " AND " JR_SQLITE_SEQ_PAST,
    /* up to ?1 dead jobs whose sequences have gone on past them, each
     * sequence's in their order */
    [S_PAST_DEAD] =
        "SELECT id FROM jobs WHERE state = 'dead' AND " JR_SQLITE_SEQ_PAST_DEAD
        " ORDER BY seq_no, id LIMIT ?1",
    /* the job, queued again, leaves its place (a job of no sequence, as
     * a push before it goes into one) */
    [S_CLEAR] =
        "UPDATE jobs SET sequence_key = NULL, seq_no = NULL,"
        " seq_last = NULL, parents_left = 0, parents = NULL"
        " WHERE id = ?1 AND state = 'queued'",
    /* and its waits for the jobs before it there, ended long ago */
    [S_UNLINK] = "DELETE FROM job_deps WHERE child_id = ?1",
    [S_WAITS] = "SELECT state = 'waiting' FROM jobs WHERE id = ?1",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Job id, queued again, goes to the end of sequence key (what its death
 * did to the jobs behind it fail, its name name); *waits (if not NULL)
 * gets whether it waits there. */
static int
to_end(jr_backend *b, int64_t id, const char *key, const char *fail,
       const char *name, double now, int *waits, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_CLEAR, err);
    int64_t w = 0;
    jr_push p;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = run(b, s, err, "moving a job to its sequence's end")) <= 0)
        return rc;
    if ((s = stmt(b, S_UNLINK, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if (run(b, s, err, "moving a job to its sequence's end") < 0)
        return -1;
    memset(&p, 0, sizeof p);
    p.name = name;
    p.sequence = key;
    p.seq_fail = fail != NULL && jr_seq_fail_parse(fail) >= 0 ?
                 jr_seq_fail_parse(fail) : JR_SEQ_BLOCK;
    p.on_conflict = JR_CONFLICT_KEEP;
    if (jr_sqlite_seq_link(b, &p, &id, now, err) < 0)
        return -1;
    if (waits == NULL)
        return 0;
    if ((s = stmt(b, S_WAITS, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if (jr_sqlite_step_one(b, s, NULL, 0, &w, err, "reading a job") < 0)
        return -1;
    *waits = w != 0;
    return 0;
}

int
jr_sqlite_seq_again(jr_backend *b, int64_t id, sqlite3_stmt *again,
                    double now, int *waits, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_PAST, err);
    char *key = NULL, *fail = NULL, *name = NULL;
    int rc, oom = 0;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        key = strdup(col_text(s, 0));
        fail = col_text(s, 1) ? strdup(col_text(s, 1)) : NULL;
        name = strdup(col_text(s, 2));
        oom = key == NULL || name == NULL ||
              (fail == NULL && col_text(s, 1) != NULL);
    }
    sqlite3_reset(s);
    if (oom)
        rc = jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        rc = jr_sqlite_fail(b, err, "reading a job's sequence");
    else if ((rc = run(b, again, err, "running a job again")) > 0 &&
             key != NULL &&
             to_end(b, id, key, fail, name, now, waits, err) < 0)
        rc = -1;
    free(key);
    free(fail);
    free(name);
    return rc;
}

int
jr_sqlite_seq_past_dead(jr_backend *b, int64_t *ids, int max, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_PAST_DEAD, err);
    int n = 0, rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int(s, 1, max);
    while (n < max && (rc = sqlite3_step(s)) == SQLITE_ROW)
        ids[n++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (n < max && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading dead jobs of sequences");
    return n;
}
