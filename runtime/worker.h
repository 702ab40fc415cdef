/* worker.h - a worker process: loads every handler into its own Lua state,
 * tells the master which it has, then runs the jobs the master sends, one at
 * a time, and answers each with a result. Uses config.h, script.h, jrlib.h,
 * frame.h. */
#ifndef JR_WORKER_H
#define JR_WORKER_H

/* Runs a worker on descriptor fd (a socketpair end): reads the master's
 * settings frame first (a worker never reads jobrunner.lua); returns the
 * process's exit status. */
int jr_worker_main(int fd);

/* Sends this process's stdout and stderr (its handlers' output and their
 * subprocesses') to descriptor out, which it takes; its own log lines keep
 * going to the runner's stderr. Returns 0 or -1. */
int jr_worker_output(int out);

/* The exit status of a worker that stopped to be replaced because a
 * handler hit the memory limit. */
#define JR_WORKER_RECYCLE 3
#define JR_WORKER_LOAD_STUCK 4  /* exit: handler loading took too long */

#endif
