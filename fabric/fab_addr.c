#include "fab_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>

bool fab_addr_valid(uint32_t addr)
{
	uint32_t h = ntohl(addr);

	if ((h & FAB_ADDR_MASK) != FAB_ADDR_NET)
		return false;
	return h != FAB_ADDR_NET && h != (FAB_ADDR_NET | ~FAB_ADDR_MASK);
}

int fab_addr_parse(const char *text, uint32_t *addr)
{
	struct in_addr in;

	if (!text || inet_pton(AF_INET, text, &in) != 1)
		return -EINVAL;
	if (!fab_addr_valid(in.s_addr))
		return -EADDRNOTAVAIL;
	*addr = in.s_addr;
	return 0;
}

const char *fab_addr_format(uint32_t addr, char *buf, size_t size)
{
	struct in_addr in = {.s_addr = addr};

	if (!inet_ntop(AF_INET, &in, buf, (socklen_t)size) && size)
		buf[0] = '\0';
	return buf;
}

uint32_t fab_addr_host(uint32_t n)
{
	if (n == 0 || n >= ~FAB_ADDR_MASK)
		return 0;
	return htonl(FAB_ADDR_NET + n);
}
