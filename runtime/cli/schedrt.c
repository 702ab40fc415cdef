/* schedrt.c - `jobrunner schedule add|set|remove|backfill`: schedules
 * managed at run time (docs/schedules.md, "Schedules managed at run
 * time"). The options become a JSON definition of the config's schedule
 * fields, checked by the config's reader (schedput.h); a name of the
 * config is refused. Uses commands.h, schedcmd.h, schedput.h, backend.h,
 * util.h. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "base/esc.h"
#include "base/jsontext.h"
#include "base/util.h"
#include "cli/commands.h"
#include "cli/schedcmd.h"
#include "db/schedput.h"

/* The options and the definition's field each sets: a string (s), a
 * number (n: checked whole), or JSON text as given (j). */
static const struct opt {
    const char *flag, *field;
    char        kind;
} opts[] = {
    {"--cron", "cron", 's'}, {"--every", "every", 's'},
    {"--job", "job", 's'}, {"--payload", "payload", 'j'},
    {"--queue", "queue", 's'}, {"--priority", "priority", 'n'},
    {"--max-retries", "max_retries", 'n'}, {"--catch-up", "catch_up", 's'},
    {"--timezone", "tz", 's'}, {"--tz", "tz", 's'},
    {"--overlap", "overlap", 's'}, {"--jitter", "jitter", 's'},
    {"--start-at", "start_at", 's'}, {"--end-at", "end_at", 's'},
    {NULL, NULL, 0}
};

#define OPT_LIST "--cron, --every, --job, --payload, --queue, --priority, " \
                 "--max-retries, --catch-up, --timezone, --overlap, " \
                 "--jitter, --start-at, --end-at"

/* The field argv[i] (a flag, else --unset's value) names; NULL: none. */
static const char *
field_at(jr_cli *cli, int i, int set)
{
    const struct opt *o;

    if (set && strcmp(cli->argv[i], "--unset") == 0)
        return cli->argv[i + 1];
    for (o = opts; o->flag && strcmp(o->flag, cli->argv[i]) != 0; o++)
        ;
    return o->field;
}

/* The definition of argv[from..argc) (pairs FLAG VALUE; set also takes
 * --unset FIELD; a field given twice is refused) into *def (malloc'd).
 * 0, or a usage error said. */
static int
definition(jr_cli *cli, int from, int set, char **def)
{
    const struct opt *o;
    size_t size = 0;
    FILE *f = open_memstream(def, &size);
    const char *sep = "";
    char why[200];
    jr_err err;
    long n = 0;
    int i;

    if (f == NULL)
        return jr_cmd_die(JR_EXIT_FAIL, "out of memory");
    fputc('{', f);
    for (i = from; i < cli->argc; i += 2) {
        const char *flag = cli->argv[i], *val = cli->argv[i + 1];
        const char *field = val != NULL ? field_at(cli, i, set) : NULL;
        int k;

        for (k = from; field != NULL && k < i; k += 2)
            if (strcmp(field_at(cli, k, set), field) == 0) {
                fclose(f);
                free(*def);
                return jr_cmd_usage("schedule %s: '%.60s' is given twice "
                                    "(%s, then %s)", cli->argv[0], field,
                                    cli->argv[k], flag);
            }
        if (set && strcmp(flag, "--unset") == 0 && val != NULL) {
            fputs(sep, f);
            jr_json_str(f, val);
            fputs(": null", f);
            sep = ", ";
            continue;
        }
        for (o = opts; o->flag && strcmp(o->flag, flag) != 0; o++)
            ;
        if (o->flag == NULL || val == NULL) {
            fclose(f);
            free(*def);
            return o->flag == NULL ?
                   jr_cmd_usage("schedule %s: unknown option '%.60s' (%s%s)",
                                cli->argv[0], flag, OPT_LIST,
                                set ? ", --unset FIELD" : "") :
                   jr_cmd_usage("schedule %s: %s needs a value",
                                cli->argv[0], flag);
        }
        if (o->kind == 'j' &&
            jr_jsontext_check(val, strlen(val), why, sizeof why) < 0) {
            fclose(f);
            free(*def);
            return jr_cmd_usage("schedule %s: %s is not JSON: %s",
                                cli->argv[0], o->flag, why);
        }
        if (o->kind == 'n' &&
            jr_parse_int(val, o->flag, -1000000, 1000000, &n, &err) < 0) {
            fclose(f);
            free(*def);
            return jr_cmd_usage("schedule %s: %s", cli->argv[0], err.msg);
        }
        fputs(sep, f);
        jr_json_str(f, o->field);
        fputs(": ", f);
        if (o->kind == 'n')
            fprintf(f, "%ld", n);
        else if (o->kind == 'j')
            fputs(val, f);
        else
            jr_json_str(f, val);
        sep = ", ";
    }
    fputc('}', f);
    if (fclose(f) != 0)
        return jr_cmd_die(JR_EXIT_FAIL, "out of memory");
    return 0;
}

static int
backfill(jr_db *db, const jr_schedput_cfg *pc, jr_cli *cli)
{
    const jr_schedule *s;
    jr_schedules own;
    double from, to;
    char a[40], b[40], name[300];
    jr_err err;
    long n;

    if (cli->argc != 4)
        return jr_cmd_usage("schedule backfill: expected NAME FROM TO");
    if (jr_parse_time(cli->argv[2], "FROM", &from, &err) < 0 ||
        jr_parse_time(cli->argv[3], "TO", &to, &err) < 0)
        return jr_cmd_usage("schedule backfill: %s", err.msg);
    if (jr_schedput_find(db->ops, db->b, pc, cli->argv[1], &own, &s,
                         &err) < 0)
        return jr_cmd_die(err.code == JR_ENOTFOUND ? JR_EXIT_USAGE :
                          JR_EXIT_FAIL, err.msg);
    n = jr_schedput_backfill(db->ops, db->b, s, from, to, &err);
    jr_schedules_free(&own);
    if (n < 0)
        return jr_cmd_die(err.code == JR_EINPUT ? JR_EXIT_USAGE :
                          JR_EXIT_FAIL, err.msg);
    printf("schedule '%s': backfill %s to %s pushed %ld job%s (an instant "
           "already fired pushes none)\n",
           jr_esc_str(name, sizeof name, cli->argv[1]),
           jr_time_iso(from, a, sizeof a), jr_time_iso(to, b, sizeof b), n,
           n == 1 ? "" : "s");
    return JR_EXIT_OK;
}

int
jr_cmd_schedule_rt(jr_cli *cli)
{
    static const char *const verbs[] = {"add", "set", "remove", NULL};
    jr_schedput_cfg pc;
    jr_config c;
    jr_db db = {0};
    jr_err err;
    char *def = NULL, *out = NULL, name[300];
    int what, rc;

    for (what = 0; verbs[what] && strcmp(verbs[what], cli->argv[0]); what++)
        ;
    if (cli->argc < 2)
        return jr_cmd_usage("schedule %s: missing the schedule NAME",
                            cli->argv[0]);
    if (verbs[what] != NULL && what < 2 && (cli->argc - 2) % 2 != 0)
        return jr_cmd_usage("schedule %s: options come in pairs (OPTION "
                            "VALUE), '%.60s' has none", cli->argv[0],
                            cli->argv[cli->argc - 1]);
    if (verbs[what] != NULL && what == 2 && cli->argc != 2)
        return jr_cmd_usage("schedule remove: unexpected argument '%.60s'",
                            cli->argv[2]);
    if (verbs[what] != NULL && what < 2 &&
        (rc = definition(cli, 2, what == 1, &def)) != 0)
        return rc;
    if ((rc = jr_cmd_config(cli, &c)) != 0) {
        free(def);
        return rc;
    }
    pc.schedules = &c.schedules;
    pc.timezone = c.schedules.timezone;
    pc.max_payload = c.max_payload;
    if ((rc = jr_cmd_open_reader(&c, &db, 0)) == 0) {
        if (verbs[what] == NULL)
            rc = backfill(&db, &pc, cli);
        else if (jr_schedput(db.ops, db.b, &pc, what + 1, cli->argv[1], def,
                             &out, &err) < 0)
            rc = jr_cmd_die(err.code == JR_EINPUT ||
                            err.code == JR_ENOTFOUND ? JR_EXIT_USAGE :
                            JR_EXIT_FAIL, err.msg);
        else if (out != NULL)
            printf("schedule '%s' %s: %s; every runner follows it within a "
                   "second or so\n", jr_esc_str(name, sizeof name,
                                                cli->argv[1]),
                   what == 0 ? "added" : "changed", out);
        else
            printf("schedule '%s' removed; every runner stops it within a "
                   "second or so\n", jr_esc_str(name, sizeof name,
                                                cli->argv[1]));
    }
    free(def);
    free(out);
    jr_db_close(&db);
    jr_config_free(&c);
    return rc;
}
