/* worker.h - a worker process: loads every handler into its own Lua state,
 * tells the master which it has, then runs the jobs the master sends, one at
 * a time, and answers each with a result. Uses script.h, jrlib.h,
 * frame.h. */
#ifndef JR_WORKER_H
#define JR_WORKER_H

#include <stdint.h>

/* A page the master and one worker share (a memfd the worker gets as a
 * descriptor): what the master needs when the worker dies. A worker sends
 * results in batches while more jobs wait (fewer writes), so at its death
 * the master used to lack the results not yet written and blamed the
 * oldest job it had sent: a job that had finished was failed with "worker
 * died", and the job that killed the worker ran again unblamed. Here the
 * worker keeps a copy of the result frames it has not written yet and the
 * id of the job in its handler, with its start; the master reads them once
 * the worker is dead, and the running job's id and start for its timeout
 * kill while it lives, so no write is added per job. */
#define JR_SHARE_SIZE 65536
#define JR_SHARE_KIDS 256       /* jobrunner.exec's groups listed */
typedef struct jr_share {
    int64_t  running;           /* the job in the handler, 0 between jobs;
                                   written after started (release order) */
    double   started;           /* jr_mono() when it started: its deadline
                                   (the master's clock is the same) */
    uint32_t len;               /* bytes of buf: frames not written yet */
    uint32_t pad;
    int32_t  kids[JR_SHARE_KIDS];/* process groups of jobrunner.exec's
                                   children (in groups of their own), 0 in
                                   free slots: killed with the worker */
    char     buf[JR_SHARE_SIZE - 24 - 4 * JR_SHARE_KIDS];
} jr_share;

/* Runs a worker on descriptor fd (a socketpair end): reads the master's
 * settings frame first (a worker never reads jobrunner.lua); returns the
 * process's exit status. share_fd is the shared page's descriptor, or -1
 * (taken). */
int jr_worker_main(int fd, int share_fd);

/* Sends this process's stdout and stderr (its handlers' output and their
 * subprocesses') to descriptor out, which it takes; its own log lines keep
 * going to the runner's stderr. Returns 0 or -1. */
int jr_worker_output(int out);

/* The exit status of a worker that stopped to be replaced because a
 * handler hit the memory limit. */
#define JR_WORKER_RECYCLE 3
#define JR_WORKER_LOAD_STUCK 4  /* exit: handler loading took too long */

#endif
