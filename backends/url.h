/* url.h - backend URLs for the code that must not see the storage
 * interface (backend.h): which engine a URL names and where its SQLite
 * file is, and the URL with its password masked for messages. backend.c
 * implements both over its one parser, jr_url_parse. Uses nothing. */
#ifndef JR_URL_H
#define JR_URL_H

#include <stddef.h>

enum {
    JR_URL_NONE = 0,            /* names no engine */
    JR_URL_SQLITE,
    JR_URL_POSTGRES
};

/* Which engine url names, as jr_url_parse decides: JR_URL_SQLITE (then
 * *path, if path is not NULL, is the file path in url), JR_URL_POSTGRES
 * or JR_URL_NONE. */
int  jr_url_engine(const char *url, const char **path);

/* Writes url into out for messages: a PostgreSQL URL or conninfo as libpq
 * parses it, re-written as conninfo with password fields as "****"; one
 * libpq cannot parse as "<unparsable connection string: REASON>" (returns
 * -1 then, else 0); any other URL with "user:****@". */
int  jr_url_mask(const char *url, char *out, size_t size);

#endif
