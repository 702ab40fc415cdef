/* lane.h - PostgreSQL: a second database round in flight while the first
 * is out, on a connection and thread of its own (lane.c). Uses
 * master_int.h. */
#ifndef JR_LANE_H
#define JR_LANE_H

struct master;
typedef struct jr_lane jr_lane;

/* While the first connection's round is out: sends the pending results
 * and a claim of want jobs on the lane if this round may take it (plain,
 * PostgreSQL, big enough, the lane free). 1 if sent, else 0. */
int  jr_lane_round(struct master *m, int want);
/* A claim of want jobs, cut to half a round when the lane may take the
 * other half. */
int  jr_lane_split(struct master *m, int want);
/* Results on their way on the lane (they count as held). */
int  jr_lane_held(const struct master *m);
/* Waits for its round (taken in, or given back when stopping), closes the
 * connection. Returns 1 when a handler's statement that did not end was
 * interrupted (jr_dbthread_settle), else 0. */
int  jr_lane_stop(struct master *m);

#endif
