/*
 * ws2san.h for nicsim: the Windows Sockets Direct SAN service provider SPI on
 * Linux, as /work/shared/SPI.md collects it.
 *
 * Types.  Windows types map to fixed-width C types of the same size: BYTE =
 * uint8_t, WORD = uint16_t, DWORD = ULONG = uint32_t, INT = BOOL = int32_t,
 * WCHAR = uint16_t (UTF-16 code units, as on Windows), HANDLE = void *,
 * SIZE_T = size_t, ULONG_PTR = DWORD_PTR = uintptr_t, SOCKET = uintptr_t (an
 * opaque handle, never a Linux file descriptor), LP... = pointer.  Windows'
 * u_long is 32 bits; glibc already defines u_long as unsigned long (64 bits),
 * so the structures below spell it ULONG.  struct sockaddr and sockaddr_in
 * are Linux's (AF_INET, SOCK_STREAM and IPPROTO_TCP have the Windows values).
 *
 * Linux equivalents of Windows plumbing:
 *   - WSAEVENT, an event object, is an eventfd file descriptor stored in an
 *     intptr_t; WSA_INVALID_EVENT is -1.  (For WSPEventSelect and
 *     WSAOVERLAPPED.hEvent, which this provider does not serve yet.)
 *   - Upcalls (WSPUPCALLTABLEEX) are never called: the provider completes
 *     overlapped operations by writing the WSAOVERLAPPED bookkeeping fields
 *     (Internal, InternalHigh, Offset, OffsetHigh) and signalling hEvent.
 *     A caller with no switch behind it passes NULL for the upcall table and
 *     the protocol info to WSPStartupEx.
 *   - There is no WSAGetLastError: every call reports its error through
 *     lpErrno.  lpErrno may be NULL; the error is then not reported, and the
 *     return value (SOCKET_ERROR, INVALID_SOCKET or NULL) still says "failed".
 *
 * The provider is process-wide (the SPI has no context parameter); every
 * function is thread-safe.
 */
#ifndef NICSIM_WS2SAN_H
#define NICSIM_WS2SAN_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Windows base types ------------------------------------------------ */

#define WSPAPI /* calling convention: the platform's default on Linux */

typedef uint8_t BYTE;
typedef uint16_t WORD;
typedef uint32_t DWORD;
typedef uint32_t ULONG;
typedef int32_t INT;
typedef int32_t BOOL;
typedef uint16_t WCHAR;
typedef void *HANDLE;
typedef void *PVOID;
typedef void *LPVOID;
typedef size_t SIZE_T;
typedef uintptr_t ULONG_PTR;
typedef uintptr_t DWORD_PTR;
typedef INT *LPINT;
typedef DWORD *LPDWORD;
typedef unsigned int GROUP;

/* An opaque socket handle issued by WSPSocket; all ones is INVALID_SOCKET. */
typedef uintptr_t SOCKET;

/* An eventfd descriptor (see the top of this file). */
typedef intptr_t WSAEVENT;
#define WSA_INVALID_EVENT ((WSAEVENT)-1)

#ifndef TRUE
#define TRUE 1
#endif
#ifndef FALSE
#define FALSE 0
#endif
#ifndef MAKEWORD
#define MAKEWORD(lo, hi) ((WORD)(((BYTE)(lo)) | ((WORD)((BYTE)(hi))) << 8))
#endif
#ifndef LOBYTE
#define LOBYTE(w) ((BYTE)((w)&0xff))
#endif
#ifndef HIBYTE
#define HIBYTE(w) ((BYTE)(((WORD)(w) >> 8) & 0xff))
#endif

typedef struct _GUID {
	uint32_t Data1;
	uint16_t Data2;
	uint16_t Data3;
	uint8_t Data4[8];
} GUID, *LPGUID;

/* ---- Constants ------------------------------------------------------------ */

#define SOCKET_ERROR (-1)
#define INVALID_SOCKET (~(SOCKET)0)

/* Access of a registration (WSPRegisterMemory, WSPRegisterRdmaMemory). */
#define MEM_READ 1
#define MEM_WRITE 2
#define MEM_READWRITE 3

/* Socket options (level SOL_SOCKET); not served yet. */
#define SO_MAX_RDMA_SIZE 0x700D
#define SO_RDMA_THRESHOLD_SIZE 0x700E

/* WSPIoctl codes. */
#define SIO_GET_EXTENSION_FUNCTION_POINTER 0xC8000006u
#define SIO_ADDRESS_LIST_QUERY 0x48000016u /* not served yet: WSAEINVAL */

/* Versions: WSPStartupEx accepts 2.2 and above and answers 2.2. */
#define WSPDESCRIPTION_LEN 255
#define WSAPROTOCOL_LEN 255
#define MAX_PROTOCOL_CHAIN 7
#define FD_MAX_EVENTS 10

/* Overlapped status values (WSAOVERLAPPED.Internal, error codes). */
#define WSA_IO_PENDING 997
#define WSA_IO_INCOMPLETE 996
#define WSA_OPERATION_ABORTED 995
#define WSA_STATUS_PENDING 0x103 /* Internal while an operation is in progress */

/* Error codes (Windows values), reported through lpErrno. */
#define WSABASEERR 10000
#define WSAEINTR 10004
#define WSAEBADF 10009
#define WSAEACCES 10013
#define WSAEFAULT 10014
#define WSAEINVAL 10022
#define WSAEMFILE 10024
#define WSAEWOULDBLOCK 10035
#define WSAEINPROGRESS 10036
#define WSAEALREADY 10037
#define WSAENOTSOCK 10038
#define WSAEDESTADDRREQ 10039
#define WSAEMSGSIZE 10040
#define WSAEPROTOTYPE 10041
#define WSAENOPROTOOPT 10042
#define WSAEPROTONOSUPPORT 10043
#define WSAESOCKTNOSUPPORT 10044
#define WSAEOPNOTSUPP 10045
#define WSAEPFNOSUPPORT 10046
#define WSAEAFNOSUPPORT 10047
#define WSAEADDRINUSE 10048
#define WSAEADDRNOTAVAIL 10049
#define WSAENETDOWN 10050
#define WSAENETUNREACH 10051
#define WSAENETRESET 10052
#define WSAECONNABORTED 10053
#define WSAECONNRESET 10054
#define WSAENOBUFS 10055
#define WSAEISCONN 10056
#define WSAENOTCONN 10057
#define WSAESHUTDOWN 10058
#define WSAETIMEDOUT 10060
#define WSAECONNREFUSED 10061
#define WSAEHOSTUNREACH 10065
#define WSASYSNOTREADY 10091
#define WSAVERNOTSUPPORTED 10092
#define WSANOTINITIALISED 10093
#define WSAEPROVIDERFAILEDINIT 10106

/*
 * Extension function GUIDs: WSPIoctl(SIO_GET_EXTENSION_FUNCTION_POINTER)
 * takes one as input and returns the function's address.
 */
/* clang-format off */
#define WSAID_REGISTERMEMORY \
	{0xC0B422F5, 0xF58C, 0x11d1, {0xAD, 0x6C, 0x00, 0xC0, 0x4F, 0xA3, 0x4A, 0x2D}}
#define WSAID_DEREGISTERMEMORY \
	{0xC0B422F6, 0xF58C, 0x11d1, {0xAD, 0x6C, 0x00, 0xC0, 0x4F, 0xA3, 0x4A, 0x2D}}
#define WSAID_REGISTERRDMAMEMORY \
	{0xC0B422F7, 0xF58C, 0x11d1, {0xAD, 0x6C, 0x00, 0xC0, 0x4F, 0xA3, 0x4A, 0x2D}}
#define WSAID_DEREGISTERRDMAMEMORY \
	{0xC0B422F8, 0xF58C, 0x11d1, {0xAD, 0x6C, 0x00, 0xC0, 0x4F, 0xA3, 0x4A, 0x2D}}
#define WSAID_RDMAWRITE \
	{0xC0B422F9, 0xF58C, 0x11d1, {0xAD, 0x6C, 0x00, 0xC0, 0x4F, 0xA3, 0x4A, 0x2D}}
#define WSAID_RDMAREAD \
	{0xC0B422FA, 0xF58C, 0x11d1, {0xAD, 0x6C, 0x00, 0xC0, 0x4F, 0xA3, 0x4A, 0x2D}}
#define WSAID_MEMORYREGISTRATIONCACHECALLBACK \
	{0xE5DA4AF8, 0xD824, 0x48CD, {0xA7, 0x99, 0x63, 0x37, 0xA9, 0x8E, 0xD2, 0xAF}}
/* clang-format on */

/* ---- Structures --------------------------------------------------------- */

typedef struct _WSABUF {
	ULONG len; /* Windows u_long: 32 bits */
	char *buf;
} WSABUF, *LPWSABUF;

/* A buffer of an RDMA operation; handle is what WSPRegisterMemory returned. */
typedef struct _WSABUFEX {
	ULONG len;
	char *buf;
	HANDLE handle;
} WSABUFEX, *LPWSABUFEX;

/*
 * Overlapped operation.  The provider writes the bookkeeping fields:
 * Internal (WSA_STATUS_PENDING while in progress, then 0), InternalHigh
 * (bytes transferred), OffsetHigh (the operation's WSA error code), Offset
 * (flags); hEvent, if not WSA_INVALID_EVENT, is an eventfd signalled on
 * completion.
 */
typedef struct _WSAOVERLAPPED {
	ULONG_PTR Internal;
	ULONG_PTR InternalHigh;
	DWORD Offset;
	DWORD OffsetHigh;
	WSAEVENT hEvent;
} WSAOVERLAPPED, *LPWSAOVERLAPPED;

typedef void(WSPAPI *LPWSAOVERLAPPED_COMPLETION_ROUTINE)(DWORD dwError, DWORD cbTransferred,
							 LPWSAOVERLAPPED lpOverlapped,
							 DWORD dwFlags);

/* Identifies the thread a completion routine would run in; unused on Linux. */
typedef struct _WSATHREADID {
	HANDLE ThreadHandle;
	DWORD_PTR Reserved;
} WSATHREADID, *LPWSATHREADID;

typedef struct _FLOWSPEC {
	ULONG TokenRate;
	ULONG TokenBucketSize;
	ULONG PeakBandwidth;
	ULONG Latency;
	ULONG DelayVariation;
	ULONG ServiceType;
	ULONG MaxSduSize;
	ULONG MinimumPolicedSize;
} FLOWSPEC;

/* Quality of service: accepted and ignored by this provider. */
typedef struct _QualityOfService {
	FLOWSPEC SendingFlowspec;
	FLOWSPEC ReceivingFlowspec;
	WSABUF ProviderSpecific;
} QOS, *LPQOS;

typedef struct _WSANETWORKEVENTS {
	long lNetworkEvents;
	int iErrorCode[FD_MAX_EVENTS];
} WSANETWORKEVENTS, *LPWSANETWORKEVENTS;

typedef int(WSPAPI *LPCONDITIONPROC)(LPWSABUF lpCallerId, LPWSABUF lpCallerData, LPQOS lpSQOS,
				     LPQOS lpGQOS, LPWSABUF lpCalleeId, LPWSABUF lpCalleeData,
				     GROUP *g, DWORD_PTR dwCallbackData);

/* What WSPStartupEx reports: version 2.2 and a description. */
typedef struct _WSPDATA {
	WORD wVersion;
	WORD wHighVersion;
	WCHAR szDescription[WSPDESCRIPTION_LEN + 1];
} WSPDATA, *LPWSPDATA;

typedef struct _WSAPROTOCOLCHAIN {
	int ChainLen;
	DWORD ChainEntries[MAX_PROTOCOL_CHAIN];
} WSAPROTOCOLCHAIN;

/*
 * The protocol a switch loaded the provider for.  WSPStartupEx and WSPSocket
 * accept it (or NULL) and do not read it: this provider serves exactly one
 * protocol, TCP over IPv4 on the nicsim fabric.
 */
typedef struct _WSAPROTOCOL_INFOW {
	DWORD dwServiceFlags1;
	DWORD dwServiceFlags2;
	DWORD dwServiceFlags3;
	DWORD dwServiceFlags4;
	DWORD dwProviderFlags;
	GUID ProviderId;
	DWORD dwCatalogEntryId;
	WSAPROTOCOLCHAIN ProtocolChain;
	int iVersion;
	int iAddressFamily;
	int iMaxSockAddr;
	int iMinSockAddr;
	int iSocketType;
	int iProtocol;
	int iProtocolMaxOffset;
	int iNetworkByteOrder;
	int iSecurityScheme;
	DWORD dwMessageSize;
	DWORD dwProviderReserved;
	WCHAR szProtocol[WSAPROTOCOL_LEN + 1];
} WSAPROTOCOL_INFOW, *LPWSAPROTOCOL_INFOW;

/*
 * The switch's upcall table.  Minimal on Linux: the members keep Windows'
 * names and order, typed as an untyped function pointer, and this provider
 * never reads or calls them (see the top of this file for what replaces
 * each upcall).  NULL is accepted.
 */
typedef void (*WSPUPCALL_UNUSED)(void);
typedef struct _WSPUPCALLTABLEEX {
	WSPUPCALL_UNUSED lpWPUCloseEvent;
	WSPUPCALL_UNUSED lpWPUCloseSocketHandle;
	WSPUPCALL_UNUSED lpWPUCreateEvent;
	WSPUPCALL_UNUSED lpWPUCreateSocketHandle;
	WSPUPCALL_UNUSED lpWPUFDIsSet;
	WSPUPCALL_UNUSED lpWPUGetProviderPath;
	WSPUPCALL_UNUSED lpWPUModifyIFSHandle;
	WSPUPCALL_UNUSED lpWPUPostMessage;
	WSPUPCALL_UNUSED lpWPUQueryBlockingCallback;
	WSPUPCALL_UNUSED lpWPUQuerySocketHandleContext;
	WSPUPCALL_UNUSED lpWPUQueueApc;
	WSPUPCALL_UNUSED lpWPUResetEvent;
	WSPUPCALL_UNUSED lpWPUSetEvent;
	WSPUPCALL_UNUSED lpWPUOpenCurrentThread;
	WSPUPCALL_UNUSED lpWPUCloseThread;
	WSPUPCALL_UNUSED lpWPUCompleteOverlappedRequest;
} WSPUPCALLTABLEEX, *LPWSPUPCALLTABLEEX;

/* ---- Function types ------------------------------------------------------- */

typedef SOCKET(WSPAPI *LPWSPACCEPT)(SOCKET s, struct sockaddr *addr, LPINT addrlen,
				    LPCONDITIONPROC lpfnCondition, DWORD_PTR dwCallbackData,
				    LPINT lpErrno);
typedef int(WSPAPI *LPWSPBIND)(SOCKET s, const struct sockaddr *name, int namelen, LPINT lpErrno);
typedef int(WSPAPI *LPWSPCLEANUP)(LPINT lpErrno);
typedef int(WSPAPI *LPWSPCLOSESOCKET)(SOCKET s, LPINT lpErrno);
typedef int(WSPAPI *LPWSPCONNECT)(SOCKET s, const struct sockaddr *name, int namelen,
				  LPWSABUF lpCallerData, LPWSABUF lpCalleeData, LPQOS lpSQOS,
				  LPQOS lpGQOS, LPINT lpErrno);
typedef int(WSPAPI *LPWSPENUMNETWORKEVENTS)(SOCKET s, WSAEVENT hEventObject,
					    LPWSANETWORKEVENTS lpNetworkEvents, LPINT lpErrno);
typedef int(WSPAPI *LPWSPEVENTSELECT)(SOCKET s, WSAEVENT hEventObject, long lNetworkEvents,
				      LPINT lpErrno);
typedef BOOL(WSPAPI *LPWSPGETOVERLAPPEDRESULT)(SOCKET s, LPWSAOVERLAPPED lpOverlapped,
					       LPDWORD lpcbTransfer, BOOL fWait, LPDWORD lpdwFlags,
					       LPINT lpErrno);
typedef int(WSPAPI *LPWSPGETSOCKOPT)(SOCKET s, int level, int optname, char *optval, LPINT optlen,
				     LPINT lpErrno);
typedef int(WSPAPI *LPWSPIOCTL)(SOCKET s, DWORD dwIoControlCode, LPVOID lpvInBuffer,
				DWORD cbInBuffer, LPVOID lpvOutBuffer, DWORD cbOutBuffer,
				LPDWORD lpcbBytesReturned, LPWSAOVERLAPPED lpOverlapped,
				LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
				LPWSATHREADID lpThreadId, LPINT lpErrno);
typedef int(WSPAPI *LPWSPLISTEN)(SOCKET s, int backlog, LPINT lpErrno);
typedef int(WSPAPI *LPWSPRECV)(SOCKET s, LPWSABUF lpBuffers, DWORD dwBufferCount,
			       LPDWORD lpNumberOfBytesRecvd, LPDWORD lpFlags,
			       LPWSAOVERLAPPED lpOverlapped,
			       LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
			       LPWSATHREADID lpThreadId, LPINT lpErrno);
typedef int(WSPAPI *LPWSPSEND)(SOCKET s, LPWSABUF lpBuffers, DWORD dwBufferCount,
			       LPDWORD lpNumberOfBytesSent, DWORD dwFlags,
			       LPWSAOVERLAPPED lpOverlapped,
			       LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
			       LPWSATHREADID lpThreadId, LPINT lpErrno);
typedef int(WSPAPI *LPWSPSETSOCKOPT)(SOCKET s, int level, int optname, const char *optval,
				     int optlen, LPINT lpErrno);
typedef SOCKET(WSPAPI *LPWSPSOCKET)(int af, int type, int protocol,
				    LPWSAPROTOCOL_INFOW lpProtocolInfo, GROUP g, DWORD dwFlags,
				    LPINT lpErrno);

/* Calls the SAN SPI does not use; their table slots are always NULL. */
typedef void (*WSPPROC_UNUSED)(void);

/*
 * The procedure table WSPStartupEx fills, in Windows' member order.  A slot
 * is NULL when this provider does not implement the call (yet).  Filled
 * today: lpWSPBind, lpWSPCleanup, lpWSPCloseSocket, lpWSPIoctl, lpWSPSocket.
 * Accept, Connect, EnumNetworkEvents, EventSelect, GetOverlappedResult,
 * GetSockOpt, Listen, Recv, Send and SetSockOpt follow with connections.
 */
typedef struct _WSPPROC_TABLE {
	LPWSPACCEPT lpWSPAccept;
	WSPPROC_UNUSED lpWSPAddressToString;
	WSPPROC_UNUSED lpWSPAsyncSelect;
	LPWSPBIND lpWSPBind;
	WSPPROC_UNUSED lpWSPCancelBlockingCall;
	LPWSPCLEANUP lpWSPCleanup;
	LPWSPCLOSESOCKET lpWSPCloseSocket;
	LPWSPCONNECT lpWSPConnect;
	WSPPROC_UNUSED lpWSPDuplicateSocket;
	LPWSPENUMNETWORKEVENTS lpWSPEnumNetworkEvents;
	LPWSPEVENTSELECT lpWSPEventSelect;
	LPWSPGETOVERLAPPEDRESULT lpWSPGetOverlappedResult;
	WSPPROC_UNUSED lpWSPGetPeerName;
	WSPPROC_UNUSED lpWSPGetSockName;
	LPWSPGETSOCKOPT lpWSPGetSockOpt;
	WSPPROC_UNUSED lpWSPGetQOSByName;
	LPWSPIOCTL lpWSPIoctl;
	WSPPROC_UNUSED lpWSPJoinLeaf;
	LPWSPLISTEN lpWSPListen;
	LPWSPRECV lpWSPRecv;
	WSPPROC_UNUSED lpWSPRecvDisconnect;
	WSPPROC_UNUSED lpWSPRecvFrom;
	WSPPROC_UNUSED lpWSPSelect;
	LPWSPSEND lpWSPSend;
	WSPPROC_UNUSED lpWSPSendDisconnect;
	WSPPROC_UNUSED lpWSPSendTo;
	LPWSPSETSOCKOPT lpWSPSetSockOpt;
	WSPPROC_UNUSED lpWSPShutdown;
	LPWSPSOCKET lpWSPSocket;
	WSPPROC_UNUSED lpWSPStringToAddress;
} WSPPROC_TABLE, *LPWSPPROC_TABLE;

/* Extension functions, as WSPIoctl hands them out. */
typedef HANDLE(WSPAPI *LPFN_WSPREGISTERMEMORY)(SOCKET s, PVOID lpBuffer, DWORD dwBufferLength,
					       DWORD dwFlags, LPINT lpErrno);
typedef int(WSPAPI *LPFN_WSPDEREGISTERMEMORY)(SOCKET s, HANDLE handle, LPINT lpErrno);
typedef int(WSPAPI *LPFN_WSPREGISTERRDMAMEMORY)(SOCKET s, PVOID lpBuffer, DWORD dwBufferLength,
						DWORD dwFlags, LPVOID lpRdmaBufferDescriptor,
						LPDWORD lpdwDescriptorLength, LPINT lpErrno);
typedef int(WSPAPI *LPFN_WSPDEREGISTERRDMAMEMORY)(SOCKET s, LPVOID lpRdmaBufferDescriptor,
						  DWORD dwDescriptorLength, LPINT lpErrno);
typedef int(WSPAPI *LPFN_WSPRDMAWRITE)(SOCKET s, LPWSABUFEX lpBuffers, DWORD dwBufferCount,
				       LPVOID lpTargetBufferDescriptor,
				       DWORD dwTargetDescriptorLength, DWORD dwTargetBufferOffset,
				       LPDWORD lpdwNumberOfBytesWritten, DWORD dwFlags,
				       LPWSAOVERLAPPED lpOverlapped,
				       LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
				       LPWSATHREADID lpThreadId, LPINT lpErrno);
typedef int(WSPAPI *LPFN_WSPRDMAREAD)(SOCKET s, LPWSABUFEX lpBuffers, DWORD dwBufferCount,
				      LPVOID lpTargetBufferDescriptor,
				      DWORD dwTargetDescriptorLength, DWORD dwTargetBufferOffset,
				      LPDWORD lpdwNumberOfBytesRead, DWORD dwFlags,
				      LPWSAOVERLAPPED lpOverlapped,
				      LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
				      LPWSATHREADID lpThreadId, LPINT lpErrno);
typedef int(WSPAPI *LPFN_WSPMEMORYREGISTRATIONCACHECALLBACK)(PVOID lpvAddress, SIZE_T Size,
							     LPINT lpErrno);

/* ---- RDMA buffer descriptor ----------------------------------------------- */

/*
 * What WSPRegisterRdmaMemory writes at lpRdmaBufferDescriptor: 32 bytes,
 * little-endian, opaque to the switch, which carries it to the peer inside a
 * control message.  The peer's provider reads it to address the buffer:
 *
 *   offset size field
 *        0    4 magic     NICSIM_RDMA_DESC_MAGIC
 *        4    2 version   NICSIM_RDMA_DESC_VERSION
 *        6    2 access    MEM_READ (peer may RDMA-read), MEM_WRITE (peer may
 *                         RDMA-write) or MEM_READWRITE
 *        8    4 nic_addr  IPv4 address of the registering NIC, network order
 *       12    4 rkey      remote key: a memory window bound for this socket,
 *                         or, on a NIC without windows, the region's own key
 *       16    8 va        start of the buffer in the registering process
 *       24    8 len       length in bytes
 *
 * A descriptor is valid only on the socket that registered it (R4) and only
 * until it is deregistered: re-registering gives a new rkey.
 */
#define NICSIM_RDMA_DESC_MAGIC 0x4344524eu /* "NRDC" in memory order */
#define NICSIM_RDMA_DESC_VERSION 1u
#define NICSIM_RDMA_DESC_SIZE 32u

struct nicsim_rdma_desc {
	uint32_t magic;
	uint16_t version;
	uint16_t access;
	uint32_t nic_addr;
	uint32_t rkey;
	uint64_t va;
	uint64_t len;
};
_Static_assert(sizeof(struct nicsim_rdma_desc) == NICSIM_RDMA_DESC_SIZE, "descriptor is 32 bytes");
_Static_assert(offsetof(struct nicsim_rdma_desc, rkey) == 12, "rkey at 12");
_Static_assert(offsetof(struct nicsim_rdma_desc, va) == 16, "va at 16");

/* ---- Functions ------------------------------------------------------------ */

/*
 * Start the provider (reference-counted; each success needs one WSPCleanup).
 * Returns 0, or the error itself: WSAVERNOTSUPPORTED (below 2.2), WSAEFAULT
 * (lpWSPData or lpProcTable NULL), WSAENOBUFS (out of memory).  Fills
 * lpWSPData (version 2.2) and lpProcTable (see WSPPROC_TABLE).  The run
 * directory holding the NICs' sockets is fixed by the first start:
 * $NICSIM_DIR, else $XDG_RUNTIME_DIR/nicsim, else /tmp/nicsim-<uid>.
 */
int WSPAPI WSPStartupEx(WORD wVersionRequested, LPWSPDATA lpWSPData,
			LPWSAPROTOCOL_INFOW lpProtocolInfo, LPWSPUPCALLTABLEEX lpUpcallTable,
			LPWSPPROC_TABLE lpProcTable);

/*
 * Undo one WSPStartupEx.  The last one closes every socket still open
 * (releasing their registrations) and detaches from every NIC.
 * 0, or SOCKET_ERROR with WSANOTINITIALISED.
 */
int WSPAPI WSPCleanup(LPINT lpErrno);

/*
 * A socket: af AF_INET, type SOCK_STREAM, protocol 0 or IPPROTO_TCP.
 * lpProtocolInfo, g and dwFlags are ignored.  INVALID_SOCKET with
 * WSANOTINITIALISED, WSAEAFNOSUPPORT, WSAESOCKTNOSUPPORT, WSAEPROTONOSUPPORT,
 * WSAENOBUFS.
 */
SOCKET WSPAPI WSPSocket(int af, int type, int protocol, LPWSAPROTOCOL_INFOW lpProtocolInfo, GROUP g,
			DWORD dwFlags, LPINT lpErrno);

/*
 * Bind to the NIC serving the IPv4 address of name (a sockaddr_in; the port
 * is kept, not used yet).  INADDR_ANY picks the NIC with the lowest address
 * in the run directory.  Errors: WSAENOTSOCK, WSAEFAULT (name NULL or
 * namelen too small), WSAEAFNOSUPPORT (not AF_INET), WSAEINVAL (already
 * bound), WSAEADDRNOTAVAIL (no NIC with that address), WSAENETDOWN (a NIC is
 * there but does not answer or refuses the attach).
 */
int WSPAPI WSPBind(SOCKET s, const struct sockaddr *name, int namelen, LPINT lpErrno);

/* Close a socket, releasing every registration it holds.  WSAENOTSOCK. */
int WSPAPI WSPCloseSocket(SOCKET s, LPINT lpErrno);

/*
 * SIO_GET_EXTENSION_FUNCTION_POINTER: lpvInBuffer holds a GUID (cbInBuffer ==
 * sizeof(GUID)); the function's address is written at lpvOutBuffer
 * (cbOutBuffer >= sizeof(void *)) and *lpcbBytesReturned is its size.
 * Completes at once; lpOverlapped, lpCompletionRoutine and lpThreadId are
 * ignored.  Errors: WSAENOTSOCK, WSAEFAULT (a buffer NULL or too small),
 * WSAEINVAL (another code, or an unknown GUID), WSAEOPNOTSUPP (WSPRdmaRead
 * on a socket bound to a NIC without RDMA read; an unbound socket gets the
 * pointer, and WSPRdmaRead itself refuses later if its NIC cannot read).
 */
int WSPAPI WSPIoctl(SOCKET s, DWORD dwIoControlCode, LPVOID lpvInBuffer, DWORD cbInBuffer,
		    LPVOID lpvOutBuffer, DWORD cbOutBuffer, LPDWORD lpcbBytesReturned,
		    LPWSAOVERLAPPED lpOverlapped,
		    LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
		    LPWSATHREADID lpThreadId, LPINT lpErrno);

/*
 * Register lpBuffer for local use by the NIC of the bound socket s:
 * MEM_READ (the NIC reads it: send and RDMA-write source), MEM_WRITE or
 * MEM_READWRITE (the NIC may also write it: receive buffer, RDMA-read sink).
 * The pages are pinned (mlock) and entered in the NIC's TPT.  Registering the
 * same (buffer, length, flags) again in this process on the same NIC returns
 * the same handle and counts one more instance (R2).  The handle is valid
 * only with this process and with a socket holding an instance (R3).
 * NULL with WSAENOTSOCK, WSAENOTCONN (socket not bound), WSAEINVAL (bad
 * flags, zero length), WSAEFAULT (NULL, wrapping, unmapped or inaccessible
 * buffer), WSAENOBUFS (cannot pin, TPT full, larger than the NIC allows),
 * WSAENETDOWN (the NIC is gone).
 */
HANDLE WSPAPI WSPRegisterMemory(SOCKET s, PVOID lpBuffer, DWORD dwBufferLength, DWORD dwFlags,
				LPINT lpErrno);

/*
 * Release one instance of a WSPRegisterMemory handle held by socket s; the
 * last instance in the process removes the TPT entry and unpins.  SOCKET_ERROR
 * with WSAENOTSOCK, or WSAEINVAL (handle NULL, unknown, forged, released, or
 * not held by s; or the NIC reports the region in use): nothing changes then.
 */
int WSPAPI WSPDeregisterMemory(SOCKET s, HANDLE handle, LPINT lpErrno);

/*
 * Expose lpBuffer to the peer of socket s: MEM_READ (peer may RDMA-read),
 * MEM_WRITE (peer may RDMA-write), MEM_READWRITE.  *lpdwDescriptorLength is
 * the size of lpRdmaBufferDescriptor on entry and NICSIM_RDMA_DESC_SIZE on
 * return; a smaller buffer gives WSAEFAULT with the needed size written back.
 * The same buffer again on the same socket gives the same descriptor and one
 * more reference; on another socket a descriptor of its own.  Errors as
 * WSPRegisterMemory, and WSAEFAULT for a NULL lpdwDescriptorLength or
 * lpRdmaBufferDescriptor.
 */
int WSPAPI WSPRegisterRdmaMemory(SOCKET s, PVOID lpBuffer, DWORD dwBufferLength, DWORD dwFlags,
				 LPVOID lpRdmaBufferDescriptor, LPDWORD lpdwDescriptorLength,
				 LPINT lpErrno);

/*
 * Release one reference to a descriptor this socket registered; the last
 * one revokes the peer's access (the window or region is removed from the
 * TPT) and unpins when nothing else uses the pages.  SOCKET_ERROR with
 * WSAENOTSOCK, or WSAEINVAL (NULL, truncated, forged, stale, or another
 * socket's descriptor; or in use by a transfer): nothing changes then.
 */
int WSPAPI WSPDeregisterRdmaMemory(SOCKET s, LPVOID lpRdmaBufferDescriptor,
				   DWORD dwDescriptorLength, LPINT lpErrno);

/*
 * RDMA write/read.  This provider does not connect sockets yet, so after
 * validating the arguments both fail with WSAENOTCONN.
 * Argument errors: WSAENOTSOCK, WSAEFAULT (lpBuffers or the descriptor NULL),
 * WSAEINVAL (no buffers, descriptor length not NICSIM_RDMA_DESC_SIZE),
 * WSAEOPNOTSUPP (WSPRdmaRead on a NIC without RDMA read).
 */
int WSPAPI WSPRdmaWrite(SOCKET s, LPWSABUFEX lpBuffers, DWORD dwBufferCount,
			LPVOID lpTargetBufferDescriptor, DWORD dwTargetDescriptorLength,
			DWORD dwTargetBufferOffset, LPDWORD lpdwNumberOfBytesWritten, DWORD dwFlags,
			LPWSAOVERLAPPED lpOverlapped,
			LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
			LPWSATHREADID lpThreadId, LPINT lpErrno);
int WSPAPI WSPRdmaRead(SOCKET s, LPWSABUFEX lpBuffers, DWORD dwBufferCount,
		       LPVOID lpTargetBufferDescriptor, DWORD dwTargetDescriptorLength,
		       DWORD dwTargetBufferOffset, LPDWORD lpdwNumberOfBytesRead, DWORD dwFlags,
		       LPWSAOVERLAPPED lpOverlapped,
		       LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
		       LPWSATHREADID lpThreadId, LPINT lpErrno);

/*
 * Drop cached registrations overlapping [lpvAddress, lpvAddress + Size).
 * This provider caches nothing yet (every deregistration releases at once),
 * so the range was never cached: SOCKET_ERROR with WSAEINVAL, as the SPI
 * specifies for that case (WSANOTINITIALISED before WSPStartupEx).
 */
int WSPAPI WSPMemoryRegistrationCacheCallback(PVOID lpvAddress, SIZE_T Size, LPINT lpErrno);

/* ---- nicsim additions (not in Windows' ws2san.h) -------------------------- */

/*
 * The run directory the provider searches for NICs (see WSPStartupEx), as it
 * would resolve it now: for messages such as "no NIC in D".  Returns 0, or
 * -ENAMETOOLONG when it does not fit in size bytes.
 */
int prov_run_dir(char *buf, size_t size);

/* Symbolic name of a WSA error code ("WSAEFAULT"), or "WSA error" if unknown. */
const char *prov_wsa_name(int wsa_error);

#ifdef __cplusplus
}
#endif

#endif /* NICSIM_WS2SAN_H */
