/* fairpick.c - whose turn among a fair queue's keys: the lowest pass
 * (never below the clock) with a job left, ties to the key whose first
 * job comes first in claim order. O(max * keys) per claim: a claim takes
 * a few dozen jobs. */
#include <stdio.h>
#include "fairpick.h"

double
jr_fair_clock(const jr_fair_key *k, int nk, double clock)
{
    double low = -1;
    int i;

    for (i = 0; i < nk; i++)
        if (low < 0 || k[i].pass < low)
            low = k[i].pass;
    return low > clock ? low : clock;
}

static int
before(const jr_fair_key *a, const jr_fair_key *b)
{
    if (a->pass != b->pass)
        return a->pass < b->pass;
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->run_at != b->run_at)
        return a->run_at < b->run_at;
    return a->id < b->id;
}

int
jr_fair_order(jr_fair_key *k, int nk, double clock, int max, int *order)
{
    int i, n, best;

    for (i = 0; i < nk; i++) {
        if (k[i].pass < clock)
            k[i].pass = clock;
        k[i].next = 0;
    }
    for (n = 0; n < max; n++) {
        for (i = 0, best = -1; i < nk; i++)
            if (k[i].next < k[i].njobs &&
                (best < 0 || before(&k[i], &k[best])))
                best = i;
        if (best < 0)
            break;
        order[n] = best;
        k[best].next++;
        k[best].pass += 1 / k[best].weight;
    }
    return n;
}

double
jr_fair_after(const jr_fair_key *k, int nk, const int *planned,
              double clock)
{
    double low = -1, high = clock, p;
    int i;

    for (i = 0; i < nk; i++) {
        if (k[i].next >= planned[i] && (low < 0 || k[i].pass < low))
            low = k[i].pass;
        /* the pass it reached with the jobs it got */
        p = k[i].pass - (planned[i] - k[i].next) / k[i].weight;
        if (k[i].next > 0 && p > high)
            high = p;
    }
    if (low < 0)
        low = high;             /* every key ran out: none is behind */
    return low > clock ? low : clock;
}

int
jr_fair_top_add(const char *key, long waiting, long running, double weight,
                void *arg)
{
    jr_fair_top *t = arg;

    if (waiting > 0) {
        t->keys++;
        t->weights += weight;
    }
    if (t->n < JR_FAIR_TOP) {       /* rows come by most ready first */
        snprintf(t->top[t->n].key, sizeof t->top[t->n].key, "%.256s", key);
        t->top[t->n].waiting = waiting;
        t->top[t->n].running = running;
        t->top[t->n].weight = weight;
        t->n++;
    }
    return 0;
}

void
jr_fair_top_done(jr_fair_top *t)
{
    int i;

    for (i = 0; i < t->n; i++)
        t->top[i].share = t->top[i].waiting > 0 && t->weights > 0 ?
                          t->top[i].weight / t->weights : 0;
}
