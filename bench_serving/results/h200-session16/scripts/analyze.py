"""Session 16: per server, from the step traces in bench-h200.tar.gz files: GDN ms per step split by
step size (>= 7000 prefill tokens or not) and by layer (first vs mean of others): GPU ms, host ms,
the thread's CPU ms, and the qla pieces' host ms; medians."""
import json, statistics, sys, tarfile

def med(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None

def first(r, key):
    v = r.get(key) or []
    return v[0] if v else None

def rest(r, key):
    v = r.get(key) or []
    return statistics.fmean(v[1:]) if len(v) > 1 else None

for path in sys.argv[1:]:
    with tarfile.open(path) as tf:
        for m in tf.getmembers():
            if "trace-steps" not in m.name or not m.isfile():
                continue
            recs = [json.loads(l) for l in tf.extractfile(m).read().decode().splitlines() if l.strip()]
            out = {"trace": m.name, "steps": len(recs)}
            for label, sel in (("big", lambda r: r["prefill_tokens"] >= 7000), ("small", lambda r: r["prefill_tokens"] < 7000)):
                rs = [r for r in recs if sel(r)]
                d = dict(n=len(rs), gdn=med([r["gdn_ms"] for r in rs]), step=med([r["step_ms"] for r in rs]))
                for key, name in (("layer_ms", "gpu"), ("layer_host_ms", "host"), ("layer_cpu_ms", "cpu")):
                    d[f"first_{name}"] = med([first(r, key) for r in rs])
                    d[f"others_{name}"] = med([rest(r, key) for r in rs])
                pieces = [p for r in rs for p in (r.get("layer_pieces_ms") or [])]
                for piece in sorted({k for p in pieces for k in p}):
                    d[f"piece_{piece}"] = med([p.get(piece) for p in pieces])
                out[label] = d
            print(json.dumps(out))
