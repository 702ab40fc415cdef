/* queuecmd.c - `jobrunner queue`: pause and resume a queue for every
 * runner, and list the queues with their counts and this config's
 * concurrency for each. Goes through the producer library, as every
 * command that only touches jobs does. Uses commands.h, jobrunner.h,
 * queues.h, util.h. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "config/config.h"
#include "base/job.h"
#include "client/jobrunner.h"
#include "config/queues.h"
#include "base/esc.h"
#include "base/util.h"

typedef struct list_out {
    const jr_queues *conf;
    int              json;
    int              n;
} list_out;

static void
list_json(const jr_client_queue *q, const jr_queue_conf *qc, int first)
{
    printf("%s{\"name\":", first ? "" : ",");
    jr_json_str(stdout, q->name);
    printf(",\"paused\":%s,\"ready\":%ld,\"scheduled\":%ld,\"running\":%ld,"
           "\"dead\":%ld,\"concurrency\":", q->paused ? "true" : "false",
           q->ready, q->scheduled, q->running, q->dead);
    if (qc != NULL)
        printf("%d}", qc->max);
    else
        printf("null}");
}

static int
list_one(const jr_client_queue *q, void *arg)
{
    list_out *o = arg;
    const jr_queue_conf *qc = jr_queues_find(o->conf, q->name);
    char conc[16] = "-", name[200];

    if (o->json) {
        list_json(q, qc, o->n == 0);
    } else {
        if (o->n == 0)
            printf("%-32s %-7s %9s %9s %9s %9s %11s\n", "QUEUE", "STATE",
                   "READY", "SCHEDULED", "RUNNING", "DEAD", "CONCURRENCY");
        if (qc != NULL)
            snprintf(conc, sizeof conc, "%d", qc->max);
        printf("%-32s %-7s %9ld %9ld %9ld %9ld %11s\n",
               jr_esc_str(name, sizeof name, q->name),
               q->paused ? "paused" : "active", q->ready, q->scheduled,
               q->running, q->dead, conc);
    }
    o->n++;
    return 0;
}

static int
queue_list(jr_config *c, jr_client *db, int argc, char **argv)
{
    list_out o = {&c->queues, 0, 0};
    int i;

    for (i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o.json = 1;
        else
            return jr_cmd_usage("queue list: unexpected argument '%s'",
                                argv[i]);
    }
    if (o.json)
        printf("[");
    if (jr_client_queue_list(db, list_one, &o) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    if (o.json)
        printf("]\n");
    else if (o.n == 0)
        printf("no queues\n");
    return JR_EXIT_OK;
}

static int
queue_pause(jr_config *c, jr_client *db, int argc, char **argv)
{
    (void)c;
    if (jr_client_queue_pause(db, argv[0]) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    (void)argc;
    printf("paused queue '%s': runners start none of its jobs (running "
           "ones finish)\n", argv[0]);
    return JR_EXIT_OK;
}

static int
queue_resume(jr_config *c, jr_client *db, int argc, char **argv)
{
    (void)c;
    (void)argc;
    if (jr_client_queue_resume(db, argv[0]) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    printf("resumed queue '%s'\n", argv[0]);
    return JR_EXIT_OK;
}

static const struct queue_sub {
    const char *name;
    int         nargs;          /* -1: options only (list) */
    int       (*fn)(jr_config *c, jr_client *db, int argc, char **argv);
} subs[] = {
    {"list", -1, queue_list},
    {"pause", 1, queue_pause},
    {"resume", 1, queue_resume},
    {NULL, 0, NULL}
};

int
jr_cmd_queue(jr_cli *cli)
{
    const struct queue_sub *s;
    jr_client *client;
    jr_config c;
    jr_err err;
    int rc;

    if (cli->argc == 0)
        return jr_cmd_usage("queue: missing the subcommand (list, pause, "
                            "resume)");
    for (s = subs; s->name && strcmp(s->name, cli->argv[0]) != 0; s++)
        ;
    if (s->name == NULL)
        return jr_cmd_usage("queue: unknown subcommand '%s' (list, pause, "
                            "resume)", cli->argv[0]);
    if (s->nargs > 0 && cli->argc - 1 < s->nargs)
        return jr_cmd_usage("queue %s: missing the queue NAME", s->name);
    if (s->nargs > 0 && cli->argc - 1 > s->nargs)
        return jr_cmd_usage("queue %s: unexpected argument '%s'", s->name,
                            cli->argv[1 + s->nargs]);
    if (s->nargs > 0 && cli->optend > 1 && cli->argv[1][0] == '-')
        return jr_cmd_usage("queue %s: unknown option '%s' (a queue name "
                            "starting with '-' goes after '--')", s->name,
                            cli->argv[1]);
    if (s->nargs > 0 && jr_name_check(cli->argv[1], "queue name", &err) < 0)
        return jr_cmd_die(JR_EXIT_USAGE, err.msg);  /* before the database */
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    /* each creates no database: a pause of one not made yet is a typo */
    if ((rc = jr_cmd_reader(&c, &client)) == 0) {
        rc = s->fn(&c, client, cli->argc - 1, cli->argv + 1);
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}
