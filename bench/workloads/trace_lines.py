"""The lines of a memkit trace (docs/TRACES.md), for the bench scripts that read one
themselves: each is checked for its form, and a line that is not a memkit trace line
stops the script with the file and line, in the script's name.

    for number, kind, line, fields in trace_lines.read(path, "tool"):
        kind: "#" (metadata), "@" (a call stack's frame), "s" (a step starts),
        "a" (fields: a, id, size, ...; size is digits) or "f" (fields: f, id, ...)
"""
import gzip
import sys


def read(path, tool):
    with gzip.open(path, "rt") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith(("#", "@")) or line == "s":
                yield number, line[0], line, None
                continue
            fields = line.split(",")
            if fields[0] == "a" and len(fields) >= 3 and fields[2].isdigit():
                yield number, "a", line, fields
            elif fields[0] == "f" and len(fields) >= 2:
                yield number, "f", line, fields
            else:
                sys.exit("[%s] %s:%d: not a memkit trace line: %r" % (tool, path, number, line[:80]))
