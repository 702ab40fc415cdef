/* where.h - the payload filter of a job list ("payload.user_id = 42"),
 * parsed once and checked strictly for both engines: a dotted path of
 * plain keys and a JSON scalar. SQLite compares with json_extract on
 * "$.a.b", PostgreSQL with payload #> '{a,b}' = the literal as jsonb;
 * both bind the path and the value as parameters. Uses err.h. */
#ifndef JR_WHERE_H
#define JR_WHERE_H

#include <stddef.h>

#include "base/err.h"

#define JR_WHERE_DEPTH  8       /* keys in a path at most */
#define JR_WHERE_KEY    64      /* bytes in one key at most */
#define JR_WHERE_VALUE  256     /* bytes in the value's literal at most */

typedef struct jr_where {
    char    sqlite_path[JR_WHERE_DEPTH * (JR_WHERE_KEY + 1) + 2]; /* $.a.b */
    char    pg_path[JR_WHERE_DEPTH * (JR_WHERE_KEY + 1) + 2];     /* {a,b} */
    char    literal[JR_WHERE_VALUE + 3];    /* the value as JSON text */
} jr_where;

/* Parses text "payload.KEY[.KEY...] = VALUE" into w. KEY is a letter or
 * '_' then letters, digits and '_'; VALUE a JSON number, a "string",
 * true, false or null, or a bare word of letters, digits, '_', '-', '.',
 * '@' and ':' taken as a string. JR_EINPUT saying what is wrong and at
 * which byte, else 0. */
int jr_where_parse(const char *text, jr_where *w, jr_err *err);

#endif
