/* vacuum.h - the runner vacuums PostgreSQL's jobs table itself (vacuum.c):
 * after every `vacuum_every` jobs it finished, on a connection and thread
 * of their own. A service (jr_vacuum_service, service.h); the lane's
 * rounds tell it of theirs here. Uses master_int.h. */
#ifndef JR_VACUUM_H
#define JR_VACUUM_H

struct master;
typedef struct jr_vacuum jr_vacuum;

/* n more jobs were recorded finished, and the cycle was slow (a big claim
 * that took long) or not: ask for a vacuum when it is time. */
void jr_vacuum_note(struct master *m, long n, int slow);

#endif
