/* test_esc.c - the one escaping of quoted text for a terminal or a log
 * line (esc.h), table-driven: control bytes, C1 controls, bytes that are
 * not UTF-8, UTF-8 kept, a NUL inside the text, and an output buffer too
 * small for the last escape. Prints "N passed, N failed". */
#include <stdio.h>
#include <string.h>

#include "base/esc.h"
#include "check.h"

typedef struct esc_case {
    const char *in;
    size_t      n;              /* bytes of in; 0: strlen */
    const char *out;
} esc_case;

static const esc_case cases[] = {
    {"plain text: [ok] {1} ~", 0, "plain text: [ok] {1} ~"},
    {"a\\b\nc\td\re", 0, "a\\\\b\\nc\\td\\re"},
    {"\x1b[31m\x07\x7f\x01", 0, "\\x1b[31m\\x07\\x7f\\x01"},
    {"a\0b", 3, "a\\x00b"},
    {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 0,
     "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"},
    {"\xc2\x9b" "31m \xc2\x85 \xc2\xa0", 0,      /* C1 controls; NBSP kept */
     "\\xc2\\x9b31m \\xc2\\x85 \xc2\xa0"},
    {"x\xff\xfey", 0, "x\\xff\\xfey"},
    {"\xc0\xaf \xed\xa0\x80 \xc2", 0,            /* overlong, surrogate, cut */
     "\\xc0\\xaf \\xed\\xa0\\x80 \\xc2"},
};

static int
check_cases(void)
{
    char out[256];
    size_t i, len;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const esc_case *c = &cases[i];

        len = jr_esc_text(out, sizeof out, c->in,
                          c->n ? c->n : strlen(c->in));
        if (strcmp(out, c->out) != 0 || len != strlen(c->out)) {
            fprintf(stderr, "case %zu: got '%s', want '%s'\n", i, out,
                    c->out);
            failed = 1;
        }
    }
    return 0;
}

static int
check_small(void)
{
    char out[6];

    /* "ab" fits, "\x1b" (4 bytes) would not: stops before it */
    CHECK(jr_esc_text(out, sizeof out, "ab\x1b", 3) == 2);
    CHECK(strcmp(out, "ab") == 0);
    CHECK(jr_esc_text(out, 1, "ab", 2) == 0 && out[0] == '\0');
    CHECK(strcmp(jr_esc_first(out, sizeof out, "a\rb\nc"), "a\\rb") == 0);
    CHECK(strcmp(jr_esc_str(out, sizeof out, NULL), "-") == 0);
    return 0;
}

static int
check_put(void)
{
    char buf[64] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");

    if (f == NULL)
        return -1;
    jr_esc_put(f, "a\nb\x1b");
    fputc(' ', f);
    jr_esc_put(f, NULL);
    fputc(' ', f);
    jr_esc_putn(f, "c\0d", 3);
    fclose(f);
    CHECK(strcmp(buf, "a\\nb\\x1b - c\\x00d") == 0);
    return 0;
}

int
main(void)
{
    check_report("cases", check_cases());
    check_report("small buffer", check_small());
    check_report("put", check_put());
    return check_report(NULL, 0);
}
