"""House rule read from the source: no module of the package uses another module's private name, neither by
`from guitarformer.x import _name` (or a relative import) nor as `x._name` on a module it imported."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "guitarformer"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path, pkg: Path) -> str:
    parts = path.relative_to(pkg.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    """The module an ImportFrom names, relative imports resolved against `here`."""
    if not node.level:
        return node.module or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(dotted: str, pkg: Path) -> bool:
    rel = Path(*dotted.split("."))
    return (pkg.parent / rel).with_suffix(".py").exists() or (pkg.parent / rel / "__init__.py").exists()


def violations(path: Path, pkg: Path = PKG) -> list[str]:
    """Every use in `path` of a private name of another guitarformer module, as 'file:line what'."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here, is_package = _module_name(path, pkg), path.name == "__init__.py"
    modules: dict[str, str] = {}  # local name -> guitarformer module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("guitarformer"):
                    modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else "guitarformer"
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, here, is_package)
            if not source.startswith("guitarformer"):
                continue
            for a in node.names:
                if _private(a.name) and source != here:
                    found.append(f"{path.name}:{node.lineno} imports {source}.{a.name}")
                elif _is_module(f"{source}.{a.name}", pkg):
                    modules[a.asname or a.name] = f"{source}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
            owner = modules.get(node.value.id)
            if owner is not None and owner != here:
                found.append(f"{path.name}:{node.lineno} uses {owner}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_name():
    found = [v for p in sorted(PKG.rglob("*.py")) for v in violations(p)]
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_the_check_catches_each_form(tmp_path):
    """The check above is only worth its pass if it fails on each form of the rule's breach."""
    pkg = tmp_path / "guitarformer"
    (pkg / "sub").mkdir(parents=True)
    for f in ("__init__.py", "sub/__init__.py", "sub/a.py"):
        (pkg / f).write_text("_x = 1\n")
    (pkg / "sub" / "b.py").write_text(
        "from guitarformer.sub.a import _x\n"
        "from .a import _x as y\n"
        "from guitarformer.sub import a\n"
        "import guitarformer.sub.a as m\n"
        "z = a._x + m._x + a.__name__.__len__()\n")
    found = violations(pkg / "sub" / "b.py", pkg)
    assert len(found) == 4, found
    (pkg / "sub" / "c.py").write_text("from guitarformer.sub.a import x\n_y = 1\nprint(_y)\n")
    assert violations(pkg / "sub" / "c.py", pkg) == []
