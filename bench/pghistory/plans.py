#!/usr/bin/env python3
"""Sums auto_explain plans (log_format json, log_analyze, log_buffers) from
a PostgreSQL log by errand statement.

    plans.py LOGFILE [LOGFILE...]

For each statement kind: calls, rows written, shared buffers (hit + read)
per call and per row, and where they went: each plan node's exclusive
buffers (its own less its children's), summed by node (an index scan by its
index, a bitmap heap scan or seq scan by its table, the ModifyTable node as
'write': the heap updates, deletes and inserts and the index entries of the
new row versions). PostgreSQL counts an InitPlan's buffers again in the
node that first reads its result (the claim's primary-key scan reading $4);
that is taken out here."""
import json, re, sys, collections

HEAD = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ UTC \[\d+\] ', re.M)

def kind(q):
    if 'lease_until <=' in q and 'errors = errors' in q: return 'sweep_leases'
    if 'deadline <=' in q and 'errors = errors' in q: return 'sweep_deadlines'
    if "state = 'running', attempt = attempt + 1" in q: return 'claim'
    if 'cancel_requested_at IS NOT NULL AND o.kind' in q or 'o.ord' in q and 'errand_jobs_done' in q: return 'ack'
    if 'WITH RECURSIVE prio' in q: return 'next_due'
    if q.lstrip().upper().startswith('VACUUM'): return None
    return None

def b(n):
    return n.get('Shared Hit Blocks', 0) + n.get('Shared Read Blocks', 0)

def label(n):
    t = n['Node Type']
    if 'Index Name' in n:
        return ('bitmap:' if t == 'Bitmap Index Scan' else 'idx:') + n['Index Name']
    if t in ('Bitmap Heap Scan', 'Seq Scan'):
        return ('heap:' if t == 'Bitmap Heap Scan' else 'seq:') + n.get('Relation Name', '?')
    if t == 'ModifyTable':
        return 'write:' + n.get('Operation', '') + ':' + n.get('Relation Name', '')
    return 'other'

def own_text(n):
    return json.dumps({k: v for k, v in n.items() if k != 'Plans'})

def consumer(n, name):
    """The first node under n (depth first, InitPlans aside) that reads
    the InitPlan or CTE name: its buffers include the InitPlan's."""
    for k in n.get('Plans', []):
        if k.get('Parent Relationship') == 'InitPlan':
            continue
        if name(k):
            return k
        c = consumer(k, name)
        if c is not None:
            return c
    return None

def walk(n, acc, adjust):
    kids = n.get('Plans', [])
    excl = b(n) - sum(b(k) for k in kids if k.get('Parent Relationship') != 'InitPlan')
    for k in kids:
        if k.get('Parent Relationship') != 'InitPlan':
            continue
        sub = k.get('Subplan Name', '')
        m = re.search(r'returns (\$\d+)', sub)
        if m:
            param = m.group(1)
            c = consumer(n, lambda x: re.search(re.escape(param) + r'\b', own_text(x)) is not None)
        elif sub.startswith('CTE '):
            cte = sub[4:]
            c = consumer(n, lambda x: x.get('CTE Name') == cte)
        else:
            c = None
        if c is not None:
            adjust[id(c)] = adjust.get(id(c), 0) + b(k)
        else:
            excl -= b(k)  # consumed by n itself
    acc[label(n)] += excl - adjust.get(id(n), 0)
    for k in kids:
        walk(k, acc, adjust)

def modified_rows(n):
    r = 0
    if n['Node Type'] == 'ModifyTable' and n.get('Operation') in ('Update', 'Delete'):
        r += n.get('Actual Rows', 0)
    for k in n.get('Plans', []):
        r += modified_rows(k)
    return r

def main():
    text = ''.join(open(f).read() for f in sys.argv[1:])
    starts = [m.start() for m in HEAD.finditer(text)] + [len(text)]
    calls, rows, total = collections.Counter(), collections.Counter(), collections.Counter()
    parts = collections.defaultdict(collections.Counter)
    for s, e in zip(starts, starts[1:]):
        entry = text[s:e]
        if 'plan:' not in entry: continue
        j = entry.find('{')
        try:
            plan = json.loads(entry[j:])
        except Exception:
            continue
        k = kind(plan.get('Query Text', ''))
        if not k: continue
        top = plan['Plan']
        calls[k] += 1
        rows[k] += modified_rows(top)
        total[k] += b(top)
        walk(top, parts[k], {})
    for k in sorted(calls):
        n, r = calls[k], rows[k]
        per_row = f'{total[k]/r:6.1f}/row' if r else ' ' * 10
        print(f'{k:15} calls={n:4} rows={r:7} buffers/call={total[k]/n:8.0f} {per_row}')
        for p, v in parts[k].most_common():
            if v and (v / n >= 1):
                print(f'{"":17}{p:40} {v/n:8.0f}/call' + (f' {v/r:6.1f}/row' if r else ''))

main()
