#!/usr/bin/env bash
# Makes `import memkit` work for the Python interpreters here: writes memkit.pth,
# naming the package built in BUILD/python (default build/), into the site-packages
# of `python3` on PATH and of /usr/bin/python3 (Debian's), each where it can load the
# compiled module (the same Python version); the user's site-packages where the
# interpreter's own is not writable. Safe to run again; a rebuild needs no new link.
#
#   scripts/link_python.sh [BUILD]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if ! ls "$build"/python/memkit/_memkit*.so >/dev/null 2>&1; then
  echo "link_python: no Python module in $build/python/memkit (build the target memkit_python;" \
       "cmake prints why it is off)" >&2
  exit 1
fi
package_parent=$(cd "$build/python" && pwd)

seen=()
linked=0
for python in python3 /usr/bin/python3; do
  command -v "$python" >/dev/null 2>&1 || continue
  executable=$("$python" -c 'import sys; print(sys.executable)')
  [[ " ${seen[*]-} " == *" $executable "* ]] && continue
  seen+=("$executable")
  # Prints where memkit.pth went, or why this interpreter was left alone (exit 3).
  if where=$("$python" - "$package_parent" <<'PY'
import os, site, sys, sysconfig
parent = sys.argv[1]
suffix = sysconfig.get_config_var("EXT_SUFFIX")
if not os.path.exists(os.path.join(parent, "memkit", "_memkit" + suffix)):
    print("left alone: the module is not built for Python %d.%d" % sys.version_info[:2])
    sys.exit(3)
places = list(site.getsitepackages())
if site.ENABLE_USER_SITE:
    places.append(site.getusersitepackages())
for place in places:
    try:
        os.makedirs(place, exist_ok=True)
        with open(os.path.join(place, "memkit.pth"), "w") as f:
            f.write(parent + "\n")
    except OSError:
        continue
    print(os.path.join(place, "memkit.pth"))
    sys.exit(0)
print("left alone: no writable site-packages among " + ", ".join(places))
sys.exit(3)
PY
  ); then
    # A fresh interpreter, without PYTHONPATH, must now find it.
    if env -u PYTHONPATH "$python" -c 'import memkit' 2>/dev/null; then
      echo "$executable: import memkit ($where)"
      linked=$((linked + 1))
    else
      echo "$executable: wrote $where but import memkit still fails:" >&2
      env -u PYTHONPATH "$python" -c 'import memkit' >&2 || true
    fi
  else
    echo "$executable: $where"
  fi
done
[ "$linked" -gt 0 ] || { echo "link_python: no interpreter could import memkit" >&2; exit 1; }
