/* lease.c - a runner's hold on the jobs it runs: lease renewal, and
 * the rescue of jobs whose lease ran out (their runner lost: requeued,
 * or cancelled if asked, the lost attempt in their history), and of
 * running rows with no lease (a plain INSERT's: no runner holds them). Uses
 * sqlite_int.h; flow.c settles a rescued job's flow. */
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

struct idl {
    int64_t *v;
    int      n;
};

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_RENEW, S_RESCUE_FLOW, S_RESCUE, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_RENEW] =
        "UPDATE jobs SET locked_until = ?2"
        " WHERE state = 'running' AND locked_by = ?1"
        " AND id IN (SELECT value FROM json_each(?3))",
    /* the rescue's cancels of jobs with a flow bit, settled after it */
    [S_RESCUE_FLOW] =
        "SELECT id FROM jobs WHERE state = 'running'"
        " AND (locked_until < ?1 OR locked_until IS NULL)"
        " AND cancel_requested = 1 AND flow <> 0",
    /* the lost attempt joins the history: its runner was the lease's,
     * its worker and generation are not known */
    [S_RESCUE] =
        "UPDATE jobs SET"
        JR_SQLITE_ATTEMPT_LOG(
            "CASE WHEN cancel_requested"
            " THEN 'cancelled: lease expired: runner lost'"
            " ELSE 'lease expired: runner lost' END", "?1",
            "CASE WHEN started_at > 0 THEN ?1 - started_at END",
            "locked_by", "NULL", "NULL")
        " state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued'"
        "  END, fair_tag = NULL,"
        " finished_at = CASE WHEN cancel_requested THEN ?1 END,"
        " last_error = CASE WHEN cancel_requested"
        "  THEN 'cancelled: lease expired: runner lost'"
        "  ELSE 'lease expired: runner lost' END,"
        " locked_by = NULL, locked_until = NULL, updated_at = ?1"
        " WHERE state = 'running'"
        " AND (locked_until < ?1 OR locked_until IS NULL)",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* The ids as a JSON array, for json_each (malloc'd; NULL: no memory). */
static char *
ids_json(const int64_t *ids, int n)
{
    char *t = malloc((size_t)n * 21 + 3), *p = t;
    int i;

    if (t == NULL)
        return NULL;
    *p++ = '[';
    for (i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p += jr_put_int64(p, ids[i]);
    }
    strcpy(p, "]");
    return t;
}

int
jr_sqlite_renew(jr_backend *b, const char *token, double lease,
                const int64_t *ids, int n, jr_err *err)
{
    sqlite3_stmt *s;
    char *list;
    int rc;

    if (n <= 0)
        return 0;
    if ((list = ids_json(ids, n)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: renewing leases: out of memory");
    if (jr_sqlite_begin(b, err) < 0) {
        free(list);
        return -1;
    }
    if ((s = stmt(b, S_RENEW, err)) == NULL) {
        free(list);
        return jr_sqlite_write_end(b, -1, err);
    }
    bind_text(s, 1, token);
    sqlite3_bind_double(s, 2, jr_now() + lease);
    sqlite3_bind_text(s, 3, list, -1, SQLITE_TRANSIENT);
    rc = jr_sqlite_write_end(b, run(b, s, err, "renewing leases"), err);
    free(list);
    return rc;
}

/* The ids the rescue will cancel that have a flow bit, into l. */
static int
rescue_flow(jr_backend *b, double now, struct idl *l, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_RESCUE_FLOW, err);
    int64_t *grown;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_double(s, 1, now);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((grown = realloc(l->v, (size_t)(l->n + 1) * sizeof *grown))
            == NULL) {
            sqlite3_reset(s);
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        }
        (l->v = grown)[l->n++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : jr_sqlite_fail(b, err, "rescuing jobs");
}

int
jr_sqlite_rescue(jr_backend *b, jr_err *err)
{
    sqlite3_stmt *s = NULL;
    struct idl l = {NULL, 0};
    double now = jr_now();
    int i, rc;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    rc = rescue_flow(b, now, &l, err);
    if (rc == 0 && (s = stmt(b, S_RESCUE, err)) == NULL)
        rc = -1;
    if (rc == 0) {
        sqlite3_bind_double(s, 1, now);
        rc = run(b, s, err, "requeueing expired leases");
    }
    for (i = 0; rc >= 0 && i < l.n; i++)
        if (jr_sqlite_flow_settle(b, l.v[i], "cancelled", NULL, now,
                                  err) < 0)
            rc = -1;
    free(l.v);
    return jr_sqlite_write_end(b, rc, err);
}
