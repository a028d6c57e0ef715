#!/usr/bin/env python3
"""The soku client's `path_sample` events, one line per sample: the model's min RTT and
bandwidth estimate over time, from logs of its `--json` stderr whose lines a wrapper
stamped with the time (`TIME JSON`).

usage: traces.py LABEL=LOG... > traces.csv
"""
import json, sys

print("run,t_s,model_min_rtt_ms,model_bw_mbit,phase")
for arg in sys.argv[1:]:
    label, path = arg.split("=", 1)
    t0 = None
    for line in open(path):
        stamp, _, text = line.partition(" ")
        try:
            event = json.loads(text)
        except ValueError:
            continue
        t = float(stamp)
        t0 = t if t0 is None else t0
        if event.get("event") == "path_sample":
            print(f"{label},{t - t0:.1f},{event.get('model_min_rtt_ms', '')},"
                  f"{event.get('model_bw_mbit', '')},{event.get('phase', '')}")
