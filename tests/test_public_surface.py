"""The stable surface (issue 37): private implementation modules, curated namespaces, one name per
meaning, every public name documented, and the 0.1 module paths kept for one release with a warning."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ldpcli import _compat
from ldpcli._lazy import exports_of

PACKAGE = Path(__file__).resolve().parents[1] / "ldpcli"
README = PACKAGE.parent / "README.md"

#: The public modules outside the command line (``__init__`` not counted): the issue's cap is 25.
PUBLIC_MODULES = {"ldpcli.errors"}

NAMESPACES = ["ldpcli", *sorted(f"ldpcli.{p.name}" for p in PACKAGE.iterdir()
                                if (p / "__init__.py").exists() and p.name not in ("cli", "schemas"))]


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def _definitions() -> dict[str, set[str]]:
    """Each top-level function and class name of the library (not the CLI) and the modules defining it."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "cli" in path.relative_to(PACKAGE).parts[:-1]:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.setdefault(node.name, set()).add(_module_name(path))
    return found


def _public_names() -> dict[str, list[tuple[str, object]]]:
    """Each name of a namespace's ``__all__`` and the (namespace, object) pairs it names."""
    names: dict[str, list[tuple[str, object]]] = {}
    for namespace in NAMESPACES:
        module = importlib.import_module(namespace)
        for name in module.__all__:
            names.setdefault(name, []).append((namespace, getattr(module, name)))
    return names


def test_implementation_modules_are_private() -> None:
    public = {_module_name(path) for path in PACKAGE.rglob("*.py")
              if path.name != "__init__.py" and "cli" not in path.relative_to(PACKAGE).parts[:-1]
              and not any(part.startswith("_") for part in path.relative_to(PACKAGE).with_suffix("").parts)}
    assert public == PUBLIC_MODULES, "a new public module: make it private (_name.py) and export its names"
    assert len(PUBLIC_MODULES) <= 25


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_exported_name_resolves_and_lives_in_a_private_module(namespace: str) -> None:
    module = importlib.import_module(namespace)
    assert module.__all__ and len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        if (inspect.isclass(value) or inspect.isfunction(value)) and home and home.startswith("ldpcli"):
            assert home in PUBLIC_MODULES or any(part.startswith("_") for part in home.split(".")[1:]), (
                f"{namespace}.{name} is defined in the public module {home}")


def test_one_name_one_meaning() -> None:
    definitions = _definitions()
    for name, holders in _public_names().items():
        objects = {id(value) for _, value in holders}
        assert len(objects) == 1, f"{name} names different objects in {[ns for ns, _ in holders]}"
        assert len(definitions.get(name, ())) <= 1, f"public name {name} is defined in {sorted(definitions[name])}"


def _documented_constant(name: str, value: object, namespace: str) -> bool:
    """A constant is documented by a ``#:`` comment above it, a string after it, or its module's docstring."""
    exports = exports_of(importlib.import_module(namespace).__file__ or "")
    home = exports[name][0] if name in exports else namespace
    source = inspect.getsource(importlib.import_module(home))
    if re.search(rf"#:[^\n]*\n{name}\b\s*[:=]", source) or re.search(rf"^{name}\b[^\n]*\n\"\"\"", source, re.M):
        return True
    return name in (importlib.import_module(home).__doc__ or "") + (importlib.import_module(namespace).__doc__ or "")


def test_every_public_name_is_documented() -> None:
    missing = []
    for name, holders in _public_names().items():
        namespace, value = holders[0]
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
            if not (inspect.getdoc(value) or "").strip():
                missing.append(f"{namespace}.{name}")
        elif name != "__version__" and not _documented_constant(name, value, namespace):
            missing.append(f"{namespace}.{name}")
    assert not missing, f"undocumented public names: {missing}"


def test_namespaces_load_no_pyarrow_and_no_scipy() -> None:
    """``import ldpcli.release`` (or any namespace but the mechanisms' registry) imports its names lazily."""
    lazy = [ns for ns in NAMESPACES if ns != "ldpcli.mechanisms"]
    code = f"import sys; import {', '.join(lazy)}; sys.exit(sorted({{'pyarrow', 'scipy'}} & set(sys.modules)) or 0)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_moved_table_names_every_private_module_once() -> None:
    for package, modules in _compat.MOVED.items():
        for module in modules:
            assert (PACKAGE / package / f"_{module}.py").exists(), f"ldpcli.{package}._{module}"
            assert not (PACKAGE / package / f"{module}.py").exists(), f"ldpcli.{package}.{module} is public again"
    for old, new in _compat.NEW_HOME.items():
        assert (PACKAGE.parent / (new.replace(".", "/") + ".py")).exists(), new


_CHECK_OLD_PATHS = """
import importlib, json, sys, warnings
split = json.loads(sys.argv[2])
report = {}
for old, new in json.loads(sys.argv[1]).items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    homes = {}  # each name and the module it is read from: the old module's own home first, then its split parts
    for home in [new, *split.get(old, ())]:
        for n in vars(importlib.import_module(home)):
            if not n.startswith("__"):
                homes.setdefault(n, importlib.import_module(home))
    report[old] = {"warnings": [str(w.message) for w in caught if w.category is DeprecationWarning],
                   "forwards": bool(homes) and all(getattr(module, n) is getattr(h, n) for n, h in homes.items()),
                   "dir": sorted(set(homes) - set(dir(module)))}
print(json.dumps(report))
"""


def test_every_old_module_path_warns_once_and_forwards() -> None:
    """In a fresh interpreter: each 0.1 path imports with one warning naming its namespace, and forwards."""
    result = subprocess.run([sys.executable, "-c", _CHECK_OLD_PATHS, json.dumps(_compat._OLD), json.dumps(_compat.SPLIT)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == set(_compat._OLD) and len(report) == 91  # the public modules of 0.1 but errors
    for old, seen in report.items():
        package = old.rsplit(".", 1)[0]
        assert seen["forwards"], f"{old} does not forward to {_compat._OLD[old]}"
        assert not seen["dir"], f"dir({old}) lacks {seen['dir']}"
        assert len(seen["warnings"]) == 1 and f"{old} is private" in seen["warnings"][0], (old, seen)
        assert f"from {package}" in seen["warnings"][0]


#: The public names of each module split along its seams (issue 37), as it held them before the split.
SPLIT_NAMES: dict[str, tuple[str, ...]] = {
    "ldpcli.math.sphere": (
        "LOG2", "softplus", "log_expit", "logsumexp", "log1mexp", "exp_or_inf", "expm1_or_inf", "log_expm1", "log_cosh",
        "log_tanh_half", "sphere_alpha", "gamma_from_cap_logit", "cap_logit_from_gamma", "log_beta", "log_beta_cdf_small",
        "log_cap_probability", "log_cap_probability_by_quadrature", "log_cap_gap_fraction", "log_gamma_half_ratio",
        "log_cap_normaliser", "bernoulli_logit", "sample_cap_cosines", "random_unit_vectors", "row_norms", "unit_scaled",
        "round_to_sphere", "rounded_units_into", "directions_with_cosines", "FUSED_CHUNK_VALUES", "row_chunks",
        "row_buffers", "rounded_chunks", "rounded_cap_directions"),
    "ldpcli.mechanisms.hypercube": (
        "log_binomial_pmf", "agree_min_from_kappa", "kappa_from_agree_min", "ChannelLogs", "channel_logs",
        "optimal_agree_min", "standard_exponential_exact", "invert_survival", "sample_agreements", "uniform_subsets",
        "PrivUnitInf", "DuchiLinf"),
    "ldpcli.mechanisms.rendering": (
        "SECURE_DELTA", "PROOF", "WORK", "GaussianCap", "UNIT_ROUNDOFF", "unit_roundoff",
        "require_extended_precision", "StepBounds", "step_bounds", "cap_error_sum", "GaussianBounds",
        "gaussian_bounds", "gaussian_error_sum", "Rendering", "secure_rendering", "exact_bernoulli",
        "round_to_grid", "secure_unit_rows", "orthogonal_rows", "orthogonal_part", "gaussian_combine",
        "combine_rows", "secure_privatize", "rendered_law_tests", "secured", "as_recorded"),
    "ldpcli.mechanisms.feature_levels": (
        "log_dependence_cost", "tilde_levels", "c_d_for_zeta", "c_max", "budget_vector", "bcdp_levels",
        "cdp_to_bcdp", "increments", "paper_error_proxy", "FeatureLevels", "parse_feature_levels",
        "format_levels", "canonical_coordinates", "group_summary", "sort_order"),
}


@pytest.mark.parametrize("old", sorted(SPLIT_NAMES))
def test_a_split_module_forwards_every_name_it_had(old: str) -> None:
    """An old path whose module was split still answers each name it had, with the object of its new home."""
    homes = [importlib.import_module(home) for home in (_compat._OLD[old], *_compat.SPLIT.get(old, ()))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(old)
        for name in SPLIT_NAMES[old]:
            home = next((h for h in homes if name in vars(h)), None)
            assert home is not None, f"{old}.{name} lives in none of {[h.__name__ for h in homes]}"
            assert getattr(module, name) is vars(home)[name], f"{old}.{name}"
            assert name in dir(module)
    assert set(_compat.SPLIT) <= set(SPLIT_NAMES), "name the split module's old names here"


@pytest.mark.parametrize(("old", "name"), [(old, name) for old, names in _compat.RENAMED.items() for name in names])
def test_a_renamed_name_warns_and_is_the_new_object(old: str, name: str) -> None:
    home, new = _compat.RENAMED[old][name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(old), name)
    assert value is getattr(importlib.import_module(home), new)
    assert any(f"{old}.{name} is now {home}.{new}" in str(w.message) for w in caught)
    assert not hasattr(importlib.import_module(_compat._OLD[old]), name), f"{name} still defined beside {new}"


def test_an_old_path_read_as_an_attribute_warns() -> None:
    code = ("import warnings; warnings.simplefilter('error'); import ldpcli.release\n"
            "try:\n    ldpcli.release.file\nexcept DeprecationWarning as w:\n    print(w)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "ldpcli.release.file is private" in result.stdout, result.stderr


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    import ldpcli.release

    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        ldpcli.release.nonexistent  # noqa: B018


#: The README and the site's pages that teach (tutorials, how-to guides, and the reference and explanation pages
#: that were README sections); the explanation pages at docs/ itself (architecture, errata, …) name the modules, and
#: the generated reference pages (tools/reference.py) quote the code's own docstrings and schema.
TEACHING = [README, *sorted(page for page in (PACKAGE.parent / "docs").glob("*/**/*.md")
                            if "Generated by `python tools/reference.py`" not in page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", TEACHING, ids=lambda page: page.relative_to(PACKAGE.parent).as_posix())
def test_the_readme_teaches_public_paths_only(page: Path) -> None:
    """The README and the site import from namespaces: no private module, no 0.1 path that now warns."""
    text = page.read_text(encoding="utf-8")
    assert not re.findall(r"ldpcli(?:\.\w+)*\._\w+", text)
    taught = {path for paragraph in text.split("\n\n") if "DeprecationWarning" not in paragraph  # the one naming them
              for path in re.findall(r"\bldpcli(?:\.\w+)+", paragraph)}
    assert not sorted(path for path in taught if any(path == old or path.startswith(old + ".") for old in _compat._OLD))
