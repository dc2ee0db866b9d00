#!/usr/bin/python3
"""dtrain against its references, side by side, in BENCHMARKS.md's table format.

Runs, on this machine and in one go:
  training   `dtrain bench CONFIG --grid ... --json` and bench/torch_ref.py (PyTorch, DDP over
             Gloo) for the same models, instances x threads and batch semantics;
  all-reduce `dtrain bench allreduce` (shm and tcp), Open MPI's MPI_Allreduce
             (bench/allreduce_mpi.c under mpirun, shared-memory and tcp transports) and Gloo
             (bench/torch_ref.py allreduce), for the same rank count;
then prints Markdown tables with the ratios (dtrain / reference; above 1 means dtrain is
faster) to stdout, and to --out FILE when given.

--precision fp32,bf16 runs the training part once per precision: dtrain with
`--precision P` (train.precision) against torch_ref.py `--precision P`, whose bf16 is
torch.autocast('cpu', dtype=torch.bfloat16). Each row names its precision and has the
dtrain / PyTorch ratio of that precision; with both precisions, the bf16 rows add dtrain's and
PyTorch's own bf16 / fp32 ratios. The default, fp32 alone, prints the tables without the
precision column, as before.

    /usr/bin/python3 bench/compare.py                      # full: 1 epoch per combination
    /usr/bin/python3 bench/compare.py --tiny               # seconds: small data, few steps
    /usr/bin/python3 bench/compare.py --models resnet20,convnet --grid 1x1,1x2,2x1 --steps 100 \
        --repeat 3 --precision fp32,bf16 --cifar-dir /tmp/cifar-full --no-allreduce
                                  # bf16 against PyTorch autocast (BENCHMARKS.md, issue 30)

--cifar-dir DIR is a directory holding cifar-10-binary.tar.gz (`dtrain fetch cifar10`, or
tests/fixtures/mkdata.py cifar10 DIR --train 50000 --test 10000); without it, and with --tiny,
dtrain reads a generated fixture. torch_ref.py trains on random CIFAR-shaped tensors either way:
a step's speed does not depend on the pixels.

Needs Debian's python3-torch (torch_ref.py) and openmpi-bin (mpicc, mpirun) only here; a side
that cannot run is reported as "-" with the reason on stderr, and the rest goes on. Compare
figures on a quiet machine: the ratios are what carries over, not the absolute numbers.
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
FASHION = "/usr/share/datasets/fashion-mnist"
MODELS = {  # name: (dtrain config, data kind)
    "convnet": ("configs/fashion-convnet.cfg", "fashion"),
    "cnn": ("configs/cifar10-cnn.cfg", "cifar"),
    "fashion-resnet": ("configs/fashion-resnet.cfg", "fashion"),
    "resnet20": ("configs/cifar10-resnet20.cfg", "cifar"),
}


def log(msg):
    print(f"compare: {msg}", file=sys.stderr, flush=True)


def run_json(cmd, timeout, what):
    """Runs cmd, returns the JSON objects it printed (one per line), or None on failure."""
    log(" ".join(cmd))
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        log(f"{what}: {e}")
        return None
    objs = []
    for line in p.stdout.splitlines():
        try:
            objs.append(json.loads(line))
        except ValueError:
            pass
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["no message"])[-1]
        log(f"{what}: exit {p.returncode}: {tail}")
        if not objs:
            return None
    return objs


def fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def pct(v):
    return f"{100 * v:.2f}%" if v is not None else "-"


# ---- data ----

def prepare_data(args, tmp):
    dirs = {"fashion": args.fashion_dir, "cifar": args.cifar_dir}
    if args.tiny or not os.path.exists(os.path.join(args.fashion_dir, "train-images-idx3-ubyte.gz")):
        dirs["fashion"] = os.path.join(tmp, "fashion")
        subprocess.run([PY, "tests/fixtures/mkdata.py", "idx", dirs["fashion"], "--train",
                        str(args.fixture_samples), "--test", "100"], cwd=ROOT, check=True)
        log(f"Fashion-MNIST-format fixture of {args.fixture_samples} samples in {dirs['fashion']}")
    if not dirs["cifar"]:
        # The speed of a step does not depend on the pixels; torch_ref.py uses random data too.
        dirs["cifar"] = os.path.join(tmp, "cifar")
        subprocess.run([PY, "tests/fixtures/mkdata.py", "cifar10", dirs["cifar"], "--train",
                        str(args.fixture_samples), "--test", "100"], cwd=ROOT, check=True)
        log(f"CIFAR-10-format fixture of {args.fixture_samples} samples in {dirs['cifar']}")
    return dirs


# ---- training ----

def dtrain_training(args, model, grid, data_dir, precision):
    """One run of each combination in one precision: {(instances, threads): bench_row}."""
    cfg, _ = MODELS[model]
    cmd = [args.dtrain, "bench", cfg, "--grid", ",".join(f"{i}x{t}" for i, t in grid),
           "--json", "--quiet", "--set", f"data.dir={data_dir}", "--precision", precision]
    # torch_ref.py times every step, so dtrain does too (--warmup 0): the same measurement.
    cmd += ["--steps", str(args.steps), "--warmup", "0"] if args.steps else ["--epochs", "1"]
    for kv in args.dtrain_set:  # e.g. train.bf16_winograd=true
        cmd += ["--set", kv]
    rows = run_json(cmd, args.timeout * len(grid), f"dtrain {model} {precision}") or []
    return {(r["instances"], r["threads"]): r for r in rows if r.get("event") == "bench_row"}


def torch_training(args, model, procs, threads, data_dir, precision):
    """One run of one combination in one precision: torch_ref.py's final object, or None."""
    cmd = [PY, "bench/torch_ref.py", model, "--procs", str(procs), "--threads", str(threads),
           "--epochs", "1", "--steps", str(args.steps), "--precision", precision]
    if MODELS[model][1] == "fashion":
        cmd += ["--data", data_dir]
    if not args.steps:
        cmd.append("--eval")
    if procs > 1:
        cmd.append("--pin")
    objs = run_json(cmd, args.timeout, f"torch {model} {procs}x{threads} {precision}")
    finals = [o for o in objs or [] if o.get("event") == "final"]
    return finals[-1] if finals else None


def median_run(runs):
    """The run with the median samples/s (the lower middle of an even count), or None."""
    runs = sorted(runs, key=lambda o: o["samples_per_s"])
    return runs[(len(runs) - 1) // 2] if runs else None


def training_tables(args, grid, dirs):
    out = []
    by_precision = args.precision != ["fp32"]  # the default prints the tables as before
    both = {"fp32", "bf16"} <= set(args.precision)
    for model in args.models:
        data = dirs[MODELS[model][1]]
        # --repeat rounds, each every precision's dtrain grid then PyTorch's combinations, so
        # that a drift in the machine's speed over the run (17 % between two sittings 40
        # minutes apart on a cloud VM) reaches both sides and both precisions alike; the
        # median run of each side is reported
        ours, theirs, failed = {}, {}, {}
        for _ in range(args.repeat):
            for prec in args.precision:
                for (i, t), row in dtrain_training(args, model, grid, data, prec).items():
                    if row.get("ok"):
                        ours.setdefault((prec, i, t), []).append(row)
                    else:
                        failed[(prec, i, t)] = row
                for i, t in grid if not args.skip_torch else []:
                    p = torch_training(args, model, i, t, data, prec)
                    if p:
                        theirs.setdefault((prec, i, t), []).append(p)
        rounds = f", median of {args.repeat} alternated rounds" if args.repeat > 1 else ""
        out.append(f"### {model} ({MODELS[model][0]}), "
                   + (f"{args.steps} steps" if args.steps else "1 epoch") + " per combination"
                   + rounds + "\n")
        if "bf16" in args.precision:
            out.append("bf16: dtrain `--precision bf16` (train.precision) against PyTorch with "
                       "forward and loss under `torch.autocast('cpu', dtype=torch.bfloat16)`; "
                       "ratio = dtrain / PyTorch in the row's precision"
                       + ("; bf16 / fp32 = each side's bf16 samples/s over its fp32 ones" if both
                          else "") + ".\n")
        cols = (["instances x threads"] + (["precision"] if by_precision else [])
                + ["dtrain samples/s", "PyTorch samples/s", "ratio", "dtrain test acc",
                   "PyTorch test acc"]
                + (["dtrain bf16 / fp32", "PyTorch bf16 / fp32"] if both else []))
        out.append("| " + " | ".join(cols) + " |")
        out.append("|---" * len(cols) + "|")
        for i, t in grid:
            rows = {}  # precision: (dtrain row or failure, PyTorch row)
            for prec in args.precision:
                key = (prec, i, t)
                runs = [[round(r["samples_per_s"]) for r in side.get(key, [])]
                        for side in (ours, theirs)]
                log(f"{model} {i}x{t} {prec} samples/s per round: dtrain {runs[0]}, "
                    f"PyTorch {runs[1]}")
                rows[prec] = (median_run(ours.get(key, [])) or failed.get(key),
                              median_run(theirs.get(key, [])))
            speed = {prec: (d["samples_per_s"] if d and d.get("ok") else None,
                            p["samples_per_s"] if p else None) for prec, (d, p) in rows.items()}
            for prec in args.precision:
                d, p = rows[prec]
                ds, ps = speed[prec]
                dacc = d.get("test_accuracy") if d and d.get("ok") else None
                pacc = p.get("test_accuracy") if p else None
                note = f" (dtrain: {d['error']})" if d and not d.get("ok") else ""
                cells = ([f"{i} x {t}{note}"] + ([prec] if by_precision else [])
                         + [fmt(ds), fmt(ps), ratio(ds, ps), pct(dacc), pct(pacc)])
                if both:
                    cells += ([ratio(ds, speed["fp32"][0]), ratio(ps, speed["fp32"][1])]
                              if prec == "bf16" else ["", ""])
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return out


# ---- all-reduce ----

def dtrain_allreduce(args, backend):
    cmd = [args.dtrain, "bench", "allreduce", "--backend", backend, "--instances",
           str(args.ranks), "--min-bytes", "1K", "--max-bytes", str(args.max_bytes), "--json",
           "--quiet"]
    rows = run_json(cmd, args.timeout, f"dtrain allreduce {backend}") or []
    return {r["bytes"]: r for r in rows if r.get("event") == "allreduce_row" and r.get("ok")}


def mpi_allreduce(args, tmp, btl):
    exe = os.path.join(tmp, "allreduce_mpi")
    if not os.path.exists(exe):
        if not shutil.which("mpicc"):
            log("Open MPI: mpicc not found (apt-get install openmpi-bin libopenmpi-dev)")
            return {}
        r = subprocess.run(["mpicc", "-O2", "-o", exe, "bench/allreduce_mpi.c"], cwd=ROOT,
                           capture_output=True, text=True)
        if r.returncode:
            log(f"Open MPI: mpicc failed: {r.stderr.strip()[-300:]}")
            return {}
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.ranks),
           "--mca", "btl", btl, exe, str(args.max_bytes)]
    log(" ".join(cmd))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        log(f"Open MPI {btl}: {e}")
        return {}
    rows = {}
    for line in p.stdout.splitlines():  # "   1024      3.9 us    0.52 GB/s"
        m = re.match(r"\s*(\d+)\s+([\d.]+) (us|ms)\s+([\d.]+) GB/s", line)
        if m:
            us = float(m.group(2)) * (1000 if m.group(3) == "ms" else 1)
            rows[int(m.group(1))] = {"us": us, "busbw_GBs": float(m.group(4))}
    if not rows:
        log(f"Open MPI {btl}: no results (exit {p.returncode}): {p.stderr.strip()[-300:]}")
    return rows


def gloo_allreduce(args):
    cmd = [PY, "bench/torch_ref.py", "allreduce", "--procs", str(args.ranks), "--max-bytes",
           str(args.max_bytes)]
    rows = run_json(cmd, args.timeout, "gloo allreduce") or []
    return {r["bytes"]: r for r in rows if r.get("event") == "allreduce"}


def cell(r):
    if not r:
        return "-"
    us = r["us"]
    t = f"{us:.1f} us" if us < 1000 else f"{us / 1000:.2f} ms"
    return f"{t}, {r['busbw_GBs']:.2f} GB/s"


def allreduce_table(args, tmp):
    sides = {"dtrain shm": dtrain_allreduce(args, "shm"),
             "dtrain tcp": dtrain_allreduce(args, "tcp")}
    if not args.skip_mpi:
        sides["Open MPI shm"] = mpi_allreduce(args, tmp, "vader,self")
        sides["Open MPI tcp"] = mpi_allreduce(args, tmp, "tcp,self")
    if not args.skip_torch:
        sides["Gloo"] = gloo_allreduce(args)
    sizes = sorted(set().union(*[set(s) for s in sides.values()]))
    names = list(sides)
    refs = [n for n in names if not n.startswith("dtrain")]
    base = "dtrain shm" if sides["dtrain shm"] else "dtrain tcp"
    out = [f"### all-reduce, float32 sum, {args.ranks} ranks (busbw = bytes/time x 2(n-1)/n; "
           f"ratio = reference time / {base} time, above 1: dtrain is faster)\n"]
    out.append("| bytes | " + " | ".join(names) + "".join(f" | {base[7:]} vs {r}" for r in refs)
               + " |")
    out.append("|---" * (1 + len(names) + len(refs)) + "|")
    for b in sizes:
        ours = sides[base].get(b)
        row = [str(b)] + [cell(sides[n].get(b)) for n in names]
        for r in refs:
            ref = sides[r].get(b)
            row.append(f"{ref['us'] / ours['us']:.2f}x" if ours and ref else "-")
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    return out


def parse_grid(s):
    return [tuple(int(x) for x in c.lower().split("x")) for c in s.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtrain", default="./dtrain")
    ap.add_argument("--models", default="convnet,cnn")
    ap.add_argument("--grid", help="instances x threads list (default: 1xC,...,Cx1)")
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--steps", type=int, default=0, help="steps per combination (0 = an epoch)")
    ap.add_argument("--precision", default="fp32",
                    help="training precisions, e.g. fp32,bf16 (bf16: PyTorch under autocast)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of both sides, alternated; medians are reported")
    ap.add_argument("--ranks", type=int, default=2, help="all-reduce ranks")
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--dtrain-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a --set for every dtrain run (repeatable), e.g. train.bf16_winograd=true")
    ap.add_argument("--fashion-dir", default=FASHION)
    ap.add_argument("--cifar-dir", help="CIFAR-10 binary archive dir (default: a fixture)")
    ap.add_argument("--fixture-samples", type=int, default=2000)
    ap.add_argument("--tiny", action="store_true",
                    help="a check that everything runs: fixtures, 3 steps, sizes up to 64 KiB")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--skip-mpi", action="store_true")
    ap.add_argument("--no-training", action="store_true")
    ap.add_argument("--no-allreduce", action="store_true")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per reference run")
    ap.add_argument("--out", help="also write the tables to this file")
    args = ap.parse_args()
    if args.tiny:
        args.steps = args.steps or 3
        args.max_bytes = min(args.max_bytes, 64 << 10)
        args.fixture_samples = min(args.fixture_samples, 512)
    args.models = [m for m in args.models.split(",") if m]
    args.precision = list(dict.fromkeys(p for p in args.precision.split(",") if p))
    for p in args.precision or [""]:
        if p not in ("fp32", "bf16"):
            ap.error(f"--precision: unknown precision {p!r} (known: fp32, bf16)")
    for m in args.models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r} (known: {', '.join(MODELS)})")
    grid = parse_grid(args.grid) if args.grid else \
        [(i, args.cores // i) for i in range(1, args.cores + 1) if args.cores % i == 0]
    if not os.path.exists(os.path.join(ROOT, args.dtrain)) and not shutil.which(args.dtrain):
        ap.error(f"{args.dtrain}: not found (run `make` first)")
    args.dtrain = os.path.abspath(os.path.join(ROOT, args.dtrain))

    lines = ["## dtrain vs references (bench/compare.py)\n"]
    machine = run_json([args.dtrain, "bench", "allreduce", "--backend", "tcp", "--instances",
                        "2", "--min-bytes", "4", "--max-bytes", "4", "--iters", "1", "--json",
                        "--quiet"], 120, "machine header") or []
    for m in machine[:1]:
        lines.append(f"Machine: {m['cpu']}, {m['sockets']} socket(s), {m['cores']} cores, "
                     f"SMT {'on' if m['smt'] > 1 else 'off'}; dtrain {m['dtrain']}; {m['blas']} "
                     f"({m['blas_threading']}).\n")
    with tempfile.TemporaryDirectory(prefix="dtrain-compare-") as tmp:
        if not args.no_training:
            lines += training_tables(args, grid, prepare_data(args, tmp))
        if not args.no_allreduce:
            lines += allreduce_table(args, tmp)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
