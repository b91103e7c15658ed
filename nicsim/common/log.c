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

/*
 * A log line goes to a terminal sooner or later (`nicsim up` prints the
 * tail of a NIC's log when it fails to start), and parts of it come from
 * others: a host's program name (PR_SET_NAME), a path.  Each control
 * character becomes '?': C0 and DEL, and the C1 ones as UTF-8 writes them
 * (0xc2 0x80..0x9f, which a terminal may take as CSI and the like).
 */
static void plain(char *s)
{
	for (unsigned char *p = (unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			*p = '?';
		} else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			p[0] = '?';
			p[1] = '?';
			p++;
		}
	}
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
	plain(line + n);
	/* One write per line so that lines from several NICs sharing a log do not mix. */
	fprintf(stderr, "%s\n", line);
}
