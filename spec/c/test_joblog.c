/* test_joblog.c - a run's logs (joblog.h): the entry the worker hands
 * the master passes jr_joblog_check, and its JSON as the backends store
 * it (jr_joblog_json) is JSON as the engines take it (jsontext's check,
 * and no NUL) whatever bytes a handler wrote, lines dropped for the cap
 * and long ones cut included; its fields say what was kept and dropped,
 * and the bytes dropped are those the lines take as stored. Prints "N
 * passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/joblog.h"
#include "base/jsondom.h"
#include "base/jsontext.h"
#include "check.h"

static jr_buf json;

/* The run's entry as stored: jr_joblog_entry's, checked, as JSON. */
static const char *
entry(jr_joblog *l, int attempt, size_t max)
{
    size_t n = 0;
    const char *e = jr_joblog_entry(l, attempt, max, &n);

    if (e == NULL)
        return NULL;
    if (jr_joblog_check(e, n) < 0) {
        fprintf(stderr, "an entry jr_joblog_check refuses\n");
        return "(refused)";
    }
    return jr_joblog_json(e, n, &json);
}

static unsigned long long seed = 88172645463325252ULL;

static unsigned
rnd(void)                       /* xorshift64: the same bytes each run */
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (unsigned)(seed >> 32);
}

/* 1 if entry is a valid entry of attempt with lines kept lines. */
static int
entry_ok(const char *entry, int attempt, long lines)
{
    jr_jdoc doc = {0};
    jr_err err = {0};
    char why[128];
    int k, a, n = 0, ok;
    size_t len = strlen(entry);

    if (jr_jsontext_check(entry, len, why, sizeof why) < 0) {
        fprintf(stderr, "entry not JSON: %s\n", why);
        return 0;
    }
    if (jr_jdoc_parse(&doc, entry, len, "entry", &err) < 0)
        return 0;
    a = jr_jdoc_get(&doc, 0, "attempt");
    k = jr_jdoc_get(&doc, 0, "lines");
    ok = a >= 0 && atoi(doc.n[a].at) == attempt && k >= 0 &&
         doc.n[k].type == JR_JSON_ARRAY &&
         jr_jdoc_get(&doc, 0, "at") >= 0 &&
         jr_jdoc_get(&doc, 0, "dropped_lines") >= 0 &&
         jr_jdoc_get(&doc, 0, "dropped_bytes") >= 0;
    for (k = ok ? doc.n[k].first : -1; k >= 0; k = doc.n[k].next) {
        n++;
        if (doc.n[k].type != JR_JSON_OBJECT ||
            jr_jdoc_get(&doc, k, "msg") < 0 ||
            jr_jdoc_get(&doc, k, "level") < 0 ||
            jr_jdoc_get(&doc, k, "at") < 0)
            ok = 0;
    }
    jr_jdoc_free(&doc);
    if (lines >= 0 && n != lines) {
        fprintf(stderr, "%d lines kept, %ld wanted\n", n, lines);
        return 0;
    }
    return ok;
}

/* Random bytes, lines and writes, many runs on one log (cleared between
 * them, as a worker's context is): each entry JSON. */
static int
check_random(void)
{
    static const char *const levels[] = {"debug", "info", "warn", "error"};
    jr_joblog l = {0};
    char s[20000];
    const char *e;
    size_t n, i, max;
    int run, k, nlines;

    for (run = 0; run < 300; run++) {
        max = run % 3 == 0 ? 600 : JR_JOBLOG_DEFAULT;
        nlines = (int)(rnd() % 40);
        for (k = 0; k < nlines; k++) {
            n = rnd() % 8 == 0 ? rnd() % sizeof s : rnd() % 100;
            for (i = 0; i < n; i++)     /* mostly ASCII, some anything */
                s[i] = (char)(rnd() % 4 == 0 ? rnd() : 32 + rnd() % 95);
            if (rnd() % 3 == 0)
                jr_joblog_write(&l, (int)(rnd() % 2), s, n, max);
            else
                jr_joblog_add(&l, levels[rnd() % 4], s, n, max);
        }
        e = entry(&l, run + 1, max);
        if (nlines == 0 && e != NULL)
            CHECK(!"an entry for a run that wrote nothing");
        if (e != NULL && !entry_ok(e, run + 1, -1)) {
            fprintf(stderr, "run %d: %.200s\n", run, e);
            CHECK(!"a bad entry");
            break;
        }
        jr_joblog_clear(&l);
    }
    jr_joblog_free(&l);
    return 0;
}

/* s[0..n) escaped one byte at a time, as a line's text is stored: the
 * reference for the encoder, which looks at eight bytes at once. */
static size_t
escape_ref(char *o, const char *s, size_t n)
{
    char *start = o;
    size_t k, used;
    unsigned char c;

    while (n > 0) {
        c = (unsigned char)*s;
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            *o++ = *s++;
            n--;
            continue;
        }
        if (c == 0 || (k = jr_jsontext_escape_char(s, n, o, &used)) == 0) {
            used = 1;
            memcpy(o, JR_JSONTEXT_BADBYTE, 6);
            k = 6;
        }
        o += k;
        s += used;
        n -= used;
    }
    return (size_t)(o - start);
}

/* Each byte that must be escaped (or is not UTF-8, or begins a
 * character), at every place in lines of 1 to 40 bytes, before and
 * after the eight-byte runs: the text stored is the reference's. */
static int
check_escapes(void)
{
    static const char *const odd[] = {"\"", "\\", "\x01", "\x1f", "\x7f",
                                      "\x80", "\xff", "\xc3\xa9", "\xe2\x82\xac",
                                      "\xf0\x9f\x98\x80", "\t", " ", "~", ""};
    jr_joblog l = {0};
    char s[64], want[512], got[512];
    const char *e, *m, *end;
    size_t n, at, k, wn;
    int o;

    for (o = 0; o < (int)(sizeof odd / sizeof *odd); o++)
        for (n = 1; n <= 40; n++)
            for (at = 0; at < n; at++) {
                memset(s, 'a', sizeof s);
                k = strlen(odd[o]) > 0 ? strlen(odd[o]) : 1;   /* "": NUL */
                if (at + k > n)
                    continue;
                memcpy(s + at, odd[o], k);
                jr_joblog_add(&l, "info", s, n, 65536);
                e = entry(&l, 1, 65536);
                m = e != NULL ? strstr(e, "\"msg\":\"") : NULL;
                end = m != NULL ? strstr(m, "\"}]") : NULL;
                wn = escape_ref(want, s, n);
                if (m == NULL || end == NULL ||
                    (size_t)(end - m - 7) != wn ||
                    memcmp(m + 7, want, wn) != 0) {
                    snprintf(got, sizeof got, "%s", e ? e : "(none)");
                    fprintf(stderr, "byte %d at %zu of %zu: %s\n", o, at, n,
                            got);
                    CHECK(!"a line's text not escaped as one byte at a "
                           "time does");
                    jr_joblog_free(&l);
                    return 0;
                }
                jr_joblog_clear(&l);
            }
    jr_joblog_free(&l);
    return 0;
}

/* The lines as they were written, escaped; the oldest dropped past the
 * cap and counted. */
static int
check_known(void)
{
    jr_joblog l = {0};
    const char *e;
    char msg[64];
    int i;

    jr_joblog_add(&l, "info", "step \"1\"\n\x01 done", 15, 65536);
    jr_joblog_write(&l, JR_JOBLOG_STDERR, "oops\npartial", 12, 65536);
    e = entry(&l, 3, 65536);
    CHECK(e != NULL && entry_ok(e, 3, 3));
    CHECK(e != NULL && strstr(e, "\"level\":\"info\",\"msg\":\"step "
                              "\\\"1\\\"\\n\\u0001 done\"}") != NULL);
    CHECK(e != NULL && strstr(e, "{\"level\":\"stderr\"") == NULL);
    CHECK(e != NULL && strstr(e, "\"level\":\"stderr\",\"msg\":\"oops\"")
          != NULL);
    CHECK(e != NULL && strstr(e, "\"msg\":\"partial\"}],\"dropped_lines\":0,"
                              "\"dropped_bytes\":0}") != NULL);
    CHECK(e != NULL && strncmp(e, "{\"attempt\":3,\"at\":", 18) == 0);
    jr_joblog_clear(&l);
    for (i = 0; i < 100; i++) {
        snprintf(msg, sizeof msg, "line %d", i);
        jr_joblog_add(&l, "warn", msg, strlen(msg), 500);
    }
    e = entry(&l, 1, 500);
    CHECK(e != NULL && entry_ok(e, 1, -1));
    CHECK(e != NULL && strstr(e, "\"msg\":\"line 99\"}]") != NULL);
    CHECK(e != NULL && strstr(e, "\"msg\":\"line 0\"") == NULL);
    CHECK(e != NULL && strstr(e, "\"dropped_lines\":0") == NULL);
    jr_joblog_free(&l);
    return 0;
}

/* The bytes of each line object in entry text e, its ',' or ']' with
 * it, from the nth on (0: the first) to the last: a line is
 * {"at":..,"level":"..","msg":".."}, and a msg's '}' is escaped only when
 * it is a '"' so the object ends at "\"}". */
static long long
line_bytes(const char *e, int from)
{
    const char *p = strstr(e, "\"lines\":[") + 9, *end;
    long long sum = 0;
    int k = 0;

    while (*p == '{' || *p == ',') {
        if (*p == ',')
            p++;
        end = strstr(p, "\"}") + 2;
        if (k++ >= from)
            sum += end - p + 1;
        p = end;
    }
    return sum;
}

/* The cap counts the bytes the lines take as stored: dropped_bytes is
 * what the dropped ones took, and those kept fit. */
static int
check_cap(void)
{
    jr_joblog all = {0}, capped = {0};
    char msg[64], *whole;
    const char *e, *d;
    long long dropped, kept;
    int i, nd;

    for (i = 0; i < 100; i++) {
        snprintf(msg, sizeof msg, "line \"%d\" \x01", i);
        jr_joblog_add(&all, "info", msg, strlen(msg), 1 << 30);
        jr_joblog_add(&capped, "info", msg, strlen(msg), 900);
    }
    e = entry(&all, 1, 1 << 30);
    whole = e != NULL ? strdup(e) : NULL;
    e = entry(&capped, 1, 900);
    CHECK(whole != NULL && e != NULL);
    if (whole == NULL || e == NULL)
        return 0;
    d = strstr(e, "\"dropped_lines\":");
    nd = d != NULL ? atoi(d + 16) : -1;
    d = strstr(e, "\"dropped_bytes\":");
    dropped = d != NULL ? atoll(d + 16) : -1;
    kept = line_bytes(e, 0);
    CHECK(nd > 0 && nd < 100);
    CHECK(dropped == line_bytes(whole, 0) - line_bytes(whole, nd));
    CHECK(kept <= 900 && kept == line_bytes(whole, nd));
    free(whole);
    jr_joblog_free(&all);
    jr_joblog_free(&capped);
    return 0;
}

/* The text after "at" of each line of entry text e: "at" differs
 * between two logs by when their lines came, not the rest. */
static void
without_at(const char *e, char *out, size_t size)
{
    size_t n = 0;

    while (*e != '\0' && n + 1 < size) {
        if (strncmp(e, "\"at\":", 5) == 0)
            for (e += 5; (*e >= '0' && *e <= '9') || *e == '.'; e++)
                ;
        else
            out[n++] = *e++;
    }
    out[n] = '\0';
}

/* A line kept as its pieces (jr_joblog_add_fields) is stored as its
 * text made by the caller would be (jrlog.c's: fields by name, a value
 * quoted when empty or with a space or '='), the cap counted the same;
 * a line that is not plain is refused, nothing kept. */
static int
check_fields(void)
{
    static const jr_joblog_field f[] = {
        {"user", "ada", 4, 3}, {"n", "1", 1, 1}, {"note", "a b", 4, 3},
        {"empty", "", 5, 0}, {"eq", "x=y", 2, 3}, {"n2", "-7", 2, 2},
    };
    static const char text[] = "step done empty=\"\" eq=\"x=y\" n=1 n2=-7 "
                               "note=\"a b\" user=ada";
    static const jr_joblog_field bad[] = {{"k", "tab\there", 1, 8}};
    static const jr_joblog_field quote[] = {{"k", "a\"b", 1, 3}};
    jr_joblog a = {0}, b = {0};
    static char ea[70000], eb[70000];
    const char *e;
    int i;

    for (i = 0; i < 60; i++) {
        CHECK(jr_joblog_add_fields(&a, "warn", "step done", 9, f, 6, 2000)
              == 0);
        jr_joblog_add(&b, "warn", text, strlen(text), 2000);
    }
    e = entry(&a, 2, 2000);
    CHECK(e != NULL && entry_ok(e, 2, -1));
    without_at(e ? e : "", ea, sizeof ea);
    e = entry(&b, 2, 2000);
    without_at(e ? e : "", eb, sizeof eb);
    CHECK(strcmp(ea, eb) == 0);
    CHECK(strstr(ea, "\"dropped_lines\":0") == NULL);
    if (strcmp(ea, eb) != 0)
        fprintf(stderr, "%.300s\n%.300s\n", ea, eb);
    jr_joblog_clear(&a);
    CHECK(jr_joblog_add_fields(&a, "info", "x", 1, bad, 1, 65536) < 0);
    CHECK(jr_joblog_add_fields(&a, "info", "x", 1, quote, 1, 65536) < 0);
    CHECK(jr_joblog_add_fields(&a, "info", "caf\xc3\xa9", 5, NULL, 0,
                               65536) < 0);
    CHECK(jr_joblog_add_fields(&a, "info", "x", 1, f, 1, 20) < 0);
    CHECK(entry(&a, 1, 65536) == NULL);
    jr_joblog_free(&a);
    jr_joblog_free(&b);
    return 0;
}

/* An entry with bytes changed at random (a worker's bug): refused by
 * jr_joblog_check, or its JSON written within its buffer (the
 * sanitizers' build tells). */
static int
check_mangled(void)
{
    static const jr_joblog_field f[] = {{"user", "ada", 4, 3},
                                        {"note", "a b", 4, 3}};
    jr_joblog l = {0};
    jr_buf out = {0};
    const char *e;
    char *m;
    size_t n = 0, k;
    int i, ok = 0;

    jr_joblog_add_fields(&l, "info", "step", 4, f, 2, 65536);
    jr_joblog_add(&l, "warn", "text line", 9, 65536);
    jr_joblog_add_fields(&l, "error", "end", 3, f, 1, 65536);
    e = jr_joblog_entry(&l, 1, 65536, &n);
    CHECK(e != NULL && jr_joblog_check(e, n) == 0);
    if (e == NULL || (m = malloc(n)) == NULL)
        return 0;
    for (i = 0; i < 20000; i++) {
        memcpy(m, e, n);
        for (k = 0; k < 1 + rnd() % 3; k++)
            m[rnd() % n] = (char)rnd();
        if (jr_joblog_check(m, n) == 0 && jr_joblog_json(m, n, &out) != NULL)
            ok++;
    }
    CHECK(jr_joblog_check(e, n - 1) < 0);
    CHECK(jr_joblog_check(e, 10) < 0);
    free(m);
    jr_buf_free(&out);
    jr_joblog_free(&l);
    (void)ok;
    return 0;
}

int
main(void)
{
    check_report("a mangled entry refused or written safely",
                 check_mangled());
    check_report("a line kept as its pieces", check_fields());
    check_report("the cap in stored bytes", check_cap());
    check_report("known lines", check_known());
    check_report("random bytes", check_random());
    check_report("escapes at every place", check_escapes());
    jr_buf_free(&json);
    return check_report(NULL, 0);
}
