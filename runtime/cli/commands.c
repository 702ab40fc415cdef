/* commands.c - the subcommands: each parses its own arguments, loads the
 * config, opens the backend when it needs one, and says what went wrong in
 * one line on stderr. */
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
#include "config/config.h"
#include "client/jobrunner.h"
#include "lua/jrlib.h"
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

int
jr_cmd_client(jr_config *c, jr_client **client)
{
    return open_as(c, client, 0);
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

/* The options of push, as keys.c's key table: each setter parses its
 * value into the push. A setter returns 0, -1 with err set (an invalid
 * value), or BOTH_GIVEN when the option excludes one already given. */
#define BOTH_GIVEN (-2)

typedef int (*push_setter)(jr_push *p, const char *val, jr_err *err);

static int
set_in(jr_push *p, const char *val, jr_err *err)
{
    if (p->run_at > 0)
        return BOTH_GIVEN;
    return jr_parse_duration(val, "--in", &p->run_in, err);
}

static int
set_at(jr_push *p, const char *val, jr_err *err)
{
    if (p->run_in > 0)
        return BOTH_GIVEN;
    return jr_parse_time(val, "--at", &p->run_at, err);
}

static int
set_priority(jr_push *p, const char *val, jr_err *err)
{
    long v;

    if (jr_parse_int(val, "--priority", -1000000, 1000000, &v, err) < 0)
        return -1;
    p->priority = (int)v;
    return 0;
}

static int
set_max_retries(jr_push *p, const char *val, jr_err *err)
{
    long v;

    if (jr_parse_int(val, "--max-retries", 0, 1000000, &v, err) < 0)
        return -1;
    p->max_retries = (int)v;
    return 0;
}

static int
set_queue(jr_push *p, const char *val, jr_err *err)
{
    (void)err;
    p->queue = val;             /* checked with the push (jr_push_check) */
    return 0;
}

static int
set_unique_key(jr_push *p, const char *val, jr_err *err)
{
    (void)err;
    p->unique_key = val;        /* checked with the push (jr_push_check) */
    return 0;
}

static int
set_unique_for(jr_push *p, const char *val, jr_err *err)
{
    return jr_parse_duration(val, "--unique-for", &p->unique_for, err);
}

static int
set_result_ttl(jr_push *p, const char *val, jr_err *err)
{
    return jr_parse_duration(val, "--result-ttl", &p->result_ttl, err);
}

static int
set_on_conflict(jr_push *p, const char *val, jr_err *err)
{
    if (strcmp(val, "keep") == 0 || strcmp(val, "replace") == 0) {
        p->on_conflict = val[0] == 'r' ? JR_CONFLICT_REPLACE :
                         JR_CONFLICT_KEEP;
        return 0;
    }
    return jr_fail(err, JR_EUSAGE, "invalid --on-conflict '%s': expected "
                   "keep or replace", val);
}

static int
set_key(jr_push *p, const char *val, jr_err *err)
{
    (void)err;
    p->key = val;               /* checked with the push (jr_push_check) */
    return 0;
}

/* --after ID[,ID...]: the parents (the CLI pushes one job a run) */
static int64_t after_ids[JR_AFTER_MAX];

static int
set_after(jr_push *p, const char *val, jr_err *err)
{
    const char *at = val;
    char *end;
    long long v;

    p->after = after_ids;
    while (*at != '\0') {
        v = strtoll(at, &end, 10);
        if (end == at || v <= 0 || (*end != ',' && *end != '\0'))
            return jr_fail(err, JR_EUSAGE, "invalid --after '%s': expected "
                           "job ids separated by commas", val);
        if (p->nafter == JR_AFTER_MAX)
            return jr_fail(err, JR_EUSAGE, "--after: at most %d ids",
                           JR_AFTER_MAX);
        after_ids[p->nafter++] = v;
        at = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static int
set_on_parent_failure(jr_push *p, const char *val, jr_err *err)
{
    if ((p->on_parent_failure = jr_opf_parse(val)) < 0)
        return jr_fail(err, JR_EUSAGE, "invalid --on-parent-failure '%s': "
                       "expected cancel, run or dead", val);
    return 0;
}

static int
set_batch(jr_push *p, const char *val, jr_err *err)
{
    long v;

    if (jr_parse_int(val, "--batch", 1, LONG_MAX, &v, err) < 0)
        return -1;
    p->batch = v;
    return 0;
}

static const struct push_option {
    const char  *name;
    int          takes;         /* takes a value: the next argument */
    push_setter  set;
} push_options[] = {
    {"--in",          1, set_in},
    {"--at",          1, set_at},
    {"--priority",    1, set_priority},
    {"--queue",       1, set_queue},
    {"--max-retries", 1, set_max_retries},
    {"--unique-key",  1, set_unique_key},
    {"--unique-for",  1, set_unique_for},
    {"--on-conflict", 1, set_on_conflict},
    {"--key",         1, set_key},
    {"--result-ttl",  1, set_result_ttl},
    {"--after",       1, set_after},
    {"--on-parent-failure", 1, set_on_parent_failure},
    {"--batch",       1, set_batch},
    {NULL, 0, NULL}
};

/* Parses push's arguments (NAME [JSON] and the options) into p, whose
 * strings then borrow argv. Returns 0, or the exit status after saying
 * what is wrong. */
static int
push_args(jr_cli *cli, jr_push *p)
{
    const struct push_option *o;
    unsigned given = 0;         /* bit k: push_options[k] seen */
    jr_err err;
    int i, rc, conflict = 0;

    for (i = 0; i < cli->argc; i++) {
        const char *a = cli->argv[i];
        for (o = push_options; o->name && (i >= cli->optend ||
                                           strcmp(o->name, a) != 0); o++)
            ;
        if (o->name == NULL) {
            if (i < cli->optend && a[0] == '-' && a[1] != '\0')
                return jr_cmd_usage("push: unknown option '%s' (a job name "
                                    "starting with '-' goes after '--')", a);
            if (p->name != NULL && p->payload != NULL)
                return jr_cmd_usage("push: unexpected argument '%s'", a);
            *(p->name == NULL ? &p->name : &p->payload) = a;
            continue;
        }
        if (given & (1u << (o - push_options)))
            return jr_cmd_usage("push: option '%s' given twice (give it "
                                "once)", a);
        given |= 1u << (o - push_options);
        conflict |= o->set == set_on_conflict;
        if (o->takes && i + 1 >= cli->argc)
            return jr_cmd_usage("push: option '%s' needs a value", a);
        rc = o->set(p, o->takes ? cli->argv[i + 1] : NULL, &err);
        if (rc == BOTH_GIVEN)
            return jr_cmd_usage("push: give --in or --at, not both");
        if (rc < 0)
            return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        i += o->takes;
    }
    if (p->name == NULL)
        return jr_cmd_usage("push: missing the job %s", "NAME");
    if (conflict && p->unique_key == NULL)  /* keep too: as if not given */
        return jr_conflict_alone(p->name, &err),
               jr_cmd_die(JR_EXIT_USAGE, err.msg);
    return 0;
}

/* Checks p (its JSON, the config's max_payload) before anything is
 * written. Returns 0, or the exit status after saying why. */
static int
push_check(const jr_config *c, const jr_push *p)
{
    jr_err err;

    if (jr_push_check(p, c->max_payload, &err) < 0)
        return jr_cmd_die(JR_EXIT_USAGE, err.msg);
    return 0;
}

/* Warns on stderr when the scripts directory this command sees exists and
 * has no handler for name: its jobs wait until one is loaded (a deploy may
 * bring it), for ever if the name is misspelt. No directory here: a
 * producer on another machine, no warning. */
static void
warn_unhandled(const jr_config *c, const char *name)
{
    jr_scripts s;
    jr_err err;
    int i;

    if (jr_scripts_names(c->scripts, &s, &err) < 0)
        return;
    for (i = 0; i < s.n && strcmp(s.h[i].name, name) != 0; i++)
        ;
    if (i == s.n)
        fprintf(stderr, "jobrunner: warning: job '%s': no handler for it in "
                "%s; it waits until one is loaded ('jobrunner stats' lists "
                "the names no handler takes)\n", name, c->scripts);
    jr_scripts_free(&s);
}

/* Prints the pushed job's id (with a unique key: and new, duplicate or
 * replaced), then the warning of a name no handler here takes. */
static void
push_said(const jr_config *c, const jr_push *p, int64_t id, int outcome)
{
    if (p->unique_key == NULL)
        printf("%lld\n", (long long)id);
    else
        printf("%lld %s\n", (long long)id, outcome == JR_CLIENT_PUSHED ?
               "new" : outcome == JR_CLIENT_REPLACED ? "replaced" :
               "duplicate");
    fflush(stdout);
    warn_unhandled(c, p->name);
}

int
jr_cmd_push(jr_cli *cli)
{
    jr_push p = {.max_retries = -1};
    jr_client_opts opts = JR_CLIENT_OPTS_INIT;
    jr_client_unique u;
    jr_client *client;
    jr_config c;
    int64_t id;
    int rc, outcome;

    if ((rc = push_args(cli, &p)) != 0 || (rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = push_check(&c, &p)) != 0 ||
        (rc = jr_cmd_client(&c, &client)) != 0) {
        jr_config_free(&c);
        return rc;
    }
    opts.run_at = p.run_at;
    opts.run_in = p.run_in;
    opts.priority = p.priority;
    opts.queue = p.queue;
    opts.max_retries = p.max_retries;
    opts.key = p.key;
    opts.result_ttl = p.result_ttl;
    u.key = p.unique_key;
    u.unique_for = p.unique_for;
    u.on_conflict = p.on_conflict;
    outcome = JR_CLIENT_PUSHED;
    if (p.nafter > 0 || p.batch != 0 || p.on_parent_failure != 0) {
        jr_client_after a = {p.after, (size_t)p.nafter, p.on_parent_failure,
                             p.batch};
        if (p.unique_key != NULL)
            rc = jr_cmd_usage("push: --unique-key cannot go with --after "
                              "or --batch");
        else if (jr_client_push_after(client, p.name, p.payload, &opts, &a,
                                      &id) != JR_CLIENT_OK)
            rc = jr_cmd_client_fail(client);
        else
            push_said(&c, &p, id, outcome);
    } else if (jr_client_push_unique(client, p.name, p.payload, &opts, &u,
                                     &id, &outcome) != JR_CLIENT_OK)
        rc = jr_cmd_client_fail(client);
    else
        push_said(&c, &p, id, outcome);
    jr_client_close(client);
    jr_config_free(&c);
    return rc;
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
        return jr_cmd_usage("check takes no arguments, got '%s'",
                           cli->argv[0]);
    if ((rc = jr_cmd_config(cli, &c)) != 0)
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
