/* url.h - backend URLs for the code that must not see the storage
 * interface (backend.h): the URL with its password masked for messages
 * (what the engine a URL names can do is caps.h's). backend.c implements
 * it. Uses nothing. */
#ifndef JR_URL_H
#define JR_URL_H

#include <stddef.h>

/* Writes url into out for messages: a PostgreSQL URL or conninfo as libpq
 * parses it, re-written as conninfo with password fields as "****"; one
 * libpq cannot parse as "<unparsable connection string: REASON>" (returns
 * -1 then, else 0); any other URL with "user:****@". */
int  jr_url_mask(const char *url, char *out, size_t size);

#endif
