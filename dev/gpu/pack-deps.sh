#!/usr/bin/env bash
# Packs the Debian build dependencies the GPU machine's image lacks (headers, shared
# libraries with their closure, pkg-config and CMake package files) into .gpudeps/, which
# the device `run` call carries and scripts/gpu-check.sh puts on the search paths.
#   dev/gpu/pack-deps.sh        # then run(..., carry=[".gpudeps"])
set -euo pipefail
cd "$(dirname "$0")/../.."
D=.gpudeps
rm -rf "$D"; mkdir -p "$D/include" "$D/lib/pkgconfig" "$D/lib/cmake" "$D/share/cmake"
grep -qx '/.gpudeps/' .git/info/exclude 2>/dev/null || echo '/.gpudeps/' >> .git/info/exclude
ML=/usr/lib/x86_64-linux-gnu
for h in rdma toml++ nlohmann gtest gmock hiredis openssl gloo pcre2.h utf8proc.h httplib.h brotli zlib.h zconf.h cairo google; do
  cp -rL /usr/include/$h "$D/include/"
done
cp -rL /usr/include/x86_64-linux-gnu/curl "$D/include/"
cp -rL /usr/include/x86_64-linux-gnu/openssl/* "$D/include/openssl/"
cp -rL /usr/include/curl/* "$D/include/curl/" 2>/dev/null || true
# GTest keeps Debian's layout (lib/<arch>/ and lib/<arch>/cmake/GTest) so the relative paths
# of its CMake package files resolve inside .gpudeps.
mkdir -p "$D/lib/x86_64-linux-gnu/cmake"
cp $ML/libgtest*.a $ML/libgmock*.a "$D/lib/x86_64-linux-gnu/"
cp -r $ML/cmake/GTest "$D/lib/x86_64-linux-gnu/cmake/"
cp -r /usr/share/cmake/nlohmann_json "$D/share/cmake/"
# Shared libraries and their closure, minus the C runtime every image has.
skip='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so'
for l in libfabric.so.1 libtomlplusplus.so.3 libhiredis.so.0.14 libcurl.so.4 libssl.so.3 libcrypto.so.3 libgloo.so.0 \
         libpcre2-8.so.0 libutf8proc.so.2 libcairo.so.2 libcpp-httplib.so.0.11 libprotobuf.so.32 libprotoc.so.32; do
  [ -e $ML/$l ] || continue
  cp -L $ML/$l "$D/lib/"
  ldd $ML/$l | awk '$3 ~ /^\// {print $3}' | while read -r dep; do
    b=$(basename "$dep"); [[ $b =~ $skip ]] || cp -nL "$dep" "$D/lib/"
  done
done
# redis-server (and its libraries) for the GPU RL run's queue: dev/gpu/rl-run.sh.
mkdir -p "$D/bin"; cp -L /usr/bin/redis-server "$D/bin/"
ldd /usr/bin/redis-server | awk '$3 ~ /^\// {print $3}' | while read -r dep; do
  b=$(basename "$dep"); [[ $b =~ $skip ]] || cp -nL "$dep" "$D/lib/"
done
# protoc (TensorBoard's event protobufs are compiled at build time) finds its libraries here.
cp -L /usr/bin/protoc "$D/bin/protoc.bin"
printf '#!/bin/sh\nd=$(dirname "$0")/../lib\nLD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$(dirname "$0")/protoc.bin" "$@"\n' >"$D/bin/protoc"
chmod +x "$D/bin/protoc"
(cd "$D/lib" && for l in *.so.*; do base=${l%%.so.*}.so; [ -e "$base" ] || ln -s "$l" "$base"; done)
# Requires.private dropped: only static linking needs it, and it names cairo's and httplib's
# whole closure (X11, glib, brotli...), whose .pc files the image lacks.
for pc in libfabric tomlplusplus hiredis libcurl libssl openssl libcrypto gtest gtest_main libpcre2-8 libutf8proc \
          cpp-httplib cairo cairo-svg cairo-png protobuf; do
  [ -e $ML/pkgconfig/$pc.pc ] || continue
  sed -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' -e 's|^libdir=.*|libdir=${prefix}/lib|' \
      -e '/^Requires.private/d' -e 's|^Requires: cairo libpng|Requires: cairo|' \
      -e 's|^includedir=.*|includedir=${prefix}/include|' $ML/pkgconfig/$pc.pc > "$D/lib/pkgconfig/$pc.pc"
done
# Older GTest packages name absolute /usr paths: point them at the packed copies.
sed -i -e "s|/usr/lib/x86_64-linux-gnu/|\${_IMPORT_PREFIX}/lib/x86_64-linux-gnu/|g" -e 's|"/usr/include"|"${_IMPORT_PREFIX}/include"|g' \
  "$D"/lib/x86_64-linux-gnu/cmake/GTest/*.cmake
# The Qwen3 tokenizer for the GPU RL run (dev/gpu/rl-qwen3.sh): tools/tokenizers/data links
# into node_modules, which does not travel (compressed: the carry is limited to 64 MiB).
tar -C tools/tokenizers/data/qwen3 -cJhf "$D/share/qwen3-tokenizer.tar.xz" tokenizer.json tokenizer_config.json
du -sh "$D"
