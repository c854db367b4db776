"""Per server: GDN core ms per step split by step size (>= 7000 prefill tokens or not) and by layer
(first vs mean of others), medians, from the step traces in a bench-h200.tar.gz."""
import json, statistics, sys, tarfile

def med(xs):
    return round(statistics.median(xs), 3) if xs else None

for path in sys.argv[1:]:
    with tarfile.open(path) as tf:
        for m in tf.getmembers():
            if "trace-steps" not in m.name or not m.isfile():
                continue
            recs = [json.loads(l) for l in tf.extractfile(m).read().decode().splitlines() if l.strip()]
            out = {"trace": m.name, "steps": len(recs)}
            for label, sel in (("big", lambda r: r["prefill_tokens"] >= 7000), ("small", lambda r: r["prefill_tokens"] < 7000)):
                rs = [r for r in recs if sel(r)]
                out[label] = dict(n=len(rs), gdn=med([r["gdn_ms"] for r in rs]), host=med([r.get("host_ms") or 0 for r in rs]),
                                  first=med([r["layer_ms"][0] for r in rs if r.get("layer_ms")]),
                                  others=med([statistics.fmean(r["layer_ms"][1:]) for r in rs if len(r.get("layer_ms") or []) > 1]),
                                  first_host=med([r["layer_host_ms"][0] for r in rs if r.get("layer_host_ms")]),
                                  others_host=med([statistics.fmean(r["layer_host_ms"][1:]) for r in rs if len(r.get("layer_host_ms") or []) > 1]))
            print(json.dumps(out))
