#!/usr/bin/env python3
"""perjob.py LOG...: for each auto_explain log of a 20,000-job run, the
buffers per job of the claims, the acknowledgments and the sweeps, and
their sum."""
import subprocess, sys, re
for f in sys.argv[1:]:
    out = subprocess.run([sys.executable, __file__.replace('perjob.py', 'plans.py'), f], capture_output=True, text=True).stdout
    tot = {}
    for l in out.splitlines():
        m = re.match(r'(\w+)\s+calls=\s*(\d+) rows=\s*(\d+) buffers/call=\s*(\d+)', l)
        if m:
            tot[m.group(1)] = int(m.group(2)) * int(m.group(4))
    jobs = 20000
    c, a = tot.get('claim', 0) / jobs, tot.get('ack', 0) / jobs
    s = (tot.get('sweep_leases', 0) + tot.get('sweep_deadlines', 0)) / jobs
    print(f'{f:28} claim {c:5.1f}  ack {a:5.1f}  sweeps {s:6.1f}  total {c+a+s:6.1f} buffers/job')
