"""Stage E in words, generated from its tables (:mod:`paper_repro.analysis.tables.test_time`): what
notebook 60 prints, and the one sentence of the answer on RL against test-time sampling."""

from __future__ import annotations

import math

import pandas as pd

ARM_WORDS = {"pass": "pass@k (the checker's oracle)", "majority": "majority vote", "prm": "PRM best-of-k"}


def queries(q: float) -> str:
    """A break-even deployment in words: ``0`` and ``inf`` have their meaning spelled out."""
    if q == 0:
        return "any number of queries (the base never reaches RL's greedy accuracy)"
    if math.isinf(q):
        return "no number of queries (the base matches RL at RL's own per-query FLOPs)"
    if math.isnan(q):
        return "an undetermined number of queries (the seeds disagree: some 0 or inf)"
    return f"{q:.3g} queries"


def _interval(row) -> str:
    if math.isnan(row.q_star_low):
        return f"per seed {row.q_star_seeds}"
    return f"95% interval over {row.seeds} seeds {row.q_star_low:.3g} to {row.q_star_high:.3g}"


def size_lines(tables: dict[str, pd.DataFrame], set_name: str) -> list[str]:
    """One line a size on ``set_name``: pass@1 and pass@k max of base and RL, the break-even Q against
    majority vote and PRM best-of-k, and where the base overtakes RL's pass@k."""
    arms = tables["test_time_arms.csv"]
    arms = arms[arms.set == set_name]
    breakeven = tables["test_time_breakeven.csv"]
    gap = tables["test_time_gap.csv"]
    lines = []
    for size in dict.fromkeys(arms["size"]):
        a = arms[(arms["size"] == size) & (arms.arm.isin(["pass", "greedy"]))]
        mean = a.groupby(["kind", "arm", "k"]).accuracy.mean()
        kmax = int(a.k.max())
        be = breakeven[(breakeven["size"] == size) & (breakeven.set == set_name)].set_index("arm")
        g = gap[(gap["size"] == size) & (gap.set == set_name)].set_index("k")
        over = g.overtaken_at.iloc[0]
        parts = [
            f"**{size}**: greedy {mean['base', 'greedy', 1]:.3f} (base) vs {mean['rl', 'greedy', 1]:.3f} (RL); "
            f"pass@1 {mean['base', 'pass', 1]:.3f} vs {mean['rl', 'pass', 1]:.3f}; "
            f"pass@{kmax} {mean['base', 'pass', kmax]:.3f} vs {mean['rl', 'pass', kmax]:.3f}"
        ]
        for arm in ("majority", "prm"):
            r = be.loc[arm]
            parts.append(
                f"RL beats {ARM_WORDS[arm]} at equal FLOPs beyond {queries(r.q_star)} ({_interval(r)}); "
                f"at Q -> inf, per FLOP per query, {r.winner_at_greedy} leads at RL's greedy cost"
            )
        parts.append(
            f"the base's pass@k overtakes RL's at k = {int(over)} (gap {g.gap.loc[int(over)]:+.3f}, "
            f"{g.gap_low.loc[int(over)]:+.3f} to {g.gap_high.loc[int(over)]:+.3f})"
            if not math.isnan(over)
            else f"RL's pass@k stays above the base's up to k = {kmax} (gap at k = {kmax}: "
            f"{g.gap.loc[kmax]:+.3f}, {g.gap_low.loc[kmax]:+.3f} to {g.gap_high.loc[kmax]:+.3f})"
        )
        lines.append("; ".join(parts) + ".")
    return lines


def sizes_lines(tables: dict[str, pd.DataFrame], set_name: str) -> list[str]:
    """One line a pair of sizes: the smaller after RL against the larger without, at the larger's
    greedy FLOPs per query."""
    sizes = tables["test_time_sizes.csv"]
    out = []
    for _, r in sizes[(sizes.set == set_name) & (sizes.arm == "majority")].iterrows():
        out.append(
            f"At {r.large}'s greedy FLOPs per query ({r.flop_ratio:.2f}x {r.small}'s), {r.small} after RL "
            f"(greedy and majority vote, mixed) scores {r.small_rl:.3f} ({r.small_rl_low:.3f} to "
            f"{r.small_rl_high:.3f}) against {r.large} without RL's greedy {r.large_base_greedy:.3f}."
        )
    return out


def stage_e_words(tables: dict[str, pd.DataFrame]) -> str:
    """Stage E in Markdown, a block per evaluation set."""
    blocks = []
    for set_name in sorted(tables["test_time_arms.csv"].set.unique()):
        lines = size_lines(tables, set_name) + sizes_lines(tables, set_name)
        blocks.append(f"On **{set_name}**:\n\n" + "\n".join(f"- {line}" for line in lines))
    return "\n\n".join(blocks)


def answer_sentence(tables: dict[str, pd.DataFrame], set_name: str = "gsm") -> str:
    """The answer's one plain sentence on RL against test-time sampling (``set_name``, majority vote,
    the deployable arm without a verifier)."""
    be = tables["test_time_breakeven.csv"]
    be = be[(be.set == set_name) & (be.arm == "majority")]
    said = ", ".join(f"{r['size']} {queries(r.q_star).split(' (')[0]}" for _, r in be.iterrows())
    winners = sorted(set(be.winner_at_greedy))
    return (
        f"Spent at test time instead (majority vote over samples, {set_name}), the same FLOPs match RL "
        f"only for small deployments: RL's training pays for itself beyond {said}, and per query "
        f"{' or '.join(winners)} {'is' if len(winners) == 1 else 'are'} ahead once training is amortised."
    )
