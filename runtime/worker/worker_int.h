/* worker_int.h - what the worker's files share, private to them: the
 * worker (its fields visible on purpose) and the calls between them.
 *   worker.c  the process: settings, set-up, the frame loop, result
 *             batching and the page shared with the master
 *   run.c     one job in its handler: payload, deadline, cancel and
 *             progress while it runs, the outcome and the retry decision
 * Uses frame.h, script.h, jrlib.h, luabridge.h, worker.h, util.h. */
#ifndef JR_WORKER_INT_H
#define JR_WORKER_INT_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "worker/frame.h"
#include "lua/jrlib.h"
#include "lua/luabridge.h"
#include "lua/script.h"
#include "base/util.h"
#include "worker/worker.h"

#define FLUSH_DELAY 0.002       /* seconds a result may wait for company */

typedef struct worker {
    int         fd;
    lua_State  *L;
    jr_settings set;            /* from the master's settings frame */
    jr_scripts  scripts;
    jr_handler *info;           /* the running job's handler */
    int         h;              /* stack index of its handler table */
    jr_jobctx   ctx;
    int         decode_ref;     /* cjson.decode */
    jr_buf      out;            /* frames to write */
    jr_buf      result;         /* the last job's result as JSON text */
    jr_memlimit mem;            /* the Lua state's allocations */
    int         recycle;        /* exit after this job's result */
    double      unflushed_since;/* mono time of the oldest unsent result */
    jr_buf      in;             /* frames read from the master */
    size_t      used;           /* bytes of in already handled */
    double      progress_sent;  /* mono time of the job's last progress */
    char        cancel_msg[64]; /* what the cancel raises */
    char        err[2048];      /* last failure message */
    jr_share   *share;          /* shared with the master, or NULL */
} worker;

/* worker.c: writes the frames in w->out; 0, or -1 when the write failed. */
int  jr_worker_flush(worker *w);

/* run.c: runs job j and fills res (strings borrowed from w until the
 * next job). */
void jr_run_job(worker *w, const jr_job *j, jr_result *res);
/* 1 if a CANCEL frame for job id waits among the frames read. */
int  jr_run_cancel_listed(worker *w, int64_t id);
/* Sets the running handler's cancel check and its jobrunner.cancelled()
 * and jobrunner.progress() hooks, before the libraries open. */
void jr_run_hooks(worker *w);
/* SIGUSR1's handler: a CANCEL frame is on its way or there. */
void jr_run_cancel_signal(int sig);

#endif
