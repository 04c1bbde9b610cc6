#!/usr/bin/env bash
# hilbertsfc 0.5.1 on Python 3.11, for benchmarks/bench_hilbert.py.
#
# hilbertsfc declares Python >= 3.12, but only for syntax: PEP 695 `type X = ...` aliases and two
# generic `def f[T, **P](...)` decorators in _cache.py. Its numba kernels run on 3.11. This script
# downloads the wheel (no dependencies), unpacks it into a folder and rewrites ONLY that syntax:
#   `type X = ...`                     -> `X = ...`            (every *.py)
#   `def kernel_cache[T, **P](...)`    -> `def kernel_cache(func):`   (_cache.py; same for lut_cache)
#   `return cast(Callable[P, T], wrapped)` -> `return wrapped`        (_cache.py)
# Nothing else is touched. Then run the benchmark with that folder on the path:
#
#   bash benchmarks/hilbertsfc_py311.sh build/hilbertsfc311
#   PYTHONPATH=build/hilbertsfc311 uv run --with numba benchmarks/bench_hilbert.py
set -euo pipefail
dest="${1:-build/hilbertsfc311}"
version="${HILBERTSFC_VERSION:-0.5.1}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pip download --quiet --no-deps --ignore-requires-python "hilbertsfc==${version}" -d "$tmp"
rm -rf "$dest"
mkdir -p "$dest"
python3 -m zipfile -e "$tmp"/hilbertsfc-"${version}"-*.whl "$dest"
find "$dest/hilbertsfc" -name '*.py' -print0 | xargs -0 sed -i -E 's/^(\s*)type (\w+) = /\1\2 = /'
cache="$dest/hilbertsfc/_cache.py"
sed -i -E \
    -e 's/^def kernel_cache\[.*$/def kernel_cache(func):/' \
    -e 's/^def lut_cache\[.*$/def lut_cache(func):/' \
    -e 's/return cast\(Callable\[P, T\], wrapped\)/return wrapped/' \
    "$cache"
if grep -rnE '^\s*type \w+ = |^def \w+\[' "$dest/hilbertsfc" --include='*.py'; then
    echo "hilbertsfc_py311.sh: Python 3.12 syntax left in the lines above" >&2
    exit 1
fi
echo "hilbertsfc ${version} for Python 3.11 in ${dest}; run:"
echo "  PYTHONPATH=${dest} uv run --with numba benchmarks/bench_hilbert.py"
