/* jsontext.h - JSON text without Lua: the one check of a payload's text
 * that every push passes whatever its producer and backend (job.c's
 * jr_push_check), UTF-8 sequences, and the writer that prints stored
 * JSON text (a payload a plain SQL insert may have put there) as valid
 * UTF-8, and the one JSON string escaper (payloads, log lines, --json).
 * Uses nothing. */
#ifndef JR_JSONTEXT_H
#define JR_JSONTEXT_H

#include <stddef.h>
#include <stdio.h>

#define JR_JSONTEXT_DEPTH 1000  /* nesting a handler can decode (jsondec.c) */

/* Length of the UTF-8 sequence at s (n > 0 bytes left), or 0 if it is not
 * valid UTF-8: overlong forms, surrogates and code points past U+10FFFF
 * included. */
size_t jr_jsontext_utf8_len(const unsigned char *s, size_t n);

/* Checks that text[0..len) is one JSON value (RFC 8259) that both
 * backends store alike: UTF-8 only, no \u0000 and no lone surrogate
 * escape in strings, numbers within numeric's range (PostgreSQL's jsonb
 * refuses the others), nested at most JR_JSONTEXT_DEPTH deep. Returns 0, or -1 with "byte N: what is wrong"
 * in why (size bytes). */
int jr_jsontext_check(const char *text, size_t len, char *why, size_t size);

/* Writes the stored JSON text s to f as it is, but each byte that is not
 * UTF-8 (only possible inside a string) as \ufffd, so what is printed is
 * valid UTF-8 JSON, and DEL and the C1 controls (U+0080..U+009F, raw only
 * inside a string) as \u007f..\u009f, so a terminal shows them as text.
 * NULL is written as null. */
void jr_jsontext_write(FILE *f, const char *s);

/* The one JSON string escaper (payloads, JSON log lines, the CLI's
 * --json): writes into out what stands for the character at s (n > 0
 * bytes left) inside a JSON string literal and sets *used to the bytes of
 * s it took. '"' and '\\' are backslashed; \n \t \r \b \f as such; other
 * control characters and DEL as \u00XX; a valid UTF-8 sequence is copied.
 * Returns the length written (1..6), or 0 when s does not start with valid
 * UTF-8 (overlong forms, surrogates and code points past U+10FFFF
 * included): the caller fails, or writes JR_JSONTEXT_BADBYTE and skips one
 * byte. */
size_t jr_jsontext_escape_char(const char *s, size_t n, char out[6],
                               size_t *used);
#define JR_JSONTEXT_BADBYTE "\\ufffd"  /* U+FFFD: a byte that is not UTF-8 */

#endif
