/* limitscmd.c - `jobrunner limits [--json]`: each limit of the config with
 * its use now, read from the database every runner shares: jobs running
 * and ready under it, the tokens in its bucket, and its keys with most
 * jobs waiting. Limits a hook changed at run time live in that runner
 * only: this shows the config's. Uses commands.h, backend.h,
 * limitcfg.h. */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cli/commands.h"
#include "base/esc.h"
#include "base/util.h"

static void
set_json(const char *key, const jr_limit_set *s)
{
    printf(",\"%s\":{\"concurrency\":%d,\"rate\":", key, s->concurrency);
    if (s->rate > 0) {
        jr_json_str(stdout, s->rate_text);
        printf(",\"per_second\":%.6g,\"burst\":%.6g}", s->rate, s->burst);
    } else {
        printf("null,\"per_second\":0,\"burst\":0}");
    }
}

static void
one_json(const jr_limit *l, const jr_limit_use *u, int first)
{
    int i;

    printf("%s{\"name\":", first ? "" : ",");
    jr_json_str(stdout, l->scope);
    printf(",\"key\":");
    if (l->key_path) {
        char path[256];
        snprintf(path, sizeof path, "payload.%s", l->key_path);
        jr_json_str(stdout, path);
    } else {
        printf("null");
    }
    set_json("limit", &l->all);
    set_json("per_key", &l->per_key);
    printf(",\"running\":%ld,\"waiting\":%ld,\"tokens\":", u->running,
           u->waiting);
    if (u->tokens >= 0)
        printf("%.3f", u->tokens);
    else
        printf("null");
    printf(",\"top_keys\":[");
    for (i = 0; i < u->ntop; i++) {
        printf("%s{\"key\":", i ? "," : "");
        jr_json_str(stdout, u->top_key[i]);
        printf(",\"waiting\":%ld,\"running\":%ld,\"tokens\":",
               u->top_waiting[i], u->top_running[i]);
        if (u->top_tokens[i] >= 0)
            printf("%.3f}", u->top_tokens[i]);
        else
            printf("null}");
    }
    printf("]}");
}

/* "10, 100/1m" or "-" */
static const char *
set_text(const jr_limit_set *s, char *buf, size_t n)
{
    if (s->concurrency > 0 && s->rate > 0)
        snprintf(buf, n, "%d, %s", s->concurrency, s->rate_text);
    else if (s->concurrency > 0)
        snprintf(buf, n, "%d", s->concurrency);
    else if (s->rate > 0)
        snprintf(buf, n, "%s", s->rate_text);
    else
        snprintf(buf, n, "-");
    return buf;
}

static void
one_text(const jr_limit *l, const jr_limit_use *u, int first)
{
    char all[64], per[64], tok[32] = "-";
    int i;

    if (first)
        printf("%-28s %-16s %-16s %8s %8s %8s\n", "LIMIT", "CAP, RATE",
               "PER KEY", "RUNNING", "WAITING", "TOKENS");
    if (u->tokens >= 0)
        snprintf(tok, sizeof tok, "%.1f", u->tokens);
    printf("%-28s %-16s %-16s %8ld %8ld %8s\n", l->scope,
           set_text(&l->all, all, sizeof all),
           set_text(&l->per_key, per, sizeof per), u->running, u->waiting,
           tok);
    for (i = 0; i < u->ntop; i++) {
        char key[512];

        printf("  key %-40s %8ld running %8ld waiting",
               jr_esc_str(key, sizeof key, u->top_key[i]),
               u->top_running[i], u->top_waiting[i]);
        if (u->top_tokens[i] >= 0)
            printf(" %8.1f tokens", u->top_tokens[i]);
        printf("\n");
    }
}

int
jr_cmd_limits(jr_cli *cli)
{
    jr_limit_use u;
    jr_config c;
    jr_db db = {0};
    jr_err err;
    int i, json = 0, rc;

    for (i = 0; i < cli->argc; i++) {
        if (strcmp(cli->argv[i], "--json") == 0)
            json = 1;
        else
            return jr_cmd_usage("limits: unexpected argument '%s'",
                                cli->argv[i]);
    }
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_open_reader(&c, &db, 0)) != 0)
        goto out;
    if (json)
        printf("[");
    for (i = 0; i < c.limits.n; i++) {
        u.top = JR_LIMIT_TOP;
        if (db.ops->limit_use(db.b, &c.limits.l[i], &u, &err) < 0) {
            if (json)
                printf("]\n");
            rc = jr_cmd_die(JR_EXIT_FAIL, err.msg);
            goto out;
        }
        (json ? one_json : one_text)(&c.limits.l[i], &u, i == 0);
    }
    if (json)
        printf("]\n");
    else if (c.limits.n == 0)
        printf("no limits in the config (see 'limits' in "
               "jobrunner.lua.example)\n");
out:
    jr_db_close(&db);
    jr_config_free(&c);
    return rc;
}
