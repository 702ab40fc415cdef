/* url.h - backend URLs for the code that must not see the storage
 * interface (backend.h): the URL with its password masked for messages
 * (what the engine a URL names can do is caps.h's). backend.c implements
 * it. Uses nothing. */
#ifndef JR_URL_H
#define JR_URL_H

#include <stddef.h>

/* Writes url into out for messages: a PostgreSQL URL or conninfo as libpq
 * parses it, re-written as conninfo with password fields (and the
 * userinfo of any value that is a URL) as "****"; one libpq cannot parse
 * as "<unparsable connection string: REASON>", and a PostgreSQL URL libpq
 * would split elsewhere than meant (a '/' or '@' unencoded in its
 * password) as "<ambiguous URL 'MASKED': ...>" (returns -1 for those two,
 * which must not be handed to libpq, else 0); any other text with an '@'
 * with everything between its first ':' and its last '@' after the
 * user name shown as "****" ("user:****@", however the scheme is
 * misspelled). */
int  jr_url_mask(const char *url, char *out, size_t size);

#endif
