/* flowcmd.c - the workflow commands (docs/workflows.md): push-flow (a
 * flow's JSON from a file or stdin, in one transaction), batch show, the
 * batch side of cancel (--batch) and the links show prints (parents,
 * children, batch). All through the producer library. Uses commands.h,
 * jobrunner.h, util.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "config/config.h"
#include "client/jobrunner.h"
#include "backend.h"
#include "base/esc.h"
#include "base/util.h"

/* The whole of stdin, in a new string. */
static char *
read_stdin(void)
{
    jr_buf b = {0};
    char chunk[65536];
    size_t n;

    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        if (jr_buf_put(&b, chunk, n) < 0) {
            jr_buf_free(&b);
            return NULL;
        }
    if (ferror(stdin) || jr_buf_put(&b, "", 1) < 0) {
        jr_buf_free(&b);
        return NULL;
    }
    return b.p;
}

typedef struct flow_out {
    int json, n;
} flow_out;

static int
flow_said(const char *ref, int64_t id, void *arg)
{
    flow_out *o = arg;

    if (o->json) {
        printf("%s", o->n++ ? "," : "{\"ids\":{");
        jr_json_str(stdout, ref);
        printf(":%lld", (long long)id);
    } else {
        printf("%s %lld\n", ref, (long long)id);
    }
    return 0;
}

int
jr_cmd_push_flow(jr_cli *cli)
{
    flow_out o = {0, 0};
    const char *file = NULL;
    jr_client *client;
    jr_config c;
    int64_t batch = 0;
    char *text;
    int i, rc;

    for (i = 0; i < cli->argc; i++)
        if (i < cli->optend && strcmp(cli->argv[i], "--json") == 0)
            o.json = 1;
        else if (file == NULL)
            file = cli->argv[i];
        else
            return jr_cmd_usage("push-flow: give one FILE (or - for stdin)");
    if (file == NULL)
        return jr_cmd_usage("push-flow: give the flow's FILE (or - for "
                            "stdin)");
    errno = 0;
    text = strcmp(file, "-") == 0 ? read_stdin() : jr_read_file(file);
    if (text == NULL) {
        fprintf(stderr, "jobrunner: push-flow: cannot read '%s': %s\n", file,
                errno ? strerror(errno) : "out of memory");
        return JR_EXIT_USAGE;
    }
    if ((rc = jr_cmd_config(cli, &c)) != 0) {
        free(text);
        return rc;
    }
    if ((rc = jr_cmd_client(&c, &client)) == 0) {
        /* the environment's trace context (docs/tracing.md), as push's:
         * each job without its own takes it; a bad one is refused */
        const char *tp = getenv("TRACEPARENT"), *ts = getenv("TRACESTATE");
        if (jr_client_push_flow_trace(client, text, strlen(text),
                                      tp && *tp ? tp : NULL,
                                      ts && *ts ? ts : NULL, flow_said, &o,
                                      &batch) != JR_CLIENT_OK)
            rc = jr_cmd_client_fail(client);
        else if (o.json)
            printf(batch ? "},\"batch\":%lld}\n" : "},\"batch\":null}\n",
                   (long long)batch);
        else if (batch != 0)
            printf("batch %lld\n", (long long)batch);
        jr_client_close(client);
    }
    jr_config_free(&c);
    free(text);
    return rc;
}

/* --- batch show ------------------------------------------------------- */

typedef struct batch_out {
    int json, n;
} batch_out;

static int
batch_said(const jr_client_batch *b, void *arg)
{
    batch_out *o = arg;
    char t[40];

    if (o->json) {
        printf("{\"id\":%lld,\"counts\":{\"pending\":%ld,\"completed\":%ld,"
               "\"dead\":%ld,\"cancelled\":%ld},\"total\":%ld,"
               "\"on_complete\":", (long long)b->id, b->pending,
               b->completed, b->dead, b->cancelled, b->total);
        jr_json_str(stdout, b->on_complete);
        printf(",\"on_success\":");
        jr_json_str(stdout, b->on_success);
        printf(",\"done\":%s,\"callbacks\":[", b->finished_at > 0 ? "true" :
               "false");
        if (b->complete_job)
            printf("%lld%s", (long long)b->complete_job,
                   b->success_job ? "," : "");
        if (b->success_job)
            printf("%lld", (long long)b->success_job);
        printf("],\"members\":[");
        return 0;
    }
    printf("batch %lld: %ld members: %ld pending, %ld completed, %ld dead, "
           "%ld cancelled\n", (long long)b->id, b->total, b->pending,
           b->completed, b->dead, b->cancelled);
    printf("on_complete: ");
    jr_esc_put(stdout, b->on_complete);
    printf("\non_success: ");
    jr_esc_put(stdout, b->on_success);
    putchar('\n');
    printf("finished:    %s\n", b->finished_at > 0 ?
           jr_time_iso(b->finished_at, t, sizeof t) : "no");
    if (b->complete_job || b->success_job)
        printf("callbacks:   %lld %lld\n", (long long)b->complete_job,
               (long long)b->success_job);
    printf("members:\n");
    return 0;
}

static int
member_said(int kind, int64_t id, const char *state, void *arg)
{
    batch_out *o = arg;

    (void)kind;
    if (o->json) {
        printf("%s{\"id\":%lld,\"state\":", o->n++ ? "," : "",
               (long long)id);
        jr_json_str(stdout, state);
        printf("}");
    } else {
        printf("  %lld %s\n", (long long)id, state);
    }
    return 0;
}

/* Reads one batch id (and --json) of argv. */
static int
batch_id(jr_cli *cli, const char *cmd, long *id, int *json)
{
    const char *given = NULL;
    jr_err err;
    int i;

    for (i = 0; i < cli->argc; i++)
        if (i < cli->optend && strcmp(cli->argv[i], "--json") == 0 && json)
            *json = 1;
        else if (given == NULL)
            given = cli->argv[i];
        else
            return jr_cmd_usage("%s: give one batch id", cmd);
    if (given == NULL)
        return jr_cmd_usage("%s: give one batch id", cmd);
    if (jr_parse_int(given, "batch id", 1, 0x7fffffffffffffffL, id,
                     &err) < 0)
        return jr_cmd_die(JR_EXIT_USAGE, err.msg);
    return 0;
}

int
jr_cmd_batch(jr_cli *cli)
{
    batch_out o = {0, 0};
    jr_client *client;
    jr_config c;
    long id;
    int rc;

    if (cli->argc == 0 || strcmp(cli->argv[0], "show") != 0)
        return jr_cmd_usage("batch: expected 'batch show ID [--json]'");
    cli->argc--, cli->argv++, cli->optend--;
    if ((rc = batch_id(cli, "batch show", &id, &o.json)) != 0 ||
        (rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_reader(&c, &client)) == 0) {
        if (jr_client_batch_show(client, id, batch_said, member_said, &o)
            == JR_CLIENT_OK) {
            if (o.json)
                printf("]}\n");
        } else if (jr_client_errcode(client) == JR_CLIENT_ENOTFOUND) {
            fprintf(stderr, "jobrunner: batch show: no batch %ld\n", id);
            rc = JR_EXIT_NOTFOUND;
        } else {
            rc = jr_cmd_client_fail(client);
        }
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}

/* --- cancel --batch ----------------------------------------------------- */

typedef struct idvec {
    int64_t *v;
    int      n, cap;
} idvec;

static int
batch_nothing(const jr_client_batch *b, void *arg)
{
    (void)b;
    (void)arg;
    return 0;
}

/* The members not ended yet. */
static int
member_open(int kind, int64_t id, const char *state, void *arg)
{
    idvec *l = arg;
    int64_t *grown;

    (void)kind;
    if (strcmp(state, "queued") && strcmp(state, "waiting") &&
        strcmp(state, "running"))
        return 0;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        if ((grown = realloc(l->v, (size_t)l->cap * sizeof *grown)) == NULL)
            return 1;
        l->v = grown;
    }
    l->v[l->n++] = id;
    return 0;
}

/* cancel --batch ID: cancels its members that have not ended (queued and
 * waiting ones at once, running ones by request, as cancel does). */
int
jr_cmd_cancel_batch(jr_cli *cli)
{
    idvec l = {NULL, 0, 0};
    jr_client *client;
    jr_config c;
    int *out, i, rc, n[3] = {0, 0, 0};
    long id;

    cli->argc--, cli->argv++, cli->optend--;
    if ((rc = batch_id(cli, "cancel --batch", &id, NULL)) != 0 ||
        (rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_reader(&c, &client)) == 0) {
        if (jr_client_batch_show(client, id, batch_nothing, member_open, &l)
            != JR_CLIENT_OK)
            rc = jr_client_errcode(client) == JR_CLIENT_ENOTFOUND ?
                 jr_cmd_die(JR_EXIT_NOTFOUND, "cancel --batch: no such "
                            "batch") : jr_cmd_client_fail(client);
        else if (l.n > 0 && (out = calloc((size_t)l.n, sizeof *out))) {
            /* JR_BULK_ROWS a transaction: the other writers get in */
            for (i = 0; rc == 0 && i < l.n; i += JR_BULK_ROWS)
                if (jr_client_cancel(client, l.v + i, (size_t)(l.n - i <
                    JR_BULK_ROWS ? l.n - i : JR_BULK_ROWS), out + i) !=
                    JR_CLIENT_OK)
                    rc = jr_cmd_client_fail(client);
            for (i = 0; rc == 0 && i < l.n; i++)
                n[out[i] == JR_CLIENT_CANCELLED ? 0 :
                  out[i] == JR_CLIENT_CANCEL_REQUESTED ? 1 : 2]++;
            free(out);
        }
        if (rc == 0)
            printf("batch %ld: %d cancelled, %d cancel requested (running), "
                   "%d already ended\n", id, n[0], n[1], n[2]);
        jr_client_close(client);
    }
    jr_config_free(&c);
    free(l.v);
    return rc;
}

/* --- show's links -------------------------------------------------------- */

static int
link_add(int kind, int64_t id, const char *state, void *arg)
{
    jr_buf *b = arg;
    char line[96];
    int n;

    n = snprintf(line, sizeof line, "%c %lld %s\n", kind, (long long)id,
                 state ? state : "-");
    return jr_buf_put(b, line, (size_t)n) < 0;
}

char *
jr_cmd_links(jr_client *client, int64_t id)
{
    jr_buf b = {0};

    if (jr_client_links(client, id, link_add, &b) != JR_CLIENT_OK ||
        jr_buf_put(&b, "", 1) < 0) {
        jr_buf_free(&b);
        return NULL;
    }
    return b.p;
}

void
jr_cmd_links_print(const char *links, int json)
{
    const char *kinds = "pcb", *at;
    static const char *const label[] = {"parents", "children", "batch"};
    int k, n;

    for (k = 0; k < 3; k++) {
        n = 0;
        printf(json ? (k < 2 ? ",\"%s\":[" : ",\"%s\":") :
               "%-12s", json ? label[k] : k == 0 ? "parents:" :
               k == 1 ? "children:" : "batch:");
        for (at = links; at && *at; at = strchr(at, '\n') + 1) {
            long long id;
            char st[32];
            if (at[0] != kinds[k] || sscanf(at + 2, "%lld %31s", &id, st) < 1)
                continue;
            if (json && k < 2)
                printf("%s{\"id\":%lld,\"state\":\"%s\"}", n ? "," : "", id,
                       st);
            else
                printf(json ? "%lld" : " %lld", id);
            if (!json && k < 2)
                printf(" (%s)", st);
            n++;
        }
        if (json)
            printf(k < 2 ? "]" : n ? "" : "null");
        else
            printf("%s\n", n ? "" : " -");
    }
}
