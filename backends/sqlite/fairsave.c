/* fairsave.c - the clock a claim's starts bring a fair queue to
 * (docs/queues.md, "Fair share"): the highest start tag it took, written
 * in the claim's transaction, one statement a queue. Uses
 * sqlite_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FAIR_TICK, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* queue ?1's clock: the highest start tag a claim took */
    [S_FAIR_TICK] =
        "INSERT INTO fair_clocks (queue, clock) VALUES (?1, ?2)"
        " ON CONFLICT (queue) DO UPDATE"
        " SET clock = max(clock, excluded.clock)",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Orders pointers to fair candidates by queue. */
static int
by_queue(const void *a, const void *b)
{
    const candidate *x = *(const candidate *const *)a;
    const candidate *y = *(const candidate *const *)b;

    return strcmp(x->queue, y->queue);
}

int
jr_sqlite_fair_tick(jr_backend *b, const char *queue, double clock,
                    jr_err *err)
{
    sqlite3_stmt *s;

    if ((s = stmt(b, S_FAIR_TICK, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, clock);
    return run(b, s, err, "moving a fair queue's clock") < 0 ? -1 : 0;
}

/* Moves the clock of the queue of p[0..m) to the highest tag taken. */
static int
save_queue(jr_backend *b, const candidate **p, int m, jr_err *err)
{
    double clock = p[0]->fclock;
    int i;

    for (i = 1; i < m; i++)
        if (p[i]->fclock > clock)
            clock = p[i]->fclock;
    return jr_sqlite_fair_tick(b, p[0]->queue, clock, err);
}

int
jr_sqlite_fair_save(jr_backend *b, const candidate *c, int n, jr_err *err)
{
    const candidate **p;
    int i, j, m = 0, rc = 0;

    if (n <= 0)
        return 0;
    if ((p = malloc((size_t)n * sizeof *p)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    for (i = 0; i < n; i++)
        if (c[i].fkey != NULL)
            p[m++] = &c[i];
    qsort(p, (size_t)m, sizeof *p, by_queue);
    for (i = 0; i < m && rc == 0; i = j) {      /* a queue at a time */
        for (j = i; j < m && strcmp(p[j]->queue, p[i]->queue) == 0; j++)
            ;
        rc = save_queue(b, p + i, j - i, err);
    }
    free(p);
    return rc;
}
