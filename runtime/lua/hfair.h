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

/* 1 if s (n bytes) is a payload path "payload.a.b": fields of letters,
 * digits, _ and -, joined by dots, 200 bytes at most, no NUL. */
int jr_hfair_path_ok(const char *s, size_t n);

#endif
