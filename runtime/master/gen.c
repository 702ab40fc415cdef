/* gen.c - generations of handler code, and reload. A worker's hello says
 * what it loaded; the first makes the current generation. A reload
 * (SIGHUP, 'jobrunner reload', the scripts watcher) starts a probe worker:
 * when all its handlers load, its generation becomes current and the old
 * one's workers finish their jobs and exit; else the old code runs on.
 * What triggers a reload from outside, the pid file and the inotify watch,
 * is in reload.c. Uses master_int.h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "master/master_int.h"
#include "master/notify.h"

const jr_handler *
jr_gen_handler(const gen *g, const char *name)
{
    int i;

    for (i = 0; g != NULL && i < g->n; i++)
        if (strcmp(g->h[i].name, name) == 0)
            return &g->h[i];
    return NULL;
}

gen *
jr_gen_ref(gen *g)
{
    if (g != NULL)
        g->refs++;
    return g;
}

void
jr_gen_unref(gen *g)
{
    int i;

    if (g == NULL || --g->refs > 0)
        return;
    for (i = 0; i < g->n; i++) {
        free(g->h[i].name);
        free(g->h[i].sequence);
        free(g->h[i].fair);
        free(g->h[i].fair_weights);
    }
    free(g->h);
    free(g->names);
    free(g);
}

/* Returns a new generation made of hello's handlers (taken: hello keeps
 * none), logging its load errors when asked; NULL when out of memory. */
static gen *
gen_new(master *m, jr_hello *hello, int log_errors)
{
    gen *g = calloc(1, sizeof *g);
    int i;

    /* names, NULL, then co_names, NULL: one block */
    if (g == NULL || (g->names = calloc(2 * ((size_t)hello->n + 1),
                                        sizeof *g->names)) == NULL) {
        free(g);
        return NULL;
    }
    memcpy(g->hash, hello->generation, sizeof g->hash);
    g->h = hello->h;
    g->n = hello->n;
    hello->h = NULL;
    hello->n = 0;
    g->co_names = g->names + g->n + 1;
    for (i = 0; i < g->n; i++) {
        g->names[i] = g->h[i].name;
        /* as jr_pool_inflight: the handler's, else defaults.inflight */
        if ((g->h[i].inflight > 0 ? g->h[i].inflight : m->cfg->inflight) > 1)
            g->co_names[g->nco++] = g->h[i].name;
    }
    for (i = 0; log_errors && i < hello->nerrors; i++)
        jr_log(JR_LOG_ERROR, "%s (handler not loaded)", hello->errors[i]);
    g->id = ++m->ngens;
    g->co_any = -1;
    return g;
}

/* Makes g the current generation: claims use its names, its workers get
 * the jobs; workers of the old one finish what they hold and exit. */
static void
switch_gen(master *m, gen *g)
{
    gen *old = m->gen;
    size_t i, n = m->qlen;
    wk *w;

    m->gen = jr_gen_ref(g);
    for (w = m->workers; w; w = w->next)
        if (w->gen == old && !w->probe) {
            w->retiring = 1;
            if (w->njobs == 0)
                jr_pool_stop(m, w);
            else                /* their checkpoints hand their jobs back */
                jr_pool_handback(m, w);
        }
    for (i = 0; i < n; i++) {       /* names it no longer has go back */
        jr_job *j = jr_claimq_pop(m);
        if (jr_gen_handler(g, j->name) != NULL)
            jr_claimq_push(m, j, 0);
        else
            jr_claimq_release(m, j);
    }
    jr_gen_unref(old);
    m->want_claim = 1;
}

/* Tells systemd the runner is ready: the database was reached at start,
 * the handlers of the current generation are loaded. */
static void
notify_ready(master *m)
{
    char msg[128];

    snprintf(msg, sizeof msg, "READY=1\nSTATUS=generation %s, %d handler%s",
             m->gen->hash, m->gen->n, m->gen->n == 1 ? "" : "s");
    jr_notify_send(m->notify, msg);
}

/* 1 when the scoped tokens a and b differ in anything: name, secret,
 * scope or queues. */
static int
tokens_differ(const jr_token *a, int na, const jr_token *b, int nb)
{
    int i, k;

    if (na != nb)
        return 1;
    for (i = 0; i < na; i++) {
        if (strcmp(a[i].name, b[i].name) != 0 ||
            strcmp(a[i].secret, b[i].secret) != 0 ||
            a[i].scope != b[i].scope || a[i].nqueues != b[i].nqueues)
            return 1;
        for (k = 0; k < a[i].nqueues; k++)
            if (strcmp(a[i].queues[k], b[i].queues[k]) != 0)
                return 1;
    }
    return 0;
}

/* The HTTP server keeps the tokens it started with: a reload after the
 * token or http.tokens (or a file or variable) changed says so, never a
 * token. */
static void
token_changed(const master *m, const jr_config *c)
{
    const char *was = m->cfg->http_token, *now = c->http_token;

    if ((was == NULL) != (now == NULL) ||
        (was != NULL && strcmp(was, now) != 0))
        jr_log(JR_LOG_WARN, "reload: the http token changed; the HTTP "
               "server keeps the one it started with (the old token "
               "still works) until the runner is restarted");
    if (tokens_differ(m->cfg->http_tokens, m->cfg->http_ntokens,
                      c->http_tokens, c->http_ntokens))
        jr_log(JR_LOG_WARN, "reload: http.tokens changed; the HTTP server "
               "keeps the tokens it started with until the runner is "
               "restarted");
}

/* The key file is read at the start only (the master's HTTP pushes, and
 * the workers, which get the master's settings): a reload after
 * encryption.key_file was added, removed or moved says that nothing of
 * it changes until a restart (values would go on being stored in clear,
 * or sealed, unlike the config). */
static void
key_file_changed(const master *m, const jr_config *c)
{
    const char *was = m->cfg->key_file, *now = c->key_file;

    if ((was == NULL) != (now == NULL) ||
        (was != NULL && strcmp(was, now) != 0))
        jr_log(JR_LOG_WARN, "reload: encryption.key_file changed (was %s%s%s,"
               " now %s%s%s); values are sealed and opened as at the start "
               "until the runner is restarted", was ? "'" : "",
               was ? was : "none", was ? "'" : "", now ? "'" : "",
               now ? now : "none", now ? "'" : "");
}

/* The export thread keeps the tracing table it started with
 * (docs/tracing.md): a reload after it changed says so, never its
 * endpoint or headers (credentials). */
static void
tracing_changed(const master *m, const jr_config *c)
{
    const jr_config *was = m->cfg;
    int i, diff;

    diff = (was->trace_endpoint == NULL) != (c->trace_endpoint == NULL) ||
           (c->trace_endpoint != NULL &&
            strcmp(was->trace_endpoint, c->trace_endpoint) != 0) ||
           was->trace_sample != c->trace_sample ||
           was->trace_queue != c->trace_queue ||
           was->trace_protocol != c->trace_protocol ||
           was->trace_nheaders != c->trace_nheaders;
    for (i = 0; !diff && i < c->trace_nheaders; i++)
        diff = strcmp(was->trace_headers[i], c->trace_headers[i]) != 0;
    if (diff)
        jr_log(JR_LOG_WARN, "reload: the tracing table changed; the runner "
               "keeps the one it started with until it is restarted");
}

/* Checks the config file again before a reload, as the runner's start
 * did: a broken one fails the reload and the current generation keeps
 * running. Workers never read it (they get the master's settings), so
 * this is where a reload hears of it. Returns 0 when it loads. */
static int
config_check(master *m)
{
    jr_config c;
    jr_err err;
    int rc = 0;

    if (m->cfg->file == NULL)
        return 0;
    jr_config_defaults(&c);
    if (jr_config_load(&c, m->cfg->file, NULL, &err) < 0) {
        jr_log(JR_LOG_ERROR, "reload failed, generation %s keeps running: "
               "%s", m->gen->hash, err.msg);
        jr_service_reloaded(m, 0, err.msg);
        rc = -1;
    } else {
        jr_service_reload(m, &c);  /* schedules follow the config */
        token_changed(m, &c);
        key_file_changed(m, &c);
        tracing_changed(m, &c);
    }
    jr_config_free(&c);
    return rc;
}

void
jr_gen_reload(master *m)
{
    if (m->stopping || m->gen == NULL)
        return;
    /* one loader at a time, and only beside at most concurrency.max
     * workers: while leaving ones are still there, it waits for their
     * exit (jr_death_reap starts it) */
    if (m->probe != NULL || jr_pool_procs(m) > m->cfg->conc_max) {
        if (m->probe == NULL && !m->reload_again)
            jr_log(JR_LOG_INFO, "reload: %d worker processes (max %d): "
                   "waiting for leaving ones to exit first",
                   jr_pool_procs(m), m->cfg->conc_max);
        m->reload_again = 1;
        return;
    }
    if (config_check(m) < 0)
        return;
    jr_log(JR_LOG_INFO, "reloading handlers from %s", m->cfg->scripts);
    jr_notify_send(m->notify, "RELOADING=1");
    if ((m->probe = jr_pool_spawn(m)) != NULL)
        m->probe->probe = 1;
    else
        notify_ready(m);
}

/* A probe's hello: the new code loaded cleanly, or the old code stays. */
static void
probe_hello(master *m, wk *w, gen *g, int nerr, const char *first)
{
    m->probe = NULL;
    w->probe = 0;
    if (nerr > 0) {
        jr_log(JR_LOG_ERROR, "reload failed, generation %s keeps running: %s",
               m->gen->hash, first);
        /* its verdict holds for these files until they change: workers
         * started meanwhile that load them do not reload again */
        memcpy(m->failed_hash, g->hash, sizeof m->failed_hash);
        jr_service_reloaded(m, 0, first);
        notify_ready(m);
        jr_gen_unref(jr_gen_ref(g));
        jr_pool_stop(m, w);
    } else if (strcmp(g->hash, m->gen->hash) == 0) {
        jr_spawn_started(m);
        m->failed_hash[0] = '\0';
        jr_log(JR_LOG_INFO, "reload: handlers unchanged (generation %s)",
               g->hash);
        jr_gen_unref(jr_gen_ref(g));
        w->gen = jr_gen_ref(m->gen);
        jr_service_reloaded(m, 1, NULL);
        notify_ready(m);
    } else {
        jr_spawn_started(m);
        m->failed_hash[0] = '\0';
        jr_log(JR_LOG_INFO, "reloaded: generation %s with %d handler%s "
               "(was %s)", g->hash, g->n, g->n == 1 ? "" : "s",
               m->gen->hash);
        w->gen = jr_gen_ref(g);
        switch_gen(m, g);
        jr_service_reloaded(m, 1, NULL);
        notify_ready(m);
    }
    w->ready = 1;
    w->idle_since = jr_mono();
    jr_pool_fit(m);
    if (m->reload_again) {
        m->reload_again = 0;
        jr_gen_reload(m);
    }
}

/* A worker whose set-up failed (config, libraries) before it could load
 * any handler: its empty hello is no generation. A probe's reload fails
 * and the current generation keeps running; any other worker exits and is
 * replaced, with the spawn backoff. */
static void
setup_failed(master *m, wk *w, const char *why)
{
    if (!w->probe) {
        jr_spawn_cannot(m, w, why);
        return;
    }
    m->probe = NULL;
    w->probe = 0;
    jr_log(JR_LOG_ERROR, "reload failed, generation %s keeps running: %s",
           m->gen->hash, why);
    jr_service_reloaded(m, 0, why);
    notify_ready(m);
    jr_pool_stop(m, w);
    if (m->reload_again) {
        m->reload_again = 0;
        jr_gen_reload(m);
    }
}

/* A worker (not a probe) that loaded other code than the current
 * generation: the scripts changed since it loaded. It is given no job and
 * stops; its replacement comes with the spawn backoff (death.c), so that
 * nothing here restarts workers in a loop. When the files it loaded are
 * the ones whose reload failed and they failed here too, that verdict
 * stands: no reload again (a storm of them, a fork each, while a broken
 * file sat in scripts/), it cannot start, logged once. Else the new code
 * is tried by a reload, as SIGHUP would. */
static void
other_code(master *m, wk *w, gen *g, int nerr, const char *first)
{
    char why[sizeof m->nostart];

    w->held_back = 1;
    if (nerr > 0 && strcmp(g->hash, m->failed_hash) == 0) {
        snprintf(why, sizeof why, "the handler files on disk fail to load "
                 "(their reload failed; generation %s keeps running until "
                 "they are fixed): %s", m->gen->hash, first);
        jr_gen_unref(jr_gen_ref(g));
        jr_spawn_cannot(m, w, why);
        jr_pool_stop(m, w);
        return;
    }
    jr_log(JR_LOG_INFO, "worker %d loaded other handler code than "
           "generation %s: reloading", w->id, m->gen->hash);
    jr_gen_unref(jr_gen_ref(g));
    jr_pool_stop(m, w);
    jr_gen_reload(m);
}

/* A hello that carried handlers: a probe's new generation, the first one,
 * or one more worker of the current one. */
static void
on_hello_gen(master *m, wk *w, gen *g, int nerr, const char *first)
{
    if (m->gen != NULL && !w->probe && nerr > 0 && g->n < m->gen->n &&
        strcmp(g->hash, m->gen->hash) == 0) {
        /* the same files, but one failed here (it fails now and then):
         * jobs of it given to this worker would find no handler */
        jr_gen_unref(jr_gen_ref(g));
        jr_spawn_cannot(m, w, first);
        jr_pool_stop(m, w);
        return;
    }
    if (w->probe) {
        probe_hello(m, w, g, nerr, first);
        return;
    }
    if (m->gen != NULL && strcmp(g->hash, m->gen->hash) != 0) {
        /* the scripts changed since the current generation loaded */
        other_code(m, w, g, nerr, first);
        return;
    }
    jr_spawn_started(m);
    if (m->gen == NULL) {           /* the first worker: start-up code */
        m->gen = jr_gen_ref(g);
        jr_log(JR_LOG_INFO, "loaded %d handler%s from %s (generation %s)",
               g->n, g->n == 1 ? "" : "s", m->cfg->scripts, g->hash);
        if (g->n == 0)
            jr_log(JR_LOG_WARN, "no handlers loaded: no job will be claimed;"
                   " add scripts/NAME.lua returning a function");
        jr_service_loaded(m, g->names, g->n);
        m->want_claim = 1;
        notify_ready(m);
    } else {
        jr_gen_unref(jr_gen_ref(g));
    }
    w->gen = jr_gen_ref(m->gen);
    w->ready = 1;
    w->idle_since = jr_mono();
}

void
jr_gen_hello(master *m, wk *w, jr_reader *r)
{
    const char *first;
    jr_hello hello;
    jr_err err;
    int nerr;
    gen *g;

    if (jr_frame_get_hello(r, &hello, &err) < 0) {
        jr_log(JR_LOG_ERROR, "worker %d: %s", w->id, err.msg);
        jr_hello_free(&hello);
        kill(w->pid, SIGKILL);
        return;
    }
    if (hello.setup_error != NULL) {
        setup_failed(m, w, hello.setup_error);
        jr_hello_free(&hello);
        return;
    }
    if ((g = gen_new(m, &hello, m->gen == NULL)) == NULL) {
        jr_log(JR_LOG_ERROR, "worker %d: hello: out of memory", w->id);
        jr_hello_free(&hello);
        kill(w->pid, SIGKILL);
        return;
    }
    nerr = hello.nerrors;
    first = nerr > 0 ? hello.errors[0] : "";
    on_hello_gen(m, w, g, nerr, first);
    jr_hello_free(&hello);
}
