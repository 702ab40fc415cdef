/* keyscmd.c - `jobrunner keys new FILE | status | rotate`: the key file
 * of encrypted payloads and results (docs/operations.md, "Encryption"):
 * a fresh key on top of a file, the values per key id (and those in
 * clear) so that an operator knows when an old key may go, and the
 * values under old keys sealed again with the first key, in bounded
 * batches, each a short transaction. Uses commands.h, backend.h,
 * keyring.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli/commands.h"
#include "base/keyring.h"
#include "base/util.h"

#define BATCH_DEFAULT 500       /* jobs a batch reads and writes */
#define IDS_MAX 64              /* key ids status tells apart */

static const char *const col_names[JR_CRYPT_COLS] = {
    "payloads", "results", "steps", "signal payloads"
};

typedef struct tally {
    char  id[IDS_MAX][JR_KEYID_MAX + 1];
    long  n[IDS_MAX];
    int   nid;
    long  other;                /* values of ids past IDS_MAX */
    long  plain[JR_CRYPT_COLS]; /* values in clear */
    int64_t last;
} tally;

static void
count_id(const char *id, void *arg)
{
    tally *t = arg;
    int i;

    for (i = 0; i < t->nid; i++)
        if (strcmp(t->id[i], id) == 0) {
            t->n[i]++;
            return;
        }
    if (t->nid == IDS_MAX) {
        t->other++;
        return;
    }
    snprintf(t->id[t->nid], sizeof t->id[0], "%s", id);
    t->n[t->nid++] = 1;
}

/* A waits record in clear counts when it holds a signal's payload (its
 * sleeps' dates are no one's secret). */
static int
sensitive(int col, const char *v)
{
    return col != JR_CRYPT_WAITS || strstr(v, "\"payload\"") != NULL;
}

static int
tally_row(int64_t id, const char *const *vals, void *arg)
{
    tally *t = arg;
    int c;

    t->last = id;
    for (c = 0; c < JR_CRYPT_COLS; c++) {
        if (vals[c] == NULL)
            continue;
        if (jr_seal_ids(vals[c], strlen(vals[c]), count_id, t) == 0 &&
            sensitive(c, vals[c]))
            t->plain[c]++;
    }
    return 0;
}

static int
keys_status(jr_config *c, jr_db *db, int batch)
{
    tally t;
    jr_keyring *k = NULL;
    jr_err err;
    int n, i, c2;
    long plain = 0;

    memset(&t, 0, sizeof t);
    if (c->key_file != NULL &&
        (k = jr_keyring_load(c->key_file, &err)) == NULL)
        return jr_cmd_die(JR_EXIT_CONFIG, err.msg);
    do {
        if ((n = db->ops->crypt_scan(db->b, t.last, batch, tally_row, &t,
                                     &err)) < 0) {
            jr_keyring_free(k);
            return jr_cmd_die(JR_EXIT_FAIL, err.msg);
        }
    } while (n == batch);
    if (k != NULL)
        printf("key file %s: key '%s' encrypts\n", jr_keyring_path(k),
               jr_keyring_first(k));
    else
        printf("no key file (encryption.key_file): nothing is encrypted "
               "by this config\n");
    for (i = 0; i < t.nid; i++)
        printf("key '%s': %ld value%s%s\n", t.id[i], t.n[i],
               t.n[i] == 1 ? "" : "s",
               k != NULL && !jr_keyring_has(k, t.id[i]) ?
               " (not in the key file: they cannot be read)" : "");
    if (t.other > 0)
        printf("other keys: %ld values\n", t.other);
    for (c2 = 0; c2 < JR_CRYPT_COLS; c2++) {
        plain += t.plain[c2];
        if (t.plain[c2] > 0)
            printf("in clear: %ld %s\n", t.plain[c2], col_names[c2]);
    }
    if (plain == 0)
        printf("in clear: none\n");
    if (k != NULL) {
        /* the keys of the file no value uses: each but the first may go */
        const char *first = jr_keyring_first(k);
        int old = 0;
        long lost = 0;

        for (i = 0; i < t.nid; i++) {
            old += strcmp(t.id[i], first) != 0 && jr_keyring_has(k, t.id[i]);
            lost += jr_keyring_has(k, t.id[i]) ? 0 : t.n[i];
        }
        if (old == 0 && t.other == 0 && lost == 0)
            printf("no value uses a key but '%s': the others may be removed "
                   "from the key file\n", first);
        else if (old == 0 && t.other == 0)
            printf("no value uses the key file's other keys: they may be "
                   "removed; %ld value%s under a key not in the file cannot "
                   "be read until it is added back\n", lost,
                   lost == 1 ? "" : "s");
        else
            printf("%d older key%s%s still in use: run 'jobrunner keys "
                   "rotate'\n", old, old == 1 ? "" : "s", t.other > 0 ?
                   " (and key ids past the first 64 seen)" : "");
    }
    jr_keyring_free(k);
    return 0;
}

typedef struct rot {
    const jr_keyring *k;
    int      plain;             /* also seal values in clear */
    jr_crypt_put *puts;
    char   **own;               /* the values read, and */
    char   **news;              /* their new texts */
    int      n;
    int64_t  last;
    long     failed;
    jr_err   err;
} rot;

static int
rot_row(int64_t id, const char *const *vals, void *arg)
{
    rot *r = arg;
    int c;

    r->last = id;
    for (c = 0; c < JR_CRYPT_COLS; c++) {
        char *out;
        jr_err err;
        int rc;

        if (vals[c] == NULL)
            continue;
        rc = jr_keyring_reseal(r->k, vals[c], strlen(vals[c]),
                               r->plain && c != JR_CRYPT_WAITS, &out, &err);
        if (rc < 0) {
            if (r->failed++ == 0)
                fprintf(stderr, "jobrunner: keys rotate: job %lld: %s\n",
                        (long long)id, err.msg);
            continue;
        }
        if (rc == 0)
            continue;
        if ((r->own[r->n] = strdup(vals[c])) == NULL) {
            free(out);
            jr_fail(&r->err, JR_ENOMEM, "out of memory");
            return 1;
        }
        r->news[r->n] = out;
        r->puts[r->n] = (jr_crypt_put){id, c, r->own[r->n], out};
        r->n++;
    }
    return 0;
}

static void
rot_clear(rot *r)
{
    int i;

    for (i = 0; i < r->n; i++) {
        free(r->own[i]);
        free(r->news[i]);
    }
    r->n = 0;
}

static int
keys_rotate(jr_config *c, jr_db *db, int batch, int plain)
{
    jr_keyring *k;
    rot r;
    jr_err err;
    long done = 0, left = 0;
    int n, got, pass;

    if (c->key_file == NULL)
        return jr_cmd_die(JR_EXIT_CONFIG, "keys rotate: no key file "
                          "(encryption.key_file) in the config");
    if ((k = jr_keyring_load(c->key_file, &err)) == NULL)
        return jr_cmd_die(JR_EXIT_CONFIG, err.msg);
    memset(&r, 0, sizeof r);
    r.k = k;
    r.plain = plain;
    r.puts = calloc((size_t)batch * JR_CRYPT_COLS, sizeof *r.puts);
    r.own = calloc((size_t)batch * JR_CRYPT_COLS, sizeof *r.own);
    r.news = calloc((size_t)batch * JR_CRYPT_COLS, sizeof *r.news);
    if (r.puts == NULL || r.own == NULL || r.news == NULL) {
        free(r.puts);
        free(r.own);
        free(r.news);
        jr_keyring_free(k);
        return jr_cmd_die(JR_EXIT_FAIL, "keys rotate: out of memory");
    }
    /* a value a runner or producer wrote between the read and the write
     * is left to the next pass */
    for (pass = 0; pass < 3; pass++) {
        r.last = 0;
        r.failed = 0;
        left = 0;
        do {
            n = db->ops->crypt_scan(db->b, r.last, batch, rot_row, &r, &err);
            if (n < 0 || r.err.code != 0) {
                rot_clear(&r);
                free(r.puts);
                free(r.own);
                free(r.news);
                jr_keyring_free(k);
                return jr_cmd_die(JR_EXIT_FAIL, n < 0 ? err.msg : r.err.msg);
            }
            got = db->ops->crypt_put(db->b, r.puts, r.n, &err);
            if (got < 0) {
                rot_clear(&r);
                free(r.puts);
                free(r.own);
                free(r.news);
                jr_keyring_free(k);
                return jr_cmd_die(JR_EXIT_FAIL, err.msg);
            }
            done += got;
            left += r.n - got;
            rot_clear(&r);
        } while (n == batch);
        if (left == 0)
            break;
    }
    printf("sealed again with key '%s': %ld value%s", jr_keyring_first(k),
           done, done == 1 ? "" : "s");
    if (left > 0)
        printf("; %ld changed meanwhile (run it again)", left);
    if (r.failed > 0)
        printf("; %ld cannot be read (see above)", r.failed);
    printf("\n");
    free(r.puts);
    free(r.own);
    free(r.news);
    jr_keyring_free(k);
    return left > 0 || r.failed > 0 ? JR_EXIT_FAIL : 0;
}

int
jr_cmd_keys(jr_cli *cli)
{
    jr_config c;
    jr_db db = {0};
    jr_err err;
    char id[JR_KEYID_MAX + 1];
    int rc, batch = BATCH_DEFAULT, plain = 0, i;
    const char *what;

    if (cli->argc < 1)
        return jr_cmd_usage("keys: expected 'keys new FILE', 'keys status' "
                            "or 'keys rotate'");
    what = cli->argv[0];
    if (strcmp(what, "new") == 0) {
        if (cli->argc != 2)
            return jr_cmd_usage("keys new: expected the key FILE");
        if (jr_keyring_new_key(cli->argv[1], id, &err) < 0)
            return jr_cmd_die(JR_EXIT_FAIL, err.msg);
        printf("key '%s' added at the top of %s: it encrypts from the next "
               "start of each runner and producer\n", id, cli->argv[1]);
        return 0;
    }
    if (strcmp(what, "status") != 0 && strcmp(what, "rotate") != 0)
        return jr_cmd_usage("keys: unknown '%s' (new, status, rotate)", what);
    for (i = 1; i < cli->argc; i++) {
        char *end;

        if (strcmp(cli->argv[i], "--batch") == 0 && i + 1 < cli->argc) {
            long v = strtol(cli->argv[++i], &end, 10);

            if (*end || v < 1 || v > 10000)
                return jr_cmd_usage("keys %s: --batch takes 1 to 10000 jobs",
                                    what);
            batch = (int)v;
        } else if (strcmp(cli->argv[i], "--plain") == 0 &&
                   strcmp(what, "rotate") == 0) {
            plain = 1;
        } else {
            return jr_cmd_usage("keys %s: unknown argument '%s'", what,
                                cli->argv[i]);
        }
    }
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_open_reader(&c, &db, 0)) == 0)
        rc = what[0] == 's' ? keys_status(&c, &db, batch) :
             keys_rotate(&c, &db, batch, plain);
    jr_db_close(&db);
    jr_config_free(&c);
    return rc;
}
