"""The study's jargon: the terms a reader of the README meets, each with the spellings it appears
under. The README's "Words we use" defines each (in bold); ``tests/test_readme_words.py`` checks
that every term the README uses is defined there, and defined before it is used, or where it is first
used (in italics, with its meaning beside it), or linked to the definitions."""

from __future__ import annotations

# term -> the spellings it appears under (regular expressions, matched as words, case-sensitive
# where the case carries meaning: "C" the budget, "RACE" the method)
TERMS: dict[str, tuple[str, ...]] = {
    "rho": (r"rho",),
    "rho*": (r"(?<!\*)rho\\?\*",),
    "cell": (r"[Cc]ells?",),
    "setting": (r"[Ss]ettings?",),
    "stage": (r"[Ss]tages? [ABD]\b",),
    "native reward": (r"[Nn]ative reward",),
    "pass@1": (r"pass@1",),
    "judge": (r"[Jj]udge",),
    "PRM": (r"PRM",),
    "PODS": (r"PODS",),
    "RACE": (r"RACE(?!\+)",),
    "RACE+": (r"RACE\+",),
    "regime": (r"[Rr]egimes?",),
    "update-heavy": (r"update-heavy",),
    "search-heavy": (r"search-heavy",),
    "kappa": (r"[Kk]appa",),
    "could be best": (r"[Cc]ould be best",),
    "recipe effect": (r"recipe effect",),
    "recipe SD": (r"recipe SD",),
    "REML": (r"REML",),
    "held": (r"\*\*held\*\*",),
    "not held": (r"\*\*not held\*\*",),
    "inconclusive": (r"\*\*inconclusive\*\*",),
    "heterogeneous": (r"heterogeneous",),
    "regime contrast": (r"[Rr]egime contrasts?",),
    "any recipe": (r"any recipe",),
    "these recipes": (r"these recipes",),
    "margin": (r"[Mm]argins?",),
    "TOST": (r"TOST",),
    "exploratory": (r"exploratory",),
    "pre-registered": (r"[Pp]re-registered",),
    "operating characteristics": (r"[Oo]perating characteristics",),
    "regret": (r"[Rr]egrets?",),
    "diverging": (r"[Dd]iverging",),
    "gaming": (r"[Gg]aming",),
    "Fieller": (r"Fieller",),
    "IsoFLOP": (r"IsoFLOP",),
    "ladder": (r"ladder",),
    "frontier": (r"frontiers?",),
    "rule-based": (r"[Rr]ule-based",),
    "PRM-style": (r"PRM-style",),
}
