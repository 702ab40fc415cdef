/* crypt.c - the encrypted values' rotation and count (docs/operations.md,
 * "Encryption"): a page of jobs' values read by id, and a batch of
 * values replaced in one short write transaction, each only if it still
 * holds the text read (a runner or producer that wrote it since wins).
 * Also the push's refusal of a sealed payload whose limit key would come
 * from it. Uses sqlite_int.h, keyring.h. */
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/keyring.h"

enum { S_SCAN, S_PUT_PAYLOAD, S_PUT_RESULT, S_PUT_STEPS, S_PUT_WAITS,
       S_PATH, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_SCAN] = "SELECT id, payload, result, steps, waits FROM jobs"
               " WHERE id > ?1 ORDER BY id LIMIT ?2",
    /* ?1 the job, ?2 the text read, ?3 the new one */
    [S_PUT_PAYLOAD] = "UPDATE jobs SET payload = ?3 WHERE id = ?1"
                      " AND payload = ?2",
    [S_PUT_RESULT] = "UPDATE jobs SET result = ?3 WHERE id = ?1"
                     " AND result = ?2",
    [S_PUT_STEPS] = "UPDATE jobs SET steps = ?3 WHERE id = ?1"
                    " AND steps = ?2",
    [S_PUT_WAITS] = "UPDATE jobs SET waits = ?3 WHERE id = ?1"
                    " AND waits = ?2",
    [S_PATH] = "SELECT path FROM limit_paths WHERE name = ?1",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

int
jr_sqlite_crypt_scan(jr_backend *b, int64_t after, int limit,
                     jr_crypt_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SCAN, err);
    const char *vals[JR_CRYPT_COLS];
    int rc, n = 0, i;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, after);
    sqlite3_bind_int(s, 2, limit);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        n++;
        for (i = 0; i < JR_CRYPT_COLS; i++)
            vals[i] = col_text(s, i + 1);
        if (cb(sqlite3_column_int64(s, 0), vals, arg) != 0) {
            rc = SQLITE_DONE;
            break;
        }
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? n : jr_sqlite_fail(b, err,
                                                  "reading encrypted values");
}

int
jr_sqlite_crypt_put(jr_backend *b, const jr_crypt_put *rows, int n,
                    jr_err *err)
{
    int i, done = 0, rc = 0;

    if (n <= 0)
        return 0;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    for (i = 0; i < n && rc >= 0; i++) {
        sqlite3_stmt *s;

        if (rows[i].col < 0 || rows[i].col >= JR_CRYPT_COLS ||
            (s = stmt(b, S_PUT_PAYLOAD + rows[i].col, err)) == NULL) {
            rc = -1;
            break;
        }
        sqlite3_bind_int64(s, 1, rows[i].id);
        bind_text(s, 2, rows[i].old);
        bind_text(s, 3, rows[i].new_text);
        if ((rc = run(b, s, err, "replacing encrypted values")) > 0)
            done += rc;
    }
    return jr_sqlite_write_end(b, rc < 0 ? -1 : done, err);
}

/* sqlite_int.h: a push of a sealed payload without a key of its own,
 * whose name has a limit path (the key would come from the payload,
 * which the database cannot read), is refused naming both. */
int
jr_sqlite_sealed_keyless(jr_backend *b, const jr_push *p, int n,
                         jr_err *err)
{
    const char *last = NULL;
    int i, rc;

    for (i = 0; i < n; i++) {
        sqlite3_stmt *s;

        if (p[i].key != NULL || p[i].payload == NULL ||
            !jr_seal_any(p[i].payload, strlen(p[i].payload)) ||
            (last != NULL && strcmp(last, p[i].name) == 0))
            continue;
        last = p[i].name;
        if ((s = stmt(b, S_PATH, err)) == NULL)
            return -1;
        bind_text(s, 1, p[i].name);
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            jr_fail(err, JR_EINPUT, "job '%s': its limit key comes from its "
                    "payload (path '%s'), which is encrypted: give its key "
                    "at push", p[i].name, col_text(s, 0));
            sqlite3_reset(s);
            return -1;
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
            return jr_sqlite_fail(b, err, "reading limit paths");
    }
    return 0;
}
