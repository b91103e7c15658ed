/*
 * The SPI boundary's error mapping: every negative errno the provider uses
 * internally becomes one WSA code here, and only here; and what the NIC's
 * completion and connection statuses mean inside the provider.  ws2san.h
 * documents the resulting table for applications.
 */
#include "prov.h"

/* The public names of the NIC's completion statuses (nicsim_provider.h) are
 * the NIC's own codes (nicsim_abi.h), which applications do not see. */
_Static_assert(NICSIM_STATUS_NONE == NIC_WC_SUCCESS, "status names");
_Static_assert(NICSIM_STATUS_LOC_LEN_ERR == NIC_WC_LOC_LEN_ERR, "status names");
_Static_assert(NICSIM_STATUS_LOC_QP_OP_ERR == NIC_WC_LOC_QP_OP_ERR, "status names");
_Static_assert(NICSIM_STATUS_LOC_PROT_ERR == NIC_WC_LOC_PROT_ERR, "status names");
_Static_assert(NICSIM_STATUS_WR_FLUSH_ERR == NIC_WC_WR_FLUSH_ERR, "status names");
_Static_assert(NICSIM_STATUS_BAD_RESP_ERR == NIC_WC_BAD_RESP_ERR, "status names");
_Static_assert(NICSIM_STATUS_REM_INV_REQ_ERR == NIC_WC_REM_INV_REQ_ERR, "status names");
_Static_assert(NICSIM_STATUS_REM_ACCESS_ERR == NIC_WC_REM_ACCESS_ERR, "status names");
_Static_assert(NICSIM_STATUS_REM_OP_ERR == NIC_WC_REM_OP_ERR, "status names");
_Static_assert(NICSIM_STATUS_RETRY_EXC_ERR == NIC_WC_RETRY_EXC_ERR, "status names");
_Static_assert(NICSIM_STATUS_RNR_RETRY_EXC_ERR == NIC_WC_RNR_RETRY_EXC_ERR, "status names");
_Static_assert(NIC_WC_MAX_ == NIC_WC_RNR_RETRY_EXC_ERR + 1, "every status has a public name");

int prov_wsa_error(int err)
{
	switch (-err) {
	case 0: return 0;
	case PROV_ENOTINIT: return WSANOTINITIALISED;
	case PROV_EVERSION: return WSAVERNOTSUPPORTED;
	case PROV_EINCOMPLETE: return WSA_IO_INCOMPLETE;
	case PROV_ETRYAGAIN: return WSATRY_AGAIN;
	/* An operation flushed or aborted (close, disconnect, an earlier failure). */
	case ECANCELED: return WSA_OPERATION_ABORTED;
	case EMSGSIZE: return WSAEMSGSIZE;
	case ENOPROTOOPT: return WSAENOPROTOOPT;
	case EFAULT: return WSAEFAULT;
	case EINVAL: return WSAEINVAL;
	/* "In use by a transfer" is WSAEINVAL in the SPI (R1). */
	case EBUSY: return WSAEINVAL;
	case ENOBUFS:
	case ENOMEM:
	case ENOSPC:
	case E2BIG: return WSAENOBUFS;
	case EMFILE:
	case ENFILE: return WSAEMFILE;
	case ENOTSOCK: return WSAENOTSOCK;
	case ENOTCONN: return WSAENOTCONN;
	case EISCONN: return WSAEISCONN;
	case EAFNOSUPPORT: return WSAEAFNOSUPPORT;
	case ESOCKTNOSUPPORT: return WSAESOCKTNOSUPPORT;
	case EPROTONOSUPPORT: return WSAEPROTONOSUPPORT;
	case EOPNOTSUPP: return WSAEOPNOTSUPP;
	case EADDRINUSE: return WSAEADDRINUSE;
	case EADDRNOTAVAIL: return WSAEADDRNOTAVAIL;
	case ENETDOWN: return WSAENETDOWN;
	case ENETRESET: return WSAENETRESET;
	case ECONNABORTED: return WSAECONNABORTED;
	case ECONNRESET: return WSAECONNRESET;
	case ECONNREFUSED: return WSAECONNREFUSED;
	case EHOSTUNREACH: return WSAEHOSTUNREACH;
	case ETIMEDOUT: return WSAETIMEDOUT;
	case EINTR: return WSAEINTR;
	case EAGAIN: return WSAEWOULDBLOCK;
	case EALREADY: return WSAEALREADY;
	case EINPROGRESS: return WSAEINPROGRESS;
	/* A NIC that breaks the protocol is as good as no NIC. */
	default: return WSAENETDOWN;
	}
}

int prov_wc_errno(unsigned status)
{
	switch (status) {
	case NIC_WC_SUCCESS: return 0;
	/* The message is longer than the receive's buffers. */
	case NIC_WC_LOC_LEN_ERR: return -EMSGSIZE;
	/* A request the NIC found malformed: the provider's own limits were wrong. */
	case NIC_WC_LOC_QP_OP_ERR: return -EINVAL;
	/* A local key or local DMA failed its check. */
	case NIC_WC_LOC_PROT_ERR: return -EFAULT;
	case NIC_WC_WR_FLUSH_ERR: return -ECANCELED;
	/* The peer refused or could not serve the request (its key check, its
	 * memory, its state): the connection is broken by the remote side. */
	case NIC_WC_BAD_RESP_ERR:
	case NIC_WC_REM_INV_REQ_ERR:
	case NIC_WC_REM_ACCESS_ERR:
	case NIC_WC_REM_OP_ERR: return -ECONNRESET;
	/* No answer, or no receive buffer, within the retry limits. */
	case NIC_WC_RETRY_EXC_ERR:
	case NIC_WC_RNR_RETRY_EXC_ERR: return -ECONNABORTED;
	/* A status this provider does not know: as good as a broken NIC. */
	default: return -EPROTO;
	}
}

int prov_conn_errno(unsigned status)
{
	switch (status) {
	case NIC_STATUS_CONN_REFUSED: return -ECONNREFUSED;
	case NIC_STATUS_UNREACHABLE: return -EHOSTUNREACH;
	/* Timed out, and every unknown case (WSAETIMEDOUT, as ws2san.h says of WSPConnect). */
	default: return -ETIMEDOUT;
	}
}

int prov_fail(int err, LPINT lpErrno)
{
	if (lpErrno)
		*lpErrno = prov_wsa_error(err);
	return SOCKET_ERROR;
}

const char *nicsim_wsa_name(int wsa_error)
{
	switch (wsa_error) {
	case 0: return "no error";
	case WSA_OPERATION_ABORTED: return "WSA_OPERATION_ABORTED";
	case WSA_IO_INCOMPLETE: return "WSA_IO_INCOMPLETE";
	case WSA_IO_PENDING: return "WSA_IO_PENDING";
	case WSATRY_AGAIN: return "WSATRY_AGAIN";
	case WSAEINTR: return "WSAEINTR";
	case WSAEBADF: return "WSAEBADF";
	case WSAEACCES: return "WSAEACCES";
	case WSAEFAULT: return "WSAEFAULT";
	case WSAEINVAL: return "WSAEINVAL";
	case WSAEMFILE: return "WSAEMFILE";
	case WSAEWOULDBLOCK: return "WSAEWOULDBLOCK";
	case WSAEINPROGRESS: return "WSAEINPROGRESS";
	case WSAEALREADY: return "WSAEALREADY";
	case WSAENOTSOCK: return "WSAENOTSOCK";
	case WSAEDESTADDRREQ: return "WSAEDESTADDRREQ";
	case WSAEMSGSIZE: return "WSAEMSGSIZE";
	case WSAEPROTOTYPE: return "WSAEPROTOTYPE";
	case WSAENOPROTOOPT: return "WSAENOPROTOOPT";
	case WSAEPROTONOSUPPORT: return "WSAEPROTONOSUPPORT";
	case WSAESOCKTNOSUPPORT: return "WSAESOCKTNOSUPPORT";
	case WSAEOPNOTSUPP: return "WSAEOPNOTSUPP";
	case WSAEPFNOSUPPORT: return "WSAEPFNOSUPPORT";
	case WSAEAFNOSUPPORT: return "WSAEAFNOSUPPORT";
	case WSAEADDRINUSE: return "WSAEADDRINUSE";
	case WSAEADDRNOTAVAIL: return "WSAEADDRNOTAVAIL";
	case WSAENETDOWN: return "WSAENETDOWN";
	case WSAENETUNREACH: return "WSAENETUNREACH";
	case WSAENETRESET: return "WSAENETRESET";
	case WSAECONNABORTED: return "WSAECONNABORTED";
	case WSAECONNRESET: return "WSAECONNRESET";
	case WSAENOBUFS: return "WSAENOBUFS";
	case WSAEISCONN: return "WSAEISCONN";
	case WSAENOTCONN: return "WSAENOTCONN";
	case WSAESHUTDOWN: return "WSAESHUTDOWN";
	case WSAETIMEDOUT: return "WSAETIMEDOUT";
	case WSAECONNREFUSED: return "WSAECONNREFUSED";
	case WSAEHOSTUNREACH: return "WSAEHOSTUNREACH";
	case WSASYSNOTREADY: return "WSASYSNOTREADY";
	case WSAVERNOTSUPPORTED: return "WSAVERNOTSUPPORTED";
	case WSANOTINITIALISED: return "WSANOTINITIALISED";
	case WSAEPROVIDERFAILEDINIT: return "WSAEPROVIDERFAILEDINIT";
	default: return "WSA error";
	}
}
