#!/usr/bin/env python3
"""Simulation: can an ONLINE mechanism plan the arena's blocks of a loop whose shapes
vary per step (sequence length or batch drawn each step), so that after a few steps
hardly any page moves?  Nothing here changes memkit; it models the arena as one
address range of 2 MiB pages.

What the mechanism sees (online): the arena's requests in order (size rounded up to
512 bytes, only sizes > 512 KiB, as beside an arena: pools::kSmallRequestWithArena;
--threshold changes it) and their frees.  It never sees `s` step markers nor a size
before its request.  Step markers are read only to score the result (per-step counts,
the warm-up of the first --warmup steps).

Mechanism "keyed slots" (--key, --context, --replan):
  token(n)  what was freed since request n-1, independent of sizes:
              dist:   sorted distances n - m of the freed requests m
              bucket: the same, distances above 8 kept to 3 significant bits
              key:    sorted keys of the freed blocks (recursive)
  context   hash of the last --context tokens (request n's own included)
  key(n)    (context, number of live blocks whose context is the same): the count
            tells apart a layer's repeated requests while they are all live
            (training's forward), and is 0 where they are not (inference)
  slot      every key has an offset and an envelope size (largest size seen), and
            the set of keys it was ever live with (conflicts)
  request   hit when its key has a slot, the size fits the envelope, and no live
            block overlaps [offset, offset + size): placed there.  Otherwise a
            miss: the slot is remade at the lowest offset clear of the live blocks
            and of the slots of every key it conflicts with (the region grows only
            at its top), and the block goes there.
  replan    (--replan N, 0 = never) when a miss happened and N requests passed
            since the last replan: every key used since the last replan, largest
            envelope first, gets the lowest offset clear of its conflicts' slots,
            live blocks pinned where they are (live keys keep their offsets when
            they can).  Nothing live ever moves.

Pages: a page once under a block stays mapped.  Reserved may reach 1.02 x the record
of live bytes seen so far (online); a page to map beyond that first unmaps an idle
mapped page (a steal, ~50 us on the GPU): a MOVE.  Reported after the warm-up, per
step: misses (requests, and their pages), moves (pages), final region height and
peak reserved over the trace's peak of live bytes.

Mode "oracle" (--mode oracle) PEEKS at step markers and the future: it aligns steps by
position in the step (the ones with the most common count), plans the envelope of
all of them against the union of their overlaps once, and places by position; it is
a bound, not online.

    python3 bench/workloads/shape_plan_sim.py [--key dist] [--context 2] TRACE_NAME...
"""
import argparse
import bisect
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402

PAGE = 2 << 20
GENERAL = 1 << 44   # offsets from here: the general (online) space, outside any plan
QUANTUM = 512
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def load(name, threshold):
    """Arena events: ("a", serial, size, step) and ("f", serial, step); step -1 = set-up."""
    path = name if os.path.exists(name) else os.path.join(
        ROOT, "data", "traces", "workloads", name + ".trace.csv.gz")
    events, serial_of, step, n = [], {}, -1, 0
    for _, kind, _, f in trace_lines.read(path, "shape_plan_sim"):
        if kind == "s":
            step += 1
        elif kind == "a":
            size = -(-int(f[2]) // QUANTUM) * QUANTUM
            if size <= threshold:
                continue
            serial_of[f[1]] = n
            events.append(("a", n, size, step))
            n += 1
        elif kind == "f" and f[1] in serial_of:
            events.append(("f", serial_of.pop(f[1]), step))
    return events, step + 1


class Pages:
    """Mapped pages of one address range, the budget, and the moves (steals)."""

    def __init__(self, slack):
        self.slack = slack
        self.mapped = collections.defaultdict(int)
        self.refs = collections.defaultdict(int)
        self.idle = set()       # mapped pages under no live block
        self.n_mapped = 0
        self.record = 0         # record of live bytes so far (online)
        self.live = 0
        self.max_mapped = 0
        self.counting = False   # after the warm-up
        self.moves = 0
        self.over = 0           # pages mapped beyond the budget with nothing idle to unmap

    def _grow(self, p):
        pass

    def budget_pages(self):
        return int(self.record * (1 + self.slack)) // PAGE

    def touch(self, lo, hi):
        first, last = lo // PAGE, (hi - 1) // PAGE
        self._grow(last)
        new = []
        for p in range(first, last + 1):
            self.refs[p] += 1
            if self.refs[p] == 1:
                if self.mapped[p]:
                    self.idle.discard(p)
                else:
                    new.append(p)
        for p in new:
            if self.n_mapped >= self.budget_pages():
                if self.idle:
                    victim = max(self.idle)   # the highest idle page goes
                    self.idle.discard(victim)
                    self.mapped[victim] = 0
                    self.n_mapped -= 1
                    if self.counting:
                        self.moves += 1
                else:
                    self.over += 1
            self.mapped[p] = 1
            self.n_mapped += 1
        self.max_mapped = max(self.max_mapped, self.n_mapped)

    def release(self, lo, hi):
        for p in range(lo // PAGE, (hi - 1) // PAGE + 1):
            self.refs[p] -= 1
            if self.refs[p] == 0:
                self.idle.add(p)


class Live:
    """Live blocks of the range, sorted by offset (they never overlap)."""

    def __init__(self):
        self.starts, self.ends = [], []

    def clear_of(self, lo, hi):
        i = bisect.bisect_left(self.starts, hi)
        return i == 0 or self.ends[i - 1] <= lo

    def add(self, lo, hi):
        i = bisect.bisect_left(self.starts, lo)
        self.starts.insert(i, lo)
        self.ends.insert(i, hi)

    def remove(self, lo):
        i = bisect.bisect_left(self.starts, lo)
        del self.starts[i]
        del self.ends[i]


def lowest_clear(obstacles, size):
    """Lowest offset where [offset, offset + size) meets none of the (lo, hi) given."""
    offset = 0
    for lo, hi in sorted(obstacles):
        if offset + size <= lo:
            break
        offset = max(offset, hi)
    return offset


def bucket(d):
    if d < 8:
        return d
    b = d.bit_length()
    return (b << 8) | (d >> (b - 3))


class KeyedSlots:
    """The online mechanism (module docstring)."""

    def __init__(self, key_kind, context, replan_every, forget, capped, general=1):
        self.key_kind = key_kind
        self.context = context
        self.replan_every = replan_every
        self.recent = collections.deque(maxlen=context)
        self.freed = []                 # since the last request: serials
        self.n = 0
        self.base_of = {}               # live serial -> base hash
        self.key_of = {}                # serial -> key
        self.live_base = collections.Counter()
        self.live_keys = collections.Counter()
        self.slot = {}                  # key -> offset
        self.env = {}                   # key -> envelope size
        self.conf = collections.defaultdict(dict)   # key -> {key: request count when last seen live together}
        self.used = set()               # keys used since the last replan
        self.dirty = False
        self.last_replan = 0
        self.replans = 0
        self.general_live = 0
        self.in_general = set()
        self.uses = collections.Counter()
        self.general = general
        self.capped = capped
        self.live_bytes = 0
        self.record = 0
        self.lows = collections.deque()
        self.size_of = {}
        self.last_use = {}
        self.forget = forget
        self.why = collections.Counter()
        self.replan_work = 0

    def key(self, serial):
        if self.key_kind == "dist":
            tok = tuple(sorted(self.n - m for m in self.freed))
        elif self.key_kind == "bucket":
            tok = tuple(sorted(bucket(self.n - m) for m in self.freed))
        else:
            tok = tuple(sorted(hash(self.key_of.get(m)) for m in self.freed))
        self.freed = []
        self.recent.append(tok)
        base = hash(tuple(self.recent))
        j = 0
        while (base, j) in self.live_keys:   # the lowest occurrence not live
            j += 1
        k = (base, j)
        self.base_of[serial] = base
        self.n += 1
        return k

    def on_free(self, serial):
        self.freed.append(serial)
        size = self.size_of.pop(serial)
        self.live_bytes -= size
        if serial in self.in_general:
            self.in_general.discard(serial)
            self.general_live -= size
        self.base_of.pop(serial)
        k = self.key_of[serial]
        self.live_keys[k] -= 1
        if not self.live_keys[k]:
            del self.live_keys[k]

    def place(self, serial, size, live, blocks):
        """Returns (offset, hit)."""
        k = self.key(serial)
        self.key_of[serial] = k
        self.size_of[serial] = size
        for other in self.live_keys:
            if other != k:
                self.conf[k][other] = self.n
                self.conf[other][k] = self.n
        self.live_keys[k] += 1
        self.used.add(k)
        self.last_use[k] = self.n
        self.uses[k] += 1
        self.live_bytes += size
        self.lows.append(self.live_bytes)
        while len(self.lows) > self.replan_every:
            self.lows.popleft()
        if (self.replan_every and (self.dirty or self.plan_height() > 1.01 * self.record)
                and self.n - self.last_replan >= self.replan_every
                and self.live_bytes - size <= 1.05 * min(self.lows)):
            self.replan(blocks)
        self.record = max(self.record, self.live_bytes)
        o = self.slot.get(k)
        if o is not None and size <= self.env[k] and live.clear_of(o, o + size):
            return o, True
        if self.general and k not in self.env:
            # first time seen: not (yet) a loop's block; online, in the general space
            self.env[k] = size
            self.why["first"] += 1
            self.dirty = True
            self.general_live += size
            self.in_general.add(serial)
            return lowest_clear([(0, GENERAL)] + list(zip(live.starts, live.ends)), size), False
        self.dirty = True
        why = "new" if o is None else "grown" if size > self.env[k] else "clash"
        self.why[why] += 1
        env = max(size, self.env.get(k, 0))
        cap = self.cap()
        obstacles = [(lo, hi) for lo, hi in zip(live.starts, live.ends) if lo < GENERAL]
        clear = obstacles + [(self.slot[c], self.slot[c] + self.env[c]) for c in self.conf[k] if c in self.slot]
        o = lowest_clear(clear, env)
        self.env[k] = env
        if not self.capped or o + env <= cap:
            self.slot[k] = o
        else:
            # no room in the plan under the budget: online, lowest clear of the live blocks
            self.slot.pop(k, None)
            o = lowest_clear(obstacles, size)
        return o, False


    def replan(self, blocks):
        """blocks: live serial -> (offset, size); they stay where they are."""
        self.replans += 1
        self.last_replan = self.n
        self.dirty = False
        keys = {k for k in self.env if self.n - self.last_use[k] <= self.forget or k in self.live_keys}
        if self.general:
            keys = {k for k in keys if k in self.slot or self.uses[k] > 1}
        pinned = collections.defaultdict(list)   # key -> its live blocks' ranges
        for s, (o, size) in blocks.items():
            if o >= GENERAL:
                continue
            pinned[self.key_of[s]].append((o, o + size))
        recent = self.n - self.forget
        conf = {k: [c for c, t in self.conf[k].items() if t >= recent] for k in keys | set(pinned)}
        new = {}
        # live keys first, at their offset where it still holds
        for k in sorted(pinned, key=lambda k: -self.env[k]):
            if k not in self.slot or k not in keys:
                continue
            o = self.slot[k]
            clash = [(new[c], new[c] + self.env[c]) for c in conf[k] if c in new]
            clash += [r for c in conf[k] if c in pinned for r in pinned[c]]
            self.replan_work += len(clash)
            if lowest_clear([(lo, hi) for lo, hi in clash if lo < o + self.env[k] and hi > o] +
                            [(0, o)], self.env[k]) == o:
                new[k] = o
        for k in sorted((keys | set(pinned)) - set(new), key=lambda k: -self.env[k]):
            clash = [(new[c], new[c] + self.env[c]) for c in conf[k] if c in new]
            clash += [r for c in conf[k] if c in pinned for r in pinned[c]]
            clash += pinned.get(k, [])
            if k not in keys:
                continue
            self.replan_work += len(clash)
            o = lowest_clear(clash, self.env[k])
            if not self.capped or o + self.env[k] <= self.cap():
                new[k] = o
        for k in list(self.slot):
            if k not in new and (self.n - self.last_use[k] > self.forget and k not in self.live_keys):
                del self.slot[k]      # unused for --forget requests: forgotten
                del self.env[k]
                del self.last_use[k]
                for c in self.conf.pop(k, ()):
                    if c in self.conf:
                        self.conf[c].pop(k, None)
        self.slot = new
        self.used = set()

    def state(self):
        return len(self.env), sum(len(c) for c in self.conf.values())

    def plan_height(self):
        return max((self.slot[k] + self.env[k] for k in self.slot), default=0)

    def cap(self):
        return int(max(self.record, self.live_bytes) * 1.02) - self.general_live


class TwinSlots(KeyedSlots):
    """Keyed slots whose key is a POSITION found by following the sequence: request n's
    twin is the request after the previous twin (a cursor into history, skew +-1
    tried) when its own token is the same and its position is not live; otherwise the
    most recent request of the same 4-token context whose position is not live and
    that lies at least 8 requests back; otherwise a new position."""

    def __init__(self, *a):
        super().__init__(*a)
        self.tok1 = []
        self.ctx = []
        self.pos = []
        self.index = collections.defaultdict(list)
        self.anchor = None          # (n0, m0): request n0 had twin m0
        self.next_pos = 0
        self.tokens = collections.deque(maxlen=4)

    def key(self, serial):
        n = self.n
        tok = tuple(sorted(n - m for m in self.freed))
        self.freed = []
        self.tokens.append(tok)
        t1, c4 = hash(tok), hash(tuple(self.tokens))
        self.tok1.append(t1)
        self.ctx.append(c4)
        twin = None
        if self.anchor:
            n0, m0 = self.anchor
            for m in (m0 + n - n0, m0 + n - n0 + 1, m0 + n - n0 - 1):
                if m < n and self.tok1[m] == t1 and self.pos[m] not in self.live_keys:
                    twin = m
                    break
        if twin is None:
            for m in reversed(self.index[c4]):
                if n - m >= 8 and self.pos[m] not in self.live_keys:
                    twin = m
                    break
        if twin is None:
            p = self.next_pos
            self.next_pos += 1
        else:
            p = self.pos[twin]
            self.anchor = (n, twin)
        self.pos.append(p)
        lst = self.index[c4]
        lst.append(n)
        if len(lst) > 32:
            del lst[0]
        self.base_of[serial] = c4
        self.n += 1
        return p


class Oracle:
    """PEEKS at step markers and future sizes (not online): position in the step."""

    def __init__(self, events, steps):
        per_step = collections.defaultdict(list)
        for e in events:
            if e[0] == "a" and e[3] >= 0:
                per_step[e[3]].append(e)
        counts = collections.Counter(len(v) for v in per_step.values())
        self.n = counts.most_common(1)[0][0]
        self.steps = {s for s, v in per_step.items() if len(v) == self.n}
        env = [0] * self.n
        pos = {}
        for s in self.steps:
            for i, e in enumerate(per_step[s]):
                env[i] = max(env[i], e[2])
                pos[e[1]] = i
        conf = [set() for _ in range(self.n)]
        live = {}
        for e in events:
            if e[0] == "a":
                if e[1] in pos:
                    for q in live.values():
                        conf[pos[e[1]]].add(q)
                        conf[q].add(pos[e[1]])
                    live[e[1]] = pos[e[1]]
            else:
                live.pop(e[1], None)
        self.offset = {}
        for p in sorted(range(self.n), key=lambda p: -env[p]):
            self.offset[p] = lowest_clear(
                [(self.offset[q], self.offset[q] + env[q]) for q in conf[p] if q in self.offset], env[p])
        self.height = max(self.offset[p] + env[p] for p in range(self.n))
        self.pos = pos
        self.base = None
        self.first_step_serial = min((e[1] for e in events if e[0] == "a" and e[3] >= 0), default=0)

    def place(self, serial, size, live, blocks):
        p = self.pos.get(serial)
        if p is not None:
            o = self.base + self.offset[p]
            if live.clear_of(o, o + size):
                return o, True
        # outside the plan: set-up blocks below it, the others above it
        floor = 0 if serial < self.first_step_serial else self.base + self.height
        return lowest_clear([(0, floor)] + list(zip(live.starts, live.ends)), size), False

    def state(self):
        return self.n, 0

    def plan_height(self):
        return self.base + self.height


def run(name, args):
    events, steps = load(name, args.threshold)
    pages = Pages(args.slack)
    live = Live()
    blocks = {}
    if args.mode == "oracle":
        mech = Oracle(events, steps)
        # the oracle's region sits above the set-up blocks still live when step 0 starts
        setup = {e[1]: e[2] for e in events if e[0] == "a" and e[3] < 0}
        for e in events:
            if e[0] == "f" and e[2] < 0:
                setup.pop(e[1], None)
        mech.base = -(-sum(setup.values()) // PAGE) * PAGE
    elif args.mode == "twin":
        mech = TwinSlots(args.key, args.context, args.replan, args.forget, args.cap, args.general)
    else:
        mech = KeyedSlots(args.key, args.context, args.replan, args.forget, args.cap, args.general)
    per_step = collections.defaultdict(lambda: [0, 0, 0, 0])  # requests, misses, miss pages, moves
    peak = 0
    cur = 0
    max_reserved = 0
    height = 0
    for e in events:
        step = e[-1]
        pages.counting = step >= args.warmup
        moves_before = pages.moves
        if e[0] == "a":
            _, serial, size, _ = e
            o, hit = mech.place(serial, size, live, blocks)
            assert live.clear_of(o, o + size)
            live.add(o, o + size)
            blocks[serial] = (o, size)
            cur += size
            peak = max(peak, cur)
            pages.live = cur
            pages.record = max(pages.record, cur)
            pages.touch(o, o + size)
            if o < GENERAL:
                height = max(height, o + size)
            st = per_step[step]
            st[0] += 1
            if not hit:
                st[1] += 1
                st[2] += (o + size - 1) // PAGE - o // PAGE + 1
        else:
            serial = e[1]
            o, size = blocks.pop(serial)
            live.remove(o)
            pages.release(o, o + size)
            cur -= size
            if hasattr(mech, "on_free"):
                mech.on_free(serial)
        per_step[step][3] += pages.moves - moves_before
        max_reserved = max(max_reserved, pages.n_mapped * PAGE)
    after = [per_step[s] for s in range(args.warmup, steps)]
    mean = [sum(x[i] for x in after) / max(len(after), 1) for i in range(4)]
    worst = [max((x[i] for x in after), default=0) for i in range(4)]
    keys, edges = mech.state()
    return dict(name=name, peak=peak, height=height, plan=mech.plan_height(), reserved=max_reserved, mean=mean, worst=worst,
                keys=keys, edges=edges, over=pages.over,
                replans=getattr(mech, "replans", 0), work=getattr(mech, "replan_work", 0),
                why=dict(getattr(mech, "why", {})), moves_by_step=[per_step[s][3] for s in range(steps)],
                misses_by_step=[per_step[s][1] for s in range(steps)])


VARLEN = ["bert_infer_varlen", "bert_mlm_train_varlen", "lstm_lm_varlen", "mixtral_moe_varlen",
          "fasterrcnn_train_varsize", "vit_eval_varbatch", "resnet18_eval_varbatch",
          "efficientnet_varbatch", "mobilenetv3_multiscale", "llama_generate_varbatch",
          "t5_generate_varlen", "embedding_bag_sparse"]
EXACT = ["resnet50_sgd", "gpt2_train_adamw", "unet_bf16"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*")
    ap.add_argument("--mode", choices=["keyed", "twin", "oracle"], default="keyed")
    ap.add_argument("--key", choices=["dist", "bucket", "key"], default="dist")
    ap.add_argument("--context", type=int, default=2)
    ap.add_argument("--replan", type=int, default=0)
    ap.add_argument("--forget", type=int, default=8192, help="a key unused this many requests is dropped at a replan")
    ap.add_argument("--cap", type=int, default=1, help="1: no slot above 1.02 x the record of live bytes")
    ap.add_argument("--general", type=int, default=1, help="1: a key seen the first time goes online, outside the region")
    ap.add_argument("--threshold", type=int, default=512 << 10)
    ap.add_argument("--slack", type=float, default=0.02)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", action="store_true", help="print moves and misses by step")
    args = ap.parse_args()
    traces = args.traces or VARLEN + EXACT
    print("%-26s %6s %6s %6s | %7s %7s %7s | %6s %6s %6s | %6s %7s %5s" % (
        "trace", "plan", "height", "resvd", "miss/st", "mpg/st", "move/st", "wmiss", "wmove", "over",
        "keys", "edges", "repl"))
    for name in traces:
        r = run(name, args)
        print("%-26s %6.3f %6.3f %6.3f | %7.1f %7.1f %7.1f | %6d %6d %6d | %6d %7d %5d" % (
            name, r["plan"] / r["peak"], r["height"] / r["peak"], r["reserved"] / r["peak"], r["mean"][1], r["mean"][2],
            r["mean"][3], r["worst"][1], r["worst"][3], r["over"], r["keys"], r["edges"], r["replans"]))
        if args.steps:
            print("   moves", r["moves_by_step"])
            print("   misses", r["misses_by_step"])
            print("   why", r["why"])
        sys.stdout.flush()


if __name__ == "__main__":
    main()
