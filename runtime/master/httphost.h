/* httphost.h - the master as the HTTP server's host (httphost.c): fills
 * in host.h's values and callbacks from the master, and starts and stops
 * the server with them. Uses master_int.h. */
#ifndef JR_HTTPHOST_H
#define JR_HTTPHOST_H

#include "base/err.h"

struct master;

/* Starts the HTTP server on m's loop when the config asks for one (and
 * the counters /metrics shows); after the database thread. Returns 0, or
 * -1 with err set. */
int  jr_httphost_start(struct master *m, jr_err *err);
/* The runner begins to stop: the server answers its long polls now. */
void jr_httphost_stopping(struct master *m);
/* Stops the server, if any. */
void jr_httphost_stop(struct master *m);

#endif
