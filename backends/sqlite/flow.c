/* flow.c - dependencies on SQLite (docs/workflows.md): the parents a
 * pushed job waits for (link), what a job's end does to the jobs waiting
 * for it (settle: the last parent makes a child queued, a failed one
 * cancels it or kills it by its on_parent_failure) and hands on to its
 * batch (batch.c), and the read of show's links. Everything runs in the
 * caller's transaction, so a job's end and what it decides commit
 * together. Owns the dependency statements; uses sqlite_int.h and
 * batch.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"

/* A failed parent (state ?3 not completed) ends the child unless its
 * on_parent_failure is run. */
#define FAILS "(?3 <> 'completed' AND coalesce(on_parent_failure, 'cancel')" \
              " <> 'run')"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FLOW_WAIT, S_FLOW_WAIT_T, S_FLOW_UNTAG, S_FLOW_PARENT_MARK, S_FLOW_DEP_ADD, S_FLOW_DEPS_END,
       S_FLOW_EDGE, S_FLOW_HOLD, S_FLOW_PASS, S_FLOW_PARENTS, S_FLOW_FLAG, S_FLOW_LINKS,
       S_COUNT };

/* A job of a sequence whose parent ?2 ended dead (?3) with seq_fail
 * block waits on (docs/queues.md, "Sequences"). */
#define HELD "(?3 = 'dead' AND sequence_key IS NOT NULL AND EXISTS" \
             " (SELECT 1 FROM jobs p WHERE p.id = ?2" \
             " AND p.seq_fail = 'block'))"


static const char *const sql_text[S_COUNT] = {
#define FLOW_WAIT "UPDATE jobs SET state = 'waiting', parents_left = ?2," \
    " on_parent_failure = ?3 WHERE id = ?1 AND state = 'queued'"
    [S_FLOW_WAIT] = FLOW_WAIT,
    /* in a queue that may be fair, whether it holds a tag, to be given
     * back (as sequence.c's S_SEQ_WAIT_T) */
    [S_FLOW_WAIT_T] = FLOW_WAIT " RETURNING fair_tag IS NOT NULL",
    /* a job put to wait for its parents holds no tag of its fair key
     * (its turn given back first when it can be: fairreplace.c) */
    [S_FLOW_UNTAG] =
        "UPDATE jobs SET fair_tag = NULL, fair_w = NULL WHERE id = ?1"
        " AND fair_tag IS NOT NULL",
    [S_FLOW_PARENT_MARK] =
        "UPDATE jobs SET flow = flow | 1 WHERE id = ?1 RETURNING state,"
        " result",
    [S_FLOW_DEP_ADD] =
        "INSERT INTO job_deps (parent_id, child_id, parent_state,"
        " parent_result) VALUES (?1, ?2, ?3, ?4)",
    [S_FLOW_DEPS_END] =
        "UPDATE job_deps SET parent_state = ?2, parent_result = ?3"
        " WHERE parent_id = ?1 AND parent_state IS NULL RETURNING child_id",
    [S_FLOW_EDGE] =
        "UPDATE jobs SET parents_left = parents_left - 1,"
        " state = CASE WHEN " FAILS " AND on_parent_failure = 'dead'"
        "  THEN 'dead' WHEN " FAILS " THEN 'cancelled'"
        "  WHEN parents_left <= 1 THEN 'queued' ELSE 'waiting' END,"
        " fair_tag = NULL,"
        " finished_at = CASE WHEN " FAILS " THEN ?4 END,"
        " died_at = CASE WHEN " FAILS " AND on_parent_failure = 'dead'"
        "  THEN ?4 END,"
        " last_error = CASE WHEN " FAILS
        "  THEN 'parent ' || ?2 || ' ended ' || ?3 ELSE last_error END,"
        " updated_at = ?4"
        " WHERE id = ?1 AND state = 'waiting' AND NOT " HELD
        " RETURNING state",
    /* a held edge goes back to unsettled: the parent retried (dead
     * retry, unblock) and ending again reaches the child again */
    [S_FLOW_HOLD] =
        "UPDATE job_deps SET parent_state = NULL, parent_result = NULL"
        " WHERE parent_id = ?2 AND child_id = ?1 AND EXISTS (SELECT 1"
        " FROM jobs WHERE id = ?1 AND state = 'waiting' AND " HELD ")",
    /* a job of a sequence whose parent ?2 was cancelled while it waited
     * for the job before it waits for that one instead */
    [S_FLOW_PASS] =
        "INSERT OR IGNORE INTO job_deps (parent_id, child_id)"
        " SELECT d.parent_id, ?1 FROM job_deps d WHERE d.child_id = ?2"
        " AND d.parent_state IS NULL AND EXISTS (SELECT 1 FROM jobs"
        " WHERE id = ?1 AND state = 'waiting' AND sequence_key IS NOT NULL)"
        " LIMIT 1",
    [S_FLOW_PARENTS] =
        "UPDATE jobs SET parents = (SELECT json_group_object("
        " CAST(parent_id AS TEXT), CASE WHEN parent_result IS NULL"
        "  THEN json_object('state', parent_state)"
        "  ELSE json_object('state', parent_state, 'result',"
        "  json(parent_result)) END)"
        " FROM job_deps WHERE child_id = ?1 AND parent_state IS NOT NULL)"
        " WHERE id = ?1",
    [S_FLOW_FLAG] = "SELECT flow FROM jobs WHERE id = ?1",
    [S_FLOW_LINKS] =
        "SELECT 'p', d.parent_id, coalesce(d.parent_state, j.state, 'gone')"
        " FROM job_deps d LEFT JOIN jobs j ON j.id = d.parent_id"
        " WHERE d.child_id = ?1"
        " UNION ALL SELECT 'c', d.child_id, coalesce(j.state, 'gone')"
        " FROM job_deps d LEFT JOIN jobs j ON j.id = d.child_id"
        " WHERE d.parent_id = ?1"
        " UNION ALL SELECT 'b', batch_id, NULL FROM batch_jobs"
        " WHERE job_id = ?1 ORDER BY 1 DESC, 2",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* A growable list of ids. */
typedef struct idlist {
    int64_t *v;
    int      n, cap;
} idlist;

static int
ids_add(idlist *l, int64_t id, jr_err *err)
{
    int64_t *grown;

    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        if ((grown = realloc(l->v, (size_t)l->cap * sizeof *grown)) == NULL)
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        l->v = grown;
    }
    l->v[l->n++] = id;
    return 0;
}

static int
cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Steps s, which returns at most one row, into *out (column 0 as text,
 * copied into buf, or as an int64 when buf is NULL). Returns 1 with a
 * row, 0 without, -1 on error. */
int
jr_sqlite_step_one(jr_backend *b, sqlite3_stmt *s, char *buf, size_t size,
                   int64_t *out, jr_err *err, const char *what)
{
    int rc = sqlite3_step(s), got = rc == SQLITE_ROW;

    if (got && buf != NULL)
        snprintf(buf, size, "%s", col_text(s, 0) ? col_text(s, 0) : "");
    else if (got && out != NULL)
        *out = sqlite3_column_int64(s, 0);
    while (rc == SQLITE_ROW)
        rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, what);
    return got;
}

/* A job of a sequence held by its parent's death (HELD): its edge is
 * unsettled again. */
static int
hold(jr_backend *b, int64_t child, int64_t parent, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_HOLD, err);

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, child);
    sqlite3_bind_int64(s, 2, parent);
    bind_text(s, 3, "dead");
    return run(b, s, err, "holding a sequence") < 0 ? -1 : 0;
}

/* A job of a sequence whose parent was cancelled while it waited for
 * the job before it (S_FLOW_PASS): 1 when it now waits for that one. */
static int
pass_on(jr_backend *b, int64_t child, int64_t parent, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_PASS, err);

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, child);
    sqlite3_bind_int64(s, 2, parent);
    return run(b, s, err, "passing a sequence on");
}

/* One parent's end (state pst) reaches a waiting child. *ns gets the
 * child's new state, "" when it was not waiting. */
static int
edge(jr_backend *b, int64_t child, int64_t parent, const char *pst,
     double now, char *ns, size_t size, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_EDGE, err);
    int rc;

    ns[0] = '\0';
    if (s == NULL)
        return -1;
    if (strcmp(pst, "cancelled") == 0 &&
        (rc = pass_on(b, child, parent, err)) != 0)
        return rc < 0 ? -1 : 0;         /* waits on for the one before */
    sqlite3_bind_int64(s, 1, child);
    sqlite3_bind_int64(s, 2, parent);
    bind_text(s, 3, pst);
    sqlite3_bind_double(s, 4, now);
    if ((rc = jr_sqlite_step_one(b, s, ns, size, NULL, err,
                                 "readying a job")) < 0)
        return rc;
    if (rc == 0 && strcmp(pst, "dead") == 0)
        return hold(b, child, parent, err);
    if (rc == 0)
        return 0;
    /* a child made dead is retried by hand (dead retry): it sees the
     * parents that had ended when it died, as a queued one sees all */
    if (strcmp(ns, "queued") != 0 && strcmp(ns, "dead") != 0)
        return 0;
    if ((s = stmt(b, S_FLOW_PARENTS, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, child);
    return run(b, s, err, "readying a job") < 0 ? -1 : 0;
}

/* The children of parent whose edge its end (st, result) just decided,
 * sorted, into l. */
static int
deps_end(jr_backend *b, int64_t parent, const char *st, const char *result,
         idlist *l, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_DEPS_END, err);
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, parent);
    bind_text(s, 2, st);
    bind_text(s, 3, result);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (ids_add(l, sqlite3_column_int64(s, 0), err) < 0) {
            sqlite3_reset(s);
            return -1;
        }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "ending a parent");
    if (l->n > 1)
        qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_id);
    return 0;
}

int
jr_sqlite_flow_settle(jr_backend *b, int64_t id, const char *st,
                      const char *result, double now, jr_err *err)
{
    idlist todo = {0}, kids = {0};
    char *sts = NULL, ns[16];
    int i = 0, k, rc = ids_add(&todo, id, err);

    /* todo[i]'s state: st for the first, then 'c'ancelled or 'd'ead */
    while (rc == 0 && i < todo.n) {
        const char *s = i == 0 ? st : sts[i] == 'd' ? "dead" : "cancelled";
        char *grown;
        kids.n = 0;
        rc = deps_end(b, todo.v[i], s, i == 0 ? result : NULL, &kids, err);
        for (k = 0; rc == 0 && k < kids.n; k++) {
            rc = edge(b, kids.v[k], todo.v[i], s, now, ns, sizeof ns, err);
            if (rc < 0 || (strcmp(ns, "dead") && strcmp(ns, "cancelled")))
                continue;
            if ((grown = realloc(sts, (size_t)todo.n + 1)) == NULL)
                rc = jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
            else if ((rc = ids_add(&todo, kids.v[k], err)) == 0)
                (sts = grown)[todo.n - 1] = ns[0];
        }
        if (rc == 0)
            rc = jr_sqlite_batch_end(b, todo.v[i], s,
                                     i == 0 ? result : NULL, now, err);
        i++;
    }
    free(todo.v);
    free(kids.v);
    free(sts);
    return rc < 0 ? -1 : 0;
}

int
jr_sqlite_flow_check(jr_backend *b, int64_t id, const char *st,
                     double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_FLAG, err);
    int64_t flow = 0;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = jr_sqlite_step_one(b, s, NULL, 0, &flow, err,
                                 "reading a job")) <= 0)
        return rc;
    return flow != 0 ? jr_sqlite_flow_settle(b, id, st, NULL, now, err) : 0;
}

/* ---- link: the pushed job's batch and parents ---- */

/* The parent ids of p[i], sorted and unique, into l. */
static int
parents_of(const jr_push *p, int i, const int64_t *ids, idlist *l,
           jr_err *err)
{
    int k, m;

    for (k = 0; k < p[i].nafter; k++)
        if (ids_add(l, p[i].after[k], err) < 0)
            return -1;
    for (k = 0; k < p[i].nafter_local; k++) {
        if (p[i].after_local[k] < 0 || p[i].after_local[k] >= i)
            return jr_fail(err, JR_EINPUT, "job '%s': after: %d is not an "
                           "earlier job of the push", p[i].name,
                           p[i].after_local[k]);
        if (ids_add(l, ids[p[i].after_local[k]], err) < 0)
            return -1;
    }
    if (l->n > 1)
        qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_id);
    for (k = m = 0; k < l->n; k++)
        if (m == 0 || l->v[m - 1] != l->v[k])
            l->v[m++] = l->v[k];
    l->n = m;
    return 0;
}

/* Job id (p) waits for parent: the edge, the parent's flow bit, and
 * at once the parent's end when it already ended. */
int
jr_sqlite_flow_wait(jr_backend *b, const jr_push *p, int64_t id,
                    int64_t parent, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_PARENT_MARK, err);
    char pst[16], ns[16], *res = NULL;
    int rc, final;

    if (s == NULL)
        return -1;
    if (parent == id)
        return jr_fail(err, JR_EINPUT, "job '%s': it cannot wait for "
                       "itself", p->name);
    sqlite3_bind_int64(s, 1, parent);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        snprintf(pst, sizeof pst, "%s", col_text(s, 0));
        res = col_text(s, 1) ? strdup(col_text(s, 1)) : NULL;
        rc = sqlite3_step(s);
    } else if (rc == SQLITE_DONE) {
        sqlite3_reset(s);
        return jr_fail(err, JR_EINPUT, "job '%s': unknown parent id %lld",
                       p->name, (long long)parent);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        free(res);
        return jr_sqlite_fail(b, err, "linking a job");
    }
    final = !strcmp(pst, "completed") || !strcmp(pst, "dead") ||
            !strcmp(pst, "cancelled") || !strcmp(pst, "expired");
    if ((s = stmt(b, S_FLOW_DEP_ADD, err)) != NULL) {
        sqlite3_bind_int64(s, 1, parent);
        sqlite3_bind_int64(s, 2, id);
        bind_text(s, 3, final ? pst : NULL);
        bind_text(s, 4, final ? res : NULL);
        rc = run(b, s, err, "linking a job");
    }
    free(res);
    if (s == NULL || rc < 0)
        return -1;
    if (!final)
        return 0;
    if (edge(b, id, parent, pst, now, ns, sizeof ns, err) < 0)
        return -1;
    if (strcmp(ns, "dead") == 0 || strcmp(ns, "cancelled") == 0)
        return jr_sqlite_batch_end(b, id, ns, NULL, now, err);
    return 0;
}

/* Job id (push p) waits for its n parents; in a fair queue it takes no
 * turn of its key while it waits (docs/queues.md, "Fair share": a job
 * not ready takes none): its push's turn back when its tag is its key's
 * last, else that turn stays spent (a hole in the key's tags), and its
 * tag dropped either way; once queued, the next claim of its queue tags
 * it (S_FLOW_EDGE leaves it untagged). */
static int
wait_parents(jr_backend *b, const jr_push *p, int64_t id, int n,
             jr_err *err)
{
    sqlite3_stmt *s;
    int plain, rc, tagged, waits;

    /* the push's queue, stamped in this transaction, in fair_seen: not
     * fair, and no name's weights there (sequence.c's test) */
    plain = strcmp(p->queue ? p->queue : "default", b->fair_seen) == 0 &&
            !b->fair_is && !b->fair_named;
    if ((s = stmt(b, plain ? S_FLOW_WAIT : S_FLOW_WAIT_T, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, n);
    bind_text(s, 3, jr_opf_name(p->on_parent_failure ?
                                p->on_parent_failure : b->opf));
    rc = sqlite3_step(s);
    tagged = rc == SQLITE_ROW && sqlite3_column_int(s, 0);
    waits = plain ? rc == SQLITE_DONE && sqlite3_changes(b->db) > 0 :
            rc == SQLITE_ROW;
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "linking a job");
    if (!waits)
        return jr_fail(err, JR_EINPUT, "job '%s': a job with after is "
                       "a plain new job", p->name);
    if (!tagged)
        return 0;
    if (jr_sqlite_fair_give(b, id, err) < 0 ||
        (s = stmt(b, S_FLOW_UNTAG, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    return run(b, s, err, "linking a job") < 0 ? -1 : 0;
}

/* The workflow options of p[i], just inserted as ids[i]. */
static int
link_one(jr_backend *b, const jr_push *p, int i, int64_t *ids,
         double now, jr_err *err)
{
    idlist l = {0};
    int64_t bid = p[i].batch;
    int k, rc = 0;

    if (p[i].batch_new != NULL) {
        if (jr_sqlite_batch_make(b, p[i].batch_new, now, err) < 0)
            return -1;
        bid = p[i].batch_new->id;
    }
    if (bid != 0 && jr_sqlite_batch_join(b, &p[i], ids[i], bid, err) < 0)
        return -1;
    if (parents_of(p, i, ids, &l, err) < 0) {
        free(l.v);
        return -1;
    }
    if (l.n > 0)
        rc = wait_parents(b, &p[i], ids[i], l.n, err);
    if (rc >= 0 && p[i].sequence != NULL)
        rc = jr_sqlite_seq_link(b, &p[i], &ids[i], now, err);
    for (k = 0; rc >= 0 && k < l.n; k++)
        rc = jr_sqlite_flow_wait(b, &p[i], ids[i], l.v[k], now, err);
    free(l.v);
    return rc < 0 ? -1 : 0;
}

/* 1 if p uses a workflow option or a sequence. */
static int
flow_push(const jr_push *p)
{
    return p->nafter > 0 || p->nafter_local > 0 || p->batch != 0 ||
           p->batch_new != NULL || p->sequence != NULL;
}

/* 1 if p may wait once linked: it goes to the end of a sequence
 * (on_conflict keep: a job that replaces none), or has parents. */
static int
may_wait(const jr_push *p)
{
    return (p->sequence != NULL && p->on_conflict == JR_CONFLICT_KEEP) ||
           p->nafter > 0 || p->nafter_local > 0;
}

int
jr_sqlite_flow_any(const jr_push *p, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (flow_push(&p[i]))
            return 1;
    return 0;
}

int
jr_sqlite_flow_link(jr_backend *b, const jr_push *p, int n,
                    int64_t *ids, double now, jr_err *err)
{
    int64_t lo = 0, hi = 0;
    int i, again = 0;

    for (i = 0; i < n; i++)
        if (p[i].batch_new != NULL)
            p[i].batch_new->id = 0;
    /* a batch's jobs hold the tags of their push, given in push order,
     * and a job put to wait behind its sequence or for its parents gives
     * its turn back only when it was its key's last (sequence.c,
     * wait_parents): a batch with jobs that may wait gives its jobs'
     * turns back first, the last first, so that one waiting leaves no
     * hole in its key's tags; the ones still queued after the links are
     * tagged again, in id order (the push's), as if tagged once linked,
     * with any job between them queued untagged (one a claim would tag).
     * A batch in no fair queue skips both. */
    for (i = 0; n > 1 && i < n && !again; i++)
        again = may_wait(&p[i]);
    for (i = 0; again && i < n; i++) {
        lo = i == 0 || ids[i] < lo ? ids[i] : lo;
        hi = i == 0 || ids[i] > hi ? ids[i] : hi;
    }
    if (again && (again = jr_sqlite_seq_fair(b, lo, hi, err)) < 0)
        return -1;
    for (i = n - 1; again && i >= 0; i--)
        if (jr_sqlite_seq_give(b, ids[i], err) < 0)
            return -1;
    for (i = 0; i < n; i++)
        if (flow_push(&p[i]) && link_one(b, p, i, ids, now, err) < 0)
            return -1;
    if (again && jr_sqlite_fair_tag(b, lo, hi, now, err) < 0)
        return -1;
    return 0;
}

/* ---- the read: a job's links ---- */

int
jr_sqlite_links(jr_backend *b, int64_t id, jr_link_cb cb, void *arg,
                jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FLOW_LINKS, err);
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb(col_text(s, 0)[0], sqlite3_column_int64(s, 1),
               col_text(s, 2), arg) != 0)
            break;
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading a job's links");
}
