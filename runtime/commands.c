/* commands.c - the subcommands: each parses its own arguments, loads the
 * config, opens the backend when it needs one, and says what went wrong in
 * one line on stderr. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "backend.h"
#include "commands.h"
#include "config.h"
#include "jobrunner.h"
#include "jrlib.h"
#include "log.h"
#include "master.h"
#include "reload.h"
#include "script.h"
#include "util.h"
#include "worker.h"

#define DEFAULT_BACKEND "sqlite:jobrunner.db"
#define DEFAULT_SCRIPTS "scripts"

static int
die(int status, const char *msg)
{
    fprintf(stderr, "jobrunner: %s\n", msg);
    return status;
}

static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int
usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "jobrunner: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try 'jobrunner --help')\n");
    return JR_EXIT_USAGE;
}

/* Defaults, then the config file, then the command line. */
static int
load_config(jr_cli *cli, jr_config *c)
{
    jr_err err;

    jr_config_defaults(c);
    if (jr_config_load(c, cli->config, NULL, &err) < 0)
        return die(JR_EXIT_CONFIG, err.msg);
    if ((cli->backend && jr_config_set(&c->backend, cli->backend, &err) < 0) ||
        (!c->backend && jr_config_set(&c->backend, DEFAULT_BACKEND, &err) < 0) ||
        (cli->scripts && jr_config_set(&c->scripts, cli->scripts, &err) < 0) ||
        (!c->scripts && jr_config_set(&c->scripts, DEFAULT_SCRIPTS, &err) < 0))
        return die(JR_EXIT_FAIL, err.msg);
    jr_log_setup(c->log_level, c->log_json, "master");
    return 0;
}

static int
open_db(jr_config *c, jr_db *db, int migrate)
{
    jr_backend_opts o = {0};
    jr_err err;

    o.sync_normal = c->sync_normal;
    o.busy_timeout = c->busy_timeout;
    o.schema = c->schema;
    o.max_payload = c->max_payload;
    if (jr_db_open(db, c->backend, &o, &err) < 0 ||
        (migrate && db->ops->migrate(db->b, &err) < 0)) {
        jr_db_close(db);
        return die(err.code == JR_EUSAGE ? JR_EXIT_USAGE : JR_EXIT_FAIL,
                   err.msg);
    }
    return 0;
}

/* The producer library on the config's backend: the CLI's push, stats and
 * dead go through it, so producers have one code path. A reader (stats,
 * dead list) opens an existing database only, creating nothing, and gets
 * JR_EXIT_NODB when there is none. */
static int
open_as(jr_config *c, jr_client **client, int reader)
{
    jr_client_config cc = {c->schema, c->busy_timeout, c->max_payload,
                           c->sync_normal, reader};
    int rc = jr_client_open(client, c->backend, &cc);

    if (rc == JR_CLIENT_OK)
        return 0;
    fprintf(stderr, "jobrunner: %s\n", *client ? jr_client_errmsg(*client) :
            "out of memory");
    jr_client_close(*client);
    *client = NULL;
    return rc == JR_CLIENT_ENODB ? JR_EXIT_NODB :
           rc == JR_CLIENT_EUSAGE ? JR_EXIT_USAGE : JR_EXIT_FAIL;
}

static int
open_client(jr_config *c, jr_client **client)
{
    return open_as(c, client, 0);
}

static int
open_reader(jr_config *c, jr_client **client)
{
    return open_as(c, client, 1);
}

static int
client_fail(jr_client *client)
{
    int code = jr_client_errcode(client);

    fprintf(stderr, "jobrunner: %s\n", jr_client_errmsg(client));
    return code == JR_CLIENT_EINPUT || code == JR_CLIENT_EUSAGE ?
           JR_EXIT_USAGE : JR_EXIT_FAIL;
}

/* Common prologue: config and an open, migrated database. */
static int
setup(jr_cli *cli, jr_config *c, jr_db *db)
{
    int rc = load_config(cli, c);

    if (rc == 0 && (rc = open_db(c, db, 1)) != 0)
        jr_config_free(c);
    return rc;
}

static int
finish(jr_config *c, jr_db *db, int rc)
{
    jr_db_close(db);
    jr_config_free(c);
    return rc;
}

int
jr_cmd_run(jr_cli *cli)
{
    jr_config c;
    int rc;

    if (cli->argc > 0)
        return usage_error("run takes no arguments, got '%s'", cli->argv[0]);
    if ((rc = load_config(cli, &c)) != 0)
        return rc;
    rc = jr_master_run(&c, cli->self);
    jr_config_free(&c);
    return rc;
}

int
jr_cmd_worker(jr_cli *cli)
{
    int fd;

    if (cli->argc != 1)
        return die(JR_EXIT_USAGE, "__worker is started by the runner");
    fd = atoi(cli->argv[0]);
    /* "3:4": the handlers' output goes to descriptor 4 */
    if (strchr(cli->argv[0], ':') != NULL &&
        jr_worker_output(atoi(strchr(cli->argv[0], ':') + 1)) < 0)
        return die(JR_EXIT_FAIL, "worker: cannot set up handler output");
    /* the settings come from the master's first frame, not a file */
    return jr_worker_main(fd);
}

/* Uses cjson to say precisely what is wrong with a JSON text. Returns 0 if
 * it is valid, else writes the reason into why. */
static int
json_check(const char *text, char *why, size_t size)
{
    jr_err err;
    lua_State *L = jr_script_state(NULL, &err);
    int rc = 0;

    if (L == NULL)
        return 0;               /* the database will still refuse it */
    lua_getglobal(L, "require");                     /* require */
    lua_pushliteral(L, "cjson");                     /* require "cjson" */
    if (jr_script_pcall(L, 1, 1, &err) == 0) {       /* cjson */
        lua_getfield(L, -1, "decode");               /* cjson decode */
        lua_pushstring(L, text);                     /* cjson decode text */
        if (lua_pcall(L, 1, 1, 0) != LUA_OK) {       /* cjson msg */
            snprintf(why, size, "%s", lua_tostring(L, -1));
            rc = -1;
        }
    }
    lua_close(L);
    return rc;
}

int
jr_cmd_push(jr_cli *cli)
{
    jr_push p = {.max_retries = -1};
    jr_client_opts opts = JR_CLIENT_OPTS_INIT;
    jr_client *client;
    jr_config c;
    jr_err err;
    int64_t id;
    char why[256];
    long v;
    int i, rc;

    for (i = 0; i < cli->argc; i++) {
        const char *a = cli->argv[i], *val = i + 1 < cli->argc ?
                        cli->argv[i + 1] : NULL;
        int takes = strcmp(a, "--in") == 0 || strcmp(a, "--at") == 0 ||
                    strcmp(a, "--priority") == 0 || strcmp(a, "--queue") == 0
                    || strcmp(a, "--max-retries") == 0;
        if (takes && val == NULL)
            return usage_error("push: option '%s' needs a value", a);
        if ((strcmp(a, "--in") == 0 && p.run_at > 0) ||
            (strcmp(a, "--at") == 0 && p.run_in > 0))
            return usage_error("push: give --in or --at, not both");
        if (strcmp(a, "--in") == 0)
            rc = jr_parse_duration(val, "--in", &p.run_in, &err);
        else if (strcmp(a, "--at") == 0)
            rc = jr_parse_time(val, "--at", &p.run_at, &err);
        else if (strcmp(a, "--priority") == 0)
            rc = jr_parse_int(val, "--priority", -1000000, 1000000, &v, &err),
            p.priority = (int)v;
        else if (strcmp(a, "--max-retries") == 0)
            rc = jr_parse_int(val, "--max-retries", 0, 1000000, &v, &err),
            p.max_retries = (int)v;
        else if (strcmp(a, "--queue") == 0)
            rc = 0, p.queue = val;
        else if (a[0] == '-' && a[1] == '-')
            return usage_error("push: unknown option '%s'", a);
        else if (p.name == NULL)
            rc = 0, p.name = a;
        else if (p.payload == NULL)
            rc = 0, p.payload = a;
        else
            return usage_error("push: unexpected argument '%s'", a);
        if (rc < 0)
            return die(JR_EXIT_USAGE, err.msg);
        i += takes;
    }
    if (p.name == NULL)
        return usage_error("push: missing the job %s", "NAME");
    if ((rc = load_config(cli, &c)) != 0)
        return rc;
    if (jr_push_check(&p, c.max_payload, &err) < 0) {
        jr_config_free(&c);
        return die(JR_EXIT_USAGE, err.msg);
    }
    if (p.payload && json_check(p.payload, why, sizeof why) < 0) {
        jr_config_free(&c);
        fprintf(stderr, "jobrunner: job '%s': invalid JSON payload: %s\n",
                p.name, why);
        return JR_EXIT_USAGE;
    }
    if ((rc = open_client(&c, &client)) != 0) {
        jr_config_free(&c);
        return rc;
    }
    opts.run_at = p.run_at;
    opts.run_in = p.run_in;
    opts.priority = p.priority;
    opts.queue = p.queue;
    opts.max_retries = p.max_retries;
    if (jr_client_push(client, p.name, p.payload, &opts, &id) != JR_CLIENT_OK)
        rc = client_fail(client);
    else
        printf("%lld\n", (long long)id);
    jr_client_close(client);
    jr_config_free(&c);
    return rc;
}

/* --- stats ------------------------------------------------------------ */

typedef struct stat_acc {
    jr_stat_row *rows;
    int          n, cap;
    long         ready, scheduled, running, dead;
} stat_acc;

static int
stat_collect(const char *name, const jr_client_counts *n, void *arg)
{
    stat_acc *a = arg;
    jr_stat_row row_ = {name, n->ready, n->scheduled, n->running, n->dead};
    const jr_stat_row *row = &row_;

    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 16;
        jr_stat_row *v = realloc(a->rows, (size_t)cap * sizeof *v);
        if (v == NULL)
            return 1;
        a->rows = v;
        a->cap = cap;
    }
    a->rows[a->n] = *row;
    if ((a->rows[a->n].name = strdup(row->name)) == NULL)
        return 1;
    a->n++;
    a->ready += row->ready;
    a->scheduled += row->scheduled;
    a->running += row->running;
    a->dead += row->dead;
    return 0;
}

/* The handlers that load from the scripts directory, as the runner would
 * load them (a file with an error is not a handler). */
static int
load_handlers(const char *scripts, lua_State **L, jr_scripts *s,
              jr_jobctx *ctx, jr_err *err)
{
    memset(s, 0, sizeof *s);
    if ((*L = jr_script_state(scripts, err)) == NULL)
        return -1;
    if (jr_jrlib_open(*L, ctx, err) < 0 ||
        jr_scripts_load(*L, scripts, s, err) < 0) {
        lua_close(*L);
        *L = NULL;
        return -1;
    }
    return 0;
}

static int
has_handler(const jr_scripts *s, const char *name)
{
    int i;

    for (i = 0; i < s->n; i++)
        if (strcmp(s->h[i].name, name) == 0)
            return 1;
    return 0;
}

static void
stats_json(const stat_acc *a, const jr_scripts *scripts)
{
    int i, first = 1;

    printf("{\"queued\":%ld,\"ready\":%ld,\"scheduled\":%ld,\"running\":%ld,"
           "\"dead\":%ld,\"names\":{", a->ready + a->scheduled, a->ready,
           a->scheduled, a->running, a->dead);
    for (i = 0; i < a->n; i++) {
        const jr_stat_row *r = &a->rows[i];
        printf("%s", i ? "," : "");
        jr_json_str(stdout, r->name);
        printf(":{\"ready\":%ld,\"scheduled\":%ld,\"running\":%ld,\"dead\":"
               "%ld,\"handler\":%s}", r->ready, r->scheduled, r->running,
               r->dead, has_handler(scripts, r->name) ? "true" : "false");
    }
    printf("},\"unhandled\":[");
    for (i = 0; i < a->n; i++)
        if (!has_handler(scripts, a->rows[i].name)) {
            printf("%s", first ? "" : ",");
            jr_json_str(stdout, a->rows[i].name);
            first = 0;
        }
    printf("]}\n");
}

static void
stats_text(const stat_acc *a, const jr_scripts *scripts)
{
    int i;

    printf("queued %ld (ready %ld, scheduled %ld), running %ld, dead %ld\n",
           a->ready + a->scheduled, a->ready, a->scheduled, a->running,
           a->dead);
    if (a->n == 0)
        return;
    printf("\n%-32s %9s %9s %9s %9s\n", "NAME", "READY", "SCHEDULED",
           "RUNNING", "DEAD");
    for (i = 0; i < a->n; i++) {
        const jr_stat_row *r = &a->rows[i];
        printf("%-32s %9ld %9ld %9ld %9ld%s\n", r->name, r->ready,
               r->scheduled, r->running, r->dead,
               has_handler(scripts, r->name) ? "" : "  (no handler file)");
    }
}

int
jr_cmd_stats(jr_cli *cli)
{
    stat_acc a = {0};
    jr_scripts s;
    jr_err err;
    jr_client *client;
    jr_client_counts total;
    jr_config c;
    int json = 0, i, rc;

    for (i = 0; i < cli->argc; i++) {
        if (strcmp(cli->argv[i], "--json") == 0)
            json = 1;
        else
            return usage_error("stats: unexpected argument '%s'",
                               cli->argv[i]);
    }
    if ((rc = load_config(cli, &c)) != 0)
        return rc;
    if ((rc = open_reader(&c, &client)) != 0) {
        jr_config_free(&c);
        return rc;
    }
    /* names with a handler file that compiles: stats runs no handler
     * code, which could loop or block */
    if (jr_scripts_names(c.scripts, &s, &err) < 0)
        memset(&s, 0, sizeof s);    /* no scripts dir: nothing handled */
    if (jr_client_stats(client, &total, stat_collect, &a) != JR_CLIENT_OK)
        rc = client_fail(client);
    else if (json)
        stats_json(&a, &s);
    else
        stats_text(&a, &s);
    jr_scripts_free(&s);
    for (i = 0; i < a.n; i++)
        free((char *)a.rows[i].name);
    free(a.rows);
    jr_client_close(client);
    jr_config_free(&c);
    return rc;
}

/* --- dead ------------------------------------------------------------- */

typedef struct dead_out {
    int json;
    int n;
} dead_out;

static int
dead_print(const jr_client_dead *r, void *arg)
{
    dead_out *o = arg;
    char died[40], created[40], first[120];
    const char *err = r->last_error ? r->last_error : "";
    size_t len = strcspn(err, "\n");

    jr_time_iso(r->died_at, died, sizeof died);
    jr_time_iso(r->created_at, created, sizeof created);
    if (o->json) {
        printf("%s{\"id\":%lld,\"name\":", o->n ? "," : "", (long long)r->id);
        jr_json_str(stdout, r->name);
        printf(",\"queue\":");
        jr_json_str(stdout, r->queue);
        printf(",\"attempts\":%d,\"last_error\":", r->attempts);
        jr_json_str(stdout, r->last_error);
        printf(",\"generation\":");
        jr_json_str(stdout, r->generation);
        printf(",\"died_at\":\"%s\",\"created_at\":\"%s\"}", died, created);
    } else {
        if (o->n == 0)
            printf("%-10s %-24s %8s  %-24s %s\n", "ID", "NAME", "ATTEMPTS",
                   "DIED AT", "LAST ERROR");
        snprintf(first, sizeof first, "%.*s", (int)len, err);
        printf("%-10lld %-24s %8d  %-24s %s\n", (long long)r->id, r->name,
               r->attempts, died, first);
    }
    o->n++;
    return 0;
}

static int
dead_list(jr_client *db, int argc, char **argv)
{
    dead_out o = {0};
    jr_err err;
    long limit = 100;
    int i;

    for (i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o.json = 1;
        else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            if (jr_parse_int(argv[++i], "--limit", 1, 1000000000, &limit,
                             &err) < 0)
                return die(JR_EXIT_USAGE, err.msg);
        } else
            return usage_error("dead list: unexpected argument '%s'",
                               argv[i]);
    }
    if (o.json)
        printf("[");
    if (jr_client_dead_list(db, (int)limit, dead_print, &o) != JR_CLIENT_OK)
        return client_fail(db);
    if (o.json)
        printf("]\n");
    else if (o.n == 0)
        printf("no dead jobs\n");
    return JR_EXIT_OK;
}

static int
dead_retry(jr_client *db, int argc, char **argv)
{
    int64_t *ids;
    jr_err err;
    long v, n, one;
    int i;

    if (argc == 0)
        return usage_error("dead retry: give job ids or %s", "--all");
    if (argc == 1 && strcmp(argv[0], "--all") == 0) {
        if (jr_client_dead_retry(db, NULL, 0, &n) != JR_CLIENT_OK)
            return client_fail(db);
        printf("requeued %ld dead job%s\n", n, n == 1 ? "" : "s");
        return JR_EXIT_OK;
    }
    if ((ids = calloc((size_t)argc, sizeof *ids)) == NULL)
        return die(JR_EXIT_FAIL, "out of memory");
    for (i = 0; i < argc; i++) {
        if (jr_parse_int(argv[i], "job id", 1, 0x7fffffffffffffffL, &v,
                         &err) < 0) {
            free(ids);
            return die(JR_EXIT_USAGE, err.msg);
        }
        ids[i] = v;
    }
    for (i = 0, n = 0; i < argc; i++) {
        if (jr_client_dead_retry(db, &ids[i], 1, &one) != JR_CLIENT_OK) {
            free(ids);
            return client_fail(db);
        }
        if (one == 0)
            fprintf(stderr, "jobrunner: job %lld is not in the dead queue "
                    "(no such job, or not dead)\n", (long long)ids[i]);
        n += one;
    }
    free(ids);
    printf("requeued %ld dead job%s\n", n, n == 1 ? "" : "s");
    return n < argc ? JR_EXIT_FAIL : JR_EXIT_OK;
}

static int
dead_purge(jr_client *db, int argc, char **argv)
{
    double older = 0;
    jr_err err;
    long n;

    if (argc == 2 && strcmp(argv[0], "--older-than") == 0) {
        if (jr_parse_duration(argv[1], "--older-than", &older, &err) < 0)
            return die(JR_EXIT_USAGE, err.msg);
    } else if (argc != 0) {
        return usage_error("dead purge: unexpected argument '%s'", argv[0]);
    }
    if (jr_client_dead_purge(db, older, &n) != JR_CLIENT_OK)
        return client_fail(db);
    printf("purged %ld dead job%s\n", n, n == 1 ? "" : "s");
    return JR_EXIT_OK;
}

int
jr_cmd_dead(jr_cli *cli)
{
    static const struct {
        const char *name;
        int (*fn)(jr_client *db, int argc, char **argv);
    } subs[] = {{"list", dead_list}, {"retry", dead_retry},
                {"purge", dead_purge}};
    jr_config c;
    jr_client *client;
    int argc = cli->argc, rc;
    char **argv = cli->argv;
    size_t which = 0;

    if (argc > 0 && argv[0][0] != '-') {
        for (which = 0; which < 3; which++)
            if (strcmp(subs[which].name, argv[0]) == 0)
                break;
        if (which == 3)
            return usage_error("dead: unknown subcommand '%s' (list, retry, "
                               "purge)", argv[0]);
        argc--;
        argv++;
    }
    if ((rc = load_config(cli, &c)) != 0)
        return rc;
    if ((rc = which == 0 ? open_reader(&c, &client) :
               open_client(&c, &client)) == 0) {
        rc = subs[which].fn(client, argc, argv);
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}

int
jr_cmd_reload(jr_cli *cli)
{
    char path[4096];
    jr_config c;
    jr_err err;
    long pid;
    int rc;

    if (cli->argc > 0)
        return usage_error("reload takes no arguments, got '%s'",
                           cli->argv[0]);
    if ((rc = load_config(cli, &c)) != 0)
        return rc;
    jr_pidfile_path(&c, path, sizeof path);
    jr_config_free(&c);
    if ((pid = jr_pidfile_read(path, &err)) < 0)
        return die(JR_EXIT_FAIL, err.msg);
    if (kill((pid_t)pid, SIGHUP) < 0)
        return die(JR_EXIT_FAIL, "cannot signal the runner");
    printf("asked runner %ld to reload its handlers (its log says how it "
           "went)\n", pid);
    return JR_EXIT_OK;
}

int
jr_cmd_migrate(jr_cli *cli)
{
    jr_config c;
    jr_db db;
    char url[512];
    int rc;

    if (cli->argc > 0)
        return usage_error("migrate takes no arguments, got '%s'",
                           cli->argv[0]);
    if ((rc = setup(cli, &c, &db)) != 0)
        return rc;
    jr_url_mask(c.backend, url, sizeof url);
    printf("schema of %s is up to date\n", url);
    return finish(&c, &db, JR_EXIT_OK);
}

int
jr_cmd_check(jr_cli *cli)
{
    jr_scripts s;
    jr_jobctx ctx = {0};
    jr_config c;
    jr_err err;
    lua_State *L;
    int rc, i;

    if (cli->argc > 0)
        return usage_error("check takes no arguments, got '%s'",
                           cli->argv[0]);
    if ((rc = load_config(cli, &c)) != 0)
        return rc;
    jr_scripts_watchdog(c.load_timeout, JR_EXIT_CONFIG); /* blocked in C */
    rc = load_handlers(c.scripts, &L, &s, &ctx, &err);
    jr_scripts_watchdog(0, 0);
    if (rc < 0) {
        fprintf(stderr, "jobrunner: cannot load handlers: %s\n", err.msg);
        jr_config_free(&c);
        return JR_EXIT_CONFIG;
    }
    for (i = 0; i < s.nerrors; i++)
        fprintf(stderr, "%s\n", s.errors[i]);
    printf("%s: %d handler%s loaded", c.scripts, s.n, s.n == 1 ? "" : "s");
    for (i = 0; i < s.n; i++)
        printf("%s%s", i ? ", " : ": ", s.h[i].name);
    printf("\n");
    if (s.nerrors > 0)
        printf("%d error%s\n", s.nerrors, s.nerrors == 1 ? "" : "s");
    rc = s.nerrors > 0 ? JR_EXIT_CONFIG : JR_EXIT_OK;
    jr_scripts_free(&s);
    lua_close(L);
    jr_config_free(&c);
    return rc;
}
