"""No module of fabrikito uses another module's private names (``module._name``, ``from module import _name``).

A name that starts with one underscore belongs to its module: another module that needs it needs a public
name.  The test reads every module under src/fabrikito with ``ast`` (imports inside functions and under
``TYPE_CHECKING`` too) and lists each use of a private name of another fabrikito module.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "fabrikito"

#: Known uses left to remove, each (the using module, the name it uses).  Empty: the uses found were made
#: public names, and launch/lifecycle.py and launch/status.py (changed in other branches at the same time)
#: use none.  The test fails too when a listed use is gone, so the list only shrinks.
KNOWN: frozenset[tuple[str, str]] = frozenset()


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def uses_of_private_names(source: str, here: str, where: str) -> list[tuple[str, str]]:
    """(``module._name``, ``where:line``) for each private name of another fabrikito module that ``source``, the
    text of module ``here``, uses."""
    tree = ast.parse(source, where)
    bound: dict[str, str] = {}  # a local name -> the fabrikito module it is
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fabrikito"):
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound["fabrikito"] = "fabrikito"
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fabrikito"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if is_module(full):
                    bound[alias.asname or alias.name] = full
                elif private(alias.name) and node.module != here:
                    found.append((full, f"{where}:{node.lineno}"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain: list[str] = [node.attr]
        value: ast.expr = node.value
        while isinstance(value, ast.Attribute):
            chain.insert(0, value.attr)
            value = value.value
        if not isinstance(value, ast.Name) or value.id not in bound:
            continue
        owner = bound[value.id]
        for part in chain[:-1]:  # fabrikito.delivery.say._x: follow the modules named
            if is_module(f"{owner}.{part}"):
                owner = f"{owner}.{part}"
            else:
                break
        else:
            if private(node.attr) and owner != here:
                found.append((f"{owner}.{node.attr}", f"{where}:{node.lineno}"))
    return found


def all_uses() -> dict[tuple[str, str], list[str]]:
    uses: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        here, source = module_name(path), path.read_text(encoding="utf-8")
        for name, where in uses_of_private_names(source, here, str(path.relative_to(SRC))):
            uses.setdefault((here, name), []).append(where)
    return uses


def test_no_module_uses_another_modules_private_names() -> None:
    uses = all_uses()
    new = {key: where for key, where in uses.items() if key not in KNOWN}
    assert not new, "private names used across modules (make them public, or keep the use in their module): " + (
        "; ".join(f"{name} at {', '.join(where)}" for (_, name), where in sorted(new.items()))
    )
    gone = sorted(KNOWN - uses.keys())
    assert not gone, f"no longer used, take them off KNOWN: {gone}"


def test_the_check_sees_each_form_of_use() -> None:
    """The reader finds ``module._name`` through ``import a.b as m``, ``from a import b`` and a dotted chain, and
    ``from module import _name``; a module's own private names, dunders and public names are not uses."""
    source = (
        "from fabrikito.delivery import engine\n"
        "import fabrikito.delivery.say as s\n"
        "import fabrikito.delivery.flush\n"
        "from fabrikito.delivery.queue import _log, log\n"
        "from fabrikito.delivery.route import _mine_too\n"
        "engine._reap\n"
        "s._refused\n"
        "fabrikito.delivery.flush._busy\n"
        "engine.deliver\n"
        "engine.__doc__\n"
        "def _mine() -> None: ...\n"
        "_mine\n"
    )
    found = sorted(name for name, _ in uses_of_private_names(source, "fabrikito.delivery.route", "probe.py"))
    assert found == [
        "fabrikito.delivery.engine._reap",
        "fabrikito.delivery.flush._busy",
        "fabrikito.delivery.queue._log",
        "fabrikito.delivery.say._refused",
    ]
