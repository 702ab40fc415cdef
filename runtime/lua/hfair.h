/* hfair.h - a handler's `fair` option in its table form (docs/queues.md,
 * "Fair share", "A name's own weights"): { key = "payload.PATH", weights
 * = { acme = 4 }, default = 1 }. */
#ifndef JR_HFAIR_H
#define JR_HFAIR_H

#include <stddef.h>
#include <lua.h>

/* The table on top of L is the handler's fair table: its key's path after
 * "payload." into *path (borrowed from the table: valid while it is on
 * the stack), its weights as a new JSON object into *weights ("{}" when
 * none; free it), its default (1 when not set) into *def. NULL, or what
 * is wrong as a message naming the field (static; *weights is then NULL).
 * The table stays on top either way.  [-0, +0, m] */
const char *jr_hfair_table(lua_State *L, const char **path, char **weights,
                           double *def);

/* The weights table on top of L ({ key = weight }) as a new JSON object
 * into *out (free it): 0, or what is wrong: JR_HFAIR_TABLE (not a table),
 * _KEY (a key not UTF-8 of 1 to 256 bytes without control bytes: a fair
 * key as a payload holds it), _WEIGHT (a weight not from 1 to 1000, an
 * integer when integers), _OOM. *key: the last key read (NULL: none),
 * borrowed from the table. The table stays on top either way.
 * [-0, +0, m] */
enum { JR_HFAIR_TABLE = 1, JR_HFAIR_KEY, JR_HFAIR_WEIGHT, JR_HFAIR_OOM };
int jr_hfair_weights(lua_State *L, int integers, char **out,
                     const char **key);

/* 1 if s (n bytes) is a payload path "payload.a.b": fields of letters,
 * digits, _ and -, joined by dots, 200 bytes at most, no NUL. */
int jr_hfair_path_ok(const char *s, size_t n);

#endif
