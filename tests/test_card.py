"""The compute card can be compared and cited: hardware by name, MFU only against a datasheet peak
(a CPU's matmul measured beside the run, as a measurement), C_learning's parts, the model's name and
how the run executed. One short real run on CPU; a GPU's card on a mocked CUDA device."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from paper_repro import devices
from paper_repro.flops import CONVENTIONS
from paper_repro.ledger import LedgerConfig
from paper_repro.ledger.card import MATMUL_REPEATS, card_markdown, compute_card, cpu_matmul_throughput
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
        trainer = build_tiny_grpo(tmp, ledger, max_steps=4, beta=0.05, num_iterations=2)
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
    assert card["device"]["peak_source"] == "given (LedgerConfig.peak_flops)" and card["mfu_missing"] is None
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
    assert card["card_version"] == 2


def _on_cuda(monkeypatch, trainer, name: str, mixed_precision: str = "bf16", count: int = 8):
    accelerator = type(trainer.accelerator)
    monkeypatch.setattr(accelerator, "device", property(lambda self: torch.device("cuda", 0)))
    monkeypatch.setattr(accelerator, "mixed_precision", property(lambda self: mixed_precision))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_a_gpu_card_states_mfu_against_the_datasheet_peak(run, monkeypatch):
    trainer, *_ = run
    _on_cuda(monkeypatch, trainer, "NVIDIA H100 80GB HBM3")
    card = compute_card(trainer)
    device, hw = card["device"], card["hardware"]
    assert device["type"] == "cuda" and device["name"] == "NVIDIA H100 80GB HBM3"
    assert device["peak_flops_per_s"] == devices.GPU_PEAK_FLOPS["H100"][0] == 989e12  # dense bf16
    assert device["peak_dtype"] == "bfloat16" and "H100" in device["peak_source"]
    assert hw["gpu"] == {"model": "NVIDIA H100 80GB HBM3", "count": 1, "visible_to_process": 8}
    assert card["measured_matmul"] is None  # no CPU matmul beside a GPU run
    secs = card["seconds"]
    for k in ("search", "learning", "total"):
        assert card["mfu"][k] == pytest.approx(card["flops"]["useful"][f"C_{k}"] / secs[k] / 989e12)
        assert card["hfu"][k] == pytest.approx(card["flops"]["executed"][f"C_{k}"] / secs[k] / 989e12)
    md = card_markdown(card)
    assert "GPU 1 x NVIDIA H100 80GB HBM3" in md and "| MFU (useful / peak) |" in md
    assert "datasheet dense 16-bit tensor-core peak of the H100" in md
    # fp32 weights without autocast: the fp32 peak
    _on_cuda(monkeypatch, trainer, "NVIDIA H100 80GB HBM3", mixed_precision="no")
    assert compute_card(trainer)["device"]["peak_flops_per_s"] == devices.GPU_PEAK_FLOPS["H100"][1]


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
    from paper_repro.flops import Work
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
