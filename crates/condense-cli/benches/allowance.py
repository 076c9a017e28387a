#!/usr/bin/env python3
"""What the cache-aware policy's allowance (`economy.maxExcess`) buys, per
price terms: docs/economy.md, "The allowance, against the price terms".

Usage: python3 crates/condense-cli/benches/allowance.py [--max-excess X,Y,...] [--profile P,...] [--summarizer-price S,...] [--work DIR]
(after `cargo build --release -p condense-cli`; `../shared/fixtures` beside
the repository). Writes the generated corpora of docs/economy.md into DIR
(a temporary directory by default): "the 41" (short, idle gaps), "the 60"
(idle gaps before 30% of prompts) and "no gaps" (the first 100 of "the
1,000", 20k to 200k tokens with no idle gap), and links "the 3" (the
pi-condense fixture and both pi-mono sessions). For every profile, price
and allowance it runs
`condense simulate CORPUS --json --jobs 2 --profile P --summarizer-price S --policy none,reference,settings --settings F`,
F holding `{"contextPrune": {"enabled": true, "economy": {"policy": "cache-aware", "maxExcess": X, "profile": P, "summarizerPrice": S}}}`
(the engine planning at the terms it is billed at, as the built-in
default does), and prints two markdown tables of total units (prompts,
outputs and the summarizer: `total_units`):

1. at the default allowance (`--table 0.02`), per terms and for each
   corpus: the policy and `reference` against `none` in total, and the
   policy's worst session against `none`;
2. the trade-off: per allowance and profile, over the corpora and
   summarizer prices, how many cells the policy bills above `reference`
   in total, and its worst session against `none`;
3. the trade-off curve: per allowance and profile, with the summarizer at
   the model's price, the policy's total against `none` on "the 3" and on
   all four corpora together, with `reference`'s in the last row.

Results are kept in DIR/results.json, so a second run with the same DIR
prints again without simulating.
"""
import argparse, json, os, subprocess, sys, tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
CONDENSE = os.path.join(ROOT, "target/release/condense")
FIXTURES = os.path.abspath(os.path.join(ROOT, "../shared/fixtures"))


def condense(*args):
    out = subprocess.run([CONDENSE, *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"condense {' '.join(args)}: {out.stderr}")
    return out.stdout


def generate(work):
    """The corpora, generated as docs/economy.md's commands generate them."""
    corpora = {}
    the3 = os.path.join(work, "the-3")
    if not os.path.isdir(the3):
        os.makedirs(the3)
        os.symlink(os.path.join(FIXTURES, "pi-condense-2.9.1/session.jsonl"), os.path.join(the3, "pi-condense.jsonl"))
        for name in ("before-compaction.jsonl", "large-session.jsonl"):
            os.symlink(os.path.join(FIXTURES, "pi-mono", name), os.path.join(the3, name))
    corpora["the 3"] = the3

    def make(name, sessions):
        d = os.path.join(work, name)
        if not os.path.isdir(d):
            os.makedirs(d)
            for file, args in sessions:
                condense("gen", *args, "-o", os.path.join(d, file))
        corpora[name] = d

    shapes41 = ["realistic", "tasks", "tool-turns", "realistic"]
    s41 = []
    for s in range(1, 41):
        sh, tok, g = shapes41[s % 4], (s * 7919 % 11) * 5000 + 10000, (s % 3) * 20
        s41.append((f"s{s}.jsonl", ["--tokens", str(tok), "--shape", sh, "--seed", str(s + 8800), "--idle-gaps", str(g)]))
    s41.append(("s8888.jsonl", ["--tokens", "15000", "--shape", "tasks", "--seed", "8888"]))
    make("the 41", s41)
    shapes60 = ["realistic", "realistic", "tasks", "tool-turns"]
    make("the 60", [(f"g{s}.jsonl", ["--tokens", str((s * 7919 % 38) * 10000 + 20000), "--shape", shapes60[s % 4],
                                      "--seed", str(s), "--idle-gaps", "30"]) for s in range(1, 61)])
    make("no gaps", [(f"s{i}.jsonl", ["--tokens", str(20000 + (i * 7919) % 180000), "--seed", str(i)]) for i in range(1, 101)])
    return corpora


def simulate(corpus, profile, price, excess, work):
    settings = os.path.join(work, f"settings-{profile}-{price}-{excess}.json")
    with open(settings, "w") as f:
        json.dump({"contextPrune": {"enabled": True, "economy": {
            "policy": "cache-aware", "maxExcess": None if excess == "null" else float(excess),
            "profile": profile, "summarizerPrice": float(price)}}}, f)
    v = json.loads(condense("simulate", corpus, "--json", "--jobs", "2", "--profile", profile,
                            "--summarizer-price", price, "--policy", "none,reference,settings", "--settings", settings))
    total = lambda s, p: s["policies"][p]["total_units"]
    sessions = v["sessions"]
    none = sum(total(s, "none") for s in sessions)
    return {
        "none": none,
        "reference": sum(total(s, "reference") for s in sessions),
        "policy": sum(total(s, "settings") for s in sessions),
        "worst": max(total(s, "settings") / total(s, "none") - 1 for s in sessions),
        "over2": sum(total(s, "settings") > 1.02 * total(s, "none") for s in sessions),
    }


def pct(x):
    return f"{100 * x:+.1f}%".replace("-", "\u2212")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-excess", default="0,0.02,0.05,0.1,0.2")
    ap.add_argument("--profile", default="anthropic-5m,anthropic-1h,openai")
    ap.add_argument("--summarizer-price", default="1,3,5")
    ap.add_argument("--table", default="0.02")
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="condense-allowance-")
    os.makedirs(work, exist_ok=True)
    corpora = generate(work)
    excesses = a.max_excess.split(",")
    cache_file = os.path.join(work, "results.json")
    cache = json.load(open(cache_file)) if os.path.exists(cache_file) else {}
    rows = {}
    profiles, prices = a.profile.split(","), a.summarizer_price.split(",")
    for profile in profiles:
        for price in prices:
            for x in excesses:
                r = {}
                for c, d in corpora.items():
                    key = f"{c}|{profile}|{price}|{x}"
                    if key not in cache:
                        cache[key] = simulate(d, profile, price, x, work)
                        json.dump(cache, open(cache_file, "w"))
                    r[c] = cache[key]
                rows[(profile, price, x)] = r
    names = list(corpora)
    print("| terms | summarizer | " + " | ".join(f"{c}" for c in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for (profile, price, x), r in rows.items():
        if x != a.table:
            continue
        cells = []
        for c in names:
            m = r[c]
            mark = "**" if m["policy"] <= m["reference"] else ""
            cells.append(f"{mark}{pct(m['policy'] / m['none'] - 1)}{mark} / {pct(m['reference'] / m['none'] - 1)} ({pct(m['worst'])})")
        print(f"| `{profile}` | {price}x | " + " | ".join(cells) + " |")
    print()
    print("| `maxExcess` | " + " | ".join(f"`{p}`" for p in profiles) + " | sessions over 2% above `none` |")
    print("|---|" + "---|" * len(profiles) + "---|")
    for x in excesses:
        cells, over2 = [], 0
        for p in profiles:
            ms = [m for (pp, s, xx), r in rows.items() if xx == x and pp == p for m in r.values()]
            above = sum(m["policy"] > m["reference"] for m in ms)
            over2 += sum(m["over2"] for m in ms)
            cells.append(f"{above} of {len(ms)}, {pct(max(m['worst'] for m in ms))}")
        print(f"| {x} | " + " | ".join(cells) + f" | {over2} |")
    print()
    price = prices[0]
    print(f"| `maxExcess` ({price}x) | " + " | ".join(f"`{p}`: the 3 / all" for p in profiles) + " |")
    print("|---|" + "---|" * len(profiles))

    def pooled(x, p, key):
        ms = rows[(p, price, x)]
        return (ms["the 3"][key] / ms["the 3"]["none"] - 1,
                sum(m[key] for m in ms.values()) / sum(m["none"] for m in ms.values()) - 1)

    for x in excesses:
        print(f"| {x} | " + " | ".join("{} / {}".format(*map(pct, pooled(x, p, "policy"))) for p in profiles) + " |")
    print("| `reference` | " + " | ".join("{} / {}".format(*map(pct, pooled(excesses[0], p, "reference")))
                                          for p in profiles) + " |")

if __name__ == "__main__":
    main()
