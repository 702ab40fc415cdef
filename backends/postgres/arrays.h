/* arrays.h - builders of array parameters over util.h's jr_buf: SQL array
 * literals in text ("{...}") and arrays in array_recv's binary format.
 * static inline: they run for each element of a batch, and were inlined
 * when the engine was one file. Private to backends/postgres/. */
#ifndef JR_PG_ARRAYS_H
#define JR_PG_ARRAYS_H
#include <stdint.h>
#include <string.h>

#include "base/util.h"

/* Builders of SQL array literals ("{...}") over util.h's jr_buf. */

static inline void
sb_adds(jr_buf *s, const char *x)
{
    jr_buf_put(s, x, strlen(x));
}

/* Appends one element to an array literal being built: "{" on the first,
 * "," before the others; str NULL is an SQL NULL, else it is quoted. */
static inline void
sb_elem(jr_buf *s, const char *str)
{
    const char *run;

    jr_buf_put(s, s->len == 0 ? "{" : ",", 1);
    if (str == NULL) {
        sb_adds(s, "NULL");
        return;
    }
    jr_buf_put(s, "\"", 1);
    for (run = str; *str; str++) {
        if (*str == '"' || *str == '\\') {
            jr_buf_put(s, run, (size_t)(str - run));
            jr_buf_put(s, "\\", 1);
            run = str;
        }
    }
    jr_buf_put(s, run, (size_t)(str - run));
    jr_buf_put(s, "\"", 1);
}

/* Appends an unquoted element (a number or NULL). */
static inline void
sb_num(jr_buf *s, const char *num)
{
    jr_buf_put(s, s->len == 0 ? "{" : ",", 1);
    sb_adds(s, num);
}

/* Closes an array literal; an empty one is "{}". */
static inline const char *
sb_array(jr_buf *s)
{
    if (s->len == 0)
        jr_buf_put(s, "{}", 3);
    else
        jr_buf_put(s, "}", 2);
    return s->p;
}

/* Binary array parameters, in array_recv's format: a header (dimensions,
 * flags, element type, length, lower bound), then each element as its
 * length (-1: NULL) and its bytes, integers in network order. The server
 * takes them without parsing text arrays (quotes, escapes, numbers). */
#define OID_INT4 23
#define OID_TEXT 25
#define OID_FLOAT8 701
#define BA_HEADER 20

static inline void
ba_u32(jr_buf *a, uint32_t v)
{
    unsigned char x[4] = {v >> 24, v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff};
    jr_buf_put(a, x, 4);
}

/* Appends a text element; str NULL is an SQL NULL. */
static inline void
ba_text(jr_buf *a, const char *str)
{
    size_t n = str != NULL ? strlen(str) : 0;

    ba_u32(a, str != NULL ? (uint32_t)n : UINT32_MAX);
    jr_buf_put(a, str, n);
}

static inline void
ba_int(jr_buf *a, int v)
{
    ba_u32(a, 4);
    ba_u32(a, (uint32_t)v);
}

static inline void
ba_null(jr_buf *a)
{
    ba_u32(a, UINT32_MAX);
}

static inline void
ba_float8(jr_buf *a, double v)
{
    uint64_t u;

    memcpy(&u, &v, sizeof u);
    ba_u32(a, 8);
    ba_u32(a, (uint32_t)(u >> 32));
    ba_u32(a, (uint32_t)u);
}

/* Writes the header of an array of n elements of type elem over the
 * BA_HEADER bytes reserved at its start. */
static inline void
ba_finish(jr_buf *a, uint32_t elem, int n)
{
    uint32_t h[5] = {1, 0, elem, (uint32_t)n, 1};
    unsigned char *p = (unsigned char *)a->p;
    int i;

    if (a->oom)
        return;
    for (i = 0; i < 5; i++) {
        p[4 * i] = (unsigned char)(h[i] >> 24);
        p[4 * i + 1] = (unsigned char)(h[i] >> 16);
        p[4 * i + 2] = (unsigned char)(h[i] >> 8);
        p[4 * i + 3] = (unsigned char)h[i];
    }
}

#endif
