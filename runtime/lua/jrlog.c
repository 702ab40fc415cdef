/* jrlog.c - each attempt's logs (docs/handlers.md, "Each attempt's
 * logs"): jobrunner.log(level, msg, fields), and print, io.write and
 * io.stdout/io.stderr:write wrapped so that what a running job writes is
 * kept in its context (joblog.h) and sent with its result, the runner's
 * log getting it too when log.echo says so. Outside a job, or with
 * log.attempt_max 0, the wrapped functions are the standard ones. A
 * plain job's lines wait as their arguments (jrloglazy.c) until they are
 * made here. Uses jrlib.h, jrloglazy.h, joblog.h, log.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/joblog.h"
#include "base/log.h"
#include "lua/jrlib.h"
#include "lua/jrloglazy.h"

static const char *const levels[] = {"debug", "info", "warn", "error",
                                     NULL};

static size_t log_max;          /* log.attempt_max: bytes kept a run */
static int    log_echo = 1;     /* log.echo */
static FILE  *echo_out, *echo_err;  /* jr_jrlog_echo_to's, or NULL */

void
jr_jrlog_echo_to(FILE *out, FILE *err)
{
    echo_out = out;
    echo_err = err;
}

int
jr_jrlog_keep(jr_jobctx *ctx, int stream, const char *s, size_t n)
{
    if (log_max > 0)
        jr_joblog_write(&ctx->log, stream, s, n, log_max);
    return log_echo || log_max == 0;
}

void
jr_jrlog_setup(size_t max, int echo)
{
    log_max = max;
    log_echo = echo;
}

size_t
jr_jrlog_max(void)
{
    return log_max;
}

const char *
jr_jrlog_entry(jr_jobctx *ctx, int attempt, size_t *len)
{
    return log_max > 0 ? jr_joblog_entry(&ctx->log, attempt, log_max, len) :
           NULL;
}

/* The running job's context when its output is kept, else NULL. */
static jr_jobctx *
keeping(lua_State *L)
{
    return log_max > 0 ? jr_jrlib_ctx(L) : NULL;
}

static jr_buf line;             /* the message jobrunner.log builds */

/* The most of a message built: the line kept is cut at JR_JOBLOG_LINE
 * and the runner's log line is shorter, so a huge message costs no more
 * (and the buffer, kept between calls, does not grow with it). */
#define LINE_BUILT (JR_JOBLOG_LINE + 4)

/* Makes line's room for LINE_BUILT bytes and its NUL once: put then
 * copies without checking it (out of memory, line.oom says so). */
static void
make_room(void)
{
    char *p;

    if (line.cap >= LINE_BUILT + 1 || line.oom)
        return;
    if ((p = realloc(line.p, LINE_BUILT + 1)) == NULL) {
        line.oom = 1;
        return;
    }
    line.p = p;
    line.cap = LINE_BUILT + 1;
}

/* Appends s[0..n) to line, cut at LINE_BUILT (line.len never passes
 * it): a few bytes copied in place, the many by memcpy. */
static inline void
put(const char *s, size_t n)
{
    char *o;

    if (n > LINE_BUILT - line.len)
        n = LINE_BUILT - line.len;
    if (line.cap < LINE_BUILT + 1) {    /* no room made: out of memory */
        jr_buf_put(&line, s, n);
        return;
    }
    o = line.p + line.len;
    line.len += n;
    if (n > 16)
        memcpy(o, s, n);
    else
        while (n-- > 0)
            *o++ = *s++;
}

/* Appends the byte c to line, as put does. */
static inline void
put1(char c)
{
    if (line.len < LINE_BUILT && line.cap >= LINE_BUILT + 1)
        line.p[line.len++] = c;
    else
        put(&c, 1);
}

/* 1 if a field's value must be quoted: empty, or a space, '=', '"',
 * '\\' or a control byte in it. */
static int
needs_quotes(const char *s, size_t n)
{
    size_t i;

    if (n == 0)
        return 1;
    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == '=' || s[i] == '"' ||
            s[i] == '\\' || s[i] == 0x7f)
            return 1;
    return 0;
}

/* A field of the line: its name and its value as text, both on the Lua
 * stack (or an integer's in num) while the line is kept. */
typedef jr_joblog_field field;

/* Appends " key=value". */
static void
put_field(const field *f)
{
    size_t i;

    put1(' ');
    put(f->k, f->kn);
    put1('=');
    if (!needs_quotes(f->v, f->vn)) {
        put(f->v, f->vn);
        return;
    }
    put1('"');
    for (i = 0; i < f->vn; i++) {
        if (f->v[i] == '"' || f->v[i] == '\\')
            put1('\\');
        put1(f->v[i]);
    }
    put1('"');
}

#define FIELDS_MAX JR_JOBLOG_FIELDS     /* of one jobrunner.log line */

/* Sorts f[0..n) by name: in place for the few a line usually has,
 * qsort past them. Names are unique (a table's keys). */
static void
sort_fields(field *f, int n)
{
    field t;
    int i, j;

    if (n > 8) {
        qsort(f, (size_t)n, sizeof *f, jr_joblog_field_cmp);
        return;
    }
    for (i = 1; i < n; i++) {
        if (jr_joblog_field_cmp(&f[i - 1], &f[i]) <= 0)
            continue;
        t = f[i];
        for (j = i; j > 0 && jr_joblog_field_cmp(&f[j - 1], &t) > 0; j--)
            f[j] = f[j - 1];
        f[j] = t;
    }
}

/* Writes integer v as Lua's tostring does at out (24 bytes), without
 * printf. Returns the length. */
static size_t
int_text(char *out, lua_Integer v)
{
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v :
                           (unsigned long long)v;
    char tmp[24];
    size_t k = 0, n = 0;

    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        out[n++] = '-';
    while (k > 0)
        out[n++] = tmp[--k];
    return n;
}

/* Fills f with the fields of the table at idx, after checking
 * that it is flat: string keys, values strings, numbers or booleans, at
 * most FIELDS_MAX. What f points to lives while the line is built, and
 * no Lua runs meanwhile: a name and a string value are the table's own
 * strings, an integer's text (written without printf) is in num[i], a
 * boolean's a literal; only a float's text, made by Lua, stays on the
 * stack (the others are popped: no stack grows a field). Returns how
 * many, or -1 with why set (the stack as it was). [-0, +(floats), m] */
int
jr_jrlog_read_fields(lua_State *L, int idx, jr_joblog_field *f,
                     char (*num)[24], char *why, size_t size)
{
    int n = 0, t, top = lua_gettop(L);

    why[0] = '\0';
    lua_pushnil(L);                                  /* .. nil */
    while (lua_next(L, idx)) {                       /* .. k v */
        if (lua_type(L, -2) != LUA_TSTRING) {
            snprintf(why, size, "jobrunner.log: fields must be a table of "
                     "name = value, found a %s key", luaL_typename(L, -2));
            break;
        }
        if (n == FIELDS_MAX) {
            snprintf(why, size, "jobrunner.log: more than %d fields",
                     FIELDS_MAX);
            break;
        }
        t = lua_type(L, -1);
        f[n].k = lua_tolstring(L, -2, &f[n].kn);
        if (t == LUA_TSTRING) {
            f[n].v = lua_tolstring(L, -1, &f[n].vn);
        } else if (t == LUA_TBOOLEAN) {
            f[n].v = lua_toboolean(L, -1) ? "true" : "false";
            f[n].vn = f[n].v[0] == 't' ? 4 : 5;
        } else if (t == LUA_TNUMBER && lua_isinteger(L, -1)) {
            f[n].vn = int_text(num[n], lua_tointeger(L, -1));
            f[n].v = num[n];    /* num[n] does not move with f[n] */
        } else if (t == LUA_TNUMBER) {  /* a float: this copy, its text */
            if (!lua_checkstack(L, 2)) {
                snprintf(why, size, "jobrunner.log: not enough memory");
                break;
            }
            f[n].v = lua_tolstring(L, -1, &f[n].vn);
            lua_pushvalue(L, -2);                    /* .. k v k */
            n++;
            continue;
        } else {
            snprintf(why, size, "jobrunner.log: field '%s' must be a "
                     "string, number or boolean, got %s",
                     lua_tostring(L, -2), luaL_typename(L, -1));
            break;
        }
        n++;
        lua_pop(L, 1);                               /* .. k */
    }                                    /* .. the floats' texts, if any */
    if (why[0] != '\0') {      /* broke off (k v on top) */
        lua_settop(L, top);
        return -1;
    }
    return n;
}

/* Makes jobrunner.log's values text: msg at index 2 (or the values
 * from index 2 on) as tostring does, and the fields of the table at
 * index 3 read into f (fields set), their number returned. The values'
 * Lua (a __tostring, which may log or change the fields) runs before
 * the line is begun. [-0, +(floats), v] */
static int
prepare(lua_State *L, int fields, field *f, char (*num)[24])
{
    int i, n = fields ? 2 : lua_gettop(L);
    char why[160];

    for (i = 2; i <= n; i++) {
        if (lua_type(L, i) == LUA_TSTRING)  /* a string is its text */
            continue;
        luaL_tolstring(L, i, NULL);                  /* .. s */
        lua_replace(L, i);                           /* .. */
    }
    if (!fields)
        return 0;
    if ((n = jr_jrlog_read_fields(L, 3, f, num, why, sizeof why)) < 0)
        luaL_error(L, "%s", why);
    return n;
}

/* Builds in line the text of msg[0..n) and the nf fields f (sorted
 * here). [-0, +0, -] */
static void
build_text(const char *msg, size_t n, field *f, int nf)
{
    int i;

    sort_fields(f, nf);
    jr_buf_reset(&line);
    make_room();
    put(msg, n);
    for (i = 0; i < nf; i++)
        put_field(&f[i]);
    if (line.cap >= LINE_BUILT + 1)
        line.p[line.len++] = '\0';    /* its room made */
    else
        jr_buf_put(&line, "", 1);
}

/* Builds jobrunner.log's message in line from what prepare made: msg
 * and the nf fields f, or the values from index 2 joined by spaces.
 * [-0, +0, -] */
static void
build(lua_State *L, int fields, field *f, int nf)
{
    int i, n = fields ? 2 : lua_gettop(L);
    const char *s;
    size_t len;

    if (n == 2) {
        s = lua_tolstring(L, 2, &len);
        build_text(s, len, f, nf);
        return;
    }
    jr_buf_reset(&line);
    make_room();
    for (i = 2; i <= n; i++) {
        s = lua_tolstring(L, i, &len);
        if (i > 2)
            put1(' ');
        put(s, len);
    }
    if (line.cap >= LINE_BUILT + 1)
        line.p[line.len++] = '\0';    /* its room made */
    else
        jr_buf_put(&line, "", 1);
}

void
jr_jrlog_keep_line(jr_joblog *log, int level, const char *msg, size_t n,
                   jr_joblog_field *f, int nf)
{
    if (jr_joblog_add_fields(log, levels[level], msg, n, f, nf,
                             log_max) == 0)
        return;
    build_text(msg, n, f, nf);
    if (line.oom)
        jr_joblog_add(log, levels[level], "(out of memory)", 15, log_max);
    else
        jr_joblog_add(log, levels[level], line.p, line.len - 1, log_max);
}

/* The index of the level at 1 in jrlog_log's levels when it is one of
 * them, a string, else -1 (luaL_checkoption then says what is wrong). */
static int
fast_level(lua_State *L)
{
    size_t n;
    const char *s;

    if (lua_type(L, 1) != LUA_TSTRING)
        return -1;
    s = lua_tolstring(L, 1, &n);
    if (n == 4 && memcmp(s, "info", 4) == 0)
        return 1;
    if (n == 5 && memcmp(s, "debug", 5) == 0)
        return 0;
    if (n == 4 && memcmp(s, "warn", 4) == 0)
        return 2;
    if (n == 5 && memcmp(s, "error", 5) == 0)
        return 3;
    return -1;
}

/* jobrunner.log(level, msg [, fields]): one line of the job's log, at
 * level "debug", "info", "warn" or "error"; fields, a flat table, are
 * written after msg as key=value, sorted by key, a value quoted when it
 * holds a space, '=', '"', '\\' or a control character (or is empty).
 * Called with more than one value after level and no table, the values
 * are joined by spaces. Kept with the attempt; to the runner's log as
 * well when log.echo is on, or when nothing is kept. Upvalue 1: the
 * state's context (jr_jrlib_push_ctx). */
static int
jrlog_log(lua_State *L)
{
    int level = fast_level(L), fields, nf, top;
    jr_jobctx *ctx;
    field f[FIELDS_MAX];
    char num[FIELDS_MAX][24];   /* the integers' texts */
    const char *msg;
    size_t len;

    if (level < 0)
        level = luaL_checkoption(L, 1, NULL, levels);
    ctx = jr_jrlib_ctx_of(L, lua_touserdata(L, lua_upvalueindex(1)));
    top = lua_gettop(L);
    /* kept and not echoed, a plain job's: kept as its arguments, read
     * where its line is made (jrloglazy.c) */
    if (ctx != NULL && log_max > 0 && !(log_echo && jr_log_on(level)) &&
        jr_jrlog_lazy_add(L, ctx, level, top))
        return 0;
    jr_jrlog_lazy_flush(L, ctx);        /* the lines before it, first */
    fields = top == 3 && lua_istable(L, 3);
    nf = prepare(L, fields, f, num);
    /* kept and not echoed: its pieces kept as they are, its text made
     * only where the line is stored (a plain line: joblog.h) */
    if (ctx != NULL && log_max > 0 && (fields || top == 2) &&
        !(log_echo && jr_log_on(level))) {
        msg = lua_tolstring(L, 2, &len);
        if (jr_joblog_add_fields(&ctx->log, levels[level], msg, len, f, nf,
                                 log_max) == 0)
            return 0;
    }
    build(L, fields, f, nf);
    msg = line.oom ? "(out of memory)" : line.p;
    len = line.oom ? strlen(msg) : line.len - 1;
    if (ctx != NULL && log_max > 0)
        jr_joblog_add(&ctx->log, levels[level], msg, len, log_max);
    if (ctx != NULL && (log_echo || log_max == 0))
        jr_log(level, "job %lld (%s): %s", (long long)ctx->job->id,
               ctx->job->name, msg);
    else if (ctx == NULL)
        jr_log(level, "%s", msg);
    return 0;
}

/* Calls the standard function (upvalue 1) with the arguments as they
 * are. [-0, +r, e] */
static int
call_std(lua_State *L)
{
    int n = lua_gettop(L);

    lua_pushvalue(L, lua_upvalueindex(1));           /* a.. f */
    lua_insert(L, 1);                                /* f a.. */
    lua_call(L, n, LUA_MULTRET);                     /* r.. */
    return lua_gettop(L);
}

/* print(...), kept as a line of stdout while a job runs. */
static int
jrlog_print(lua_State *L)
{
    jr_jobctx *ctx = keeping(L);
    int i, n = lua_gettop(L);
    luaL_Buffer b;
    const char *s;
    size_t len;

    if (ctx == NULL)
        return call_std(L);
    jr_jrlog_lazy_flush(L, ctx);        /* the lines before it, first */
    luaL_buffinit(L, &b);
    for (i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, '\n');
    luaL_pushresult(&b);                             /* a.. s */
    s = lua_tolstring(L, -1, &len);
    jr_joblog_write(&ctx->log, JR_JOBLOG_STDOUT, s, len, log_max);
    if (log_echo)
        fwrite(s, 1, len, echo_out ? echo_out : stdout);
    return 0;
}

/* Keeps the strings and numbers from argument first on as written to
 * stream, and echoes them to f when log.echo says. [-0, +0, v] */
static void
keep_args(lua_State *L, jr_jobctx *ctx, int first, int stream, FILE *f)
{
    int i, n = lua_gettop(L);
    const char *s;
    size_t len;

    for (i = first; i <= n; i++)    /* checked first: nothing half kept */
        luaL_checklstring(L, i, NULL);
    jr_jrlog_lazy_flush(L, ctx);        /* the lines before them, first */
    for (i = first; i <= n; i++) {
        s = lua_tolstring(L, i, &len);
        jr_joblog_write(&ctx->log, stream, s, len, log_max);
        if (log_echo)
            fwrite(s, 1, len, f);
    }
}

/* io.write(...): kept while a job runs and the default output is
 * io.stdout (upvalue 2). */
static int
jrlog_io_write(lua_State *L)
{
    jr_jobctx *ctx = keeping(L);

    if (ctx == NULL)
        return call_std(L);
    lua_getfield(L, LUA_REGISTRYINDEX, "_IO_output");   /* a.. out */
    if (!lua_rawequal(L, -1, lua_upvalueindex(2))) {
        lua_pop(L, 1);                               /* a.. */
        return call_std(L);
    }
    lua_pop(L, 1);                                   /* a.. */
    keep_args(L, ctx, 1, JR_JOBLOG_STDOUT, echo_out ? echo_out : stdout);
    lua_pushvalue(L, lua_upvalueindex(2));           /* a.. stdout */
    return 1;
}

/* file:write(...) of every file: kept for io.stdout (upvalue 2) and
 * io.stderr (upvalue 3) while a job runs. */
static int
jrlog_file_write(lua_State *L)
{
    jr_jobctx *ctx = keeping(L);
    int err;

    if (ctx == NULL)
        return call_std(L);
    if (lua_rawequal(L, 1, lua_upvalueindex(2)))
        err = 0;
    else if (lua_rawequal(L, 1, lua_upvalueindex(3)))
        err = 1;
    else
        return call_std(L);
    keep_args(L, ctx, 2, err ? JR_JOBLOG_STDERR : JR_JOBLOG_STDOUT,
              err ? (echo_err ? echo_err : stderr) :
              (echo_out ? echo_out : stdout));
    lua_settop(L, 1);                                /* file */
    return 1;
}

/* Replaces t[name] (t at idx) by fn with the old value and the files on
 * top (nup - 1 of them) as its upvalues. [-(nup-1), +0, m] */
static void
wrap(lua_State *L, int idx, const char *name, lua_CFunction fn, int nup)
{
    idx = lua_absindex(L, idx);
    lua_getfield(L, idx, name);                      /* f.. old */
    lua_insert(L, -nup);                             /* old f.. */
    lua_pushcclosure(L, fn, nup);                    /* new */
    lua_setfield(L, idx, name);                      /* (nothing) */
}

void
jr_jrlog_register(lua_State *L)                      /* M */
{
    int top;

    jr_jrlog_lazy_open(L);
    jr_jrlib_push_ctx(L);                            /* M ctx */
    lua_pushcclosure(L, jrlog_log, 1);               /* M f */
    lua_setfield(L, -2, "log");                      /* M */
    lua_pushglobaltable(L);                          /* M G */
    wrap(L, -1, "print", jrlog_print, 1);            /* M G */
    if (lua_getfield(L, -1, "io") != LUA_TTABLE) {   /* M G io */
        lua_pop(L, 2);                               /* M */
        return;
    }
    lua_getfield(L, -1, "stdout");                   /* M G io out */
    wrap(L, -2, "write", jrlog_io_write, 2);         /* M G io */
    top = lua_gettop(L);
    if (luaL_getmetatable(L, LUA_FILEHANDLE) == LUA_TTABLE &&
        lua_getfield(L, -1, "__index") == LUA_TTABLE) { /* M G io mt ix */
        lua_getfield(L, -3, "stdout");               /* M G io mt ix out */
        lua_getfield(L, -4, "stderr");               /* .. ix out err */
        wrap(L, -3, "write", jrlog_file_write, 3);   /* M G io mt ix */
    }
    lua_settop(L, top - 2);                          /* M */
}
