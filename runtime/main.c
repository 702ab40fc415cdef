/* main.c - argv only: common options, then the subcommand from a table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

static const struct command {
    const char   *name;
    jr_command_fn fn;
    const char   *usage;
} commands[] = {
    {"run", jr_cmd_run, "run                      run the runner until SIGTERM/SIGINT"},
    {"push", jr_cmd_push, "push NAME [JSON] [--in DURATION | --at TIME] [--priority N]\n"
     "       [--queue Q] [--max-retries N]\n"
     "                           queue a job; prints its id"},
    {"stats", jr_cmd_stats, "stats [--json]           counts per state and job name"},
    {"dead", jr_cmd_dead, "dead [list] [--json] [--limit N]\n"
     "  dead retry ID... | --all\n"
     "  dead purge [--older-than DURATION]\n"
     "                           the dead queue"},
    {"check", jr_cmd_check, "check                    load config and every handler, report errors"},
    {"migrate", jr_cmd_migrate, "migrate                  create or upgrade the database schema"},
    {"reload", jr_cmd_reload, "reload                   make the running runner reload its handlers (SIGHUP)"},
    {"__worker", jr_cmd_worker, NULL},
    {NULL, NULL, NULL}
};

static void
usage(FILE *f)
{
    const struct command *c;

    fprintf(f, "usage: jobrunner [-c FILE] [--backend URL] [--scripts DIR] "
            "COMMAND [ARGS]\n\ncommands:\n");
    for (c = commands; c->name; c++)
        if (c->usage)
            fprintf(f, "  %s\n", c->usage);
    fprintf(f, "\noptions:\n"
            "  -c, --config FILE   config file (default ./jobrunner.lua if "
            "present)\n"
            "  --backend URL       sqlite:PATH or postgresql://... (default "
            "sqlite:jobrunner.db)\n"
            "  --scripts DIR       handler directory (default ./scripts)\n"
            "  -h, --help          this help\n"
            "  --version           print the version\n"
            "\nexit status:\n"
            "  0  success\n"
            "  1  runtime or database failure\n"
            "  2  bad command line or bad input (name, JSON, duration)\n"
            "  3  errors in the config file or in handlers (check)\n"
            "  4  no database (stats, dead list: they create none)\n");
}

/* Takes the common options out of argv wherever they stand; the rest stay
 * in order. Returns -1 on a missing value. */
static int
common_options(int *argc, char **argv, jr_cli *cli)
{
    int i, n = 0;

    for (i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0)
            slot = &cli->config;
        else if (strcmp(a, "--backend") == 0)
            slot = &cli->backend;
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
        *slot = argv[++i];
    }
    *argc = n + 1;
    return 0;
}

int
main(int argc, char **argv)
{
    const struct command *c;
    jr_cli cli = {0};

    cli.self = "/proc/self/exe";
    if (access(cli.self, X_OK) != 0)
        cli.self = argv[0];
    if (common_options(&argc, argv, &cli) < 0)
        return JR_EXIT_USAGE;
    if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? JR_EXIT_USAGE : JR_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("jobrunner %s\n", JR_VERSION);
        return JR_EXIT_OK;
    }
    for (c = commands; c->name; c++)
        if (strcmp(c->name, argv[1]) == 0) {
            cli.argc = argc - 2;
            cli.argv = argv + 2;
            return c->fn(&cli);
        }
    fprintf(stderr, "jobrunner: unknown command '%s' (try 'jobrunner "
            "--help')\n", argv[1]);
    return JR_EXIT_USAGE;
}
