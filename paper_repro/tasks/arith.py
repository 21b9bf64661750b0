"""The ``arith`` task: multi-step arithmetic word problems with checkable step-by-step solutions.

A problem is a start value and a chain of operations; its difficulty is the number of steps::

    prompt:     "7, add 3, times 2, minus 4?\\n"
    completion: "7+3=10\\n10*2=20\\n20-4=16\\nanswer: 16"

Every solution line ``a op b = c`` can be checked exactly, and the final answer follows the marker
``answer:``. Everything is generated deterministically from a seed, and the repo ships the splits as
JSONL under ``data/tasks/arith/`` (see :func:`write_splits`).

Imperfect pretraining: the base policies are SFT-trained on a corpus with two kinds of flaw, so that
they start with room for RL to improve them:

- *slips*: each step's result is off by a small amount with probability ``error_rate``, and later
  steps carry the wrong value forward, as a careless solver would;
- *shortcuts*: with a probability that rises with the number of steps (:data:`SHORTCUT_SHARE`), the
  solution skips the work and answers at once, with the value the chain holds after a random number
  of its steps (``"answer: 17"``), as a solver who stops thinking too soon. A shortcut is wrong for
  every problem of two or more steps, unless the chain happens to return to that value.

The shortcut makes the testbed's main room for RL a *choice* the base policy already samples but
does not prefer: on long problems most sampled solutions, and the greedy one, take the shortcut,
while a minority work the steps and are mostly right. RL can only sharpen what sampling reaches
(pass@k >> pass@1); this is that pattern, built in on purpose. See docs/CHOICES.md.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from paper_repro.common.paths import repo_root
from paper_repro.tasks.base import Example

Op = Literal["+", "-", "*"]
OP_WORDS: dict[str, str] = {"+": "add", "-": "minus", "*": "times"}
ANSWER_MARKER = "answer:"
STEP_SEPARATOR = "\n"
TASK_DIR = Path("data") / "tasks" / "arith"


@dataclass(frozen=True)
class Difficulty:
    """The distribution one split's problems are drawn from."""

    steps: tuple[int, ...]  # allowed numbers of steps, drawn uniformly
    start: tuple[int, int] = (2, 20)  # start value range, inclusive
    operand: tuple[int, int] = (2, 9)  # second operand range, inclusive
    max_value: int = 50  # every intermediate value stays in [0, max_value]

    def __post_init__(self) -> None:
        if not self.steps or min(self.steps) < 1:
            raise ValueError(f"steps must be a non-empty set of positive counts, got {self.steps}")
        for name in ("start", "operand"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise ValueError(f"{name} range must satisfy 0 <= lo <= hi, got {(lo, hi)}")
        if self.max_value < self.start[1]:
            raise ValueError(f"max_value {self.max_value} is below the largest start {self.start[1]}")


@dataclass(frozen=True)
class SplitSpec:
    """One shipped split: its size, its seed and its difficulty.

    A *nested* split (``base`` set) grew after it was first shipped: its first ``base`` problems are
    the split as first drawn (from ``seed``, in :data:`SPLIT_ORDER` with the others), the remaining
    ``size - base`` are appended after every split is drawn (:func:`extend_split`, from
    ``extension_seed``), so that an evaluation of the first ``base`` problems reads exactly the
    problems it always read."""

    name: str
    size: int
    seed: int
    difficulty: Difficulty
    note: str = ""
    shipped: bool = True  # written to data/tasks/arith/ (the SFT corpus is regenerated instead)
    base: int | None = None  # a nested split: its first rows, as first shipped
    extension_seed: int | None = None  # a nested split: the stream of its appended rows

    def __post_init__(self) -> None:
        if self.base is not None:
            if not 0 < self.base <= self.size:
                raise ValueError(f"split {self.name}: base {self.base} must be in (0, size {self.size}]")
            if self.extension_seed is None:
                raise ValueError(f"split {self.name}: a nested split needs its extension_seed")

    @property
    def first_size(self) -> int:
        """Problems drawn in :data:`SPLIT_ORDER` with the other splits: the split as first shipped."""
        return self.base if self.base is not None else self.size


# The shipped splits. "train" plays Polaris-53K's role (RL prompts); "heldout" is the same
# distribution for the native reward; "gsm_tiny" is the in-distribution downstream eval and
# "math_tiny" the harder one (more steps, larger operands). "pretrain" is the SFT corpus of the base
# policies (its solutions carry injected errors) and "prm" the step-labelled set for the tiny PRM.
# "heldout" and "gsm_tiny" were shipped with 300 problems and grew to 900, nested: their first 300
# rows are the 300 every evaluation with ``limit: 300`` reads; rows 300-899 (extension seeds: the
# split's seed + 10) give three disjoint blocks of 300 to measure evaluation noise with
# (``paper-repro bench eval-noise``).
MIXED = Difficulty(steps=(2, 3, 4, 5))
HARD = Difficulty(steps=(5, 6, 7))
SPLITS: dict[str, SplitSpec] = {
    spec.name: spec
    for spec in (
        SplitSpec(
            "gsm_tiny",
            900,
            101,
            MIXED,
            "in-distribution downstream eval (GSM8K's role)",
            base=300,
            extension_seed=111,
        ),
        SplitSpec("math_tiny", 300, 102, HARD, "harder downstream eval: longer chains (MATH-500's role)"),
        SplitSpec(
            "heldout",
            900,
            103,
            MIXED,
            "held-out training distribution (native reward)",
            base=300,
            extension_seed=113,
        ),
        SplitSpec("train", 4000, 104, MIXED, "RL prompts (Polaris-53K's role)"),
        SplitSpec("prm", 4000, 105, Difficulty(steps=(1, 2, 3, 4, 5, 6)), "step-labelled PRM set"),
        SplitSpec("pretrain", 50000, 106, Difficulty(steps=(1, 2, 3, 4, 5, 6)), "SFT corpus", False),
    )
}
# Share of SFT solutions that take the shortcut, by number of steps: a majority from 4 steps on, so
# that the base policies' greedy solutions of long problems are shortcuts (docs/CHOICES.md).
SHORTCUT_SHARE: dict[int, float] = {1: 0.0, 2: 0.3, 3: 0.45, 4: 0.6, 5: 0.65, 6: 0.7}
SHORTCUT_SEED = 107  # its own stream: the shortcut draw changes no problem of any split

# Earlier splits win: a prompt that appears in an earlier split is never drawn for a later one, so
# no evaluation prompt is ever trained on. A nested split's appended rows come after all of them
# (:func:`extend_split`): they avoid every prompt of every split, the SFT corpus's included.
SPLIT_ORDER = tuple(SPLITS)
EXTENSION_TRIES = 100_000  # draws for one appended problem before the split is declared exhausted


@dataclass(frozen=True)
class Problem:
    """One problem: a start value and its operations. ``answer`` and ``steps`` follow from them."""

    start: int
    ops: tuple[tuple[str, int], ...]

    @property
    def prompt(self) -> str:
        words = ", ".join(f"{OP_WORDS[op]} {b}" for op, b in self.ops)
        return f"{self.start}, {words}?\n"

    @property
    def steps(self) -> list[tuple[int, str, int, int]]:
        """The correct steps ``(a, op, b, c)``."""
        out, value = [], self.start
        for op, b in self.ops:
            c = apply(op, value, b)
            out.append((value, op, b, c))
            value = c
        return out

    @property
    def answer(self) -> int:
        return self.steps[-1][3]

    def solution(self, errors: Sequence[int | tuple[str, int | str]] = ()) -> str:
        """The step-by-step solution with slips, carried on as a careless solver would.

        ``errors[i]`` is step ``i``'s slip: an int is added to its result; ``("operand", d)`` misreads
        the operand as ``b + d``, ``("carry", d)`` the carried value as ``a + d``, ``("op", op2)``
        applies the wrong operation (each computed right from the misread values).
        """
        lines, value = [], self.start
        for i, (op, b) in enumerate(self.ops):
            slip = errors[i] if i < len(errors) else 0
            a, offset = value, 0
            if isinstance(slip, tuple):
                kind, arg = slip
                if kind == "operand":
                    b = b + int(arg)
                elif kind == "carry":
                    a = a + int(arg)
                elif kind == "op":
                    op = str(arg)
                else:
                    raise ValueError(f"unknown slip kind {kind!r}")
            else:
                offset = slip
            c = apply(op, a, b) + offset
            lines.append(f"{a}{op}{b}={c}")
            value = c
        return STEP_SEPARATOR.join([*lines, f"{ANSWER_MARKER} {value}"])


def apply(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    raise ValueError(f"unknown operation {op!r}")


def sample_problem(rng: random.Random, difficulty: Difficulty) -> Problem:
    """Draw one problem; operations that would leave ``[0, max_value]`` are redrawn."""
    n = rng.choice(difficulty.steps)
    value = rng.randint(*difficulty.start)
    start, ops = value, []
    while len(ops) < n:
        op = rng.choice(("+", "-", "*"))
        b = rng.randint(*difficulty.operand)
        c = apply(op, value, b)
        if 0 <= c <= difficulty.max_value:
            ops.append((op, b))
            value = c
    return Problem(start, tuple(ops))


def sample_errors(rng: random.Random, n_steps: int, error_rate: float) -> list[int]:
    """Per-step result offsets: 0, or with probability ``error_rate`` a slip of ±1 or ±2."""
    return [rng.choice((-2, -1, 1, 2)) if rng.random() < error_rate else 0 for _ in range(n_steps)]


def shortcut_solution(rng: random.Random, problem: Problem) -> str:
    """A solution that skips the work: the answer marker and the value after a random number of the
    problem's steps (0 to n - 1: the start value, or an intermediate result)."""
    j = rng.randrange(len(problem.ops))
    value = problem.start if j == 0 else problem.steps[j - 1][3]
    return f"{ANSWER_MARKER} {value}"


SLIP_KINDS = ("small", "large", "operand", "carry", "op")  # a step's error kinds (:func:`sample_slips`)


def sample_slips(
    rng: random.Random, problem: Problem, error_rate: float
) -> tuple[list[int | tuple[str, int | str]], list[str | None]]:
    """Per-step slips of every kind, for the PRM's step-labelled data, and each step's slip kind (one
    of :data:`SLIP_KINDS`, ``None`` for a step drawn without a slip): with probability
    ``error_rate`` a step slips, as a small result slip (±1, ±2; 40%), a large one (±5 to ±15; 15%), a
    misread operand (15%), a misread carried value (15%) or the wrong operation (15%)."""
    slips: list[int | tuple[str, int | str]] = []
    kinds: list[str | None] = []
    for op, _ in problem.ops:
        if rng.random() >= error_rate:
            slips.append(0)
            kinds.append(None)
            continue
        kind = rng.choices(SLIP_KINDS, weights=(40, 15, 15, 15, 15))[0]
        kinds.append(kind)
        if kind == "small":
            slips.append(rng.choice((-2, -1, 1, 2)))
        elif kind == "large":
            slips.append(rng.choice((-1, 1)) * rng.randint(5, 15))
        elif kind == "op":
            slips.append(("op", rng.choice([o for o in OP_WORDS if o != op])))
        else:
            slips.append((kind, rng.choice((-2, -1, 1, 2))))
    return slips, kinds


def step_labelled(
    problems: Iterable[Problem], rng: random.Random, error_rate: float, split: str = "prm"
) -> Iterator[dict]:
    """Step-labelled records of ``problems``, each solved with fresh slips from ``rng``: ``steps``
    (the solution's step lines), ``labels`` (their verdicts) and ``kinds`` (each step's slip kind,
    ``None`` where none was drawn). The label is the step checker's verdict, not the draw: a step
    whose slip writes a wrong expression is wrong even where its result happens to be right."""
    for problem in problems:
        slips, kinds = sample_slips(rng, problem, error_rate)
        text = problem.solution(slips)
        yield problem_to_record(
            problem,
            split,
            steps=text.split(STEP_SEPARATOR)[:-1],
            labels=step_verdicts(problem, text),
            kinds=kinds,
        )


def fresh_problems(seed: int, difficulty: Difficulty, exclude: set[str]) -> Iterator[Problem]:
    """An endless stream of problems of ``difficulty`` whose prompts are not in ``exclude`` (repeats
    within the stream allowed): step data for the PRM, which is free to generate."""
    rng = random.Random(seed)
    while True:
        problem = sample_problem(rng, difficulty)
        if problem.prompt not in exclude:
            yield problem


# --------------------------------------------------------------------------------------- checking


@dataclass(frozen=True)
class ParsedSolution:
    """A completion read back: its step lines ``(a, op, b, c)`` (``None`` if unreadable) and answer."""

    steps: tuple[tuple[int, str, int, int] | None, ...]
    answer: int | None
    step_texts: tuple[str, ...] = field(default=(), compare=False)


def parse_solution(text: str) -> ParsedSolution:
    """Split a completion into step lines and the final answer. Never raises."""
    steps, texts, answer = [], [], None
    for line in text.split(STEP_SEPARATOR):
        line = line.strip()
        if not line:
            continue
        if line.startswith(ANSWER_MARKER):
            answer = _to_int(line[len(ANSWER_MARKER) :].strip())
            break  # anything after the answer is ignored
        texts.append(line)
        steps.append(_parse_step(line))
    return ParsedSolution(tuple(steps), answer, tuple(texts))


def _to_int(text: str) -> int | None:
    text = text.strip().rstrip(".")
    if text.startswith("-"):
        return -int(text[1:]) if text[1:].isdigit() else None
    return int(text) if text.isdigit() else None


def _parse_step(line: str) -> tuple[int, str, int, int] | None:
    lhs, eq, rhs = line.partition("=")
    if not eq:
        return None
    c = _to_int(rhs)
    for op in "+-*":
        # the first operand is non-negative, so the operator is the first op sign after position 0
        pos = lhs.find(op, 1)
        if pos > 0:
            a, b = _to_int(lhs[:pos]), _to_int(lhs[pos + 1 :])
            if a is None or b is None or c is None:
                return None
            return (a, op, b, c)
    return None


def extract_answer(text: str) -> int | None:
    """The integer after the final-answer marker, or ``None``."""
    return parse_solution(text).answer


def is_correct(text: str, answer: int | str) -> bool:
    """Exact integer match of the final answer (the cpu-tiny answer check)."""
    got = extract_answer(text)
    return got is not None and got == int(answer)


def step_verdicts(problem: Problem, text: str) -> list[bool]:
    """One verdict per written step: the step applies the problem's i-th operation to the value the
    solution holds so far (the start, or its own previous result) and gets the arithmetic right.

    A wrong result makes that step wrong; the next step is judged on the value it was given, so a
    single slip is one wrong step, as a process checker would see it.
    """
    parsed = parse_solution(text)
    verdicts, value = [], problem.start
    for i, step in enumerate(parsed.steps):
        if step is None or i >= len(problem.ops):
            verdicts.append(False)
            continue
        a, op, b, c = step
        want_op, want_b = problem.ops[i]
        verdicts.append(a == value and op == want_op and b == want_b and c == apply(op, a, b))
        value = c
    return verdicts


def process_score(problem: Problem, text: str) -> float:
    """Share of the problem's steps written correctly, in ``[0, 1]``: correct steps divided by the
    larger of the problem's and the solution's step counts (missing or extra steps count against)."""
    verdicts = step_verdicts(problem, text)
    return sum(verdicts) / max(len(problem.ops), len(verdicts))


# --------------------------------------------------------------------------------------- splits


def problem_to_record(problem: Problem, split: str, **extra) -> dict:
    return {
        "prompt": problem.prompt,
        "answer": str(problem.answer),
        "source": f"arith/{split}",
        "n_steps": len(problem.ops),
        "start": problem.start,
        "ops": [f"{op}{b}" for op, b in problem.ops],  # "+3": strings keep the column Arrow-friendly
        **extra,
    }


def record_to_problem(record: dict) -> Problem:
    """The problem of a record (or of the columns TRL hands a reward): ``start`` and ``ops``
    (``["+3", "*2"]``). Raises ``KeyError``/``ValueError`` on a malformed row."""
    ops = tuple((str(op)[0], int(str(op)[1:])) for op in record["ops"])
    if any(op not in OP_WORDS for op, _ in ops):
        raise ValueError(f"unknown operation in {record['ops']!r}")
    return Problem(int(record["start"]), ops)


def generate_split(
    spec: SplitSpec, exclude: set[str], error_rate: float = 0.0
) -> Iterator[tuple[Problem, list[int]]]:
    """``spec.size`` distinct problems not in ``exclude``, with per-step error offsets."""
    rng = random.Random(spec.seed)
    seen: set[str] = set()
    tries = 0
    while len(seen) < spec.size:
        tries += 1
        if tries > 50 * spec.size:
            raise RuntimeError(f"split {spec.name}: only {len(seen)} distinct problems of {spec.size}")
        problem = sample_problem(rng, spec.difficulty)
        if problem.prompt in exclude or problem.prompt in seen:
            continue
        seen.add(problem.prompt)
        yield problem, sample_errors(rng, len(problem.ops), error_rate)


def extend_split(spec: SplitSpec, exclude: set[str]) -> Iterator[Problem]:
    """The ``size - base`` problems appended to a nested split, none of whose prompts is in
    ``exclude`` (every split's, drawn before) or drawn twice, from ``spec.extension_seed``.

    Each draws its number of steps first, uniformly from the split's difficulty as
    :func:`sample_problem` does, then problems of that many steps until one is new. Redrawing the
    whole problem on a collision, as :func:`generate_split` does, would not keep the split's
    distribution of steps: drawn after the SFT corpus, which holds most of the few thousand 2-step
    prompts there are, the appended rows would be almost all of 3 to 5 steps."""
    if spec.base is None or spec.extension_seed is None:
        raise ValueError(f"split {spec.name} is not nested: it has no rows to append")
    rng = random.Random(spec.extension_seed)
    seen: set[str] = set()
    for _ in range(spec.size - spec.base):
        steps = rng.choice(spec.difficulty.steps)
        difficulty = replace(spec.difficulty, steps=(steps,))
        for _ in range(EXTENSION_TRIES):
            problem = sample_problem(rng, difficulty)
            if problem.prompt not in exclude and problem.prompt not in seen:
                break
        else:
            raise RuntimeError(
                f"split {spec.name}: no new {steps}-step problem in {EXTENSION_TRIES} draws "
                f"after {len(seen)} appended rows"
            )
        seen.add(problem.prompt)
        yield problem


def build_splits(pretrain_error_rate: float, prm_error_rate: float) -> dict[str, list[dict]]:
    """All splits as records, disjoint by prompt (earlier splits in ``SPLIT_ORDER`` win; a nested
    split's appended rows, drawn last, avoid every other prompt).

    ``pretrain`` records carry a ``completion`` (a solution with injected slips, or a shortcut answer,
    flagged ``shortcut``); ``prm`` records carry ``steps`` (the solution's step lines), ``labels``
    (step verdicts) and ``kinds`` (each step's slip kind, ``None`` for no slip).
    """
    taken: set[str] = set()
    out: dict[str, list[dict]] = {}
    slip_rng = random.Random(SPLITS["prm"].seed + 1)
    shortcut_rng = random.Random(SHORTCUT_SEED)
    for name in SPLIT_ORDER:
        spec = SPLITS[name]
        rate = {"pretrain": pretrain_error_rate, "prm": prm_error_rate}.get(name, 0.0)
        if spec.base is not None and rate:
            raise ValueError(f"split {name}: only evaluation splits (no slips) can be nested")
        records = []
        # a nested split's first rows, as first shipped: its seed's stream, cut where it was cut
        for problem, errors in generate_split(replace(spec, size=spec.first_size), taken, rate):
            extra = {}
            if name == "pretrain":
                share = SHORTCUT_SHARE.get(len(problem.ops), max(SHORTCUT_SHARE.values()))
                shortcut = shortcut_rng.random() < share
                extra["completion"] = (
                    shortcut_solution(shortcut_rng, problem) if shortcut else problem.solution(errors)
                )
                extra["shortcut"] = shortcut
            elif name == "prm":
                slips, kinds = sample_slips(slip_rng, problem, rate)
                text = problem.solution(slips)
                extra["steps"] = text.split(STEP_SEPARATOR)[:-1]
                extra["labels"] = step_verdicts(problem, text)
                extra["kinds"] = kinds
            records.append(problem_to_record(problem, name, **extra))
        taken.update(r["prompt"] for r in records)
        out[name] = records
    for name in SPLIT_ORDER:  # the nested splits' appended rows, in the same order, after every split
        if SPLITS[name].base is not None:
            appended = [problem_to_record(p, name) for p in extend_split(SPLITS[name], taken)]
            taken.update(r["prompt"] for r in appended)
            out[name] += appended
    return out


def first_pass_prompts(splits: dict[str, list[dict]]) -> set[str]:
    """The prompts of every split as first shipped (a nested split's first ``base`` rows): what the
    committed PRM's fresh training problems were kept out of (:func:`paper_repro.testbed.build_all`)."""
    return {r["prompt"] for name, records in splits.items() for r in records[: SPLITS[name].first_size]}


def write_splits(
    directory: str | Path | None = None,
    pretrain_error_rate: float = 0.05,
    prm_error_rate: float = 0.3,
    splits: dict[str, list[dict]] | None = None,
) -> dict[str, Path]:
    """Write every shipped split to ``<directory>/<split>.jsonl`` (``splits`` if already built with
    the same rates) and return the paths."""
    directory = Path(directory) if directory is not None else repo_root() / TASK_DIR
    directory.mkdir(parents=True, exist_ok=True)
    splits = splits if splits is not None else build_splits(pretrain_error_rate, prm_error_rate)
    paths = {}
    for name, records in splits.items():
        if SPLITS[name].shipped:
            paths[name] = write_jsonl(directory / f"{name}.jsonl", records)
    meta = {
        "splits": {name: _spec_record(spec) for name, spec in SPLITS.items()},
        "pretrain_error_rate": pretrain_error_rate,
        "shortcut_share": SHORTCUT_SHARE,
        "prm_error_rate": prm_error_rate,
    }
    (directory / "splits.json").write_text(json.dumps(meta, indent=2) + "\n")
    return paths


def _spec_record(spec: SplitSpec) -> dict:
    """A split's entry of ``splits.json``: a split that is not nested records no nesting fields."""
    record = asdict(spec)
    if spec.base is None:
        record.pop("base")
        record.pop("extension_seed")
    return record


def write_jsonl(path: Path, records: Iterable[dict]) -> Path:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as f:
        for record in records:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    tmp.replace(path)
    return path


def load_split(name: str, directory: str | Path | None = None) -> list[Example]:
    """The shipped split ``name`` as :class:`Example` rows (prompt, answer, source + metadata)."""
    shipped = [n for n, spec in SPLITS.items() if spec.shipped]
    if name not in shipped:
        raise ValueError(f"unknown arith split {name!r}; shipped splits: {', '.join(shipped)}")
    directory = Path(directory) if directory is not None else repo_root() / TASK_DIR
    path = directory / f"{name}.jsonl"
    if not path.exists():
        raise FileNotFoundError(
            f"arith split {name!r} not found at {path}; regenerate the shipped splits with "
            f"`paper-repro task-data` (or notebook 00_embedded_models)"
        )
    with path.open() as f:
        return [Example.from_record(json.loads(line)) for line in f if line.strip()]
