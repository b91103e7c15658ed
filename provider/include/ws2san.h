/*
 * ws2san.h for nicsim: the SAN service provider interface (SPI) of Windows
 * Sockets Direct, as Microsoft's Windows Sockets Direct documentation and the
 * Windows SDK's ws2san.h define it, on Linux.  Names, structures, constants
 * and error codes keep Windows' values; what replaces Windows' own plumbing
 * is listed below.  docs/spi-guide.md walks through a first program.
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
 *     intptr_t (create it with eventfd(0, EFD_NONBLOCK)); WSA_INVALID_EVENT
 *     (-1) and 0 (Windows' NULL handle) mean "no event".  The provider
 *     signals an event by writing 1 to it; the application waits with
 *     poll() and resets it by reading it (WSPEnumNetworkEvents resets the
 *     event it is given).  Events are signalled without the application
 *     calling the provider: a thread of the provider runs the NIC's progress
 *     while operations with an event are in flight or sockets have selected
 *     FD_ACCEPT, FD_CONNECT or FD_CLOSE.
 *   - Upcalls (WSPUPCALLTABLEEX) are never called: the provider completes
 *     overlapped operations by writing the WSAOVERLAPPED bookkeeping fields
 *     (Internal, InternalHigh, Offset, OffsetHigh) and signalling hEvent.
 *     Completion routines (APCs on Windows) are not served: a data call
 *     given one fails with WSAEOPNOTSUPP.  A caller with no switch behind it
 *     passes NULL for the upcall table and the protocol info to WSPStartupEx.
 *   - There is no WSAGetLastError: every call reports its error through
 *     lpErrno.  lpErrno may be NULL; the error is then not reported, and the
 *     return value (SOCKET_ERROR, INVALID_SOCKET or NULL) still says "failed".
 *
 * The provider is process-wide (the SPI has no context parameter); every
 * function is thread-safe.  Linking libnicsimsp also interposes ten C
 * library functions (free, realloc, reallocarray, mmap, mmap64, munmap,
 * mremap, madvise, brk, sbrk) for its registration cache: nicsim_provider.h
 * says why, and how to turn caching off.
 *
 * The rules for registered memory, as the comments below number them:
 *   R1  a registration a transfer still uses cannot be deregistered;
 *   R2  registering the same buffer again counts one more instance of the
 *       same registration;
 *   R3  a registration handle is valid only in the registering process, and
 *       only with a socket that holds it;
 *   R4  an RDMA descriptor is valid only for RDMA started by the peer of the
 *       connection it was registered on, while registered and connected;
 *   R5  no other process can reach registered memory;
 *   R6  read-only registrations refuse writes, write-only ones refuse reads;
 *   R7  deregistered buffers stay pinned and registered in a cache, found
 *       again by address at no cost;
 *   R8  deregistering an RDMA buffer takes the peer's access away at once;
 *   R9  WSPMemoryRegistrationCacheCallback drops what the cache holds in a
 *       range;
 *   R10 the provider drops registrations before the application's memory
 *       changes under them (unmap, free: see nicsim_provider.h);
 *   R11 closing a socket releases what it registered and exposed.
 * docs/transport.md (R3-R6) and docs/registration-cache.md (R7-R11) say
 * how each is enforced.
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

/*
 * Socket options, level SOL_SOCKET (Linux's value) or WSA_SOL_SOCKET
 * (Windows' value); both are DWORDs.  See WSPGetSockOpt.
 */
#define WSA_SOL_SOCKET 0xffff
#define SO_MAX_RDMA_SIZE 0x700D
#define SO_RDMA_THRESHOLD_SIZE 0x700E

/* WSPIoctl codes. */
#define SIO_GET_EXTENSION_FUNCTION_POINTER 0xC8000006u
#define SIO_ADDRESS_LIST_QUERY 0x48000016u

/* Network events (WSPEventSelect, WSPEnumNetworkEvents), Windows' values. */
#define FD_READ_BIT 0
#define FD_WRITE_BIT 1
#define FD_OOB_BIT 2
#define FD_ACCEPT_BIT 3
#define FD_CONNECT_BIT 4
#define FD_CLOSE_BIT 5
#define FD_READ (1 << FD_READ_BIT)
#define FD_WRITE (1 << FD_WRITE_BIT)
#define FD_OOB (1 << FD_OOB_BIT)
#define FD_ACCEPT (1 << FD_ACCEPT_BIT)
#define FD_CONNECT (1 << FD_CONNECT_BIT)
#define FD_CLOSE (1 << FD_CLOSE_BIT)
#define FD_ALL_EVENTS ((1 << FD_MAX_EVENTS) - 1)

/* What a WSPAccept condition function returns. */
#define CF_ACCEPT 0x0000
#define CF_REJECT 0x0001
#define CF_DEFER 0x0002

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
#define WSATRY_AGAIN 11002

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

/* SIO_ADDRESS_LIST_QUERY's answer, in Winsock's layout. */
typedef struct _SOCKET_ADDRESS {
	struct sockaddr *lpSockaddr;
	INT iSockaddrLength;
} SOCKET_ADDRESS, *PSOCKET_ADDRESS, *LPSOCKET_ADDRESS;

typedef struct _SOCKET_ADDRESS_LIST {
	INT iAddressCount;
	SOCKET_ADDRESS Address[1]; /* iAddressCount of them */
} SOCKET_ADDRESS_LIST, *LPSOCKET_ADDRESS_LIST;

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
 * The procedure table WSPStartupEx fills, in Windows' member order.  Filled:
 * every call the Winsock switch makes on a SAN provider: Accept, Bind, Cleanup, CloseSocket,
 * Connect, EnumNetworkEvents, EventSelect, GetOverlappedResult, GetSockOpt,
 * Ioctl, Listen, Recv, Send, SetSockOpt, Socket.  The other slots are NULL.
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
 *       12    4 rkey      remote key: a memory window bound to this socket's
 *                         connection, or, on a NIC without windows, the
 *                         region's own key
 *       16    8 va        start of the buffer in the registering process
 *       24    8 len       length in bytes
 *
 * A descriptor is valid only for the peer of the socket that registered it
 * (R4), only while that socket is connected, and only until it is
 * deregistered: re-registering gives a new rkey.  Only a connected socket
 * can register one (WSAENOTCONN before WSPConnect or WSPAccept returned).
 * On a NIC without memory windows the rkey is the region's own key: the
 * NIC cannot tie it to one connection, so any peer of this process on that
 * NIC that learns it may use it until it is deregistered.
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
#ifndef __cplusplus /* C11's spelling; C++ has its own */
_Static_assert(sizeof(struct nicsim_rdma_desc) == NICSIM_RDMA_DESC_SIZE, "descriptor is 32 bytes");
_Static_assert(offsetof(struct nicsim_rdma_desc, rkey) == 12, "rkey at 12");
_Static_assert(offsetof(struct nicsim_rdma_desc, va) == 16, "va at 16");
#endif

/* ---- Functions ------------------------------------------------------------ */

/*
 * Start the provider (reference-counted; each success needs one WSPCleanup).
 * Returns 0, or the error itself: WSAVERNOTSUPPORTED (below 2.2), WSAEFAULT
 * (lpWSPData or lpProcTable NULL), WSAENOBUFS (out of memory).  Fills
 * lpWSPData (version 2.2) and lpProcTable (see WSPPROC_TABLE).  The run
 * directory holding the NICs' sockets is fixed by the first start:
 * $NICSIM_DIR, else $XDG_RUNTIME_DIR/nicsim (when that is a valid runtime
 * directory: the user's own, not writable by others), else
 * /tmp/nicsim-<uid> (nicsim_rundir.h, as nicsimd and `nicsim dir` resolve
 * it).  A directory that is a symbolic link, another user's, or writable by
 * group or others is not searched (a line on stderr says why): binding then
 * finds no NIC.
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
 * is the one WSPListen listens on and WSPConnect connects from, 0: the NIC's
 * choice).  INADDR_ANY picks the NIC with the lowest address in the run
 * directory.  Errors: WSAENOTSOCK, WSAEFAULT (name NULL or
 * namelen too small), WSAEAFNOSUPPORT (not AF_INET), WSAEINVAL (already
 * bound), WSAEADDRNOTAVAIL (no NIC with that address), WSAENETDOWN (a NIC is
 * there but does not answer or refuses the attach).
 */
int WSPAPI WSPBind(SOCKET s, const struct sockaddr *name, int namelen, LPINT lpErrno);

/*
 * Close a socket: every operation in flight on it completes at once with
 * WSA_OPERATION_ABORTED (pending receives included), a thread blocked in a
 * call on it returns WSAEINTR, a listening socket stops listening (the NIC
 * refuses the requests not yet accepted), a connection is disconnected (the
 * peer's operations then fail), the QP slot is freed, and every registration
 * and RDMA exposure the socket holds is released (R11).  WSAENOTSOCK.
 */
int WSPAPI WSPCloseSocket(SOCKET s, LPINT lpErrno);

/*
 * Listen on the bound port (port 0: a free port of 49152..65535, which the
 * socket then keeps).  backlog is clamped to 1..64 (the NIC refuses requests
 * past it).  Calling it again on a listening socket changes nothing.
 * Errors: WSAENOTSOCK, WSAEINVAL (not bound, or an argument the NIC
 * refuses), WSAEISCONN (connecting or connected), WSAEADDRINUSE (the port is
 * taken on this NIC), WSAENETDOWN.
 */
int WSPAPI WSPListen(SOCKET s, int backlog, LPINT lpErrno);

/*
 * Accept a connection on a listening socket: the new socket is bound like
 * the listener, connected, and inherits its event selection (and so its
 * non-blocking mode).  A blocking listener waits for a request (without
 * bound); a non-blocking one fails with WSAEWOULDBLOCK when none is pending
 * (FD_ACCEPT signals one).  lpfnCondition, if not NULL, is called without
 * any provider lock with the caller's address (lpCallerId) and the local
 * one (lpCalleeId) as sockaddr_in; the other arguments are NULL.  CF_ACCEPT
 * accepts, CF_REJECT refuses (the peer gets WSAECONNREFUSED; this call
 * WSAECONNREFUSED), CF_DEFER keeps the request for the next call (this call
 * WSATRY_AGAIN).  addr, if not NULL, gets the peer's sockaddr_in
 * (*addrlen >= its size).  Errors: WSAENOTSOCK, WSAEFAULT (addr without a
 * large enough *addrlen), WSAEINVAL (not listening, or a condition function
 * returned something else), WSAEWOULDBLOCK, WSAEINTR (the listener was
 * closed), WSAENOBUFS (every one of the 32 QP slots of this process's NIC
 * context is in use, or no memory), WSAECONNRESET (the peer gave up before the
 * connection was established), WSAENETDOWN.
 */
SOCKET WSPAPI WSPAccept(SOCKET s, struct sockaddr *addr, LPINT addrlen,
			LPCONDITIONPROC lpfnCondition, DWORD_PTR dwCallbackData, LPINT lpErrno);

/*
 * Connect to the NIC address and port of name (a sockaddr_in).  An unbound
 * socket is first bound as WSPBind with INADDR_ANY would.  A connected
 * socket owns one of the 32 QP slots of its NIC context until it closes;
 * the 33rd connection of a context fails with WSAENOBUFS.  Memory windows
 * the socket exposed before are bound to the connection (new keys: see the
 * RDMA buffer descriptor).  Blocking: returns when connected or refused
 * (bounded by the NIC's connection timeout, at most 60 s).  Non-blocking
 * (after WSPEventSelect): fails with WSAEWOULDBLOCK once the request is
 * sent; FD_CONNECT then reports the outcome with its error code.  After a
 * failed connect the socket may connect again.  Caller/callee data and QoS
 * are ignored (*lpCalleeData gets length 0).  Errors: WSAENOTSOCK,
 * WSAEFAULT (name NULL or namelen too small), WSAEAFNOSUPPORT,
 * WSAEADDRNOTAVAIL (INADDR_ANY or port 0, or no NIC to bind to), WSAEINVAL
 * (listening), WSAEALREADY (a non-blocking connect in progress), WSAEISCONN,
 * WSAECONNREFUSED (nobody listens there, or the peer refused),
 * WSAEHOSTUNREACH (no NIC with that address on the fabric), WSAETIMEDOUT
 * (no answer, and every unknown failure), WSAENOBUFS (as for WSPAccept),
 * WSAEINTR (closed by another thread), WSAENETDOWN.
 */
int WSPAPI WSPConnect(SOCKET s, const struct sockaddr *name, int namelen, LPWSABUF lpCallerData,
		      LPWSABUF lpCalleeData, LPQOS lpSQOS, LPQOS lpGQOS, LPINT lpErrno);

/*
 * Select network events for socket s, reported through hEventObject (an
 * eventfd) and WSPEnumNetworkEvents; makes the socket non-blocking (for
 * good, as in Winsock).  A new call replaces the selection and clears what
 * was recorded.  Reported: FD_ACCEPT (a request is pending; again after each
 * WSPAccept while more are), FD_CONNECT (a connect finished; its error code
 * says how), FD_CLOSE (the connection ended: 0 when the peer closed, else
 * why).  FD_READ, FD_WRITE and FD_OOB may be selected but are never
 * reported: data transfer completes through overlapped operations.
 * Errors: WSAENOTSOCK, WSAEINVAL (an unknown bit, or events without an
 * event object: hEventObject must be an eventfd).
 */
int WSPAPI WSPEventSelect(SOCKET s, WSAEVENT hEventObject, long lNetworkEvents, LPINT lpErrno);

/*
 * The network events recorded for s since the last call, with their error
 * codes (iErrorCode[FD_*_BIT], WSA codes); clears the record and resets
 * hEventObject if it is a valid event.  WSAENOTSOCK, WSAEFAULT.
 */
int WSPAPI WSPEnumNetworkEvents(SOCKET s, WSAEVENT hEventObject, LPWSANETWORKEVENTS lpNetworkEvents,
				LPINT lpErrno);

/*
 * SO_MAX_RDMA_SIZE (get only): the largest single transfer, send, receive or
 * RDMA: the NIC's largest registration capped at 1 GiB (the cap alone
 * before the socket is bound).  SO_RDMA_THRESHOLD_SIZE (get and set): the
 * smallest transfer worth doing by RDMA, a hint for the switch; 64 KiB
 * until set; an accepted socket starts with its listener's.  *optlen >= 4
 * on entry, 4 on return.  Errors: WSAENOTSOCK, WSAEINVAL (level not
 * SOL_SOCKET/WSA_SOL_SOCKET), WSAENOPROTOOPT (another option, or setting
 * SO_MAX_RDMA_SIZE), WSAEFAULT (optval or optlen NULL, or too small).
 */
int WSPAPI WSPGetSockOpt(SOCKET s, int level, int optname, char *optval, LPINT optlen,
			 LPINT lpErrno);
int WSPAPI WSPSetSockOpt(SOCKET s, int level, int optname, const char *optval, int optlen,
			 LPINT lpErrno);

/*
 * SIO_GET_EXTENSION_FUNCTION_POINTER: lpvInBuffer holds a GUID (cbInBuffer ==
 * sizeof(GUID)); the function's address is written at lpvOutBuffer
 * (cbOutBuffer >= sizeof(void *)) and *lpcbBytesReturned is its size.
 * SIO_ADDRESS_LIST_QUERY: the addresses of the NICs in the run directory,
 * ascending, as a SOCKET_ADDRESS_LIST followed by the sockaddr_in it points
 * to, all inside lpvOutBuffer; *lpcbBytesReturned is the size used, or the
 * size needed when cbOutBuffer is too small (WSAEFAULT).
 * Both complete at once; lpOverlapped, lpCompletionRoutine and lpThreadId are
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
 * only with this process and with a socket holding an instance (R3).  A
 * buffer still in the registration cache (R7) is found again with no
 * pinning and no NIC work, under the same handle.
 * NULL with WSAENOTSOCK, WSAENOTCONN (socket not bound), WSAEINVAL (bad
 * flags, zero length), WSAEFAULT (NULL, wrapping, unmapped or inaccessible
 * buffer), WSAENOBUFS (cannot pin: RLIMIT_MEMLOCK or memory; the kernel's
 * ptrace rules keep the NIC from this process's memory; TPT full; larger
 * than the NIC allows: NICSIM_DEBUG=1 and `nicsim show hosts` say which
 * limit, its value and how to raise it), WSAENETDOWN (the NIC is gone).
 */
HANDLE WSPAPI WSPRegisterMemory(SOCKET s, PVOID lpBuffer, DWORD dwBufferLength, DWORD dwFlags,
				LPINT lpErrno);

/*
 * Release one instance of a WSPRegisterMemory handle held by socket s.  The
 * last instance in the process leaves the buffer pinned and registered in
 * the registration cache (R7) until its memory changes, the cache callback
 * drops it, the limits evict it, or the sockets that registered it close
 * (with caching off, NICSIM_CACHE=off, it removes the TPT entry and unpins
 * at once; docs/registration-cache.md).  SOCKET_ERROR
 * with WSAENOTSOCK, or WSAEINVAL (handle NULL, unknown, forged, released, or
 * not held by s; or it is s's last instance and a transfer of s not yet
 * completed uses it (R1); or the NIC reports the region in use): nothing
 * changes then.
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
 * lpRdmaBufferDescriptor.  The socket must be connected: one not yet
 * connected (WSPConnect or WSPAccept has not returned it connected), and
 * one whose connection ended (closed by the peer, failed, or aborted),
 * give WSAENOTCONN and register nothing, as no peer could use the buffer.
 */
int WSPAPI WSPRegisterRdmaMemory(SOCKET s, PVOID lpBuffer, DWORD dwBufferLength, DWORD dwFlags,
				 LPVOID lpRdmaBufferDescriptor, LPDWORD lpdwDescriptorLength,
				 LPINT lpErrno);

/*
 * Release one reference to a descriptor this socket registered; the last
 * one revokes the peer's access at once (the window, or without windows the
 * region, is removed from the TPT after in-flight DMA drained), while the
 * pages stay pinned in the registration cache (R8): exposing the buffer
 * again costs no pinning, and gives a new key.  SOCKET_ERROR with
 * WSAENOTSOCK, or WSAEINVAL (NULL, truncated, forged, stale, or another
 * socket's descriptor; or in use by a transfer): nothing changes then.
 */
int WSPAPI WSPDeregisterRdmaMemory(SOCKET s, LPVOID lpRdmaBufferDescriptor,
				   DWORD dwDescriptorLength, LPINT lpErrno);

/*
 * A first message up to this size is held if it arrives before the first
 * receive; a larger one waits, with RNR NAKs, for a receive (see WSPRecv
 * below).
 */
#define NICSIM_FIRST_MESSAGE_MAX 256u

/*
 * Data transfer on a connected socket: WSPSend sends one message made of
 * lpBuffers; WSPRecv posts lpBuffers to receive the next message (the
 * switch's model: a message lands in the receive posted for it, and its
 * length is the byte count); WSPRdmaWrite writes lpBuffers to the peer's
 * buffer named by lpTargetBufferDescriptor (a descriptor the peer's
 * WSPRegisterRdmaMemory wrote) at dwTargetBufferOffset; WSPRdmaRead reads
 * from there into lpBuffers.  Each call posts one work request of 1 to 4
 * buffers; zero-length buffers are skipped.
 *
 * Local buffers: for WSPSend and WSPRecv each buffer must lie inside one
 * registration made with WSPRegisterMemory that socket s holds (MEM_WRITE or
 * MEM_READWRITE for WSPRecv); the provider finds it.  For the RDMA calls
 * each WSABUFEX names its registration by handle, which s must hold, and the
 * buffer must lie inside it (MEM_WRITE or MEM_READWRITE for a read's sink).
 * A registration used by a transfer cannot be deregistered until the
 * transfer completes (R1).
 *
 * Ordering (reliable connection): operations of one socket execute in the
 * order posted, and a send posted after an RDMA read waits for the read to
 * complete (fenced), so a "read done" message follows the data.
 *
 * The first message: each side of a new connection may send at once, up to
 * 256 bytes (NICSIM_FIRST_MESSAGE_MAX; Winsock Direct's negotiation
 * message), before the peer could post a receive: WSPRecv needs a connected
 * socket, so an accepting side posts only after WSPAccept returns.  The
 * NIC holds that message (the provider asks it to for every connection):
 * a first message of up to 256 bytes that arrives while no receive is
 * posted is kept by the receiving NIC and acknowledged, so the sender's
 * send completes and no RNR NAK is drawn, and the socket's first WSPRecv
 * completes with it as soon as the NIC sees it posted, exactly as if the
 * message had arrived then.  Later receives take later messages, in order.
 * Rules:
 *   - A receive posted before the first message takes it, whatever its
 *     size, as any receive.
 *   - A first message over 256 bytes that finds no receive posted is not
 *     held: the sender's NIC sends it again after each RNR NAK (every 0.64
 *     ms by default, docs/transport.md) until a receive is posted, and the
 *     send completes then, as for any message.  So is a second message
 *     that finds no receive: only the first is held.
 *   - A first WSPRecv shorter than the held message completes with
 *     WSAEMSGSIZE and breaks the connection, as any receive too short
 *     does; one whose memory was given back (R10) completes with WSAEFAULT.
 *     The sender's send had completed: it learns that the connection broke
 *     as after any error of its peer (WSAECONNRESET on its next call).
 *   - A held message that no receive took when the connection ends (either
 *     side closes, or it fails) is lost, although its sender's send
 *     completed: a protocol whose first message matters waits for an answer
 *     to it before closing.  The NIC counts such messages in
 *     first_msg_dropped (`nicsim stats`).
 *   - Holding costs no TPT entry and no receive of the socket: the buffer
 *     is the NIC's own, 256 bytes per connection.
 *   - The provider sends no immediate data and gives none to receives; a
 *     first message that is an RDMA write with immediate data (from another
 *     kind of host) is not held: it waits for a receive as above, and
 *     completes it with its length, as any receive reports one.
 *
 * Completion: with lpOverlapped, the call returns SOCKET_ERROR with
 * WSA_IO_PENDING once posted (Internal WSA_STATUS_PENDING) and completes
 * later: see WSPGetOverlappedResult; hEvent, if an eventfd, is signalled.
 * Without lpOverlapped, the call waits for its completion (on any socket)
 * and returns 0 with the byte count, or SOCKET_ERROR with the operation's
 * error.  lpCompletionRoutine must be NULL; lpThreadId and the RDMA calls'
 * dwFlags are ignored.  WSPSend's dwFlags and WSPRecv's *lpFlags must be 0.
 *
 * Errors of the call (nothing is posted): WSAENOTSOCK; WSAENOTCONN (not
 * connected: unbound, idle, listening or still connecting); WSAECONNRESET,
 * WSAECONNABORTED and the like (the connection failed earlier: later posts
 * fail at once with the error that ended it); WSAENETDOWN; WSAEFAULT
 * (lpBuffers NULL, a local buffer not inside a registration of s as the
 * operation needs, lpFlags NULL, the descriptor NULL, or offset + length past
 * the end of the target buffer); WSAEINVAL (no buffers or more than 4, an
 * RDMA handle that is not a registration s holds, a descriptor of the wrong
 * length or format, of another NIC than the peer's, or without the access
 * asked for); WSAEMSGSIZE (longer than SO_MAX_RDMA_SIZE); WSAENOBUFS (128
 * sends/RDMA operations, or 128 receives, already in flight on s);
 * WSAEOPNOTSUPP (a completion routine, WSPSend's or WSPRecv's flags, or
 * WSPRdmaRead on a NIC without RDMA read).
 *
 * Errors of the completion (OffsetHigh, and WSPGetOverlappedResult's error),
 * from the NIC's completion status:
 *   success ............................................ 0
 *   flushed: socket closed, connection ended, or an
 *     earlier operation failed (WR_FLUSH_ERR) .......... WSA_OPERATION_ABORTED
 *   the NIC died (no answer, socket hung up) ........... WSAENETDOWN (within 1 s)
 *   the message is longer than the receive (LOC_LEN),
 *     or a first message longer than 256 bytes ......... WSAEMSGSIZE
 *   a local key or local DMA failed (LOC_PROT) ......... WSAEFAULT
 *   a malformed request (LOC_QP_OP) .................... WSAEINVAL
 *   the peer refused it: remote key, access or range
 *     (REM_ACCESS), invalid request (REM_INV_REQ),
 *     remote failure (REM_OP), bad response ............ WSAECONNRESET
 *   no answer or no receive at the peer within the
 *     retry limits (RETRY_EXC, RNR_RETRY_EXC) .......... WSAECONNABORTED
 * Any error other than a flush breaks the connection: the NIC flushes the
 * socket's other operations, and later posts fail at once with that error.
 * WSAECONNRESET here does not mean the peer reset: nicsim_socket_error()
 * (nicsim_provider.h) names the kind of refusal, both ends and QPs, and
 * what to look at next; for a remote access error (a stale, forged or
 * foreign key, a range or an access right the peer's NIC refused), run
 * `nicsim show faults --nic PEER`, which shows the rule that refused it and
 * this socket as the requester.  NICSIM_DEBUG=1 prints the same on stderr.
 * The peer closing (or its process dying) flushes the operations in flight
 * (WSA_OPERATION_ABORTED), and later posts fail with WSAECONNRESET; so does
 * the peer's connection failing (any error other than a flush on its side):
 * its provider disconnects, unless the link drops that too (the socket then
 * learns when its own transport fails, or when it is closed).  A
 * connection that ends completes what is pending on it within milliseconds
 * whether or not a thread of the application is in a provider call: its
 * events fire and its WSAOVERLAPPED structures say done (a thread of the
 * provider watches for connection ends once a connection exists).
 */
int WSPAPI WSPSend(SOCKET s, LPWSABUF lpBuffers, DWORD dwBufferCount, LPDWORD lpNumberOfBytesSent,
		   DWORD dwFlags, LPWSAOVERLAPPED lpOverlapped,
		   LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine, LPWSATHREADID lpThreadId,
		   LPINT lpErrno);
int WSPAPI WSPRecv(SOCKET s, LPWSABUF lpBuffers, DWORD dwBufferCount, LPDWORD lpNumberOfBytesRecvd,
		   LPDWORD lpFlags, LPWSAOVERLAPPED lpOverlapped,
		   LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine, LPWSATHREADID lpThreadId,
		   LPINT lpErrno);
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
 * The result of an overlapped operation of socket s.  Done: TRUE with the
 * byte count in *lpcbTransfer and the flags (0) in *lpdwFlags, or FALSE with
 * the operation's error (see the data transfer calls).  Pending: with fWait
 * FALSE, FALSE with WSA_IO_INCOMPLETE; with fWait TRUE, waits (spinning
 * briefly, then sleeping) until it completes.  The WSAOVERLAPPED fields say
 * the same: Internal WSA_STATUS_PENDING until done (then 0), InternalHigh
 * the byte count, OffsetHigh the error, Offset the flags.  Errors:
 * WSAENOTSOCK, WSAEFAULT (lpOverlapped, lpcbTransfer or lpdwFlags NULL),
 * WSAEINVAL (pending, but not an operation in flight on s).
 */
BOOL WSPAPI WSPGetOverlappedResult(SOCKET s, LPWSAOVERLAPPED lpOverlapped, LPDWORD lpcbTransfer,
				   BOOL fWait, LPDWORD lpdwFlags, LPINT lpErrno);

/*
 * Drop every registration the cache holds that overlaps any byte of
 * [lpvAddress, lpvAddress + Size), on every NIC, whichever sockets made it
 * (R9; docs/registration-cache.md).  Unused cached ones are deregistered,
 * unpinned and forgotten; ones still in use lose their NIC registration,
 * pins and windows at once, and their handles and descriptors are then good
 * only for deregistering (a transfer naming them fails with WSAEFAULT).  The
 * provider's memory monitor calls the same code before munmap, mremap,
 * madvise, brk, sbrk, free and realloc change registered memory.  0, or
 * SOCKET_ERROR with WSAEINVAL (nothing cached there, Size 0), WSAEFAULT (a
 * NIC could not confirm a release), WSANOTINITIALISED (before WSPStartupEx).
 */
int WSPAPI WSPMemoryRegistrationCacheCallback(PVOID lpvAddress, SIZE_T Size, LPINT lpErrno);

/* The nicsim extras (not in Windows' ws2san.h) are in nicsim_provider.h. */

#ifdef __cplusplus
}
#endif

#endif /* NICSIM_WS2SAN_H */
