import gzip, sys, collections, re
path = sys.argv[1]
anchor = sys.argv[2] if len(sys.argv) > 2 else "qla_core"
tot = 0; by_child = collections.Counter(); by_leaf = collections.Counter(); fwd = 0; step = 0
by_fwdchild = collections.Counter()
for line in gzip.open(path, "rt"):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n)
    frames = stack.split(";")
    if not frames[0].startswith("thread (") or "MainThread" not in frames[0]:
        continue
    names = [f.split(" (")[0] for f in frames]
    if "GPUModelRunner.execute_model" in names:
        step += n
    if anchor in names:
        i = names.index(anchor)
        tot += n
        child = frames[i + 1] if i + 1 < len(frames) else "<self>"
        by_child[child] += n
        # deeper: two levels
        key = " > ".join(f.split(" (")[0] for f in frames[i + 1:i + 4])
        by_leaf[key] += n
print("main-thread samples in execute_model:", step, "in", anchor, ":", tot)
for k, v in by_child.most_common(15): print(f"{v:6d} {100*v/max(tot,1):5.1f}%  {k}")
print("--- 3 levels")
for k, v in by_leaf.most_common(40): print(f"{v:6d} {100*v/max(tot,1):5.1f}%  {k}")
