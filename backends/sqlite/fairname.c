/* fairname.c - fair share keyed by a job name on SQLite (docs/queues.md,
 * "Fair share"): the runner's handlers' fair paths, and the table form's
 * weights and default, written to fair_names (migrations 29, 31), which
 * the trigger jobs_fair_key reads to key a job of the name pushed into a
 * fair queue by its own path over the queue's, so every push (the
 * library's, another program's INSERT) is keyed. A name with weights of
 * its own keys its jobs in its scope (NAME, char(31), value) and makes
 * fair a queue it is pushed into (jobs_fair_name; path ''). A new or
 * changed path keys the name's jobs not ended in fair queues again; a
 * name that loses its path gets its queue's keys back. The weight of a
 * key in a name's scope (fair set --name, fair_name_keys), which fair.c's
 * tags read (JR_SQLITE_FAIR_NW); a change of it, or of the name's path
 * or weights, tags the name's queued jobs again. Owns the statements of
 * fair_names and fair_name_keys; uses sqlite_int.h. */
#include <stdio.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FN_PUT, S_FN_DROP, S_FN_REKEY, S_FN_STAMP, S_FN_MAKE, S_FN_FILLQ,
       S_FN_MAKE_ALL, S_FN_FILL_ALL, S_FN_SET, S_FN_QUEUES,
       S_FN_USE, S_FN_NAMES, S_FN_UNTAG, S_FN_RESET, S_COUNT };

#define NOT_ENDED " state NOT IN ('completed', 'dead', 'cancelled', 'expired')"

static const char *const sql_text[S_COUNT] = {
    [S_FN_PUT] =
        "INSERT INTO fair_names (name, path, weights, dflt)"
        " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name) DO UPDATE"
        " SET path = excluded.path, weights = excluded.weights,"
        " dflt = excluded.dflt WHERE path <> excluded.path"
        " OR weights IS NOT excluded.weights OR dflt IS NOT excluded.dflt",
    [S_FN_DROP] = "DELETE FROM fair_names WHERE name = ?1",
    /* the keys of name ?1's jobs not ended in fair queues: at its path
     * ?2 (in its scope when ?3: it has weights), or with none (NULL) at
     * their queue's */
    [S_FN_REKEY] =
        "UPDATE jobs SET fair_key = (SELECT CASE"
        " WHEN NOT json_valid(payload) THEN ''"
        " WHEN ?2 IS NOT NULL THEN CASE WHEN ?3 THEN jobs.name || char(31)"
        " || " JR_SQLITE_FAIR_VAL("payload", "?2")
        " ELSE " JR_SQLITE_FAIR_QKEY("payload", "?2") " END"
        " WHEN f.path = '' THEN ''"
        " ELSE " JR_SQLITE_FAIR_QKEY("payload", "f.path")
        " END FROM fair_paths f WHERE f.queue = jobs.queue)"
        " WHERE name = ?1 AND queue IN (SELECT queue FROM fair_paths)"
        " AND" NOT_ENDED,
    /* the jobs of ids ?1 to ?2 just pushed into fair queues whose name
     * has a path: their key at it (the trigger's part for names) */
    [S_FN_STAMP] =
        "UPDATE jobs SET fair_key = CASE WHEN json_valid(payload)"
        " THEN " JR_SQLITE_FAIR_NKEY " ELSE '' END"
        " WHERE id BETWEEN ?1 AND ?2"
        " AND name IN (SELECT name FROM fair_names)"
        " AND queue IN (SELECT queue FROM fair_paths)",
    /* jobs_fair_name's part: queue ?1 made fair when one of the jobs of
     * ids ?2 to ?3 just pushed into it is of a name with weights */
    [S_FN_MAKE] =
        "INSERT INTO fair_paths (queue, path) SELECT ?1, ''"
        " WHERE EXISTS (SELECT 1 FROM jobs j JOIN fair_names n"
        " ON n.name = j.name WHERE j.id BETWEEN ?2 AND ?3 AND j.queue = ?1"
        " AND n.weights IS NOT NULL) ON CONFLICT DO NOTHING",
    /* and the keys of its jobs not ended: a name's, or '' */
    [S_FN_FILLQ] =
        "UPDATE jobs SET fair_key = CASE WHEN json_valid(payload)"
        " THEN coalesce(" JR_SQLITE_FAIR_NKEY ", '') ELSE '' END"
        " WHERE queue = ?1 AND" NOT_ENDED,
    /* the queues that name ?1 (with weights) has jobs not ended in made
     * fair, at its first record */
    [S_FN_MAKE_ALL] =
        "INSERT INTO fair_paths (queue, path) SELECT DISTINCT queue, ''"
        " FROM jobs WHERE name = ?1 AND" NOT_ENDED
        " ON CONFLICT DO NOTHING",
    [S_FN_FILL_ALL] =
        "UPDATE jobs SET fair_key = CASE WHEN json_valid(payload)"
        " THEN coalesce(" JR_SQLITE_FAIR_NKEY ", '') ELSE '' END"
        " WHERE fair_key IS NULL AND" NOT_ENDED
        " AND queue IN (SELECT queue FROM fair_paths WHERE path = '')",
    [S_FN_SET] =
        "INSERT INTO fair_name_keys (name, key, weight) VALUES (?1, ?2, ?3)"
        " ON CONFLICT (name, key) DO UPDATE SET weight = excluded.weight",
    /* name ?1's queued jobs (of key ?2 in its scope, NULL: all) are to
     * be tagged again by its weights now ... */
    [S_FN_UNTAG] =
        "UPDATE jobs SET fair_tag = NULL WHERE name = ?1"
        " AND state = 'queued' AND fair_tag IS NOT NULL"
        " AND (?2 IS NULL OR fair_key = ?1 || char(31) || ?2)",
    /* ... from their queues' clocks (fair.c's FAIR_FIN) */
    [S_FN_RESET] =
        "UPDATE fair_keys SET pass = 0"
        " WHERE substr(key, 1, length(?1) + 1) = ?1 || char(31)"
        " AND (?2 IS NULL OR key = ?1 || char(31) || ?2)",
    [S_FN_QUEUES] = "SELECT queue FROM fair_paths WHERE path = ''"
        " ORDER BY queue",
    [S_FN_NAMES] = "SELECT name FROM fair_names WHERE weights IS NOT NULL"
        " ORDER BY name",
    /* each key in name ?1's scope with jobs queued or running: ready by
     * ?2, running, weight as JR_SQLITE_FAIR_NW's */
    [S_FN_USE] =
        "SELECT x.k, x.w, x.r, coalesce((SELECT weight FROM fair_name_keys"
        "  WHERE name = ?1 AND key = x.k), (SELECT value FROM json_each("
        "  (SELECT weights FROM fair_names WHERE name = ?1)) WHERE key = x.k),"
        "  (SELECT dflt FROM fair_names WHERE name = ?1), 1)"
        " FROM (SELECT substr(fair_key, length(?1) + 2) AS k,"
        "  sum(state = 'queued' AND run_at <= ?2) AS w,"
        "  sum(state = 'running') AS r FROM jobs"
        "  WHERE name = ?1 AND state IN ('queued', 'running')"
        "  AND fair_key IS NOT NULL"
        "  AND substr(fair_key, 1, length(?1) + 1) = ?1 || char(31)"
        "  GROUP BY fair_key) x ORDER BY x.w DESC, x.k",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Tags name's queued jobs (of key in its scope; NULL: all) again, by
 * its weights now. */
static int
retag(jr_backend *b, const char *name, const char *key, jr_err *err)
{
    sqlite3_stmt *s;
    int i;

    for (i = 0; i < 2; i++) {
        if ((s = stmt(b, i ? S_FN_RESET : S_FN_UNTAG, err)) == NULL)
            return -1;
        bind_text(s, 1, name);
        bind_text(s, 2, key);
        if (run(b, s, err, "tagging a fair name's jobs again") < 0)
            return -1;
    }
    return jr_sqlite_fair_tag_name(b, name, err);
}

/* Records handler h's fair option; when it changed, keys its jobs. */
static int
name_put(jr_backend *b, const jr_handler *h, jr_err *err)
{
    sqlite3_stmt *s;
    char path[220];
    int changed, weighted = h->fair && h->fair_weights;

    if ((s = stmt(b, h->fair ? S_FN_PUT : S_FN_DROP, err)) == NULL)
        return -1;
    bind_text(s, 1, h->name);
    if (h->fair != NULL) {
        snprintf(path, sizeof path, "$.%s", h->fair);
        bind_text(s, 2, path);
        bind_text(s, 3, weighted ? h->fair_weights : NULL);
        if (weighted)
            sqlite3_bind_double(s, 4, h->fair_default);
    }
    if ((changed = run(b, s, err, "writing the handlers' fair keys")) <= 0)
        return changed;
    if (weighted) {
        if ((s = stmt(b, S_FN_MAKE_ALL, err)) == NULL)
            return -1;
        bind_text(s, 1, h->name);
        if (run(b, s, err, "making fair a name's queues") < 0)
            return -1;
    }
    if ((s = stmt(b, S_FN_REKEY, err)) == NULL)
        return -1;
    bind_text(s, 1, h->name);
    if (h->fair != NULL)
        bind_text(s, 2, path);
    sqlite3_bind_int(s, 3, weighted);
    if (run(b, s, err, "keying a name's jobs in fair queues") < 0)
        return -1;
    if (weighted && ((s = stmt(b, S_FN_FILL_ALL, err)) == NULL ||
                     run(b, s, err, "keying the jobs of a name's queues") < 0))
        return -1;
    return retag(b, h->name, NULL, err);
}

int
jr_sqlite_fair_names(jr_backend *b, const jr_handler *h, int n, jr_err *err)
{
    int i;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++)
        if (name_put(b, &h[i], err) < 0)
            break;
    if (i < n) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err);
}

int
jr_sqlite_fair_name_stamp(jr_backend *b, int64_t lo, int64_t hi,
                          jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FN_STAMP, err);

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, lo);
    sqlite3_bind_int64(s, 2, hi);
    return run(b, s, err, "stamping the fair key of a push by its name") < 0
           ? -1 : 0;
}

int
jr_sqlite_fair_name_queue(jr_backend *b, const char *queue, int64_t lo,
                          int64_t hi, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FN_MAKE, err);
    int made;

    if (s == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_int64(s, 2, lo);
    sqlite3_bind_int64(s, 3, hi);
    if ((made = run(b, s, err, "making a queue fair by a name")) <= 0)
        return made;
    if ((s = stmt(b, S_FN_FILLQ, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    return run(b, s, err, "keying the jobs of a queue made fair") < 0 ? -1 :
           1;
}

int
jr_sqlite_fair_name_set(jr_backend *b, const char *name, const char *key,
                        double weight, jr_err *err)
{
    sqlite3_stmt *s;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, S_FN_SET, err)) == NULL) {
        jr_sqlite_rollback(b);
        return -1;
    }
    bind_text(s, 1, name);
    bind_text(s, 2, key);
    sqlite3_bind_double(s, 3, weight);
    if (run(b, s, err, "setting a name's fair weight") < 0 ||
        retag(b, name, key, err) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err);
}

int
jr_sqlite_fair_name_list(jr_backend *b, int names, jr_fair_queue_cb cb,
                         void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, names ? S_FN_NAMES : S_FN_QUEUES, err);
    int rc;

    if (s == NULL)
        return -1;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb(col_text(s, 0), arg) != 0)
            break;
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading the names with fair weights");
}

int
jr_sqlite_fair_name_use(jr_backend *b, const char *name, jr_fair_use_cb cb,
                        void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FN_USE, err);
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, name);
    sqlite3_bind_double(s, 2, jr_now());
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb(col_text(s, 0), (long)sqlite3_column_int64(s, 1),
               (long)sqlite3_column_int64(s, 2), sqlite3_column_double(s, 3),
               arg) != 0)
            break;
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading a fair name's keys");
}
