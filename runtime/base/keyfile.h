/* keyfile.h - the key file of encrypted values (keyfile.c): its lines
 * "ID BASE64" read and checked, the file's mode first; base64 both ways.
 * What keyring.c reads its keys with; jr_keyring_new_key (keyring.h)
 * writes a new one at its top. Uses keyring.h, err.h. */
#ifndef JR_KEYFILE_H
#define JR_KEYFILE_H
#include <stddef.h>
#include "base/err.h"
#include "base/keyring.h"

#define JR_KEY_BYTES 32         /* an AES-256 key */

typedef struct jr_keyfile_key {
    char          id[JR_KEYID_MAX + 1];
    unsigned char k[JR_KEY_BYTES];
} jr_keyfile_key;

/* What tells a file changed since it was read. */
typedef struct jr_keyfile_stamp {
    long long mtime_s, mtime_ns, size, ino;
} jr_keyfile_stamp;

/* Reads the key file at path into *v (malloc'd, *n keys, at least one;
 * free with jr_keyfile_clear) and its stamp: -1 with err set naming the
 * file (missing, open to group or others with its mode, empty) or
 * file:line (malformed), never a key's text. */
int  jr_keyfile_read(const char *path, jr_keyfile_key **v, int *n,
                     jr_keyfile_stamp *stamp, jr_err *err);
/* Whether the file at path is not the one stamp was taken of. */
int  jr_keyfile_changed(const char *path, const jr_keyfile_stamp *stamp);
/* Wipes and frees v[0..n) (NULL is a no-op). */
void jr_keyfile_clear(jr_keyfile_key *v, int n);
/* 1 if c may be in a key id. */
int  jr_keyfile_id_char(int c);
/* base64 (RFC 4648, padded) of n bytes into out (4 * ((n + 2) / 3) + 1
 * bytes): its length; and back: the length, or -1 when s is no base64. */
size_t jr_keyfile_b64_enc(const unsigned char *p, size_t n, char *out);
long   jr_keyfile_b64_dec(const char *s, size_t n, unsigned char *out);

#endif
