"""The compute card can be compared and cited: hardware by name, MFU only against a datasheet peak
(a CPU's matmul measured beside the run, as a measurement), C_learning's parts, the model's name and
how the run executed: the compute dtype of each phase as measured, each phase's FLOPs over its own
dtype's peak (one owner of peaks: paper_repro.accounting.devices.resolve_peak), provenance, no NaN. One short
real run on CPU; a GPU's card on a mocked CUDA device."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from paper_repro.accounting import devices
from paper_repro.accounting.flops import CONVENTIONS
from paper_repro.ledger import LedgerConfig
from paper_repro.ledger.card import (
    MATMUL_REPEATS,
    UTILISATION_METRIC_NAMES,
    card_markdown,
    compute_card,
    cpu_matmul_throughput,
    dataset_provenance,
    model_revision,
    utilisation_metrics,
)
from paper_repro.ledger.probes import DtypeProbes, install_dtype_probes
from tests.test_ledger import build_tiny_grpo

CPU_NAME = "Intel(R) Xeon(R) Platinum 8480+"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A short real run that makes every part of C_learning: beta != 0 (reference forwards, adapters
    disabled), mu = 2 (old-policy forwards), K = 2 of G = 4; its card written at the end of training
    while /proc/cpuinfo names a Xeon."""
    tmp = tmp_path_factory.mktemp("card")
    cpuinfo = tmp / "cpuinfo"
    cpuinfo.write_text(
        f"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: {CPU_NAME}\nflags\t\t: fpu\n"
    )
    ledger = LedgerConfig(kept=2, log_path=tmp / "run.jsonl", card_path=tmp / "run.card")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(devices, "CPUINFO", cpuinfo)
        # GRPOConfig's default bf16=True: accelerate's bf16 autocast, on CPU too
        trainer = build_tiny_grpo(tmp, ledger, max_steps=4, beta=0.05, num_iterations=2)
        install_dtype_probes(trainer)  # as LedgerGRPOTrainer.__init__ does (installing again replaces them)
        trainer.train()
    card = json.loads((tmp / "run.card.json").read_text())
    steps = [json.loads(x) for x in (tmp / "run.jsonl").read_text().splitlines()]
    return trainer, card, (tmp / "run.card.md").read_text(), steps


def test_cpu_model_comes_from_cpuinfo(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nmodel name\t:   AMD EPYC 9654   96-Core Processor\n")
    monkeypatch.setattr(devices, "CPUINFO", info)
    assert devices.cpu_model() == "AMD EPYC 9654 96-Core Processor"
    monkeypatch.setattr(devices, "CPUINFO", tmp_path / "absent")  # elsewhere: platform's names
    assert devices.cpu_model() == (devices.platform.processor() or devices.platform.machine())


def test_matmul_throughput_is_the_median_of_its_repeats(monkeypatch):
    """Timed on a clock that makes the repeats take 1, 2, ..., 5 units: the median, not the best."""
    ticks = iter([0, 1, 10, 12, 20, 23, 30, 34, 40, 45])
    monkeypatch.setattr(devices.time, "perf_counter", lambda: next(ticks))
    m = devices.matmul_throughput(n=8, repeats=5, warmup=0)
    assert m["flops_per_s"] == 2 * 8**3 / 3 and m["max_flops_per_s"] == 2 * 8**3 / 1
    assert (m["statistic"], m["repeats"], m["n"], m["dtype"]) == ("median", 5, 8, "float32")


def test_cpu_card_names_the_hardware_and_states_no_mfu_without_a_datasheet_peak(run):
    _, card, md, _ = run
    hw, device = card["hardware"], card["device"]
    assert hw["cpu"]["model"] == device["name"] == CPU_NAME
    assert hw["cpu"]["torch_threads"] == torch.get_num_threads() and hw["cpu"]["logical_cpus"] >= 1
    assert hw["gpu"] is None and hw["processes"] == 1
    # no datasheet peak for a CPU: MFU and HFU are null, with the reason
    assert device["peak_flops_per_s"] is None and device["peak_source"] is None
    assert set(card["mfu"].values()) == set(card["hfu"].values()) == {None}
    assert "peak_flops" in card["mfu_missing"] and card["mfu_missing"] == device["peak_missing"]
    # the matmul measured once in the process, before training, shown beside as a median
    measured = card["measured_matmul"]
    assert measured["label"] == f"measured fp32 matmul throughput (median of {MATMUL_REPEATS})"
    assert (
        measured["statistic"] == "median" and measured["repeats"] == MATMUL_REPEATS and measured["n"] == 1024
    )
    assert measured["min_flops_per_s"] <= measured["flops_per_s"] <= measured["max_flops_per_s"]
    assert measured["flops_per_s"] == cpu_matmul_throughput()["flops_per_s"]  # cached: once per process
    assert cpu_matmul_throughput() is cpu_matmul_throughput()
    assert card["achieved_useful_flops_per_s"]["total"] == pytest.approx(
        card["flops"]["useful"]["C_total"] / card["seconds"]["total"]
    )
    assert CPU_NAME in md and measured["label"] in md and "utilisation of peak" not in md
    assert "MFU and HFU are not stated" in md


def test_a_user_peak_states_mfu_on_cpu(run, monkeypatch):
    trainer, *_ = run
    monkeypatch.setattr(trainer.ledger, "config", replace(trainer.ledger.config, peak_flops=1e12))
    card = compute_card(trainer)
    assert card["device"]["peak_source"] == "LedgerConfig.peak_flops" and card["mfu_missing"] is None
    secs = card["seconds"]["total"]
    assert card["mfu"]["total"] == pytest.approx(card["flops"]["useful"]["C_total"] / secs / 1e12)
    assert card["hfu"]["total"] == pytest.approx(card["flops"]["executed"]["C_total"] / secs / 1e12)
    assert card["measured_matmul"] is not None  # still beside it, as a measurement


def test_learning_parts_sum_to_c_learning_under_both_conventions(run):
    trainer, card, md, steps = run
    summary = trainer.ledger.summary()
    tokens = summary["tokens"]
    assert tokens["old_forward_rows"] == tokens["ref_forward_rows"] == tokens["gen_rows"] > 0
    for convention in CONVENTIONS:
        parts = summary["learning_parts"][convention]
        assert set(parts) == {"loss", "old", "ref"} and all(v > 0 for v in parts.values())
        assert sum(parts.values()) == pytest.approx(summary[convention]["C_learning"], rel=1e-12)
        assert card["learning_parts"][convention] == parts
        # the step records carry the parts too, and sum to the totals
        for part, total in parts.items():
            assert sum(s["learning_parts"][convention][part] for s in steps) == pytest.approx(
                total, rel=1e-12
            )
        for s in steps:
            assert sum(s["learning_parts"][convention].values()) == pytest.approx(
                s["flops"][convention]["learning"], rel=1e-12
            )
    # the reference forward runs the base model only: cheaper than the old-policy one with its adapters
    assert summary["learning_parts"]["useful"]["ref"] < summary["learning_parts"]["useful"]["old"]
    assert "| reference forwards |" in md.replace("old-policy forwards | ", "")
    assert "C_learning by part" in md


def test_an_in_memory_model_is_named_by_class_and_type(run, monkeypatch):
    trainer, card, md, _ = run
    model = card["model"]
    assert model["in_memory"] and model["name"] == "in-memory Qwen2ForCausalLM (qwen2)"
    assert model["class"] == "Qwen2ForCausalLM" and md.startswith(
        "# Compute card: in-memory Qwen2ForCausalLM"
    )
    base = trainer.model.get_base_model()
    monkeypatch.setattr(base.config, "_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct")
    named = compute_card(trainer)["model"]
    assert named["name"] == "Qwen/Qwen2.5-0.5B-Instruct" and not named["in_memory"]


def test_the_card_says_how_the_run_executed(run):
    trainer, card, md, _ = run
    ex = card["execution"]
    assert ex["attn_implementation"] == "eager"
    assert ex["activation_checkpointing"] is bool(trainer.args.activation_checkpointing)
    assert ex["dtype"] == card["model"]["dtype"] == "float32"
    assert ex["mixed_precision"] == trainer.accelerator.mixed_precision
    assert ex["compute_dtype"] == ("bfloat16" if ex["mixed_precision"] == "bf16" else "float32")
    assert set(card["conventions"]) == set(CONVENTIONS) and all(card["conventions"].values())
    assert set(card["utilisation_definitions"]) == {"mfu", "hfu"}
    assert "attention `eager`" in md and "- **useful**:" in md and "- **executed**:" in md
    assert card["card_version"] == 3


def _on_cuda(monkeypatch, trainer, name: str, mixed_precision: str = "bf16", count: int = 8):
    accelerator = type(trainer.accelerator)
    monkeypatch.setattr(accelerator, "device", property(lambda self: torch.device("cuda", 0)))
    monkeypatch.setattr(accelerator, "mixed_precision", property(lambda self: mixed_precision))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_a_gpu_card_states_mfu_against_each_phases_peak(run, monkeypatch):
    """On an H100 the bf16 passes are priced at TRL's bf16 peak, the fp32 generation at the fp32 one
    (our table: TRL has no fp32 peaks), and the total is each phase's FLOPs over its own peak."""
    trainer, *_ = run
    _on_cuda(monkeypatch, trainer, "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(devices, "tf32_matmuls", lambda: False)
    card = compute_card(trainer)
    device, hw = card["device"], card["hardware"]
    assert device["type"] == "cuda" and device["name"] == "NVIDIA H100 80GB HBM3"
    # the card's peak is the loss passes' (bf16): TRL's
    assert device["peak_flops_per_s"] == 989e12 and device["peak_dtype"] == "bfloat16"
    assert device["peak_source"] == "trl.get_peak_flops"
    search = device["peaks"]["search"]
    assert (search["dtype"], search["dtype_observed"], search["peak_flops_per_s"], search["peak_source"]) == (
        "float32",
        True,
        67e12,
        "paper_repro.accounting.devices table",
    )
    assert {device["peaks"][p]["peak_flops_per_s"] for p in ("loss", "old", "ref")} == {989e12}
    assert hw["gpu"] == {"model": "NVIDIA H100 80GB HBM3", "count": 1, "visible_to_process": 8}
    assert card["measured_matmul"] is None  # no CPU matmul beside a GPU run
    secs = card["seconds"]
    for convention, key in (("useful", "mfu"), ("executed", "hfu")):
        f = card["flops"][convention]
        assert card[key]["search"] == pytest.approx(f["C_search"] / secs["search"] / 67e12)
        assert card[key]["learning"] == pytest.approx(f["C_learning"] / secs["learning"] / 989e12)
        busy = f["C_search"] / 67e12 + f["C_learning"] / 989e12 + f["C_reward"] / 989e12
        assert card[key]["total"] == pytest.approx(busy / secs["total"])
    md = card_markdown(card)
    assert "GPU 1 x NVIDIA H100 80GB HBM3" in md and "| MFU (useful / peak) |" in md
    assert (
        "trl.get_peak_flops" in md and "search 6.7e+13 (float32, paper_repro.accounting.devices table)" in md
    )
    # fp32 matmuls on TF32 tensor cores: the TF32 peak
    monkeypatch.setattr(devices, "tf32_matmuls", lambda: True)
    search = compute_card(trainer)["device"]["peaks"]["search"]
    assert (search["peak_flops_per_s"], search["peak_dtype"]) == (494.7e12, "tfloat32")


def test_a_gpu_not_in_the_table_gets_no_mfu_and_is_told_to_pass_a_peak(run, monkeypatch):
    trainer, *_ = run
    _on_cuda(monkeypatch, trainer, "NVIDIA GeForce RTX 4090", count=1)
    card = compute_card(trainer)
    assert card["device"]["peak_flops_per_s"] is None and set(card["mfu"].values()) == {None}
    assert "RTX 4090" in card["mfu_missing"] and "LedgerConfig(peak_flops=...)" in card["mfu_missing"]
    assert "LedgerConfig(peak_flops=...)" in card_markdown(card)


def test_the_analysis_reads_mfu_and_hfu_from_a_card(run, tmp_path):
    from paper_repro.analysis.tables.cards import card_table

    _, card, *_ = run
    (tmp_path / "r1.card.json").write_text(json.dumps({**card, "mfu": {"total": 0.3}, "hfu": {"total": 0.4}}))
    row = card_table(tmp_path).iloc[0]
    assert row["device"] == CPU_NAME and row["mfu"] == 0.3 and row["utilisation"] == 0.4


def test_learning_parts_are_summed_over_processes_with_the_rest(run):
    """``reduce_step`` (the all-reduce of a multi-process run) sums the parts with the FLOPs and tokens:
    here a stand-in for two identical processes doubles every number."""
    from paper_repro.accounting.flops import Work
    from paper_repro.ledger import FlopLedger

    trainer, *_ = run
    ledger = FlopLedger(trainer.ledger.policy, trainer.ledger.train)
    work = {c: Work(12, 40, 6) for c in CONVENTIONS}
    ledger.charge_training_pass(work)
    ledger.charge_forward(work, adapters_active=True, part="old")
    ledger.charge_forward(work, adapters_active=False, part="ref")
    ledger.count(loss_rows=2, old_forward_rows=2)
    ledger.charge_generation(work)
    before = {c: dict(ledger._current.learning_parts[c]) for c in CONVENTIONS}
    ledger.reduce_step(lambda t: 2 * t)
    record = ledger.end_step(1, round_complete=True)
    assert (
        record["generated"]
        and record["tokens"]["loss_rows"] == 4
        and record["tokens"]["old_forward_rows"] == 4
    )
    for c in CONVENTIONS:
        assert record["learning_parts"][c] == {k: 2 * v for k, v in before[c].items()}
        assert sum(record["learning_parts"][c].values()) == pytest.approx(record["flops"][c]["learning"])
    assert ledger.summary()["learning_parts"] == record["learning_parts"]


# --- the compute dtype of each phase, measured ----------------------------------------------------


def test_generation_runs_in_fp32_while_the_loss_runs_in_bf16_under_autocast(run):
    """accelerate's bf16 autocast wraps the prepared model's forward; TRL's HF generate unwraps the
    model first, so with fp32 weights generation computes in fp32 and only the log-prob passes in
    bf16. The card says so per phase, and keeps compute_dtype as the loss passes'."""
    trainer, card, md, _ = run
    assert trainer.accelerator.mixed_precision == "bf16" and card["model"]["dtype"] == "float32"
    ex = card["execution"]
    assert ex["compute_dtype_by_phase"] == {
        "search": "float32",
        "loss": "bfloat16",
        "old": "bfloat16",
        "ref": "bfloat16",
    }  # no reward model: "reward" never ran a matmul, so it is absent, not guessed
    assert ex["compute_dtype"] == "bfloat16" and ex["compute_dtype_source"] == "measured in the loss passes"
    assert ex["compute_dtype_missing"] == {}
    assert "compute dtype by phase (measured): search float32, loss bfloat16" in md


def _fake_trainer(phase="loss", training=True):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    model.train(training)
    return SimpleNamespace(
        model=model, ref_model=None, reward_funcs=[len], ledger=SimpleNamespace(phase=phase)
    )


def test_a_probe_records_each_dtype_of_a_phase_and_nothing_between_phases():
    trainer = _fake_trainer(phase=None)
    probes = install_dtype_probes(trainer)
    assert probes.probed == {"policy": "0"} and trainer.dtype_probes is probes
    x = torch.randn(2, 4)
    trainer.model(x)  # between phases: not recorded
    assert probes.by_phase() == {}
    trainer.ledger.phase = "loss"
    trainer.model(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        trainer.model(x)
    trainer.ledger.phase = "search"
    trainer.model(x)
    assert probes.by_phase() == {"search": "float32", "loss": ["float32", "bfloat16"]}
    trainer.model.eval()  # evaluation is not the run's compute
    trainer.ledger.phase = "ref"
    trainer.model(x)
    assert "ref" not in probes.by_phase()
    # a phase that ran (its rows counted) unseen is named with the reason; one never run is not
    assert set(probes.missing({"ref_forward_rows": 8, "old_forward_rows": 0})) == {"ref"}
    # installing again replaces the hooks, it does not add to them
    install_dtype_probes(trainer)
    assert len(trainer.model[0]._forward_hooks) == 1 and isinstance(trainer.dtype_probes, DtypeProbes)


# --- provenance ----------------------------------------------------------------------------------


def test_the_card_carries_its_provenance(run):
    import accelerate
    import datasets
    import peft
    import transformers
    import trl

    trainer, card, md, _ = run
    prov = card["provenance"]
    pk = prov["packages"]
    assert (pk["trl"], pk["transformers"], pk["torch"]) == (
        trl.__version__,
        transformers.__version__,
        torch.__version__,
    )
    assert (pk["peft"], pk["accelerate"], pk["datasets"]) == (
        peft.__version__,
        accelerate.__version__,
        datasets.__version__,
    )
    assert pk["paper_repro"] and pk["python"]
    assert (prov["seed"], prov["data_seed"], prov["world_size"]) == (0, None, 1)
    assert prov["generation"]["backend"] == "transformers generate" and not prov["generation"]["use_vllm"]
    sampling = prov["sampling"]
    assert sampling["num_generations"] == 4 and sampling["max_completion_length"] == 10
    assert sampling["temperature"] == trainer.args.temperature and "top_k" in sampling and "min_p" in sampling
    ds = prov["dataset"]
    assert ds["fingerprint"] == trainer.train_dataset._fingerprint and ds["rows"] == 64 and not ds["iterable"]
    assert ds["revision"] is None and "revision" in ds["missing"] and "name" in ds["missing"]
    model = prov["model"]
    assert model["revision"] is None and "in-memory" in model["revision_missing"]
    assert f"fingerprint {ds['fingerprint']}" in md and "seed 0" in md


def test_the_model_revision_from_a_snapshot_folder_or_the_hub_cache(run, tmp_path, monkeypatch):
    trainer, *_ = run
    config = trainer.model.get_base_model().config
    commit = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setattr(config, "_name_or_path", f"/cache/models--Qwen--Q/snapshots/{commit}")
    assert model_revision(trainer.model)["revision"] == commit
    # a hub id: the local cache's refs/main, what loading it resolved "main" to
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(config, "_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct")
    refs = tmp_path / "models--Qwen--Qwen2.5-0.5B-Instruct" / "refs"
    assert model_revision(trainer.model)["revision"] is None  # not in the cache: null, with the reason
    refs.mkdir(parents=True)
    (refs / "main").write_text(commit)
    found = model_revision(trainer.model)
    assert found["revision"] == commit and "refs/main" in found["revision_source"]
    monkeypatch.setattr(config, "_commit_hash", "f" * 40, raising=False)  # transformers < 5 kept it
    assert model_revision(trainer.model)["revision"] == "f" * 40


def test_an_iterable_dataset_is_described_without_being_iterated():
    from datasets import IterableDataset

    def rows():
        raise AssertionError("the card iterated the dataset")
        yield {}

    ds = dataset_provenance(IterableDataset.from_generator(rows))
    assert ds["iterable"] and ds["rows"] is None and ds["fingerprint"] is None
    assert "not iterated" in ds["missing"]["rows"] and "IterableDataset" in ds["missing"]["fingerprint"]


# --- no NaN --------------------------------------------------------------------------------------


def _non_finite(node, path="card"):
    if isinstance(node, float):
        return [] if math.isfinite(node) else [path]
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _non_finite(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _non_finite(v, f"{path}[{i}]")]
    return []


def test_a_card_holds_no_nan_when_no_round_completes(tmp_path):
    """Before any step every ratio of the summary is NaN; after one step (a round is two) the largest
    round is: on the card each is null with the reason beside it, and the JSON is strict."""
    trainer = build_tiny_grpo(tmp_path, LedgerConfig(write_card=False), max_steps=1)
    install_dtype_probes(trainer)
    before = compute_card(trainer)
    assert _non_finite(before) == [] and json.dumps(before, allow_nan=False)
    assert before["rho"] is None and before["rho_missing"].startswith("no FLOPs counted")
    assert before["rho_time"] is None and before["flops"]["useful"]["rho_missing"]
    assert before["mfu_missing"]
    trainer.train()
    assert math.isnan(trainer.ledger.summary()["max_round_flops"])  # the summary's NaN ...
    card = compute_card(trainer)
    assert _non_finite(card) == [] and json.dumps(card, allow_nan=False)  # ... is not the card's
    budget = card["budget"]
    assert budget["max_round_flops"] is None
    assert budget["max_round_flops_missing"] == "no generation round completed"
    assert card["rounds"] == 0 and card["rho"] is not None


def test_the_written_card_is_strict_json(run, tmp_path):
    _, card, *_ = run
    assert _non_finite(card) == []
    json.dumps(card, allow_nan=False)


# --- peaks: one owner ----------------------------------------------------------------------------


def test_peaks_resolve_through_trl_then_our_table():
    h100 = "NVIDIA H100 80GB HBM3"
    assert devices.resolve_peak(h100, torch.bfloat16)[:2] == (989e12, "trl.get_peak_flops")
    assert devices.resolve_peak(h100, "fp16")[:2] == (989e12, "trl.get_peak_flops")
    assert devices.resolve_peak(h100, "float32", tf32=False)[:2] == (
        67e12,
        "paper_repro.accounting.devices table",
    )
    tf32 = devices.resolve_peak(h100, "float32", tf32=True)
    assert (tf32.peak, tf32.dtype) == (494.7e12, "tfloat32")
    assert devices.resolve_peak("NVIDIA H100 NVL", "bf16").peak == 835e12  # TRL's, not the SXM's
    assert devices.resolve_peak("Tesla V100-SXM2-16GB", "float16")[:2] == (
        125e12,
        "paper_repro.accounting.devices table",
    )
    assert devices.resolve_peak("Tesla T4", "bfloat16").peak is None  # no bf16 tensor cores
    none = devices.resolve_peak("NVIDIA GeForce RTX 4090", "bfloat16")
    assert none.peak is None and none.source is None and "LedgerConfig(peak_flops=...)" in none.missing
    cpu = devices.resolve_peak("AMD EPYC", "float32", device_type="cpu")
    assert cpu.peak is None and "CPU" in cpu.missing
    assert devices.resolve_peak("AMD EPYC", "float32", 1e12, "cpu")[:2] == (1e12, "LedgerConfig.peak_flops")
    # the dry run's default GPU ("H100 SXM") still finds its bf16 peak
    assert devices.gpu_peak("H100 SXM") == ("H100 SXM", 989e12)
    assert devices.gpu_peak("H100 SXM", half=False) == ("H100", 67e12)


def test_no_device_and_dtype_has_two_owners():
    """A row of our table that TRL also knows is TRL's: ours holds only what TRL does not."""
    from trl.trainer.utils import get_peak_flops

    for key, peaks in devices.GPU_PEAK_FLOPS.items():
        for dtype in peaks:
            assert get_peak_flops(f"NVIDIA {key}", dtype) is None, (key, dtype)


# --- per-step utilisation metrics ----------------------------------------------------------------


def test_utilisation_metrics_are_absent_on_cpu_and_cumulative_with_a_peak(run, monkeypatch):
    trainer, *_ = run
    assert utilisation_metrics(trainer) == {}  # no peak on a CPU: nothing logged, no NaN
    monkeypatch.setattr(trainer.ledger, "config", replace(trainer.ledger.config, peak_flops=1e12))
    metrics = utilisation_metrics(trainer)
    assert set(metrics) <= set(UTILISATION_METRIC_NAMES) and {"perf/ledger_mfu", "perf/ledger_hfu"} <= set(
        metrics
    )
    secs = trainer.ledger.seconds_totals()
    for convention, u in (("useful", "mfu"), ("executed", "hfu")):
        comp = trainer.ledger.component_totals(convention)
        assert metrics[f"perf/ledger_{u}"] == pytest.approx(100 * sum(comp.values()) / secs["total"] / 1e12)
        for k in ("search", "learning"):
            assert metrics[f"perf/ledger_{u}_{k}"] == pytest.approx(100 * comp[k] / secs[k] / 1e12)
    assert all(math.isfinite(v) for v in metrics.values())
    # the same numbers as the card's, in percent
    card = compute_card(trainer)
    assert metrics["perf/ledger_mfu"] == pytest.approx(100 * card["mfu"]["total"])
    assert metrics["perf/ledger_hfu_search"] == pytest.approx(100 * card["hfu"]["search"])


def test_utilisation_metrics_on_a_gpu_use_each_phases_peak(run, monkeypatch):
    trainer, *_ = run
    _on_cuda(monkeypatch, trainer, "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(devices, "tf32_matmuls", lambda: False)
    metrics = utilisation_metrics(trainer)
    comp, secs = trainer.ledger.component_totals("useful"), trainer.ledger.seconds_totals()
    assert metrics["perf/ledger_mfu_search"] == pytest.approx(100 * comp["search"] / secs["search"] / 67e12)
    assert metrics["perf/ledger_mfu_learning"] == pytest.approx(
        100 * comp["learning"] / secs["learning"] / 989e12
    )


def test_a_phase_no_probe_saw_is_priced_at_a_stated_assumption(run, monkeypatch):
    """The lean sampler computes with the weights directly (no nn.Linear forward, no autocast): its
    rollouts are named as unmeasured, and priced at the weights' dtype, saying so."""
    trainer, *_ = run
    monkeypatch.setattr(trainer, "sampler", "lean")
    monkeypatch.setattr(
        trainer.dtype_probes, "seen", {k: v for k, v in trainer.dtype_probes.seen.items() if k != "search"}
    )
    _on_cuda(monkeypatch, trainer, "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(devices, "tf32_matmuls", lambda: False)
    card = compute_card(trainer)
    assert "search" not in card["execution"]["compute_dtype_by_phase"]
    assert "lean sampler" in card["execution"]["compute_dtype_missing"]["search"]
    search = card["device"]["peaks"]["search"]
    assert (search["dtype"], search["dtype_observed"], search["peak_flops_per_s"]) == (
        "float32",
        False,
        67e12,
    )
    assert search["dtype_basis"].startswith("assumed: the weights' dtype")


def test_the_budget_block_says_whether_the_run_resumed_and_how_its_ceiling_was_priced(run, monkeypatch):
    trainer, card, *_ = run
    assert card["budget"]["resumed"] is False and card["budget"]["resumed_from"] == []
    assert card["budget"]["prompt_length_source"] is None and card["budget"]["prompt_length_source_missing"]
    monkeypatch.setattr(trainer.ledger, "resumed_from", [{"checkpoint": "out/checkpoint-2", "step": 2}])
    monkeypatch.setattr(
        trainer.ledger, "prompt_length_source", "the train dataset's longest prompt (5 tokens)"
    )
    card = compute_card(trainer)
    budget = card["budget"]
    assert budget["resumed"] is True and budget["resumed_from"] == [
        {"checkpoint": "out/checkpoint-2", "step": 2}
    ]
    assert budget["prompt_length_source"].startswith("the train dataset's longest prompt")
    assert "prompt_length_source_missing" not in budget
    assert "resumed: from out/checkpoint-2 at step 2" in card_markdown(card)


def test_a_deep_copy_of_the_policy_shares_the_dtype_probe(run):
    """The budget ladder merges a deep copy of the policy for evaluation: the probe's hook goes with it
    by reference (copying it would copy the trainer, whose locks cannot be copied)."""
    import copy

    trainer = run[0]
    name = trainer.dtype_probes.probed["policy"]
    copied = copy.deepcopy(trainer.model)  # raised "cannot pickle '_thread.RLock' object" before
    hooks = dict(trainer.model.named_modules())[name]._forward_hooks
    assert list(dict(copied.named_modules())[name]._forward_hooks.values()) == list(hooks.values())
