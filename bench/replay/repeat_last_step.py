# Builds a long steady-state trace: the original, then its last whole step repeated.
import gzip, sys
src, dst, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]); gap = int(sys.argv[4]) if len(sys.argv) > 4 else 200
meta, ev = [], []
for line in gzip.open(src, 'rt'):
    if line.startswith('#'): meta.append(line); continue
    p = line.strip().split(',')
    ev.append((p[0], p[1], int(p[2]) if p[0] == 'a' else 0, p[3] if p[0] == 'a' else ''))
sizes, live, lv = {}, 0, []
for k, i, s, st in ev:
    if k == 'a': sizes[i] = s; live += s
    else: live -= sizes[i]
    lv.append(live)
half = len(lv) // 3
low = min(lv[half:])
bounds = [j for j in range(half, len(lv)) if lv[j] == low]
# the last two separated minima
b2 = bounds[-1]
b1 = max(j for j in bounds if j < b2 - gap)
window = ev[b1 + 1:b2 + 1]
alloc_in = {i for k, i, s, st in window if k == 'a'}
freed_in = {i for k, i, s, st in window if k == 'f'}
carried = [i for k, i, s, st in window if k == 'a' and i not in freed_in]
pre = [i for k, i, s, st in window if k == 'f' and i not in alloc_in]
assert sorted(sizes[i] for i in carried) == sorted(sizes[i] for i in pre), (len(carried), len(pre))
from collections import defaultdict, deque
by_size = defaultdict(deque)
for c in carried: by_size[sizes[c]].append(c)
carried = [by_size[sizes[p]].popleft() for p in pre]  # carried[k] plays pre[k] next step
print('window', b1 + 1, b2 + 1, 'events', len(window), 'carried', len(carried), file=sys.stderr)
out = gzip.open(dst, 'wt')
for m in meta: out.write(m)
out.write('# repeated: last step (events %d..%d) %d more times\n' % (b1 + 2, b2 + 1, reps))
for k, i, s, st in ev:
    out.write('a,%s,%d,%s\n' % (i, s, st) if k == 'a' else 'f,%s\n' % i)
prev = {p: c for p, c in zip(pre, carried)}  # pre-window id -> id that plays it now
next_id = max(int(i) for i in sizes) + 1
for r in range(reps):
    rename = {}
    for k, i, s, st in window:
        if k == 'a':
            rename[i] = str(next_id); next_id += 1
            out.write('a,%s,%d,%s\n' % (rename[i], s, st))
        else:
            out.write('f,%s\n' % (rename[i] if i in rename else prev[i]))
    prev = {p: rename[c] for p, c in zip(pre, carried)}
out.close()
