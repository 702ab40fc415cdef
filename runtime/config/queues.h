/* queues.h - named queues as a runner's settings hold them: each queue's
 * concurrency from the config's `queues` table (a number N, or { min, max }
 * within which on_tick may move its target), and which queues the runner
 * serves (`serve_queues`, or `run --queues a,b`). Reads them from Lua for
 * keys.c and from the command line for commands.c. Uses err.h. */
#ifndef JR_QUEUES_H
#define JR_QUEUES_H

#include "base/err.h"

#define JR_QUEUE_CAP_MAX 4096   /* a queue's concurrency at most */

typedef struct lua_State lua_State;

typedef struct jr_queue_conf {
    char *name;                 /* a valid queue name, owned */
    int   min;                  /* on_tick's target at least */
    int   max;                  /* the cap it starts at; on_tick at most */
} jr_queue_conf;

typedef struct jr_queues {
    jr_queue_conf *q;           /* `queues`, by name */
    int            n;
    char         **serve;       /* served queues, owned; NULL: all */
    int            nserve;
} jr_queues;

/* Reads the `queues` table at the top of L into qs (replacing what it
 * had). On error fills key ("queues" or "queues.NAME") and what (the rest
 * of the sentence, "is out of range (0 to 4096)") and returns -1.
 * [-0, +0, m] */
int  jr_queues_read(lua_State *L, jr_queues *qs, char *key, size_t keysz,
                    char *what, size_t whatsz);
/* Reads `serve_queues` (a list of queue names) at the top of L, as
 * jr_queues_read. [-0, +0, m] */
int  jr_queues_read_serve(lua_State *L, jr_queues *qs, char *what,
                          size_t whatsz);
/* Sets the served queues from "a,b,c" (run --queues). -1 with err (code
 * JR_EUSAGE) naming the bad or unknown one. */
int  jr_queues_parse_serve(jr_queues *qs, const char *list, jr_err *err);
/* Checks that every served queue is in `queues` when that table is set:
 * -1 with what naming the first unknown one. */
int  jr_queues_check_serve(const jr_queues *qs, char *what, size_t whatsz);
/* Whether name is among the served queues (none listed: all are). */
int  jr_queues_served(const jr_queues *qs, const char *name);
/* The configured queue called name, or NULL. */
const jr_queue_conf *jr_queues_find(const jr_queues *qs, const char *name);
void jr_queues_free(jr_queues *qs);     /* frees members; zeroes qs */

#endif
