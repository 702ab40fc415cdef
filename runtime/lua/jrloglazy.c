/* jrloglazy.c - a plain job's jobrunner.log lines kept as the call's
 * arguments (docs/handlers.md, "Each attempt's logs"): its message, its
 * fields table, its time and level; nothing is read at the call. They
 * are made into the run's lines (joblog.h, through jrlog.c) where they
 * are needed: before the handler's own output is kept or a line is kept
 * at once, every LAZY_MAX lines, at the attempt's end. A success the
 * master said it deletes holds them instead, until the master says
 * whether its row stayed (a wait's mark): then they are made and sent,
 * or dropped. The arguments wait on a thread of the state's (its stack,
 * two values a line), their times and levels and the held runs in
 * arrays here: one plain job runs at a time in a worker. Uses
 * jrloglazy.h, joblog.h, util.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/joblog.h"
#include "base/util.h"
#include "lua/jrloglazy.h"

#define LAZY_MAX 64             /* lines that wait, then are made */
#define HELD_MAX 4096           /* lines held for the master at most */
#define ROOM (2 * LAZY_MAX + JR_JOBLOG_FIELDS + 8)  /* T's stack: the
                                   waiting pairs, a table read, floats */

typedef struct held {           /* a success's lines, held */
    int64_t id;
    int     attempt;
    int     first, n;           /* its lines: pairs first.. first + n - 1 */
    int     gone;               /* the master's word came */
} held;

static char       key;          /* T's place in the registry */
static lua_State *T;            /* pair k: its message at 2k + 1, its
                                   fields (false: none) at 2k + 2 */
static jr_jobctx *on;           /* the job whose lines wait, or NULL */
typedef struct line {           /* pair k's */
    long long   at;             /* epoch ms * 4 + level */
    const void *t;              /* its fields table, NULL: none */
} line;

static lua_State *of;           /* the state T is found in (begin's) */
static line      *at;           /* pair k's time, level, table */
static int        cap;          /* at's room */
static int        nlines;       /* pairs on T */
static int        first;        /* the first that waits; held below */
static held      *hs;
static int        nheld, capheld, alive;
static int        head;         /* hs[0..head) answered */
static jr_joblog  sent;         /* the lines made for the master */

void
jr_jrlog_lazy_open(lua_State *L)
{
    lua_newthread(L);                                /* t */
    lua_rawsetp(L, LUA_REGISTRYINDEX, &key);         /* (nothing) */
}

void
jr_jrlog_lazy_begin(jr_jobctx *ctx, lua_State *L)
{
    lua_State *t;
    line *p;

    on = NULL;
    if (L != of) {              /* once a state */
        if (lua_rawgetp(L, LUA_REGISTRYINDEX, &key) != LUA_TTHREAD) {
            lua_pop(L, 1);
            return;
        }
        t = lua_tothread(L, -1);
        lua_pop(L, 1);
        if (nlines > 0)         /* held in another state's */
            return;
        T = t;
        of = L;
    }
    if (nlines + LAZY_MAX > cap) {
        if ((p = realloc(at, (size_t)(nlines + LAZY_MAX) * 2 *
                         sizeof *at)) == NULL)
            return;
        at = p;
        cap = (nlines + LAZY_MAX) * 2;
    }
    if (!lua_checkstack(T, ROOM))
        return;
    first = nlines;
    on = ctx;
}

/* why = err and the line it is of: its fields are read after the call,
 * where no position of the call is at hand, so the message names it. */
static void
blame(char *why, size_t size, const char *err, const char *msg, size_t len)
{
    int n = len > 40 ? 40 : (int)len;

    snprintf(why, size, "%s (of the line '%.*s%s', its fields read after "
             "the call)", err, n, msg, len > 40 ? "..." : "");
}

/* Makes pairs from.. from + n - 1 into log's lines. A table that is the
 * line before's is read once. A line whose fields are not a flat table
 * is not kept: -1, the first one's error in why; else 0. */
static int
make(jr_joblog *log, int from, int n, char *why, size_t size)
{
    jr_joblog_field f[JR_JOBLOG_FIELDS];
    char num[JR_JOBLOG_FIELDS][24], err[160];
    int k, nf = 0, read_at = -1, bad = 0, base = lua_gettop(T);
    const char *msg;
    size_t len;

    why[0] = '\0';
    for (k = from; k < from + n; k++) {
        int fi = 2 * k + 2;

        msg = lua_tolstring(T, 2 * k + 1, &len);
        if (at[k].t == NULL) {          /* read_at: the pair whose table
                                           f holds, -1: none */
            nf = bad = 0;
            read_at = -1;
        } else if (read_at < 0 || at[read_at].t != at[k].t) {
            lua_settop(T, base);        /* the last table's floats */
            nf = jr_jrlog_read_fields(T, fi, f, num, err, sizeof err);
            bad = nf < 0;
            read_at = bad ? -1 : k;
        }
        if (bad) {
            if (why[0] == '\0')
                blame(why, size, err, msg, len);
            continue;
        }
        log->when = at[k].at >> 2;
        jr_jrlog_keep_line(log, (int)(at[k].at & 3), msg, len, f, nf);
    }
    log->when = 0;
    lua_settop(T, base);
    return why[0] != '\0' ? -1 : 0;
}

int
jr_jrlog_lazy_add(lua_State *L, jr_jobctx *ctx, int level, int top)
{
    if (ctx != on || lua_type(L, 2) != LUA_TSTRING ||
        (top == 3 ? lua_type(L, 3) != LUA_TTABLE : top != 2))
        return 0;
    if (nlines - first == LAZY_MAX)
        jr_jrlog_lazy_flush(L, ctx);
    if (top == 2)
        lua_pushboolean(L, 0);                       /* l msg false */
    at[nlines].t = top == 3 ? lua_topointer(L, 3) : NULL;
    at[nlines++].at = (long long)(jr_now() * 1000 + 0.5) * 4 + level;
    lua_xmove(L, T, 2);                              /* l */
    return 1;
}

void
jr_jrlog_lazy_flush(lua_State *L, jr_jobctx *ctx)
{
    char why[256];
    int rc;

    if (ctx == NULL || ctx != on || nlines == first)
        return;
    rc = make(&ctx->log, first, nlines - first, why, sizeof why);
    lua_settop(T, 2 * first);
    nlines = first;
    if (rc < 0)
        luaL_error(L, "%s", why);
}

/* why the table at idx on T is not flat, as reading it says; -1. */
static int
explain(int idx, char *why, size_t size)
{
    jr_joblog_field f[JR_JOBLOG_FIELDS];
    char num[JR_JOBLOG_FIELDS][24];
    int top = lua_gettop(T);

    if (jr_jrlog_read_fields(T, idx, f, num, why, size) >= 0)
        snprintf(why, size, "jobrunner.log: fields changed while read");
    lua_settop(T, top);
    return -1;
}

/* 0 if the table at idx on T is flat (jr_jrlog_read_fields's test,
 * nothing read), else -1 with why set. [-0, +0, m] */
static int
flat(int idx, char *why, size_t size)
{
    int n = 0, t;

    lua_pushnil(T);                                  /* .. nil */
    while (lua_next(T, idx)) {                       /* .. k v */
        t = lua_type(T, -1);
        if (lua_type(T, -2) != LUA_TSTRING || ++n > JR_JOBLOG_FIELDS ||
            (t != LUA_TSTRING && t != LUA_TNUMBER && t != LUA_TBOOLEAN)) {
            lua_pop(T, 2);
            return explain(idx, why, size);
        }
        lua_pop(T, 1);                               /* .. k */
    }
    return 0;
}

int
jr_jrlog_lazy_check(char *why, size_t size)
{
    const void *last = NULL;
    int k;

    if (on == NULL)
        return 0;
    for (k = first; k < nlines; k++) {
        if (at[k].t == NULL || at[k].t == last)
            continue;           /* none, or the table just checked */
        if (flat(2 * k + 2, why, size) < 0) {
            char err[160];
            size_t len;
            const char *msg = lua_tolstring(T, 2 * k + 1, &len);

            snprintf(err, sizeof err, "%s", why);
            blame(why, size, err, msg, len);
            return -1;
        }
        last = at[k].t;
    }
    return 0;
}

int
jr_jrlog_lazy_end(jr_jobctx *ctx, int64_t id, int attempt, int hold)
{
    char why[256];
    int n = nlines - first;
    held *p;

    if (ctx == NULL || ctx != on)
        return 0;
    on = NULL;
    if (n == 0)
        return 0;
    /* held only alone: nothing of the run kept yet */
    if (hold && ctx->log.lines == 0 && ctx->log.part[0].len == 0 &&
        ctx->log.part[1].len == 0 && nlines <= HELD_MAX) {
        if (nheld == capheld) {
            int c = capheld ? capheld * 2 : 16;

            if ((p = realloc(hs, (size_t)c * sizeof *hs)) == NULL)
                goto made;
            hs = p;
            capheld = c;
        }
        hs[nheld].id = id;
        hs[nheld].attempt = attempt;
        hs[nheld].first = first;
        hs[nheld].n = n;
        hs[nheld++].gone = 0;
        alive++;
        first = nlines;
        return 1;
    }
made:
    (void)make(&ctx->log, first, n, why, sizeof why);  /* the check told */
    lua_settop(T, 2 * first);
    nlines = first;
    return 0;
}

/* The held lines of job id the master has not answered for, or NULL. */
static held *
find(int64_t id)
{
    int i;

    for (i = head; i < nheld; i++)
        if (!hs[i].gone && hs[i].id == id)
            return &hs[i];
    return NULL;
}

/* h answered: the answered ones at the front skipped from now on. */
static void
answered(held *h)
{
    h->gone = 1;
    alive--;
    while (head < nheld && hs[head].gone)
        head++;
}

const char *
jr_jrlog_lazy_lines(int64_t id, size_t *len)
{
    held *h = find(id);
    char why[256];

    *len = 0;
    if (h == NULL)
        return NULL;
    jr_joblog_clear(&sent);
    (void)make(&sent, h->first, h->n, why, sizeof why);
    answered(h);
    return jr_joblog_entry(&sent, h->attempt, jr_jrlog_max(), len);
}

void
jr_jrlog_lazy_drop(int64_t id)
{
    held *h = find(id);

    if (h != NULL)
        answered(h);
}

void
jr_jrlog_lazy_settle(void)
{
    int i, k, j = 0, m = 0, dead;
    held h;

    if (on != NULL || first != nlines)
        return;                 /* a run's lines wait above */
    if (alive == 0) {           /* the usual: all answered */
        if (T != NULL)
            lua_settop(T, 0);
        nlines = first = nheld = head = 0;
        return;
    }
    dead = head < nheld ? hs[head].first : nlines;
    if (dead < nlines - dead)   /* moved when the answered are most */
        return;
    for (i = head; i < nheld; i++) {
        if ((h = hs[i]).gone)
            continue;
        for (k = 0; k < h.n && j != h.first; k++) {
            lua_copy(T, 2 * (h.first + k) + 1, 2 * (j + k) + 1);
            lua_copy(T, 2 * (h.first + k) + 2, 2 * (j + k) + 2);
            at[j + k] = at[h.first + k];
        }
        h.first = j;
        j += h.n;
        hs[m++] = h;
    }
    lua_settop(T, 2 * j);
    nlines = first = j;
    nheld = m;
    head = 0;
}

int
jr_jrlog_lazy_held(void)
{
    return alive;
}
