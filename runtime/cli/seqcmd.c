/* seqcmd.c - `jobrunner sequences`: the sequences with jobs not ended or
 * a dead job blocking them (docs/queues.md, "Sequences"), and an
 * operator's skip and unblock of a blocked one. Goes through the
 * producer library. Uses commands.h, jobrunner.h, esc.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "client/jobrunner.h"
#include "base/esc.h"
#include "base/util.h"

typedef struct seq_out {
    int json;
    int n;
} seq_out;

static int
seq_one(const char *key, int64_t head, const char *state, long jobs,
        int blocked, void *arg)
{
    seq_out *o = arg;
    char k[300];

    if (o->json) {
        printf("%s{\"key\":", o->n ? "," : "");
        jr_json_str(stdout, key);
        printf(",\"head\":%lld,\"state\":\"%s\",\"jobs\":%ld,"
               "\"blocked\":%s}", (long long)head, state, jobs,
               blocked ? "true" : "false");
    } else {
        if (o->n == 0)
            printf("%-32s %12s %-9s %9s %s\n", "SEQUENCE", "HEAD", "STATE",
                   "JOBS", "BLOCKED");
        printf("%-32s %12lld %-9s %9ld %s\n",
               jr_esc_str(k, sizeof k, key), (long long)head, state, jobs,
               blocked ? "blocked" : "-");
    }
    o->n++;
    return 0;
}

static int
seq_list(jr_client *db, int argc, char **argv)
{
    seq_out o = {0, 0};
    int i, blocked = 0;
    long limit = 0;
    jr_err err;

    for (i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o.json = 1;
        else if (strcmp(argv[i], "--blocked") == 0)
            blocked = 1;
        else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            if (jr_parse_int(argv[++i], "--limit", 0, 1000000000, &limit,
                             &err) < 0)
                return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        } else
            return jr_cmd_usage("sequences: unexpected argument '%s'",
                                argv[i]);
    }
    if (o.json)
        printf("[");
    if (jr_client_sequences(db, blocked, (int)limit, seq_one, &o) !=
        JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    if (o.json)
        printf("]\n");
    else if (o.n == 0)
        printf(blocked ? "no blocked sequences\n" : "no sequences\n");
    return JR_EXIT_OK;
}

/* skip KEY | unblock KEY */
static int
seq_act(jr_client *db, const char *what, const char *key)
{
    int unblock = strcmp(what, "unblock") == 0;
    char k[300];
    long n = 0;

    if (jr_client_sequence_act(db, key, unblock, &n) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    jr_esc_str(k, sizeof k, key);
    if (n == 0) {
        fprintf(stderr, "jobrunner: sequence '%s' is not blocked\n", k);
        return JR_EXIT_NOTFOUND;
    }
    printf(unblock ? "unblocked sequence '%s': its dead job is queued again "
           "in its place\n" : "skipped sequence '%s': the job after its "
           "dead one runs\n", k);
    return JR_EXIT_OK;
}

int
jr_cmd_sequences(jr_cli *cli)
{
    jr_client *client;
    jr_config c;
    int rc, act;

    act = cli->argc > 0 && (strcmp(cli->argv[0], "skip") == 0 ||
                            strcmp(cli->argv[0], "unblock") == 0);
    if (act && cli->argc != 2)
        return jr_cmd_usage("sequences %s: expected one sequence KEY",
                            cli->argv[0]);
    if (act && cli->argv[1][0] == '\0')
        return jr_cmd_usage("sequences %s: the sequence KEY is empty",
                            cli->argv[0]);
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_reader(&c, &client)) == 0) {
        rc = act ? seq_act(client, cli->argv[0], cli->argv[1]) :
             seq_list(client, cli->argc, cli->argv);
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}
