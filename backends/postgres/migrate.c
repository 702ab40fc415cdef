/* migrate.c - the schema's migrations: splits postgres/schema.sql
 * (compiled in as jr_postgres_sql by the Makefile) at its "-- migration N"
 * lines and applies those above the schema's version, one runner at a
 * time. Uses conn.c. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"

extern const char jr_postgres_sql[];   /* schema.sql, made by the Makefile */

#define MAX_MIGRATIONS 64

typedef struct block {
    int         version;
    const char *sql;            /* into jr_postgres_sql, not terminated */
    size_t      len;
} block;

/* Splits jr_postgres_sql at its "-- migration N" lines. Returns how many
 * blocks, or -1 if their numbers do not increase (a bug); gaps are fine
 * (a block applies when its number is above the schema's version). */
static int
split_migrations(block *out, int max, jr_err *err)
{
    static const char mark[] = "-- migration ";
    const char *p = jr_postgres_sql;
    int n = 0;

    while (*p) {
        const char *eol = strchr(p, '\n');
        const char *next = eol ? eol + 1 : p + strlen(p);
        if (strncmp(p, mark, strlen(mark)) == 0) {
            int v = atoi(p + strlen(mark));
            if (n == max || v <= (n > 0 ? out[n - 1].version : 0))
                return jr_fail(err, JR_EDB, "postgres/schema.sql: migration "
                               "'%.20s' is out of sequence (after %d)",
                               p + strlen(mark), n > 0 ? out[n - 1].version :
                               0);
            out[n].version = v;
            out[n].sql = next;
            n++;
        } else if (n > 0) {
            out[n - 1].len = (size_t)(next - out[n - 1].sql);
        }
        p = next;
    }
    return n;
}

/* The version recorded in the schema, 0 if it has no migrations table,
 * or -1 with err set. */
static int
schema_version(jr_backend *b, jr_err *err)
{
    char table[96], *sql;
    const char *params[1] = {table};
    PGresult *res;
    int v = 0;

    snprintf(table, sizeof table, "%s.migrations", b->qschema);
    res = PQexecParams(b->conn, "SELECT to_regclass($1::text) IS NOT NULL",
                       1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        jr_pg_fail(b, res, "reading the schema version", err);
        PQclear(res);
        return -1;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
        PQclear(res);
        return 0;
    }
    PQclear(res);
    sql = jr_pg_expand(b, "SELECT coalesce(max(version), 0) FROM "
                    "{{schema}}.migrations");
    if (sql == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: migrate: out of memory");
    res = PQexec(b->conn, sql);
    free(sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        v = jr_pg_fail(b, res, "reading the schema version", err);
    else
        v = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

/* Runs migration blk and records it; inside the migrate transaction. */
static int
apply(jr_backend *b, const block *blk, jr_err *err)
{
    char what[112], ver[16], *sql;
    const char *params[1] = {ver};
    PGresult *res;
    int rc;

    snprintf(what, sizeof what, "schema '%s' migration %d", b->schema,
             blk->version);
    if ((sql = jr_pg_expand_n(b, blk->sql, blk->len)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: %s: out of memory", what);
    rc = jr_pg_run_plain(b, sql, what, err);
    free(sql);
    if (rc < 0)
        return -1;
    if ((sql = jr_pg_expand(b, "INSERT INTO {{schema}}.migrations (version) "
                         "VALUES ($1::int)")) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: %s: out of memory", what);
    snprintf(ver, sizeof ver, "%d", blk->version);
    res = PQexecParams(b->conn, sql, 1, NULL, params, NULL, NULL, 0);
    free(sql);
    rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0
         : jr_pg_fail(b, res, what, err);
    PQclear(res);
    return rc;
}

/* Fills err if row 0 of res (schema_create's query) says this role may
 * not create what a migration does; 1 if the schema is missing, else 0. */
static int
create_rights(const jr_backend *b, const PGresult *res, jr_err *err)
{
    const char *role = PQgetvalue(res, 0, 3), *db = PQgetvalue(res, 0, 4);

    if (*PQgetvalue(res, 0, 0) == 't')
        return *PQgetvalue(res, 0, 1) == 't' ? 0 :
            jr_fail(err, JR_EDB, "postgres: migrate: role '%s' may not "
                    "create objects in schema '%s': it needs CREATE on the "
                    "schema (GRANT CREATE ON SCHEMA %s TO %s, or make the "
                    "role its owner)", role, b->schema, b->schema, role);
    if (*PQgetvalue(res, 0, 2) != 't')
        return jr_fail(err, JR_EDB, "postgres: migrate: schema '%s' does "
                       "not exist and role '%s' may not create it: it needs "
                       "CREATE on database '%s' (GRANT CREATE ON DATABASE %s "
                       "TO %s), or an owner creates the schema for it "
                       "(CREATE SCHEMA %s AUTHORIZATION %s)", b->schema, role,
                       db, db, role, b->schema, role);
    return 1;
}

/* Makes sure the schema exists and this role may create in it. CREATE
 * SCHEMA IF NOT EXISTS wants CREATE on the database even when the schema
 * exists, which a role given its schema by an owner (CREATE SCHEMA ...
 * AUTHORIZATION runner) lacks: so it runs only for a missing schema, and a
 * missing privilege is named with what grants it. */
static int
schema_create(jr_backend *b, jr_err *err)
{
    const char *params[1] = {b->schema};
    PGresult *res;
    char *sql;
    int rc;

    res = PQexecParams(b->conn, "SELECT n.oid IS NOT NULL,"
        " coalesce(has_schema_privilege(n.oid, 'CREATE'), false),"
        " has_database_privilege(current_database(), 'CREATE'),"
        " current_user, current_database()"
        " FROM (SELECT 1) x LEFT JOIN pg_namespace n ON n.nspname = $1::text",
        1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        rc = jr_pg_fail(b, res, "migrate: looking for the schema", err);
    else
        rc = create_rights(b, res, err);
    PQclear(res);
    if (rc <= 0)
        return rc;
    if ((sql = jr_pg_expand(b, "CREATE SCHEMA IF NOT EXISTS {{schema}}")) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: migrate: out of memory");
    rc = jr_pg_run_plain(b, sql, "migrate: creating the schema", err);
    free(sql);
    return rc;
}

/* Under the advisory lock: creates the schema and migrations table, then
 * applies what is missing. */
static int
migrate_locked(jr_backend *b, const block *blk, int nblk, jr_err *err)
{
    char key[96], *sql;
    const char *params[1] = {key};
    PGresult *res;
    int v, i, rc;

    snprintf(key, sizeof key, "jobrunner.migrate.%s", b->schema);
    res = PQexecParams(b->conn, "SELECT pg_advisory_xact_lock("
                       "hashtext($1::text))", 1, NULL, params, NULL, NULL, 0);
    rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0
         : jr_pg_fail(b, res, "migrate: taking the migration lock", err);
    PQclear(res);
    if (rc < 0)
        return -1;
    if (schema_create(b, err) < 0)
        return -1;
    sql = jr_pg_expand(b, "CREATE TABLE IF NOT EXISTS {{schema}}.migrations ("
                    "version int PRIMARY KEY, "
                    "applied_at timestamptz NOT NULL DEFAULT now())");
    if (sql == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: migrate: out of memory");
    rc = jr_pg_run_plain(b, sql, "migrate: creating the migrations table", err);
    free(sql);
    if (rc < 0 || (v = schema_version(b, err)) < 0)
        return -1;
    for (i = 0; i < nblk; i++)
        if (blk[i].version > v && apply(b, &blk[i], err) < 0)
            return -1;
    return 0;
}

int
jr_pg_migrate(jr_backend *b, jr_err *err)
{
    block blk[MAX_MIGRATIONS];
    int nblk, v, last;

    if ((nblk = split_migrations(blk, MAX_MIGRATIONS, err)) < 0 ||
        jr_pg_ready(b, err) < 0 || (v = schema_version(b, err)) < 0)
        return -1;
    last = nblk > 0 ? blk[nblk - 1].version : 0;
    if (v > last)
        return jr_fail(err, JR_EDB, "postgres: schema '%s' is at version %d "
                       "but this jobrunner knows only %d: upgrade jobrunner",
                       b->schema, v, last);
    if (v == last)              /* up to date: no lock, no CREATE needed */
        return 0;
    if (v == 0 && b->must_exist)
        return jr_fail(err, JR_ENOTFOUND, "postgres: the database does not "
                       "exist (schema '%s' has no jobrunner tables; 'jobrunner "
                       "migrate' creates them)", b->schema);
    if (jr_pg_run_plain(b, "BEGIN", "migrate", err) < 0)
        return -1;
    if (migrate_locked(b, blk, nblk, err) < 0 ||
        jr_pg_run_plain(b, "COMMIT", "migrate: commit", err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    return 0;
}
