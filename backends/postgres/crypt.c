/* crypt.c - the encrypted values' rotation and count (docs/operations.md,
 * "Encryption"): a page of jobs' values read by id, and a batch of
 * values replaced in one short transaction, each only if it still holds
 * the value read (a runner or producer that wrote it since wins). Also
 * the push's refusal of a sealed payload whose limit key would come from
 * it. Uses pg_int.h, keyring.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/keyring.h"

static const pg_stmt st_scan = {"jr_crypt_scan", 2,
    "SELECT id, " JR_PG_PAYLOAD("") ", result::text, steps::text,"
    " waits::text"
    " FROM {{schema}}.jobs WHERE id > $1::bigint ORDER BY id"
    " LIMIT $2::int"};

/* $1 the job, $2 the value read, $3 the new one */
static const pg_stmt st_put[JR_CRYPT_COLS] = {
    {"jr_crypt_put_payload", 3, "UPDATE {{schema}}.jobs SET payload ="
     " " JR_PG_STUB("$3::text") ", sealed = " JR_PG_BYTES("$3::text")
     " WHERE id = $1::bigint AND " JR_PG_PAYLOAD("") "::jsonb"
     " = $2::jsonb"},
    {"jr_crypt_put_result", 3, "UPDATE {{schema}}.jobs SET result ="
     " $3::jsonb WHERE id = $1::bigint AND result = $2::jsonb"},
    {"jr_crypt_put_steps", 3, "UPDATE {{schema}}.jobs SET steps ="
     " $3::jsonb WHERE id = $1::bigint AND steps = $2::jsonb"},
    {"jr_crypt_put_waits", 3, "UPDATE {{schema}}.jobs SET waits ="
     " $3::jsonb WHERE id = $1::bigint AND waits = $2::jsonb"},
};

int
jr_pg_crypt_scan(jr_backend *b, int64_t after, int limit, jr_crypt_cb cb,
                 void *arg, jr_err *err)
{
    char a[24], l[16];
    const char *params[2] = {a, l};
    const char *vals[JR_CRYPT_COLS];
    PGresult *res;
    int n, r, i;

    snprintf(a, sizeof a, "%lld", (long long)after);
    snprintf(l, sizeof l, "%d", limit);
    if ((res = jr_pg_run(b, &st_scan, params, "reading encrypted values",
                         err)) == NULL)
        return -1;
    n = PQntuples(res);
    for (r = 0; r < n; r++) {
        for (i = 0; i < JR_CRYPT_COLS; i++)
            vals[i] = PQgetisnull(res, r, i + 1) ? NULL :
                      PQgetvalue(res, r, i + 1);
        if (cb(atoll(PQgetvalue(res, r, 0)), vals, arg) != 0)
            break;
    }
    PQclear(res);
    return n;
}

int
jr_pg_crypt_put(jr_backend *b, const jr_crypt_put *rows, int n,
                jr_err *err)
{
    int i, rc = 0, done = 0;

    if (n <= 0)
        return 0;
    if (jr_pg_run_plain(b, "BEGIN", "replacing encrypted values", err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        char id[24];
        const char *params[3] = {id, rows[i].old, rows[i].new_text};

        if (rows[i].col < 0 || rows[i].col >= JR_CRYPT_COLS) {
            rc = -1;
            break;
        }
        snprintf(id, sizeof id, "%lld", (long long)rows[i].id);
        if ((rc = jr_pg_run_count(b, &st_put[rows[i].col], params,
                                  "replacing encrypted values", err)) < 0)
            break;
        done += rc;
    }
    if (rc < 0 || jr_pg_run_plain(b, "COMMIT", "replacing encrypted values",
                                  err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    return done;
}

static const pg_stmt st_path = {"jr_crypt_path", 1,
    "SELECT path FROM {{schema}}.limit_paths WHERE name = $1::text"};

/* pg_int.h: as SQLite's: a sealed payload without a key, of a name with a
 * limit path, is refused naming both (one look a name, sealed pushes
 * only). */
int
jr_pg_sealed_keyless(jr_backend *b, const jr_push *p, int n, jr_err *err)
{
    const char *last = NULL;
    int i;

    for (i = 0; i < n; i++) {
        const char *params[1] = {p[i].name};
        PGresult *res;

        if (p[i].key != NULL || p[i].payload == NULL ||
            !jr_seal_any(p[i].payload, strlen(p[i].payload)) ||
            (last != NULL && strcmp(last, p[i].name) == 0))
            continue;
        last = p[i].name;
        if ((res = jr_pg_run(b, &st_path, params, "reading limit paths",
                             err)) == NULL)
            return -1;
        if (PQntuples(res) > 0) {
            jr_fail(err, JR_EINPUT, "job '%s': its limit key comes from its "
                    "payload (path '%s'), which is encrypted: give its key "
                    "at push", p[i].name, PQgetvalue(res, 0, 0));
            PQclear(res);
            return -1;
        }
        PQclear(res);
    }
    return 0;
}
