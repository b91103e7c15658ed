/*
 * stream_nsw.c: the switch's stream sockets (nicsim_switch.h) as a
 * nicsim-stream backend.  The nsw_* calls have the BSD calls' shapes, so
 * the table names them directly; what is the switch's own is its options
 * (the two thresholds and the path asked for, set on the listening socket
 * and on the connecting one, before the negotiation), its path and its
 * counters, and the advice on its errors.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "nicsim_provider.h"
#include "nicsim_switch.h"
#include "stream.h"

static int nsw_prepare(int s, const struct stream_opts *o, enum stream_prep when, const char **what)
{
	int v;

	if (when == PREP_ACCEPTED)
		return 0; /* an accepted socket has its listener's options */
	/* --path write: this side does not read as a sink; read and auto: it
	 * reads when it can, and the client checks what came of it. */
	if (o->path == SP_WRITE) {
		v = NSW_PATH_WRITE;
		*what = "NSW_PATH";
		if (nsw_setsockopt(s, NSW_SOL, NSW_PATH, &v, sizeof(v)))
			return -1;
	}
	if (o->rdma_threshold) {
		v = (int)o->rdma_threshold;
		*what = "NSW_RDMA_THRESHOLD";
		if (nsw_setsockopt(s, NSW_SOL, NSW_RDMA_THRESHOLD, &v, sizeof(v)))
			return -1;
	}
	if (o->max_rdma) {
		v = (int)o->max_rdma;
		*what = "NSW_MAX_RDMA";
		if (nsw_setsockopt(s, NSW_SOL, NSW_MAX_RDMA, &v, sizeof(v)))
			return -1;
	}
	return 0;
}

static int nsw_path(int s, int *sending, int *receiving)
{
	socklen_t len = sizeof(int);
	int v = 0;

	if (nsw_getsockopt(s, NSW_SOL, NSW_PATH, &v, &len))
		return -1;
	*sending = v & 0xf;
	*receiving = (v >> 4) & 0xf;
	return 0;
}

static int nsw_stats_get(int s, struct nsw_stats *st)
{
	socklen_t len = sizeof(*st);

	return nsw_getsockopt(s, NSW_SOL, NSW_STATS, st, &len);
}

static int nsw_cache(uint64_t *hits, uint64_t *misses)
{
	struct nicsim_cache_stats cs;

	if (nicsim_cache_stats(&cs))
		return -1;
	*hits = cs.hits;
	*misses = cs.misses;
	return 0;
}

static const char *nsw_advice(const char *call, int err)
{
	static char text[512];
	char dir[256];

	switch (err) {
	case EADDRNOTAVAIL:
		if (call[0] != 'b' && call[0] != 'c')
			return NULL;
		if (nicsim_run_dir(dir, sizeof(dir)))
			snprintf(dir, sizeof(dir), "(no usable run directory)");
		else if (access(dir, F_OK)) {
			snprintf(
			    text, sizeof(text),
			    "the run directory %s does not exist: start NICs with `nicsim up`, "
			    "or point --dir or NICSIM_DIR at the run directory of running ones",
			    dir);
			return text;
		}
		/* A connect without --bind takes any NIC: there is none. */
		snprintf(text, sizeof(text),
			 "no NIC %s in %s: start NICs with `nicsim up`, or point --dir or "
			 "NICSIM_DIR at the run directory of running ones",
			 call[0] == 'b' ? "with that address" : "to connect from", dir);
		return text;
	case EHOSTUNREACH:
		return "no NIC with that address is on this side's fabric: `nicsim link show` "
		       "lists its ports";
	case EADDRINUSE: return "another socket on that NIC has the port: choose another";
	case ECONNREFUSED:
		return "nothing listens there: start 'nicsim-stream --server --bind ADDR' on that "
		       "NIC";
	case ECONNRESET: return "the peer closed abortively, died, or its NIC did";
	case ENETDOWN: return "this side's NIC is gone: is its nicsimd still running?";
	case ECONNABORTED:
		return "this side aborted the connection after a protocol error of the peer's "
		       "(the switch said which above)";
	case ENOBUFS:
		return "a buffer could not be registered: the NIC's TPT is full or the "
		       "memory-lock limit (ulimit -l) is reached";
	default: return NULL;
	}
}

const struct stream_backend stream_switch_backend = {
    .name = "switch",
    .socket = nsw_socket,
    .bind = nsw_bind,
    .listen = nsw_listen,
    .accept = nsw_accept,
    .connect = nsw_connect,
    .send = nsw_send,
    .recv = nsw_recv,
    .shutdown = nsw_shutdown,
    .close = nsw_close,
    .getsockopt = nsw_getsockopt,
    .setsockopt = nsw_setsockopt,
    .getsockname = nsw_getsockname,
    .prepare = nsw_prepare,
    .path = nsw_path,
    .stats = nsw_stats_get,
    .cache = nsw_cache,
    .advice = nsw_advice,
};
