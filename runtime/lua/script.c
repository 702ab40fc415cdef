/* script.c - loading a scripts directory into handlers: the walk (sorted,
 * symlinks followed once and only inside the root), each file run in its
 * own _ENV whose __index is the shared globals so one file's globals do
 * not leak into another, the handler table kept (its options checked in
 * hopts.c), the generation hash, and the watchdog for a file whose top
 * level blocks outside Lua. Calls into Lua go through luabridge.c. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/job.h"
#include "base/log.h"
#include "lua/hopts.h"
#include "lua/script.h"
#include "base/util.h"

/* --- loading a scripts directory ------------------------------------ */

static char loading[4096];      /* the handler file running its top level */
static char watchdog_secs[32];  /* "60", formatted when armed */
static int  watchdog_status;    /* exit status when it fires */

static void
say(const char *s)
{
    ssize_t rc = write(2, s, strlen(s));
    (void)rc;
}

/* SIGALRM while loading: the file's top level is blocked outside Lua, where
 * no instruction budget reaches. Only async-signal-safe calls. */
static void
on_watchdog(int sig)
{
    (void)sig;
    say("jobrunner: ");
    say(loading[0] ? loading : "handlers");
    say(": did not finish loading within ");
    say(watchdog_secs);
    say("s (blocked outside Lua?)\n");
    _exit(watchdog_status);
}

void
jr_scripts_watchdog(double secs, int status)
{
    struct itimerval it;

    memset(&it, 0, sizeof it);
    watchdog_status = status;
    if (secs > 0) {
        snprintf(watchdog_secs, sizeof watchdog_secs, "%g", secs);
        signal(SIGALRM, on_watchdog);
        it.it_value.tv_sec = (time_t)secs;
        it.it_value.tv_usec = (suseconds_t)((secs - (double)(time_t)secs) *
                                            1e6);
        if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
            it.it_value.tv_usec = 1;
    }
    setitimer(ITIMER_REAL, &it, NULL);
    if (secs <= 0)
        signal(SIGALRM, SIG_DFL);
}

typedef struct loader {
    lua_State  *L;
    jr_scripts *s;
    const char *root;
    int         cap_h, cap_e;
    uint64_t    hash;           /* FNV-1a over paths and contents */
    int         compile_only;   /* jr_scripts_names: run no handler code */
    jr_dirset   dirs;           /* directories entered */
    char      **later;          /* symlinked dirs: path, rel, path, ... */
    int         nlater, cap_later;
} loader;

static void
hash_bytes(loader *ld, const void *p, size_t n)
{
    const unsigned char *c = p;
    size_t i;

    for (i = 0; i < n; i++) {
        ld->hash ^= c[i];
        ld->hash *= 1099511628211ull;
    }
}

static void
hash_file(loader *ld, const char *path, const char *rel)
{
    char buf[8192];
    FILE *f = fopen(path, "rb");
    size_t n;

    hash_bytes(ld, rel, strlen(rel) + 1);
    if (f == NULL)
        return;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        hash_bytes(ld, buf, n);
    fclose(f);
}

static void add_error(loader *ld, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
add_error(loader *ld, const char *fmt, ...)
{
    char msg[1024];
    char **e;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ld->s->nerrors == ld->cap_e) {
        ld->cap_e = ld->cap_e ? ld->cap_e * 2 : 8;
        e = realloc(ld->s->errors, (size_t)ld->cap_e * sizeof *e);
        if (e == NULL)
            return;
        ld->s->errors = e;
    }
    if ((ld->s->errors[ld->s->nerrors] = strdup(msg)) != NULL)
        ld->s->nerrors++;
}

static int
add_handler(loader *ld, const char *name, int max_retries, double timeout,
            double backoff, int inflight, int durable, const char *seq,
            const char *fair, char *fw, double fdef)
{
    jr_handler *h;

    if (ld->s->n == ld->cap_h) {
        ld->cap_h = ld->cap_h ? ld->cap_h * 2 : 16;
        h = realloc(ld->s->h, (size_t)ld->cap_h * sizeof *h);
        if (h == NULL)
            return -1;
        ld->s->h = h;
    }
    h = &ld->s->h[ld->s->n];
    if ((h->name = strdup(name)) == NULL)
        return -1;
    h->max_retries = max_retries;
    h->timeout = timeout;
    h->backoff = backoff;
    h->inflight = inflight;
    h->durable_steps = durable;
    h->avg = 0;
    h->keep_output = 0;
    h->sequence = NULL;
    h->fair = NULL;
    h->fair_weights = fw;       /* taken */
    h->fair_default = fdef;
    if ((seq != NULL && (h->sequence = strdup(seq)) == NULL) ||
        (fair != NULL && (h->fair = strdup(fair)) == NULL)) {
        free(h->sequence);
        free(h->name);
        return -1;
    }
    ld->s->n++;
    return 0;
}

/* An error while loading whose message names no place (one raised in C,
 * as coroutine.yield's "attempt to yield from outside a coroutine") gets
 * the innermost Lua line of the traceback in msg, else path. Cuts the
 * traceback off. */
static void
locate(char *msg, size_t size, const char *path)
{
    char *tb = strstr(msg, "\nstack traceback:"), *p, *eol, *end;
    char where[300], head[1024];
    size_t n;

    if (tb == NULL)
        return;
    *tb = '\0';
    snprintf(where, sizeof where, "%.*s", (int)sizeof where - 1, path);
    for (p = tb + 1; (p = strstr(p, "\n\t")) != NULL; p += 2) {
        eol = strchr(p + 2, '\n');
        end = strstr(p + 2, ": ");
        if (strncmp(p + 2, "[C]", 3) != 0 && end != NULL &&
            (eol == NULL || end < eol)) {
            n = (size_t)(end - (p + 2));
            snprintf(where, sizeof where, "%.*s", (int)(n < 299 ? n : 299),
                     p + 2);
            break;
        }
    }
    if (strncmp(msg, where, strlen(where)) == 0 ||
        strncmp(msg, path, strlen(path)) == 0)
        return;
    n = strlen(where);
    snprintf(head, sizeof head, "%.*s", (int)sizeof head - 1, msg);
    if (size > n + 3)
        snprintf(msg, size, "%.*s: %.*s", (int)n, where, (int)(size - n - 3),
                 head);
}

/* Runs one handler file in its own _ENV and records its table under name
 * in the handlers table at the top. [-0, +0, -] */
static void
load_one(loader *ld, const char *path, const char *name)
{
    lua_State *L = ld->L;
    const char *bad, *seq = NULL, *fair = NULL;
    int max_retries = -1, inflight = 0, durable, keep = 0;
    double timeout = 0, backoff = -1, fdef = 0;
    char *fw = NULL;
    jr_err err;
    int rc;

    if (luaL_loadfilex(L, path, "t") != LUA_OK) {    /* H msg */
        add_error(ld, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return;
    }                                                /* H chunk */
    lua_newtable(L);                                 /* H chunk env */
    lua_newtable(L);                                 /* H chunk env mt */
    lua_pushglobaltable(L);                          /* H chunk env mt G */
    lua_setfield(L, -2, "__index");                  /* H chunk env mt */
    lua_setmetatable(L, -2);                         /* H chunk env */
    lua_setupvalue(L, -2, 1);                        /* H chunk */
    /* under a budget: a file that loops while loading is its own error */
    snprintf(loading, sizeof loading, "%s", path);
    rc = jr_luabridge_run(L, 0, 1, JR_LUA_BUDGET, &err);
    loading[0] = '\0';
    if (rc < 0) {                                    /* H */
        locate(err.msg, sizeof err.msg, path);
        add_error(ld, "%s", err.msg);
        return;
    }                                                /* H r */
    if (lua_isfunction(L, -1)) {
        lua_newtable(L);                             /* H f t */
        lua_insert(L, -2);                           /* H t f */
        lua_setfield(L, -2, "handle");               /* H t */
    } else if (!lua_istable(L, -1)) {
        add_error(ld, "%s: must return a function or a table with 'handle',"
                  " returned %s", path, luaL_typename(L, -1));
        lua_pop(L, 1);                               /* H */
        return;
    }                                                /* H t */
    if ((bad = jr_hopts_table(L, &max_retries, &timeout, &backoff)) != NULL ||
        (bad = jr_hopts_inflight(L, &inflight)) != NULL ||
        (bad = jr_hopts_output(L, inflight, &keep)) != NULL ||
        (bad = jr_hopts_path(L, "sequence", &seq)) != NULL ||
        (bad = jr_hopts_fair(L, &fair, &fw, &fdef)) != NULL) {
        add_error(ld, "%s: %s", path, bad);
        lua_pop(L, 1);                               /* H */
        return;
    }
    lua_getfield(L, -1, "durable_steps");            /* H t d */
    durable = lua_isnil(L, -1) ? -1 : lua_toboolean(L, -1);
    lua_pop(L, 1);                                   /* H t */
    if (add_handler(ld, name, max_retries, timeout, backoff, inflight,
                    durable, seq, fair, fw, fdef) < 0) {
        free(fw);
        add_error(ld, "%s: %s", path, "out of memory");
        lua_pop(L, 1);
        return;
    }
    ld->s->h[ld->s->n - 1].keep_output = keep;
    lua_setfield(L, -2, name);                       /* H */
}

/* Compiles one handler file without running it: a name with a file that
 * parses. [-0, +0, -] */
static void
compile_one(loader *ld, const char *path, const char *name)
{
    if (luaL_loadfilex(ld->L, path, "t") != LUA_OK) {    /* msg */
        add_error(ld, "%s", lua_tostring(ld->L, -1));
        lua_pop(ld->L, 1);
        return;
    }                                                    /* chunk */
    lua_pop(ld->L, 1);                                   /* (nothing) */
    if (add_handler(ld, name, -1, 0, -1, 0, 0, NULL, NULL, NULL, 0) < 0)
        add_error(ld, "%s: %s", path, "out of memory");
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists dir sorted, so loading and hashing do not depend on readdir. */
static char **
list_dir(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL, **t;
    int cap = 0;

    *n = 0;
    if (d == NULL)
        return NULL;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            if ((t = realloc(v, (size_t)cap * sizeof *v)) == NULL)
                break;
            v = t;
        }
        if ((v[*n] = strdup(e->d_name)) != NULL)
            (*n)++;
    }
    closedir(d);
    if (v != NULL)
        qsort(v, (size_t)*n, sizeof *v, by_name);
    return v;
}

static int
valid_name(const char *name)
{
    return jr_name_check(name, "job name", NULL) == 0;
}

/* Keeps a symlinked directory for after the real tree, so that the real
 * directory, not a second name for it, gives its handlers their names. */
static void
defer(loader *ld, const char *path, const char *rel)
{
    char **t;

    if (ld->nlater + 2 > ld->cap_later) {
        int cap = ld->cap_later ? ld->cap_later * 2 : 16;
        if ((t = realloc(ld->later, (size_t)cap * sizeof *t)) == NULL)
            return;
        ld->later = t;
        ld->cap_later = cap;
    }
    if ((ld->later[ld->nlater] = strdup(path)) == NULL)
        return;
    if ((ld->later[ld->nlater + 1] = strdup(rel)) == NULL) {
        free(ld->later[ld->nlater]);
        return;
    }
    ld->nlater += 2;
}

/* Walks dir (rel is its path below the root, "" at the top). A symlink to
 * a directory is followed later, and only when it stays inside the root
 * and leads to a directory not walked yet; else it is skipped, with a
 * warning naming it. */
static void
walk(loader *ld, const char *dir, const char *rel)
{
    char path[4096], sub[4096], name[4096], why[4352];
    struct stat st, lst;
    char **v;
    int n, i;
    size_t len;

    v = list_dir(dir, &n);
    for (i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, v[i]);
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", v[i]);
        len = strlen(v[i]);
        if (stat(path, &st) < 0 || lstat(path, &lst) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (v[i][0] == '_')
                continue;
            if (S_ISLNK(lst.st_mode))
                defer(ld, path, sub);
            else if (jr_dirset_enter(&ld->dirs, path, why, sizeof why))
                walk(ld, path, sub);
            else
                jr_log(JR_LOG_WARN, "%s: directory skipped: %s", path, why);
            continue;
        }
        if (len < 5 || strcmp(v[i] + len - 4, ".lua") != 0)
            continue;
        hash_file(ld, path, sub);
        if (v[i][0] == '_')
            continue;                   /* a helper for require */
        snprintf(name, sizeof name, "%.*s", (int)(strlen(sub) - 4), sub);
        for (char *p = name; *p; p++)
            if (*p == '/')
                *p = '.';
        if (!valid_name(name))
            add_error(ld, "%s: '%s' is not a valid job name (use "
                      "[A-Za-z0-9_.:-], at most 128)", path, name);
        else if (ld->compile_only)
            compile_one(ld, path, name);
        else
            load_one(ld, path, name);
    }
    for (i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Walks the tree, then the symlinked directories found in it (which may
 * find more). */
static void
walk_all(loader *ld, const char *dir)
{
    char why[4352];
    int i;

    walk(ld, dir, "");
    for (i = 0; i < ld->nlater; i += 2) {
        if (jr_dirset_enter(&ld->dirs, ld->later[i], why, sizeof why))
            walk(ld, ld->later[i], ld->later[i + 1]);
        else
            jr_log(JR_LOG_WARN, "%s: symlink skipped: %s", ld->later[i],
                   why);
    }
    for (i = 0; i < ld->nlater; i++)
        free(ld->later[i]);
    free(ld->later);
    ld->later = NULL;
    ld->nlater = ld->cap_later = 0;
}

int
jr_scripts_load(lua_State *L, const char *dir, jr_scripts *s, jr_err *err)
{
    struct stat st;
    loader ld;

    memset(s, 0, sizeof *s);
    s->ref = LUA_NOREF;
    if (stat(dir, &st) < 0)
        return jr_fail_errno(err, JR_ENOTFOUND, errno, "scripts directory "
                             "'%s'", dir);
    if (!S_ISDIR(st.st_mode))
        return jr_fail_errno(err, JR_ENOTFOUND, ENOTDIR, "scripts directory "
                             "'%s'", dir);
    memset(&ld, 0, sizeof ld);
    ld.L = L;
    ld.s = s;
    ld.root = dir;
    ld.hash = 14695981039346656037ull;
    if (jr_dirset_init(&ld.dirs, dir, err) < 0)
        return -1;
    lua_newtable(L);                                 /* H */
    walk_all(&ld, dir);
    jr_dirset_free(&ld.dirs);
    s->ref = luaL_ref(L, LUA_REGISTRYINDEX);         /* (nothing) */
    snprintf(s->generation, sizeof s->generation, "%016llx",
             (unsigned long long)ld.hash);
    return 0;
}

int
jr_scripts_names(const char *dir, jr_scripts *s, jr_err *err)
{
    struct stat st;
    loader ld;

    memset(s, 0, sizeof *s);
    s->ref = LUA_NOREF;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return jr_fail_errno(err, JR_ENOTFOUND, errno ? errno : ENOTDIR,
                             "scripts directory '%s'", dir);
    memset(&ld, 0, sizeof ld);
    /* a bare state to compile in: no library, nothing of the files runs */
    if ((ld.L = luaL_newstate()) == NULL)
        return jr_fail(err, JR_ENOMEM, "cannot create a Lua state: out of "
                       "memory");
    ld.s = s;
    ld.root = dir;
    ld.hash = 14695981039346656037ull;
    ld.compile_only = 1;
    if (jr_dirset_init(&ld.dirs, dir, err) < 0) {
        lua_close(ld.L);
        return -1;
    }
    walk_all(&ld, dir);
    jr_dirset_free(&ld.dirs);
    lua_close(ld.L);
    snprintf(s->generation, sizeof s->generation, "%016llx",
             (unsigned long long)ld.hash);
    return 0;
}

void
jr_scripts_push(lua_State *L, const jr_scripts *s, const char *name)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->ref);       /* H */
    lua_getfield(L, -1, name);                       /* H t|nil */
    lua_remove(L, -2);                               /* t|nil */
}

void
jr_scripts_free(jr_scripts *s)
{
    int i;

    for (i = 0; i < s->n; i++) {
        free(s->h[i].name);
        free(s->h[i].sequence);
        free(s->h[i].fair);
        free(s->h[i].fair_weights);
    }
    for (i = 0; i < s->nerrors; i++)
        free(s->errors[i]);
    free(s->h);
    free(s->errors);
    memset(s, 0, sizeof *s);
}
