#!/usr/bin/env bash
# The package as a user gets it (issue 37 item 5), checked end to end; .ci/run calls it after the
# tests. Usage: scripts/check-wheel.sh [SOURCE_DIR]  (default: this checkout)
#
# 1. `python -m build` makes the sdist, then the wheel from the sdist (so a file the sdist lacks
#    breaks the wheel here, not on a user's machine); the wheel must hold the compiled hot path
#    (squall/_speedups*.so) and not its C source.
# 2. A fresh virtualenv installs the wheel (its dependencies from the package index, as wheels
#    only) with every C compiler shadowed by a stand-in that records its call and fails, and CC/CXX
#    pointed at it: a machine without a compiler. Any call recorded fails the check.
# 3. From outside the checkout, the venv's squall must be the installed one and compiled, its
#    versions must agree (the wheel's file name, importlib.metadata, squall.__version__,
#    `squall --version`, `squall version`), and the README's main job must run for a few seconds
#    and count what it did.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$(cd "${1:-$repo}" && pwd)"
python="${PYTHON:-python}"
work="$(mktemp -d "${TMPDIR:-/tmp}/squall-check-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "check-wheel: FAILED: $*" >&2; exit 1; }
started=$SECONDS

"$python" -m build --outdir "$work/dist" "$src" >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log" >&2; fail "python -m build (log above)"; }
wheels=("$work"/dist/squall-*.whl)
[ "${#wheels[@]}" -eq 1 ] && [ -f "${wheels[0]}" ] || fail "expected one wheel in $work/dist: $(ls "$work/dist")"
wheel="${wheels[0]}"
[ -f "$work"/dist/squall-*.tar.gz ] || fail "no sdist in $work/dist: $(ls "$work/dist")"
members="$("$python" -m zipfile -l "$wheel")"
grep -Eq '^squall/_speedups\.[^ ]+\.so ' <<<"$members" \
    || fail "$(basename "$wheel") has no squall/_speedups*.so: the C extension was not built (a compiler and python3-dev are needed to build the wheel; see $work/build.log)"
! grep -Eq '^squall/_speedups(_[a-z]+)?\.c ' <<<"$members" || fail "$(basename "$wheel") carries squall/_speedups*.c"
wheel_version="$(basename "$wheel" | cut -d- -f2)"
echo "check-wheel: built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) kB) and $(basename "$work"/dist/*.tar.gz) in $((SECONDS - started)) s"

# No compiler: each name a build would try comes first on PATH and fails, noting the call.
mkdir "$work/no-compiler"
for cc in cc gcc c++ g++ clang clang++ x86_64-linux-gnu-gcc x86_64-linux-gnu-g++ aarch64-linux-gnu-gcc; do
    printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 1\n' "$cc" "$work/compiler-calls" >"$work/no-compiler/$cc"
    chmod +x "$work/no-compiler/$cc"
done
export PATH="$work/no-compiler:$PATH" CC="$work/no-compiler/cc" CXX="$work/no-compiler/c++"
unset PYTHONPATH
"$python" -m venv "$work/venv"
venv="$work/venv/bin"
"$venv/python" -m pip install --quiet --only-binary=:all: "$wheel" >"$work/install.log" 2>&1 \
    || { tail -40 "$work/install.log" >&2; fail "pip install of the wheel into a fresh venv (log above)"; }
[ ! -e "$work/compiler-calls" ] || fail "installing the wheel called a compiler: $(cat "$work/compiler-calls")"

cd "$work"  # not the checkout: its squall/ must not shadow the installed one
"$venv/python" - "$work/venv" "$wheel_version" <<'EOF' || fail "the installed package (above)"
import importlib.metadata
import sys

import squall
import squall._native as native

venv, wheel_version = sys.argv[1:]
assert squall.__file__.startswith(venv), f"squall imported from {squall.__file__}, not from the venv"
assert native.COMPILED, "squall._native runs the pure-Python twins: the wheel's _speedups did not load"
metadata = importlib.metadata.version("squall")
assert squall.__version__ == metadata == wheel_version, (
    f"squall.__version__ {squall.__version__}, metadata {metadata}, wheel {wheel_version}")
EOF
for verb in --version version; do
    line="$("$venv/squall" "$verb")"
    [ "$(cut -d' ' -f2 <<<"$line")" = "$wheel_version" ] || fail "squall $verb says '$line', the wheel is $wheel_version"
done

# The README's main job, briefly: the word count on a local cluster. `squall local` prints a
# summary as it stops: the spout's row must show sentences emitted and acked, and no error.
timeout --kill-after=10 90 "$venv/squall" local "$src/examples/word_count.py" --ttl 4 >"$work/main-job.log" 2>&1 \
    || { tail -30 "$work/main-job.log" >&2; fail "squall local examples/word_count.py (output above)"; }
read -r emitted acked < <(awk '$1 == "sentences" && $2 == "spout" {print $5, $6; exit}' "$work/main-job.log") || true
{ [ "${emitted:-0}" -gt 0 ] && [ "${acked:-0}" -gt 0 ] && grep -q '^  errors: none$' "$work/main-job.log"; } 2>/dev/null \
    || { cat "$work/main-job.log" >&2; fail "the main job's summary has no sentence emitted and acked, or an error (above)"; }
echo "check-wheel: OK: squall $wheel_version installed without a compiler, compiled hot path loaded," \
     "versions agree, main job emitted $emitted and acked $acked sentences; $((SECONDS - started)) s in all"
