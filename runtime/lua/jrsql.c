/* jrsql.c - jobrunner.sql in handlers: statements that commit with the
 * job's success (docs/handlers.md, "Writes that commit with the job").
 * A call checks its statements and parameters and appends them, in
 * sqlstmt.h's encoding, to the job's context; the worker sends them with
 * a success only, and the backend runs them in the transaction that
 * records it, in a savepoint of the job's own. Nothing runs here: a
 * snooze, discard or failure after a call applies none of them.
 * jobrunner.query reads, now, on a read-only connection of the worker's
 * own, outside the transaction that records the job. Uses jrlib.h for
 * the job's context, sqlstmt.h for the caps and encoding, roquery.h for
 * query's connection. */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sqlstmt.h"
#include "lua/jrlib.h"
#include "roquery.h"

/* jobrunner.query's connection (roquery.h), made by jr_jrsql_setup,
 * connected at the first query and kept for the worker's life. */
static jr_roq *reads;

/* Reads the value at idx as parameter v; NULL, or why not (into why).
 * Strings stay on the Lua stack, borrowed by v.  [-0, +0, -] */
static const char *
param(lua_State *L, int idx, jr_sqlval *v, char *why, size_t size)
{
    memset(v, 0, sizeof *v);
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
    case LUA_TNONE:
        v->type = JR_SQLV_NULL;
        return NULL;
    case LUA_TBOOLEAN:
        v->type = JR_SQLV_BOOL;
        v->i = lua_toboolean(L, idx);
        return NULL;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            v->type = JR_SQLV_INT;
            v->i = (int64_t)lua_tointeger(L, idx);
        } else {
            v->type = JR_SQLV_FLOAT;
            v->f = lua_tonumber(L, idx);
        }
        return NULL;
    case LUA_TSTRING:
        v->type = JR_SQLV_TEXT;
        v->s = lua_tolstring(L, idx, &v->len);
        if (memchr(v->s, '\0', v->len) != NULL)
            return "is a string holding a NUL byte (bind binary data "
                   "encoded, as hex or base64)";
        return NULL;
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL) {    /* jobrunner.null */
            v->type = JR_SQLV_NULL;
            return NULL;
        }
        break;
    default:
        break;
    }
    snprintf(why, size, "is a %s: only nil, booleans, numbers and strings "
             "bind", luaL_typename(L, idx));
    return why;
}

/* Appends the statement whose text is at idx and whose np parameters
 * follow it on the stack to ctx; NULL, or why not (into why). Nothing
 * is appended on failure.  [-0, +0, -] */
static const char *
add(lua_State *L, jr_jobctx *ctx, int idx, int np, char *why, size_t size)
{
    size_t len, start = ctx->sql.len;
    const char *text, *bad;
    jr_sqlval v;
    char what[160];
    int i;

    if (lua_type(L, idx) != LUA_TSTRING)
        return snprintf(why, size, "the text is a %s, not a string",
                        luaL_typename(L, idx)), why;
    text = lua_tolstring(L, idx, &len);
    if ((bad = jr_sql_text_check(text, len)) != NULL)
        return snprintf(why, size, "%s", bad), why;
    if (np > JR_SQL_PARAMS_MAX)
        return snprintf(why, size, "%d parameters, over %d", np,
                        JR_SQL_PARAMS_MAX), why;
    if (ctx->nsql >= JR_SQL_STMTS_MAX)
        return snprintf(why, size, "over %d statements in one job",
                        JR_SQL_STMTS_MAX), why;
    jr_sql_put_text(&ctx->sql, text, len, np);
    for (i = 1; i <= np; i++) {
        if ((bad = param(L, idx + i, &v, what, sizeof what)) != NULL) {
            ctx->sql.len = start;
            return snprintf(why, size, "parameter %d %s", i, bad), why;
        }
        jr_sql_put_param(&ctx->sql, &v);
    }
    if (ctx->sql.oom) {
        ctx->sql.len = start;
        ctx->sql.oom = 0;
        return "out of memory";
    }
    if (ctx->sql.len > JR_SQL_BYTES_MAX) {
        ctx->sql.len = start;
        return snprintf(why, size, "the job's statements and parameters "
                        "are over %u bytes", JR_SQL_BYTES_MAX), why;
    }
    ctx->nsql++;
    return NULL;
}

/* The parameters of the list at idx: its field n when it has one (as
 * table.pack makes, so that nils count), else its length, less the
 * text. */
static int
list_params(lua_State *L, int idx)
{
    lua_Integer n;
    int isnum;

    lua_getfield(L, idx, "n");                       /* .. n */
    n = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);                                   /* .. */
    if (!isnum)
        n = (lua_Integer)lua_rawlen(L, idx);
    return n < 1 ? 0 : n - 1 > JR_SQL_PARAMS_MAX ? JR_SQL_PARAMS_MAX + 1
                                                  : (int)(n - 1);
}

/* jobrunner.sql(text, ...) or jobrunner.sql{ {text, ...}, ... }: the
 * statements run, in the order called, when the job's success is
 * recorded; all of a call or none of it is kept.  [-0, +0, v] */
static int
jrsql_sql(lua_State *L)
{
    /* the context from an upvalue, as jobrunner.log's: the registry's
     * look was 270 instructions a call */
    jr_jobctx *ctx = jr_jrlib_ctx_of(L, lua_touserdata(L,
                                                       lua_upvalueindex(1)));
    size_t start;
    int nsql, top = lua_gettop(L), k, n, np;
    const char *bad;
    char why[300];

    if (ctx == NULL)
        return luaL_error(L, "jobrunner.sql: called outside a running job");
    start = ctx->sql.len;
    nsql = ctx->nsql;
    if (lua_type(L, 1) != LUA_TTABLE) {
        if ((bad = add(L, ctx, 1, top - 1, why, sizeof why)) != NULL)
            return luaL_error(L, "jobrunner.sql: statement %d: %s",
                              ctx->nsql + 1, bad);
        return 0;
    }
    luaL_argcheck(L, top == 1, 2, "a list of statements takes no "
                  "parameters of its own");
    n = (int)lua_rawlen(L, 1);
    luaL_checkstack(L, JR_SQL_PARAMS_MAX + 8, "jobrunner.sql");
    for (k = 1; k <= n; k++) {
        lua_settop(L, 1);                            /* list */
        if (lua_rawgeti(L, 1, k) != LUA_TTABLE) {    /* list s */
            ctx->sql.len = start;
            ctx->nsql = nsql;
            return luaL_error(L, "jobrunner.sql: statement %d: must be a "
                              "table {text, parameters...}, got %s",
                              nsql + k, luaL_typename(L, -1));
        }
        np = list_params(L, 2);
        for (int i = 1; i <= np + 1 && i <= JR_SQL_PARAMS_MAX + 1; i++)
            lua_rawgeti(L, 2, i);                    /* list s text p.. */
        bad = add(L, ctx, 3, np, why, sizeof why);
        if (bad != NULL) {
            ctx->sql.len = start;
            ctx->nsql = nsql;
            return luaL_error(L, "jobrunner.sql: statement %d: %s", nsql + k,
                              bad);
        }
    }
    return 0;
}

/* Pushes value v.  [-0, +1, m] */
static void
push_value(lua_State *L, const jr_sqlval *v)
{
    switch (v->type) {
    case JR_SQLV_INT:
        lua_pushinteger(L, (lua_Integer)v->i);
        break;
    case JR_SQLV_FLOAT:
        lua_pushnumber(L, v->f);
        break;
    case JR_SQLV_BOOL:
        lua_pushboolean(L, (int)v->i);
        break;
    case JR_SQLV_TEXT:
        lua_pushlstring(L, v->s, v->len);
        break;
    default:
        lua_pushnil(L);
    }
}

/* jobrunner.query(text, ...): the rows text reads now, with the
 * parameters that follow it bound, as a list of tables keyed by column
 * name (a NULL column absent). Blocks the worker until they come.
 * [-0, +1, v] */
static int
jrsql_query(lua_State *L)
{
    jr_jobctx *ctx = jr_jrlib_job(L, "query");
    const char *name = ctx->job != NULL && ctx->job->name != NULL
                       ? ctx->job->name : "?", *bad;
    const jr_roq_result *res;
    jr_sqlstmt st;
    char why[600], what[160];
    int top = lua_gettop(L), i, r, c;

    if (lua_type(L, 1) != LUA_TSTRING)
        return luaL_error(L, "jobrunner.query of '%s': the text is a %s, "
                          "not a string", name, luaL_typename(L, 1));
    st.text = lua_tolstring(L, 1, &st.len);
    if ((bad = jr_sql_text_check(st.text, st.len)) != NULL)
        return luaL_error(L, "jobrunner.query of '%s': %s", name, bad);
    if (top - 1 > JR_SQL_PARAMS_MAX)
        return luaL_error(L, "jobrunner.query of '%s': %d parameters, over "
                          "%d", name, top - 1, JR_SQL_PARAMS_MAX);
    st.nparams = top - 1;
    for (i = 0; i < st.nparams; i++)
        if ((bad = param(L, i + 2, &st.params[i], what, sizeof what)) != NULL)
            return luaL_error(L, "jobrunner.query of '%s': parameter %d %s",
                              name, i + 1, bad);
    if (reads == NULL)
        return luaL_error(L, "jobrunner.query of '%s': no database here "
                          "(it runs in the runner's workers)", name);
    if (jr_roq_run(reads, &st, &res, why, sizeof why) < 0)
        return luaL_error(L, "jobrunner.query of '%s' failed: %s", name, why);
    luaL_checkstack(L, 4, "jobrunner.query");
    lua_createtable(L, res->nrows, 0);               /* rows */
    for (r = 0; r < res->nrows; r++) {
        lua_createtable(L, 0, res->ncols);           /* rows row */
        for (c = 0; c < res->ncols; c++) {
            const jr_sqlval *v = &res->vals[(size_t)r * res->ncols + c];
            if (v->type == JR_SQLV_NULL)
                continue;
            push_value(L, v);                        /* rows row v */
            lua_setfield(L, -2, res->names[c]);      /* rows row */
        }
        lua_rawseti(L, -2, r + 1);                   /* rows */
    }
    return 1;
}

int
jr_jrsql_setup(const char *url, const char *attach, const char *role)
{
    jr_roq_free(reads);
    reads = url != NULL && *url ? jr_roq_new(url, attach, role) : NULL;
    return url != NULL && *url && reads == NULL ? -1 : 0;
}

void
jr_jrsql_close(void)
{
    jr_roq_free(reads);
    reads = NULL;
}

void
jr_jrsql_register(lua_State *L)                      /* M */
{
    jr_jrlib_push_ctx(L);                            /* M ctx */
    lua_pushcclosure(L, jrsql_sql, 1);               /* M f */
    lua_setfield(L, -2, "sql");                      /* M */
    lua_pushcfunction(L, jrsql_query);               /* M f */
    lua_setfield(L, -2, "query");                    /* M */
}
