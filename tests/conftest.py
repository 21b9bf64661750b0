"""Shared fixtures: tiny random checkpoints and tiny copies of the profiles, built offline (no
network, no downloads) once per session (with pytest-xdist, once per worker). What they build is in
``tests/fixtures.py``; each test module still writes its results to its own temporary folders."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "PYTEST_XDIST_WORKER" in os.environ:
    # pytest -n 2 runs two workers on two cores, each with torch's two OpenMP threads: a thread that
    # waits spinning takes a core from the other worker. Waiting asleep: the same numbers, ~25% faster.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from tests import fixtures


def pytest_configure(config):
    """Under pytest-xdist, the controller rebuilds each warning a worker reports by importing the
    module of its class; a ledger's BudgetWarning that a test lets through imports paper_repro.ledger,
    and with it transformers, in the middle of the run (where it once failed, taking a worker down:
    "cannot import name 'TrainerCallback' from 'transformers'"). The controller imports it once here,
    before any worker reports."""
    if "PYTEST_XDIST_WORKER" not in os.environ and getattr(config.option, "numprocesses", None):
        import paper_repro.ledger.config  # noqa: F401


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory):
    """A random tiny Qwen2 policy (``testbed.TINY``) with the testbed tokenizer, saved in HF format."""
    return fixtures.save_random_model(tmp_path_factory.mktemp("tiny-policy"))


@pytest.fixture(scope="session")
def tiny_prm(tmp_path_factory):
    """A random tiny PRM (``testbed.TINY``, the 2-way token-classification head), saved in HF format."""
    return fixtures.save_random_model(tmp_path_factory.mktemp("tiny-prm"), head="prm")


@pytest.fixture(scope="session")
def tiny_profile(tmp_path_factory, tiny_policy, tiny_prm):
    """The YAML path of cpu-tiny run tiny: every policy :func:`tiny_policy`, the PRM :func:`tiny_prm`
    (see :func:`tests.fixtures.tiny_profile_dict`). It names no results folder: pass one."""
    return fixtures.write_tiny_profile(tmp_path_factory.mktemp("tiny-profile"), tiny_policy, tiny_prm)


@pytest.fixture(scope="session")
def tiny_m_profile(tiny_policy):
    """cpu-tiny with :func:`tiny_policy` as policy M, short completions and 8-problem evaluations
    (:func:`tests.fixtures.tiny_m_profile`)."""
    return fixtures.tiny_m_profile(tiny_policy)


@pytest.fixture(scope="session")
def tiny_gpu_profile(tmp_path_factory):
    """The YAML path of gpu-paper shrunk onto tiny Qwen2.5-shaped checkpoints and local hub rows."""
    return fixtures.write_tiny_gpu_profile(tmp_path_factory.mktemp("tiny-gpu-profile"))
