/* scheddef.c - schedules managed at run time (migration 22): a
 * definition added, replaced or removed in a transaction that counts the
 * change (the count's row lock orders concurrent changes), and the
 * definitions read when the count moved. Statements unprepared (a change
 * is rare; the count's read is one row). Uses pg_int.h. */
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/util.h"

/* Runs tmpl with $1 name, $2 def, $3 old (texts, NULL as NULL). Returns
 * its result (caller PQclears) or NULL with err set. */
static PGresult *
def_sql(jr_backend *b, const char *tmpl, const char *name, const char *def,
        const char *old, jr_err *err)
{
    const char *params[3] = {name, def, old};
    char *sql = jr_pg_expand(b, tmpl);
    PGresult *res;
    ExecStatusType st;

    if (sql == NULL) {
        jr_fail(err, JR_ENOMEM, "postgres: out of memory");
        return NULL;
    }
    res = PQexecParams(b->conn, sql, 3, NULL, params, NULL, NULL, 0);
    free(sql);
    st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        jr_pg_fail(b, res, "changing a run-time schedule", err);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* def_sql's row count (changed or returned); -1 with err set. */
static int
def_count(jr_backend *b, const char *tmpl, const char *name,
          const char *def, const char *old, jr_err *err)
{
    PGresult *res = def_sql(b, tmpl, name, def, old, err);
    int n;

    if (res == NULL)
        return -1;
    n = PQresultStatus(res) == PGRES_TUPLES_OK ? PQntuples(res) :
        atoi(PQcmdTuples(res));
    PQclear(res);
    return n;
}

static int
full(const char *name, jr_err *err)
{
    return jr_fail(err, JR_EINPUT, "schedule '%s': %d schedules are managed "
                   "at run time already, the most; remove one first", name,
                   JR_SCHEDDEFS_MAX);
}

static int
put_tx(jr_backend *b, const char *name, const char *def, const char *old,
       jr_err *err)
{
    int rc;

    /* first: the count's row lock orders the changes */
    if (def_count(b, "UPDATE {{schema}}.schedule_defs_rev SET rev = rev + 1 "
                  "WHERE $1::text IS NOT NULL AND $2::text IS NULL AND "
                  "$3::text IS NULL", name, NULL, NULL, err) < 0)
        return -1;
    if (def != NULL && old == NULL) {
        char off[24];
        snprintf(off, sizeof off, "%d", JR_SCHEDDEFS_MAX - 1);
        /* after the count's lock: two adds at once count one another */
        if ((rc = def_count(b, "SELECT 1 FROM {{schema}}.schedule_defs "
                            "WHERE name <> $1 AND $2::text IS NULL OFFSET "
                            "$3::int LIMIT 1", name, NULL, off, err)) != 0)
            return rc < 0 ? -1 : full(name, err);
        rc = def_count(b, "INSERT INTO {{schema}}.schedule_defs (name, def) "
                       "SELECT $1, $2 WHERE $3::text IS NULL ON CONFLICT "
                       "DO NOTHING", name, def, NULL, err);
        if (rc == 0)
            return jr_fail(err, JR_EINPUT, "schedule '%s' exists: change "
                           "it with set, or remove it first", name);
    } else if (def != NULL) {
        rc = def_count(b, "UPDATE {{schema}}.schedule_defs SET def = $2, "
                       "updated_at = now() WHERE name = $1 AND def = $3",
                       name, def, old, err);
        if (rc == 0 && def_count(b, "SELECT 1 FROM {{schema}}.schedule_defs "
                                 "WHERE name = $1 AND $2::text IS NULL AND "
                                 "$3::text IS NULL", name, NULL, NULL,
                                 err) == 0)
            return jr_fail(err, JR_ENOTFOUND, "no schedule '%s' added at "
                           "run time", name);
    } else {
        rc = def_count(b, "DELETE FROM {{schema}}.schedule_defs WHERE name = "
                       "$1 AND $2::text IS NULL AND $3::text IS NULL", name,
                       NULL, NULL, err);
        if (rc == 0)
            return jr_fail(err, JR_ENOTFOUND, "no schedule '%s' added at "
                           "run time", name);
    }
    /* every runner wakes at the commit (the jobs' channel: a claim
     * cycle, which reads the change; sched.c) */
    if (rc > 0 && def_count(b, "SELECT pg_notify($1, '') WHERE $2::text IS "
                            "NULL AND $3::text IS NULL", b->channel, NULL,
                            NULL, err) < 0)
        return -1;
    return rc;
}

int
jr_pg_sched_def_put(jr_backend *b, const char *name, const char *def,
                    const char *old, jr_err *err)
{
    int rc;

    if (jr_name_check(name, "schedule name", err) < 0)
        return -1;
    if (jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "beginning a transaction", err) < 0)
        return -1;
    if ((rc = put_tx(b, name, def, old, err)) <= 0 ||
        jr_pg_run_plain(b, "COMMIT", "committing a schedule's change",
                        err) < 0) {
        jr_pg_rollback(b);
        return rc < 0 ? -1 : rc == 0 ? 0 : -1;
    }
    return 1;
}

int
jr_pg_sched_defs(jr_backend *b, int64_t *rev, jr_scheddef_cb cb, void *arg,
                 jr_err *err)
{
    PGresult *res;
    int64_t now_rev;
    int i;

    /* two reads: rows newer than the count are read again next time */
    if (jr_pg_ready(b, err) < 0 ||
        (res = def_sql(b, "SELECT rev FROM {{schema}}.schedule_defs_rev "
                       "WHERE $1::text IS NULL AND $2::text IS NULL AND "
                       "$3::text IS NULL", NULL, NULL, NULL, err)) == NULL)
        return -1;
    now_rev = PQntuples(res) > 0 ? strtoll(PQgetvalue(res, 0, 0), NULL, 10)
              : -1;
    PQclear(res);
    if (now_rev == *rev)
        return 0;
    if ((res = def_sql(b, "SELECT name, def, extract(epoch FROM "
                       "created_at)::float8, extract(epoch FROM "
                       "updated_at)::float8 FROM {{schema}}.schedule_defs "
                       "WHERE $1::text IS NULL AND $2::text IS NULL AND "
                       "$3::text IS NULL ORDER BY name", NULL, NULL, NULL,
                       err)) == NULL)
        return -1;
    for (i = 0; i < PQntuples(res); i++)
        if (cb(PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
               strtod(PQgetvalue(res, i, 2), NULL),
               strtod(PQgetvalue(res, i, 3), NULL), arg) != 0)
            break;
    PQclear(res);
    *rev = now_rev;
    return 1;
}
