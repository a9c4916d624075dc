#!/usr/bin/env bash
# Build and install the hint client library for C: the shared library (with its SONAME and the
# usual links), the static library, the header and a pkg-config file.
#
#   dist/install-hint-library.sh [--prefix DIR] [--target-dir DIR]
#
# DIR defaults to /usr/local. Then: cc app.c $(pkg-config --cflags --libs hetsched_hint)
# (with PKG_CONFIG_PATH=DIR/lib/pkgconfig when DIR's pkgconfig is not searched already).
set -euo pipefail
prefix=/usr/local
target_dir=
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --target-dir) target_dir=$2; shift 2 ;;
        *) echo "install-hint-library.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
args=(build --release -p hetsched-hint)
if [ -n "$target_dir" ]; then
    args+=(--target-dir "$target_dir")
else
    target_dir=$root/target
fi
cargo "${args[@]}"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
abi=1
built=$target_dir/release
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
# Stripped: the release profile keeps line tables for the hetsched binary's backtraces.
install -m 0755 -s "$built/libhetsched_hint.so" "$prefix/lib/libhetsched_hint.so.$abi.$version"
ln -sf "libhetsched_hint.so.$abi.$version" "$prefix/lib/libhetsched_hint.so.$abi"
ln -sf "libhetsched_hint.so.$abi" "$prefix/lib/libhetsched_hint.so"
install -m 0644 "$built/libhetsched_hint.a" "$prefix/lib/libhetsched_hint.a"
strip --strip-debug "$prefix/lib/libhetsched_hint.a"
install -m 0644 crates/hetsched-hint/include/hetsched_hint.h "$prefix/include/hetsched_hint.h"
cat > "$prefix/lib/pkgconfig/hetsched_hint.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: hetsched_hint
Description: Tell hetsched which data fragment each thread works on
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lhetsched_hint -pthread
Libs.private: -ldl -lm
PC
echo "installed libhetsched_hint $version (ABI $abi) under $prefix"
