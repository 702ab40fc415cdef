/* logscmd.c - `show ID --logs [--attempt N] [--json]`: a job's kept logs
 * (docs/handlers.md, "Each attempt's logs"), each run under its attempt,
 * its lines with their time and level; every message escaped (esc.h), so
 * a line a handler wrote cannot move the terminal. Uses commands.h,
 * jobrunner.h, jsondom.h, jsontext.h, esc.h, util.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "client/jobrunner.h"
#include "base/esc.h"
#include "base/jsondom.h"
#include "base/jsontext.h"
#include "base/util.h"

/* The number at key of object o, or 0. */
static double
num(const jr_jdoc *d, int o, const char *key)
{
    int k = jr_jdoc_get(d, o, key);

    return k >= 0 && d->n[k].type == JR_JSON_NUMBER ?
           strtod(d->n[k].at, NULL) : 0;
}

/* Writes one line: its time of day, level and message, escaped. */
static void
put_line(const jr_jdoc *d, int o)
{
    int lv = jr_jdoc_get(d, o, "level"), m = jr_jdoc_get(d, o, "msg");
    char when[40], *level = lv >= 0 ? jr_jdoc_str(d, lv) : NULL;
    char *msg = m >= 0 ? jr_jdoc_str(d, m) : NULL;

    jr_time_iso(num(d, o, "at"), when, sizeof when);
    printf("  %.12s  %-6s  ", when + 11, level ? level : "?");
    jr_esc_putn(stdout, msg ? msg : "", msg ? strlen(msg) : 0);
    putchar('\n');
    free(level);
    free(msg);
}

/* Writes one run: its attempt, when, what was dropped, its lines. */
static void
put_run(const jr_jdoc *d, int o)
{
    int lines = jr_jdoc_get(d, o, "lines"), k;
    double dl = num(d, o, "dropped_lines"), db = num(d, o, "dropped_bytes");
    char when[40];

    printf("attempt %.0f  %s", num(d, o, "attempt"),
           jr_time_iso(num(d, o, "at"), when, sizeof when));
    if (dl > 0)
        printf("  (%.0f earlier lines dropped, %.0f bytes: over "
               "log.attempt_max)", dl, db);
    putchar('\n');
    for (k = lines >= 0 ? d->n[lines].first : -1; k >= 0; k = d->n[k].next)
        if (d->n[k].type == JR_JSON_OBJECT)
            put_line(d, k);
}

static int
put_text(int64_t id, int attempt, const char *json)
{
    jr_jdoc d = {0};
    jr_err err;
    int k;

    if (jr_jdoc_parse(&d, json, strlen(json), "logs", &err) < 0) {
        fprintf(stderr, "jobrunner: show: job %lld: %s\n", (long long)id,
                err.msg);
        return JR_EXIT_FAIL;
    }
    if (d.n[0].count == 0)
        printf("job %lld: no logs kept%s\n", (long long)id,
               attempt > 0 ? " of that attempt" : "");
    for (k = d.n[0].first; k >= 0; k = d.n[k].next)
        put_run(&d, k);
    jr_jdoc_free(&d);
    return JR_EXIT_OK;
}

int
jr_cmd_show_logs(jr_client *client, int64_t id, int attempt, int json)
{
    char *logs = NULL;
    int rc;

    if (jr_client_logs(client, id, attempt, &logs) != JR_CLIENT_OK) {
        if (jr_client_errcode(client) != JR_CLIENT_ENOTFOUND)
            return jr_cmd_client_fail(client);
        fprintf(stderr, "jobrunner: show: no job with id %lld (finished "
                "jobs are kept only as long as the config's retention "
                "says, their logs with them)\n", (long long)id);
        return JR_EXIT_NOTFOUND;
    }
    if (json) {
        jr_jsontext_write(stdout, logs);
        putchar('\n');
        rc = JR_EXIT_OK;
    } else {
        rc = put_text(id, attempt, logs);
    }
    free(logs);
    return rc;
}
