#!/usr/bin/env python3
"""The page floor of a placement rule: a trace's large requests (above 512 KiB, the
arena's) placed in one address range by best fit or by address-ordered first fit,
with a page counted only while a live block touches it (no slack, no idle page kept,
no small pool). Its largest count of pages over the largest live bytes is the least
reserved / live that rule can reach on the trace, whatever pages the arena keeps:
where it exceeds 1.02, no slack or page policy brings the arena under the goal with
that rule; only another placement can.

    bench/workloads/placement_floor.py TRACE... [--steps 4] [--rules best first]
        [--page-mib 2]

--steps: the steps read (the events before the first step marker, then that many
steps); generate loops reach their page peak in their first steps.
"""
import argparse
import bisect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402

LARGE = 512 << 10  # larger requests go to the arena
QUANTUM = 512      # the arena's rounding of a request


class Range:
    """Free ranges of one address range, in address order, merged when freed."""

    def __init__(self, rule, page):
        self.free = [(0, 1 << 60)]  # (offset, size)
        self.rule, self.page = rule, page
        self.users = {}  # page -> live blocks touching it
        self.parts = {}  # first or last page of a live block -> [(start, end)] within it

    def part(self, offset, size, p):
        """The bytes of page p that the block [offset, offset + size) uses, within it."""
        start = max(offset, p * self.page) - p * self.page
        end = min(offset + size, (p + 1) * self.page) - p * self.page
        return start, end

    def note(self, offset, size, sign):
        """Live blocks' parts on their first and last pages (inner pages are whole)."""
        for p in {offset // self.page, (offset + size - 1) // self.page}:
            start, end = self.part(offset, size, p)
            parts = self.parts.setdefault(p, [])
            if sign > 0:
                parts.append((start, end))
            else:
                parts.remove((start, end))
                if not parts:
                    del self.parts[p]

    def calculate_shared_pages(self):
        """Physical pages when pages whose live parts do not overlap (as offsets within
        a page) share one physical page: first fit, fullest pages first."""
        partial, whole = [], 0
        for p in self.users:
            parts = sorted(self.parts.get(p, []))
            covered = sum(e - s for s, e in parts)
            if p not in self.parts or covered >= self.page:
                whole += 1
            else:
                partial.append((covered, parts))
        partial.sort(reverse=True)
        bins = []  # each a sorted list of taken intervals
        for _, parts in partial:
            for taken in bins:
                if all(e <= s2 or e2 <= s for s, e in parts for s2, e2 in taken):
                    taken.extend(parts)
                    break
            else:
                bins.append(list(parts))
        return whole + len(bins)

    def take(self, size):
        chosen = None
        for i, (offset, room) in enumerate(self.free):
            if room < size:
                continue
            if self.rule == "first":
                chosen = i
                break
            if chosen is None or room < self.free[chosen][1]:
                chosen = i
        offset, room = self.free[chosen]
        if room == size:
            self.free.pop(chosen)
        else:
            self.free[chosen] = (offset + size, room - size)
        for p in range(offset // self.page, (offset + size - 1) // self.page + 1):
            self.users[p] = self.users.get(p, 0) + 1
        self.note(offset, size, 1)
        return offset

    def give_back(self, offset, size):
        self.note(offset, size, -1)
        for p in range(offset // self.page, (offset + size - 1) // self.page + 1):
            self.users[p] -= 1
            if self.users[p] == 0:
                del self.users[p]
        i = bisect.bisect(self.free, (offset, 0))
        if i < len(self.free) and self.free[i][0] == offset + size:
            size += self.free.pop(i)[1]
        if i > 0 and sum(self.free[i - 1]) == offset:
            self.free[i - 1] = (self.free[i - 1][0], self.free[i - 1][1] + size)
        else:
            self.free.insert(i, (offset, size))


class PairedRange(Range):
    """Range's placement, with physical pages bound when a page is first touched and
    never re-paired, as an allocator could share pages: a block's partly used first
    or last page, when no live block touches it yet, maps the fullest physical page
    whose live parts (over every address it is mapped at) leave the block's part
    free, else a new one. A place whose partly used page is already bound and whose
    part there is taken on its physical page is refused; the block then starts at
    the next page boundary of the range, or goes to the next range in the rule's
    order. Physical pages in use are counted at the same moments as pages."""

    def __init__(self, rule, page):
        super().__init__(rule, page)
        self.bound = {}     # address page -> physical page, while a live block touches it
        self.taken = {}     # physical page -> [(start, end)] live parts, over its addresses
        self.next_physical = 0
        self.whole = 0      # physical pages under inner (whole) pages of live blocks

    def edges(self, offset, size):
        """The block's partly used pages, each with its part: {page: (start, end)}."""
        out = {}
        for p in {offset // self.page, (offset + size - 1) // self.page}:
            start, end = self.part(offset, size, p)
            if end - start < self.page:
                out[p] = (start, end)
        return out

    def free_in(self, q, start, end):
        return all(e <= start or end <= s for s, e in self.taken.get(q, []))

    def fits(self, offset, size):
        for p, (start, end) in self.edges(offset, size).items():
            q = self.bound.get(p)
            if q is not None and not self.free_in(q, start, end):
                return False
        return True

    def take(self, size):
        order = sorted(range(len(self.free)), key=lambda i: (
            self.free[i][1] if self.rule == "best" else 0, self.free[i][0]))
        for i in order:
            offset, room = self.free[i]
            if room < size:
                continue
            for start in sorted({offset, -(-offset // self.page) * self.page}):
                if start + size <= offset + room and self.fits(start, size):
                    return self.take_at(i, start, size)
        raise AssertionError("the range is unbounded: some place always fits")

    def take_at(self, i, start, size):
        offset, room = self.free.pop(i)
        if start + size < offset + room:
            self.free.insert(i, (start + size, offset + room - start - size))
        if start > offset:
            self.free.insert(i, (offset, start - offset))
        edges = self.edges(start, size)
        for p in range(start // self.page, (start + size - 1) // self.page + 1):
            self.users[p] = self.users.get(p, 0) + 1
            if p not in edges:
                self.whole += 1
                continue
            lo, hi = edges[p]
            q = self.bound.get(p)
            if q is None:
                fitting = [(sum(e - s for s, e in parts), q2) for q2, parts in self.taken.items()
                           if self.free_in(q2, lo, hi)]
                if fitting:
                    q = max(fitting)[1]
                else:
                    q, self.next_physical = self.next_physical, self.next_physical + 1
                self.bound[p] = q
            self.taken.setdefault(q, []).append((lo, hi))
        self.note(start, size, 1)
        return start

    def give_back(self, offset, size):
        edges = self.edges(offset, size)
        for p in range(offset // self.page, (offset + size - 1) // self.page + 1):
            if p not in edges:
                self.whole -= 1
                continue
            q = self.bound[p]
            self.taken[q].remove(edges[p])
            if self.users[p] == 1:
                del self.bound[p]
            if not self.taken[q]:
                del self.taken[q]
        super().give_back(offset, size)

    def calculate_physical_pages(self):
        return self.whole + len(self.taken)


def floor(path, steps, rule, page, share=False, pair_at_map=False):
    """(peak live bytes, peak pages x page bytes) of the trace's arena requests; with
    share, pages counted as calculate_shared_pages counts them; with pair_at_map,
    physical pages as PairedRange binds them."""
    where = PairedRange(rule, page) if pair_at_map else Range(rule, page)
    held, live, peak_live, peak_pages, step = {}, 0, 0, 0, -1
    for _, kind, _, fields in trace_lines.read(path, "placement_floor"):
        if kind == "s":
            step += 1
            if step >= steps:
                break
        elif kind == "a" and int(fields[2]) > LARGE:
            size = -(-int(fields[2]) // QUANTUM) * QUANTUM
            held[fields[1]] = (where.take(size), size)
            live += size
            peak_live = max(peak_live, live)
            if len(where.users) > peak_pages:  # sharing never counts more than this
                if pair_at_map:
                    pages = where.calculate_physical_pages()
                elif share:
                    pages = where.calculate_shared_pages()
                else:
                    pages = len(where.users)
                peak_pages = max(peak_pages, pages)
        elif kind == "f" and fields[1] in held:
            offset, size = held.pop(fields[1])
            where.give_back(offset, size)
            live -= size
    return peak_live, peak_pages * page


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rules", nargs="+", default=["best", "first"],
                        choices=["best", "first"])
    parser.add_argument("--page-mib", type=int, default=2)
    parser.add_argument("--share", action="store_true",
                        help="also count pages when partly used pages whose live parts do "
                        "not overlap share a physical page (calculate_shared_pages)")
    parser.add_argument("--pair-at-map", action="store_true",
                        help="also count physical pages when each is bound as a page is "
                        "first touched and never re-paired (PairedRange)")
    args = parser.parse_args()
    page = args.page_mib << 20
    columns = [(r, "") for r in args.rules]
    columns += [(r, "shared") for r in args.rules] if args.share else []
    columns += [(r, "paired at map") for r in args.rules] if args.pair_at_map else []
    print("| trace | peak live (MiB) | " + " | ".join(
        "%s fit%s: pages / live" % (r, ", " + how if how else "") for r, how in columns)
        + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in columns) + " |")
    for path in args.traces:
        cells, live = [], 0
        for rule, how in columns:
            live, pages = floor(path, args.steps, rule, page, how == "shared",
                                how == "paired at map")
            cells.append("%.4f" % (pages / live) if live else "-")
        name = os.path.basename(path).replace(".trace.csv.gz", "")
        print("| %s | %.1f | %s |" % (name, live / 2**20, " | ".join(cells)))


if __name__ == "__main__":
    main()
