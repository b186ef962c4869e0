#!/bin/sh
# make deps: install what the build and the tests need on Debian 12.
# Quick when everything is already there: it only asks dpkg, then installs
# what is missing. Needs root (or sudo) only when something is missing.
set -eu
cd "$(dirname "$0")/.."

pkgs=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' deps/debian-packages.txt)
missing=
for p in $pkgs; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$status" in
	*"install ok installed"*) ;;
	*) missing="$missing $p" ;;
	esac
done

SUDO=
[ "$(id -u)" = 0 ] || ! command -v sudo >/dev/null 2>&1 || SUDO=sudo
if [ -n "$missing" ]; then
	echo "deps: installing Debian packages:$missing"
	if [ "$(id -u)" != 0 ] && [ -z "$SUDO" ]; then
		echo "deps: error: missing packages:$missing; run 'make deps' as root" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing
else
	echo "deps: Debian packages: all present"
fi

# Some machines carry a Node.js build that bundles npm (and conflicts with
# Debian's npm package); install Debian's npm only where there is none.
if ! command -v npm >/dev/null 2>&1; then
	echo "deps: installing npm"
	${SUDO:-} apt-get install -y -qq --no-install-recommends npm
fi

# Extra steps (npm packages, vocabularies) live in deps/*.sh beside this file.
for step in deps/step-*.sh; do
	[ -e "$step" ] || continue
	sh "$step"
done

if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
	echo "deps: CUDA toolkit found; the build includes the CUDA backend"
else
	echo "deps: no CUDA toolkit (nvcc); the build is CPU-only (CUDA=auto)"
fi
