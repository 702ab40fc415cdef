/* fairq.c - the local queue fair inside a fair queue (docs/queues.md,
 * "Fair share"): the jobs a claim brings go behind those claimed before,
 * so a key's job claimed now would wait for the other keys' jobs claimed
 * ahead of it (a whole local queue of one tenant's backlog). After each
 * claim, the places a fair queue's jobs hold in the local queue are
 * dealt out again round robin between their keys (each key's jobs in
 * their order; a job's round is how many of its key's are before it),
 * so a key's first job goes second, not last. Jobs of other queues keep
 * their places. Nothing is done for a config without a fair queue. Uses
 * master_int.h, jsondom.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "master/master_int.h"
#include "base/jsondom.h"
#include "base/limit.h"

typedef struct item {
    jr_job  *job;
    uint64_t key;               /* its fair key's text, hashed */
    double   round;             /* its key's jobs before it / weight */
    int      seq;
} item;

/* FNV-1a of the text of the value at dotted path in j's payload (a
 * missing one, or a payload that is not JSON, hashes as ""). */
static uint64_t
key_hash(const jr_job *j, const char *path)
{
    uint64_t h = 1469598103934665603ULL;
    jr_jdoc doc = {0};
    jr_err err;
    char part[128];
    const char *p = path, *dot;
    size_t len, i;
    int at = 0;

    if (j->payload == NULL ||
        jr_jdoc_parse(&doc, j->payload, j->payload_len, "payload", &err) < 0)
        return h;
    while (at >= 0 && *p) {
        dot = strchr(p, '.');
        len = dot ? (size_t)(dot - p) : strlen(p);
        if (len >= sizeof part || doc.n[at].type != JR_JSON_OBJECT) {
            at = -1;
            break;
        }
        memcpy(part, p, len);
        part[len] = '\0';
        at = jr_jdoc_get(&doc, at, part);
        p += len + (dot != NULL);
    }
    if (at >= 0)
        for (i = 0; i < doc.n[at].len; i++)
            h = (h ^ (unsigned char)doc.n[at].at[i]) * 1099511628211ULL;
    jr_jdoc_free(&doc);
    return h;
}

static int
by_round(const void *a, const void *b)
{
    const item *x = a, *y = b;

    if (x->round != y->round)
        return x->round < y->round ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The rounds of it[0..n): a small open-addressed count per key. */
static int
rounds(item *it, int n)
{
    size_t cap = 16, h;
    uint64_t *keys;
    int *count, k;

    while (cap < (size_t)n * 2)
        cap *= 2;
    keys = calloc(cap, sizeof *keys);
    count = calloc(cap, sizeof *count);
    if (keys == NULL || count == NULL) {
        free(keys);
        free(count);
        return -1;
    }
    for (k = 0; k < n; k++) {
        for (h = (size_t)it[k].key & (cap - 1);
             count[h] > 0 && keys[h] != it[k].key; h = (h + 1) & (cap - 1))
            ;
        keys[h] = it[k].key;
        it[k].round = count[h]++ / (it[k].job->fair_weight > 0 ?
                                    it[k].job->fair_weight : 1);
        it[k].seq = k;
    }
    free(keys);
    free(count);
    return 0;
}

/* Deals out again the places of fair queue's jobs in m's local queue;
 * 1 when one of them is behind another of its key (a round past 0), 0
 * when each is its key's first, -1 out of memory (they stay as
 * claimed). */
static int
deal(master *m, const char *queue, const char *path)
{
    size_t i, *pos = NULL;
    item *it = NULL;
    int n = 0, deep = -1, k;
    jr_job *j;

    for (i = 0; i < m->qlen; i++) {
        j = m->queue[(m->qhead + i) % m->qcap];
        if (j->queue == NULL || strcmp(j->queue, queue) != 0)
            continue;
        if (it == NULL && ((it = malloc(m->qlen * sizeof *it)) == NULL ||
                           (pos = malloc(m->qlen * sizeof *pos)) == NULL))
            goto out;           /* out of memory: they stay as claimed */
        if (j->fair_hash == 0)          /* once a job: a parse */
            j->fair_hash = key_hash(j, path) | 1;
        it[n].job = j;
        it[n].key = j->fair_hash;
        pos[n++] = i;
    }
    deep = 0;
    if (n < 2)
        goto out;
    if (rounds(it, n) < 0) {
        deep = -1;
        goto out;
    }
    for (k = 0; k < n && !deep; k++)
        deep = it[k].round > 0;
    qsort(it, (size_t)n, sizeof *it, by_round);
    while (n-- > 0)
        m->queue[(m->qhead + pos[n]) % m->qcap] = it[n].job;
out:
    free(it);
    free(pos);
    return deep;
}

void
jr_fairq_deal(master *m)
{
    const jr_limits *ls = &m->cfg->limits;
    int i;

    m->fair_deep = 0;
    for (i = 0; i < ls->n; i++)
        if (ls->l[i].fair_path != NULL &&
            strncmp(ls->l[i].scope, JR_LIMIT_QPREFIX, 6) == 0 &&
            deal(m, ls->l[i].scope + 6, ls->l[i].fair_path) != 0)
            m->fair_deep = 1;
}

/* A claim while the local queue is full of claimed jobs: with a fair
 * queue, another's push (the claim of a cycle asks only when the
 * database changed) may be a key's first job, whose turn comes before
 * the jobs queued here: a few are claimed so that it is dealt in at
 * once, not after half the local queue. The database gives a new key's
 * job the queue's clock for its tag, the least a claim takes: when a
 * claim, small or not, comes back full and its last job is of a key new
 * here, more new keys may wait (a burst of tenants pushed at once), and
 * another follows (jr_fairq_more), small while the local queue is full;
 * when its last is of a key queued here, the new keys came before it.
 * Only while a fair queue's job here is behind another of its key (the
 * last deal's fair_deep): a new key's job goes ahead of those; with each
 * job its key's first (a drain over many keys) it would go last, where
 * the next claim puts it anyway, and the small claims were a database
 * round each for nothing. Bounded: at most FAIR_DEPTH jobs wait here. */
#define FAIR_PEEK  8
#define FAIR_DEPTH 1024

/* The fair path of queue's limit, or NULL. */
static const char *
fair_path(const master *m, const char *queue)
{
    const jr_limits *ls = &m->cfg->limits;
    int i;

    for (i = 0; queue != NULL && i < ls->n; i++)
        if (ls->l[i].fair_path != NULL &&
            strncmp(ls->l[i].scope, JR_LIMIT_QPREFIX, 6) == 0 &&
            strcmp(ls->l[i].scope + 6, queue) == 0)
            return ls->l[i].fair_path;
    return NULL;
}

int
jr_fairq_more(master *m, jr_job *const *jobs, int n, int want)
{
    const char *path;
    jr_job *last, *j;
    size_t i;

    if (n <= 0 || n != want || m->stopping ||
        (path = fair_path(m, (last = jobs[n - 1])->queue)) == NULL)
        return 0;
    if (last->fair_hash == 0)
        last->fair_hash = key_hash(last, path) | 1;
    for (i = 0; i < m->qlen; i++) {
        j = m->queue[(m->qhead + i) % m->qcap];
        if (j->fair_hash == last->fair_hash && j->queue != NULL &&
            strcmp(j->queue, last->queue) == 0)
            return 0;
    }
    return 1;
}

int
jr_fairq_peek(const master *m)
{
    const jr_limits *ls = &m->cfg->limits;
    int i;

    if (m->qlen >= FAIR_DEPTH || !m->fair_deep)
        return 0;
    for (i = 0; i < ls->n; i++)
        if (ls->l[i].fair_path != NULL &&
            strncmp(ls->l[i].scope, JR_LIMIT_QPREFIX, 6) == 0)
            return FAIR_PEEK;
    return 0;
}
