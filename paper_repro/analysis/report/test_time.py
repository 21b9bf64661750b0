"""Stage E in words, generated from its tables (:mod:`paper_repro.analysis.tables.test_time`): what
notebook 60 prints, and the one sentence of the answer on RL against test-time sampling."""

from __future__ import annotations

import math

import pandas as pd

LEADER = {"rl": "RL leads", "base": "the base leads", "tie": "neither leads"}
ARM_WORDS = {"pass": "pass@k (the checker's oracle)", "majority": "majority vote", "prm": "PRM best-of-k"}


def beats(arm: str, row) -> str:
    """Where RL beats ``arm`` at equal total FLOPs, from a row of ``test_time_breakeven.csv``."""
    q = row.q_star
    seeds = f"Q* per seed {row.q_star_seeds}"
    if q == 0:
        return f"RL beats {ARM_WORDS[arm]} at every deployment size (the base's samples never reach RL's greedy accuracy; {seeds})"
    if math.isinf(q):
        return f"RL never beats {ARM_WORDS[arm]} at equal FLOPs (the base reaches RL's greedy accuracy at RL's own per-query FLOPs; {seeds})"
    if math.isnan(row.q_star_low):
        return f"RL beats {ARM_WORDS[arm]} at equal FLOPs beyond about {q:.3g} queries ({seeds})"
    return (
        f"RL beats {ARM_WORDS[arm]} at equal FLOPs beyond {q:.3g} queries (95% interval over "
        f"{row.seeds} seeds {row.q_star_low:.3g} to {row.q_star_high:.3g})"
    )


def _order(arms: pd.DataFrame) -> list[str]:
    """The sizes, smallest first (by the base's greedy FLOPs per query)."""
    greedy = arms[(arms.kind == "base") & (arms.arm == "greedy")]
    return list(greedy.groupby("size").flops_per_query.mean().sort_values().index)


def size_lines(tables: dict[str, pd.DataFrame], set_name: str) -> list[str]:
    """One line a size on ``set_name``: pass@1 and pass@k max of base and RL, the break-even Q against
    majority vote and PRM best-of-k, and where the base overtakes RL's pass@k."""
    arms = tables["test_time_arms.csv"]
    arms = arms[arms.set == set_name]
    breakeven = tables["test_time_breakeven.csv"]
    gap = tables["test_time_gap.csv"]
    lines = []
    for size in _order(arms):
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
                f"{beats(arm, r)}; once training is amortised, at RL's greedy FLOPs per query "
                f"{LEADER[r.winner_at_greedy]} ({r.rl_greedy:.3f} vs "
                f"{r.base_at_rl_greedy_cost:.3f})"
            )
        parts.append(
            f"the base's pass@k overtakes RL's at k = {int(over)} (gap {g.gap.loc[int(over)]:+.3f}, "
            f"{g.gap_low.loc[int(over)]:+.3f} to {g.gap_high.loc[int(over)]:+.3f})"
            if not math.isnan(over)
            else f"the base's pass@k does not overtake RL's up to k = {kmax} (gap at k = {kmax}: "
            f"{g.gap.loc[kmax]:+.3f}, {g.gap_low.loc[kmax]:+.3f} to {g.gap_high.loc[kmax]:+.3f})"
        )
        lines.append("; ".join(parts) + ".")
    return lines


def sizes_lines(tables: dict[str, pd.DataFrame], set_name: str) -> list[str]:
    """One line a pair of sizes: the smaller after RL against the larger without, at the larger's
    greedy FLOPs per query."""
    sizes = tables["test_time_sizes.csv"]
    out = []
    if sizes.empty:  # one size sampled: no pair to compare
        return out
    for _, r in sizes[(sizes.set == set_name) & (sizes.arm == "majority")].iterrows():
        out.append(
            f"At {r.large}'s greedy FLOPs per query ({r.flop_ratio:.2f}x {r.small}'s), {r.small} after RL "
            f"(greedy and majority vote, mixed) scores {r.small_rl:.3f}"
            + (
                ""
                if math.isnan(r.small_rl_low)
                else f" ({r.small_rl_low:.3f} to {r.small_rl_high:.3f} over seeds)"
            )
            + f" against {r.large} without RL's greedy {r.large_base_greedy:.3f}."
        )
    return out


def stage_e_words(tables: dict[str, pd.DataFrame]) -> str:
    """Stage E in Markdown, a block per evaluation set."""
    blocks = []
    for set_name in sorted(tables["test_time_arms.csv"].set.unique()):
        lines = size_lines(tables, set_name) + sizes_lines(tables, set_name)
        blocks.append(f"On **{set_name}**:\n\n" + "\n".join(f"- {line}" for line in lines))
    return "\n\n".join(blocks)


def answer_sentence(breakeven: pd.DataFrame, set_name: str = "gsm") -> str:
    """The answer's one plain sentence on RL against test-time sampling, from
    ``test_time_breakeven.csv`` (``set_name``): where RL's training pays for itself against majority
    vote (no verifier) and against best-of-k by the learned PRM, size by size."""
    be = breakeven[breakeven.set == set_name].set_index(["arm", "size"])
    sizes = [s for s in ("S", "M", "L") if ("majority", s) in be.index]
    sizes += sorted({s for _, s in be.index} - set(sizes))

    def said(arm: str) -> str:
        parts = []
        for size in sizes:
            q = be.loc[(arm, size)].q_star
            parts.append(
                f"{size} at any number of queries"
                if q == 0
                else f"{size} never"
                if math.isinf(q)
                else f"{size} beyond about {float(f'{q:.2g}'):.0f} queries"
            )
        return ", ".join(parts)

    ahead = [s for s in sizes if be.loc[("majority", s)].winner_at_greedy == "rl"]
    return (
        f"**RL or more thinking?** At equal total FLOPs (training paid once, sampling on every query; "
        f"{set_name}), RL's greedy answer beats majority vote over the base policy's samples for "
        f"{said('majority')}, and best-of-k by the learned PRM for {said('prm')}; once training is "
        f"amortised, RL leads per FLOP per query for {', '.join(ahead) if ahead else 'no size'} "
        f"(stage E, [notebook 60](notebooks/executed/cpu-tiny/60_stage_E_test_time.ipynb))."
    )
