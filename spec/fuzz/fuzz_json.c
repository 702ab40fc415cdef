/* fuzz_json.c - the payload decoder (jsondec.c) against the push check
 * (jsontext.c) and the encoder (json.c): arbitrary bytes are decoded into
 * one Lua state. Every text the push check accepts must decode (a payload
 * any producer stored must reach its handler), and a decoded value that
 * the encoder takes must give text that the check accepts and that
 * decodes and encodes again to the same bytes (the codec is a fixed point
 * after one round). Any other outcome aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "fuzz.h"
#include "lua/json.h"
#include "lua/jsondec.h"
#include "base/jsontext.h"

static lua_State *L;

static void
fail(const char *what, const uint8_t *data, size_t size, const char *msg)
{
    fprintf(stderr, "fuzz_json: %s: %s\ninput (%zu bytes): %.*s\n", what,
            msg, size, (int)(size > 400 ? 400 : size), (const char *)data);
    abort();
}

/* Encodes the value on top into a new buffer left on the stack; its text,
 * or NULL when the encoder refuses it.  [-0, +1, m] */
static const char *
encode_top(size_t *len)
{
    char msg[400];
    jr_buf *b;

    b = jr_json_buf_new(L);                          /* v b */
    if (jr_json_encode_value(L, -2, b, msg, sizeof msg) < 0 || b->oom)
        return NULL;
    *len = b->len - 1;
    return b->p;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data, *once, *twice;
    char why[300], msg[300];
    size_t n1 = 0, n2 = 0;
    int ok;

    if (L == NULL && (L = luaL_newstate()) == NULL)
        abort();
    lua_settop(L, 0);
    ok = jr_jsontext_check(text, size, why, sizeof why) == 0;
    if (jr_json_decode_safe(L, text, size, msg, sizeof msg) < 0) {
        if (ok)
            fail("the push check accepts it, the decoder refuses it", data,
                 size, msg);
        return 0;
    }                                                /* v */
    if ((once = encode_top(&n1)) == NULL)            /* v b1 */
        return 0;               /* a NUL from \u0000, an infinity: refused */
    if (jr_jsontext_check(once, n1, why, sizeof why) < 0)
        fail("the encoder wrote what the push check refuses", data, size,
             why);
    if (jr_json_decode_safe(L, once, n1, msg, sizeof msg) < 0)
        fail("the decoder refuses the encoder's text", data, size, msg);
    if ((twice = encode_top(&n2)) == NULL)           /* v b1 v2 b2 */
        fail("the encoder refuses its own text decoded", data, size, once);
    if (n1 != n2 || memcmp(once, twice, n1) != 0)
        fail("a second round changed the text", data, size, once);
    lua_settop(L, 0);
    return 0;
}
