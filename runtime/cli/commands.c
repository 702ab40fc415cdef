/* commands.c - the subcommands: each parses its own arguments, loads the
 * config, opens the backend when it needs one, and says what went wrong in
 * one line on stderr. `push` is pushcmd.c. */
#include <errno.h>
#include <limits.h>
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
#include "cli/commands.h"
#include "cli/schedcmd.h"
#include "db/dbopts.h"
#include "db/dbthread.h"
#include "config/config.h"
#include "client/jobrunner.h"
#include "lua/jrlib.h"
#include "base/keyring.h"
#include "base/log.h"
#include "master/master.h"
#include "master/reload.h"
#include "lua/script.h"
#include "services/list.h"
#include "base/util.h"
#include "worker/worker.h"

#define DEFAULT_BACKEND "sqlite:jobrunner.db"
#define DEFAULT_SCRIPTS "scripts"

int
jr_cmd_die(int status, const char *msg)
{
    fprintf(stderr, "jobrunner: %s\n", msg);
    return status;
}

int
jr_cmd_usage(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "jobrunner: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try 'jobrunner --help')\n");
    return JR_EXIT_USAGE;
}

int
jr_cmd_once(const char *cmd, const char *opt, char **argv, int i)
{
    int k;

    for (k = 0; k < i; k++)
        if (strcmp(argv[k], opt) == 0) {
            jr_cmd_usage("%s: option '%s' given twice (give it once)", cmd,
                         opt);
            return -1;
        }
    return 0;
}

/* Defaults, then the config file, then the command line. */
int
jr_cmd_config(jr_cli *cli, jr_config *c)
{
    jr_err err;

    jr_config_defaults(c);
    if (jr_config_load(c, cli->config, NULL, &err) < 0)
        return jr_cmd_die(JR_EXIT_CONFIG, err.msg);
    if ((cli->backend && jr_config_set(&c->backend, cli->backend, &err) < 0) ||
        (!c->backend && jr_config_set(&c->backend, DEFAULT_BACKEND, &err) < 0) ||
        (cli->scripts && jr_config_set(&c->scripts, cli->scripts, &err) < 0) ||
        (!c->scripts && jr_config_set(&c->scripts, DEFAULT_SCRIPTS, &err) < 0))
        return jr_cmd_die(JR_EXIT_FAIL, err.msg);
    jr_log_setup(c->log_level, c->log_json, "master");
    return 0;
}

static int
open_db(jr_config *c, jr_db *db, int migrate)
{
    jr_backend_opts o;
    jr_err err;

    jr_dbopts_fill(&o, c, JR_DBOPTS_PRODUCER);
    if (jr_db_open(db, c->backend, &o, &err) < 0 ||
        (migrate && db->ops->migrate(db->b, &err) < 0)) {
        jr_db_close(db);
        return jr_cmd_die(err.code == JR_EUSAGE ? JR_EXIT_USAGE : JR_EXIT_FAIL,
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
                           c->sync_normal, reader != 0,
                           reader != 1 ? c->key_file : NULL};
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

int
jr_cmd_client(jr_config *c, jr_client **client)
{
    return open_as(c, client, 0);
}

int
jr_cmd_reader_keyed(jr_config *c, jr_client **client)
{
    return open_as(c, client, 2);
}

int
jr_cmd_reader(jr_config *c, jr_client **client)
{
    return open_as(c, client, 1);
}

int
jr_cmd_open_reader(const jr_config *c, jr_db *db, int quiet)
{
    jr_backend_opts o;
    jr_err err;

    jr_dbopts_fill(&o, c, JR_DBOPTS_READER);
    if (jr_db_open(db, c->backend, &o, &err) == 0 &&
        db->ops->migrate(db->b, &err) == 0)
        return 0;
    jr_db_close(db);
    if (err.code == JR_ENOTFOUND && quiet)
        return JR_EXIT_NODB;
    return jr_cmd_die(err.code == JR_ENOTFOUND ? JR_EXIT_NODB :
                      err.code == JR_EUSAGE ? JR_EXIT_USAGE : JR_EXIT_FAIL,
                      err.msg);
}

int
jr_cmd_client_fail(jr_client *client)
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
    int rc = jr_cmd_config(cli, c);

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
    const char *serve = NULL, *http = NULL;
    jr_config c;
    jr_err err;
    int rc;

    while (cli->argc > 0 && (strcmp(cli->argv[0], "--queues") == 0 ||
                             strcmp(cli->argv[0], "--http") == 0)) {
        const char **slot = cli->argv[0][2] == 'q' ? &serve : &http;
        if (cli->argc < 2)
            return jr_cmd_usage("run: option '%s' needs a value",
                                cli->argv[0]);
        if (*slot != NULL)
            return jr_cmd_usage("run: option '%s' given twice (give it "
                                "once)", cli->argv[0]);
        *slot = cli->argv[1];
        cli->argc -= 2;
        cli->argv += 2;
    }
    if (cli->argc > 0)
        return jr_cmd_usage("run takes no arguments but --queues LIST and "
                            "--http ADDR, got '%s'", cli->argv[0]);
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if (http != NULL && jr_config_set(&c.http_listen, http, &err) < 0) {
        jr_config_free(&c);
        return jr_cmd_die(JR_EXIT_FAIL, err.msg);
    }
    if (serve && jr_queues_parse_serve(&c.queues, serve, &err) < 0) {
        jr_config_free(&c);
        return jr_cmd_die(JR_EXIT_USAGE, err.msg);
    }
    /* the workers read it again; a bad one stops the start here */
    if (c.key_file != NULL &&
        (c.keys = jr_keyring_load(c.key_file, &err)) == NULL) {
        jr_config_free(&c);
        return jr_cmd_die(JR_EXIT_CONFIG, err.msg);
    }
    rc = jr_master_run(&c, cli->self, jr_services);
    jr_config_free(&c);
    return rc;
}

int
jr_cmd_worker(jr_cli *cli)
{
    int fd;

    if (cli->argc != 1 && cli->argc != 2)
        return jr_cmd_die(JR_EXIT_USAGE, "__worker is started by the runner");
    fd = atoi(cli->argv[0]);
    /* "3:4": the handlers' output goes to descriptor 4 */
    if (strchr(cli->argv[0], ':') != NULL &&
        jr_worker_output(atoi(strchr(cli->argv[0], ':') + 1)) < 0)
        return jr_cmd_die(JR_EXIT_FAIL, "worker: cannot set up handler output");
    /* the settings come from the master's first frame, not a file */
    /* a second argument: the descriptor of the page shared with the
     * master (worker.h) */
    return jr_worker_main(fd, cli->argc == 2 ? atoi(cli->argv[1]) : -1);
}

/* The handlers that load from the scripts directory, as the runner would
 * load them (a file with an error is not a handler). */
static int
load_handlers(const char *scripts, lua_State **L, jr_scripts *s,
              jr_jobctx *ctx, jr_err *err)
{
    memset(s, 0, sizeof *s);
    if ((*L = jr_luabridge_state(scripts, err)) == NULL)
        return -1;
    if (jr_jrlib_open(*L, ctx, err) < 0 ||
        jr_scripts_load(*L, scripts, s, err) < 0) {
        lua_close(*L);
        *L = NULL;
        return -1;
    }
    return 0;
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
        return jr_cmd_usage("reload takes no arguments, got '%s'",
                           cli->argv[0]);
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    jr_pidfile_path(&c, path, sizeof path);
    jr_config_free(&c);
    if ((pid = jr_pidfile_read(path, &err)) < 0)
        return jr_cmd_die(JR_EXIT_FAIL, err.msg);
    if (kill((pid_t)pid, SIGHUP) < 0)
        return jr_cmd_die(JR_EXIT_FAIL, "cannot signal the runner");
    printf("asked runner %ld to reload its handlers (its log says how it "
           "went)\n", pid);
    return JR_EXIT_OK;
}

int
jr_cmd_migrate(jr_cli *cli)
{
    jr_config c;
    jr_db db;
    jr_err err;
    char url[512];
    int rc;

    if (cli->argc > 0)
        return jr_cmd_usage("migrate takes no arguments, got '%s'",
                           cli->argv[0]);
    if ((rc = setup(cli, &c, &db)) != 0)
        return rc;
    /* the limits' key paths, for producers (as a runner's start does) */
    if (db.ops->limit_paths(db.b, c.limits.l, c.limits.n, &err) < 0)
        return finish(&c, &db, jr_cmd_die(JR_EXIT_FAIL, err.msg));
    jr_db_cost_warn(&db);
    jr_url_mask(c.backend, url, sizeof url);
    printf("schema of %s is up to date\n", url);
    return finish(&c, &db, JR_EXIT_OK);
}

/* What `run` refuses at its start and `check` can tell without opening
 * the database: a backend URL no engine takes (or SQLite's with no
 * path), a handler_output file that cannot be written. 0, or -1 with err
 * set. */
static int
check_start(const jr_config *c, jr_err *err)
{
    const char *arg, *v = c->handler_output;
    char url[512], dir[4096], *slash;
    const jr_backend_ops *ops;

    if ((ops = jr_url_parse(c->backend, &arg, err)) == NULL)
        return -1;
    if (ops == &jr_sqlite_ops && *arg == '\0') {
        jr_url_mask(c->backend, url, sizeof url);
        return jr_fail(err, JR_ECONFIG, "backend '%s': empty database "
                       "path", url);
    }
    if (v == NULL || strcmp(v, "log") == 0 || strcmp(v, "inherit") == 0)
        return 0;
    if (access(v, F_OK) == 0) {
        if (access(v, W_OK) < 0)
            return jr_fail_errno(err, JR_ECONFIG, errno, "handler_output: "
                                 "cannot write '%s'", v);
        return 0;
    }
    snprintf(dir, sizeof dir, "%s", v);
    if ((slash = strrchr(dir, '/')) == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (access(dir, W_OK | X_OK) < 0)
        return jr_fail_errno(err, JR_ECONFIG, errno, "handler_output: "
                             "cannot create '%s' in '%s'", v, dir);
    return 0;
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
        return jr_cmd_usage("check takes no arguments, got '%s'",
                           cli->argv[0]);
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if (check_start(&c, &err) < 0) {
        jr_config_free(&c);
        return jr_cmd_die(JR_EXIT_CONFIG, err.msg);
    }
    if (c.key_file != NULL &&
        (c.keys = jr_keyring_load(c.key_file, &err)) == NULL) {
        jr_config_free(&c);
        return jr_cmd_die(JR_EXIT_CONFIG, err.msg);
    }
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
    jr_schedcmd_warn(&c, s.h, s.n);     /* a warning: the jobs wait */
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
