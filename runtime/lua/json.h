/* json.h - payload tables to JSON text, with lua-cjson's conventions and
 * exact integers, for both "jobrunner" modules: the producers' (luaclient.c)
 * and the handlers' (jrlib.c). Owns the jobrunner.array marker, the
 * GC-freed byte buffers it writes into, and the one JSON string escaper
 * (also for log lines and the CLI's --json). Uses Lua, util.h. */
#ifndef JR_JSON_H
#define JR_JSON_H

#include <stddef.h>

#include "base/util.h"

typedef struct lua_State lua_State;

#define JR_JSON_ARRAY_MT "jobrunner.array"  /* marks a table as an array */
#define JR_JSON_BUF_MT   "jobrunner.buffer" /* a jr_buf the GC frees */

/* Pushes a new empty jr_buf (util.h) in a userdata whose __gc frees its
 * bytes, so that an error raised while one is on the stack leaks nothing:
 * keep it on the stack while p is used. Append with jr_buf_put, which
 * never raises.  [-0, +1, m] */
jr_buf *jr_json_buf_new(lua_State *L);


/* Appends the payload at idx to b as JSON text and a NUL: nil is {}, else
 * it must be a table. Returns 0, or -1 with "payload.path: what is wrong"
 * in msg (msgsize bytes, borrowed) and b's new bytes unspecified. Tables
 * are read raw.  [-0, +0, m] */
int jr_json_encode(lua_State *L, int idx, jr_buf *b, char *msg,
                   size_t msgsize);

/* Appends any value at idx (a table, string, number, boolean, nil or
 * jobrunner.null; nil as null) to b as JSON text and a NUL, as a
 * handler's result: errors as jr_json_encode's, under "result".
 * [-0, +0, m] */
int jr_json_encode_value(lua_State *L, int idx, jr_buf *b, char *msg,
                         size_t msgsize);

/* Sets null (the light userdata NULL, as cjson.null), array (the
 * jobrunner.array() marker function) and json (encode(v) and decode(s),
 * each a value or nil, message; jsondec.h's rules) in the module table on
 * top.  [-0, +0, m] */
void jr_json_set_markers(lua_State *L);

/* Config readers and option readers ask the shape of a table here too.
 * The length n of the list at idx: its keys are 1..n and nothing else
 * (an empty table is a list of 0). Else -1, with odd set to the first
 * other key as a message names it ("'nightly'", "[0]", "[2.5]").
 * [-0, +0, -] */
long long jr_json_list(lua_State *L, int idx, char *odd, size_t size);

/* 0 when every key of the table at idx is a string (a map; an empty table
 * is one too), else -1 with odd set to the first other key as
 * jr_json_list names it.  [-0, +0, -] */
int       jr_json_map(lua_State *L, int idx, char *odd, size_t size);

#endif
