/* producer.c - pushing jobs from C with libjobrunner. Built against the
 * installed library with pkg-config only (see the Makefile):
 *
 *     ./producer sqlite:/tmp/jobs.db
 */
#include <inttypes.h>
#include <stdio.h>

#include <jobrunner.h>

static int
print_name(const char *name, const jr_client_counts *n, void *arg)
{
    (void)arg;
    printf("  %-14s %ld queued, %ld running, %ld dead\n", name, n->queued,
           n->running, n->dead);
    return 0;
}

int
main(int argc, char **argv)
{
    jr_client_opts opts = JR_CLIENT_OPTS_INIT;
    jr_client_job batch[] = {
        {"hello", "{\"name\":\"world\"}", JR_CLIENT_OPTS_INIT},
        {"hello", "{\"name\":\"again\"}", {0, 30, 1, NULL, JR_CLIENT_UNSET}},
        {"report.daily", NULL, JR_CLIENT_OPTS_INIT},
    };
    int64_t id, ids[3];
    jr_client_counts total;
    jr_client *c;

    if (jr_client_open(&c, argc > 1 ? argv[1] : "sqlite:jobs.db", NULL)
        != JR_CLIENT_OK)
        goto fail;

    opts.run_in = 60;
    opts.priority = 5;
    opts.queue = "mail";
    opts.max_retries = 3;
    if (jr_client_push(c, "send_email", "{\"to\":\"a@example.com\"}", &opts,
                       &id) != JR_CLIENT_OK)
        goto fail;
    printf("pushed send_email as job %" PRId64 "\n", id);

    if (jr_client_push_many(c, batch, 3, ids) != JR_CLIENT_OK)
        goto fail;
    printf("pushed a batch: %" PRId64 " %" PRId64 " %" PRId64 "\n", ids[0],
           ids[1], ids[2]);

    /* The database refuses invalid JSON; the message names the job. */
    if (jr_client_push(c, "hello", "{not json", NULL, NULL) != JR_CLIENT_OK)
        printf("refused: %s\n", jr_client_errmsg(c));

    if (jr_client_stats(c, &total, print_name, NULL) != JR_CLIENT_OK)
        goto fail;
    printf("queued %ld (ready %ld, scheduled %ld), running %ld, dead %ld\n",
           total.queued, total.ready, total.scheduled, total.running,
           total.dead);
    jr_client_close(c);
    return 0;
fail:
    fprintf(stderr, "producer: %s\n", jr_client_errmsg(c));
    jr_client_close(c);
    return 1;
}
