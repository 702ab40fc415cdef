/* jsondom.h - a small JSON reader for the documents the runtime reads
 * from people (a flow, docs/workflows.md): the text parsed into a flat
 * array of nodes, each with its type, its span in the text (so a
 * payload is passed on as the text it was), and its children. Strings
 * are decoded on demand. No Lua. Uses err.h. */
#ifndef JR_JSONDOM_H
#define JR_JSONDOM_H

#include <stddef.h>

#include "base/err.h"

enum {
    JR_JSON_NULL, JR_JSON_FALSE, JR_JSON_TRUE, JR_JSON_NUMBER,
    JR_JSON_STRING, JR_JSON_ARRAY, JR_JSON_OBJECT
};

/* One value. In an object the children alternate key, value. */
typedef struct jr_jnode {
    int         type;
    const char *at;             /* its text, in the parsed buffer */
    size_t      len;
    int         first;          /* index of its first child, or -1 */
    int         next;           /* index of its next sibling, or -1 */
    int         count;          /* children (object: keys + values) */
} jr_jnode;

typedef struct jr_jdoc {
    jr_jnode *n;                /* n[0] is the root */
    int       count, cap;
} jr_jdoc;

/* Parses text (len bytes, borrowed: the nodes point into it) into doc.
 * Depth at most JR_JSONTEXT_DEPTH + 3 (a flow's payloads nest as a push's).
 * Returns 0, or -1 with err set (JR_EINPUT) naming the
 * byte offset and what was wrong; what names the document. */
int  jr_jdoc_parse(jr_jdoc *doc, const char *text, size_t len,
                   const char *what, jr_err *err);
void jr_jdoc_free(jr_jdoc *doc);    /* and zeroes it */

/* The value of key in object node o, or -1. */
int  jr_jdoc_get(const jr_jdoc *doc, int o, const char *key);

/* The decoded text of string node s, in a new string (free with free()),
 * or NULL when out of memory. */
char *jr_jdoc_str(const jr_jdoc *doc, int s);

/* 1 if string node s equals key. */
int  jr_jdoc_is(const jr_jdoc *doc, int s, const char *key);

#endif
