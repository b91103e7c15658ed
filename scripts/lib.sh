# shellcheck shell=bash
# Shared by scripts/bootstrap and scripts/test (sourced, not run).
#
# ns_install_missing  installs, with apt-get, the Debian packages nicsim needs
#                     that dpkg does not list as installed.
# ns_configure DIR ARGS...  configures a CMake build tree (Ninja for a new one).
# ns_build DIR        builds it with NS_JOBS jobs.
# ns_burners_start N SECONDS  starts N CPU-burning processes, each ended by
#                     timeout after SECONDS at the latest; their pids are in
#                     NS_BURNERS.
# ns_burners_stop     ends them, by pid.
# ns_loaded_ctest B DIR LOG ARGS...  runs ctest ARGS on build tree DIR with B
#                     burners beside it, its output to the terminal and LOG.

NS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NS_JOBS=${NS_JOBS:-2}

# Everything a fresh Debian machine needs to build nicsim and run its tests.
NS_PACKAGES=(
	build-essential cmake ninja-build pkg-config
	clang clang-format
	libcunit1-dev libpcap-dev
	valgrind
	ucx-utils # ucx_perftest: the UCX-over-TCP reference of bench_transport
	tshark    # test_capture reads nicsim's captures with it
	iproute2  # ip: the network namespaces of the --udp tests
)

# What the interop test's Soft-RoCE machine (scripts/rxe-vm) needs on the
# host, beyond NS_PACKAGES: installed by scripts/test --interop only.
NS_VM_PACKAGES=(qemu-system-x86 debootstrap e2fsprogs openssh-client)

ns_say() {
	printf '==> %s\n' "$*"
}

ns_die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

ns_install_missing() {
	local pkg missing=() sudo=()

	if ! command -v dpkg-query >/dev/null; then
		ns_say "not a Debian system: make sure these are installed: ${NS_PACKAGES[*]}"
		return 0
	fi
	for pkg in "${NS_PACKAGES[@]}"; do
		if [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) != installed ]]; then
			missing+=("$pkg")
		fi
	done
	if ((${#missing[@]} == 0)); then
		ns_say "packages: all ${#NS_PACKAGES[@]} present"
		return 0
	fi
	if ((EUID != 0)); then
		command -v sudo >/dev/null || ns_die "not root and no sudo: install ${missing[*]}"
		sudo=(sudo)
	fi
	ns_say "packages: installing ${missing[*]}"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends "${missing[@]}"
}

ns_configure() {
	local dir=$1 gen=()

	shift
	# Keep the generator of an existing tree; use Ninja for a new one.
	if [[ ! -f $dir/CMakeCache.txt ]] && command -v ninja >/dev/null; then
		gen=(-G Ninja)
	fi
	cmake -S "$NS_ROOT" -B "$dir" "${gen[@]}" -DNICSIM_WERROR=ON "$@"
}

ns_build() {
	cmake --build "$1" --parallel "$NS_JOBS"
}

NS_BURNERS=()

ns_burners_start() {
	local n=$1 limit=$2 i

	for ((i = 0; i < n; i++)); do
		# A shell loop: all user time, no I/O.  timeout ends it (and
		# forwards the SIGTERM ns_burners_stop sends it).
		timeout --kill-after=5 "$limit" sh -c 'while :; do :; done' &
		NS_BURNERS+=("$!")
	done
}

ns_burners_stop() {
	local pid

	((${#NS_BURNERS[@]})) || return 0
	for pid in "${NS_BURNERS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${NS_BURNERS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	NS_BURNERS=()
}

# Whatever happens (an error, ^C, a kill), the burners end with the shell.
ns_loaded_ctest() {
	local burners=$1 dir=$2 log=$3 rc=0
	local -

	shift 3
	set -o pipefail
	trap ns_burners_stop EXIT
	trap 'ns_burners_stop; exit 130' INT
	trap 'ns_burners_stop; exit 143' TERM
	# Bounded, should this shell die without its traps (SIGKILL): an hour
	# is more than any run of the integration tests.
	ns_burners_start "$burners" 3600
	if ctest --test-dir "$dir" "$@" 2>&1 | tee "$log"; then
		rc=0
	else
		rc=$?
	fi
	ns_burners_stop
	trap - EXIT INT TERM
	return "$rc"
}
