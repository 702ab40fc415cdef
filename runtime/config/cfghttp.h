/* cfghttp.h - the readers of an HTTP token's secret (cfghttp.c), shared
 * by http.token and the scoped tokens of http.tokens (cfgtokens.c). Each
 * fills what (never with the secret) and returns -1 on a refusal. Uses
 * config.h. */
#ifndef JR_CFGHTTP_H
#define JR_CFGHTTP_H

#include "config/config.h"

/* -1 with what set when token cannot be sent as a Bearer token or is
 * too easy to guess (blank, shorter than JR_HTTP_TOKEN_MIN). */
int jr_cfghttp_token_why(const char *token, char *what, size_t whatsize);
/* The token in file path, its trailing blanks (a final newline) dropped,
 * into *slot (a new string; the old one freed). -1 with what set when
 * the file cannot be read, is not a regular file, others may read or
 * write it (its group may: the package's folder is root:jobrunner), is
 * longer than any token with its blanks (read no further: it may be
 * huge), or it holds a NUL byte. */
int jr_cfghttp_token_file(const char *path, char **slot, char *what,
                          size_t whatsize);
/* The token in environment variable name into *slot; -1 with what set
 * when it is not set or empty. */
int jr_cfghttp_token_env(const char *name, char **slot, char *what,
                         size_t whatsize);
/* cfgtokens.c: http.tokens of the http table on top of L into
 * c->http_tokens, each checked (name, scope, queues, one secret from a
 * file or the environment, never the config's text). -1 with the key at
 * fault ("http.tokens[2].scope") in key and what is wrong in what.
 * [-0, +0, m] */
int jr_cfgtokens_read(lua_State *L, jr_config *c, char *key, size_t keysize,
                      char *what, size_t whatsize);

#endif
