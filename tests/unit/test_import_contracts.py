"""The package's architecture, as import-linter contracts (pyproject.toml, ``[tool.importlinter]``): the
layers, top down, and the packages that stand apart. ``lint-imports`` checks them from the command line;
this suite runs the same check in process, and holds that each contract breaks on the import it forbids.

Imports made late inside a function and under ``TYPE_CHECKING`` count, as they do for the circle test
(tests/unit/test_public_api.py).
"""

from __future__ import annotations

import tomllib
from copy import deepcopy
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.api import read_configuration
from importlinter.application.use_cases import lint_imports
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.independence import IndependenceContract
from importlinter.contracts.layers import LayersContract

from tests.structure_counts import COUNTS

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
CONTRACTS: list[dict[str, Any]] = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]

LAYERS: list[set[str]] = next(
    [{unit.strip() for unit in layer.split("|")} for layer in c["layers"]]
    for c in CONTRACTS
    if c["id"] == "layers"
)
"""The package's layers, top first, as the layers contract lists them (docs/development.md draws them)."""

BREAKS: dict[str, list[tuple[str, str]]] = {
    "layers": [
        ("knowwhen_runner.config.models", "knowwhen_runner.cli.main"),  # a lower layer imports a higher one
        ("knowwhen_runner.plan.grid", "knowwhen_runner.queue"),  # a peer imports a peer
        ("knowwhen_runner.unplaced", ""),  # a new top-level module has no layer
    ],
    "stages": [("knowwhen_runner.results.report", "knowwhen_runner.work.worker")],
    "foundations": [("knowwhen_runner.dataset.scoring", "knowwhen_runner.config")],
    "presentation": [("knowwhen_runner.results.tables", "rich")],
    "results-siblings": [("knowwhen_runner.results.figures", "knowwhen_runner.results.export")],
}
"""For each contract, imports (importer, imported) that break it; an empty ``imported`` adds a module only."""

_KINDS = {"layers": LayersContract, "independence": IndependenceContract, "forbidden": ForbiddenContract}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    options = read_configuration(str(PYPROJECT))["session_options"]
    external = options.get("include_external_packages") in ("True", "true", True)
    return grimp.build_graph(*options["root_packages"], include_external_packages=external, cache_dir=None)


def _kept(contract: dict[str, Any], graph: grimp.ImportGraph) -> bool:
    options = read_configuration(str(PYPROJECT))
    made = _KINDS[contract["type"]](
        name=contract["name"],
        session_options=options["session_options"],
        contract_options=next(c for c in options["contracts_options"] if c.get("id") == contract["id"]),
    )
    return made.check(graph, verbose=False).kept


def test_lint_imports_keeps_every_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """``lint-imports`` finds every contract kept (its report names the importing and imported modules
    of a broken one)."""
    passed = lint_imports(config_filename=str(PYPROJECT), cache_dir=None, no_logo=True)
    assert passed, capsys.readouterr().out
    COUNTS["import contracts kept"] = len(CONTRACTS)


@pytest.mark.parametrize("contract", CONTRACTS, ids=[c["id"] for c in CONTRACTS])
def test_each_contract_breaks_on_an_import_it_forbids(
    contract: dict[str, Any], graph: grimp.ImportGraph
) -> None:
    """Each contract holds on the package as it is and is broken by each import listed for it in BREAKS."""
    assert _kept(contract, deepcopy(graph))
    assert BREAKS[contract["id"]], f"give the contract {contract['id']} an import that breaks it"
    for importer, imported in BREAKS[contract["id"]]:
        bad = deepcopy(graph)
        bad.add_module(importer)
        if imported:
            bad.add_import(importer=importer, imported=imported)
        assert not _kept(contract, bad), f"{importer} -> {imported or '(new module)'} left it kept"
