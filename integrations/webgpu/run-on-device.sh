#!/bin/bash
# On the GPU machine, from the repository root, with integrations/webgpu/kit
# (make-kit.sh's output) and integrations/webgpu/plans carried:
#   bash integrations/webgpu/run-on-device.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for f in "$here"/kit/*.deb; do dpkg -x "$f" /; done
ldconfig
# The NVIDIA Vulkan driver's manifest, where the loader does not find it alone.
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
mkdir -p /tmp/wg && tar xJf "$here/kit/wg.tar.xz" -C /tmp/wg
cp "$here/run-plan.mjs" /tmp/wg/pkg/
cd /tmp/wg/pkg
# Bounded, and printing as it goes (stdout to a pipe is synchronous in Node on Linux).
XDG_RUNTIME_DIR=/tmp timeout 20 ./node conflict-check.mjs || echo "conflict-check: exit $?"
XDG_RUNTIME_DIR=/tmp timeout "${PLAN_TIMEOUT:-120}" ./node run-plan.mjs "$here"/plans/*.json ||
  echo "run-plan: exit $?"
