/* push.c - pushes: the jobs rows a producer (or a handler's result, or a
 * schedule's fire) inserts, in the open transaction or one of their own;
 * 32 plain pushes in a row as one multi-row INSERT; a job's limit key
 * read from its payload (JR_SQLITE_LIMIT_KEY_OF). Jobs with a unique key
 * go through unique.c. Uses sqlite_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/seqkey.h"
#include "base/util.h"


/* A push's row but its limit key (?9, or JR_SQLITE_LIMIT_KEY_OF), and ")". */
#define INSERT_JOB \
    "INSERT INTO jobs (name, payload, queue, priority, max_retries," \
    " run_at, created_at, updated_at, unique_key, sealed, limit_key)" \
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?10, "

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_INSERT, S_INSERT_BARE, S_INSERT_MANY, S_INSERT_MANY_IDS,
       S_INSERT_MANY_BARE, S_INSERT_MANY_BARE_IDS, S_LIMIT_PATH,
       S_QUEUE_SEEN, S_QUEUE_KNOWN, S_RESULT_TTL, S_EXPIRY, S_TRACE,
       S_COST_OVER, S_COST_SET, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_INSERT] = INSERT_JOB JR_SQLITE_LIMIT_KEY_OF ")",
    /* the same for a job whose name has no limit path: its key is ?9 (a
     * row looks up limit_paths in a subquery of its own, about 2,300
     * instructions; docs/performance.md, "Batch push") */
    [S_INSERT_BARE] = INSERT_JOB "?9)",
    [S_LIMIT_PATH] = "SELECT 1 FROM limit_paths WHERE name = ?1",
    /* what the trigger jobs_queue_known does, for the library's inserts:
     * look, then insert if missing (an insert that finds the row pays the
     * name CHECK first; INSERT ... SELECT from queues fills a temporary
     * table first) */
    [S_QUEUE_SEEN] = "SELECT 1 FROM queues WHERE name = ?1",
    [S_QUEUE_KNOWN] = "INSERT INTO queues (name) VALUES (?1)",
    /* a push's result_ttl: set after its insert (few pushes have one) */
    [S_RESULT_TTL] = "UPDATE jobs SET result_ttl = ?2 WHERE id = ?1",
    /* its expiry and deadline, likewise (NULL: none) */
    [S_EXPIRY] = "UPDATE jobs SET expires_at = ?2, deadline = ?3"
        " WHERE id = ?1",
    /* a push's trace context (docs/tracing.md), the same way */
    [S_TRACE] = "UPDATE jobs SET trace = ?2 || coalesce(' ' || ?3, '')"
                " WHERE id = ?1",
    /* limits by cost: a limit of name ?1 or queue ?2 whose size is
     * below cost ?3 (limit_sizes); then the cost, set after the insert
     * on the job that holds the push (few pushes have one) */
    [S_COST_OVER] =
        "SELECT scope, size, what FROM limit_sizes"
        " WHERE scope IN (?1, 'queue:' || ?2) AND size < ?3"
        " ORDER BY size LIMIT 1",
    [S_COST_SET] =
        "UPDATE jobs SET cost = ?2 WHERE id = ?1"
        " AND state IN ('queued', 'waiting')",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Rows of one multi-row INSERT: a statement's set-up (its cursors, the
 * constant list of the state CHECK, the sqlite_sequence write of
 * AUTOINCREMENT) is paid once for them (docs/performance.md, "Batch push"). */
#define INSERT_ROWS 32
#define INSERT_PARAMS 10        /* ?1..?10 of S_INSERT's row */

/* The VALUES row of S_INSERT (S_INSERT_BARE if bare) INSERT_ROWS times,
 * row k's ?N renumbered ?(10k + N): one text for the row, however
 * S_INSERT changes; with RETURNING id if returning. Malloc'd. */
static char *
insert_many_sql(int bare, int returning)
{
    const char *text = sql_text[bare ? S_INSERT_BARE : S_INSERT];
    const char *row = strstr(text, " VALUES ") + 8, *c;
    size_t len = strlen(text) + (size_t)INSERT_ROWS * (strlen(row) * 2 + 2)
                 + 16;
    char *sql = malloc(len), *o;
    int k;

    if (sql == NULL)
        return NULL;
    o = sql + sprintf(sql, "%.*s", (int)(row - text), text);
    for (k = 0; k < INSERT_ROWS; k++) {
        if (k > 0)
            *o++ = ',';
        for (c = row; *c != '\0'; c++) {
            *o++ = *c;
            if (*c == '?') {
                o += sprintf(o, "%ld", strtol(c + 1, NULL, 10) +
                             (long)k * INSERT_PARAMS);
                while (c[1] >= '0' && c[1] <= '9')
                    c++;
            }
        }
    }
    strcpy(o, returning ? " RETURNING id" : "");
    return sql;
}

/* The multi-row INSERT, with the limit path look-up (paths) or bare,
 * with RETURNING id (ids) or not: made from S_INSERT's text at its first
 * use, then a statement of the cache as any other. */
static sqlite3_stmt *
stmt_many(jr_backend *b, int paths, int ids, jr_err *err)
{
    int which = paths ? (ids ? S_INSERT_MANY_IDS : S_INSERT_MANY) :
                (ids ? S_INSERT_MANY_BARE_IDS : S_INSERT_MANY_BARE);
    sqlite3_stmt *s;
    char *sql;

    if (jr_stmtmap_get(&b->st, &sql_text[which]) != NULL)
        return stmt(b, which, err);
    if ((sql = insert_many_sql(!paths, ids)) == NULL) {
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory for a statement");
        return NULL;
    }
    s = jr_sqlite_prepare(b, &sql_text[which], sql, err);
    free(sql);
    return s;
}

/* Binds p as the row whose parameters start after ?base: a payload
 * sealed as seal writes it as its stub and bytes (jr_sqlite_bind_sealed). */
static void
bind_row(sqlite3_stmt *s, int base, const jr_push *p, double now)
{
    bind_text(s, base + 1, p->name);
    jr_sqlite_bind_sealed(s, base + 2, base + 10, p->payload ? p->payload :
                          "{}");
    bind_text(s, base + 3, p->queue ? p->queue : "default");
    sqlite3_bind_int(s, base + 4, p->priority);
    if (p->max_retries >= 0)
        sqlite3_bind_int(s, base + 5, p->max_retries);
    sqlite3_bind_double(s, base + 6, p->run_at > 0 ? p->run_at :
                        now + p->run_in);
    sqlite3_bind_double(s, base + 7, now);
    bind_text(s, base + 8, p->unique_key);
    bind_text(s, base + 9, p->key);
}

static int
cmp_id(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    return (a > b) - (a < b);
}

/* 1 if a job of p[0..n) without a key of its own has a name its runner
 * gave a limit path (JR_SQLITE_LIMIT_KEY_OF takes its key from the payload), 0 if
 * none, -1 on error. The write lock keeps limit_paths as read until the
 * commit; the last name found without a path is kept till then. */
static int
limit_path_any(jr_backend *b, const jr_push *p, int n, jr_err *err)
{
    sqlite3_stmt *s;
    size_t len;
    int i, rc;

    for (i = 0; i < n; i++) {
        if (p[i].key != NULL || strcmp(p[i].name, b->pathless) == 0)
            continue;
        if ((s = stmt(b, S_LIMIT_PATH, err)) == NULL)
            return -1;
        bind_text(s, 1, p[i].name);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc == SQLITE_ROW)
            return 1;
        if (rc != SQLITE_DONE)
            return jr_sqlite_fail(b, err, "reading limit paths");
        if ((len = strlen(p[i].name)) < sizeof b->pathless)
            memcpy(b->pathless, p[i].name, len + 1);
    }
    return 0;
}

/* What the trigger jobs_queue_known does, when the triggers are off
 * (conn.c, "the schema's triggers"): the job just inserted makes its
 * queue known, once a transaction. */
static int
queue_known(jr_backend *b, const char *queue, jr_err *err)
{
    sqlite3_stmt *s;
    size_t len;
    int rc;

    if (queue == NULL)
        queue = "default";
    if (!b->triggers_off || strcmp(queue, b->queue_known) == 0)
        return 0;
    if ((s = stmt(b, S_QUEUE_SEEN, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "looking up a queue");
    if (rc == SQLITE_DONE) {
        if ((s = stmt(b, S_QUEUE_KNOWN, err)) == NULL)
            return -1;
        bind_text(s, 1, queue);
        if (run(b, s, err, "making a queue known") < 0)
            return -1;
    }
    if ((len = strlen(queue)) < sizeof b->queue_known)
        memcpy(b->queue_known, queue, len + 1);
    return 0;
}

/* Inserts the INSERT_ROWS plain pushes p in one statement; ids (may be
 * NULL) gets their ids, read back with RETURNING (AUTOINCREMENT gives
 * increasing ids in insertion order, which is p's). Returns 0, 1 if the
 * database refused one of them (the statement undone: the caller
 * inserts them one by one to name the row and its reason), -1 on error. */
static int
insert_many(jr_backend *b, const jr_push *p, double now, int64_t *ids,
            jr_err *err)
{
    sqlite3_stmt *s;
    int64_t last;
    int k, rc, got = 0, fair = 0;
    int paths = limit_path_any(b, p, INSERT_ROWS, err);

    if (paths < 0)
        return -1;
    if ((s = stmt_many(b, paths, ids != NULL, err)) == NULL)
        return -1;
    for (k = 0; k < INSERT_ROWS; k++)
        bind_row(s, k * INSERT_PARAMS, &p[k], now);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (ids != NULL && got < INSERT_ROWS)
            ids[got++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (jr_sqlite_error_class(rc) == JR_EINPUT)
        return 1;
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "inserting jobs");
    if (sqlite3_changes(b->db) != INSERT_ROWS ||
        (ids != NULL && got != INSERT_ROWS))
        return jr_fail(err, JR_EDB, "sqlite '%s': a multi-row insert "
                       "inserted %d rows of %d", b->path,
                       sqlite3_changes(b->db), INSERT_ROWS);
    if (ids != NULL)
        qsort(ids, INSERT_ROWS, sizeof *ids, cmp_id);
    last = sqlite3_last_insert_rowid(b->db);
    for (k = 0; k < INSERT_ROWS; k++) {
        if (queue_known(b, p[k].queue, err) < 0 ||
            jr_sqlite_fair_stamp(b, p[k].queue, last - INSERT_ROWS + 1, last,
                                 err) < 0)
            return -1;
        fair |= b->fair_is;
        if (p[k].outcome != NULL)
            *p[k].outcome = JR_PUSH_NEW;
    }
    return fair ? (jr_sqlite_fair_name_stamp(b, last - INSERT_ROWS + 1,
                                             last, err) < 0 ||
                   jr_sqlite_fair_tag(b, last - INSERT_ROWS + 1, last,
                                      now, err) < 0 ? -1 : 0) : 0;
}

/* sqlite_int.h */
int
jr_sqlite_insert_row(jr_backend *b, const jr_push *p, double now, int64_t *id,
           jr_err *err)
{
    sqlite3_stmt *s;
    int rc, paths = limit_path_any(b, p, 1, err);

    if (paths < 0 ||
        (s = stmt(b, paths ? S_INSERT : S_INSERT_BARE, err)) == NULL)
        return -1;
    bind_row(s, 0, p, now);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_CONSTRAINT_CHECK &&
        strstr(sqlite3_errmsg(b->db), "json_valid") != NULL)
        return jr_fail(err, JR_EINPUT, "job '%s': invalid JSON payload "
                       "(refused by the database)", p->name);
    if (rc != SQLITE_DONE)
        return jr_fail(err, jr_sqlite_error_class(rc),
                       "job '%s': insert %s: %s", p->name,
                       jr_sqlite_error_class(rc) == JR_EINPUT ? "refused" :
                       "failed", sqlite3_errmsg(b->db));
    if (id != NULL)
        *id = sqlite3_last_insert_rowid(b->db);
    if (jr_sqlite_fair_stamp(b, p->queue, sqlite3_last_insert_rowid(b->db),
                             sqlite3_last_insert_rowid(b->db), err) < 0 ||
        (b->fair_is &&
         (jr_sqlite_fair_name_stamp(b, sqlite3_last_insert_rowid(b->db),
                                    sqlite3_last_insert_rowid(b->db),
                                    err) < 0 ||
          jr_sqlite_fair_tag(b, sqlite3_last_insert_rowid(b->db),
                             sqlite3_last_insert_rowid(b->db), now,
                             err) < 0)))
        return -1;
    return queue_known(b, p->queue, err);
}

/* Checks p[0..n) (unless check is 0) and inserts them, in the open
 * transaction. */
static int
insert_rows(jr_backend *b, const jr_push *p, int n, int64_t *ids,
            double now, int check, jr_err *err)
{
    int i, k, singles = 0, rc;

    for (i = 0; check && i < n; i++)
        if (jr_push_check(&p[i], 0, err) < 0)
            return -1;
    for (i = 0; i < n; i++) {
        /* INSERT_ROWS plain pushes in a row: one statement */
        for (k = 0; singles == 0 && k < INSERT_ROWS && i + k < n &&
             p[i + k].unique_key == NULL; k++)
            ;
        if (singles == 0 && k == INSERT_ROWS) {
            if ((rc = insert_many(b, &p[i], now, ids ? &ids[i] : NULL,
                                  err)) < 0)
                return -1;
            if (rc == 0) {
                i += INSERT_ROWS - 1;
                continue;
            }
            singles = INSERT_ROWS;      /* one was refused: find which */
        }
        if (singles > 0)
            singles--;
        if (jr_sqlite_insert_one(b, &p[i], now, ids ? &ids[i] : NULL, err) < 0)
            return -1;
    }
    return 0;
}

/* Sets the result_ttl of job id. */
static int
set_result_ttl(jr_backend *b, int64_t id, double ttl, jr_err *err)
{
    sqlite3_stmt *s;

    if ((s = stmt(b, S_RESULT_TTL, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_double(s, 2, ttl);
    return run(b, s, err, "setting result_ttl") < 0 ? -1 : 0;
}

/* Sets the expiry and deadline of job id, just inserted by p (not a
 * duplicate's holder, which keeps its own). */
static int
set_expiry(jr_backend *b, int64_t id, const jr_push *p, double now,
           jr_err *err)
{
    sqlite3_stmt *s;

    if (p->outcome != NULL && *p->outcome != JR_PUSH_NEW)
        return 0;
    if ((s = stmt(b, S_EXPIRY, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if (p->expires_at > 0 || p->expires_in > 0)
        sqlite3_bind_double(s, 2, p->expires_at > 0 ? p->expires_at
                                                    : now + p->expires_in);
    else
        sqlite3_bind_null(s, 2);
    if (p->deadline > 0)
        sqlite3_bind_double(s, 3, p->deadline);
    else
        sqlite3_bind_null(s, 3);
    return run(b, s, err, "setting an expiry") < 0 ? -1 : 0;
}

/* Sets the trace context of job id from p. */
static int
set_trace(jr_backend *b, int64_t id, const jr_push *p, jr_err *err)
{
    sqlite3_stmt *s;

    if ((s = stmt(b, S_TRACE, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, p->traceparent, -1, SQLITE_STATIC);
    if (p->tracestate != NULL)
        sqlite3_bind_text(s, 3, p->tracestate, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, 3);
    return run(b, s, err, "setting the trace context") < 0 ? -1 : 0;
}

/* Refuses p when its cost is over a limit's size (limit_sizes). */
static int
cost_check(jr_backend *b, const jr_push *p, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_COST_OVER, err);
    char scope[300] = "", what[160] = "";
    long size = 0;
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, p->name);
    bind_text(s, 2, p->queue ? p->queue : "default");
    sqlite3_bind_int64(s, 3, p->cost);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        snprintf(scope, sizeof scope, "%s", col_text(s, 0));
        size = (long)sqlite3_column_int64(s, 1);
        snprintf(what, sizeof what, "%s", col_text(s, 2));
    }
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading the limits' sizes");
    if (rc == SQLITE_ROW)
        return jr_fail(err, JR_EINPUT, "job '%s': cost %ld is over limit "
                       "'%s', whose %s holds %ld at most: it could never "
                       "start", p->name, p->cost, scope, what, size);
    return 0;
}

/* Sets the cost of job id (NULL: 1). */
static int
set_cost(jr_backend *b, int64_t id, long cost, jr_err *err)
{
    sqlite3_stmt *s;

    if ((s = stmt(b, S_COST_SET, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if (cost > 1)
        sqlite3_bind_int64(s, 2, cost);
    else
        sqlite3_bind_null(s, 2);
    return run(b, s, err, "setting a job's cost") < 0 ? -1 : 0;
}

/* 1 if p's job may take the place of another's (on_conflict): its cost
 * then follows what became of it. */
static int
may_replace(const jr_push *p)
{
    return p->on_conflict != JR_CONFLICT_KEEP &&
           (p->unique_key != NULL || p->sequence != NULL);
}

/* The cost a push of outcome leaves on ids[i]'s job: its own on the job
 * it inserted or replaced (a replaced job's is the push's, 1 included),
 * none on a duplicate's holder, which keeps its own. */
static int
set_costs(jr_backend *b, const jr_push *p, int n, const int64_t *ids,
          const int *outcome, jr_err *err)
{
    int i;

    for (i = 0; i < n; i++) {
        if (outcome[i] == JR_PUSH_DUPLICATE ||
            (outcome[i] != JR_PUSH_REPLACED && !(p[i].cost > 1)))
            continue;
        if (set_cost(b, ids[i], p[i].cost, err) < 0)
            return -1;
    }
    return 0;
}

/* The rows, then the workflow options of those that have some (flow.c),
 * which need the ids. */
static int
insert_given(jr_backend *b, const jr_push *p, int n, int64_t *ids,
             double now, int check, jr_err *err)
{
    int64_t *own = NULL;
    const jr_push *orig = p;
    jr_push *q = NULL;          /* p, its outcomes in oc: the costs */
    int *oc = NULL;
    int i, rc, costs = 0;

    for (i = 0; i < n; i++)
        costs |= p[i].cost > 1 || may_replace(&p[i]);
    for (i = 0; i < n && !(p[i].result_ttl > 0) && !JR_PUSH_EXPIRY(&p[i]) &&
                p[i].traceparent == NULL && !costs; i++)
        ;
    if (n <= 0 || (i == n && !jr_sqlite_flow_any(p, n)))  /* plain */
        return insert_rows(b, p, n, ids, now, check, err);
    for (i = 0; i < n; i++)
        if (p[i].cost > 1 && (jr_push_check(&p[i], 0, err) < 0 ||
                              cost_check(b, &p[i], err) < 0))
            return -1;
    if ((ids == NULL &&
         (ids = own = malloc((size_t)n * sizeof *ids)) == NULL) ||
        (costs && ((q = malloc((size_t)n * sizeof *q)) == NULL ||
                   (oc = calloc((size_t)n, sizeof *oc)) == NULL))) {
        free(own);
        free(q);
        return jr_fail(err, JR_ENOMEM, "sqlite: pushing %d jobs: out of "
                       "memory", n);
    }
    if (costs) {
        memcpy(q, p, (size_t)n * sizeof *q);
        for (i = 0; i < n; i++)
            q[i].outcome = &oc[i];
        p = q;
    }
    rc = insert_rows(b, p, n, ids, now, check, err);
    for (i = 0; rc == 0 && i < n; i++)
        if (p[i].result_ttl > 0)
            rc = set_result_ttl(b, ids[i], p[i].result_ttl, err);
    for (i = 0; rc == 0 && i < n; i++) {
        if (JR_PUSH_EXPIRY(&p[i]))
            rc = set_expiry(b, ids[i], &p[i], now, err);
        if (rc == 0 && p[i].traceparent != NULL &&
            (p[i].outcome == NULL || *p[i].outcome != JR_PUSH_DUPLICATE))
            rc = set_trace(b, ids[i], &p[i], err);
    }
    if (rc == 0 && jr_sqlite_flow_any(p, n))
        rc = jr_sqlite_flow_link(b, p, n, ids, now, err);
    if (rc == 0 && costs)
        rc = set_costs(b, p, n, ids, oc, err);
    for (i = 0; costs && rc == 0 && i < n; i++)
        if (orig[i].outcome != NULL)
            *orig[i].outcome = oc[i];
    free(own);
    free(q);
    free(oc);
    return rc;
}

/* insert_given, with the sequence of their handler for the jobs that
 * take one (seqpath.c). */
static int
insert_all(jr_backend *b, const jr_push *p, int n, int64_t *ids,
           double now, int check, jr_err *err)
{
    jr_push *q;
    int rc = jr_sqlite_seq_defaults(b, p, n, &q, err);

    if (rc <= 0)
        return rc < 0 ? -1 : insert_given(b, p, n, ids, now, check, err);
    rc = insert_given(b, q, n, ids, now, check, err);
    jr_seq_apply_free(q, n);
    return rc;
}

int
jr_sqlite_insert_all(jr_backend *b, const jr_push *p, int n, int64_t *ids,
                     double now, jr_err *err)
{
    return insert_all(b, p, n, ids, now, 1, err);
}

int
jr_sqlite_insert_fired(jr_backend *b, const jr_push *p, int n, int64_t *ids,
                       double now, jr_err *err)
{
    return insert_all(b, p, n, ids, now, 0, err);
}

int
jr_sqlite_push(jr_backend *b, const jr_push *p, int n, int64_t *ids,
               jr_err *err)
{
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if (jr_sqlite_sealed_keyless(b, p, n, err) < 0 ||
        jr_sqlite_insert_all(b, p, n, ids, jr_now(), err) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err);
}
