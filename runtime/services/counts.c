/* counts.c - on_tick's counts, a step of the database cycle (counts.h):
 * on the database thread, after the claim, the ready jobs per queue for
 * the cycle's names and each limit's jobs ready and running. Uses
 * counts.h, dbcalls.h. */
#include <stdlib.h>
#include <string.h>

#include "db/dbcalls.h"
#include "services/counts.h"

#define READY_MAX 1000000       /* ready jobs counted at most */

void
jr_counts_reset(jr_counts *c)
{
    c->ready = -1;
    c->q = NULL;
    c->nq = 0;
    c->lim_waiting = c->lim_running = NULL;
}

static void
clear(void *arg)
{
    jr_counts *c = arg;
    int i;

    for (i = 0; i < c->nq; i++)
        free(c->q[i].queue);
    free(c->q);
    free(c->lim_waiting);
    jr_counts_reset(c);
}

static int
add_ready(const char *queue, long n, void *arg)
{
    jr_counts *c = arg;
    jr_queue_count *more = realloc(c->q, (size_t)(c->nq + 1) * sizeof *more);

    if (more == NULL)
        return 1;
    c->q = more;
    if ((more[c->nq].queue = strdup(queue)) == NULL)
        return 1;
    more[c->nq++].n = n;
    c->ready += n;
    return 0;
}

/* Each limit's jobs ready and running, over all runners (one limit_use
 * each; none when out of memory). A limit not read counts -1, and the
 * others are read on. */
static int
limit_counts(jr_db *db, const jr_cycle *c, jr_counts *k, jr_err *err)
{
    jr_err e;
    int i, rc = 0;

    k->lim_waiting = calloc(2 * (size_t)c->nlimits, sizeof *k->lim_waiting);
    if (k->lim_waiting == NULL)
        return 0;
    k->lim_running = k->lim_waiting + c->nlimits;
    for (i = 0; i < c->nlimits; i++)
        if (jr_dbcall_limit_use(db, &c->limits[i], &k->lim_waiting[i],
                                &k->lim_running[i], &e) < 0) {
            if (rc == 0)
                *err = e;
            rc = -1;
            k->lim_waiting[i] = k->lim_running[i] = -1;
        }
    return rc;
}

static int
run(jr_db *db, const char *token, jr_cycle *c, void *arg, jr_err *err)
{
    jr_counts *k = arg;

    (void)token;
    k->ready = 0;
    if (jr_dbcall_ready_by_queue(db, c->names, c->nnames, READY_MAX,
                                 add_ready, k, err) < 0) {
        k->ready = -1;
        return -1;
    }
    return c->nlimits > 0 ? limit_counts(db, c, k, err) : 0;
}

const jr_cycle_step jr_counts_step = {
    .name = "on_tick's counts", .when = JR_STEP_LAST, .run = run,
    .clear = clear,
};
