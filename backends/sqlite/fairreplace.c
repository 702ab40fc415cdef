/* fairreplace.c - a fair queue's job replaced by a newer push on SQLite
 * (docs/queues.md, "Newer replaces older", "Fair share"): a unique key's
 * queued job or a sequence's pending last one that takes a push's
 * payload and run_at is keyed and tagged as a push of that payload would
 * be. Its key is stamped again (the queue's path, or its name's own), its
 * tag dropped and given again only when it is due now (a job due later
 * takes no turn of its key: the first claim after its run_at tags it).
 * The turn its old tag took is given back when it was its key's last
 * (the key's n-th job since its base, the last one given: its finish
 * moves back by 1/weight, so the key's next job takes that tag); a turn
 * with later ones of the key after it stays spent, as a hole in its key's
 * tags, rather than every later job of the key being tagged again. Owns
 * these statements; uses fair.c's and fairname.c's stamping. */
#include <string.h>

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FR_QUEUE, S_FR_GIVE, S_FR_CLEAR, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* job ?1's queue when it is keyed (in a fair queue) */
    [S_FR_QUEUE] =
        "SELECT queue FROM jobs WHERE id = ?1 AND fair_key IS NOT NULL",
    /* job ?1's turn back to its key when its tag is the key's last, the
     * one fair.c's FAIR_TAG gave its n-th job: base + (n - 1) / tw, the
     * same arithmetic, so equal to the bit */
    [S_FR_GIVE] =
        "UPDATE fair_keys SET n = n - 1, pass = base + (n - 1) * 1.0 / tw"
        " FROM (SELECT queue, fair_key, fair_tag, fair_w FROM jobs"
        "  WHERE id = ?1 AND fair_tag IS NOT NULL) j"
        " WHERE fair_keys.queue = j.queue AND fair_keys.key = j.fair_key"
        " AND fair_keys.n > 0 AND fair_keys.tw = j.fair_w"
        " AND fair_keys.base + (fair_keys.n - 1) * 1.0 / fair_keys.tw"
        " = j.fair_tag",
    /* and its key and tag, to be stamped again */
    [S_FR_CLEAR] =
        "UPDATE jobs SET fair_key = NULL, fair_tag = NULL,"
        " fair_w = NULL WHERE id = ?1"
        " AND fair_key IS NOT NULL",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

int
jr_sqlite_fair_give(jr_backend *b, int64_t id, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FR_GIVE, err);

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    return run(b, s, err, "giving a job's fair turn back");
}

int
jr_sqlite_fair_replaced(jr_backend *b, int64_t id, double now, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_FR_QUEUE, err);
    char queue[NAME_BUF];
    const unsigned char *q;
    int64_t stamped = 0;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    q = rc == SQLITE_ROW ? sqlite3_column_text(s, 0) : NULL;
    if (q != NULL && strlen((const char *)q) < sizeof queue)
        memcpy(queue, q, strlen((const char *)q) + 1);
    else
        q = NULL;
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading a replaced job");
    if (q == NULL)
        return 0;               /* not in a fair queue: nothing keyed */
    if (jr_sqlite_fair_give(b, id, err) < 0 ||
        (s = stmt(b, S_FR_CLEAR, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if (run(b, s, err, "keying a replaced job again") < 0)
        return -1;
    /* the stamp skips ids up to those of the transaction's pushes into
     * the queue it saw last: this older one is stamped all the same */
    if (strcmp(queue, b->fair_seen) == 0) {
        stamped = b->fair_hi;
        b->fair_hi = 0;
    }
    if (jr_sqlite_fair_stamp(b, queue, id, id, err) < 0)
        return -1;
    if (b->fair_hi < stamped)
        b->fair_hi = stamped;
    if (!b->fair_is)
        return 0;
    return jr_sqlite_fair_name_stamp(b, id, id, err) < 0 ||
           jr_sqlite_fair_tag(b, id, id, now, err) < 0 ? -1 : 0;
}
