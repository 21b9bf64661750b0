"""Building the testbed (notebook 00's :func:`build_all`): the splits, the tokenizer, the policies,
the PRM, and the tables of what was built (``base_models.csv``, ``prm_error_profile.csv``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from paper_repro.common.paths import repo_root
from paper_repro.common.quiet import quiet_libraries
from paper_repro.tasks import arith
from paper_repro.testbed.evaluation import evaluate_base
from paper_repro.testbed.networks import non_embedding_params
from paper_repro.testbed.prm_profile import load_prm, prm_error_profile, prm_summary
from paper_repro.testbed.specs import (
    POLICIES,
    PRM,
    PRM_DATA_SEED,
    PRM_ERROR_RATE,
    BuildConfig,
    ModelSpec,
    models_dir,
    policy_dir,
    repo_path,
)
from paper_repro.testbed.tokenizer import build_tokenizer
from paper_repro.testbed.training import pretrain_policy, prm_training_records, train_prm

if TYPE_CHECKING:
    import pandas as pd


def results_table(config: BuildConfig) -> Path:
    """Where the build writes ``base_models.csv`` (``prm_error_profile.csv`` goes beside it)."""
    return (
        Path(config.results_csv)
        if config.results_csv
        else repo_root() / "data/results/cpu-tiny/base_models.csv"
    )


def write_error_profile(profile: pd.DataFrame, config: BuildConfig) -> Path:
    """``prm_error_profile.csv`` beside ``base_models.csv``, written atomically."""
    out = results_table(config).with_name("prm_error_profile.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".csv.tmp")
    profile.to_csv(tmp, index=False)
    tmp.replace(out)
    return out


def build_all(config: BuildConfig = BuildConfig()):
    """Regenerate the testbed: splits, tokenizer, policies S/M/L, the PRM, and the base-model table.

    A partial build (``sizes`` a subset, or ``prm=False``) rebuilds only those models: their rows
    replace the same models' rows in an existing table, whose other rows (with their own provenance)
    are kept. Returns the table (one row per model) that is also written to ``config.results_csv``.
    """
    quiet_libraries()  # before transformers is imported: importing it warns in a kernel without widgets
    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro.common import provenance

    root = models_dir(config.models_dir)
    root.mkdir(parents=True, exist_ok=True)
    splits = arith.build_splits(config.error_rate, PRM_ERROR_RATE)
    arith.write_splits(config.tasks_dir, config.error_rate, PRM_ERROR_RATE, splits=splits)
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(root / "tokenizer")
    rows = []
    for size in config.sizes:
        spec, out_dir = POLICIES[size], policy_dir(size, root)
        record = pretrain_policy(
            spec, tokenizer, out_dir, splits["pretrain"], seed=config.seed, steps=config.steps(spec)
        )
        model = AutoModelForCausalLM.from_pretrained(out_dir)
        loaded = AutoTokenizer.from_pretrained(out_dir)
        metrics = evaluate_base(
            model, loaded, config.pass_k, config.eval_limit, config.seed, config.tasks_dir
        )
        rows.append(_row(size, "policy", spec, record, model, metrics))
    if config.prm:
        # the splits as first shipped: the committed PRM was trained on this stream, before the
        # held-out and gsm sets grew to 900 (nested); the grown sets' appended rows avoid every split
        # but not this stream (306 of their 1200 prompts are in it, 271 of them 2-step prompts: too
        # few 2-step prompts are left outside it), so that a rebuild trains the committed PRM again
        exclude = arith.first_pass_prompts(splits)
        training = prm_training_records(
            PRM.batch_size * config.steps(PRM), exclude, PRM_DATA_SEED + config.seed
        )
        record = train_prm(
            PRM, tokenizer, root / PRM.name, training, seed=config.seed, steps=config.steps(PRM)
        )
        prm = load_prm(root / PRM.name)
        profile = prm_error_profile(prm, splits["prm"], root, config)
        write_error_profile(profile, config)
        rows.append(_row("PRM", "prm", PRM, record, prm.model, prm_summary(profile)))
    table = pd.DataFrame(rows)
    stamp = provenance.stamp()
    for key, value in stamp.items():
        table[key] = value
    out = results_table(config)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():  # keep the rows of the models this build did not make, in the table's order
        kept = pd.read_csv(out)
        kept = kept[~kept["model"].isin(table["model"])]
        order = {m: i for i, m in enumerate([*POLICIES, "PRM"])}
        table = pd.concat([kept, table], ignore_index=True)
        table = table.sort_values("model", key=lambda col: col.map(order), kind="stable", ignore_index=True)
    tmp = out.with_suffix(".csv.tmp")
    table.to_csv(tmp, index=False)
    tmp.replace(out)
    return table


def _row(label: str, role: str, spec: ModelSpec, record: dict, model, metrics: dict) -> dict:
    return {
        "model": label,
        "role": role,
        "path": repo_path(spec),
        "hidden": spec.hidden,
        "layers": spec.layers,
        "params": sum(p.numel() for p in model.parameters()),
        "non_embedding_params": non_embedding_params(model),
        "train_steps": record["steps"],
        "batch_size": spec.batch_size,
        "train_seconds": round(record["train_seconds"], 1),
        "final_loss": record["final_loss"],
        **metrics,
    }
