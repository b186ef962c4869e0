#!/bin/sh
# make gpu-pack (tests/gpu/pack.sh FILE...): the programs and GPU tests of this CUDA build in one archive,
# .gpu-pack/gptkit-gpu.tar.xz, for a GPU machine that has a driver, cuBLAS
# and NCCL but not the build's other libraries (libyaml, libarchive and its
# compressors, PCRE2, jansson, xxhash, OpenBLAS and libgfortran) or no
# compiler. Every shared library the packed files load from outside glibc,
# GCC's C++ runtime and the CUDA toolkit goes in .gpu-pack/lib/, and the
# CUDA runtime (libcudart, under 1 MiB) with them; cuBLAS and NCCL, hundreds
# of MiB each, are the GPU machine's.
#
# The archive holds the build's own paths (bin/, build/tests/gpu/test-*,
# build/bench/gpu-ops, tests/helper/test-tool) plus .gpu-pack/lib/ and .gpu-pack/SOURCES, a
# digest of the sources it was built from. tests/gpu/check.sh, in a copy of
# this source tree on the GPU machine, unpacks it there, refuses it when the
# digest differs from the tree's, and runs the GPU checks. GPU_PACK_XZ
# (default -9) is xz's compression level: -9's 64 MiB window reaches across
# the programs, which each hold the same 15 MB of CUDA kernels (244 MB of
# tar: 24.6 MB at -9, 66.8 MB at -6, over the 64 MiB a lent GPU machine
# takes; 72 s on two cores).
set -eu
cd "$(dirname "$0")/../.."
P=.gpu-pack
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -f build/lib/cuda/nccl.cu.o ] ||
	{ echo "gpu-pack: this build has no CUDA backend: build with nvcc (make CUDA=1)" >&2; exit 1; }
[ $# -gt 0 ] || { echo "usage: tests/gpu/pack.sh FILE... (make gpu-pack names them)" >&2; exit 64; }
files="$*"
for f in $files; do
	[ -x "$f" ] || { echo "gpu-pack: $f is missing: run make gpu-pack, which builds it" >&2; exit 1; }
done
S=$(mktemp -d)
trap 'rm -rf "$S" "$P/gptkit-gpu.tar.xz.tmp"' EXIT
mkdir -p "$S/$P/lib"
# shellcheck disable=SC2086
ldd $files >"$S/ldd" 2>&1 || { cat "$S/ldd" >&2; exit 1; }
if grep -q 'not found' "$S/ldd"; then
	echo "gpu-pack: some libraries do not load here:" >&2
	grep 'not found' "$S/ldd" | sort -u >&2
	exit 1
fi
awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' "$S/ldd" | sort -u |
	while read -r name path; do
		case $name in
		# glibc, and GCC's runtime that every C++ program on the GPU
		# machine loads (a newer one there serves programs built here)
		libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | \
			libutil.so.* | ld-linux*.so.* | libstdc++.so.* | libgcc_s.so.*) continue ;;
		esac
		# the CUDA toolkit's libraries are the GPU machine's, but for the runtime
		case $path:$name in
		"$CUDA_HOME"/*:libcudart.so.* | /usr/local/cuda*/*:libcudart.so.*) ;;
		"$CUDA_HOME"/*:* | /usr/local/cuda*/*:*) continue ;;
		esac
		cp -L "$path" "$S/$P/lib/$name"
	done
sh tests/gpu/check.sh --digest >"$S/$P/SOURCES"
{
	echo "built $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
	"$CUDA_HOME/bin/nvcc" --version | tail -n 1
	echo "libraries: $(cd "$S/$P/lib" && echo *)"
} >"$S/$P/BUILD"
# shellcheck disable=SC2086
tar -cf "$S/pack.tar" $files
tar -rf "$S/pack.tar" -C "$S" "$P"
xz "${GPU_PACK_XZ:--9}" -T0 "$S/pack.tar"
# the archive alone (the folder travels whole to the GPU machine), whole or
# not at all
rm -rf "$P"
mkdir -p "$P"
cp "$S/pack.tar.xz" "$P/gptkit-gpu.tar.xz.tmp"
mv "$P/gptkit-gpu.tar.xz.tmp" "$P/gptkit-gpu.tar.xz"
echo "gpu-pack: $P/gptkit-gpu.tar.xz ($(du -k "$P/gptkit-gpu.tar.xz" | cut -f1) KiB):" \
	"$(echo $files | wc -w) programs and tests, $(ls "$S/$P/lib" | wc -l) libraries"
