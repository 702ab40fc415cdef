/* fairsave.c - the passes a claim's starts bring a fair queue's keys to
 * (docs/queues.md, "Fair share"), written back in the claim's
 * transaction: one statement a queue, not two a start. Uses
 * sqlite_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/jsontext.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FAIR_PASS, S_FAIR_PASS1, S_FAIR_TICK, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* the passes the claim's starts brought queue ?1's keys to: ?2 a
     * JSON array of [key, pass] (fair_save works them out as a start a
     * statement did: max(pass, clock) + 1/weight) */
    [S_FAIR_PASS] =
        "INSERT INTO fair_keys (queue, key, pass)"
        " SELECT ?1, json_extract(value, '$[0]'),"
        " json_extract(value, '$[1]') FROM json_each(?2) WHERE true"
        " ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass",
    /* the same, of one key ?2: pass ?3 */
    [S_FAIR_PASS1] =
        "INSERT INTO fair_keys (queue, key, pass) VALUES (?1, ?2, ?3)"
        " ON CONFLICT (queue, key) DO UPDATE SET pass = excluded.pass",
    [S_FAIR_TICK] =
        "INSERT INTO fair_clocks (queue, clock) VALUES (?1, ?2)"
        " ON CONFLICT (queue) DO UPDATE"
        " SET clock = max(clock, excluded.clock)",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* Orders pointers to fair candidates by queue, then key. */
static int
by_key(const void *a, const void *b)
{
    const candidate *x = *(const candidate *const *)a;
    const candidate *y = *(const candidate *const *)b;
    int d = strcmp(x->queue, y->queue);

    return d != 0 ? d : strcmp(x->fkey, y->fkey);
}

/* Writes s to f as a JSON string. 0 when s is not UTF-8. */
static int
json_str(FILE *f, const char *s)
{
    size_t n = strlen(s), used, len;
    char out[6];

    putc('"', f);
    while (n > 0) {
        if ((len = jr_jsontext_escape_char(s, n, out, &used)) == 0)
            return 0;
        fwrite(out, 1, len, f);
        s += used;
        n -= used;
    }
    putc('"', f);
    return 1;
}

/* Writes the passes p[0..m) (one queue's starts, by key) brought their
 * keys to, each as the statement a start used to run would have:
 * max(pass, clock) + 1/weight a start. One statement for them all (a
 * key that is not UTF-8: one a key), and the queue's clock. */
static int
save_queue(jr_backend *b, const candidate **p, int m, jr_err *err)
{
    sqlite3_stmt *s;
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    double pass, clock = p[0]->fclock;
    int i, j, utf8 = 1;

    if (f == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    putc('[', f);
    for (i = 0; i < m; i = j) {
        pass = p[i]->fpass > p[i]->fclock ? p[i]->fpass : p[i]->fclock;
        for (j = i; j < m && strcmp(p[j]->fkey, p[i]->fkey) == 0; j++) {
            pass += 1 / p[j]->fweight;
            if (p[j]->fclock > clock)
                clock = p[j]->fclock;
        }
        fputs(i > 0 ? ",[" : "[", f);
        utf8 = json_str(f, p[i]->fkey) && utf8;
        fprintf(f, ",%.17g]", pass);
    }
    putc(']', f);
    if (fclose(f) != 0 || json == NULL) {
        free(json);
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    }
    for (i = 0; i < m; i = j) {
        if (utf8)
            i = j = m;                  /* all at once, below */
        else {
            pass = p[i]->fpass > p[i]->fclock ? p[i]->fpass : p[i]->fclock;
            for (j = i; j < m && strcmp(p[j]->fkey, p[i]->fkey) == 0; j++)
                pass += 1 / p[j]->fweight;
        }
        if ((s = stmt(b, utf8 ? S_FAIR_PASS : S_FAIR_PASS1, err)) == NULL) {
            free(json);
            return -1;
        }
        bind_text(s, 1, p[0]->queue);
        if (utf8)
            bind_text(s, 2, json);
        else {
            bind_text(s, 2, p[i]->fkey);
            sqlite3_bind_double(s, 3, pass);
        }
        if (run(b, s, err, "counting a fair key's starts") < 0) {
            free(json);
            return -1;
        }
    }
    free(json);
    if ((s = stmt(b, S_FAIR_TICK, err)) == NULL)
        return -1;
    bind_text(s, 1, p[0]->queue);
    sqlite3_bind_double(s, 2, clock);
    return run(b, s, err, "moving a fair queue's clock") < 0 ? -1 : 0;
}

int
jr_sqlite_fair_save(jr_backend *b, const candidate *c, int n, jr_err *err)
{
    const candidate **p;
    int i, j, m = 0, rc = 0;

    if (n <= 0)
        return 0;
    if ((p = malloc((size_t)n * sizeof *p)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    for (i = 0; i < n; i++)
        if (c[i].fkey != NULL)
            p[m++] = &c[i];
    qsort(p, (size_t)m, sizeof *p, by_key);
    for (i = 0; i < m && rc == 0; i = j) {      /* a queue at a time */
        for (j = i; j < m && strcmp(p[j]->queue, p[i]->queue) == 0; j++)
            ;
        rc = save_queue(b, p + i, j - i, err);
    }
    free(p);
    return rc;
}
