/* wlines.c - the master's word on successes whose lines this worker
 * holds (JR_F_LINES; jrloglazy.c): a success the master deletes came
 * back without its lines, and once it was recorded the master says
 * whether its row stayed (a wait's mark): then its lines go to the master
 * as its result again (held 2), made now; else they are dropped. A STOP
 * that came meanwhile takes effect once none is held. Uses frame.h,
 * jrloglazy.h, worker_int.h. */
#include <string.h>

#include "base/log.h"
#include "lua/jrloglazy.h"
#include "worker/frame.h"
#include "worker/worker_int.h"

int
jr_wlines_frame(worker *w, jr_reader *r)
{
    int32_t n = jr_get_i32(r), i;
    jr_result res;
    int64_t id;
    unsigned want;

    if (r->bad || n < 0 || (size_t)n > r->n / 9) {
        jr_log(JR_LOG_ERROR, "malformed lines frame from master");
        return -1;
    }
    for (i = 0; i < n; i++) {
        id = jr_get_i64(r);
        want = jr_get_u8(r);
        if (!want) {
            jr_jrlog_lazy_drop(id);
            continue;
        }
        memset(&res, 0, sizeof res);
        res.id = id;
        res.kind = JR_DONE;
        res.generation = w->scripts.generation;
        res.held = 2;
        res.logs = jr_jrlog_lazy_lines(id, &res.logs_len);
        jr_frame_put_result(&w->out, &res);
    }
    jr_jrlog_lazy_settle();
    if (r->bad || r->n != 0) {
        jr_log(JR_LOG_ERROR, "malformed lines frame from master");
        return -1;
    }
    if (w->out.len > 0 && jr_worker_flush(w) < 0)
        return -1;
    return w->stop_asked && jr_jrlog_lazy_held() == 0;
}
