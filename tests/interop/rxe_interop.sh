#!/usr/bin/env bash
# nicsim against Linux Soft-RoCE (rdma_rxe): the interop test (ctest label
# interop, `scripts/test --interop`).
#
#   tests/interop/rxe_interop.sh BIN_DIR
#
# Boots the virtual machine of scripts/rxe-vm (building its image first if
# there is none) in a network namespace of its own, starts a nicsim NIC with
# --udp at 198.18.100.1 on the host side of the tap, and has nicsim and
# rdma_rxe (198.18.100.2) exchange real traffic, checked on both sides:
#
#   cm        the RDMA CM handshake both ways: REQ/REP/RTU, DREQ/DREP, the
#             service ID of port 7174 and the IP CM private data, as tshark
#             reads them on the tap
#   rping     rdmacm-utils' rping in the VM against nicsim-rping, each as
#             client and as server, data verified by both
#   sizes     RDMA READ and WRITE of 1 B to 16 MiB both ways (vping, the
#             verbs peer in tests/interop/vping.c, built in the VM)
#   forge     a forged rkey from each side, refused by the other with a NAK
#             (remote access error), seen by the forger and in the capture
#   capture   the tap's capture (tshark) and nicsim's own agree frame for
#             frame, and neither has a malformed frame
#   mtu       the path MTU from the CM exchange, at every IB MTU 256..4096
#             (the link's Ethernet MTU set to match), the data packets no
#             larger
#   loss      2% of nicsim's datagrams lost (nicsim link set --remote):
#             the pings still complete, rxe NAKs the gaps, nicsim goes back
#             and meets rxe's retransmissions; then 2% of rxe's lost (netem
#             in the VM): nicsim's NAKs reach rxe
#
# Every check prints PASS or FAIL with what it saw; the exit status is 0
# only if all passed.  Needs root, and the packages scripts/rxe-vm names
# (scripts/test --interop installs them).  Whatever happens, the VM, the
# NIC, the captures and the namespace end with the script.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(cd "${1:?usage: rxe_interop.sh BIN_DIR}" && pwd)
VMCTL=$ROOT/scripts/rxe-vm
HOST=198.18.100.1
GUEST=198.18.100.2
PORT=7174
TAP=rxetap0
NS=nsi-$$-$RANDOM
WORK=${TMPDIR:-/tmp}/nicsim-interop-$$-$RANDOM
export NICSIM_VM_DIR=${NICSIM_VM_DIR:-$ROOT/build/rxe-vm}
export NICSIM_VM_RUN=$WORK/vm
export NICSIM_DIR=$WORK/run
WAIT_S=120 # bound of every wait for a state (a listener, a device)
RUN_S=900  # bound of each exchange: 16 MiB under loss on a busy host is slow
# vping's bound on each of its own waits (a completion, a CM event).
VPING="vping --timeout 300"
SIZES_1M=1,2,255,256,1023,1024,1025,4096,65535,65536,1048576
SIZES=$SIZES_1M,16777216

passes=0
fails=0
pids=()
vm_up=0

say() { printf '==> %s\n' "$*"; }
pass() {
	printf 'PASS %s\n' "$*"
	passes=$((passes + 1))
}
fail() {
	printf 'FAIL %s\n' "$*"
	fails=$((fails + 1))
}
inns() { ip netns exec "$NS" "$@"; }
vm() { "$VMCTL" ssh "$@"; }

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null
	done
	"$BIN/nicsim" down --dir "$NICSIM_DIR" >/dev/null 2>&1
	((vm_up)) && "$VMCTL" stop >/dev/null 2>&1
	ip netns del "$NS" 2>/dev/null
	if ((fails)) && [[ -d $WORK ]]; then
		# Kept for a look: the logs, captures and the VM's console.
		printf 'logs kept in %s\n' "$WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'echo "rxe_interop: interrupted"; fails=$((fails + 1)); exit 130' INT
trap 'echo "rxe_interop: terminated"; fails=$((fails + 1)); exit 143' TERM

# Wait (bounded) until CMD succeeds.  Returns 1 after WAIT_S seconds.
wait_for() {
	local deadline=$((SECONDS + WAIT_S))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
}

# Start CMD in the namespace in the background, output to LOG; its pid in
# $last_pid (also remembered for the cleanup).
start_bg() {
	local log=$1
	shift
	inns timeout "$RUN_S" "$@" >"$log" 2>&1 &
	last_pid=$!
	pids+=("$last_pid")
}

# Wait for the background pid; its exit status.
finish_bg() {
	local rc=0
	wait "$1" || rc=$?
	return "$rc"
}

# The VM's rdma_cm listens on PORT (an rping or vping server is ready).
vm_listening() {
	vm "rdma resource show cm_id | grep -q 'state LISTEN.*src-addr $GUEST:$PORT '"
}

# nicsim-rping's server said it listens.
ns_listening() { grep -q 'listening on' "$1"; }

# A counter of the nicsim NIC (as nicsim stats lists it: name, value, text).
ns_stat() {
	"$BIN/nicsim" stats --dir "$NICSIM_DIR" --nic "$HOST" 2>/dev/null |
		awk -v k="$1" '$1 == k { print $2; exit }'
}

# A counter of rxe0 in the VM.
vm_stat() { vm "cat /sys/class/infiniband/rxe0/ports/1/hw_counters/$1"; }

# ---- Set-up ---------------------------------------------------------------

((EUID == 0)) || {
	echo "rxe_interop: needs root (network namespace, tap device, raw sockets)" >&2
	exit 1
}
for tool in qemu-system-x86_64 debootstrap tshark ip ssh; do
	command -v "$tool" >/dev/null || {
		echo "rxe_interop: $tool is missing: run scripts/test --interop, which installs it" >&2
		exit 1
	}
done
# A run killed outright (SIGKILL: ctest's timeout) leaves its namespace,
# and in it the VM and the NIC, which run detached.  Its name holds its
# script's pid: end what is in the namespaces of runs no longer running.
for old in $(ip netns list 2>/dev/null | grep -o '^nsi-[0-9]*-[0-9]*'); do
	opid=${old#nsi-}
	opid=${opid%%-*}
	kill -0 "$opid" 2>/dev/null && continue
	say "removing $old, left by a run that was killed"
	for p in $(ip netns pids "$old" 2>/dev/null); do
		kill -KILL "$p" 2>/dev/null
	done
	ip netns del "$old" 2>/dev/null
done
mkdir -m 700 "$WORK" || exit 1
if [[ ! -f $NICSIM_VM_DIR/rootfs.img ]]; then
	say "no VM image in $NICSIM_VM_DIR: building it"
	"$VMCTL" build || exit 1
fi
ip netns add "$NS" || exit 1
say "namespace $NS, work directory $WORK"
vm_up=1
"$VMCTL" start --netns "$NS" --tap "$TAP" || exit 1
say "starting the nicsim NIC $HOST with --udp"
inns "$BIN/nicsim" up --udp --nic "$HOST" --dir "$NICSIM_DIR" || exit 1
say "building vping in the VM"
"$VMCTL" copy "$ROOT/tests/interop/vping.c" /root/vping.c || exit 1
vm 'gcc -O2 -Wall -Wextra -Werror -o /usr/local/bin/vping /root/vping.c -lrdmacm -libverbs' ||
	exit 1

# ---- Captures ---------------------------------------------------------------

tap_pcap=$WORK/tap.pcapng
nic_pcap=$WORK/nicsim.pcapng
# Captures are bounded by the whole run's length, not by one wait's.
start_capture() {
	local log=$1 pcap=$2
	# A large kernel buffer (-B, MiB): a 16 MiB transfer is a burst of
	# 16,000 frames, which the default 2 MiB drops part of on a busy host.
	inns timeout 3600 tshark -i "$TAP" -B 256 -f "udp port 4791" -w "$pcap" >"$log" 2>&1 &
	last_pid=$!
	pids+=("$last_pid")
}
# TERM (timeout passes it on; tshark and nicsim capture finish their files
# on it), then wait.
stop_capture() {
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
start_capture "$WORK/tshark.log" "$tap_pcap"
tshark_pid=$last_pid
wait_for grep -q "Capturing on" "$WORK/tshark.log" || fail "capture: tshark did not start"
"$BIN/nicsim" capture --dir "$NICSIM_DIR" -w "$nic_pcap" 2>"$WORK/capture.log" &
capture_pid=$!
pids+=("$capture_pid")

# ---- rping both ways (and the CM, checked in the capture below) ----------------

# verdict NAME NICSIM_RC NICSIM_LOG VM_RC VM_LOG: PASS with nicsim-rping's
# last line if both sides exited 0, else FAIL with both sides' last lines.
verdict() {
	local name=$1 nrc=$2 nlog=$3 vrc=$4 vlog=$5
	if ((nrc == 0 && vrc == 0)); then
		pass "$name: $(tail -1 "$nlog" | cut -c1-150)"
		return 0
	fi
	fail "$name: nicsim side exit $nrc: $(tail -2 "$nlog" | tr '\n' ' ' | cut -c1-300)" \
		"/ VM side exit $vrc: $(tail -2 "$vlog" | tr '\n' ' ' | cut -c1-200)"
	return 1
}

# nicsim-rping server, then CLIENT_CMD in the VM; both must exit 0.
# run_nicsim_server NAME SERVER_ARGS -- VM_CLIENT_CMD
run_nicsim_server() {
	local name=$1 log=$WORK/$1.server.log cl=$WORK/$1.client.log rc_s rc_c
	shift
	local args=()
	while [[ $1 != -- ]]; do
		args+=("$1")
		shift
	done
	shift
	start_bg "$log" "$BIN/nicsim-rping" -s -a "$HOST" -p "$PORT" "${args[@]}"
	local spid=$last_pid
	if ! wait_for ns_listening "$log"; then
		fail "$name: nicsim-rping did not listen: $(tail -3 "$log")"
		return 1
	fi
	vm "timeout $RUN_S $*" >"$cl" 2>&1
	rc_c=$?
	finish_bg "$spid"
	rc_s=$?
	verdict "$name" "$rc_s" "$log" "$rc_c" "$cl"
}

# SERVER_CMD in the VM, then nicsim-rping client; both must exit 0.
# run_vm_server NAME VM_SERVER_CMD -- CLIENT_ARGS
run_vm_server() {
	local name=$1 log=$WORK/$1.client.log sl=$WORK/$1.server.log rc_s rc_c cmd=()
	shift
	while [[ $1 != -- ]]; do
		cmd+=("$1")
		shift
	done
	shift
	vm "timeout $RUN_S ${cmd[*]}" >"$sl" 2>&1 &
	local spid=$!
	pids+=("$spid")
	if ! wait_for vm_listening; then
		fail "$name: the VM's server did not listen: $(tail -3 "$sl")"
		return 1
	fi
	inns timeout "$RUN_S" "$BIN/nicsim-rping" -c -a "$GUEST" -I "$HOST" -p "$PORT" "$@" \
		>"$log" 2>&1
	rc_c=$?
	finish_bg "$spid"
	rc_s=$?
	verdict "$name" "$rc_c" "$log" "$rc_s" "$sl"
}

say "rping"
run_vm_server rping-vm-server stdbuf -oL rping -s -a "$GUEST" -p "$PORT" -V -v -C 10 -- \
	-V -v -C 10 &&
	{
		grep -q 'server ping data: rdma-ping-9: J' "$WORK/rping-vm-server.server.log" ||
			fail "rping-vm-server: rping did not print ping 9's data"
	}
run_nicsim_server rping-nicsim-server -V -v -C 10 -S 65535 -- \
	rping -c -a "$HOST" -p "$PORT" -V -v -C 10 -S 65535 &&
	{
		[[ $(grep -c '^ping data: rdma-ping-' "$WORK/rping-nicsim-server.client.log") == 10 ]] ||
			fail "rping-nicsim-server: rping printed $(grep -c '^ping data' \
				"$WORK/rping-nicsim-server.client.log") pings, not 10"
	}

say "RDMA READ and WRITE, 1 B to 16 MiB, both ways"
t0=$SECONDS
run_vm_server sizes-vm-server $VPING -s -a "$GUEST" -p "$PORT" -V -C 12 -- -V --sizes "$SIZES"
t1=$SECONDS
run_nicsim_server sizes-nicsim-server -V -C 12 -- \
	$VPING -c -a "$HOST" -p "$PORT" -V --sizes "$SIZES"
say "(sizes: $((t1 - t0)) s with rxe as server, $((SECONDS - t1)) s with nicsim as server)"

say "forged rkeys"
# The refusals nicsim's TPT recorded of requests from the VM (a line each).
refusals() {
	"$BIN/nicsim" show faults --dir "$NICSIM_DIR" --nic "$HOST" 2>/dev/null | grep -c "from $GUEST "
}
faults0=$(refusals)
run_nicsim_server forge-by-nicsim --forge-rkey read -- \
	$VPING -c -a "$HOST" -p "$PORT" -V -C 1 --expect-broken
grep -q 'NIC status 7' "$WORK/forge-by-nicsim.server.log" ||
	fail "forge-by-nicsim: nicsim's READ did not end with a remote access error"
run_vm_server forge-by-rxe $VPING -s -a "$GUEST" -p "$PORT" --forge-rkey write -- \
	-V -C 1 --expect-broken
grep -qi 'remote access error' "$WORK/forge-by-rxe.server.log" ||
	fail "forge-by-rxe: rxe's WRITE did not end with a remote access error"
faults1=$(refusals)
if ((faults1 == faults0 + 1)); then
	pass "forge: nicsim show faults lists the refusal of rxe's forged key: $("$BIN/nicsim" show faults --dir "$NICSIM_DIR" --nic "$HOST" | grep "from $GUEST " | tail -1 | cut -d' ' -f5-15)"
else
	fail "forge: nicsim show faults lists $((faults1 - faults0)) new refusals of requests from $GUEST, not 1"
fi

# ---- The captures -------------------------------------------------------------

# nicsim's capture ends first, then the tap's: the tap's then holds every
# frame nicsim's does, and perhaps a few later ones (a DREQ sent again).
stop_capture "$capture_pid"
stop_capture "$tshark_pid"

# Two passes of tshark over each capture (they hold some 10^5 frames): a
# line per frame, "source destination opcode PSN destination-QP IP-length
# ICRC", and the frames tshark finds malformed or in error.
FIELDS=(-T fields -E separator=' ' -E occurrence=f -e ip.src -e ip.dst -e infiniband.bth.opcode
	-e infiniband.bth.psn -e infiniband.bth.destqp -e ip.len -e infiniband.invariant.crc)
say "captures"
for f in tap nic; do
	pcap=$tap_pcap
	[[ $f == nic ]] && pcap=$nic_pcap
	tshark -r "$pcap" "${FIELDS[@]}" >"$WORK/$f.all.txt" 2>/dev/null
	n=$(wc -l <"$WORK/$f.all.txt")
	m=$(tshark -r "$pcap" -Y "_ws.malformed || _ws.expert.severity >= error" 2>/dev/null | wc -l)
	if ((n > 0 && m == 0)); then
		pass "capture: $(basename "$pcap"): $n frames, none malformed"
	else
		fail "capture: $(basename "$pcap"): $n frames, $m malformed or in error"
	fi
	awk -v h="$HOST" '$1 == h { print $1, $2, $3, $4, $5, $6, $7 }' "$WORK/$f.all.txt" >"$WORK/$f.src.txt"
	awk -v h="$HOST" '$2 == h { print $1, $2, $3, $4, $5, $6, $7 }' "$WORK/$f.all.txt" >"$WORK/$f.dst.txt"
done
agree=1
later=0
for dir in src dst; do
	n=$(wc -l <"$WORK/nic.$dir.txt")
	t=$(wc -l <"$WORK/tap.$dir.txt")
	if ((n == 0 || t < n)) || ! head -n "$n" "$WORK/tap.$dir.txt" | cmp -s - "$WORK/nic.$dir.txt"; then
		agree=0
		fail "capture: frames with $HOST as $dir differ: tap $t, nicsim $n (tshark: $(grep -ih dropped "$WORK/tshark.log" | tr '\n' ' ')); first difference:
$(head -n "$n" "$WORK/tap.$dir.txt" | diff - "$WORK/nic.$dir.txt" | head -4)"
	fi
	later=$((later + t - n))
done
((agree)) && pass "capture: tap and nicsim agree frame for frame, ICRCs included: $(wc -l <"$WORK/nic.src.txt") sent by nicsim, $(wc -l <"$WORK/nic.dst.txt") received (the tap saw $later more after nicsim's capture ended)"

# The CM, as Wireshark reads it on the tap: one pass over its MADs.
tshark -r "$tap_pcap" -Y infiniband.mad -T fields -E separator=' ' -E occurrence=f -e ip.src \
	-e infiniband.mad.attributeid -e infiniband.cm.req.serviceid -e infiniband.cm.req.ip_cm.ipv \
	-e infiniband.cm.req.ip_cm.sip4 -e infiniband.cm.req.ip_cm.dip4 >"$WORK/cm.txt" 2>/dev/null
cm_check() {
	local what=$1 pattern=$2 got
	got=$(grep -c -E "$pattern" "$WORK/cm.txt")
	if ((got >= 1)); then
		pass "cm: $what ($got)"
	else
		fail "cm: $what: none in the capture (looked for /$pattern/ in $WORK/cm.txt)"
	fi
}
sid=$(printf '0x000000000106%04x' "$PORT")
for side in "$HOST $GUEST nicsim" "$GUEST $HOST rxe"; do
	read -r from to who <<<"$side"
	cm_check "REQ from $who, service ID $sid, IP CM private data from $from to $to" \
		"^$from 0x0010 $sid 0x04 $from $to\$"
	cm_check "REP from $who" "^$from 0x0013"
	cm_check "RTU from $who" "^$from 0x0014"
	cm_check "DREQ from $who" "^$from 0x0015"
	cm_check "DREP from $who" "^$from 0x0016"
done

# ---- Path MTU ---------------------------------------------------------------------

say "path MTU 256 .. 4096"
# Ethernet MTU -> the IB MTU both sides must take from it: rdma_rxe keeps 80
# bytes for headers (rxe_set_mtu), nicsim 64, the RDMA CM's route 96
# (iboe_get_mtu), so each Ethernet MTU is well inside one IB MTU for all.
for pair in 400:256 800:512 1500:1024 2200:2048 4200:4096; do
	eth=${pair%%:*}
	ib=${pair##*:}
	inns ip link set "$TAP" mtu "$eth"
	vm "ip link set eth0 mtu $eth" || fail "mtu $ib: could not set the guest's MTU"
	wait_for vm "ibv_devinfo -d rxe0 | grep -q 'active_mtu:.*$ib '" ||
		fail "mtu $ib: rxe0 did not take active_mtu $ib"
	pcap=$WORK/mtu-$ib.pcapng
	start_capture "$WORK/mtu-$ib.tshark.log" "$pcap"
	tpid=$last_pid
	wait_for grep -q "Capturing on" "$WORK/mtu-$ib.tshark.log"
	ok=1
	run_vm_server "mtu-$ib-rxe-server" $VPING -s -a "$GUEST" -p "$PORT" -V -C 1 -- \
		-V -C 1 -S 20000 || ok=0
	run_nicsim_server "mtu-$ib-nicsim-server" -V -C 1 -- \
		$VPING -c -a "$HOST" -p "$PORT" -V -S 20000 || ok=0
	stop_capture "$tpid"
	code=$(tshark -r "$pcap" -Y infiniband.cm.req -T fields -e infiniband.cm.req.pppmtu 2>/dev/null |
		sort -u | tr '\n' ' ')
	# The payload of each side's middle packets (SEND, RDMA WRITE, RDMA READ
	# response Middle: no header beyond the BTH), which is the MTU exactly:
	# IP length less IP (20), UDP (8), BTH (12) and ICRC (4); and how many
	# RC packets exceed MTU + those + a RETH (16), the largest extra header.
	mid=(-Y "infiniband.bth.opcode in {1, 7, 14}" -T fields -e ip.src -e ip.len)
	read -r big_n big_r < <(tshark -r "$pcap" "${mid[@]}" 2>/dev/null |
		awk -v h="$HOST" '{ p = $2 - 44; if ($1 == h) { if (p > n) n = p } else if (p > r) r = p }
			END { print n + 0, r + 0 }')
	over=$(tshark -r "$pcap" -Y "infiniband.bth.opcode < 0x20 && ip.len > $((ib + 60))" 2>/dev/null |
		wc -l)
	want_code=$(awk -v m="$ib" 'BEGIN { c = 0; for (v = 256; v <= m; v *= 2) c++; printf "0x%02x", c }')
	if ((ok)) && [[ $code == "$want_code " ]] && ((big_n == ib && big_r == ib && over == 0)); then
		pass "mtu $ib (Ethernet $eth): both REQs say path MTU $want_code; middle packets carry $big_n bytes from nicsim, $big_r from rxe; none larger"
	else
		fail "mtu $ib (Ethernet $eth): REQ path MTU codes '$code' (want $want_code); middle packets $big_n bytes from nicsim, $big_r from rxe (want $ib); $over packets too large"
	fi
done
inns ip link set "$TAP" mtu 1500
vm "ip link set eth0 mtu 1500"

# ---- Loss on nicsim's side -----------------------------------------------------------

say "2% loss on nicsim's datagrams"
"$BIN/nicsim" link set --dir "$NICSIM_DIR" --remote "$HOST" "$GUEST" loss 2 seed 7 >/dev/null ||
	fail "loss: nicsim link set refused"
retx0=$(ns_stat retransmits)
dup0=$(ns_stat duplicates)
seq0=$(vm_stat out_of_seq_request)
run_vm_server loss-rxe-server $VPING -s -a "$GUEST" -p "$PORT" -V -C 12 -- -V --sizes "$SIZES"
run_nicsim_server loss-nicsim-server -V -C 12 -- \
	$VPING -c -a "$HOST" -p "$PORT" -V --sizes "$SIZES"
retx1=$(ns_stat retransmits)
dup1=$(ns_stat duplicates)
seq1=$(vm_stat out_of_seq_request)
say "(nicsim: go-back-N restarts $retx0 -> $retx1, duplicate requests $dup0 -> $dup1; rxe: out-of-sequence requests NAKed $seq0 -> $seq1)"
# rxe NAKs the gaps nicsim's losses leave in its requests, and nicsim goes
# back; rxe retransmits what nicsim's lost responses and ACKs left
# unanswered, and nicsim meets the duplicates.
if ((retx1 > retx0 && dup1 > dup0 && seq1 > seq0)); then
	pass "loss: rxe NAKed $((seq1 - seq0)) out-of-sequence requests and nicsim went back $((retx1 - retx0)) times; nicsim met $((dup1 - dup0)) requests rxe sent again"
else
	fail "loss: retransmissions and NAKs not seen on both sides (figures above)"
fi
"$BIN/nicsim" link set --dir "$NICSIM_DIR" --remote "$HOST" "$GUEST" clear >/dev/null

# And the other way: rxe's datagrams lost on the VM's way out (netem), so
# that nicsim's NAKs reach rxe's requester and nicsim answers rxe's
# retransmissions of requests it had not seen.
say "2% loss on rxe's datagrams (netem in the VM), up to 1 MiB"
if vm "modprobe sch_netem && tc qdisc add dev eth0 root netem loss 2%"; then
	naks0=$(ns_stat naks_sent)
	nakr0=$(vm_stat rcvd_seq_err)
	# Up to 1 MiB: nicsim asks again for a READ's responses from the first
	# one lost, at once, but rxe serves that only once it has sent the
	# rest of the first request's (a 16 MiB READ at 2% loss did not end
	# in 60 s under emulation here).
	run_vm_server loss-vm-rxe-server $VPING -s -a "$GUEST" -p "$PORT" -V -C 11 -- -V --sizes "$SIZES_1M"
	run_nicsim_server loss-vm-nicsim-server -V -C 11 -- \
		$VPING -c -a "$HOST" -p "$PORT" -V --sizes "$SIZES_1M"
	naks1=$(ns_stat naks_sent)
	nakr1=$(vm_stat rcvd_seq_err)
	vm "tc qdisc del dev eth0 root"
	say "(nicsim: NAKs sent $naks0 -> $naks1; rxe: sequence error NAKs received $nakr0 -> $nakr1)"
	if ((naks1 > naks0 && nakr1 > nakr0)); then
		pass "loss in the VM: nicsim sent $((naks1 - naks0)) NAKs and rxe's requester received $((nakr1 - nakr0)) sequence error NAKs"
	else
		fail "loss in the VM: nicsim's NAKs did not reach rxe (figures above)"
	fi
else
	fail "loss in the VM: could not add netem to eth0"
fi

printf '\nrxe_interop: %d passed, %d failed\n' "$passes" "$fails"
((fails == 0))
