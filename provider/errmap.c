/*
 * The SPI boundary's error mapping: every negative errno the provider uses
 * internally becomes one WSA code here, and only here.
 */
#include "prov.h"

int prov_wsa_error(int err)
{
	switch (-err) {
	case 0: return 0;
	case PROV_ENOTINIT: return WSANOTINITIALISED;
	case PROV_EVERSION: return WSAVERNOTSUPPORTED;
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

int prov_fail(int err, LPINT lpErrno)
{
	if (lpErrno)
		*lpErrno = prov_wsa_error(err);
	return SOCKET_ERROR;
}

const char *prov_wsa_name(int wsa_error)
{
	switch (wsa_error) {
	case 0: return "no error";
	case WSA_OPERATION_ABORTED: return "WSA_OPERATION_ABORTED";
	case WSA_IO_INCOMPLETE: return "WSA_IO_INCOMPLETE";
	case WSA_IO_PENDING: return "WSA_IO_PENDING";
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
