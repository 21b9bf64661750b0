"""Side-by-side reward systems on one fixed set of completions (paper_repro.drivers.reward_comparison): one
completion sampled for each of the first N held-out arith prompts from a base policy, scored by every
reward system and the common judge; per system the mean reward, its Pearson and Spearman correlation
with the judge, and the FLOPs the ledger charges per completion.
"""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command, default_of, positive_int

NAME = "reward-comparison"
HELP = "score one set of completions with every reward system and the judge, side by side"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.common.paths import repo_root
    from paper_repro.drivers import reward_comparison as owner

    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("--policy", default=str(repo_root() / owner.POLICY), help="the base policy sampled")
    p.add_argument("--prm", default=str(repo_root() / owner.PRM), help="the process reward model")
    p.add_argument("--n", type=positive_int, default=default_of(owner.compare, "n"), help="prompts scored")
    p.add_argument("--seed", type=int, default=default_of(owner.compare, "seed"), help="the sampling seed")
    p.add_argument(
        "--aggregation",
        choices=("min", "mean"),
        default=default_of(owner.compare, "aggregation"),
        help="how the PRM's step scores make one reward",
    )
    p.add_argument("--out", default=str(repo_root() / owner.OUT), help="the table (CSV)")
    return p


def run(args: argparse.Namespace) -> int:
    from paper_repro.drivers import reward_comparison as owner

    table = owner.compare(args.policy, args.prm, args.n, args.seed, args.aggregation)
    owner.write(table, args.out)
    print(owner.words(table))
    return 0
