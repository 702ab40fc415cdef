/* service.c - the core's calls into the services (service.h): each walks
 * the list the runner was started with (m->services), in its order, and
 * calls the callback of every service that has one with that service's
 * state. Owns the states' array, m->svc, by place in the list. Uses
 * service.h, master_int.h. */
#include <stdlib.h>

#include "master/master_int.h"
#include "master/service.h"

/* Each service s of m's list, i its place in it. */
#define EACH(m, s) \
    for (int i_ = 0; ((s) = (m)->services[i_]) != NULL; i_++)
#define ST(m, s) ((m)->svc != NULL ? (m)->svc[i_] : NULL)

int
jr_service_host(master *m, struct jr_httphost *h)
{
    const jr_service *s;

    EACH(m, s)
        if (s->host != NULL && s->host(m, h) < 0)
            return -1;
    return 0;
}

int
jr_service_init(master *m)
{
    const jr_service *s;
    int n = 0;

    while (m->services[n] != NULL)
        n++;
    if ((m->svc = calloc(n + 1, sizeof *m->svc)) == NULL)
        return -1;
    EACH(m, s)
        if (s->init != NULL && s->init(m, &m->svc[i_]) < 0)
            return -1;
    return 0;
}

void
jr_service_started(master *m)
{
    const jr_service *s;

    EACH(m, s)
        if (s->started != NULL)
            s->started(m, ST(m, s));
}

void
jr_service_recorded(master *m, long n)
{
    const jr_service *s;

    EACH(m, s)
        if (s->recorded != NULL)
            s->recorded(m, ST(m, s), n);
}

void
jr_service_stopped(master *m)
{
    const jr_service *s;

    EACH(m, s)
        if (s->stopped != NULL)
            s->stopped(m, ST(m, s));
}

void *
jr_service_state(const master *m, const jr_service *s)
{
    const jr_service *t;

    EACH(m, t)
        if (t == s)
            return ST(m, t);
    return NULL;
}

int
jr_service_due(master *m)
{
    const jr_service *s;
    int due = 0;

    EACH(m, s)                     /* each is asked: due may have effects */
        if (s->due != NULL && s->due(m, ST(m, s)))
            due = 1;
    return due;
}

void
jr_service_fill(master *m, jr_cycle *c)
{
    const jr_service *s;

    EACH(m, s)
        if (s->fill != NULL)
            s->fill(m, ST(m, s), c);
}

void
jr_service_read(master *m, jr_cycle *c)
{
    const jr_service *s;

    EACH(m, s)
        if (s->read != NULL)
            s->read(m, ST(m, s), c);
}

void
jr_service_taken(master *m, jr_cycle *c)
{
    const jr_service *s;

    EACH(m, s)
        if (s->taken != NULL)
            s->taken(m, ST(m, s), c);
}

void
jr_service_drop(master *m, jr_cycle *c)
{
    const jr_service *s;

    EACH(m, s)
        if (s->drop != NULL)
            s->drop(m, ST(m, s), c);
}

void
jr_service_job_start(master *m, const jr_job *j, int worker)
{
    const jr_service *s;

    EACH(m, s)
        if (s->job_start != NULL)
            s->job_start(m, ST(m, s), j, worker);
}

void
jr_service_ran_on(master *m, const jr_result *r)
{
    const jr_service *s;

    EACH(m, s)
        if (s->ran_on != NULL)
            s->ran_on(m, ST(m, s), r);
}

void
jr_service_job_end(master *m, const jr_job *j, const jr_result *r,
                   double secs)
{
    const jr_service *s;

    EACH(m, s)
        if (s->job_end != NULL)
            s->job_end(m, ST(m, s), j, r, secs);
}

void
jr_service_job_left(master *m, const jr_job *j, int kind)
{
    const jr_service *s;

    EACH(m, s)
        if (s->job_left != NULL)
            s->job_left(m, ST(m, s), j, kind);
}

int
jr_service_refuse(master *m, const jr_job *j, const char *why)
{
    const jr_service *s;

    EACH(m, s)
        if (s->refuse != NULL && s->refuse(m, ST(m, s), j, why))
            return 1;
    return 0;
}

int
jr_service_shapes(master *m)
{
    const jr_service *s;

    EACH(m, s)
        if (s->shapes != NULL && s->shapes(m, ST(m, s)))
            return 1;
    return 0;
}

void
jr_service_figures(master *m, const jr_cycle *c)
{
    const jr_service *s;

    EACH(m, s)
        if (s->figures != NULL)
            s->figures(m, ST(m, s), c);
}

void
jr_service_tick(master *m, double now)
{
    const jr_service *s;

    EACH(m, s)
        if (s->tick != NULL)
            s->tick(m, ST(m, s), now);
}

void
jr_service_reload(master *m, const jr_config *cfg)
{
    const jr_service *s;

    EACH(m, s)
        if (s->reload != NULL)
            s->reload(m, ST(m, s), cfg);
}

void
jr_service_reloaded(master *m, int ok, const char *error)
{
    const jr_service *s;

    EACH(m, s)
        if (s->reloaded != NULL)
            s->reloaded(m, ST(m, s), ok, error);
}

void
jr_service_loaded(master *m, const char *const *names, int n)
{
    const jr_service *s;

    EACH(m, s)
        if (s->loaded != NULL)
            s->loaded(m, ST(m, s), names, n);
}

void
jr_service_scaled(master *m, int from, int to, const char *reason)
{
    const jr_service *s;

    EACH(m, s)
        if (s->scaled != NULL)
            s->scaled(m, ST(m, s), from, to, reason);
}

void
jr_service_stop(master *m)
{
    const jr_service *s;

    EACH(m, s)
        if (s->stop != NULL)
            s->stop(m, ST(m, s));
}

void
jr_service_free(master *m)
{
    const jr_service *s;

    EACH(m, s)
        if (s->free != NULL)
            s->free(m, ST(m, s));
    free(m->svc);
    m->svc = NULL;
}
