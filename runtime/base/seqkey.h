/* seqkey.h - a handler's sequence option applied at push (docs/queues.md,
 * "Sequences"): the jobs of a name whose handler says `sequence =
 * "payload.PATH"` and that are pushed without a sequence (nor after, a
 * batch or a unique key) go into the sequence named by their payload's
 * value at PATH. The engines look the path up (the sequence_paths table
 * each runner writes from its handlers); this reads the key and makes
 * the copy of the push with it. No Lua. Uses job.h, err.h. */
#ifndef JR_SEQKEY_H
#define JR_SEQKEY_H

#include <stddef.h>

#include "base/err.h"
#include "base/job.h"

#define JR_SEQKEY_MAX 256       /* bytes of a sequence key */

/* The value at path ("a.b") of the JSON object payload (NULL: "{}") as a
 * sequence key into out (JR_SEQKEY_MAX + 1 bytes): a string as it
 * decodes, a number as written. 1 when there is one of 1 to
 * JR_SEQKEY_MAX bytes, else 0 (none, another type, not JSON). */
int jr_seq_key_of(const char *payload, const char *path, char *out);

/* 1 if p may take its handler's sequence: pushed without a sequence, an
 * after, a batch or a unique key. */
int jr_seq_key_wanted(const jr_push *p);

/* The engine's look-up: the path of name's handler into *path (valid
 * until the next call), 1; 0 when it has none; -1 with err set. */
typedef int (*jr_seq_path_fn)(void *arg, const char *name,
                              const char **path, jr_err *err);

/* The handlers' sequences of p[0..n): when one applies, *out gets a copy
 * of p in which those jobs have it (free with jr_seq_apply_free), and 1
 * comes back; 0 (*out NULL) when none applies; -1 with err set. */
int  jr_seq_apply(const jr_push *p, int n, jr_seq_path_fn path_of,
                  void *arg, jr_push **out, jr_err *err);
void jr_seq_apply_free(jr_push *q, int n);

#endif
