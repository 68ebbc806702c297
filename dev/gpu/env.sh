# Sourced by the device-machine scripts: the build and run environment for a CUDA build of
# moerl against the machine's libtorch, with the Debian libraries the image lacks packed in
# .gpudeps/ (dev/gpu/pack-deps.sh). Defines gpu_configure BUILD_DIR [GPU_ONLY] and RUNENV.
#   source dev/gpu/env.sh && gpu_configure build-gpu && ninja -C build-gpu moerl
#   "${RUNENV[@]}" build-gpu/src/cli/moerl ...
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
GPU_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
GPU_TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
GPU_PREFIX="$GPU_TORCH_PREFIX"
GPU_DEPS=$GPU_ROOT/.gpudeps
RUNENV=(env)
GPU_LINKFLAGS=
if [ -d "$GPU_DEPS" ]; then
  # Resolve the packed libraries' own dependencies (e.g. libcurl -> libssh2) from .gpudeps too.
  GPU_LINKFLAGS="-Wl,-rpath-link,$GPU_DEPS/lib"
  GPU_PREFIX="$GPU_TORCH_PREFIX;$GPU_DEPS"
  export PKG_CONFIG_PATH=$GPU_DEPS/lib/pkgconfig CPLUS_INCLUDE_PATH=$GPU_DEPS/include LIBRARY_PATH=$GPU_DEPS/lib
  RUNENV=(env LD_LIBRARY_PATH=$GPU_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH})
fi

# gpu_configure BUILD_DIR [ON|OFF]: Release, MOERL_CUDA=ON; MOERL_GPU_ONLY defaults to OFF.
gpu_configure() {
  cmake -S "$GPU_ROOT" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOERL_CUDA=ON -DMOERL_GPU_ONLY="${2:-OFF}" \
    -DCMAKE_PREFIX_PATH="$GPU_PREFIX" -DCMAKE_EXE_LINKER_FLAGS="$GPU_LINKFLAGS"
}
