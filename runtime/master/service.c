/* service.c - the core's calls into the services (service.h): each walks
 * master.c's list of them, jr_master_services, in its order, and calls
 * the callback of every service that has one with that service's state.
 * Owns nothing. Uses service.h, master_int.h. */
#include "master/master_int.h"
#include "master/service.h"

#define EACH(s) \
    for (const jr_service *const *p_ = jr_master_services; \
         ((s) = *p_) != NULL; p_++)
#define ST(m, s) ((m)->svc[(s)->slot])

int
jr_service_init(master *m)
{
    const jr_service *s;

    EACH(s)
        if (s->init != NULL && s->init(m, &ST(m, s)) < 0)
            return -1;
    return 0;
}

int
jr_service_due(master *m)
{
    const jr_service *s;
    int due = 0;

    EACH(s)                     /* each is asked: due may have effects */
        if (s->due != NULL && s->due(m, ST(m, s)))
            due = 1;
    return due;
}

void
jr_service_fill(master *m, jr_cycle *c)
{
    const jr_service *s;

    EACH(s)
        if (s->fill != NULL)
            s->fill(m, ST(m, s), c);
}

void
jr_service_read(master *m, jr_cycle *c)
{
    const jr_service *s;

    EACH(s)
        if (s->read != NULL)
            s->read(m, ST(m, s), c);
}

void
jr_service_taken(master *m, jr_cycle *c)
{
    const jr_service *s;

    EACH(s)
        if (s->taken != NULL)
            s->taken(m, ST(m, s), c);
}

void
jr_service_drop(master *m, jr_cycle *c)
{
    const jr_service *s;

    EACH(s)
        if (s->drop != NULL)
            s->drop(m, ST(m, s), c);
}

void
jr_service_job_start(master *m, const jr_job *j, int worker)
{
    const jr_service *s;

    EACH(s)
        if (s->job_start != NULL)
            s->job_start(m, ST(m, s), j, worker);
}

void
jr_service_job_end(master *m, const jr_job *j, const jr_result *r,
                   double secs)
{
    const jr_service *s;

    EACH(s)
        if (s->job_end != NULL)
            s->job_end(m, ST(m, s), j, r, secs);
}

void
jr_service_job_left(master *m, const jr_job *j, int kind)
{
    const jr_service *s;

    EACH(s)
        if (s->job_left != NULL)
            s->job_left(m, ST(m, s), j, kind);
}

int
jr_service_refuse(master *m, const jr_job *j, const char *why)
{
    const jr_service *s;

    EACH(s)
        if (s->refuse != NULL && s->refuse(m, ST(m, s), j, why))
            return 1;
    return 0;
}

int
jr_service_shapes(master *m)
{
    const jr_service *s;

    EACH(s)
        if (s->shapes != NULL && s->shapes(m, ST(m, s)))
            return 1;
    return 0;
}

void
jr_service_figures(master *m, const jr_cycle *c)
{
    const jr_service *s;

    EACH(s)
        if (s->figures != NULL)
            s->figures(m, ST(m, s), c);
}

void
jr_service_tick(master *m, double now)
{
    const jr_service *s;

    EACH(s)
        if (s->tick != NULL)
            s->tick(m, ST(m, s), now);
}

void
jr_service_reload(master *m, const jr_config *cfg)
{
    const jr_service *s;

    EACH(s)
        if (s->reload != NULL)
            s->reload(m, ST(m, s), cfg);
}

void
jr_service_reloaded(master *m, int ok, const char *error)
{
    const jr_service *s;

    EACH(s)
        if (s->reloaded != NULL)
            s->reloaded(m, ST(m, s), ok, error);
}

void
jr_service_loaded(master *m, const char *const *names, int n)
{
    const jr_service *s;

    EACH(s)
        if (s->loaded != NULL)
            s->loaded(m, ST(m, s), names, n);
}

void
jr_service_scaled(master *m, int from, int to, const char *reason)
{
    const jr_service *s;

    EACH(s)
        if (s->scaled != NULL)
            s->scaled(m, ST(m, s), from, to, reason);
}

void
jr_service_stop(master *m)
{
    const jr_service *s;

    EACH(s)
        if (s->stop != NULL)
            s->stop(m, ST(m, s));
}

void
jr_service_free(master *m)
{
    const jr_service *s;

    EACH(s)
        if (s->free != NULL) {
            s->free(m, ST(m, s));
            ST(m, s) = NULL;
        }
}
