/* test_where.c - the job list's payload filter (where.h), table-driven:
 * filters parsed into SQLite's path, PostgreSQL's path and the JSON
 * literal; filters refused, with the byte and the reason. Prints "N
 * passed, N failed". */
#include <stdio.h>
#include <string.h>

#include "where.h"
#include "check.h"

typedef struct good_case {
    const char *text, *sqlite_path, *pg_path, *literal;
} good_case;

static const good_case good[] = {
    {"payload.user_id = 42", "$.user_id", "{user_id}", "42"},
    {"  payload.a.b_2.C=-1.5e3  ", "$.a.b_2.C", "{a,b_2,C}", "-1.5e3"},
    {"payload._x = \"a b \\\"c\\\"\"", "$._x", "{_x}", "\"a b \\\"c\\\"\""},
    {"payload.ok = true", "$.ok", "{ok}", "true"},
    {"payload.ok = false", "$.ok", "{ok}", "false"},
    {"payload.n = null", "$.n", "{n}", "null"},
    {"payload.who = ann@example.org", "$.who", "{who}",
     "\"ann@example.org\""},
    {"payload.a.b.c.d.e.f.g.h = 1", "$.a.b.c.d.e.f.g.h", "{a,b,c,d,e,f,g,h}",
     "1"},
};

typedef struct bad_case {
    const char *text, *why;
} bad_case;

static const bad_case bad[] = {
    {"", "byte 1: the path starts with 'payload'"},
    {"user_id = 1", "byte 1: the path starts with 'payload'"},
    {"payload = 1", "byte 8: expected '.KEY' after 'payload'"},
    {"payload. = 1", "byte 9: a key starts with a letter or '_'"},
    {"payload.9 = 1", "byte 9: a key starts with a letter or '_'"},
    {"payload.a-b = 1", "byte 10: expected '=' after the path"},
    {"payload.a != 1", "byte 11: expected '=' after the path"},
    {"payload.a =", "byte 12: expected a value after '='"},
    {"payload.a = [1]", "byte 13: quote a value holding this character"},
    {"payload.a = x y", "byte 14: quote a value holding this character"},
    {"payload.a = \"x", "byte 13: byte 3: unterminated string"},
    {"payload.a = 01", "byte 13: byte 2: text after the JSON value"},
    {"payload.a = 1'; drop table jobs", "byte 13: byte 2:"},
    {"payload.a.b.c.d.e.f.g.h.i = 1", "byte 25: a path has at most 8 keys"},
    {"payload.a\"] = 1", "byte 10: expected '=' after the path"},
};

static int passed, nfailed;

static void
report(const char *name)
{
    printf("%s %s\n", failed ? "FAIL" : "ok  ", name);
    failed ? nfailed++ : passed++;
    failed = 0;
}

int
main(void)
{
    char key[80];
    jr_where w;
    jr_err err;
    size_t i;

    for (i = 0; i < sizeof good / sizeof good[0]; i++) {
        check_where = good[i].text;
        CHECK_OK(jr_where_parse(good[i].text, &w, &err), err);
        CHECK(strcmp(w.sqlite_path, good[i].sqlite_path) == 0);
        CHECK(strcmp(w.pg_path, good[i].pg_path) == 0);
        CHECK(strcmp(w.literal, good[i].literal) == 0);
    }
    report("good filters");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        check_where = bad[i].text;
        CHECK(jr_where_parse(bad[i].text, &w, &err) < 0);
        CHECK(err.code == JR_EINPUT);
        CHECK(strstr(err.msg, bad[i].why) != NULL);
        if (strstr(err.msg, bad[i].why) == NULL)
            fprintf(stderr, "  got: %s\n", err.msg);
    }
    report("bad filters");
    memset(key, 'k', 65);
    snprintf(key + 65, sizeof key - 65, " = 1");
    {
        char text[100];
        snprintf(text, sizeof text, "payload.%s", key);
        check_where = "a 65-byte key";
        CHECK(jr_where_parse(text, &w, &err) < 0);
        CHECK(strstr(err.msg, "a key is at most 64 bytes") != NULL);
        text[8 + 64] = ' ';         /* 64 bytes: fine */
        CHECK_OK(jr_where_parse(text, &w, &err), err);
    }
    report("key length");
    printf("%d passed, %d failed\n", passed, nfailed);
    return nfailed != 0;
}
