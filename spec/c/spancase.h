/* spancase.h - the attempts whose spans test_spanrec and test_spanpb
 * encode: span_case fills s and r with the common attempt (a consumer
 * span of job 1234567's first attempt in queue "default", completed) and
 * changes it into the cases both tests share: 1 a child's retry with its
 * error, a key and a generation (each test adds its own done span or
 * link), 2 text to escape (quote, UTF-8, newline), 3 a snooze with a
 * progress event and no due time, 4 no queue and the largest numbers.
 * Any other i is the common attempt, for the test to change. */
#ifndef JR_SPEC_SPANCASE_H
#define JR_SPEC_SPANCASE_H

#include "base/spanrec.h"
#include "base/trace.h"

static const uint8_t link_trace[16] = {0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                       10, 11, 12, 13, 14, 15};
static const uint8_t link_span[8] = {0xcd, 1, 2, 3, 4, 5, 6, 7};

static void
span_case(int i, jr_span *s, jr_spanrec *r)
{
    int k;

    for (k = 0; k < 16; k++)
        s->trace[k] = (uint8_t)(0x10 + k * 7);
    for (k = 0; k < 8; k++) {
        s->id[k] = (uint8_t)(0xa0 + k);
        s->parent[k] = (uint8_t)(0x50 + k * 3);
    }
    s->kind = JR_SPAN_CONSUMER;
    s->start = 1764420000.125;
    s->end = 1764420000.25;
    r->run = s;
    r->job_id = 1234567;
    r->attempt = 1;
    r->run_at = 1764420000.0;
    r->queue = "default";
    r->name = "noop";
    r->outcome = "completed";
    switch (i) {
    case 1:                     /* a child's retry, a key, a generation */
        s->has_parent = 1;
        s->error = 1;
        r->attempt = 3;
        r->key = "tenant-7";
        r->generation = "g12";
        r->outcome = "retry";
        r->error = "boom: no rows at step 2";
        break;
    case 2:                     /* text to escape: quote, UTF-8, newline */
        s->error = 1;
        r->queue = "q\"1";
        r->name = "caf\xc3\xa9";
        r->outcome = "dead";
        r->error = "line 1\nline 2 \\ end";
        break;
    case 3:                     /* a snooze, a progress event, no due time */
        r->outcome = "snoozed";
        r->delay = 30;
        r->run_at = 0;
        jr_span_event(s, "progress", s->start, "jobrunner.progress.note",
                      "half", "jobrunner.progress.done", 0.5);
        break;
    case 4:                     /* no queue, big numbers */
        r->queue = NULL;
        r->job_id = 9223372036854775807LL;
        r->attempt = 2147483647;
        s->kind = 255;
        break;
    }
}

#endif
