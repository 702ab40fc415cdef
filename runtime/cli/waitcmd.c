/* waitcmd.c - `jobrunner wait ID... [--timeout S] [--json]`: waits until
 * each job has ended (jr_client_wait: no polling loop), prints each one's
 * outcome and result, one line per job, and exits 0 when all completed,
 * 1 when one ended dead or cancelled, 6 when one is gone (outcome
 * unknown), 7 when the database could not be read again after a loss,
 * 124 at the timeout, 5 for an id never given. Uses the client library
 * (jobrunner.h), commands.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/esc.h"
#include "base/jsontext.h"
#include "base/util.h"
#include "cli/commands.h"

#define EXIT_GONE 6             /* a job's row is gone, outcome unknown */
#define EXIT_LOST 7             /* the database not back after a loss */
#define EXIT_TIMEOUT 124        /* as timeout(1) */
#define WAIT_MAX 100000         /* ids in one wait (jr_client_wait's) */

/* Writes the stored result r (not NULL) as JSON on one line: valid JSON's
 * newlines, carriage returns and tabs can only be whitespace between its
 * tokens, written as spaces; text that is not JSON (a plain SQL update may
 * have stored it) as a JSON string. */
static void
put_result(const char *r)
{
    char why[100];

    if (jr_jsontext_check(r, strlen(r), why, sizeof why) < 0) {
        jr_json_str(stdout, r);
        return;
    }
    for (; *r != '\0'; r++)
        putchar(*r == '\n' || *r == '\r' || *r == '\t' ? ' ' : *r);
}

/* Prints one outcome: a line of text, or a JSON object on a line. */
static void
say(const jr_client_outcome *o, int json)
{
    if (json) {
        printf("{\"id\":%lld,\"state\":", (long long)o->id);
        jr_json_str(stdout, o->state);
        printf(",\"result\":");
        if (o->result != NULL)
            put_result(o->result);
        else
            printf("null");
        printf(",\"error\":");
        jr_json_str(stdout, o->error);
        printf("}\n");
        return;
    }
    printf("%lld %s ", (long long)o->id, o->state);
    if (o->result != NULL)
        put_result(o->result);
    else
        printf("-");
    if (o->error != NULL) {
        printf(" (");
        jr_esc_put(stdout, o->error);
        printf(")");
    }
    printf("\n");
}

/* The exit status of outcomes out[0..n) after a wait that returned rc. */
static int
status_of(const jr_client_outcome *out, int n, int rc)
{
    int i, failed = 0, gone = 0;

    for (i = 0; i < n; i++) {
        failed |= strcmp(out[i].state, "dead") == 0 ||
                  strcmp(out[i].state, "cancelled") == 0 ||
                  strcmp(out[i].state, "expired") == 0;
        gone |= strcmp(out[i].state, "gone") == 0;
    }
    if (rc == JR_CLIENT_ETIMEOUT)
        return EXIT_TIMEOUT;
    return failed ? JR_EXIT_FAIL : gone ? EXIT_GONE : JR_EXIT_OK;
}

static int
wait_ids(jr_client *client, const int64_t *ids, int n, double timeout,
         int json)
{
    jr_client_outcome *out = calloc((size_t)n, sizeof *out);
    int i, rc;

    if (out == NULL)
        return jr_cmd_die(JR_EXIT_FAIL, "out of memory");
    rc = jr_client_wait(client, ids, (size_t)n, timeout, out);
    if (rc != JR_CLIENT_OK && rc != JR_CLIENT_ETIMEOUT) {
        free(out);
        if (rc == JR_CLIENT_ENOTFOUND || rc == JR_CLIENT_ELOST) {
            fprintf(stderr, "jobrunner: %s%s\n", rc == JR_CLIENT_ENOTFOUND ?
                    "wait: " : "", jr_client_errmsg(client));
            return rc == JR_CLIENT_ELOST ? EXIT_LOST : JR_EXIT_NOTFOUND;
        }
        return jr_cmd_client_fail(client);
    }
    for (i = 0; i < n; i++)
        say(&out[i], json);
    if (rc == JR_CLIENT_ETIMEOUT)
        fprintf(stderr, "jobrunner: %s\n", jr_client_errmsg(client));
    rc = status_of(out, n, rc);
    free(out);
    return rc;
}

/* Reads wait's options out of argv, leaving the ids in argv[0..*n). */
static int
wait_args(jr_cli *cli, int *n, double *timeout, int *json)
{
    jr_err err;
    int i;

    *n = 0;
    for (i = 0; i < cli->argc && i < cli->optend; i++)
        if ((strcmp(cli->argv[i], "--json") == 0 ||
             strcmp(cli->argv[i], "--timeout") == 0) &&
            jr_cmd_once("wait", cli->argv[i], cli->argv, i) < 0)
            return JR_EXIT_USAGE;
    for (i = 0; i < cli->argc; i++) {
        const char *a = cli->argv[i];

        if (i >= cli->optend || a[0] != '-') {
            cli->argv[(*n)++] = cli->argv[i];
        } else if (strcmp(a, "--json") == 0) {
            *json = 1;
        } else if (strcmp(a, "--timeout") == 0) {
            if (i + 1 >= cli->argc)
                return jr_cmd_usage("wait: --timeout needs a duration");
            if (jr_parse_duration(cli->argv[++i], "--timeout", timeout,
                                  &err) < 0)
                return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        } else {
            return jr_cmd_usage("wait: unknown option '%s'", a);
        }
    }
    if (*n == 0)
        return jr_cmd_usage("wait: give one or more job ids");
    if (*n > WAIT_MAX)
        return jr_cmd_usage("wait: %d job ids given, at most %d in one "
                            "wait", *n, WAIT_MAX);
    return 0;
}

int
jr_cmd_wait(jr_cli *cli)
{
    jr_client *client;
    int64_t *ids;
    double timeout = 0;
    jr_config c;
    jr_err err;
    int i, n, json = 0, rc;
    long v;

    if ((rc = wait_args(cli, &n, &timeout, &json)) != 0)
        return rc;
    if ((ids = calloc((size_t)n, sizeof *ids)) == NULL)
        return jr_cmd_die(JR_EXIT_FAIL, "out of memory");
    for (i = 0; i < n; i++) {
        if (jr_parse_int(cli->argv[i], "job id", 1, 0x7fffffffffffffffL, &v,
                         &err) < 0) {
            free(ids);
            return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        }
        ids[i] = v;
    }
    if ((rc = jr_cmd_config(cli, &c)) != 0) {
        free(ids);
        return rc;
    }
    if ((rc = jr_cmd_reader_keyed(&c, &client)) == 0) { /* creates none */
        rc = wait_ids(client, ids, n, timeout, json);
        jr_client_close(client);
    }
    jr_config_free(&c);
    free(ids);
    return rc;
}
