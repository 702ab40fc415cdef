/* jsondec.h - JSON text to Lua values, straight onto the stack, for the
 * worker (payloads, parents' ends), the producer module (results) and
 * jobrunner.json.decode in both modules: the conventions of json.h's
 * encoder read back, so that no lua-cjson is needed. Uses Lua,
 * jsontext.h. */
#ifndef JR_JSONDEC_H
#define JR_JSONDEC_H

#include <stddef.h>

typedef struct lua_State lua_State;

/* Decodes the JSON text s[0..n) (borrowed) and pushes its value: objects
 * and arrays as plain tables (arrays 1..n, no metatable), null as
 * jobrunner.null (the light userdata NULL, as cjson.null), a number
 * written as an integer as a Lua integer, exact over the whole int64
 * range (beyond it, a float), another number as a float, except a whole
 * one within +-2^53, which is an integer (3.0 is 3). Strings must be
 * UTF-8; \u escapes are decoded (surrogates in pairs). Nesting deeper than
 * JR_JSONTEXT_DEPTH is refused. Returns 0, or -1 with "byte N: what is
 * wrong" in msg (size bytes) and nothing pushed. Raises only when out of
 * memory.  [-0, +(1|0), m] */
int jr_json_decode(lua_State *L, const char *s, size_t n, char *msg,
                   size_t size);

/* The nesting the worker's texts may reach: a batch callback's payload
 * and job.parents put two levels around values the push check and the
 * result's encoder hold to JR_JSONTEXT_DEPTH, a job's waits record three
 * around a signal's payload ({"signals": {NAME: {"payload": ...}}}). */
#define JR_JSONDEC_RUNNER_DEPTH (JR_JSONTEXT_DEPTH + 3)

/* jr_json_decode in a protected call, nesting up to
 * JR_JSONDEC_RUNNER_DEPTH, for the worker's payloads and parents: out of
 * memory is -1 with "out of memory" in msg, never raised.
 * [-0, +(1|0), -] */
int jr_json_decode_safe(lua_State *L, const char *s, size_t n, char *msg,
                        size_t size);

#endif
