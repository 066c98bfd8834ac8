#!/usr/bin/env bash
# Install the Debian packages the project needs, but only those that are missing, so that a
# machine that already has them (developer box, warm CI cache) does no network work at all.
#
#   scripts/install_deps.sh            # the full list below
#   scripts/install_deps.sh PKG...     # just these (get_corpus.sh uses it for bible-kjv)
#
# Prints one line per package. `apt-get update` runs at most once, and only when something
# has to be installed (a fresh CI image has no package lists).
set -euo pipefail

if [ "$#" -gt 0 ]; then
    pkgs=("$@")
else
    # clang, libclang-rt-dev (compiler-rt: libFuzzer, ASan, UBSan runtimes for the default
    # clang, libclang-rt-14-dev on Debian 12) and llvm (llvm-symbolizer, for the sanitizers'
    # stack traces) build and run the fuzz harnesses of tests/fuzz/. python3-numpy runs
    # scripts/reference_model.py (tests/test_reference_model.sh).
    pkgs=(bible-kjv libsentencepiece-dev sentencepiece gnuplot-nox clang libclang-rt-dev llvm python3-numpy)
fi

installed_version() {
    # dpkg -s also succeeds for removed-but-configured packages, so check the Status line.
    if dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; then
        dpkg-query -W -f='${Version}' "$1"
    fi
}

missing=()
for p in "${pkgs[@]}"; do
    v=$(installed_version "$p")
    if [ -n "$v" ]; then
        echo "deps: $p $v (already installed)"
    else
        missing+=("$p")
    fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "error: missing Debian packages ${missing[*]}: run scripts/install_deps.sh as root" >&2
        exit 1
    fi
fi

# apt's output is kept quiet and shown only when something fails.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get update -qq >"$log" 2>&1; then
    cat "$log" >&2
    echo "error: apt-get update failed: check the network / apt sources, then re-run scripts/install_deps.sh" >&2
    exit 1
fi
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "error: apt-get install ${missing[*]} failed (apt output above): fix it, then re-run scripts/install_deps.sh" >&2
    exit 1
fi
for p in "${missing[@]}"; do
    echo "deps: $p $(installed_version "$p") (installed now)"
done
