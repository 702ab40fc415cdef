/* limitcfg.h - limits per job name or queue as the config's `limits` table
 * declares them (docs/limits.md): a global and a per-key concurrency cap
 * and rate (a token bucket). Reads them from Lua for keys.c and for the
 * hooks' jobrunner.limits.set; the claim that enforces them is the
 * backends' (limitpick.h). The model itself is base/limit.h's. Uses
 * err.h, limit.h. */
#ifndef JR_LIMITCFG_H
#define JR_LIMITCFG_H

#include <stddef.h>

#include "base/err.h"
#include "base/limit.h"

typedef struct lua_State lua_State;

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
#endif
