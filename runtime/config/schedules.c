/* schedules.c - the config's `schedules` and `timezone`: one row per field
 * of a schedule, like keys.c's key table; lines for messages are found
 * in the file's text (Lua keeps none for table fields): a schedule's line
 * is its name's, a field's the nearest assignment of that field. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/job.h"
#include "lua/json.h"
#include "lua/luaopts.h"
#include "config/schedules.h"
#include "base/util.h"

typedef struct sctx {
    const char  *file;
    const char  *text;
    const char  *at;            /* the schedule's name in text, or NULL */
    int          index;         /* 1-based, for messages */
    jr_schedule *s;
    jr_err      *err;
} sctx;

typedef int (*field_fn)(sctx *x, lua_State *L, const char *field);

static const char *
line_of(const char *text, const char *p, int *line)
{
    const char *q;

    *line = 0;
    if (text == NULL || p == NULL)
        return p;
    for (*line = 1, q = text; q < p; q++)
        *line += *q == '\n';
    return p;
}

static int
is_word(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9');
}

/* Where `key =` is written in text[from, to), or NULL; last: the last
 * one instead of the first. */
static const char *
find_assign(const char *text, const char *from, const char *to,
            const char *key, int last)
{
    const char *p = from, *found = NULL, *q;
    size_t n = strlen(key);

    while ((p = strstr(p, key)) != NULL && (to == NULL || p < to)) {
        q = p + n;
        while (*q == ' ' || *q == '\t')
            q++;
        if ((p == text || !is_word(p[-1])) && *q == '=' && q[1] != '=') {
            found = p;
            if (!last)
                break;
        }
        p += n;
    }
    return found;
}

/* The line of field in schedule x: its nearest assignment after the
 * schedule's name (before the next name), else the last one before. */
static int
field_line(const sctx *x, const char *field)
{
    const char *p = NULL, *next;
    int line = 0;

    if (x->text == NULL)
        return 0;
    if (x->at != NULL) {
        next = find_assign(x->text, x->at + 1, NULL, "name", 0);
        if ((p = find_assign(x->text, x->at, next, field, 0)) == NULL)
            p = find_assign(x->text, x->text, x->at, field, 1);
    }
    if (p == NULL && (p = x->at) == NULL)
        p = find_assign(x->text, x->text, NULL, "schedules", 0);
    line_of(x->text, p, &line);
    return line;
}

static int sfail(sctx *x, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
sfail(sctx *x, const char *field, const char *fmt, ...)
{
    char what[400], who[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (x->s != NULL && x->s->name != NULL)
        snprintf(who, sizeof who, "schedule '%s': ", x->s->name);
    else if (x->index > 0)
        snprintf(who, sizeof who, "schedules[%d]: ", x->index);
    else                        /* the whole table */
        who[0] = '\0';
    return jr_fail(x->err, JR_ECONFIG, "%s:%d: %s'%s' %s", x->file,
                   field_line(x, field), who, field, what);
}

static int
get_str(sctx *x, lua_State *L, const char *field, char **out)
{
    char *v;

    if (lua_type(L, -1) != LUA_TSTRING)
        return sfail(x, field, "must be a string, got %s",
                     luaL_typename(L, -1));
    if ((v = strdup(lua_tostring(L, -1))) == NULL)
        return jr_fail(x->err, JR_ENOMEM, "out of memory");
    free(*out);
    *out = v;
    return 0;
}

static int
get_name(sctx *x, lua_State *L, const char *field, char **out)
{
    const char *v;
    size_t len;
    jr_err e;

    if (lua_type(L, -1) != LUA_TSTRING)
        return sfail(x, field, "must be a string, got %s",
                     luaL_typename(L, -1));
    v = lua_tolstring(L, -1, &len);
    if (jr_name_check_len(v, len, "name", &e) < 0)
        return sfail(x, field, "is not a valid job or queue name: %s",
                     e.msg);
    return get_str(x, L, field, out);
}

static int
f_name(sctx *x, lua_State *L, const char *field)
{
    return x->s->name != NULL ? 0 : get_name(x, L, field, &x->s->name);
}

static int
f_job(sctx *x, lua_State *L, const char *field)
{
    return get_name(x, L, field, &x->s->job);
}

static int
f_queue(sctx *x, lua_State *L, const char *field)
{
    return get_name(x, L, field, &x->s->queue);
}

static int
f_tz(sctx *x, lua_State *L, const char *field)
{
    return get_str(x, L, field, &x->s->tz);
}

static int
f_cron(sctx *x, lua_State *L, const char *field)
{
    jr_err e;

    if (x->s->spec != NULL)
        return sfail(x, field, "and 'every' are both set: choose one");
    if (get_str(x, L, field, &x->s->spec) < 0)
        return -1;
    if (jr_cron_parse(x->s->spec, &x->s->cron, NULL, &e) < 0)
        return sfail(x, field, "is invalid: %s", e.msg);
    return 0;
}

/* every: seconds, or a duration such as "15m". */
static int
f_every(sctx *x, lua_State *L, const char *field)
{
    char text[64];
    double secs;
    jr_err e;

    if (x->s->spec != NULL)
        return sfail(x, field, "and 'cron' are both set: choose one");
    if (lua_type(L, -1) == LUA_TNUMBER) {
        secs = lua_tonumber(L, -1);
        snprintf(text, sizeof text, "every %gs", secs);
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        if (jr_parse_duration(lua_tostring(L, -1), "every", &secs, &e) < 0)
            return sfail(x, field, "must be seconds or a duration such as "
                         "\"30s\", \"15m\", \"1d\", got \"%.64s\"",
                         lua_tostring(L, -1));
        snprintf(text, sizeof text, "every %.48s", lua_tostring(L, -1));
    } else {
        return sfail(x, field, "must be seconds or a duration string, got "
                     "%s", luaL_typename(L, -1));
    }
    if (jr_cron_every(secs, &x->s->cron, &e) < 0)
        return sfail(x, field, "is %s: must be whole seconds from 1s to "
                     "366d", text + 6);
    if ((x->s->spec = strdup(text)) == NULL)
        return jr_fail(x->err, JR_ENOMEM, "out of memory");
    return 0;
}

static int
f_payload(sctx *x, lua_State *L, const char *field)
{
    jr_buf b = {0};
    char msg[300];

    if (lua_type(L, -1) != LUA_TTABLE)
        return sfail(x, field, "must be a table, got %s",
                     luaL_typename(L, -1));
    if (jr_json_encode(L, lua_gettop(L), &b, msg, sizeof msg) < 0) {
        jr_buf_free(&b);
        return sfail(x, field, "cannot be JSON: %s", msg);
    }
    if (b.oom) {
        jr_buf_free(&b);
        return jr_fail(x->err, JR_ENOMEM, "out of memory");
    }
    free(x->s->payload);
    x->s->payload = b.p;
    return 0;
}

static int
get_int(sctx *x, lua_State *L, const char *field, int lo, int hi, int *out)
{
    long long v = 0;

    switch (jr_luaopts_whole(L, lo, hi, 1, &v)) {
    case JR_WHOLE_OK:
        *out = (int)v;
        return 0;
    case JR_WHOLE_RANGE:
        return sfail(x, field, "is out of range (%d to %d), got %lld", lo,
                     hi, v);
    default:
        return sfail(x, field, "must be an integer, got %s",
                     lua_type(L, -1) == LUA_TNUMBER ? "a float" :
                     luaL_typename(L, -1));
    }
}

static int
f_priority(sctx *x, lua_State *L, const char *field)
{
    return get_int(x, L, field, -1000000, 1000000, &x->s->priority);
}

static int
f_max_retries(sctx *x, lua_State *L, const char *field)
{
    return get_int(x, L, field, 0, 1000000, &x->s->max_retries);
}

static int
f_catch_up(sctx *x, lua_State *L, const char *field)
{
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) :
                    "";
    int i;

    for (i = JR_CATCHUP_LAST; i <= JR_CATCHUP_NONE; i++)
        if (strcmp(v, jr_catchup_name(i)) == 0) {
            x->s->catch_up = i;
            return 0;
        }
    return sfail(x, field, "must be \"last\", \"all\" or \"none\"");
}

static int
f_overlap(sctx *x, lua_State *L, const char *field)
{
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) :
                    "";
    int i;

    for (i = JR_OVERLAP_ALLOW; i <= JR_OVERLAP_CANCEL; i++)
        if (strcmp(v, jr_overlap_name(i)) == 0) {
            x->s->overlap = i;
            return 0;
        }
    return sfail(x, field, "must be \"skip\", \"allow\" or "
                 "\"cancel_previous\"");
}

/* jitter: seconds, or a duration such as "30s"; below a day. */
static int
f_jitter(sctx *x, lua_State *L, const char *field)
{
    double secs = -1;
    jr_err e;

    if (lua_type(L, -1) == LUA_TNUMBER)
        secs = lua_tonumber(L, -1);
    else if (lua_type(L, -1) == LUA_TSTRING &&
             jr_parse_duration(lua_tostring(L, -1), field, &secs, &e) < 0)
        return sfail(x, field, "must be seconds or a duration such as "
                     "\"30s\", got \"%.64s\"", lua_tostring(L, -1));
    else if (lua_type(L, -1) != LUA_TSTRING)
        return sfail(x, field, "must be seconds or a duration string, got "
                     "%s", luaL_typename(L, -1));
    if (!(secs >= 0 && secs <= JR_JITTER_MAX))
        return sfail(x, field, "must be from 0 to %.0f seconds (a day)",
                     JR_JITTER_MAX);
    x->s->jitter = secs;
    return 0;
}

/* start_at, end_at: a time ("2026-11-22T10:00:00Z", "@EPOCH") or epoch
 * seconds. */
static int
get_time(sctx *x, lua_State *L, const char *field, double *out)
{
    jr_err e;

    if (lua_type(L, -1) == LUA_TNUMBER)
        *out = lua_tonumber(L, -1);
    else if (lua_type(L, -1) != LUA_TSTRING)
        return sfail(x, field, "must be a time such as "
                     "\"2026-11-22T10:00:00Z\" or epoch seconds, got %s",
                     luaL_typename(L, -1));
    else if (jr_parse_time(lua_tostring(L, -1), field, out, &e) < 0)
        return sfail(x, field, "must be a time such as "
                     "\"2026-11-22T10:00:00Z\" or \"@EPOCH\", got "
                     "\"%.64s\"", lua_tostring(L, -1));
    if (!(*out > 0 && *out < 253402300800.0))   /* year 10000 */
        return sfail(x, field, "is out of range (after 1970, before the "
                     "year 10000)");
    return 0;
}

static int
f_start_at(sctx *x, lua_State *L, const char *field)
{
    return get_time(x, L, field, &x->s->start_at);
}

static int
f_end_at(sctx *x, lua_State *L, const char *field)
{
    return get_time(x, L, field, &x->s->end_at);
}

static const struct {
    const char *field;
    field_fn    fn;
} rows[] = {
    {"name", f_name}, {"cron", f_cron}, {"every", f_every}, {"tz", f_tz},
    {"payload", f_payload}, {"queue", f_queue}, {"priority", f_priority},
    {"max_retries", f_max_retries}, {"catch_up", f_catch_up},
    {"job", f_job}, {"overlap", f_overlap}, {"jitter", f_jitter},
    {"start_at", f_start_at}, {"end_at", f_end_at}, {NULL, NULL}};

/* Walks the schedule table at the top of L. [-0, +0, m] */
static int
walk(sctx *x, lua_State *L)
{
    const char *k;
    int i;

    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2)) {                        /* t k v */
        k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        for (i = 0; k != NULL && rows[i].field; i++)
            if (strcmp(rows[i].field, k) == 0)
                break;
        if (k == NULL || rows[i].field == NULL) {
            lua_pop(L, 2);                           /* t */
            return sfail(x, k ? k : "?", "is not a schedule field (valid: "
                         "name, cron, every, tz, payload, queue, priority, "
                         "max_retries, catch_up, job, overlap, jitter, "
                         "start_at, end_at)");
        }
        if (rows[i].fn(x, L, k) < 0) {
            lua_pop(L, 2);
            return -1;
        }
        lua_pop(L, 1);                               /* t k */
    }                                                /* t */
    return 0;
}

/* Where the quoted name stands in text, else where `name =` is written
 * after `schedules =` (a schedule keyed by its name), or NULL. */
static const char *
name_at(const char *text, const char *name)
{
    char q[300];
    const char *p;

    if (text == NULL || name == NULL)
        return NULL;
    snprintf(q, sizeof q, "\"%s\"", name);
    if ((p = strstr(text, q)) != NULL)
        return p;
    snprintf(q, sizeof q, "'%s'", name);
    if ((p = strstr(text, q)) != NULL)
        return p;
    if ((p = find_assign(text, text, NULL, "schedules", 0)) == NULL)
        return NULL;
    return find_assign(text, p, NULL, name, 0);
}

static int
read_one(sctx *x, lua_State *L)
{
    jr_schedule *s = x->s;
    int i;

    s->max_retries = -1;
    lua_getfield(L, -1, "name");                     /* t name */
    i = f_name(x, L, "name");
    lua_pop(L, 1);                                   /* t */
    if (i < 0)
        return -1;
    if (s->name == NULL)
        return sfail(x, "name", "is missing");
    x->at = name_at(x->text, s->name);
    line_of(x->text, x->at, &s->line);
    if (walk(x, L) < 0)
        return -1;
    if (s->spec == NULL)
        return sfail(x, "cron", "is missing: set 'cron' or 'every'");
    if (s->start_at > 0 && s->end_at > 0 && s->end_at <= s->start_at)
        return sfail(x, "end_at", "must be after start_at");
    if (s->job == NULL && (s->job = strdup(s->name)) == NULL)
        return jr_fail(x->err, JR_ENOMEM, "out of memory");
    if (s->payload == NULL && (s->payload = strdup("{}")) == NULL)
        return jr_fail(x->err, JR_ENOMEM, "out of memory");
    for (i = 0; i < x->index - 1; i++)
        if (strcmp(x->s[-x->index + 1 + i].name, s->name) == 0) {
            const char *again = x->at ? name_at(x->at + 1, s->name) : NULL;
            x->at = again ? again : x->at;
            return sfail(x, "name", "is used by two schedules "
                         "(schedules[%d] and schedules[%d])", i + 1,
                         x->index);
        }
    return 0;
}

static int
by_text(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Schedule x->index from the table on top, keyed by its name: the key is
 * the name, a `name` field must say the same.  [-0, +0, m] */
static int
read_keyed(sctx *x, lua_State *L, const char *key)
{
    sctx whole = *x;
    jr_err e;
    int rc;

    whole.index = 0;
    whole.s = NULL;
    if (lua_type(L, -1) != LUA_TTABLE)
        return sfail(&whole, "schedules", "must hold tables, '%s' is %s",
                     key, luaL_typename(L, -1));
    if (jr_name_check(key, "name", &e) < 0)
        return sfail(&whole, "schedules", "has a key that is not a "
                     "schedule's name: %s", e.msg);
    lua_pushstring(L, key);                          /* t key */
    rc = f_name(x, L, "name");
    lua_getfield(L, -2, "name");                     /* t key name */
    if (rc == 0 && !lua_isnil(L, -1) && (lua_type(L, -1) != LUA_TSTRING ||
                                         strcmp(lua_tostring(L, -1), key)))
        rc = sfail(x, "name", "differs from its key '%s' (a schedule "
                   "written as NAME = { ... } is named by its key)", key);
    lua_pop(L, 2);                                   /* t */
    return rc < 0 ? -1 : read_one(x, L);
}

/* The schedules written as a map, NAME = { ... }: read in the order of
 * their names (a map has none of its own).  [-0, +0, m] */
static int
read_map(sctx *x, lua_State *L, jr_schedules *ss)
{
    const char **keys;
    int n = 0, i, rc = 0;

    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2))                          /* t k v */
        lua_pop(L, 1), n++;                          /* t k */
    if (n > JR_SCHEDULES_MAX)
        return sfail(x, "schedules", "has %d schedules, at most %d", n,
                     JR_SCHEDULES_MAX);
    if ((keys = calloc((size_t)n + 1, sizeof *keys)) == NULL ||
        (n > 0 && (ss->s = calloc((size_t)n, sizeof *ss->s)) == NULL)) {
        free(keys);
        return jr_fail(x->err, JR_ENOMEM, "out of memory");
    }
    n = 0;
    lua_pushnil(L);                                  /* t nil */
    while (lua_next(L, -2))      /* t k v: the table anchors the keys */
        lua_pop(L, 1), keys[n++] = lua_tostring(L, -1);
    qsort(keys, (size_t)n, sizeof *keys, by_text);
    for (i = 0; rc == 0 && i < n; i++) {
        x->index = i + 1;
        x->s = &ss->s[i];
        x->at = NULL;
        ss->n = i + 1;
        lua_getfield(L, -1, keys[i]);                /* t v */
        rc = read_keyed(x, L, keys[i]);
        lua_pop(L, 1);                               /* t */
    }
    free(keys);
    return rc;
}

int
jr_schedules_read(lua_State *L, jr_schedules *ss, const char *file,
                  const char *text, jr_err *err)
{
    sctx x = {file, text, NULL, 0, NULL, err};
    lua_Integer n, i;
    char *tz = ss->timezone, odd[120];

    ss->timezone = NULL;
    jr_schedules_free(ss);
    ss->timezone = tz;
    if (lua_type(L, -1) != LUA_TTABLE)
        return sfail(&x, "schedules", "must be a list of tables or a map "
                     "of NAME = { ... }, got %s", luaL_typename(L, -1));
    if ((n = jr_json_list(L, -1, odd, sizeof odd)) < 0 &&
        lua_rawlen(L, -1) == 0) {
        if (jr_json_map(L, -1, odd, sizeof odd) < 0)
            return sfail(&x, "schedules", "keys must be schedule names, "
                         "found the key %s", odd);
        return read_map(&x, L, ss);
    }
    if (n < 0)
        return sfail(&x, "schedules", "mixes a list and names: found the "
                     "key %s beside the list; write a list of { name = "
                     "..., ... } or a map of NAME = { ... }", odd);
    if (n > JR_SCHEDULES_MAX)
        return sfail(&x, "schedules", "has %lld schedules, at most %d",
                     (long long)n, JR_SCHEDULES_MAX);
    if (n > 0 && (ss->s = calloc((size_t)n, sizeof *ss->s)) == NULL)
        return jr_fail(err, JR_ENOMEM, "out of memory");
    for (i = 1; i <= n; i++) {
        x.index = (int)i;
        x.s = &ss->s[i - 1];
        x.at = NULL;
        ss->n = (int)i;
        lua_rawgeti(L, -1, i);                       /* list t */
        if (lua_type(L, -1) != LUA_TTABLE) {
            x.s = NULL;
            sfail(&x, "schedules", "must hold tables, item %lld is %s",
                  (long long)i, luaL_typename(L, -1));
            lua_pop(L, 1);
            return -1;
        }
        if (read_one(&x, L) < 0) {
            lua_pop(L, 1);
            return -1;
        }
        lua_pop(L, 1);                               /* list */
    }
    return 0;
}

int
jr_schedules_finish(jr_schedules *ss, size_t max_payload, const char *file,
                    const char *text, jr_err *err)
{
    sctx x = {file, text, NULL, 0, NULL, err};
    const char *tz = ss->timezone ? ss->timezone : "UTC";
    int i, line;

    if (!jr_cron_zone_ok(tz)) {
        line_of(text, text ? find_assign(text, text, NULL, "timezone", 0) :
                NULL, &line);
        return jr_fail(err, JR_ECONFIG, "%s:%d: 'timezone' '%s' is not a "
                       "time zone of the tz database (e.g. "
                       "\"Europe/Paris\"; see /usr/share/zoneinfo)", file,
                       line, tz);
    }
    for (i = 0; i < ss->n; i++) {
        jr_schedule *s = &ss->s[i];
        x.s = s;
        x.index = i + 1;
        x.at = name_at(text, s->name);
        if (s->tz == NULL && (s->tz = strdup(tz)) == NULL)
            return jr_fail(err, JR_ENOMEM, "out of memory");
        if (!jr_cron_zone_ok(s->tz))
            return sfail(&x, "tz", "'%s' is not a time zone of the tz "
                         "database (e.g. \"Europe/Paris\"; see "
                         "/usr/share/zoneinfo)", s->tz);
        /* each fire is a push: PostgreSQL refused every one of them, and
         * SQLite took them past max_payload */
        if (strlen(s->payload) > max_payload)
            return sfail(&x, "payload", "is %zu bytes as JSON, over "
                         "max_payload (%zu)", strlen(s->payload),
                         max_payload);
    }
    return 0;
}
