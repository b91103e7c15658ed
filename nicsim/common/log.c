#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int nic_log_level_parse(const char *text, enum nic_log_level *level)
{
	for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (text && strcmp(text, level_names[i]) == 0) {
			*level = (enum nic_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void nic_log_printf(const struct nic_log *log, enum nic_log_level level, const char *fmt, ...)
{
	char line[1024], stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (level > log->level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "%s.%06ldZ %s %s: ", stamp, ts.tv_nsec / 1000, log->prefix,
		     level_names[level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write per line so that lines from several NICs sharing a log do not mix. */
	fprintf(stderr, "%s\n", line);
}
