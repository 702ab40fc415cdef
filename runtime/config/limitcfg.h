/* limitcfg.h - limits per job name or queue as the config's `limits` table
 * declares them (README "Limits"): a global and a per-key concurrency cap
 * and rate (a token bucket). Reads them from Lua for config.c and for the
 * hooks' jobrunner.limits.set; the claim that enforces them is the
 * backends' (limitpick.h). Uses err.h. */
#ifndef JR_LIMITCFG_H
#define JR_LIMITCFG_H

#include <stddef.h>

#include "base/err.h"

#define JR_LIMIT_CAP_MAX  100000        /* a concurrency cap at most */
#define JR_LIMIT_MAX      256           /* limits in one config */
#define JR_LIMIT_QPREFIX  "queue:"      /* a scope naming a queue */

typedef struct lua_State lua_State;

/* One cap and rate; 0 where not set. */
typedef struct jr_limit_set {
    int     concurrency;        /* running jobs at most; 0: no cap */
    double  rate;               /* tokens per second; 0: no rate */
    double  burst;              /* bucket size: the rate's count unless
                                   `burst` says */
    char    rate_text[40];      /* as written ("100/1m"), for show */
} jr_limit_set;

typedef struct jr_limit {
    char        *scope;         /* job name, or "queue:NAME"; owned */
    char        *key_path;      /* payload path after "payload.", or NULL */
    jr_limit_set all;           /* the scope's own */
    jr_limit_set per_key;       /* each limit key's */
} jr_limit;

typedef struct jr_limits {
    jr_limit *l;                /* by scope, as declared */
    int       n;
} jr_limits;

/* Reads the `limits` table at the top of L into ls (replacing what it
 * had). On error fills key ("limits.email.send.rate") and what (the rest
 * of the sentence) and returns -1.  [-0, +0, m] */
int  jr_limits_read(lua_State *L, jr_limits *ls, char *key, size_t keysz,
                    char *what, size_t whatsz);
/* Reads one limit's table at the top of L over *l (fields not in the
 * table keep their values), as jr_limits_read; scope names it in key.
 * [-0, +0, m] */
int  jr_limit_read(lua_State *L, const char *scope, jr_limit *l, char *key,
                   size_t keysz, char *what, size_t whatsz);
/* Parses a rate "N/PERIOD" (N > 0; PERIOD a duration such as "1s", "1m",
 * "500ms", or a bare unit "s", "m", "h", "d") into tokens per second and
 * the count N. -1 with what said. */
int  jr_limit_parse_rate(const char *s, double *per_sec, double *count,
                         char *what, size_t whatsz);
/* Checks a scope: a job name, or "queue:" and a queue name. */
int  jr_limit_scope_check(const char *scope, jr_err *err);
/* The limit of scope in ls, or NULL. */
jr_limit *jr_limits_find(const jr_limits *ls, const char *scope);
/* Appends a copy of scope with no caps; NULL when out of memory. */
jr_limit *jr_limits_add(jr_limits *ls, const char *scope);
/* Copies src into dst (zeroed or freed first): -1 when out of memory. */
int  jr_limits_copy(jr_limits *dst, const jr_limits *src);
void jr_limits_free(jr_limits *ls);     /* frees members; zeroes ls */

#endif
