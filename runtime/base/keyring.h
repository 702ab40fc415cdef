/* keyring.h - the encryption keys of a key file, and the envelope that
 * seals a JSON value with one (docs/operations.md, "Encryption").
 * A key file is lines "ID BASE64" (32 bytes each); the first line's key
 * seals, every key opens. A sealed value is the JSON text
 * {"$jr_enc":"v1:ID:BASE64(nonce|ciphertext|tag)"}: AES-256-GCM (OpenSSL's
 * libcrypto), a random 96-bit nonce each, the version and key id as
 * associated data, the plaintext padded to a multiple of 32 bytes first.
 * Uses err.h, util.h, job.h. */
#ifndef JR_KEYRING_H
#define JR_KEYRING_H
#include <stddef.h>
#include "base/err.h"
#include "base/job.h"
#include "base/util.h"

typedef struct jr_keyring jr_keyring;   /* opaque; fields in keyring.c */

#define JR_KEYID_MAX 32                 /* bytes of a key id */
#define JR_SEAL_MARK "\"$jr_enc\""      /* the envelope's one key */

/* Reads the key file at path: refused (NULL, err set naming the file)
 * when it is missing, readable or writable by group or others (its mode
 * named), empty, or has a malformed line (path:line named; never the
 * key's text). */
jr_keyring *jr_keyring_load(const char *path, jr_err *err);
void        jr_keyring_free(jr_keyring *k);     /* NULL is a no-op */
/* Reads the file again into k when it changed (a key added since):
 * 1 when reloaded, 0 when unchanged, -1 with err set (k kept). */
int         jr_keyring_reload(jr_keyring *k, jr_err *err);
const char *jr_keyring_path(const jr_keyring *k);
const char *jr_keyring_first(const jr_keyring *k);  /* the sealing key's id */
int         jr_keyring_has(const jr_keyring *k, const char *id);

/* Appends the envelope of the n bytes of JSON text plain to out. 0, or -1
 * with err set. */
int jr_keyring_seal(const jr_keyring *k, const char *plain, size_t n,
                    jr_buf *out, jr_err *err);
/* Opens every envelope in the JSON text s (n bytes): 0 and *out NULL when
 * it holds none; 1 and *out a malloc'd NUL-terminated text (*outn bytes)
 * with each envelope replaced by its value; -1 with err set naming the
 * key id when one cannot be opened (an unknown key, a value tampered
 * with). */
int jr_keyring_open(const jr_keyring *k, const char *s, size_t n,
                    char **out, size_t *outn, jr_err *err);

/* Seals the payload of each of p[0..n) (NULL: {}) into store (reset
 * first), pointing the payloads at their envelopes there: the pushes are
 * valid while store is. A payload already sealed is left as it is when
 * it opens with k, else refused (a forged or damaged envelope would fail
 * its job at each attempt). 0, or -1 with err set naming the job. */
int jr_keyring_seal_pushes(const jr_keyring *k, jr_push *p, int n,
                           jr_buf *store, jr_err *err);

/* Seals again, with the first key, every envelope of the JSON text s (n
 * bytes) under another key (all of them when also_plain and s holds none:
 * then s itself is sealed): 0 and *out NULL when nothing changes; 1 and
 * *out the new malloc'd text; -1 with err set (a key not in the file, a
 * value tampered with). */
int jr_keyring_reseal(const jr_keyring *k, const char *s, size_t n,
                      int also_plain, char **out, jr_err *err);
/* Calls cb(id, arg) for the key id of each envelope in s; returns how
 * many it found. No key needed. */
int jr_seal_ids(const char *s, size_t n,
                void (*cb)(const char *id, void *arg), void *arg);

/* Whether the JSON text s is one envelope (whitespace around allowed):
 * 1 with its key id in id (JR_KEYID_MAX + 1 bytes), else 0. No key
 * needed. */
int jr_seal_id(const char *s, size_t n, char *id);
/* The longest text s may be for a value of max bytes: max when s is no
 * envelope, else the length of an envelope of max bytes (a payload that
 * was at most max_payload before it was sealed). */
size_t jr_seal_size(size_t max, const char *s);
/* Whether the text s holds an envelope anywhere (a fast look). */
int jr_seal_any(const char *s, size_t n);

/* The sealed value as a database stores it in a column of bytes beside
 * its stub (docs/operations.md, "Encryption"): the stub is the JSON text
 * {"$jr_enc":"v1:ID:sealed"} (JR_SEAL_STUB_MAX bytes at most), the bytes
 * the envelope's base64 decoded (nonce, ciphertext, tag): the same value,
 * a quarter smaller, and the same envelope again when joined. */
#define JR_SEAL_STUB_MAX (sizeof "{\"$jr_enc\":\"v1::sealed\"}" + JR_KEYID_MAX)
/* 1 when the text s (n bytes) is exactly one envelope as seal writes it
 * (no space, a well-formed body): its stub in stub (NUL-terminated), its
 * bytes in raw (reset first); 0 when it is not (any other text, kept as
 * it is); -1 out of memory. No key needed. */
int jr_seal_split(const char *s, size_t n, char *stub, jr_buf *raw);
/* Whether the text s (n bytes) is a stub: 1 or 0. */
int jr_seal_is_stub(const char *s, size_t n);
/* Appends to out the envelope of the stub s (n bytes) and its bytes raw
 * (rawn): 0, or -1 when s is no stub or out of memory. */
int jr_seal_join(const char *s, size_t n, const void *raw, size_t rawn,
                 jr_buf *out);

/* Adds a fresh random key at the top of the key file at path (the file
 * a symlink points at), creating it with mode 0600 when missing; its
 * directory locked (flock) meanwhile, so calls at once all add their key;
 * its id (JR_KEYID_MAX + 1 bytes) in id. 0, or -1 with err set. */
int jr_keyring_new_key(const char *path, char *id, jr_err *err);

#endif
