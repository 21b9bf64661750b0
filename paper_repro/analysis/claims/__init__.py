"""The claims: a registry of declarations (:mod:`~paper_repro.analysis.claims.registry`), what they
read (:mod:`~paper_repro.analysis.claims.study`), the paper's values
(:mod:`~paper_repro.analysis.claims.paper`), the families of claims, each a module of declarations
(:data:`~paper_repro.analysis.claims.registry.FAMILIES`, registered here, when the package is
first imported), and the claims table built from the registry (:mod:`~paper_repro.analysis.claims.table`).

A new claim is one declaration (:func:`register_claim`) in one of the families' modules.
"""

from importlib import import_module

from paper_repro.analysis.claims.registry import FAMILIES, claims, register_claim, registered, spec, specs
from paper_repro.analysis.claims.study import Classes, Study

for _family in FAMILIES:  # each module of declarations registers its claims when imported
    import_module(f"{__name__}.{_family}")

__all__ = ["Classes", "Study", "claims", "register_claim", "registered", "spec", "specs"]
