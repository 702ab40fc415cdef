/* esc.h - text that came from handlers, payloads or the database, made
 * safe to print on a terminal or in a text log line: one escaping rule
 * for the log, `wait`, `show`, `list`, `dead list` and `stats`. Uses
 * jsontext.h. */
#ifndef JR_ESC_H
#define JR_ESC_H

#include <stddef.h>
#include <stdio.h>

/* Writes into out (size > 0 bytes, always NUL-terminated) the n bytes of s
 * on one line: a backslash, a newline, a tab, a carriage return as \\, \n,
 * \t, \r; other control bytes (C0, DEL, and the two bytes of a C1 control
 * U+0080..U+009F) and each byte that is not UTF-8 as \xNN; the rest
 * copied. Stops before an escape that would not fit. Returns the length
 * written. */
size_t jr_esc_text(char *out, size_t size, const char *s, size_t n);
/* Writes s (a C string; NULL as "-") to f escaped as jr_esc_text. */
void   jr_esc_put(FILE *f, const char *s);
/* Writes the n bytes of s to f escaped as jr_esc_text. */
void   jr_esc_putn(FILE *f, const char *s, size_t n);
/* Escapes the first line of s (up to its first newline; NULL as "") into
 * out as jr_esc_text: a column of a table. Returns out. */
const char *jr_esc_first(char *out, size_t size, const char *s);
/* Escapes s (NULL as "-") into out as jr_esc_text. Returns out. */
const char *jr_esc_str(char *out, size_t size, const char *s);

#endif
