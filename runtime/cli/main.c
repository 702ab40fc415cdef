/* main.c - argv only: common options, then the subcommand from a table.
 * A password given with --backend is overwritten in argv at once, so ps
 * does not show it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/job.h"
#include "cli/commands.h"
#include "cli/schedcmd.h"
#include "url.h"

static const struct command {
    const char   *name;
    jr_command_fn fn;
    const char   *usage;
    int           names;        /* takes names or ids, after "--" too */
} commands[] = {
    {"run", jr_cmd_run, "run [--queues Q1,Q2...] [--http ADDR]\n"
     "                           run the runner until SIGTERM/SIGINT; --queues:\n"
     "                           serve only these queues (default: serve_queues, else all);\n"
     "                           --http: serve /metrics, the dashboard and /api/ on ADDR\n"
     "                           (e.g. 127.0.0.1:8089; overrides http.listen)", 0},
    {"push", jr_cmd_push, "push NAME [JSON] [--in DURATION | --at TIME] [--priority N]\n"
     "       [--queue Q] [--max-retries N] [--key K] [--result-ttl DURATION]\n"
     "       [--cost N]\n"
     "       [--unique-key K [--unique-for DURATION]]\n"
     "       [--after ID[,ID...] [--on-parent-failure cancel|run|dead]] [--batch ID]\n"
     "       [--sequence KEY [--on-failure block|skip|dead]]\n"
     "       [--expires-in DURATION | --expires-at TIME] [--deadline DURATION]\n"
     "       [--on-conflict keep|replace|cancel_running]\n"
     "                           queue a job; prints its id (with --unique-key, or\n"
     "                           --on-conflict: the id and new, duplicate, replaced\n"
     "                           or superseded); --on-conflict (with --unique-key or\n"
     "                           --sequence): replace a pending job of the key, also\n"
     "                           cancel its running one; --expires-*: not started by\n"
     "                           then, it ends expired; --deadline: no retry past\n"
     "                           that long after its first start; TRACEPARENT and\n"
     "                           TRACESTATE in the environment: its trace context", 1},
    {"push-flow", jr_cmd_push_flow, "push-flow FILE|- [--json]\n"
     "                           push a flow (docs/workflows.md): its jobs and\n"
     "                           their after links in one transaction; prints each\n"
     "                           job's ref and id (and its batch); TRACEPARENT and\n"
     "                           TRACESTATE: the trace context of its jobs", 0},
    {"batch", jr_cmd_batch, "batch show ID [--json]   a batch: its counts per state, callbacks and\n"
     "                           members", 0},
    {"stats", jr_cmd_stats, "stats [--json]           counts per state and job name", 0},
    {"dead", jr_cmd_dead, "dead [list] [--json] [--limit N]\n"
     "  dead retry ID... | --all\n"
     "  dead purge [--older-than DURATION]\n"
     "                           the dead queue (list: limit 100; 0: all)", 1},
    {"queue", jr_cmd_queue, "queue list [--json]      each queue: paused, ready, scheduled, running, dead,\n"
     "                           and this config's concurrency for it\n"
     "  queue pause NAME | queue resume NAME\n"
     "                           no runner starts the queue's jobs until resumed", 1},
    {"cancel", jr_cmd_cancel, "cancel ID...             cancel jobs: queued ones never run, running ones\n"
     "                           are stopped (exit 5 if an id is unknown)\n"
     "  cancel --batch ID        cancel a batch's members that have not ended", 1},
    {"rerun", jr_cmd_rerun, "rerun ID [--from-step NAME] [--payload JSON]\n"
     "                           run a finished or queued job again: its steps from\n"
     "                           NAME on run again (all without it), those before\n"
     "                           replay (exit 5 if there is no such job)", 1},
    {"signal", jr_cmd_signal, "signal ID NAME [JSON]    send signal NAME (and its payload) to the job's\n"
     "                           wait_signal: a job waiting for it is ready at once,\n"
     "                           else it is kept; refused for a finished job, a\n"
     "                           signal sent already or timed out (exit 5 no such job)", 1},
    {"show", jr_cmd_show, "show ID [--json]         every field of one job, payload included\n"
     "                           (exit 5 if there is no such job)\n"
     "  show ID --logs [--attempt N] [--json]\n"
     "                           each attempt's kept logs: jobrunner.log lines and\n"
     "                           what the handler printed (log.attempt_max a run)", 1},
    {"wait", jr_cmd_wait, "wait ID... [--timeout DURATION] [--json]\n"
     "                           wait until the jobs end; prints each one's state and\n"
     "                           result; exit 0 all completed, 1 one dead or cancelled,\n"
     "                           6 one gone (no row: outcome unknown), 7 database\n"
     "                           lost, 124 timed out, 5 no such job", 1},
    {"list", jr_cmd_list, "list [--state S] [--name N] [--queue Q] [--limit N] [--json]\n"
     "                           jobs newest first, without payload (limit 100;\n"
     "                           0: all); S: STATES", 0},
    {"limits", jr_cmd_limits, "limits [--json]          each limit of the config: its caps and rates, jobs\n"
     "                           running and waiting, tokens, keys most waiting", 0},
    {"sequences", jr_cmd_sequences, "sequences [--blocked] [--limit N] [--json]\n"
     "                           each sequence with jobs not ended or blocked: its\n"
     "                           head job, state, jobs and whether it is blocked\n"
     "  sequences skip KEY | sequences unblock KEY\n"
     "                           a blocked sequence: skip its dead job (the next\n"
     "                           runs), or queue it again in its place", 0},
    {"fair", jr_cmd_fair, "fair set QUEUE KEY WEIGHT\n"
     "                           a fair queue's key weight (1 to 1000) for every\n"
     "                           runner, over the config's\n"
     "  fair set --name NAME KEY WEIGHT\n"
     "                           a key's weight in job name NAME's own fair\n"
     "                           scope, over its handler's weights", 0},
    {"keys", jr_cmd_keys, "keys new FILE            add a fresh key at the top of the key file (made\n"
     "                           mode 0600): it encrypts, the others still decrypt\n"
     "  keys status [--batch N]  values per key id and in clear: when an old key\n"
     "                           may be removed from the key file\n"
     "  keys rotate [--plain] [--batch N]\n"
     "                           encrypt again with the first key what an older one\n"
     "                           encrypted (--plain: values in clear too), N jobs a\n"
     "                           transaction, while runners and producers go on", 0},
    {"check", jr_cmd_check, "check                    load config and every handler, report errors", 0},
    {"migrate", jr_cmd_migrate, "migrate                  create or upgrade the database schema", 0},
    {"reload", jr_cmd_reload, "reload                   make the running runner reload its handlers (SIGHUP)", 0},
    {"schedules", jr_cmd_schedules, "schedules [--json]       each schedule (config `schedules`): its zone, last\n"
     "                           fire, and next three fires in its zone and UTC", 0},
    {"schedule", jr_cmd_schedule, "schedule pause NAME | schedule resume NAME\n"
     "                           no runner fires the schedule until resumed; a resume\n"
     "                           skips the paused time (no catch-up of it)\n"
     "  schedule fire NAME [--at TIME]\n"
     "                           fire it now (or at TIME) through the runners' fire\n"
     "                           path: one job per instant, whoever asks\n"
     "  schedule add NAME --cron EXPR|--every DUR [--job J] [--payload JSON]\n"
     "      [--queue Q] [--priority N] [--max-retries N] [--catch-up last|all|none]\n"
     "      [--timezone TZ] [--overlap skip|allow|cancel_previous] [--jitter DUR]\n"
     "      [--start-at TIME] [--end-at TIME]\n"
     "                           a schedule kept in the database beside the config's,\n"
     "                           followed by every runner within a second\n"
     "  schedule set NAME OPTIONS [--unset FIELD] | schedule remove NAME\n"
     "                           change or remove one (the config's are read-only)\n"
     "  schedule backfill NAME FROM TO\n"
     "                           push each missed fire of the window once", 0},
    {"__worker", jr_cmd_worker, NULL, 1},
    {NULL, NULL, NULL, 0}
};

/* Writes usage text u, its STATES as the names of the job states (job.h's
 * one list), four to a line. */
static void
put_usage(FILE *f, const char *u)
{
    const char *at = strstr(u, "STATES");
    int s;

    if (at == NULL) {
        fputs(u, f);
        return;
    }
    fwrite(u, 1, (size_t)(at - u), f);
    for (s = 0; s < JR_NSTATES; s++)
        fprintf(f, "%s%s", s == 0 ? "" : s % 4 ? " " :
                "\n                           ", jr_state_name(s));
    fputs(at + strlen("STATES"), f);
}

static void
usage(FILE *f)
{
    const struct command *c;

    fprintf(f, "usage: jobrunner [-c FILE] [--backend URL | --backend-file "
            "FILE]\n                 [--scripts DIR] COMMAND [ARGS]\n\n"
            "commands:\n");
    for (c = commands; c->name; c++)
        if (c->usage) {
            fputs("  ", f);
            put_usage(f, c->usage);
            fputc('\n', f);
        }
    fprintf(f, "\noptions:\n"
            "  -c, --config FILE   config file (default ./jobrunner.lua if "
            "present)\n"
            "  --backend URL       sqlite:PATH or postgresql://... (default "
            "sqlite:jobrunner.db)\n"
            "  --backend-file FILE read the backend URL from FILE (its first "
            "line)\n"
            "  --scripts DIR       handler directory (default ./scripts)\n"
            "  -h, --help          this help; after a command, its "
            "usage only (it does\n"
            "                      nothing else)\n"
            "  --version           print the version\n"
            "\nEach option is given at most once. A job or queue name "
            "starting with '-'\ngoes after '--', which ends the options "
            "(push -- -x).\n"
            "\nexit status:\n"
            "  0  success\n"
            "  1  runtime or database failure\n"
            "  2  bad command line or bad input (name, JSON, duration)\n"
            "  3  errors in the config file or in handlers (check)\n"
            "  4  no database (stats, list, show, limits, dead, queue, "
            "cancel,\n     signal: they create none; push, run and migrate "
            "do)\n"
            "  5  no job with that id (show, wait, signal; cancel: any of its ids)\n"
            "  6  wait: a job is gone (no row has its id: ended and deleted, its\n"
            "     outcome unknown; wait exits 1 when one ended dead or cancelled)\n"
            "  7  wait: the database could not be read again for 60 s after its\n"
            "     connection was lost\n"
            "  124 wait: the timeout passed before every job ended\n"
            "\nenvironment:\n"
            "  JOBRUNNER_BACKEND   the backend URL when neither --backend nor "
            "--backend-file\n"
            "                      is given; it beats the config file's "
            "'backend'\n"
            "  NOTIFY_SOCKET       run: systemd's notify socket (READY=1 "
            "once handlers\n"
            "                      loaded, RELOADING=1, STOPPING=1; "
            "WATCHDOG=1 every half\n"
            "                      of WATCHDOG_USEC)\n"
            "\nA PostgreSQL password on the command line is overwritten in "
            "the process's\narguments at start, but another user may see it "
            "before that: give it in\n--backend-file, JOBRUNNER_BACKEND, the "
            "config file or libpq's PGPASSFILE.\n"
            "\nthe manual:\n"
            "  jobrunner help [TOPIC]\n"
            "                      where its chapter on TOPIC is (docs/ in "
            "the source tree);\n"
            "                      without TOPIC, the list of chapters\n");
}

/* Keeps a copy of the --backend value and overwrites the argument itself
 * with its masked form, so ps and /proc/PID/cmdline stop showing a
 * password. Returns the copy (never freed), or NULL if out of memory. */
static const char *
hide_backend(char *arg)
{
    char masked[512];
    size_t n = strlen(arg), m;
    char *copy = strdup(arg);

    if (copy == NULL)
        return NULL;
    jr_url_mask(arg, masked, sizeof masked);
    if (strcmp(masked, arg) != 0) {
        m = strlen(masked) < n ? strlen(masked) : n;
        memset(arg, 0, n);
        memcpy(arg, masked, m);
    }
    return copy;
}

/* The first line of file, without trailing blanks: a backend URL kept out
 * of argv. Returns a new string (never freed), or NULL with a message. */
static const char *
backend_file(const char *file)
{
    char line[4096];
    size_t n;
    FILE *f = fopen(file, "r");

    if (f == NULL) {
        fprintf(stderr, "jobrunner: cannot read --backend-file '%s': %s\n",
                file, strerror(errno));
        return NULL;
    }
    if (fgets(line, sizeof line, f) == NULL)
        line[0] = '\0';
    fclose(f);
    n = strcspn(line, "\r\n");
    while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t'))
        n--;
    line[n] = '\0';
    if (n == 0) {
        fprintf(stderr, "jobrunner: --backend-file '%s': its first line is "
                "empty (expected a backend URL)\n", file);
        return NULL;
    }
    return strdup(line);
}

/* A runner started with stdin, stdout or stderr closed would hand those
 * numbers to its database or its workers' sockets, and a log line would
 * land there: give them /dev/null first. */
static void
std_fds(void)
{
    int fd;

    for (fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF &&
            open("/dev/null", O_RDWR) < 0)
            exit(JR_EXIT_FAIL);
}

/* Takes the common options out of argv wherever they stand; the rest stay
 * in order. Returns -1 on a missing value. */
static int
common_options(int *argc, char **argv, jr_cli *cli)
{
    int i, n = 0;
    const char *file = NULL;

    for (i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--") == 0) {     /* the rest are arguments */
            while (i < *argc)
                argv[++n] = argv[i++];
            break;
        }
        if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0)
            slot = &cli->config;
        else if (strcmp(a, "--backend") == 0)
            slot = &cli->backend;
        else if (strcmp(a, "--backend-file") == 0)
            slot = &file;
        else if (strcmp(a, "--scripts") == 0)
            slot = &cli->scripts;
        if (slot == NULL) {
            argv[++n] = argv[i];
            continue;
        }
        if (i + 1 >= *argc) {
            fprintf(stderr, "jobrunner: option '%s' needs a value\n", a);
            return -1;
        }
        if (*slot != NULL) {
            fprintf(stderr, "jobrunner: option '%s' given twice (give it "
                    "once)\n", a);
            return -1;
        }
        *slot = argv[++i];
        if (slot == &cli->backend && (*slot = hide_backend(argv[i])) == NULL)
            return -1;
    }
    *argc = n + 1;
    if (file != NULL && cli->backend != NULL) {
        fprintf(stderr, "jobrunner: give --backend or --backend-file, not "
                "both\n");
        return -1;
    }
    if (file != NULL && (cli->backend = backend_file(file)) == NULL)
        return -1;
    if (cli->backend == NULL && getenv("JOBRUNNER_BACKEND") != NULL &&
        *getenv("JOBRUNNER_BACKEND") != '\0')
        cli->backend = getenv("JOBRUNNER_BACKEND");
    return 0;
}

/* Gives cli the command's arguments without their first "--": optend is
 * where the arguments after it start (argc if there is none). */
static void
command_args(jr_cli *cli, int argc, char **argv)
{
    int i;

    cli->argc = argc;
    cli->argv = argv;
    cli->optend = argc;
    for (i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
        ;
    if (i == argc)
        return;
    memmove(argv + i, argv + i + 1, (size_t)(argc - i - 1) * sizeof *argv);
    cli->argc = argc - 1;
    cli->optend = i;
}

/* -h or --help before "--": the command's usage on stdout, and nothing
 * done. Returns 1 if asked. */
static int
command_help(const struct command *c, const jr_cli *cli)
{
    int i;

    for (i = 0; i < cli->optend; i++)
        if (strcmp(cli->argv[i], "-h") == 0 ||
            strcmp(cli->argv[i], "--help") == 0) {
            printf("usage: jobrunner [common options] %s ...\n\n  ",
                   c->name);
            put_usage(stdout, c->usage);
            printf("\n\nA name starting with '-' goes after '--'; each "
                   "option at most once.\nThe common options and the exit "
                   "statuses: jobrunner --help\n");
            return 1;
        }
    return 0;
}

/* Runs command c on its arguments argv[0..argc). */
static int
command_run(const struct command *c, jr_cli *cli, int argc, char **argv)
{
    if (c->usage == NULL) {             /* __worker: the runner's own */
        cli->argc = argc;
        cli->argv = argv;
        cli->optend = argc;
        return c->fn(cli);
    }
    command_args(cli, argc, argv);
    if (command_help(c, cli))
        return JR_EXIT_OK;
    if (!c->names && cli->optend < cli->argc) {
        fprintf(stderr, "jobrunner: %s takes no names or ids, got '%s' "
                "after '--' (try 'jobrunner %s --help')\n", c->name,
                cli->argv[cli->optend], c->name);
        return JR_EXIT_USAGE;
    }
    return c->fn(cli);
}

int
main(int argc, char **argv)
{
    const struct command *c;
    jr_cli cli = {0};

    std_fds();
    cli.self = "/proc/self/exe";
    if (access(cli.self, X_OK) != 0)
        cli.self = argv[0];
    if (common_options(&argc, argv, &cli) < 0)
        return JR_EXIT_USAGE;
    if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? JR_EXIT_USAGE : JR_EXIT_OK;
    }
    if (strcmp(argv[1], "help") == 0)
        return jr_cmd_help(argc - 2, argv + 2);
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("jobrunner %s\n", JR_VERSION);
        return JR_EXIT_OK;
    }
    for (c = commands; c->name; c++)
        if (strcmp(c->name, argv[1]) == 0)
            return command_run(c, &cli, argc - 2, argv + 2);
    fprintf(stderr, "jobrunner: unknown command '%s' (try 'jobrunner "
            "--help')\n", argv[1]);
    return JR_EXIT_USAGE;
}
