/* seqpath.c - sequence as a handler option on SQLite (docs/queues.md,
 * "Sequences"): the runner's handlers' paths written to sequence_paths
 * (migration 26), and a push's look-up of them, in the push's
 * transaction, one read a name the push has (seqkey.h puts the jobs in
 * their sequence). Owns the statements of sequence_paths; uses
 * sqlite_int.h, base/seqkey.h. */
#include <stdio.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/seqkey.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_SP_PUT, S_SP_DROP, S_SP_GET, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_SP_PUT] =
        "INSERT INTO sequence_paths (name, path) VALUES (?1, ?2)"
        " ON CONFLICT (name) DO UPDATE SET path = excluded.path"
        " WHERE path <> excluded.path",
    [S_SP_DROP] = "DELETE FROM sequence_paths WHERE name = ?1",
    [S_SP_GET] = "SELECT path FROM sequence_paths WHERE name = ?1",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

int
jr_sqlite_sequence_paths(jr_backend *b, const jr_handler *h, int n,
                         jr_err *err)
{
    sqlite3_stmt *s;
    int i;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((s = stmt(b, h[i].sequence ? S_SP_PUT : S_SP_DROP, err))
            == NULL)
            break;
        bind_text(s, 1, h[i].name);
        if (h[i].sequence != NULL)
            bind_text(s, 2, h[i].sequence);
        if (run(b, s, err, "writing the handlers' sequences") < 0)
            break;
    }
    if (i < n) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err);
}

/* jr_seq_path_fn over the table: the path into the arg's buffer. */
static int
path_of(void *arg, const char *name, const char **path, jr_err *err)
{
    jr_backend *b = ((void **)arg)[0];
    char *buf = ((void **)arg)[1];
    sqlite3_stmt *s = stmt(b, S_SP_GET, err);
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, name);
    if ((rc = jr_sqlite_step_one(b, s, buf, 200, NULL, err,
                                 "reading the handlers' sequences")) > 0)
        *path = buf;
    return rc;
}

int
jr_sqlite_seq_defaults(jr_backend *b, const jr_push *p, int n,
                       jr_push **out, jr_err *err)
{
    char buf[200];
    void *arg[2] = {b, buf};

    return jr_seq_apply(p, n, path_of, arg, out, err);
}
