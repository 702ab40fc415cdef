/* block.c - the warning of a blocking call in a handler that runs many
 * jobs at once: while coroutine jobs run, an interval timer ticks every
 * BLOCK_TICK; a resume notes its start, and a tick that finds one running
 * over JR_BLOCK_WARN (the job has not yielded: os.execute, io.popen, a C
 * module) makes the count hook look at once, and at
 * the next Lua instruction, after the blocking call returned, the file and
 * line are logged once per handler. A call that never returns is the
 * master's to kill (the job's timeout). Owns SIGALRM in a worker after
 * loading and the handlers warned. Uses worker_int.h, luabridge.h,
 * log.h. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <lua.h>

#include "base/log.h"
#include "worker/worker_int.h"

#define BLOCK_WARN JR_BLOCK_WARN
#define BLOCK_TICK 0.05         /* seconds between the timer's looks */

static volatile sig_atomic_t blocked;
static lua_State *volatile   resumed;   /* the thread being resumed */
static int64_t               since_us;  /* its start, or 0 (atomic) */

static int64_t
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);    /* async-signal-safe */
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A stretch between yields longer than BLOCK_WARN: SIGALRM marks it and
 * has the count hook look at once, which names the line (jr_co_check). */
static void
on_alarm(int sig)
{
    lua_State *L = resumed;
    int64_t s = __atomic_load_n(&since_us, __ATOMIC_ACQUIRE);

    (void)sig;
    if (s == 0 || now_us() - s < (int64_t)(BLOCK_WARN * 1e6))
        return;
    blocked = 1;
    if (L != NULL)
        jr_luabridge_interrupt(L);
}

static int
warned(const jr_co *co, const char *name)
{
    int i;

    for (i = 0; i < co->nwarned; i++)
        if (strcmp(co->warned[i], name) == 0)
            return 1;
    return 0;
}

void
jr_block_arm(int on)
{
    static int ours;            /* SIGALRM is ours (after the loading's) */
    static int armed;
    struct itimerval it;
    struct sigaction sa;

    if (on == armed)
        return;                 /* the common case: no system call */
    armed = on;
    if (!ours) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;   /* a blocking call goes on */
        sigaction(SIGALRM, &sa, NULL);
        ours = 1;
    }
    memset(&it, 0, sizeof it);
    if (on) {
        it.it_interval.tv_usec = (long)(BLOCK_TICK * 1e6);
        it.it_value = it.it_interval;
    }
    setitimer(ITIMER_REAL, &it, NULL);
}

void
jr_block_watch(const cojob *cj, int on)
{
    int64_t s = 0;

    if (on && cj->w->co->nwarned < 64 && !warned(cj->w->co, cj->j->name))
        s = now_us();
    __atomic_store_n(&since_us, s, __ATOMIC_RELEASE);
    if (!on)
        blocked = 0;
}

/* Logs once per handler where a coroutine job ran BLOCK_WARN without
 * yielding: the line that runs once the blocking call returned. */
static void
warn_blocking(cojob *cj, lua_State *L)
{
    jr_co *co = cj->w->co;
    lua_Debug ar;
    char where[300] = "?";

    if (warned(co, cj->j->name) || co->nwarned >= 64)
        return;
    snprintf(co->warned[co->nwarned++], sizeof co->warned[0], "%s",
             cj->j->name);
    if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "Sl", &ar))
        snprintf(where, sizeof where, "%s:%d", ar.short_src, ar.currentline);
    jr_log(JR_LOG_WARN, "job %lld (%s): %s: the handler ran over %gs "
           "without yielding (a blocking call: os.execute, io.popen, a C "
           "module?); with inflight = %d its other jobs in this worker wait "
           "meanwhile: use jobrunner.http, jobrunner.sleep or jobrunner.exec "
           "(logged once per handler)", (long long)cj->j->id, cj->j->name,
           where, BLOCK_WARN, jr_co_inflight(cj->w, cj->j));
}

lua_State *
jr_block_resumed(lua_State *L)
{
    lua_State *was = resumed;

    resumed = L;
    return was;
}

void
jr_block_check(cojob *cj, lua_State *L)
{
    if (!blocked)
        return;
    blocked = 0;
    warn_blocking(cj, L);
}
