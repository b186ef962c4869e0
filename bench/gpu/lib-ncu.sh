# Sourced by bench/gpu/attnprof.sh and bench/gpu/attnsrc.sh (NAME: the
# script's name for its messages), in the repository root: ncu_setup DIR
# sets NCU_BIN to Nsight Compute's command line and makes DIR, or says
# what is missing (ncu, build/bench/gpu-ops) and returns non-zero.
ncu_setup () {
	NCU_BIN=
	for c in ncu /usr/local/cuda/bin/ncu; do
		command -v "$c" >/dev/null 2>&1 && { NCU_BIN=$(command -v "$c"); break; }
	done
	[ -n "$NCU_BIN" ] || { echo "$NAME: no ncu (Nsight Compute) on PATH or in /usr/local/cuda/bin"; return 1; }
	[ -x build/bench/gpu-ops ] || { echo "$NAME: no build/bench/gpu-ops: make CUDA=1, or make gpu-pack"; return 1; }
	mkdir -p "$1"
}
