"""``FlopLedgerCallback`` and the core's ``FlopLedgerCoreCallback`` across TRL releases: for each TRL release from 1.13 on, a scratch venv with that
TRL beside this environment's torch, transformers, peft, accelerate, datasets and tokenizers (the
package itself installed with ``--no-deps``: its requirements hold TRL to 1.16), where a short GRPO and
RLOO run, with LoRA and with full fine-tuning, must each count FLOPs, and their executed search +
learning FLOPs must be what ``FlopCounterMode`` counts around ``trainer.train()`` to 1e-6. A run
that fails with the callback is run again without it: when TRL fails there too (TRL 1.15.0's fused LM
head needs Triton, which a CPU torch lacks), the release is skipped with TRL's error, else it fails.

Slow (minutes per release, most of it pip): ``pytest -m slow tests/test_trl_releases.py``. The venvs are
cached under ``$TMPDIR/paper-repro-trl-releases`` (or ``$PAPER_REPRO_TRL_VENVS``; one per TRL release and stack), so a second run only
reinstalls the package. torch is installed at this environment's exact build (``2.13.0+cpu`` on the
project machines, a wheel on local disk), so pip never fetches a CUDA torch. Every release is skipped,
with the reason, when the package index cannot be reached; a release the index does not offer is
skipped; one it offers that :data:`RELEASES` lacks fails :func:`test_every_offered_release_is_tested`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

from paper_repro.common.paths import repo_root

pytestmark = pytest.mark.slow

ROOT = repo_root()
FIRST = Version("1.13.0")
RELEASES = ("1.13.0", "1.14.0", "1.14.1", "1.14.2", "1.15.0", "1.16.0")
# installed beside each TRL at this environment's versions
STACK = ("transformers", "peft", "accelerate", "datasets", "tokenizers")
# and, at the index's newest: the package's other requirements (it is installed with --no-deps), and
# requests, which TRL 1.13's GRPOTrainer imports (trl/generation/vllm_client.py) without requiring it
EXTRA = ("numpy", "filelock", "tqdm", "pyyaml", "requests")
CACHE = Path(
    os.environ.get("PAPER_REPRO_TRL_VENVS", Path(tempfile.gettempdir()) / "paper-repro-trl-releases")
)

# The run inside each venv: GRPO and RLOO, LoRA (with the reference as the disabled adapters) and full
# fine-tuning, one generation round in two optimizer steps; one JSON line per run.
RUN = """
import json, traceback, warnings
warnings.filterwarnings("ignore")
import torch
torch.set_num_threads(1)
import trl
from datasets import Dataset
from peft import LoraConfig
from paper_repro.ledger.callback import FlopLedgerCallback
from paper_repro.ledger.core import LedgerConfig
from paper_repro.ledger.trl_core import FlopLedgerCoreCallback
from paper_repro.accounting.profiling import flop_counter
from paper_repro.testbed import build_tokenizer, random_model


def length_reward(completions, **kwargs):
    return [float(len(c)) / 10 for c in completions]


data = Dataset.from_list([{"prompt": f"{i}+{(7 * i) % 1000}="} for i in range(32)])


def trainer(name, lora, callbacks):
    args = getattr(trl, name + "Config")(
        output_dir=f"out-{name}-{lora}", per_device_train_batch_size=8, num_generations=4,
        max_completion_length=8, max_steps=2, steps_per_generation=2, beta=0.05 if lora else 0.0,
        learning_rate=1e-3, report_to="none", save_strategy="no", use_cpu=True, seed=0,
        disable_tqdm=True, logging_steps=100, gradient_checkpointing=False,
    )
    return getattr(trl, name + "Trainer")(
        model=random_model(attn_implementation="eager"), reward_funcs=length_reward, args=args,
        train_dataset=data, processing_class=build_tokenizer(),
        peft_config=LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0) if lora else None,
        callbacks=callbacks,
    )


RUNS = [(n, lora, f) for n in ("GRPO", "RLOO") for lora in (True, False) for f in ("full", "core")]
for name, lora, form in RUNS:
    out = {"trl": trl.__version__, "trainer": name, "lora": lora, "form": form}
    callback = FlopLedgerCallback(LedgerConfig()) if form == "full" else FlopLedgerCoreCallback()
    counter = flop_counter()
    try:
        built = trainer(name, lora, [callback])  # built outside the counter: what train() runs is counted
        with counter:
            built.train()
    except Exception:
        failure = traceback.format_exc(limit=-3)
        try:  # does TRL train this without the callback?
            trainer(name, lora, []).train()
        except Exception as err:
            print(json.dumps({**out, "trl_fails": f"{type(err).__name__}: {err}"}))
            continue
        raise RuntimeError(f"trains without the callback, fails with it: {failure}") from None
    summary = callback.ledger.summary()
    print(json.dumps({
        **out, "measured": counter.get_total_flops(),
        "useful": summary["useful"]["C_total"], "executed": summary["executed"]["C_total"],
        "executed_search_learning": summary["executed"]["C_search"] + summary["executed"]["C_learning"],
        "tokens": summary["tokens"],
    }))
"""


def _pip(python: str, *args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(
        [python, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def offered() -> list[str]:
    """The TRL releases from 1.13 on that the package index offers; every test skips without it."""
    try:
        done = _pip(sys.executable, "index", "versions", "trl", timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("the package index did not answer `pip index versions trl` within 300 s")
    line = next((x for x in done.stdout.splitlines() if x.startswith("Available versions:")), None)
    if done.returncode != 0 or line is None:
        pytest.skip(f"the package index cannot be reached (`pip index versions trl`): {done.stderr[-500:]}")
    versions = [v.strip() for v in line.split(":", 1)[1].split(",")]
    return sorted((v for v in versions if Version(v) >= FIRST and not Version(v).is_prerelease), key=Version)


def test_every_offered_release_is_tested(offered):
    assert set(offered) <= set(RELEASES), (
        f"add to RELEASES: {sorted(set(offered) - set(RELEASES), key=Version)}"
    )


def _stack() -> dict[str, str]:
    return {name: metadata.version(name) for name in ("torch", *STACK)}


def _venv(release: str) -> str:
    """A cached venv with trl==release beside this environment's stack, and :data:`EXTRA`; its python."""
    stack = _stack()
    key = hashlib.sha256(json.dumps([release, stack, sys.version]).encode()).hexdigest()[:10]
    venv = CACHE / f"trl-{release}-{key}"
    python = str(venv / "bin" / "python")
    ready = venv / "ready"
    if ready.exists() and json.loads(ready.read_text()) == {**stack, "extra": list(EXTRA)}:
        return python
    if not ready.exists():
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        # this environment's exact torch build (e.g. 2.13.0+cpu): never a CUDA wheel where it is a CPU one
        done = _pip(python, "install", "--quiet", f"torch=={stack['torch']}")
        if done.returncode != 0:
            pytest.skip(f"pip cannot install torch=={stack['torch']} into a fresh venv: {done.stderr[-800:]}")
    constraints = venv / "constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in stack.items()))
    pins = [f"{n}=={v}" for n, v in stack.items() if n != "torch"]
    done = _pip(python, "install", "--quiet", "-c", str(constraints), f"trl=={release}", *pins, *EXTRA)
    if done.returncode != 0:
        pytest.skip(f"pip cannot install trl=={release} beside {', '.join(pins)}: {done.stderr[-1500:]}")
    ready.write_text(json.dumps({**stack, "extra": list(EXTRA)}))
    return python


def _package_copy(dest: Path) -> Path:
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "paper_repro", dest / "paper_repro", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.mark.parametrize("release", RELEASES)
def test_the_callback_counts_what_the_profiler_counts_under_each_trl_release(tmp_path, offered, release):
    if release not in offered:
        pytest.skip(f"the package index does not offer trl=={release}")
    python = _venv(release)
    done = _pip(
        python, "install", "--quiet", "--no-deps", "--force-reinstall", str(_package_copy(tmp_path / "src"))
    )
    assert done.returncode == 0, done.stderr[-2000:]
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.py").write_text(textwrap.dedent(RUN))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": "", "OMP_NUM_THREADS": "1"}  # fmt: skip
    done = subprocess.run([python, "run.py"], capture_output=True, text=True, cwd=run, env=env, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    # one JSON line per run (Trainer prints its logs as Python dicts, '{' then a single quote)
    results = [json.loads(x) for x in done.stdout.splitlines() if x.startswith('{"')]
    assert [(r["trainer"], r["lora"], r["form"]) for r in results] == [
        (trainer, lora, form)
        for trainer in ("GRPO", "RLOO")
        for lora in (True, False)
        for form in ("full", "core")
    ]
    for r in results:
        assert r["trl"] == release
        if "trl_fails" in r:
            continue
        assert 0 < r["useful"] <= r["executed"], r
        assert r["executed_search_learning"] == pytest.approx(r["measured"], rel=1e-6), r
    failing = {
        f"{r['trainer']}{' LoRA' if r['lora'] else ''} ({r['form']})": r["trl_fails"]
        for r in results
        if "trl_fails" in r
    }
    if failing:
        pytest.skip(f"trl=={release} cannot train here without the callback either: {failing}")
