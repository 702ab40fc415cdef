/* dbopts.h - the backend's options (jr_backend_opts) from the config: one
 * rule per kind of connection, the runner's, a producer's and a reader's,
 * for the runner (dbopen.c), the C library and the commands. Owns
 * nothing. Uses backend.h, config.h. */
#ifndef JR_DBOPTS_H
#define JR_DBOPTS_H

#include "backend.h"
#include "config/config.h"

enum {
    JR_DBOPTS_RUNNER = 0,       /* claims and results: no fsync of its own,
                                   its own session timeouts, the retention
                                   of finished jobs */
    JR_DBOPTS_PRODUCER,         /* pushes: the config's synchronous */
    JR_DBOPTS_READER            /* an existing database only, created by
                                   none (JR_ENOTFOUND when there is none) */
};

/* Fills o (every field) for a connection of kind use (JR_DBOPTS_...) from
 * cfg: busy timeout, schema and, but for readers, max_payload. Strings are
 * borrowed from cfg. */
void jr_dbopts_fill(jr_backend_opts *o, const jr_config *cfg, int use);

#endif
