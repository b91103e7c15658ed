/*
 * stream_echo: a program of the switch's stream sockets (nicsim_switch.h),
 * built out of tree against an installed prefix with
 * `cc $(pkg-config --cflags --libs nicsim-switch)` by test_install.
 *
 *   stream_echo SERVER CLIENT PORT
 *
 * One process, two threads: an echo server listening on the NIC at SERVER
 * sends back whatever it receives, and the client connects to it from the
 * NIC at CLIENT, sends sizes from 1 byte to past the RDMA threshold and
 * the receiver's 1 MiB chunk, reads each echo back and compares it, then
 * shuts down its sending side and reads the server's end-of-file.  Prints
 * one line per size and a last "echo: N bytes back in order"; exit status
 * 0 when everything matched, 1 otherwise (the call and its error on
 * stderr).  The client sends a whole message before it reads the echo, as
 * over TCP: messages much larger than what the two ends buffer could block
 * both, so they stay small.
 *
 * It calls none of the C library functions libnicsimsp interposes (free,
 * munmap, ...: its buffers are static), so nothing but the link flags of
 * nicsim-switch.pc keeps libnicsimsp among its own dependencies, ahead of
 * the C library, when it is linked with --as-needed: test_install checks
 * that with readelf.
 */
#define _POSIX_C_SOURCE 200809L /* inet_pton, pthreads: also with -std=c11 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nicsim_switch.h>

#define MAX_SIZE ((1u << 20) + 5) /* the largest send */

static uint8_t out[MAX_SIZE], back[MAX_SIZE], echo_buf[MAX_SIZE];

/* A call failed: say which, and end the process (the library closes what
 * is still open). */
static void fail(const char *what)
{
	fprintf(stderr, "stream_echo: %s: %s\n", what, strerror(errno));
	exit(1);
}

static struct sockaddr_in addr(const char *ip, uint16_t port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
		fprintf(stderr, "stream_echo: %s is not an IPv4 address\n", ip);
		exit(2);
	}
	return a;
}

/* Send all of len bytes (a blocking socket takes them all, or fails). */
static int send_all(int s, const uint8_t *p, size_t len)
{
	ssize_t n = nsw_send(s, p, len, 0);

	return n == (ssize_t)len ? 0 : -1;
}

/* The server: accept one connection on listener l, echo until end-of-file. */
static void *server_main(void *arg)
{
	int s = nsw_accept(*(int *)arg, NULL, NULL);
	ssize_t n;

	if (s < 0)
		fail("accept");
	while ((n = nsw_recv(s, echo_buf, MAX_SIZE, 0)) > 0)
		if (send_all(s, echo_buf, (size_t)n))
			fail("server send");
	if (n < 0)
		fail("server recv");
	if (nsw_close(s))
		fail("server close");
	return NULL;
}

static void client(const char *server, const char *from, uint16_t port)
{
	static const size_t sizes[] = {1, 100, 2048, 4000, 65535, 65536, 65537, 300000, MAX_SIZE};
	struct sockaddr_in to = addr(server, port), me = addr(from, 0);
	uint64_t total = 0;
	int s = nsw_socket(AF_INET, SOCK_STREAM, 0);
	char c;

	if (s < 0)
		fail("socket");
	if (nsw_bind(s, (struct sockaddr *)&me, sizeof(me)))
		fail("bind");
	if (nsw_connect(s, (struct sockaddr *)&to, sizeof(to)))
		fail("connect");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		for (size_t k = 0; k < n; k++)
			out[k] = (uint8_t)((total + k) * 7 + (total + k) / 4099);
		if (send_all(s, out, n))
			fail("send");
		if (nsw_recv(s, back, n, MSG_WAITALL) != (ssize_t)n)
			fail("recv of the echo");
		if (memcmp(out, back, n)) {
			fprintf(stderr, "stream_echo: the echo of %zu bytes differs\n", n);
			exit(1);
		}
		total += n;
		printf("%zu bytes: back\n", n);
	}
	if (nsw_shutdown(s, SHUT_WR))
		fail("shutdown");
	if (nsw_recv(s, &c, 1, 0) != 0)
		fail("end-of-file from the server");
	if (nsw_close(s))
		fail("close");
	printf("echo: %llu bytes back in order\n", (unsigned long long)total);
}

int main(int argc, char **argv)
{
	struct sockaddr_in at;
	pthread_t t;
	int l;

	if (argc != 4) {
		fprintf(stderr, "usage: stream_echo SERVER CLIENT PORT\n");
		return 2;
	}
	at = addr(argv[1], (uint16_t)atoi(argv[3]));
	l = nsw_socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		fail("socket");
	if (nsw_bind(l, (struct sockaddr *)&at, sizeof(at)) || nsw_listen(l, 1))
		fail("listen");
	if (pthread_create(&t, NULL, server_main, &l))
		fail("pthread_create");
	client(argv[1], argv[2], (uint16_t)atoi(argv[3]));
	pthread_join(t, NULL);
	if (nsw_close(l))
		fail("close of the listener");
	return 0;
}
