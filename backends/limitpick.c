/* limitpick.c - one claim's limits: a hash of (limit, key) entries with
 * the running count and the bucket of each, read by the engine in the
 * claim's transaction, then consulted for each candidate in fair order.
 * The engines (sqlite/limits.c, postgres/limits.c) own the SQL; this
 * file owns the rule (caps first, then tokens; a job takes room in every
 * limit on it or in none). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limitpick.h"
#include "base/job.h"

#define QPLEN (sizeof JR_LIMIT_QPREFIX - 1)

typedef struct entry {
    int     li;                 /* index into the limits */
    char   *key;                /* NULL: the scope's own entry */
    long    running;
    double  tokens;             /* bucket now (full unless read) */
    int     dirty;              /* tokens taken: write back */
    int     read;               /* its stored bucket was read */
    int     used;               /* slot in use */
} entry;

struct jr_lpick {
    const jr_limit *l;
    int             nl;
    double          now;
    double          next;       /* earliest token of a refused bucket */
    entry          *e;          /* open addressing, power of two slots */
    size_t          cap, n;
};

static uint64_t
hash(int li, const char *key)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(unsigned)li;

    while (key && *key)
        h = (h ^ (unsigned char)*key++) * 1099511628211ULL;
    return h * 0x9E3779B97F4A7C15ULL + (key != NULL);
}

static const jr_limit_set *
set_of(const jr_lpick *p, const entry *e)
{
    return e->key ? &p->l[e->li].per_key : &p->l[e->li].all;
}

static int
grow(jr_lpick *p)
{
    size_t cap = p->cap ? p->cap * 2 : 64, i, k;
    entry *e = calloc(cap, sizeof *e);

    if (e == NULL)
        return -1;
    for (i = 0; i < p->cap; i++) {
        if (!p->e[i].used)
            continue;
        k = hash(p->e[i].li, p->e[i].key) & (cap - 1);
        while (e[k].used)
            k = (k + 1) & (cap - 1);
        e[k] = p->e[i];
    }
    free(p->e);
    p->e = e;
    p->cap = cap;
    return 0;
}

/* The entry of limit li and key, made (bucket full) if new; NULL when out
 * of memory. */
static entry *
get(jr_lpick *p, int li, const char *key)
{
    size_t k;
    entry *e;

    if ((p->n + 1) * 2 > p->cap && grow(p) < 0)
        return NULL;
    for (k = hash(li, key) & (p->cap - 1); p->e[k].used;
         k = (k + 1) & (p->cap - 1)) {
        e = &p->e[k];
        if (e->li == li && (e->key == key ||
                            (e->key && key && strcmp(e->key, key) == 0)))
            return e;
    }
    e = &p->e[k];
    if (key && (e->key = strdup(key)) == NULL)
        return NULL;
    e->li = li;
    e->used = 1;
    e->tokens = key ? p->l[li].per_key.burst : p->l[li].all.burst;
    p->n++;
    return e;
}

jr_lpick *
jr_lpick_new(const jr_limit *l, int n, double now)
{
    jr_lpick *p = calloc(1, sizeof *p);

    if (p == NULL)
        return NULL;
    p->l = l;
    p->nl = n;
    p->now = now;
    return p;
}

void
jr_lpick_free(jr_lpick *p)
{
    size_t i;

    if (p == NULL)
        return;
    for (i = 0; i < p->cap; i++)
        free(p->e[i].key);
    free(p->e);
    free(p);
}

/* Whether limit li applies to a job of name in queue. */
static int
applies(const jr_limit *l, const char *name, const char *queue)
{
    if (strncmp(l->scope, JR_LIMIT_QPREFIX, QPLEN) == 0)
        return strcmp(l->scope + QPLEN, queue) == 0;
    return strcmp(l->scope, name) == 0;
}

static int
has_any(const jr_limit_set *s)
{
    return s->concurrency > 0 || s->rate > 0;
}

int
jr_lpick_limited(const jr_lpick *p, const char *name, const char *queue)
{
    int i;

    for (i = 0; i < p->nl; i++)
        if (applies(&p->l[i], name, queue))
            return 1;
    return 0;
}

int
jr_lpick_running(jr_lpick *p, const char *name, const char *queue,
                 const char *key, long n)
{
    entry *e;
    int i;

    for (i = 0; i < p->nl; i++) {
        if (!applies(&p->l[i], name, queue))
            continue;
        if ((e = get(p, i, NULL)) == NULL)
            return -1;
        e->running += n;
        if (key && has_any(&p->l[i].per_key)) {
            if ((e = get(p, i, key)) == NULL)
                return -1;
            e->running += n;
        }
    }
    return 0;
}

int
jr_lpick_bucket(jr_lpick *p, const char *scope, const char *key,
                double tokens, double at)
{
    const jr_limit_set *s;
    entry *e;
    int i;

    for (i = 0; i < p->nl && strcmp(p->l[i].scope, scope) != 0; i++)
        ;
    if (i == p->nl)
        return 0;
    s = *key ? &p->l[i].per_key : &p->l[i].all;
    if (s->rate <= 0)
        return 0;
    if ((e = get(p, i, *key ? key : NULL)) == NULL)
        return -1;
    e->read = 1;
    e->tokens = tokens + (p->now > at ? p->now - at : 0) * s->rate;
    if (e->tokens > s->burst)
        e->tokens = s->burst;
    return 0;
}

int
jr_lpick_need(jr_lpick *p, const char *name, const char *queue,
              const char *key, jr_lpick_need_cb cb, void *arg)
{
    entry *e;
    int i;

    for (i = 0; key && i < p->nl; i++) {
        if (!applies(&p->l[i], name, queue) || p->l[i].per_key.rate <= 0)
            continue;
        if ((e = get(p, i, key)) == NULL)
            return -1;
        if (e->read)
            continue;
        e->read = 1;            /* e may move: cb adds to the hash */
        if (cb(p->l[i].scope, key, arg) < 0)
            return -2;
    }
    return 0;
}

int
jr_lpick_key_rates(const jr_lpick *p, jr_lpick_rate_cb cb, void *arg)
{
    int i;

    for (i = 0; i < p->nl; i++)
        if (p->l[i].per_key.rate > 0 &&
            cb(p->l[i].scope, p->l[i].per_key.rate, arg) < 0)
            return -1;
    return 0;
}

/* Whether e has room for one more job of cost units; notes when the
 * tokens come. */
static int
room_for(jr_lpick *p, const entry *e, long cost)
{
    const jr_limit_set *s = set_of(p, e);
    double at;

    if (s->concurrency > 0 && e->running + cost > s->concurrency)
        return 0;
    if (s->rate > 0 && e->tokens < cost) {
        at = p->now + (cost - e->tokens) / s->rate;
        if (p->next == 0 || at < p->next)
            p->next = at;
        return 0;
    }
    return 1;
}

static int
room(jr_lpick *p, const entry *e)
{
    return room_for(p, e, 1);
}

int
jr_lpick_queue_open(jr_lpick *p, const char *queue)
{
    entry *e;
    int i;

    for (i = 0; i < p->nl; i++) {
        const char *s = p->l[i].scope;
        if (strncmp(s, JR_LIMIT_QPREFIX, QPLEN) != 0 ||
            strcmp(s + QPLEN, queue) != 0)
            continue;
        if ((e = get(p, i, NULL)) == NULL)
            return 1;           /* out of memory: the take will say */
        if (!room(p, e))
            return 0;
    }
    return 1;
}

int
jr_lpick_take(jr_lpick *p, const char *name, const char *queue,
              const char *key)
{
    return jr_lpick_take_cost(p, name, queue, key, 1);
}

int
jr_lpick_take_cost(jr_lpick *p, const char *name, const char *queue,
                   const char *key, long cost)
{
    entry *got[2 * JR_LIMIT_MAX];
    int i, k, n = 0;

    if (cost < 1)
        cost = 1;
    for (i = 0; i < p->nl; i++) {
        if (!applies(&p->l[i], name, queue))
            continue;
        if ((got[n] = get(p, i, NULL)) == NULL)
            return -1;
        if (!room_for(p, got[n++], cost))
            return 0;
        if (key && has_any(&p->l[i].per_key)) {
            if ((got[n] = get(p, i, key)) == NULL)
                return -1;
            if (!room_for(p, got[n++], cost))
                return 0;
        }
    }
    for (k = 0; k < n; k++) {
        got[k]->running += cost;
        if (set_of(p, got[k])->rate > 0) {
            got[k]->tokens -= cost;
            got[k]->dirty = 1;
        }
    }
    return 1;
}

void
jr_lpick_blocked(const jr_lpick *p, jr_lpick_blocked_cb cb, void *arg)
{
    const jr_limit_set *s;
    const char *scope;
    size_t i;
    int q;

    for (i = 0; i < p->cap; i++) {
        const entry *e = &p->e[i];
        if (!e->used)
            continue;
        s = set_of(p, e);
        if (!((s->concurrency > 0 && e->running >= s->concurrency) ||
              (s->rate > 0 && e->tokens < 1)))
            continue;
        scope = p->l[e->li].scope;
        q = strncmp(scope, JR_LIMIT_QPREFIX, QPLEN) == 0;
        cb(q, q ? scope + QPLEN : scope, e->key, arg);
    }
}

int
jr_lpick_dirty(const jr_lpick *p, jr_lpick_bucket_cb cb, void *arg)
{
    size_t i;

    for (i = 0; i < p->cap; i++)
        if (p->e[i].used && p->e[i].dirty &&
            cb(p->l[p->e[i].li].scope, p->e[i].key ? p->e[i].key : "",
               p->e[i].tokens, p->now, arg) < 0)
            return -1;
    return 0;
}

double
jr_lpick_now(const jr_lpick *p)
{
    return p->now;
}

double
jr_lpick_next(const jr_lpick *p)
{
    return p->next;
}

/* ---- the blocked lists as SQL parameters ---- */

typedef struct list {
    char  *s;
    size_t len, cap;
    int    which, json, oom, n;
} list;

static void
put(list *b, const char *s, size_t n)
{
    char *bigger;

    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        if ((bigger = realloc(b->s, cap)) == NULL) {
            b->oom = 1;
            return;
        }
        b->s = bigger;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* Appends s escaped for a JSON string or an array literal element. */
static void
put_escaped(list *b, const char *s)
{
    char u[8];

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            put(b, "\\", 1);
            put(b, s, 1);
        } else if (c < 0x20 && b->json) {
            snprintf(u, sizeof u, "\\u%04x", c);
            put(b, u, 6);
        } else {
            put(b, s, 1);
        }
    }
}

static void
add_blocked(int queue, const char *target, const char *key, void *arg)
{
    list *b = arg;

    if (b->which == 'p' ? key == NULL :
        key != NULL || (b->which == 'q') != queue)
        return;
    if (b->n++ > 0)
        put(b, ",", 1);
    put(b, "\"", 1);
    if (b->which == 'p')
        put(b, queue ? "q" : "n", 1);
    put_escaped(b, target);
    if (b->which == 'p') {
        put(b, b->json ? "\\u001f" : "\x1f", b->json ? 6 : 1);
        put_escaped(b, key);
    }
    put(b, "\"", 1);
}

char *
jr_lpick_list(const jr_lpick *p, int which, int json)
{
    list b = {0};

    b.which = which;
    b.json = json;
    put(&b, json ? "[" : "{", 1);
    jr_lpick_blocked(p, add_blocked, &b);
    put(&b, json ? "]" : "}", 1);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *
jr_lpick_rooms(const jr_lpick *p)
{
    list b = {0};
    char num[64];
    size_t i;

    b.json = 1;
    put(&b, "{", 1);
    for (i = 0; i < p->cap; i++) {
        const entry *e = &p->e[i];
        const jr_limit_set *s;
        double room = JR_COST_MAX;
        if (!e->used || e->key != NULL)
            continue;
        s = set_of(p, e);
        if (s->concurrency > 0 && s->concurrency - e->running < room)
            room = (double)(s->concurrency - e->running);
        if (s->rate > 0 && e->tokens < room)
            room = e->tokens;
        if (room >= JR_COST_MAX)
            continue;
        if (room < 0)
            room = 0;
        if (b.n++ > 0)
            put(&b, ",", 1);
        put(&b, "\"", 1);
        put_escaped(&b, p->l[e->li].scope);
        snprintf(num, sizeof num, "\":%ld", (long)room);
        put(&b, num, strlen(num));
    }
    put(&b, "}", 1);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

int
jr_lpick_caps_running(const jr_limit *l, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (l[i].all.concurrency > 0 || l[i].per_key.concurrency > 0)
            return 1;
    return 0;
}
