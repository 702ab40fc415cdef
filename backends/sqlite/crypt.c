/* crypt.c - the encrypted values' rotation and count (docs/operations.md,
 * "Encryption"): a page of jobs' values read by id, and a batch of
 * values replaced in one short write transaction, each only if it still
 * holds the text read (a runner or producer that wrote it since wins).
 * Also the push's refusal of a sealed payload whose limit key would come
 * from it. Uses sqlite_int.h, keyring.h. */
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"
#include "base/keyring.h"

enum { S_SCAN, S_PUT_PAYLOAD, S_PUT_RESULT, S_PUT_STEPS, S_PUT_WAITS,
       S_PATH, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_SCAN] = "SELECT id, jr_payload(payload, sealed), result, steps,"
               " waits FROM jobs"
               " WHERE id > ?1 ORDER BY id LIMIT ?2",
    /* ?1 the job, ?2 the text read, ?3 the new one */
    [S_PUT_PAYLOAD] = "UPDATE jobs SET payload = ?3, sealed = ?4"
                      " WHERE id = ?1 AND jr_payload(payload, sealed) = ?2",
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
        if (rows[i].col == 0)
            jr_sqlite_bind_sealed(s, 3, 4, rows[i].new_text);
        else
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

/* sqlite_int.h: the payload text t, or the stub at column pc with its
 * bytes at column sc. */
int
jr_sqlite_sealed_text(sqlite3_stmt *s, int pc, int sc, jr_buf *out)
{
    const char *t = (const char *)sqlite3_column_text(s, pc);
    size_t tn = (size_t)sqlite3_column_bytes(s, pc);
    const void *raw = sqlite3_column_blob(s, sc);
    size_t rn = (size_t)sqlite3_column_bytes(s, sc);

    if (t == NULL || raw == NULL || !jr_seal_is_stub(t, tn))
        return 0;
    return jr_seal_join(t, tn, raw, rn, out) < 0 ? -1 : 1;
}

/* jr_payload(payload, sealed): the payload's text, its envelope again
 * when it is a stub beside its bytes. */
static void
payload_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const char *t = (const char *)sqlite3_value_text(argv[0]);
    size_t tn = (size_t)sqlite3_value_bytes(argv[0]);
    const void *raw;
    size_t rn;
    jr_buf out = {0};

    (void)argc;
    if (t == NULL || sqlite3_value_type(argv[1]) != SQLITE_BLOB ||
        !jr_seal_is_stub(t, tn)) {
        sqlite3_result_value(ctx, argv[0]);
        return;
    }
    raw = sqlite3_value_blob(argv[1]);
    rn = (size_t)sqlite3_value_bytes(argv[1]);
    if (jr_seal_join(t, tn, raw, rn, &out) < 0) {
        jr_buf_free(&out);
        sqlite3_result_error_nomem(ctx);
        return;
    }
    sqlite3_result_text(ctx, out.p, (int)out.len, free);
}

int
jr_sqlite_crypt_functions(jr_backend *b, jr_err *err)
{
    if (sqlite3_create_function(b->db, "jr_payload", 2, SQLITE_UTF8 |
                                SQLITE_DETERMINISTIC, NULL, payload_fn, NULL,
                                NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "adding the function jr_payload");
    return 0;
}

void
jr_sqlite_bind_sealed(sqlite3_stmt *s, int pi, int si, const char *text)
{
    char stub[JR_SEAL_STUB_MAX];
    jr_buf raw = {0};

    if (strncmp(text, "{\"$jr_enc\"", 10) == 0 &&
        jr_seal_split(text, strlen(text), stub, &raw) > 0) {
        sqlite3_bind_text(s, pi, stub, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(s, si, raw.p, (int)raw.len, SQLITE_TRANSIENT);
    } else {
        sqlite3_bind_text(s, pi, text, -1, SQLITE_STATIC);
        sqlite3_bind_null(s, si);
    }
    jr_buf_free(&raw);
}
