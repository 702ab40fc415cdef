/* claim.c - the claim: the jobs candidates.c gives (the ready jobs of the
 * queues not paused, fairly ordered, within the queues' caps of the
 * claim spec) read and marked running under the runner's token and
 * lease, in one transaction; the passes of a claim under limits
 * (limits.c reads and writes the limits' tables), and the one-statement
 * claim when a single queue has work (a fair queue's alone:
 * fairclaim.c). Uses sqlite_int.h, limitpick.h. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_CLAIM, S_CLAIM_READ, S_CLAIM_ONE, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* a claim reads its jobs, then marks them running by id in the same
     * transaction (it holds the write lock: nothing changes between).
     * Not an UPDATE ... RETURNING: SQLite loads every column of the old
     * row for RETURNING and buffers the rows in a table of its own, which
     * cost a claimed row more than the update itself */
    [S_CLAIM] =
        "UPDATE jobs SET state = 'running', attempts = attempts + 1,"
        " locked_by = ?1, locked_until = ?2, updated_at = ?3,"
        " started_at = ?3, progress_done = NULL, progress_total = NULL,"
        " progress_note = NULL, deadline_at = coalesce(deadline_at,"
        " ?3 + deadline)"
        " WHERE id IN (SELECT value FROM json_each(?4)) AND state = 'queued'",
    /* the jobs of ids ?1 a claim takes, as they are before it */
    [S_CLAIM_READ] =
        "SELECT " JR_SQLITE_CLAIM_COLUMNS " FROM jobs"
        " WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'queued'",
    /* the same when one queue has ready jobs and none is capped: its
     * first ?4 ready jobs of names ?3 in queue ?1, in claim order */
    [S_CLAIM_ONE] =
        "SELECT " JR_SQLITE_CLAIM_COLUMNS " FROM jobs WHERE state = 'queued'"
        " AND queue = ?1 AND run_at <= ?2"
        JR_SQLITE_UNEXPIRED
        " AND name IN (SELECT value FROM json_each(?3))"
        " ORDER BY priority, " JR_SQLITE_CLAIM_ORDER ", id LIMIT ?4",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* A job read by S_CLAIM_READ, S_CLAIM_ONE or fairclaim.c's S_FAIR_ONE,
 * as the claim that follows the read leaves it (its attempt counted). */
static jr_job *
row_job(sqlite3_stmt *s)
{
    const char *pl = col_text(s, 3);
    size_t pn = (size_t)sqlite3_column_bytes(s, 3);
    jr_buf env = {0};
    sqlite3_int64 attempts;
    jr_job *j;

    /* a payload stored as its bytes: the envelope again (crypt.c) */
    if (sqlite3_column_type(s, 16) != SQLITE_NULL &&
        jr_sqlite_sealed_text(s, 3, 16, &env) > 0) {
        pl = env.p;
        pn = env.len;
    }
    j = jr_job_new_full(sqlite3_column_int64(s, 0), col_text(s, 1),
                        col_text(s, 2), pl, pn, col_text(s, 9),
                        col_text(s, 12), col_text(s, 13), col_text(s, 14),
                        col_text(s, 15));
    jr_buf_free(&env);
    if (j == NULL)
        return NULL;
    /* a plain INSERT's attempts may be any integer (SQLite's claim adds
     * one in a double past the top): the count, cut to an int */
    attempts = sqlite3_column_int64(s, 4);
    j->attempt = attempts >= INT_MAX ? INT_MAX :
                 attempts < INT_MIN ? INT_MIN : (int)attempts + 1;
    j->max_retries = sqlite3_column_type(s, 5) == SQLITE_NULL ? -1 :
                     sqlite3_column_int(s, 5);
    j->priority = sqlite3_column_int(s, 6);
    j->run_at = sqlite3_column_double(s, 7);
    j->created_at = sqlite3_column_double(s, 8);
    j->batch = sqlite3_column_int64(s, 10);
    j->flow = sqlite3_column_int(s, 11);
    return j;
}

/* Orders candidates by id, for bsearch. */
static int
candidate_id(const void *a, const void *b)
{
    const candidate *x = a, *y = b;

    return (x->id > y->id) - (x->id < y->id);
}

/* Writes [id,id,...] of c[0..n), or of jobs[0..n) when c is NULL, into
 * a new string. */
static char *
ids_json(const candidate *c, jr_job *const *jobs, int n)
{
    char *s = malloc((size_t)n * 22 + 3), *p = s;
    int i;

    if (s == NULL)
        return NULL;
    *p++ = '[';
    for (i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p += jr_put_int64(p, c ? c[i].id : jobs[i]->id);
    }
    *p++ = ']';
    *p = '\0';
    return s;
}

/* Marks the n jobs of ids json running under token, in one statement (a
 * statement per row costs a statement journal each). The transaction
 * holds the write lock since they were read, so all n are still queued:
 * another count is an error. */
static int
mark_claimed(jr_backend *b, const char *token, double lease, double now,
             const char *json, int n, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_CLAIM, err);
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, token);
    sqlite3_bind_double(s, 2, now + lease);
    sqlite3_bind_double(s, 3, now);
    bind_text(s, 4, json);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "claiming jobs");
    if (sqlite3_changes(b->db) != n)
        return jr_fail(err, JR_EDB, "sqlite: a claim marked %d of the %d "
                       "jobs it read", sqlite3_changes(b->db), n);
    return 0;
}

/* Reads the first n candidates and marks them running, and puts them in
 * out[] in their fair order: c[i].rank is reused as the position.
 * Returns how many. */
static int
claim_picked(jr_backend *b, const char *token, double lease, candidate *c,
             int n, jr_job **out, double now, jr_err *err)
{
    sqlite3_stmt *s;
    jr_job **tmp, *j;
    candidate key, *at;
    char *json;
    int i, k = 0, rc;

    if (n == 0)
        return 0;
    json = ids_json(c, NULL, n);
    tmp = calloc((size_t)n, sizeof *tmp);
    if (json == NULL || tmp == NULL ||
        (s = stmt(b, S_CLAIM_READ, err)) == NULL) {
        free(json);
        free(tmp);
        return json && tmp ? -1 : jr_fail(err, JR_ENOMEM, "sqlite: out of "
                                          "memory");
    }
    for (i = 0; i < n; i++)
        c[i].rank = i;
    qsort(c, (size_t)n, sizeof *c, candidate_id);
    bind_text(s, 1, json);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((j = row_job(s)) == NULL) {
            rc = SQLITE_NOMEM;
            break;
        }
        key.id = j->id;
        at = bsearch(&key, c, (size_t)n, sizeof *c, candidate_id);
        if (at == NULL || tmp[at->rank] != NULL) {
            free(j);            /* cannot be: the ids are ours */
            continue;
        }
        tmp[at->rank] = j;
    }
    sqlite3_reset(s);
    for (i = 0; i < n; i++)
        if (tmp[i] != NULL)
            out[k++] = tmp[i];
    free(tmp);
    if (rc != SQLITE_DONE)
        jr_sqlite_fail(b, err, "claiming jobs");
    if (rc != SQLITE_DONE ||
        mark_claimed(b, token, lease, now, json, k, err) < 0) {
        free(json);
        while (k > 0)
            free(out[--k]);
        return -1;
    }
    free(json);
    return k;
}

/* The claim under limits: in passes, each reading the first candidates
 * that the caps and buckets do not block, taking those that still fit
 * in fair order, until the claim is full or nothing was refused (a key
 * that fills up in a pass is skipped by the next). Returns how many jobs
 * it put in out[], or -1. */
static int
claim_limited(jr_backend *b, const char *token, double lease,
              const jr_claim_spec *spec, const char *json, jr_job **out,
              double now, jr_err *err)
{
    jr_claim_spec sub = *spec;
    limq lim = {0};
    candidate *c;
    int total = 0, pass, nc, k, n, rejected = 0;

    lim.spec = spec;
    if (jr_sqlite_lim_load(b, spec, now, &lim, err) < 0)
        goto fail;
    for (pass = 0; pass < 4 && total < spec->max; pass++) {
        free(lim.names);
        free(lim.pairs);
        free(lim.rooms);
        lim.names = jr_lpick_list(lim.pick, 'n', 1);
        lim.pairs = jr_lpick_list(lim.pick, 'p', 1);
        lim.rooms = jr_lpick_rooms(lim.pick);
        sub.max = spec->max - total;
        if (lim.names == NULL || lim.pairs == NULL || lim.rooms == NULL) {
            jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
            goto fail;
        }
        if ((c = jr_sqlite_candidates(b, &sub, json, now, &nc, &lim,
                                      err)) == NULL)
            goto fail;
        k = jr_sqlite_lim_filter(b, &lim, c, nc, sub.max, &rejected, err);
        n = k < 0 ? -1 : claim_picked(b, token, lease, c, k, out + total,
                                      now, err);
        if (n > 0)
            jr_sqlite_fair_mark(c, k, out + total, n);
        if (n > 0 && jr_sqlite_fair_save(b, c, n, err) < 0) {
            total += n;
            n = -1;
        }
        jr_sqlite_candidates_free(c, k < 0 ? nc : k);
        if (n < 0)
            goto fail;
        total += n;
        if (rejected == 0 || nc == 0)
            break;
    }
    if (jr_sqlite_lim_save(b, spec, lim.pick, now, err) < 0)
        goto fail;
    if (spec->limit_next)
        *spec->limit_next = jr_lpick_next(lim.pick);
    jr_sqlite_lim_clear(&lim);
    return total;
fail:
    while (total > 0)
        free(out[--total]);
    jr_sqlite_lim_clear(&lim);
    return -1;
}

int
jr_sqlite_claim_read(jr_backend *b, sqlite3_stmt *s, const char *queue,
                     const char *json, int max, const char *token,
                     double lease, double now, jr_job **out,
                     jr_sqlite_claim_row row, void *arg, const char *what,
                     jr_err *err)
{
    char *ids;
    int n = 0, rc, marked = 0;

    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, now);
    bind_text(s, 3, json);
    sqlite3_bind_int(s, 4, max);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && n < max) {
        if ((out[n++] = row_job(s)) == NULL) {          /* LIMIT max */
            n--;
            rc = SQLITE_NOMEM;
            break;
        }
        if (row != NULL)
            row(s, out[n - 1], n - 1, arg);
    }
    sqlite3_reset(s);
    if (rc == SQLITE_DONE && n > 0) {
        if ((ids = ids_json(NULL, out, n)) == NULL)
            rc = SQLITE_NOMEM;
        else if (mark_claimed(b, token, lease, now, ids, n, err) < 0)
            rc = SQLITE_ERROR, marked = -1;
        free(ids);
    }
    if (rc != SQLITE_DONE) {
        while (n > 0)
            free(out[--n]);
        if (marked < 0)
            return -1;                  /* mark_claimed said why */
        return rc == SQLITE_NOMEM ? jr_fail(err, JR_ENOMEM, "sqlite: out "
                                            "of memory") :
               jr_sqlite_fail(b, err, what);
    }
    return n;
}

/* S_CLAIM_ONE when one queue has ready jobs and the spec caps none: the
 * claim without the fair reads (there is one queue to be fair to), one
 * read in claim order and one update. Returns how many, or -2 if
 * the fair claim is to run instead. */
static int
claim_one(jr_backend *b, const char *token, double lease,
          const jr_claim_spec *spec, const char *json, jr_job **out,
          double now, jr_err *err)
{
    sqlite3_stmt *s;
    char *queue;
    int n, rc;

    if (spec->nqueues > 0 || spec->others < spec->max)
        return -2;
    if ((rc = jr_sqlite_ready_queue(b, json, now, &queue, err)) != 1)
        return rc == 2 ? -2 : rc;       /* several, none (0), or -1 */
    if ((s = stmt(b, S_CLAIM_ONE, err)) == NULL) {
        free(queue);
        return -1;
    }
    n = jr_sqlite_claim_read(b, s, queue, json, spec->max, token, lease,
                             now, out, NULL, NULL, "claiming jobs", err);
    free(queue);
    /* ORDER BY priority, run_at, id: already in claim order */
    return n;
}

/* Claims the fairly ordered candidates, inside the open transaction.
 * Returns how many jobs it filled out[] with, or -1 (the caller rolls
 * back). */
int
jr_sqlite_claim_rows(jr_backend *b, const char *token, double lease,
                     const jr_claim_spec *spec, jr_job **out, double now,
                     jr_err *err)
{
    candidate *c;
    char *json;
    int n, nc;

    if (spec->nnames <= 0 || spec->max <= 0)
        return 0;
    if ((json = jr_sqlite_names_json(spec->names, spec->nnames)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if (spec->nlimits > 0) {
        if ((n = jr_sqlite_fair_claim(b, token, lease, spec, json, out,
                                      now, err)) == -2)
            n = claim_limited(b, token, lease, spec, json, out, now, err);
        free(json);
        return n;
    }
    if ((n = claim_one(b, token, lease, spec, json, out, now, err)) != -2) {
        free(json);
        return n;
    }
    c = jr_sqlite_candidates(b, spec, json, now, &nc, NULL, err);
    free(json);
    if (c == NULL)
        return -1;
    n = claim_picked(b, token, lease, c, nc < spec->max ? nc : spec->max,
                     out, now, err);
    free(c);
    return n;
}

/* Commits a transaction that claimed out[0..n); on failure frees them. */
int
jr_sqlite_commit_claimed(jr_backend *b, jr_job **out, int n, jr_err *err)
{
    if (jr_sqlite_commit(b, err) == 0)
        return n;
    while (n > 0)
        free(out[--n]);
    return -1;
}

int
jr_sqlite_claim(jr_backend *b, const char *token, double lease,
                const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    int n;

    if (spec->nnames <= 0 || spec->max <= 0)
        return 0;
    /* begin first: it may reopen the file, which remakes statements */
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((n = jr_sqlite_claim_rows(b, token, lease, spec, out, jr_now(),
                                  err)) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit_claimed(b, out, n, err);
}
