/* esc.c - the one escaping of text for a terminal or a text log line. */
#include <string.h>

#include "base/esc.h"
#include "base/jsontext.h"

/* The escape of the n > 0 bytes at s into e (at least 9 bytes); sets *used
 * to the bytes of s it stands for. Returns its length. */
static size_t
esc_one(const char *s, size_t n, char e[9], size_t *used)
{
    static const char from[] = "\\\n\t\r", to[] = "\\ntr", hex[] =
        "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    const char *p;
    size_t k, i;

    if (u[0] != '\0' && (p = strchr(from, u[0])) != NULL) {
        e[0] = '\\';
        e[1] = to[p - from];
        *used = 1;
        return 2;
    }
    if (u[0] >= 0x20 && u[0] < 0x7f) {
        e[0] = (char)u[0];
        *used = 1;
        return 1;
    }
    k = u[0] < 0x80 ? 0 : jr_jsontext_utf8_len(u, n);
    if (k > 1 && !(u[0] == 0xc2 && u[1] < 0xa0)) {   /* not a C1 control */
        memcpy(e, s, k);
        *used = k;
        return k;
    }
    k = k == 2 ? 2 : 1;         /* a C1 control: both bytes */
    for (i = 0; i < k; i++) {
        e[4 * i] = '\\';
        e[4 * i + 1] = 'x';
        e[4 * i + 2] = hex[u[i] >> 4];
        e[4 * i + 3] = hex[u[i] & 15];
    }
    *used = k;
    return 4 * k;
}

size_t
jr_esc_text(char *out, size_t size, const char *s, size_t n)
{
    size_t len = 0, k, used;
    char e[9];

    for (; n > 0; s += used, n -= used) {
        k = esc_one(s, n, e, &used);
        if (len + k >= size)
            break;
        memcpy(out + len, e, k);
        len += k;
    }
    out[len] = '\0';
    return len;
}

void
jr_esc_putn(FILE *f, const char *s, size_t n)
{
    size_t k, used;
    char e[9];

    for (; n > 0; s += used, n -= used) {
        k = esc_one(s, n, e, &used);
        fwrite(e, 1, k, f);
    }
}

void
jr_esc_put(FILE *f, const char *s)
{
    if (s == NULL)
        putc('-', f);
    else
        jr_esc_putn(f, s, strlen(s));
}

const char *
jr_esc_first(char *out, size_t size, const char *s)
{
    s = s ? s : "";
    jr_esc_text(out, size, s, strcspn(s, "\n"));
    return out;
}

const char *
jr_esc_str(char *out, size_t size, const char *s)
{
    s = s ? s : "-";
    jr_esc_text(out, size, s, strlen(s));
    return out;
}
