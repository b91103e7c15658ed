/* Reading nicsim-stream's JSON report (nststream.h). */
#include "nststream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Brackets and braces nest, strings are closed, and nothing is left open. */
bool nst_json_balanced(const char *s)
{
	char stack[64];
	size_t depth = 0;
	bool in_str = false;

	for (; *s; s++) {
		if (in_str) {
			if (*s == '\\' && s[1])
				s++;
			else if (*s == '"')
				in_str = false;
			continue;
		}
		if (*s == '"') {
			in_str = true;
		} else if (*s == '{' || *s == '[') {
			if (depth == sizeof(stack))
				return false;
			stack[depth++] = *s;
		} else if (*s == '}' || *s == ']') {
			if (!depth || stack[--depth] != (*s == '}' ? '{' : '['))
				return false;
		}
	}
	return !in_str && depth == 0;
}

/* The result objects of a report: each starts a line with {"transport". */
size_t nst_stream_results(const char *doc, const char **obj, size_t max)
{
	size_t n = 0;

	for (const char *p = strstr(doc, "{\"transport\""); p && n < max;
	     p = strstr(p + 1, "\n{\"transport\"")) {
		if (*p == '\n')
			p++;
		obj[n++] = p;
	}
	return n;
}

/* The value after "key": within obj's line, or NULL. */
const char *nst_json_field(const char *obj, const char *key)
{
	const char *eol = strchr(obj, '\n'), *p;
	char pat[64];

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(obj, pat);
	return p && (!eol || p < eol) ? p + strlen(pat) : NULL;
}

double nst_json_num(const char *obj, const char *key)
{
	const char *v = nst_json_field(obj, key);

	return v ? strtod(v, NULL) : -1;
}

/* True if key's value starts with text (a string with its quotes, or a
 * literal). */
bool nst_json_value_is(const char *obj, const char *key, const char *text)
{
	const char *v = nst_json_field(obj, key);

	return v && !strncmp(v, text, strlen(text));
}
