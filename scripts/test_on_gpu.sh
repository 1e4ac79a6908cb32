#!/bin/bash
# The whole test suite on the GPU machine (docs/BENCHMARKS.md): Release with warnings as
# errors and every ctest test, then memkit_tests built with validation on. That machine
# has no apt: Debian packages are carried as .deb files, fetched here with
#   (mkdir -p .deps && cd .deps && apt-get download nlohmann-json3-dev zlib1g-dev libcli11-dev)
#   (mkdir -p .gl && cd .gl && apt-get download libvulkan1 libvulkan-dev glslang-tools \
#      pybind11-dev python3-pybind11 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
# and the device tool's run carries .deps and .gl. Logs go to $OUT.
set -u
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
deps=/tmp/memkit-deps; mkdir -p $deps
for f in .deps/*.deb; do [ -e "$f" ] && dpkg -x "$f" $deps; done
if [ -d .gl ]; then
  # The Vulkan loader and its GL dispatch libraries go to / (the NVIDIA driver's ICD
  # needs them there); headers, glslang and pybind11 beside the other packages.
  for f in .gl/libvulkan1_*.deb .gl/libegl1_*.deb .gl/libglvnd0_*.deb .gl/libopengl0_*.deb \
           .gl/libgl1_*.deb .gl/libglx0_*.deb .gl/libgles2_*.deb; do dpkg -x "$f" /; done
  ldconfig
  for f in .gl/libvulkan-dev_*.deb .gl/glslang-tools_*.deb .gl/pybind11-dev_*.deb \
           .gl/python3-pybind11_*.deb; do dpkg -x "$f" $deps; done
  export PATH=$deps/usr/bin:$PATH
  # An SDK-shaped folder, so that FindVulkan finds it in every build (the package test's too).
  mkdir -p $deps/vk/lib; ln -sfn $deps/usr/include $deps/vk/include
  ln -sf /usr/lib/x86_64-linux-gnu/libvulkan.so.1 $deps/vk/lib/libvulkan.so
  export VULKAN_SDK=$deps/vk
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -f $icd ] && export VK_DRIVER_FILES=$icd
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
t0=$(date +%s)
cmake -S . -B /tmp/memkit-test-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMKIT_WERROR=ON \
  -DCMAKE_PREFIX_PATH=$deps/usr > "$out/configure.log" 2>&1
echo "configure: rc $?"; grep "memkit:" "$out/configure.log"
cmake --build /tmp/memkit-test-release -j"$(nproc)" > "$out/build.log" 2>&1
rc=$?; echo "build: rc $rc in $(( $(date +%s) - t0 )) s"
[ $rc = 0 ] || { grep -E "error" "$out/build.log" | head -30; exit 1; }
ctest --test-dir /tmp/memkit-test-release -j12 --output-on-failure --timeout 240 > "$out/ctest.log" 2>&1
echo "ctest: rc $? at $(( $(date +%s) - t0 )) s"
grep -E "tests passed|Skipped|Failed" "$out/ctest.log"
cmake -S . -B /tmp/memkit-test-validate -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMKIT_VALIDATE=ON \
  -DMEMKIT_BENCH=OFF -DCMAKE_PREFIX_PATH=$deps/usr > "$out/configure-validate.log" 2>&1
cmake --build /tmp/memkit-test-validate -j"$(nproc)" --target memkit_tests > "$out/build-validate.log" 2>&1
timeout 300 /tmp/memkit-test-validate/tests/memkit_tests --gtest_brief=1 > "$out/tests-validate.log" 2>&1
echo "memkit_tests with validation: rc $? at $(( $(date +%s) - t0 )) s"
tail -4 "$out/tests-validate.log"
