/* help.c - `jobrunner help [TOPIC]`: where the manual's chapter on a
 * topic is, in the source tree (docs/) and in the man page. Owns the list
 * of topics, one per chapter of docs/ (spec/docs_spec.lua checks that each
 * file exists), with a few other words that lead to them. Uses only stdio;
 * called by main.c. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const struct topic {
    const char *name;           /* the chapter: docs/NAME.md */
    const char *title;
    const char *about;
    const char *man;            /* sections of jobrunner(1), or NULL */
    const char *aliases;        /* other words for it, space-separated */
} topics[] = {
    {"handlers", "Handlers",
     "handler files, the job, the jobrunner module, writes that commit "
     "with the job, retries, the dead queue, steps and cursors, each "
     "attempt's logs",
     "DESCRIPTION, FILES (scripts/), COMMANDS (rerun, show --logs)",
     "handler retries retry dead backoff sql transaction steps step "
     "checkpoint rerun logs log print"},
    {"io", "I/O in handlers",
     "jobrunner.http, sleep, exec and all; inflight: many jobs per worker",
     "FILES (scripts/, jobrunner.lua)", "inflight http exec coroutine"},
    {"configuration", "Configuration",
     "jobrunner.lua, every key's range, hooks, the worker count",
     "FILES (jobrunner.lua)", "config hooks concurrency"},
    {"cli", "Command line",
     "every command and option, exit statuses, the push rules",
     "COMMANDS, OPTIONS, EXIT STATUS, ENVIRONMENT",
     "commands command options push"},
    {"queues", "Queues and control",
     "caps, serving, fairness, fair share between keys (a queue's or a "
     "job name's own), priority aging, "
     "pause and resume; sequences (one at a time per key, in push order); "
     "newer pushes replacing older (on_conflict); cancel, show, list, "
     "retention, progress",
     "COMMANDS (queue, fair set, sequences, cancel, show, list)",
     "queue control cancel show list retention progress sequences "
     "sequence fair tenant weight aging priority supersede conflict"},
    {"schedules", "Schedules and unique jobs",
     "recurring jobs (cron, every, time zones, catch-up, overlap, jitter); "
     "schedules managed at run time (add, set, remove, backfill); unique "
     "keys",
     "COMMANDS (schedules, schedule, push), FILES (jobrunner.lua)",
     "schedule cron recurring unique overlap jitter backfill"},
    {"workflows", "Workflows: dependencies, flows and batches",
     "jobs after others, flows pushed at once, batches and their callbacks",
     "COMMANDS (push, push-flow, batch)",
     "workflow flow flows batch batches after dependencies"},
    {"limits", "Limits per key",
     "concurrency caps and rates per job name, queue and key",
     "COMMANDS (limits), FILES (jobrunner.lua)", "limit rate rates"},
    {"http", "HTTP: metrics, dashboard, API",
     "the HTTP server, /metrics, the dashboard, the JSON API", "HTTP",
     "metrics api dashboard"},
    {"tracing", "Tracing",
     "OpenTelemetry spans per attempt over OTLP/HTTP, the trace context "
     "each producer gives, jobrunner.span",
     "TRACING, ENVIRONMENT (TRACEPARENT)",
     "trace traces opentelemetry otlp span spans traceparent"},
    {"producers", "Producers",
     "pushing from the CLI, C, Lua and SQL; installing the library",
     "FROM CODE AND SQL", "producer client library lua install"},
    {"storage", "Storage and PostgreSQL",
     "SQLite, the tables, many runners on PostgreSQL",
     "FILES, FROM CODE AND SQL, ENVIRONMENT",
     "sqlite postgres postgresql database sql"},
    {"operations", "Operations and reliability",
     "shutdown, leases, systemd, reload, encryption and its keys, what can "
     "go wrong, chaos",
     "SYSTEMD, HANDLER OUTPUT, COMMANDS (keys)",
     "systemd reload production monitoring grafana alerts prometheus "
     "encryption encrypted keys key rotation"},
    {"reliability", "Reliability",
     "power cuts, I/O errors and server crashes: the promises, the trades, "
     "make crash and its figures", NULL,
     "durability durable crash power fsync synchronous"},
    {"design", "Design",
     "processes and threads, where the code lives, where a new part goes",
     NULL, "architecture code"},
    {"performance", "Performance",
     "make bench, its latest figures and targets, what makes it fast",
     NULL, "bench benchmark"},
    {NULL, NULL, NULL, NULL, NULL}
};

/* 1 if word is one of the space-separated words of list. */
static int
has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    const char *p = list;

    while (n > 0 && (p = strstr(p, word)) != NULL) {
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
        p += n;
    }
    return 0;
}

static const struct topic *
find(const char *word)
{
    const struct topic *t;

    for (t = topics; t->name; t++)
        if (strcmp(t->name, word) == 0)
            return t;
    for (t = topics; t->name; t++)
        if (has_word(t->aliases, word))
            return t;
    return NULL;
}

static void
list(void)
{
    const struct topic *t;

    printf("usage: jobrunner help TOPIC\n\nThe manual's chapters are in "
           "docs/ of the source tree:\n\n");
    for (t = topics; t->name; t++)
        printf("  %-14s docs/%s.md: %s\n", t->name, t->name, t->about);
    printf("\nCommands and options: jobrunner --help, and man jobrunner.\n");
}

static void
show(const struct topic *t)
{
    printf("%s: %s\n  chapter:  docs/%s.md in the source tree\n", t->title,
           t->about, t->name);
    if (t->man)
        printf("  man page: man jobrunner, %s\n", t->man);
}

int
jr_cmd_help(int argc, char **argv)
{
    const struct topic *t;

    if (argc == 0 || (argc == 1 && (strcmp(argv[0], "-h") == 0 ||
                                    strcmp(argv[0], "--help") == 0))) {
        list();
        return JR_EXIT_OK;
    }
    if (argc > 1)
        return jr_cmd_usage("help: one topic at a time, got '%s' and '%s'",
                            argv[0], argv[1]);
    t = find(argv[0]);
    if (t == NULL) {
        fprintf(stderr, "jobrunner: help: no topic '%s' (try 'jobrunner "
                "help' for the list)\n", argv[0]);
        return JR_EXIT_USAGE;
    }
    show(t);
    return JR_EXIT_OK;
}
