/* fairname.c - fair share keyed by a job name on SQLite (docs/queues.md,
 * "Fair share"): the runner's handlers' fair paths written to fair_names
 * (migration 29), which the trigger jobs_fair_key reads to key a job of
 * the name pushed into a fair queue by its own path over the queue's, so
 * every push (the library's, another program's INSERT) is keyed. A new
 * or changed path keys the name's jobs not ended in fair queues again; a
 * name that loses its path gets its queue's keys back. Owns the
 * statements of fair_names; uses sqlite_int.h. */
#include <stdio.h>

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FN_PUT, S_FN_DROP, S_FN_REKEY, S_FN_STAMP, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_FN_PUT] =
        "INSERT INTO fair_names (name, path) VALUES (?1, ?2)"
        " ON CONFLICT (name) DO UPDATE SET path = excluded.path"
        " WHERE path <> excluded.path",
    [S_FN_DROP] = "DELETE FROM fair_names WHERE name = ?1",
    /* the keys of name ?1's jobs not ended in fair queues: at its path
     * ?2, or with none (NULL) at their queue's */
    [S_FN_REKEY] =
        "UPDATE jobs SET fair_key = (SELECT CASE WHEN json_valid(payload)"
        " THEN coalesce(CAST(json_extract(payload, coalesce(?2, f.path))"
        " AS TEXT), '') ELSE '' END FROM fair_paths f"
        " WHERE f.queue = jobs.queue)"
        " WHERE name = ?1 AND queue IN (SELECT queue FROM fair_paths)"
        " AND state NOT IN ('completed', 'dead', 'cancelled', 'expired')",
    /* the jobs of ids ?1 to ?2 just pushed into fair queues whose name
     * has a path: their key at it (the trigger's part for names) */
    [S_FN_STAMP] =
        "UPDATE jobs SET fair_key = (SELECT CASE WHEN json_valid(payload)"
        " THEN coalesce(CAST(json_extract(payload, n.path) AS TEXT), '')"
        " ELSE '' END FROM fair_names n WHERE n.name = jobs.name)"
        " WHERE id BETWEEN ?1 AND ?2"
        " AND name IN (SELECT name FROM fair_names)"
        " AND queue IN (SELECT queue FROM fair_paths)",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

int
jr_sqlite_fair_names(jr_backend *b, const jr_handler *h, int n, jr_err *err)
{
    sqlite3_stmt *s;
    char path[220];
    int i, changed;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((s = stmt(b, h[i].fair ? S_FN_PUT : S_FN_DROP, err)) == NULL)
            break;
        bind_text(s, 1, h[i].name);
        if (h[i].fair != NULL) {
            snprintf(path, sizeof path, "$.%s", h[i].fair);
            bind_text(s, 2, path);
        }
        if ((changed = run(b, s, err, "writing the handlers' fair keys")) < 0)
            break;
        if (changed == 0)
            continue;
        if ((s = stmt(b, S_FN_REKEY, err)) == NULL)
            break;
        bind_text(s, 1, h[i].name);
        if (h[i].fair != NULL)
            bind_text(s, 2, path);
        if (run(b, s, err, "keying a name's jobs in fair queues") < 0)
            break;
    }
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
