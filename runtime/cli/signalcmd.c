/* signalcmd.c - jobrunner signal ID NAME [JSON]: sends a signal to a
 * job's wait_signal (docs/handlers.md, "Signals and durable sleep")
 * through the C library. Uses commands.h, jobrunner.h. */
#include <stdio.h>

#include "base/util.h"
#include "cli/commands.h"
#include "client/jobrunner.h"
#include "config/config.h"

int
jr_cmd_signal(jr_cli *cli)
{
    const char *name, *payload;
    jr_client *client;
    jr_config c;
    jr_err err;
    long id;
    int rc, woken = 0;

    if (cli->argc < 2 || cli->argc > 3)
        return jr_cmd_usage("signal: give a job id, a signal name and "
                            "optionally its JSON payload");
    if (jr_parse_int(cli->argv[0], "job id", 1, 0x7fffffffffffffffL, &id,
                     &err) < 0)
        return jr_cmd_die(JR_EXIT_USAGE, err.msg);
    name = cli->argv[1];
    payload = cli->argc == 3 ? cli->argv[2] : NULL;
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_reader_keyed(&c, &client)) == 0) { /* creates none */
        if ((rc = jr_client_signal(client, id, name, payload, &woken)) ==
            JR_CLIENT_OK) {
            if (woken)
                printf("job %ld: signal '%s' delivered: the job is ready\n",
                       id, name);
            else
                printf("job %ld: signal '%s' kept: its wait_signal returns "
                       "it at once\n", id, name);
        } else {
            rc = rc == JR_CLIENT_ENOTFOUND ?
                 (fprintf(stderr, "jobrunner: %s\n",
                          jr_client_errmsg(client)), JR_EXIT_NOTFOUND) :
                 jr_cmd_client_fail(client);
        }
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}
