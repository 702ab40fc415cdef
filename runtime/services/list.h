/* list.h - the services beside the claim that a runner runs (list.c), in
 * the order the core calls them: the command hands the list to the master
 * (jr_master_run), which calls them through service.h and names none. A
 * new service is one file of this folder and one line of the list
 * (list.c). Uses service.h. */
#ifndef JR_LIST_H
#define JR_LIST_H

#include "master/service.h"

/* NULL-ended. */
extern const jr_service *const jr_services[];

#endif
