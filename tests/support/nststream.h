/*
 * Reading the tools' JSON output: a check that a document is well formed
 * enough (for every tool with --json), and nicsim-stream's report
 * (docs/stream-sockets.md), for the tests and the benchmark that run it:
 * one result object per line, each starting with {"transport".
 */
#ifndef NSTSTREAM_H
#define NSTSTREAM_H

#include <stdbool.h>
#include <stddef.h>

/* Brackets and braces nest, strings (with escapes) are closed, and
 * nothing is left open. */
bool nst_json_balanced(const char *s);
/* The result objects of a report, at most max, into obj: how many. */
size_t nst_stream_results(const char *doc, const char **obj, size_t max);
/* The value after "key": within obj's line, or NULL. */
const char *nst_json_field(const char *obj, const char *key);
/* The number after "key": in obj's line, or -1 without one. */
double nst_json_num(const char *obj, const char *key);
/* True if key's value starts with text (a string with its quotes, or a
 * literal). */
bool nst_json_value_is(const char *obj, const char *key, const char *text);

#endif /* NSTSTREAM_H */
