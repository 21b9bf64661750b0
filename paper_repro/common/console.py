"""What the console shows: the project's Jupyter kernel, and the progress of the runs a notebook makes.

A notebook executed by papermill keeps its outputs in the executed copy; papermill's console shows none
of them (its ``--log-output`` is off by default), only its bar of cells, which stands still while a
notebook's one training cell runs. So:

- the notebooks name the project's kernel, :data:`KERNEL` (``paper_repro/kernelspec/kernel.json``,
  installed into the venv by ``make install``): ipykernel whose own log is set to CRITICAL, which keeps
  its start-up warning ("Kernel is running over TCP without encryption", about the local socket
  between papermill and the kernel) and the ERROR it logs for the interrupt it gets at shutdown off the
  console. ``paper-repro run`` executes the notebooks on it too (:func:`kernel_name`);
- a run says what it is doing (:func:`report`: loading, training with the share of its budget spent, a
  budget point's evaluation, its final evaluation), and :class:`RunsProgress` shows it beside a bar of
  the runs: on stderr when that is a terminal (a script); in a notebook kernel that papermill started
  directly, on papermill's own console (:func:`console_stream`): a live bar on a terminal, a line per
  step on a log file. Nothing of it enters the executed notebook. ``paper-repro run`` keeps its one bar
  of the study's runs: its kernels show nothing (:data:`MUTE`).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

KERNEL = "paper-repro"  # the kernelspec the notebooks name (kernelspec/kernel.json, `make install`)
KERNELSPEC_DIR = Path(__file__).resolve().parents[1] / "kernelspec"
# Set by `paper-repro run` for the kernels it starts: their runs show nothing on the console, where the
# driver's own bar counts them.
MUTE = "PAPER_REPRO_KERNEL_CONSOLE"


def kernel_name() -> str:
    """The kernel to execute the notebooks on: :data:`KERNEL` where it is installed, else ipykernel's
    ``python3`` (a venv made without ``make install``; the same Python, its start-up warning shown)."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL if KERNEL in KernelSpecManager().find_kernel_specs() else "python3"


def console_stream() -> TextIO | None:
    """The console of whoever started this notebook kernel with papermill, or None: not in a kernel,
    or in one ``paper-repro run`` started (:data:`MUTE`). ipykernel sends the process's own stderr to
    the notebook and keeps a copy of the stderr it was started with (papermill's), which is this;
    a kernel that leaves the process's stderr alone (``capture_fd_output`` off, or under pytest)
    has it as ``sys.__stderr__``."""
    if os.environ.get(MUTE) == "off" or not type(sys.stderr).__module__.startswith("ipykernel."):
        return None
    fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    return _text(fd) if isinstance(fd, int) else sys.__stderr__


@functools.cache
def _text(fd: int) -> TextIO:
    return open(fd, "w", buffering=1, closefd=False)  # lives as long as the kernel


# Who is told what the run in this process is doing (:func:`listening`); empty: no one, and
# :func:`report` costs nothing.
_LISTENERS: list[Callable[[str, str], None]] = []


def report(what: str, detail: str = "") -> None:
    """Say what the run in this process is doing now (``what``: its step, e.g. "training"; ``detail``:
    how far, e.g. "35% of its budget spent") to whoever listens (:class:`RunsProgress`)."""
    for listener in _LISTENERS:
        listener(what, detail)


def listened() -> bool:
    """Whether anyone listens to :func:`report` (a run adds its per-step report only then)."""
    return bool(_LISTENERS)


@contextmanager
def listening(listener: Callable[[str, str], None]) -> Iterator[None]:
    """Pass every :func:`report` made inside the block to ``listener``."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


class RunsProgress:
    """The progress of the runs :func:`paper_repro.run.runner.run_specs` makes, where someone sees it:
    on stderr when it is a terminal, else on papermill's console (:func:`console_stream`). On a
    terminal a bar of the runs with the current run's step beside it; on a log file one line as each
    run starts a step and as it ends; elsewhere (``show`` False, or no console) nothing."""

    def __init__(self, total: int, show: bool = True) -> None:
        from tqdm import tqdm

        stream = _where() if show and total else None
        self.stream, self.total, self.done, self.run, self.step = stream, total, 0, "", ""
        self.live = _below(stream)
        self.bar = tqdm(
            total=total, desc="runs", unit="run", file=stream, disable=not self.live, dynamic_ncols=True
        )

    def say(self, what: str, detail: str = "") -> None:
        """The current run's step (``detail``: how far it is)."""
        if self.live:
            self.bar.set_postfix_str(f"{self.run}: {what}{', ' + detail if detail else ''}")
        elif self.stream is not None and what != self.step:
            self._line(f"run {self.done + 1}/{self.total} ({self.run}): {what}")
        self.step = what

    @contextmanager
    def running(self, run: str) -> Iterator[None]:
        """The run named ``run`` is made in this process inside the block: its reports are shown."""
        self.run, self.step = run, ""
        self.say("starting")
        with listening(self.say):
            yield
        self.finished(run)

    def finished(self, run: str) -> None:
        """A run is done (made here, or in a worker process)."""
        self.done += 1
        if self.live:
            self.bar.set_postfix_str(f"{run}: done", refresh=False)
        self.bar.update()
        if not self.live and self.stream is not None:
            self._line(f"run {self.done}/{self.total} done ({run})")

    def close(self) -> None:
        self.bar.close()

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


class Steps:
    """A bar of a job's named parts (the analysis's), where someone sees it (as :class:`RunsProgress`):
    ``steps(part)`` says that ``part`` starts, the parts before it done; :meth:`close` that all are.
    No time left is guessed: the parts take very different times."""

    FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} parts [{elapsed}{postfix}]"

    def __init__(self, name: str, parts: Sequence[str], show: bool = True) -> None:
        from tqdm import tqdm

        stream = _where() if show else None
        self.name, self.parts, self.stream = name, tuple(parts), stream
        self.live = _below(stream)
        self.bar = tqdm(
            total=len(self.parts),
            desc=name,
            file=stream,
            disable=not self.live,
            bar_format=self.FORMAT,
            dynamic_ncols=True,
        )

    def __call__(self, part: str) -> None:
        index = self.parts.index(part)
        self.bar.n = index
        self.bar.set_postfix_str(part)
        if not self.live and self.stream is not None:
            print(f"{self.name}: {part} ({index + 1}/{len(self.parts)})", file=self.stream, flush=True)

    def close(self) -> None:
        self.bar.n = len(self.parts)
        self.bar.set_postfix_str("done")
        self.bar.close()


def _where() -> TextIO | None:
    if sys.stderr is not None and sys.stderr.isatty():
        return sys.stderr
    return console_stream()


def _below(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal (a live bar); on papermill's console what follows starts on a
    line of its own, below papermill's bar of cells, which a bar would overwrite and a line extend."""
    if stream is not None and stream is not sys.stderr:
        stream.write("\n")
    return stream is not None and stream.isatty()
