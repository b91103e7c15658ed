/*
 * Logging of a nicsim daemon: one line per event on stderr, with a UTC
 * timestamp, the NIC's address and a level.  The level and the prefix live in
 * a struct nic_log owned by the daemon object, not in globals.
 */
#ifndef NICSIM_LOG_H
#define NICSIM_LOG_H

enum nic_log_level {
	NIC_LOG_ERROR = 0,
	NIC_LOG_WARN = 1,
	NIC_LOG_INFO = 2,
	NIC_LOG_DEBUG = 3,
};

struct nic_log {
	enum nic_log_level level;
	char prefix[40]; /* e.g. "nicsimd[198.18.0.1]" */
};

/* Parse "error", "warn", "info" or "debug"; -EINVAL otherwise. */
int nic_log_level_parse(const char *text, enum nic_log_level *level);

void nic_log_printf(const struct nic_log *log, enum nic_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define nic_err(l, ...) nic_log_printf((l), NIC_LOG_ERROR, __VA_ARGS__)
#define nic_warn(l, ...) nic_log_printf((l), NIC_LOG_WARN, __VA_ARGS__)
#define nic_info(l, ...) nic_log_printf((l), NIC_LOG_INFO, __VA_ARGS__)
/* Debug lines sit on hot paths: their arguments are not even evaluated
 * unless the level asks for them. */
#define nic_dbg(l, ...)                                                  \
	do {                                                             \
		if ((l)->level >= NIC_LOG_DEBUG)                         \
			nic_log_printf((l), NIC_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

#endif /* NICSIM_LOG_H */
