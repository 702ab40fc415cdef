/* fairpick.c - whose turn among a fair queue's keys: the lowest pass
 * (never below the clock) with a job left, ties to the key whose first
 * job comes first in claim order. O(max log keys) per claim. Also
 * whether a claim is a fair queue's alone. Uses backend.h's claim spec. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
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

/* a goes before b: before(), then the lower index (a linear scan's first) */
static int
ahead(const jr_fair_key *k, int a, int b)
{
    return before(&k[a], &k[b]) || (!before(&k[b], &k[a]) && a < b);
}

static void
sift(const jr_fair_key *k, int *h, int n, int i)
{
    int c, t;

    while ((c = 2 * i + 1) < n) {
        if (c + 1 < n && ahead(k, h[c + 1], h[c]))
            c++;
        if (!ahead(k, h[c], h[i]))
            break;
        t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

int
jr_fair_order(jr_fair_key *k, int nk, double clock, int max, int *order)
{
    int i, n, best, hn = 0, *h = nk > 0 ? malloc((size_t)nk * sizeof *h) :
                                 NULL;

    for (i = 0; i < nk; i++) {
        if (k[i].pass < clock)
            k[i].pass = clock;
        k[i].next = 0;
        if (h != NULL && k[i].njobs > 0)
            h[hn++] = i;
    }
    if (h != NULL) {            /* a heap by turn: O(max log keys) */
        for (i = hn / 2 - 1; i >= 0; i--)
            sift(k, h, hn, i);
        for (n = 0; n < max && hn > 0; n++) {
            best = h[0];
            order[n] = best;
            k[best].pass += 1 / k[best].weight;
            if (++k[best].next >= k[best].njobs)
                h[0] = h[--hn];
            sift(k, h, hn, 0);
        }
        free(h);
        return n;
    }
    for (n = 0; n < max; n++) {     /* no memory for it: a scan a start */
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

int
jr_fair_names_add(const char *name, void *arg)
{
    jr_fair_names *t = arg;

    if (t->n == JR_FAIR_NAMES)
        return 1;                       /* enough: stop */
    snprintf(t->name[t->n++], sizeof t->name[0], "%.128s", name);
    return 0;
}

uint64_t
jr_fair_limit_hash(const jr_limit *f)
{
    uint64_t h = 14695981039346656037u;
    const char *p[3] = { f->scope, f->fair_path, f->fair_weights };
    const unsigned char *c;
    char def[32];
    int i;

    snprintf(def, sizeof def, "%.17g", f->fair_default);
    for (i = 0; i < 4; i++) {
        for (c = (const unsigned char *)(i < 3 ? p[i] : def); c && *c; c++)
            h = (h ^ *c) * 1099511628211u;
        h = (h ^ 0xff) * 1099511628211u;
    }
    return h;
}

int
jr_fair_seen_has(const jr_fair_seen *s, uint64_t h)
{
    int i;

    for (i = 0; i < s->n; i++)
        if (s->h[i] == h)
            return 1;
    return 0;
}

void
jr_fair_seen_add(jr_fair_seen *s, uint64_t h)
{
    if (s->n == (int)(sizeof s->h / sizeof s->h[0]))
        s->n = 0;
    s->h[s->n++] = h;
}

const jr_limit *
jr_fair_alone(const jr_claim_spec *spec)
{
    const jr_limit *f = spec->limits;

    if (spec->nlimits != 1 || f->fair_path == NULL ||
        strncmp(f->scope, JR_LIMIT_QPREFIX, 6) != 0 || f->key_path ||
        f->all.concurrency || f->all.rate > 0 || f->per_key.concurrency ||
        f->per_key.rate > 0 || f->aging > 0 || spec->nqueues > 0 ||
        spec->others < spec->max)
        return NULL;
    return f;
}
