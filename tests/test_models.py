"""One resolver from a model name to its checkpoint and shape, used by every command and run."""

from __future__ import annotations

import json

import pytest

from paper_repro import cli, models
from paper_repro.config import load_profile


def test_every_model_a_profile_names_has_a_shape_without_weights():
    for name in ("cpu-tiny", "gpu-paper"):
        profile = load_profile(name)
        for model in [*profile.policies.values(), profile.prm]:
            shape = models.shape(model)
            assert shape.hidden_size > 0 and shape.num_layers > 0


def test_a_hub_id_a_shipped_name_and_a_config_file_give_the_same_shape():
    by_id = models.shape("Qwen/Qwen2.5-7B-Instruct")
    by_name = models.shape("qwen2.5-7b-instruct")
    by_file = models.shape(models.shipped_config("Qwen/Qwen2.5-7B-Instruct"))
    assert by_id.body_matmul_params == by_name.body_matmul_params == by_file.body_matmul_params
    assert by_id.num_layers == 28 and by_id.hidden_size == 3584  # the public Qwen2.5-7B config


def test_a_repo_relative_checkpoint_resolves_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the checkout: relative paths are the checkout's
    assert models.checkpoint("data/models/policy-M").is_dir()
    assert models.shape("data/models/policy-M").name == "policy-M"
    assert models.local("data/models/policy-M").endswith("data/models/policy-M")
    assert models.local("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"


def test_unknown_models_are_refused_with_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"shipped names: qwen2\.5-1\.5b-instruct"):
        models.shape("Qwen/Qwen9-900B")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        models.checkpoint(tmp_path / "nothing-here")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        models.checkpoint(tmp_path / "empty")


def test_flops_command_takes_the_profiles_own_hub_id(capsys):
    argv = ["flops", "--model", "Qwen/Qwen2.5-7B-Instruct", "--reward-model", "Qwen/Qwen2.5-Math-PRM-7B",
            "--prompt-tokens", "200", "--completion-tokens", "600", "--generations", "8", "--kept", "8",
            "--epochs", "1", "--json"]  # fmt: skip
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "Qwen/Qwen2.5-7B-Instruct" and out["C_reward"] > 0


def test_a_testbed_model_not_built_yet_says_how_to_build_it():
    with pytest.raises(FileNotFoundError, match="run `make models`"):
        models.shape("data/models/policy-XL")
