/* caps.h - what an engine can do, for the runtime to ask instead of which
 * engine it is: each engine's jr_backend_ops carries its jr_backend_caps
 * (backend.h), and code that must not see the storage interface gets
 * them from the URL (jr_url_caps). backend.c implements both functions
 * over its one parser, jr_url_parse. Uses nothing. */
#ifndef JR_CAPS_H
#define JR_CAPS_H

typedef struct jr_backend_caps {
    int remote;                 /* a server that many runners share (so
                                   they share the default pid file too);
                                   0: a file of this machine */
    int rounds;                 /* claim rounds in flight at once: 2 opens
                                   the lane, a second connection that
                                   records and claims while the first
                                   round is out (master/lane.c); 1: one
                                   writer, one round */
    int held;                   /* jobs a runner holds at most (out at its
                                   workers, or their results unrecorded):
                                   what a kill -9 runs again; longer
                                   cycles want more */
    int wakes_every_commit;     /* the ends' wake fd (finished_fd) fires at
                                   every commit of any connection, not
                                   only at jobs' ends: a runner holding no
                                   job reads none of them */
} jr_backend_caps;

/* The capabilities of the engine url names; an URL that names none gets
 * those of the default engine (SQLite), never NULL. */
const jr_backend_caps *jr_url_caps(const char *url);

/* The database's file on this machine as url names it, or NULL: a server,
 * or a database in memory. */
const char *jr_url_file(const char *url);

#endif
