"""The imports made by name keep the layers too.

``lint-imports`` checks every ``import`` statement against the contracts in
pyproject.toml, but the command table names its handlers and builders as
``"module:function"`` strings, imported only when the command runs
(``cli._resolve``), and import-linter cannot see those.  This test finds every
such string in the package and checks it against the same contracts: a module
may name only a module of its own layer or of one below it.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import pytest

from fabrikito import cli

SRC = Path(__file__).resolve().parents[2] / "src"
PYPROJECT = SRC.parent / "pyproject.toml"


def contracts() -> list[dict[str, object]]:
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return [c for c in data["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]


def layer_lists() -> list[list[list[str]]]:
    """Each layers contract as its layers, top first, each layer its modules (containers prefixed)."""
    found = []
    for contract in contracts():
        containers = contract.get("containers") or [""]
        assert isinstance(containers, list)
        for container in containers:
            layers = contract["layers"]
            assert isinstance(layers, list)
            prefix = f"{container}." if container else ""
            found.append([[prefix + part.strip() for part in layer.split("|")] for layer in layers])
    return found


def layer_of(layers: list[list[str]], module: str) -> int | None:
    for index, members in enumerate(layers):
        if any(module == m or module.startswith(m + ".") for m in members):
            return index
    return None


def violations(pairs: list[tuple[str, str]]) -> list[str]:
    """``importer imports imported`` pairs that run upwards in some layers contract."""
    found = []
    for layers in layer_lists():
        for importer, imported in pairs:
            above, below = layer_of(layers, importer), layer_of(layers, imported)
            if above is not None and below is not None and below < above:
                found.append(f"{importer} names {imported}, a layer above it")
    return found


def by_name() -> list[tuple[str, str, str]]:
    """``(module, named module, function)`` for every ``"fabrikito.x:function"`` string in the package."""
    found = []
    for path in sorted((SRC / "fabrikito").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                name, colon, func = node.value.partition(":")
                if colon and name.startswith("fabrikito.") and func.isidentifier() and " " not in name:
                    found.append((module, name, func))
    return found


def test_the_command_table_names_are_all_found() -> None:
    named = {(name, func) for _, name, func in by_name()}
    for command in cli.COMMANDS:
        for path in (command.handler, command.build):
            if isinstance(path, str):
                assert tuple(path.split(":")) in named, path
    assert ("fabrikito.launch.hostside", "main") in named  # the unlisted _host command


@pytest.mark.parametrize(("module", "name", "func"), by_name(), ids=str)
def test_each_module_named_exists_and_keeps_the_layers(module: str, name: str, func: str) -> None:
    assert callable(getattr(importlib.import_module(name), func))
    assert violations([(module, name)]) == []


def test_a_name_that_runs_upwards_is_caught() -> None:
    """The check itself: a delivery module naming a handler of the command line, or the command line's
    wire naming its server, would break the layers."""
    assert violations([("fabrikito.delivery.say", "fabrikito.cli.commands")]) != []
    assert violations([("fabrikito.cli.wire", "fabrikito.cli.server")]) != []
    assert violations([("fabrikito.cli", "fabrikito.delivery.say")]) == []
