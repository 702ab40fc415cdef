/* dbends.h - the ends of jobs as the database tells them, for the HTTP
 * server's long polls: a connection of its own whose finished_fd
 * (backend.h: LISTEN on "<schema>_finished" on PostgreSQL, the WAL's
 * folder on SQLite) is watched in the loop, so a job another runner or
 * process ends answers its polls without a read each second. Each
 * wake-up is consumed without waiting on the database. Uses backend.h,
 * dbopts.h, log.h; libevent. */
#ifndef JR_DBENDS_H
#define JR_DBENDS_H

#include <stdint.h>

#include "config/config.h"
#include "base/err.h"
#include "db/dbthread.h"

struct event_base;
typedef struct jr_dbends jr_dbends;

/* Called in the loop with ids[0..n) that ended (kept completed, dead or
 * cancelled), or n < 0 when some job may have ended, which ones not known
 * (SQLite; more than one wake-up holds; the watch was lost). */
typedef void (*jr_dbends_cb)(void *arg, const int64_t *ids, int n);

/* Opens cfg's database (it exists) and watches the ends of jobs in base's
 * loop. NULL with err set when it has no such descriptor or refused the
 * connection. Blocks while it connects: call at start. A lost watch is
 * opened again every JR_DBENDS_RETRY seconds on thread t (the loop never
 * waits for a connection), if t is not NULL; free t first at the end. */
jr_dbends *jr_dbends_new(const jr_config *cfg, struct event_base *base,
                         jr_dbthread *t, jr_dbends_cb cb, void *arg,
                         jr_err *err);
/* Whether a long poll waits (held 1) or none does (0). With none,
 * wake-ups that can wait are left unread: SQLite's only say that the
 * file changed (read once one waits, they still tell); PostgreSQL's are
 * read and dropped, as its server would queue them without end. */
void       jr_dbends_hold(jr_dbends *e, int held);
#define JR_DBENDS_RETRY 5.0     /* seconds between two reopens of a lost
                                   watch */

/* Whether it watches now: not from its loss (logged) until it is back
 * (logged too); cb got n < 0 at each. */
int        jr_dbends_live(const jr_dbends *e);
void       jr_dbends_free(jr_dbends *e);       /* NULL is a no-op */

#endif
