/* agestats.c - what `stats` shows of an aging queue on SQLite
 * (docs/queues.md, "Priority aging"): its ready jobs counted by
 * effective priority (the priority less a level per period waited since
 * run_at, as base/limit.h's jr_aged_priority). Uses sqlite_int.h. */
#include <stdint.h>
#include <stdlib.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_AGE_USE, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* queue ?1's ready jobs at ?2 by effective priority (?3 seconds a
     * level), the first ?4 */
    [S_AGE_USE] =
        "SELECT e, count(*), min(priority) FROM (SELECT priority -"
        " CASE WHEN ?2 - run_at >= ?3 THEN CAST((?2 - run_at) / ?3"
        "  AS INTEGER) ELSE 0 END AS e, priority FROM jobs"
        " WHERE state = 'queued' AND queue = ?1 AND run_at <= ?2)"
        " GROUP BY e ORDER BY e LIMIT ?4",
};

int
jr_sqlite_aging_use(jr_backend *b, const char *queue, double aging, int max,
                    jr_aging_use_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = jr_sqlite_stmt(b, &sql_text[S_AGE_USE], err);
    int rc;

    if (s == NULL)
        return -1;
    if (!(aging > 0))
        return jr_fail(err, JR_EINPUT, "queue '%s' does not age", queue);
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, jr_now());
    sqlite3_bind_double(s, 3, aging);
    sqlite3_bind_int(s, 4, max > 0 ? max : -1);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb(sqlite3_column_int64(s, 0), (long)sqlite3_column_int64(s, 1),
               sqlite3_column_int(s, 2), arg) != 0)
            break;
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           jr_sqlite_fail(b, err, "reading an aging queue");
}
