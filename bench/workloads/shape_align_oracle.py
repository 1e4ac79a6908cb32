#!/usr/bin/env python3
"""NOT ONLINE (peeks at `s` step markers and the whole trace): a bound for shape_plan_sim.py.
Each step's arena requests (> 512 KiB, rounded to 512) are aligned to one template step
(the first with the most common count) by difflib on size-independent tokens (sorted
distances back to the requests freed since the previous request); unmatched requests
get new positions. Every position gets its largest size over the whole trace and the
union of its overlaps in every step; a largest-first greedy plan is made once; each
request goes to its position's offset unless a live block is there (a miss).

    python3 bench/workloads/shape_align_oracle.py TRACE_NAME...
"""
import sys, difflib, collections
import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shape_plan_sim as S
def run(name, warm=5):
    events, steps = S.load(name, 512<<10)
    # tokens
    freed=[]; n=0; tok={}; sizes={}
    for e in events:
        if e[0]=='a':
            tok[e[1]] = tuple(sorted(n-m for m in freed)); freed=[]; n+=1; sizes[e[1]]=e[2]
        else: freed.append(e[1])
    per=collections.defaultdict(list)
    for e in events:
        if e[0]=='a': per[e[3]].append(e[1])
    cnt=collections.Counter(len(per[s]) for s in range(steps))
    common=cnt.most_common(1)[0][0]
    tmpl_step=[s for s in range(steps) if len(per[s])==common][0]
    tmpl=[tok[x] for x in per[tmpl_step]]
    pos={}; npos=len(tmpl)
    for s in range(steps):
        seq=[tok[x] for x in per[s]]
        sm=difflib.SequenceMatcher(None, tmpl, seq, autojunk=False)
        got={}
        for a,b,l in sm.get_matching_blocks():
            for i in range(l): got[b+i]=a+i
        # unmatched: fill gaps in order between matched neighbours (replace ops)
        for op,a1,a2,b1,b2 in sm.get_opcodes():
            if op=='replace':
                for i in range(min(a2-a1,b2-b1)): got[b1+i]=a1+i
        for i,x in enumerate(per[s]):
            if i in got: pos[x]=got[i]
            else: pos[x]=npos; npos+=1
    env=collections.defaultdict(int)
    for x,p in pos.items(): env[p]=max(env[p],sizes[x])
    conf=collections.defaultdict(set); live={}
    for e in events:
        if e[0]=='a':
            p=pos.get(e[1])
            if p is not None:
                for q in live.values():
                    if q!=p: conf[p].add(q); conf[q].add(p)
                live[e[1]]=p
        else: live.pop(e[1],None)
    setup = sum(sizes[e[1]] for e in events if e[0]=='a' and e[3]<0)
    off={}
    for p in sorted(env,key=lambda p:-env[p]):
        off[p]=S.lowest_clear([(off[q],off[q]+env[q]) for q in conf[p] if q in off],env[p])
    h=max(off[p]+env[p] for p in off)
    # placement with hit check
    L=S.Live(); bl={}; miss=collections.Counter(); cur=0; peak=0
    for e in events:
        if e[0]=='a':
            x=e[1]; sz=e[2]
            if e[3]<0: o=S.lowest_clear(list(zip(L.starts,L.ends)),sz); hit=True
            else:
                o=setup+off[pos[x]]
                hit=L.clear_of(o,o+sz)
                if not hit: o=S.lowest_clear([(0,setup+h)]+list(zip(L.starts,L.ends)),sz)
            L.add(o,o+sz); bl[x]=(o,sz); cur+=sz; peak=max(peak,cur)
            if not hit and e[3]>=warm: miss[e[3]]+=1
        else:
            o,sz=bl.pop(e[1]); L.remove(o); cur-=sz
    print('%-26s positions %5d (template %4d)  plan+setup/peak %.3f  misses/step after warm-up %.1f max %d' % (name, npos, common, (h+setup)/peak, sum(miss.values())/(steps-warm), max(miss.values(), default=0)))
for t in sys.argv[1:]: run(t)
