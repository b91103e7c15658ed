/*
 * libFuzzer target of the UDP side's receive path (fabric/fab_udp.c): a
 * datagram, as recvmmsg hands it to fab_udp_pull, goes through the
 * refusal checks (fab_udp_rx_judge) and, accepted, gets its Ethernet
 * header (fab_udp_rx_eth) and goes through the wire decoder, as the NIC
 * then decodes it, and once more sealed (fab_pkt_seal: checksums made
 * right) to reach the checks behind the ICRC.  No socket: the checks are
 * pure functions.
 *
 * Input: one flags byte (bit 0: the kernel cut the datagram short,
 * MSG_TRUNC), then the datagram from its IPv4 header on, received by the
 * port of address 198.18.0.2.  A datagram longer than a frame slot holds
 * is cut to fit and marked truncated, as the kernel does.
 *
 * What it asserts (__builtin_trap): an accepted datagram is addressed to
 * the port, and its length is the IPv4 and the UDP length; the decoder
 * never refuses an accepted one for a reason the judgement checked (its
 * length, IPv4 header shape, protocol, port, Ethernet addresses), and a
 * packet it decodes comes to the port's address.
 * Seeds: tests/fuzz/corpus/udp/ (frames of fuzz_frame's corpus as
 * datagrams).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fab_priv.h"
#include "fab_seg.h"
#include "fab_wire.h"
#include "fuzz.h"

/* 198.18.0.2 in network order. */
static const uint8_t local_ip[4] = {198, 18, 0, 2};

/* Decode an accepted datagram's frame of len bytes as the NIC does. */
static void decode(const uint8_t *frame, size_t len, uint32_t addr)
{
	enum fab_wire_err why;
	struct fab_pkt pkt;

	if (fab_pkt_decode(frame, len, &pkt, &why) == 0) {
		CHECK(pkt.dst_ip == addr);
		return;
	}
	CHECK(why != FAB_WIRE_E_SHORT && why != FAB_WIRE_E_NOT_IPV4 && why != FAB_WIRE_E_IP_HDR &&
	      why != FAB_WIRE_E_IP_LEN && why != FAB_WIRE_E_ETH_ADDR && why != FAB_WIRE_E_NOT_UDP &&
	      why != FAB_WIRE_E_UDP_PORT && why != FAB_WIRE_E_UDP_LEN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t frame[FAB_SLOT_BYTES];
	const size_t room = sizeof(frame) - FAB_ETH_HLEN;
	enum fab_udp_rx verdict;
	uint32_t addr;
	bool trunc;
	size_t n;

	if (size < 1)
		return 0;
	memcpy(&addr, local_ip, 4);
	n = size - 1;
	trunc = data[0] & 1;
	if (n > room) {
		n = room;
		trunc = true;
	}
	memset(frame, 0, FAB_ETH_HLEN);
	memcpy(frame + FAB_ETH_HLEN, data + 1, n);

	verdict = fab_udp_rx_judge(frame + FAB_ETH_HLEN, n, trunc, addr);
	CHECK(verdict <= FAB_UDP_RX_WRONG_DST);
	if (verdict != FAB_UDP_RX_OK)
		return 0;
	CHECK(!trunc && n >= FAB_FRAME_MIN - FAB_ETH_HLEN);
	CHECK(fab_get16(frame + FAB_ETH_HLEN + 2) == n);
	CHECK(!memcmp(frame + FAB_ETH_HLEN + 16, local_ip, 4));

	fab_udp_rx_eth(frame);
	decode(frame, n + FAB_ETH_HLEN, addr);
	/* Sealed (checksums made right), to reach the checks behind them. */
	if (fab_pkt_seal(frame, n + FAB_ETH_HLEN) == 0)
		decode(frame, n + FAB_ETH_HLEN, addr);
	return 0;
}
