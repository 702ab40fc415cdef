/* rerun.c - `jobrunner rerun ID [--from-step NAME] [--payload JSON]`: a
 * job completed, dead, cancelled or queued runs again, its steps from
 * NAME on cleared (all without it), its payload replaced if given
 * (docs/handlers.md, "Steps and cursors"). Uses commands.h, the client
 * library. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "base/util.h"

/* Reads ID and the options; 0, or an exit status after a message. */
static int
parse(jr_cli *cli, int64_t *id, const char **from, const char **payload)
{
    jr_err err;
    long v;
    int i, have = 0;

    for (i = 0; i < cli->argc; i++) {
        const char *a = cli->argv[i];
        int opt = i < cli->optend || cli->optend == 0;
        if (opt && (strcmp(a, "--from-step") == 0 ||
                    strcmp(a, "--payload") == 0)) {
            if (i + 1 >= cli->argc)
                return jr_cmd_usage("rerun: %s needs a value", a);
            *(a[2] == 'f' ? from : payload) = cli->argv[++i];
        } else if (opt && a[0] == '-' && a[1] == '-') {
            return jr_cmd_usage("rerun: unknown option '%s'", a);
        } else if (have++) {
            return jr_cmd_usage("rerun: give one job id");
        } else if (jr_parse_int(a, "job id", 1, 0x7fffffffffffffffL, &v,
                                &err) < 0) {
            return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        } else {
            *id = v;
        }
    }
    return have ? 0 : jr_cmd_usage("rerun: give a job id");
}

int
jr_cmd_rerun(jr_cli *cli)
{
    const char *from = NULL, *payload = NULL;
    jr_client *client;
    jr_config c;
    int64_t id = 0;
    int rc;

    if ((rc = parse(cli, &id, &from, &payload)) != 0 ||
        (rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_reader_keyed(&c, &client)) == 0) { /* creates none */
        if ((rc = jr_client_rerun(client, id, from, payload)) ==
            JR_CLIENT_OK)
            printf("%lld queued%s%s%s\n", (long long)id,
                   from ? " from step '" : "", from ? from : "",
                   from ? "'" : "");
        else if (rc == JR_CLIENT_ENOTFOUND)
            rc = (fprintf(stderr, "jobrunner: %s\n",
                          jr_client_errmsg(client)), JR_EXIT_NOTFOUND);
        else
            rc = jr_cmd_client_fail(client);
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}
