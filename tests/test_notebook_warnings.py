"""What a quick notebook shows first carries no library noise: the banner of a quick run
(:func:`paper_repro.drivers.study.announce_quick`) runs before ``prepare`` in notebook 40, and loading its
profile imports transformers and so ``tqdm.auto``, which warns in a kernel without ipywidgets."""

from __future__ import annotations

import warnings


def test_announcing_a_quick_run_silences_tqdms_widget_warning_before_it_loads_the_profile(capsys):
    from tqdm import TqdmWarning

    from paper_repro.drivers import study

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # what a fresh kernel shows
        study.announce_quick("cpu-tiny")
        warnings.warn("IProgress not found. Please update jupyter and ipywidgets.", TqdmWarning, stacklevel=1)
        warnings.warn("a warning of the package's own still shows", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["a warning of the package's own still shows"]
    assert capsys.readouterr().out.startswith("**A smoke run, not the study.**")
