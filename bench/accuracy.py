#!/usr/bin/python3
"""Test accuracy of the ConvNet (or the small ResNet, --model fashion-resnet) on Fashion-MNIST
as a distribution over seeds, dtrain against PyTorch, because one seed's figure is a draw (BENCHMARKS.md: after one epoch a single step moves
it by about a point; after five, seeds spread over 90-91.6%).

    # run: one line of JSON per seed appended to OUT (seeds already in OUT are skipped, so a
    # stopped sweep resumes); --jobs runs that many seeds at once, one thread each
    bench/accuracy.py run dtrain  --epochs 5 --seeds 1-100 --out bench/results/e5-dtrain.jsonl
    bench/accuracy.py run pytorch --epochs 5 --seeds 1-100 --out bench/results/e5-pytorch.jsonl
    bench/accuracy.py run replay  --epochs 5 --seeds 1-20  --out bench/results/e5-replay.jsonl
    bench/accuracy.py run dtrain --model fashion-resnet --epochs 5 --seeds 1-20 --jobs 16 \
        --out bench/results/resnet-e5-dtrain.jsonl
    # summary: mean, median, sd, share at or above --target per file, and for each pair of
    # files the difference of means (in standard errors), the rank statistic P(run of A > run
    # of B) and, over the seeds both hold, the paired difference
    bench/accuracy.py summary --target 90.5 bench/results/e5-*.jsonl

Implementations (MODEL = convnet or fashion-resnet):
  dtrain   ./dtrain train configs/fashion-MODEL.cfg --set train.seed=S --set train.epochs=E
  pytorch  bench/torch_ref.py MODEL --seed S --epochs E --eval (torch's own init, order and
           dropout masks; for the ResNet the same recipe: docs/resnet.md's module, SGD with
           Nesterov momentum, one-cycle, label smoothing, flips)
  replay   bench/torch_replay.py --dmask --drop-last: PyTorch's layers and Adadelta fed dtrain's
           initial weights, sample order and dropout masks for seed S, so that paired with dtrain
           by seed it tells dtrain's arithmetic from its random streams
Extra arguments after `--` go to dtrain (e.g. `-- --set model.layers.2.algo="direct"`).
--data DIR points both at a Fashion-MNIST copy (default Debian's). Needs Debian's python3-torch
for pytorch and replay, or a Python with torch named by the PYTHON environment variable.
"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = os.environ.get("PYTHON", "/usr/bin/python3")
FASHION = "/usr/share/datasets/fashion-mnist"
CONFIGS = {"convnet": "configs/fashion-convnet.cfg", "fashion-resnet": "configs/fashion-resnet.cfg"}


def seeds_arg(text):
    a, _, b = text.partition("-")
    lo, hi = int(a), int(b or a)
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError(f"seeds '{text}': want FIRST-LAST with 1 <= FIRST <= LAST")
    return range(lo, hi + 1)


def last_json(cmd, what):
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{what}: exit {p.returncode}: {tail}")
    return json.loads(lines[-1])


def dtrain_cmd(a, seed, epochs, extra, ckpt_dir):
    # each seed its own checkpoint directory: --jobs runs seeds side by side
    return ["./dtrain", "train", CONFIGS[a.model], "--threads", str(a.threads), "--json", "--quiet",
            "--set", f"train.seed={seed}", "--set", f"train.epochs={epochs}",
            "--set", f'data.dir="{a.data}"', "--set", f'checkpoint.dir="{ckpt_dir}"',
            "--set", "checkpoint.every=0"] + extra


def run_seed(a, seed):
    impl, epochs, extra = a.impl, a.epochs, a.extra
    if impl == "dtrain":
        with tempfile.TemporaryDirectory(prefix="dtrain-acc-") as d:
            acc = last_json(dtrain_cmd(a, seed, epochs, extra, d),
                            f"dtrain seed {seed}")["test_accuracy"]
    elif impl == "pytorch":
        acc = last_json([PY, "bench/torch_ref.py", a.model, "--threads", str(a.threads), "--seed", str(seed),
                         "--epochs", str(epochs), "--data", a.data, "--eval"],
                        f"torch_ref seed {seed}")["test_accuracy"]
    else:
        with tempfile.TemporaryDirectory(prefix="dtrain-init-") as d:
            # dtrain's initial weights: one step at a learning rate too small to move a float
            last_json(dtrain_cmd(a, seed, 1, ["--set", "optimizer.lr=1e-30", "--set", "train.max_steps=1",
                                              "--set", "checkpoint.every=1"], d),
                      f"dtrain init seed {seed}")
            acc = last_json([PY, "bench/torch_replay.py", f"{d}/last.safetensors", "--seed", str(seed),
                             "--epochs", str(epochs), "--drop-last", "--dmask", "--eval"],
                            f"torch_replay seed {seed}")["test_accuracy"]
    return {"impl": impl, "model": a.model, "seed": seed, "epochs": epochs,
            "extra": " ".join(extra), "test_accuracy": round(acc * 100, 4)}


def load(path):
    """Test accuracy by seed, and the first result line (which names the experiment)."""
    rows, first = {}, None
    if not os.path.exists(path):
        sys.exit(f"accuracy: {path}: no such file")
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    r = json.loads(line)
                    rows[int(r["seed"])] = float(r["test_accuracy"])
                except (ValueError, KeyError, TypeError) as e:
                    sys.exit(f"accuracy: {path}:{n}: not a result line ({e})")
                first = first or r
    return rows, first


def cmd_run(a):
    done, first = load(a.out) if os.path.exists(a.out) else ({}, None)
    if first:  # a resumed sweep must be the same experiment
        want = {"impl": a.impl, "model": a.model, "epochs": a.epochs, "extra": " ".join(a.extra)}
        have = {k: first.get(k, "convnet" if k == "model" else None) for k in want}
        if have != want:
            sys.exit(f"accuracy: {a.out} holds another experiment ({have}); want {want}")
    todo = [s for s in a.seeds if s not in done]
    print(f"accuracy: {a.impl}, {a.epochs} epochs, {len(todo)} seeds to run "
          f"({len(a.seeds) - len(todo)} already in {a.out})", file=sys.stderr)
    failed = 0
    with ThreadPoolExecutor(a.jobs) as pool, open(a.out, "a") as out:
        for fut in [pool.submit(run_seed, a, s) for s in todo]:
            try:
                r = fut.result()
            except RuntimeError as e:
                print(f"accuracy: {e}", file=sys.stderr)
                failed += 1
                continue
            out.write(json.dumps(r) + "\n")
            out.flush()
            print(f"accuracy: seed {r['seed']}: {r['test_accuracy']:.2f}%", file=sys.stderr)
    return 1 if failed else 0


def describe(name, v, target):
    return (f"| {name} | {len(v)} | {statistics.mean(v):.2f}% | {statistics.median(v):.2f}% | "
            f"{statistics.stdev(v):.2f} | {100 * sum(x >= target for x in v) / len(v):.0f}% |")


def compare(na, a, nb, b):
    x, y = list(a.values()), list(b.values())
    diff = statistics.mean(x) - statistics.mean(y)
    se = math.sqrt(statistics.variance(x) / len(x) + statistics.variance(y) / len(y))
    wins = sum((p > q) + 0.5 * (p == q) for p in x for q in y)
    n1, n2 = len(x), len(y)
    z = (wins - n1 * n2 / 2) / math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    common = sorted(set(a) & set(b))
    paired = "-"
    if len(common) > 2:
        d = [a[s] - b[s] for s in common]
        paired = f"{statistics.mean(d):+.2f} +- {statistics.stdev(d) / math.sqrt(len(d)):.2f} ({len(d)} seeds)"
    return (f"| {na} - {nb} | {diff:+.2f} ({diff / se:+.1f} se) | {wins / n1 / n2:.2f} ({z:+.1f} se) | "
            f"{paired} |")


def cmd_summary(a):
    sets = {os.path.basename(p): load(p)[0] for p in a.files}
    sets = {k: v for k, v in sets.items() if len(v) > 1}  # sd and se need two seeds
    print(f"| results | seeds | mean | median | sd | >= {a.target:g}% |\n|---|---|---|---|---|---|")
    for name, rows in sets.items():
        print(describe(name, list(rows.values()), a.target))
    names = list(sets)
    if len(names) > 1:
        print("\n| pair | difference of means | P(A > B), rank test | paired by seed |\n|---|---|---|---|")
        for i, na in enumerate(names):
            for nb in names[i + 1:]:
                print(compare(na, sets[na], nb, sets[nb]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train one seed after another, one JSON line per seed")
    r.add_argument("impl", choices=["dtrain", "pytorch", "replay"])
    r.add_argument("--model", choices=sorted(CONFIGS), default="convnet")
    r.add_argument("--data", default=FASHION, help="Fashion-MNIST directory")
    r.add_argument("--epochs", type=int, default=1)
    r.add_argument("--seeds", type=seeds_arg, default=seeds_arg("1-20"), help="FIRST-LAST")
    r.add_argument("--jobs", type=int, default=1, help="seeds at once")
    r.add_argument("--threads", type=int, default=1, help="threads per seed (the result does not "
                   "depend on it beyond float rounding)")
    r.add_argument("--out", required=True)
    s = sub.add_parser("summary", help="tables over result files")
    s.add_argument("--target", type=float, default=90.5)
    s.add_argument("files", nargs="+")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    a.extra = argv[cut + 1:]
    return cmd_run(a) if a.cmd == "run" else cmd_summary(a)


if __name__ == "__main__":
    sys.exit(main())
