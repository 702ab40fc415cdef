/* keys.h - the config's key table (keys.c): every top-level key of
 * jobrunner.lua, its type, range, default, words, one-line doc and
 * reader. Uses config.h. */
#ifndef JR_KEYS_H
#define JR_KEYS_H

#include "config/config.h"

/* Sets the default of every plain key (a row of its own type: a number,
 * a string, true or false) in c.  */
void jr_keys_defaults(jr_config *c);

/* Reads the config table on top of L into c, key by key: an unknown key,
 * a wrong type or a value out of range is an error naming file:line
 * (found in text, the file's contents) and the key. Returns 0, or -1 with
 * err set (JR_ECONFIG). [-0, +0, -] */
int jr_keys_read(jr_config *c, lua_State *L, const char *file,
                 const char *text, jr_err *err);

#endif
