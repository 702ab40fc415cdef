/* sequence.c - sequences on SQLite (docs/queues.md, "Sequences"): a job
 * pushed into a sequence takes the next place (seq_no) and waits, as a
 * dependency (flow.c), for the job pushed into it before while that one
 * has not ended (the list of sequences and an operator's skip and
 * unblock: seqadmin.c). The writes run in the caller's or their own
 * transaction, and SQLite's one writer orders two producers of one key.
 * Owns the sequence statements of the push and the completion; uses
 * sqlite_int.h (the conditions the two files share) and flow.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_SEQ_TAIL, S_SEQ_AFTER, S_SEQ_BEFORE, S_SEQ_SET, S_SEQ_UNLAST,
       S_SEQ_WAIT, S_SEQ_CANCEL, S_SEQ_REPLACE, S_SEQ_DROP, S_SEQ_DONE,
       S_SEQ_DEPS_KIDS, S_SEQ_DEPS_SET, S_SEQ_NEXT, S_SEQ_DONE_ALL,
       S_SEQ_UNTAG, S_SEQ_FAIR, S_SEQ_WAIT_T, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* the job pushed into sequence ?1 last (jobs_seq_head: the one of
     * seq_last, or when it is gone the last of the others there) */
    [S_SEQ_TAIL] =
        "SELECT id, " JR_SQLITE_SEQ_HOLDS ", seq_fail, seq_no, " JR_SQLITE_SEQ_PENDING ", seq_last"
        " FROM jobs WHERE sequence_key = ?1 AND " JR_SQLITE_SEQ_IN_HEADS
        " ORDER BY seq_no DESC LIMIT 1",
    /* the last job of sequence ?2 waiting behind job ?1: the last pushed
     * when it is gone (pruned, cancelled before) and jobs behind ?1 wait */
    [S_SEQ_AFTER] =
        JR_SQLITE_SEQ_CHAIN " SELECT id, " JR_SQLITE_SEQ_HOLDS ", seq_fail, seq_no, " JR_SQLITE_SEQ_PENDING
        " FROM jobs WHERE id IN w AND id <> ?1 ORDER BY seq_no DESC LIMIT 1",
    /* the last job of sequence ?2 before job ?1, its last, that holds
     * it: ?1 ended (cancelled while the jobs before it were pending),
     * reached back through the waits of ?1 and of the jobs before it
     * that ended too (an edge of a cancelled job stays: flow.c) */
    [S_SEQ_BEFORE] =
        "WITH RECURSIVE w(id) AS (SELECT ?1 UNION"
        " SELECT d.parent_id FROM w JOIN jobs c ON c.id = w.id"
        " JOIN job_deps d ON d.child_id = w.id JOIN jobs j"
        " ON j.id = d.parent_id WHERE j.sequence_key = ?2"
        " AND c.state NOT IN ('queued', 'running', 'waiting')"
        " AND NOT (c.state = 'dead' AND c.seq_fail = 'block'))"
        " SELECT id, " JR_SQLITE_SEQ_HOLDS ", seq_fail, seq_no, " JR_SQLITE_SEQ_PENDING
        " FROM jobs WHERE id IN w AND id <> ?1 AND " JR_SQLITE_SEQ_HOLDS
        " ORDER BY seq_no DESC LIMIT 1",
    [S_SEQ_SET] =
        "UPDATE jobs SET sequence_key = ?2, seq_no = ?3, seq_fail = ?4,"
        " seq_last = 1 WHERE id = ?1 AND state = 'queued'"
        " AND sequence_key IS NULL AND parents_left = 0",
    /* the one before, no longer the last */
    [S_SEQ_UNLAST] =
        "UPDATE jobs SET seq_last = NULL WHERE id = ?1 AND seq_last = 1",
    /* a job behind a tail with on_failure dead dies with it; else it
     * runs after it (a tail with block holds it: flow.c's HELD); in a
     * queue that may be fair, whether it holds a tag (to be given back;
     * RETURNING costs a push of a plain queue's sequence a fifth) */
#define SEQ_WAIT "UPDATE jobs SET state = 'waiting', parents_left = 1," \
    " on_parent_failure = ?2 WHERE id = ?1 AND state = 'queued'"
    [S_SEQ_WAIT] = SEQ_WAIT,
    [S_SEQ_WAIT_T] = SEQ_WAIT " RETURNING fair_tag IS NOT NULL",
    /* a job put to wait holds no tag of its fair key (its turn given
     * back first when it can be: fairreplace.c) */
    [S_SEQ_UNTAG] =
        "UPDATE jobs SET fair_tag = NULL, fair_w = NULL WHERE id = ?1"
        " AND fair_tag IS NOT NULL",
    /* whether a job of ids ?1 to ?2 is in a fair queue (keyed) */
    [S_SEQ_FAIR] =
        "SELECT 1 FROM jobs WHERE id BETWEEN ?1 AND ?2"
        " AND fair_key IS NOT NULL LIMIT 1",
    /* on_conflict cancel_running: the running job of sequence ?1 is
     * cancelled, as admin.c's cancel of a running job */
    [S_SEQ_CANCEL] =
        "UPDATE jobs SET cancel_requested = 1, updated_at = ?2"
        " WHERE sequence_key = ?1 AND " JR_SQLITE_SEQ_IN_HEADS " AND state = 'running'",
    /* on_conflict replace: the pending last job ?1 takes the push's
     * payload ?2 (sealed: its stub, the bytes ?6) and run_at ?3, and the
     * limit key of job ?5 (the push, inserted: its key as given, else
     * its payload's) */
    [S_SEQ_REPLACE] =
        "UPDATE jobs SET payload = ?2, sealed = ?6, run_at = ?3,"
        " updated_at = ?4, limit_key = (SELECT p.limit_key FROM jobs p"
        " WHERE p.id = ?5) WHERE id = ?1 AND " JR_SQLITE_SEQ_PENDING,
    /* the job just pushed, when the pending one took its place */
    [S_SEQ_DROP] =
        "DELETE FROM jobs WHERE id = ?1 AND state = 'queued'"
        " AND sequence_key IS NULL",
    /* the successes (ids ?1, JSON) of jobs of a sequence with a job
     * behind them (flow bit 1 alone: children, no batch) */
#define SEQ_DONE_ROWS "id IN (SELECT value FROM json_each(?1))" \
    " AND state = 'running' AND locked_by = ?2 AND result_ttl IS NULL" \
    " AND flow = 1 AND sequence_key IS NOT NULL"
    /* their edges, as flow.c's S_FLOW_DEPS_END for a success, read
     * before the rows go, in the same transaction (the writer's): the
     * children and parents of the edges not settled yet ... */
    [S_SEQ_DEPS_KIDS] =
        "SELECT d.child_id, d.parent_id FROM job_deps d JOIN jobs j"
        " ON j.id = d.parent_id WHERE j.id IN (SELECT value FROM"
        " json_each(?1)) AND j.state = 'running' AND j.locked_by = ?2"
        " AND j.result_ttl IS NULL AND j.flow = 1"
        " AND j.sequence_key IS NOT NULL AND d.parent_state IS NULL",
    /* ... then settled by their parents (ids ?1, JSON): the same rows.
     * Not an UPDATE ... RETURNING: SQLite runs RETURNING as a trigger
     * that buffers each row in a table of its own, 40% of the UPDATE;
     * nor a DELETE ... RETURNING, which loads every column of a deleted
     * row */
    [S_SEQ_DEPS_SET] =
        "UPDATE job_deps SET parent_state = 'completed', parent_result = NULL"
        " WHERE parent_id IN (SELECT value FROM json_each(?1))"
        " AND parent_state IS NULL",
    /* and the rows, deleted as a plain success is */
    [S_SEQ_DONE] = "DELETE FROM jobs WHERE " SEQ_DONE_ROWS,
    /* the same with round.c's plain successes (S_DONE_MANY) of ?1 */
    [S_SEQ_DONE_ALL] =
        "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))"
        " AND state = 'running' AND locked_by = ?2 AND result_ttl IS NULL"
        " AND (flow = 0 OR (flow = 1 AND sequence_key IS NOT NULL))",
    /* the children (ids ?1, JSON) each of whose ?2 parents just
     * completed, as flow.c's S_FLOW_EDGE and S_FLOW_PARENTS for a
     * success (SET reads the old row). A child with one edge (a
     * sequence's next job) has it just completed: its job.parents is
     * made from the index job_deps_child alone, without the edge's row
     * and the aggregate of json_group_object (4 of 29 thousand
     * instructions a job) */
    [S_SEQ_NEXT] =
        "UPDATE jobs SET parents_left = parents_left - ?2,"
        " state = CASE WHEN parents_left <= ?2 THEN 'queued'"
        "  ELSE 'waiting' END, fair_tag = NULL,"
        " parents = CASE WHEN parents_left <= ?2 THEN coalesce((SELECT"
        "  CASE WHEN count(*) = 1 THEN json_object(CAST(max(d.parent_id)"
        "  AS TEXT), json_object('state', 'completed')) END FROM job_deps d"
        "  WHERE d.child_id = jobs.id), (SELECT"
        "  json_group_object(CAST(d.parent_id AS TEXT), CASE WHEN"
        "  d.parent_result IS NULL THEN json_object('state', d.parent_state)"
        "  ELSE json_object('state', d.parent_state, 'result',"
        "  json(d.parent_result)) END) FROM job_deps d"
        "  WHERE d.child_id = jobs.id AND d.parent_state IS NOT NULL))"
        "  ELSE parents END,"
        " updated_at = ?3 WHERE id IN (SELECT value FROM json_each(?1))"
        " AND state = 'waiting'",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Job id, put to wait behind its sequence, takes no turn of its fair key
 * (docs/queues.md, "Fair share": a job not ready takes none; the claim
 * after it is queued tags it): its turn back when its tag is its key's
 * last, else that turn stays spent (a hole in the key's tags), and its
 * tag dropped either way. */
static int
untag(jr_backend *b, int64_t id, jr_err *err)
{
    sqlite3_stmt *s;

    if (jr_sqlite_fair_give(b, id, err) < 0 ||
        (s = stmt(b, S_SEQ_UNTAG, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    return run(b, s, err, "putting a job in a sequence") < 0 ? -1 : 0;
}

int
jr_sqlite_seq_fair(jr_backend *b, int64_t lo, int64_t hi, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_FAIR, err);
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, lo);
    sqlite3_bind_int64(s, 2, hi);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "looking up a batch's fair keys");
    return rc == SQLITE_ROW;
}

int
jr_sqlite_seq_give(jr_backend *b, int64_t id, jr_err *err)
{
    sqlite3_stmt *s;
    int rc = jr_sqlite_fair_give(b, id, err);

    if (rc <= 0)
        return rc;
    if ((s = stmt(b, S_SEQ_UNTAG, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    return run(b, s, err, "putting a job in a sequence") < 0 ? -1 : 0;
}

/* Reads one job's row of S_SEQ_TAIL's or S_SEQ_AFTER's columns. */
static void
tail_row(sqlite3_stmt *s, int64_t *tail, int *holds, int *dead,
         int64_t *no, int *pending)
{
    *tail = sqlite3_column_int64(s, 0);
    *holds = sqlite3_column_int(s, 1);
    *dead = col_text(s, 2) && strcmp(col_text(s, 2), "dead") == 0;
    *no = sqlite3_column_int64(s, 3);
    *pending = sqlite3_column_int(s, 4);
}

/* When the job pushed last is gone (pruned after its cancel, say) and
 * the last one left in jobs_seq_head holds the sequence: the last job
 * waiting behind that one, if any, is the tail. */
static int
tail_after(jr_backend *b, const char *key, int64_t *tail, int *holds,
           int *dead, int64_t *no, int *pending, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_AFTER, err);
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, *tail);
    bind_text(s, 2, key);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        tail_row(s, tail, holds, dead, no, pending);
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading a sequence");
}

/* When the job pushed last has ended but jobs before it may not have
 * (it was cancelled while they were pending): the last of those that
 * holds the sequence, if any, is the one to wait for. *no stays the
 * place of the one pushed last, so that a new job's place comes after
 * it. */
static int
tail_before(jr_backend *b, const char *key, int64_t *tail, int *holds,
            int *dead, int *pending, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_BEFORE, err);
    int64_t no;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, *tail);
    bind_text(s, 2, key);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        tail_row(s, tail, holds, dead, &no, pending);
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading a sequence");
}

/* The sequence's last job: *tail its id (0: none), *holds whether it
 * holds the sequence, *dead whether its on_failure is dead, *no its
 * place, *last whether it is the job pushed last (seq_last), *lastid
 * that one's id (*tail is the one before it that holds the sequence
 * when the last ended before them). */
static int
tail_of(jr_backend *b, const char *key, int64_t *tail, int *holds,
        int *dead, int64_t *no, int *pending, int *last, int64_t *lastid,
        jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_TAIL, err);
    int rc;

    *tail = *no = *lastid = 0;
    *holds = *dead = *pending = *last = 0;
    if (s == NULL)
        return -1;
    bind_text(s, 1, key);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        tail_row(s, tail, holds, dead, no, pending);
        *last = sqlite3_column_int(s, 5);
        *lastid = *tail;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading a sequence");
    if (rc == SQLITE_ROW && *last && !*holds)
        return tail_before(b, key, tail, holds, dead, pending, err);
    return rc == SQLITE_ROW && !*last && *holds ?
           tail_after(b, key, tail, holds, dead, no, pending, err) : 0;
}

/* on_conflict (docs/queues.md, "Newer replaces older"): cancel_running
 * cancels the sequence's running job (*cancelled: whether there was
 * one); replace and cancel_running move a pending last job to p's
 * payload and run_at and drop the job just pushed (*id), which then is
 * the last one's. Returns 1 when it was replaced, 0 when the job is to
 * go into the sequence, -1 on error. */
static int
seq_conflict(jr_backend *b, const jr_push *p, int64_t *id, int64_t tail,
             int pending, double now, int *cancelled, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    *cancelled = 0;
    if (p->on_conflict == JR_CONFLICT_CANCEL_RUNNING) {
        if ((s = stmt(b, S_SEQ_CANCEL, err)) == NULL)
            return -1;
        bind_text(s, 1, p->sequence);
        sqlite3_bind_double(s, 2, now);
        if ((*cancelled = run(b, s, err, "cancelling a sequence's running "
                              "job")) < 0)
            return -1;
    }
    if (!pending || (s = stmt(b, S_SEQ_REPLACE, err)) == NULL)
        return pending ? -1 : 0;
    sqlite3_bind_int64(s, 1, tail);
    jr_sqlite_bind_sealed(s, 2, 6, p->payload ? p->payload : "{}");
    sqlite3_bind_double(s, 3, p->run_at > 0 ? p->run_at : now + p->run_in);
    sqlite3_bind_double(s, 4, now);
    sqlite3_bind_int64(s, 5, *id);
    if ((rc = run(b, s, err, "replacing a sequence's job")) <= 0)
        return rc;
    /* in a fair queue: the dropped job's turn back first (the last one
     * given), then the last job keyed and tagged by its new payload */
    if (jr_sqlite_fair_give(b, *id, err) < 0 ||
        jr_sqlite_fair_replaced(b, tail, now, err) < 0 ||
        (s = stmt(b, S_SEQ_DROP, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, *id);
    if (run(b, s, err, "replacing a sequence's job") < 0)
        return -1;
    *id = tail;
    return 1;
}

int
jr_sqlite_seq_link(jr_backend *b, const jr_push *p, int64_t *idp,
                   double now, jr_err *err)
{
    int64_t tail, no, lastid, id = *idp;
    int holds, dead, pending, last, cancelled = 0, tagged, plain, rc;
    sqlite3_stmt *s;

    if (tail_of(b, p->sequence, &tail, &holds, &dead, &no, &pending,
                &last, &lastid, err) < 0)
        return -1;
    if (p->on_conflict != JR_CONFLICT_KEEP &&
        (rc = seq_conflict(b, p, idp, tail, pending, now, &cancelled,
                           err)) != 0) {
        if (rc > 0 && p->outcome != NULL)
            *p->outcome = JR_PUSH_REPLACED;
        return rc < 0 ? -1 : 0;
    }
    if (p->outcome != NULL)
        *p->outcome = cancelled ? JR_PUSH_SUPERSEDED : JR_PUSH_NEW;
    if ((s = stmt(b, S_SEQ_SET, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, p->sequence);
    sqlite3_bind_int64(s, 3, no + 1);
    bind_text(s, 4, jr_seq_fail_name(p->seq_fail));
    if ((rc = run(b, s, err, "putting a job in a sequence")) < 0)
        return -1;
    if (rc == 0)
        return jr_fail(err, JR_EINPUT, "job '%s': a job in a sequence is a "
                       "plain new job", p->name);
    if (last) {                 /* the new job is the last now */
        if ((s = stmt(b, S_SEQ_UNLAST, err)) == NULL)
            return -1;
        sqlite3_bind_int64(s, 1, lastid);
        if (run(b, s, err, "putting a job in a sequence") < 0)
            return -1;
    }
    if (tail == 0 || !holds)
        return 0;               /* nothing before it to wait for */
    /* the push's queue, stamped in this transaction, in fair_seen: not
     * fair, and no name's weights there (a job queued again, of no
     * queue here, has no tag: admin.c, rerun.c) */
    plain = strcmp(p->queue ? p->queue : "default", b->fair_seen) == 0 &&
            !b->fair_is && !b->fair_named;
    if ((s = stmt(b, plain ? S_SEQ_WAIT : S_SEQ_WAIT_T, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    bind_text(s, 2, dead ? "dead" : "run");
    rc = sqlite3_step(s);
    tagged = rc == SQLITE_ROW && sqlite3_column_int(s, 0);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "putting a job in a sequence");
    if (tagged && untag(b, id, err) < 0)
        return -1;
    return jr_sqlite_flow_wait(b, p, id, tail, now, err);
}

static int
cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* The rows s returns (columns 0 and 1, ids) as pairs appended to *v (*n
 * pairs, *cap its room in pairs, grown as needed). */
static int
pairs_of(jr_backend *b, sqlite3_stmt *s, int64_t **v, int *n, int *cap,
         jr_err *err)
{
    int64_t *grown;
    int rc;

    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            if ((grown = realloc(*v, (size_t)*cap * 2 * sizeof *grown))
                == NULL) {
                sqlite3_reset(s);
                return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
            }
            *v = grown;
        }
        (*v)[2 * *n] = sqlite3_column_int64(s, 0);
        (*v)[2 * (*n)++ + 1] = sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "completing jobs of a sequence");
}

/* Settles the edges read (v[0..2n): child, parent pairs) as their
 * parents' success; js has room for n ids. */
static int
edges_end(jr_backend *b, const int64_t *v, int n, char *js, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_DEPS_SET, err);
    char *p = js;
    int i;

    if (s == NULL)
        return -1;
    *p++ = '[';
    for (i = 0; i < n; i++) {
        if (i > 0)
            *p++ = ',';
        p += jr_put_int64(p, v[2 * i + 1]);
    }
    strcpy(p, "]");
    bind_text(s, 1, js);
    return run(b, s, err, "completing jobs of a sequence") < 0 ? -1 : 0;
}

/* Readies the children in s[0..n) (JSON), each of which had k parents
 * just completed. */
static int
next_run(jr_backend *b, const char *js, int k, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_NEXT, err);

    if (s == NULL)
        return -1;
    bind_text(s, 1, js);
    sqlite3_bind_int(s, 2, k);
    sqlite3_bind_double(s, 3, now);
    return run(b, s, err, "readying jobs of a sequence") < 0 ? -1 : 0;
}

/* Readies the children (kids[0..n), sorted) of the jobs that just
 * completed: one statement for those with one parent among them (a
 * sequence's next job), one each for the others. js has room for n
 * ids. */
static int
next_all(jr_backend *b, const int64_t *kids, int n, char *js, double now,
         jr_err *err)
{
    char *p = js, one[48];
    int i, k;

    *p++ = '[';
    for (i = 0; i < n; i = k) {
        for (k = i + 1; k < n && kids[k] == kids[i]; k++)
            ;
        if (k - i == 1) {
            if (p != js + 1)
                *p++ = ',';
            p += jr_put_int64(p, kids[i]);
            continue;
        }
        snprintf(one, sizeof one, "[%lld]", (long long)kids[i]);
        if (next_run(b, one, k - i, now, err) < 0)
            return -1;
    }
    strcpy(p, "]");
    return p == js + 1 ? 0 : next_run(b, js, 1, now, err);
}

/* The successes ids (JSON), ours by token, of jobs of a sequence with
 * a job behind them, and with all also the plain ones (flow 0): their
 * edges settled, the rows deleted, the jobs behind them readied.
 * Returns how many rows were deleted; b->seq_seen says whether there
 * were jobs behind them. */
int
jr_sqlite_seq_done(jr_backend *b, const char *token, const char *ids,
                   int all, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SEQ_DEPS_KIDS, err);
    int64_t *v = NULL;
    char *js = NULL;
    int n = 0, cap = 0, rc, i;

    if (s == NULL)
        return -1;
    bind_text(s, 1, ids);
    bind_text(s, 2, token);
    rc = pairs_of(b, s, &v, &n, &cap, err);
    if (rc == 0 && n > 0 && (js = malloc((size_t)n * 22 + 3)) == NULL)
        rc = jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if (rc < 0 || (n > 0 && edges_end(b, v, n, js, err) < 0) ||
        (s = stmt(b, all ? S_SEQ_DONE_ALL : S_SEQ_DONE, err)) == NULL) {
        free(js);
        free(v);
        return -1;
    }
    bind_text(s, 1, ids);
    bind_text(s, 2, token);
    rc = run(b, s, err, "completing jobs of a sequence");
    b->seq_seen = n > 0;
    if (rc > 0 && n > 0) {
        for (i = 0; i < n; i++)         /* the children, in place */
            v[i] = v[2 * i];
        qsort(v, (size_t)n, sizeof *v, cmp_id);
        if (next_all(b, v, n, js, now, err) < 0)
            rc = -1;
    }
    free(js);
    free(v);
    return rc;
}
