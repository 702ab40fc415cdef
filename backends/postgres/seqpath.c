/* seqpath.c - sequence as a handler option on PostgreSQL (docs/queues.md,
 * "Sequences"): the runner's handlers' paths written to sequence_paths
 * (migration 26), and a push's look-up of them in a copy of the table
 * this connection read at most JR_PG_SEQP_TTL seconds ago (a read a few
 * seconds, not a round trip a push: a producer sees a runner's new
 * handlers that much later). Owns the statements of sequence_paths;
 * uses conn.c, base/seqkey.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/seqkey.h"
#include "base/util.h"

#define JR_PG_SEQP_TTL 2.0      /* seconds a read of the table serves */

static const pg_stmt st_sp_put = {"jr_sp_put", 2,
    "INSERT INTO {{schema}}.sequence_paths (name, path)"
    " VALUES ($1::text, $2::text) ON CONFLICT (name) DO UPDATE"
    " SET path = excluded.path"
    " WHERE sequence_paths.path <> excluded.path"};
static const pg_stmt st_sp_drop = {"jr_sp_drop", 1,
    "DELETE FROM {{schema}}.sequence_paths WHERE name = $1::text"};
static const pg_stmt st_sp_all = {"jr_sp_all", 0,
    "SELECT name, path FROM {{schema}}.sequence_paths"};

int
jr_pg_sequence_paths(jr_backend *b, const jr_handler *h, int n, jr_err *err)
{
    const char *params[2];
    PGresult *res;
    int i;

    if (jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "writing the handlers' sequences",
                        err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        params[0] = h[i].name;
        params[1] = h[i].sequence;
        if ((res = jr_pg_run(b, h[i].sequence ? &st_sp_put : &st_sp_drop,
                             params, "writing the handlers' sequences",
                             err)) == NULL)
            break;
        PQclear(res);
    }
    if (i < n || jr_pg_run_plain(b, "COMMIT", "writing the handlers' "
                                 "sequences", err) < 0) {
        jr_pg_rollback(b);
        return -1;
    }
    PQclear(b->seqp);           /* this connection sees them at once */
    b->seqp = NULL;
    return 0;
}

/* jr_seq_path_fn over the copy of the table. */
static int
path_of(void *arg, const char *name, const char **path, jr_err *err)
{
    jr_backend *b = arg;
    int i;

    (void)err;
    for (i = 0; i < PQntuples(b->seqp); i++)
        if (strcmp(PQgetvalue(b->seqp, i, 0), name) == 0) {
            *path = PQgetvalue(b->seqp, i, 1);
            return 1;
        }
    return 0;
}

/* The copy of the table, read again when older than JR_PG_SEQP_TTL: its
 * rows, or -1. */
static int
paths(jr_backend *b, jr_err *err)
{
    double now = jr_mono();

    if (b->seqp == NULL || now - b->seqp_at > JR_PG_SEQP_TTL) {
        PQclear(b->seqp);
        if ((b->seqp = jr_pg_run(b, &st_sp_all, NULL, "reading the "
                                 "handlers' sequences", err)) == NULL)
            return -1;
        b->seqp_at = now;
    }
    return PQntuples(b->seqp);
}

int
jr_pg_seq_defaults(jr_backend *b, const jr_push *p, int n, jr_push **out,
                   jr_err *err)
{
    int i, rc;

    *out = NULL;
    for (i = 0; i < n && !jr_seq_key_wanted(&p[i]); i++)
        ;
    if (i == n || (rc = paths(b, err)) == 0)
        return 0;
    return rc < 0 ? -1 : jr_seq_apply(p, n, path_of, b, out, err);
}

int
jr_pg_seq_defaults_pp(jr_backend *b, const jr_push *const *pp, int n,
                      jr_push **q, const jr_push ***qpp, jr_err *err)
{
    jr_push *flat;
    int i, rc;

    *q = NULL;
    *qpp = NULL;
    for (i = 0; i < n && !jr_seq_key_wanted(pp[i]); i++)
        ;
    if (i == n || (rc = paths(b, err)) == 0)
        return 0;               /* a plain push copies nothing */
    if (rc < 0)
        return -1;
    if ((flat = malloc((size_t)n * sizeof *flat)) == NULL)
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    for (i = 0; i < n; i++)
        flat[i] = *pp[i];
    rc = jr_seq_apply(flat, n, path_of, b, q, err);
    free(flat);
    if (rc <= 0)
        return rc;
    if ((*qpp = malloc((size_t)n * sizeof **qpp)) == NULL) {
        jr_seq_apply_free(*q, n);
        *q = NULL;
        return jr_fail(err, JR_ENOMEM, "postgres: out of memory");
    }
    for (i = 0; i < n; i++)
        (*qpp)[i] = &(*q)[i];
    return 1;
}
