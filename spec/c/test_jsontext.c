/* test_jsontext.c - the payload check every push passes (jsontext.h),
 * table-driven: texts both engines store, each also valid to SQLite's
 * json_valid(); texts refused, with the byte and the reason; and the
 * writer that prints bytes that are not UTF-8 as \ufffd. Prints "N
 * passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "base/jsontext.h"
#include "check.h"

static const char *const good[] = {
    "{}", "[]", "0", "-0.5e+3", "1E9", "true", "false", "null", "\"\"",
    " {\"a\" : [1, 2.5, \"x\", null, {\"b\": false}]}\r\n\t",
    "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", "[\"\\u0001\\u00e9\\uFFFF\"]",
    "[\"\\ud83d\\ude00\"]", "[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]",
    "{\"a\":1,\"a\":2}",
    "[1e131071, 9.9E+131071, 1e-16383, 1.5e-16382, -0.0]", /* numeric's */
};

typedef struct bad_case {
    const char *text;
    const char *why;            /* its start */
} bad_case;

static const bad_case bad[] = {
    {"", "byte 1: unexpected end of text"},
    {"{bad", "byte 2: expected a string key"},
    {"{\"a\":1", "byte 7: expected ',' or '}'"},
    {"[1,]", "byte 4: expected a value"},
    {"{\"a\":1,}", "byte 8: expected a string key"},
    {"{\"a\" 1}", "byte 6: expected ':'"},
    {"{\"a\":1}x", "byte 8: text after the JSON value"},
    {"01", "byte 2: text after the JSON value"},
    {"1.", "byte 3: expected a digit after '.'"},
    {"1e", "byte 3: expected a digit in the exponent"},
    {"-", "byte 1: expected a value"},
    {"nul", "byte 1: expected a value"},
    {"\"x", "byte 3: unterminated string"},
    {"[\"a\tb\"]", "byte 4: control character 0x09"},
    {"[\"\\x\"]", "byte 3: invalid escape '\\x'"},
    {"[\"\\u12\"]", "byte 3: \\u needs 4 hex digits"},
    {"{\"s\":\"A\xff" "B\"}", "byte 8: not valid UTF-8"},
    {"{\"s\":\"\xc3\"}", "byte 7: not valid UTF-8"},
    {"[\"\xc0\xaf\"]", "byte 3: not valid UTF-8"},            /* overlong */
    {"[\"\xed\xa0\x80\"]", "byte 3: not valid UTF-8"},        /* surrogate */
    {"[\"\xf4\x90\x80\x80\"]", "byte 3: not valid UTF-8"},    /* > U+10FFFF */
    {"{\"s\":\"a\\u0000b\"}", "byte 8: \\u0000 in a string"},
    {"[\"\\ud800\"]", "byte 3: \\ud800: a high surrogate without a low"},
    {"[\"\\ud800\\u0041\"]", "byte 3: \\ud800: a high surrogate"},
    {"[\"\\udc00x\"]", "byte 3: \\udc00: a low surrogate without a high"},
    {"[1e131072]", "byte 2: number out of range"},   /* past numeric's */
    {"[-1e-16384]", "byte 3: number out of range"},
    {"[1.5e-16383]", "byte 2: number out of range"},
    {"[1e99999999999999999999]", "byte 2: number out of range"},
};

static int
sqlite_valid(sqlite3 *db, const char *text)
{
    sqlite3_stmt *s;
    int v = -1;

    if (sqlite3_prepare_v2(db, "SELECT json_valid(?1)", -1, &s, NULL) != 0)
        return -1;
    sqlite3_bind_text(s, 1, text, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return v;
}

static int
check_good(sqlite3 *db)
{
    char why[200];

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int rc = jr_jsontext_check(good[i], strlen(good[i]), why, sizeof why);
        if (rc != 0)
            fprintf(stderr, "refused %s: %s\n", good[i], why);
        CHECK(rc == 0);
        CHECK(sqlite_valid(db, good[i]) == 1);
    }
    return 0;
}

static int
check_bad(void)
{
    char why[200];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bad_case *c = &bad[i];
        int rc = jr_jsontext_check(c->text, strlen(c->text), why, sizeof why);
        CHECK(rc == -1);
        if (rc == -1 && strncmp(why, c->why, strlen(c->why)) != 0) {
            fprintf(stderr, "%s: got '%s', want '%s...'\n", c->text, why,
                    c->why);
            failed = 1;
        }
    }
    return 0;
}

/* 1000 levels are stored, 1001 are not. */
static int
check_depth(void)
{
    char *t = malloc(2 * 1001 + 1), why[200];

    if (t == NULL)
        return -1;
    memset(t, '[', 1001);
    memset(t + 1001, ']', 1001);
    t[2002] = '\0';
    CHECK(jr_jsontext_check(t, 2002, why, sizeof why) == -1);
    CHECK(strcmp(why, "byte 1001: nested deeper than 1000") == 0);
    CHECK(jr_jsontext_check(t + 1, 2000, why, sizeof why) == 0);
    free(t);
    return 0;
}

static int
check_write(void)
{
    char buf[128] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");

    if (f == NULL)
        return -1;
    jr_jsontext_write(f, "{\"s\":\"A\xff" "B\xc3\xa9\xc3\"}");
    fputc(' ', f);
    jr_jsontext_write(f, NULL);
    fclose(f);
    CHECK(strcmp(buf, "{\"s\":\"A\\ufffdB\xc3\xa9\\ufffd\"} null") == 0);
    return 0;
}

int
main(void)
{
    sqlite3 *db;

    if (sqlite3_open(":memory:", &db) != SQLITE_OK)
        return 1;
    check_report("good texts", check_good(db));
    check_report("bad texts", check_bad());
    check_report("depth", check_depth());
    check_report("write", check_write());
    sqlite3_close(db);
    return check_report(NULL, 0);
}
