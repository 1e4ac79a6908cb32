#!/bin/bash
# On the GPU machine, from the repository root, with integrations/webgpu/kit and
# integrations/webgpu/plans carried:
#   bash integrations/webgpu/run-on-device.sh
# kit: ../shared/tools/webgpu/make-kit.sh integrations/webgpu/kit, then the GL
# loader packages beside it (apt-get download libegl1 libglvnd0 libopengl0 libgl1
# libglx0 libgles2, amd64). plans: MEMKIT_WEBGPU_PLANS=$PWD/integrations/webgpu/plans
# memkit_tests --gtest_filter='*export_plans*'.
# Prints Dawn's conflict check and every plan's line, and keeps a copy in
# $OUT/webgpu.log where $OUT is set.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log=${OUT:-/tmp}/webgpu.log
{
  # The Vulkan loader and the GL dispatch libraries NVIDIA's Vulkan driver links.
  for f in "$here"/kit/*.deb; do dpkg -x "$f" /; done
  ldconfig
  # NVIDIA's driver manifests, where the loaders do not find them alone.
  nvidia=/usr/local/nvidia/share
  if [ -f $nvidia/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=$nvidia/vulkan/icd.d/nvidia_icd.json
  fi
  if [ -f $nvidia/glvnd/egl_vendor.d/10_nvidia.json ]; then
    export __EGL_VENDOR_LIBRARY_FILENAMES=$nvidia/glvnd/egl_vendor.d/10_nvidia.json
  fi
  nvidia-smi -L
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
  ldconfig -p | grep -E 'libvulkan.so|libGLX.so|libEGL.so' || echo "no loader libraries"
  mkdir -p /tmp/wg && tar xJf "$here/kit/wg.tar.xz" -C /tmp/wg
  cp "$here/run-plan.mjs" /tmp/wg/pkg/
  cd /tmp/wg/pkg || exit 1
  echo "plans: $(ls "$here"/plans/*.json | wc -l)"
  # Bounded, and printing as it goes (stdout to a pipe is synchronous in Node on Linux).
  XDG_RUNTIME_DIR=/tmp timeout 30 ./node conflict-check.mjs || echo "conflict-check: exit $?"
  XDG_RUNTIME_DIR=/tmp timeout "${PLAN_TIMEOUT:-150}" ./node run-plan.mjs "$here"/plans/*.json ||
    echo "run-plan: exit $?"
} 2>&1 | tee "$log"
