"""bench/workloads/done_when.py: a trace meets the replay goal only when both lags keep
reserved / live at most 1.02 (a block of one and a half pages does not), and the count
says so."""
import gzip
import subprocess
import sys

import bench_scripts

SCRIPT = bench_scripts.path("done_when")


def write_loop(path, size, steps=6):
    lines = ["# warmup_steps: 2"]
    for k in range(steps):
        lines += ["s", "a,%d,%d,0" % (k, size), "f,%d" % k]
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def test_whole_pages_meet_and_a_partial_page_does_not(tmp_path, memkit_cli):
    pages, partial = tmp_path / "pages.csv.gz", tmp_path / "partial.csv.gz"
    write_loop(pages, 4 << 20)
    write_loop(partial, 3 << 20)
    r = subprocess.run([sys.executable, SCRIPT, str(memkit_cli), "--jobs", "2", "--traces",
                        str(pages), str(partial)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {line.split("|")[1].strip(): line for line in r.stdout.splitlines()
            if line.startswith("| p")}
    assert rows["pages"].rstrip(" |").endswith("yes"), r.stdout
    assert "1.333" in rows["partial"] and rows["partial"].rstrip(" |").endswith("no"), r.stdout
    assert "1 of 2 traces meet the goal" in r.stdout


def test_device_calls_are_summed_and_grow_when_pages_are_made_again(tmp_path, memkit_cli):
    trace = tmp_path / "pages.csv.gz"
    write_loop(trace, 4 << 20)

    def device_ms(*flags):
        r = subprocess.run([sys.executable, SCRIPT, str(memkit_cli), "--jobs", "2", "--traces",
                            str(trace), "--", *flags], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        summary = r.stdout.strip().splitlines()[-1]
        return float(summary.split("device calls ")[1].split(" ms")[0])

    # A settled loop makes no page call after its warm-up; emptied every step, it makes
    # its two pages again each step, at both lags.
    assert device_ms() == 0.0
    assert device_ms("--empty-cache-each-step") > 0.0
