"""The sidecar, schema version 2: what is written, the shipped JSON Schema, reading v2 and v1, names.

Every registered mechanism round-trips through a written sidecar (calibrated at its ``example_d``
with its declared option examples); the schema (draft 2020-12, checked with jsonschema) accepts
what ``build_sidecar`` writes; a version-1 sidecar (the flat format) still loads to the same
mechanism; tampered numbers and newer schema versions are refused with a one-line DataError
naming the file and the dotted field; no seed is ever written.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import keys_anywhere

from ldpcli._version import __version__
from ldpcli.errors import DataError
from ldpcli.io import VectorLayout
from ldpcli.mechanisms import get_mechanism, mechanism_names
from ldpcli.mechanisms._base import Mechanism
from ldpcli.release._sidecar import (
    REPRODUCIBLE_NOTE,
    SCHEMA_VERSION,
    baseline_warning,
    build_sidecar,
    find_sidecar,
    legacy_sidecar_path,
    load_sidecar,
    sidecar_path,
    sidecar_schema,
    write_sidecar,
)
from ldpcli.release._sidecar_upgrade import upgrade

SHA = "0123456789abcdef" * 4
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "ldpcli" / "schemas" / "sidecar-v2.schema.json"


def example_mechanisms() -> Iterator[tuple[str, Mechanism]]:
    """Every registered mechanism and calibration at its example d, with its declared option examples."""
    for name in mechanism_names():
        cls = get_mechanism(name)
        options = {option: spec.example for option, spec in cls.options.items()}
        for calibration in cls.calibrations:
            yield f"{name}-{calibration}", cls.calibrate(cls.example_d, 1.5, calibration=calibration, **options)
        # only the required options (the others computed or defaulted), at another bound L
        required = {option: spec.example for option, spec in cls.options.items() if spec.required}
        yield f"{name}-L2", cls.calibrate(cls.example_d, 0.7, norm_bound=2.0, **required)


EXAMPLES = dict(example_mechanisms())


def layout_for(mech: Mechanism) -> VectorLayout:
    if mech.d == 1:
        return VectorLayout("columns", ("x",), 1, ("id",))
    return VectorLayout("list", ("vec",), mech.d, ("id",))


def written(tmp_path: Path, mech: Mechanism, *, name: str = "out.parquet", n: int = 100,
            reproducible: bool = False) -> tuple[Path, dict[str, Any]]:
    """A v2 sidecar for ``mech`` written beside tmp_path/name: its path and content."""
    data = tmp_path / name
    content = build_sidecar(mech, n=n, layout=layout_for(mech), data_path=data, sha256=SHA, reproducible=reproducible)
    side = sidecar_path(data)
    write_sidecar(side, content)
    return side, content


def v1_content(mech: Mechanism, *, n: int, layout: VectorLayout, data_file: str, sha256: str) -> dict[str, Any]:
    """A sidecar as schema version 1 wrote it: every field flat at the top level."""
    content: dict[str, Any] = {"format": "ldp-sidecar", "schema_version": 1, "ldp_version": "0.1.0"}
    content.update(mech.describe())  # mechanism, calibration, d, epsilon, epsilon_exact, norm_bound, domain,
    #                                  options, parameters, scale, expected_error, expected_error_max
    content.update({
        "expected_error_mean": mech.expected_error_mean(n),
        "n": n,
        "layout": layout.to_dict(),
        "data_file": data_file,
        "sha256": sha256,
        "created": "2025-01-01T00:00:00+00:00",
        "reproducible": False,
    })
    return content


# A sidecar written by ldp 0.1.0 before schema version 2 (privunit2, d = 8, ε = 2), verbatim.
V1_FROZEN = """{
  "format": "ldp-sidecar",
  "schema_version": 1,
  "ldp_version": "0.1.0",
  "mechanism": "privunit2",
  "calibration": "optimal",
  "d": 8,
  "epsilon": 2.0,
  "epsilon_exact": 2.0,
  "norm_bound": 1.0,
  "domain": "l2-ball",
  "gamma": 0.2808820768240735,
  "p": 0.6906579816592779,
  "p_logit": 0.8031972195580934,
  "cap_probability": 0.2320444723257076,
  "log_cap_probability": -1.4608262346271261,
  "m": 0.28088207682407346,
  "scale": 3.560212923896657,
  "expected_error": 11.675116063480788,
  "expected_error_max": 12.675116063480784,
  "expected_error_mean": 0.02535023212696157,
  "n": 500,
  "layout": {
    "kind": "list",
    "columns": [
      "vec"
    ],
    "d": 8,
    "keep": [
      "id"
    ]
  },
  "data_file": "emb.privatized.parquet",
  "sha256": "abababababababababababababababababababababababababababababababab",
  "created": "2026-11-23T16:21:53+00:00",
  "reproducible": false
}
"""


def validator() -> Any:
    schema = sidecar_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def refused(side: Path) -> str:
    with pytest.raises(DataError) as excinfo:
        load_sidecar(side)
    text = str(excinfo.value)
    assert text.startswith(f"{side}: ") and "\n" not in text
    return text


# --- the schema ---------------------------------------------------------------------------------


def test_the_schema_ships_in_the_package_and_is_a_valid_draft_2020_12_schema() -> None:
    assert SCHEMA_FILE.is_file()
    schema = sidecar_schema()
    assert schema == json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION}


@pytest.mark.parametrize("case", list(EXAMPLES))
@pytest.mark.parametrize("reproducible", [False, True])
def test_written_sidecars_validate_against_the_schema(tmp_path: Path, case: str, reproducible: bool) -> None:
    side, content = written(tmp_path, EXAMPLES[case], reproducible=reproducible)
    on_disk = json.loads(side.read_text(encoding="utf-8"))
    assert on_disk == content
    errors = sorted(validator().iter_errors(on_disk), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]


def test_the_schema_is_strict(tmp_path: Path) -> None:
    _, content = written(tmp_path, EXAMPLES["privunit2-optimal"])
    check = validator()
    assert check.is_valid(content)

    def broken(edit: Any) -> dict[str, Any]:
        changed = copy.deepcopy(content)
        edit(changed)
        return changed

    bad = [
        lambda c: c.update(extra=1),  # top level: no unknown keys
        lambda c: c.pop("release"),
        lambda c: c["tool"].update(extra=1),
        lambda c: c["data"].update(seed=5),
        lambda c: c["release"].update(n_clipped=3),
        lambda c: c["release"].update(note="seeded"),  # a note only for reproducible runs
        lambda c: c["data"].pop("sha256"),
        lambda c: c["data"].update(sha256="ABC"),
        lambda c: c["data"].update(n=0),
        lambda c: c["data"].update(format="json"),
        lambda c: c["data"]["layout"].update(kind="rows"),
        lambda c: c["mechanism"].pop("epsilon_exact"),
        lambda c: c["mechanism"]["spec"].update(epsilon="2"),
        lambda c: c["mechanism"]["spec"].pop("options"),
        lambda c: c["mechanism"]["parameters"].update(gamma=[0.5]),
        lambda c: c["mechanism"].update(d=2.5),
        lambda c: c.update(schema_version=1),
        lambda c: c["data"].update(dtype="float16"),
        lambda c: c["mechanism"].update(baseline="yes"),
        lambda c: c["release"].update(unprivatized_columns="id"),
        lambda c: c["release"].update(unprivatized_columns=[""]),
        lambda c: c["release"].update(warnings=[1]),
        lambda c: c["release"].update(warnings="a warning"),
    ]
    for i, edit in enumerate(bad):
        assert not check.is_valid(broken(edit)), i
    seeded = written(tmp_path, EXAMPLES["privunit2-optimal"], name="s.parquet", reproducible=True)[1]
    assert check.is_valid(seeded)
    del seeded["release"]["note"]
    assert not check.is_valid(seeded)
    # v2 sidecars written before data.dtype, mechanism.baseline, release.unprivatized_columns and
    # release.warnings existed still validate
    older = copy.deepcopy(content)
    del older["data"]["dtype"], older["mechanism"]["baseline"]
    del older["release"]["unprivatized_columns"], older["release"]["warnings"]
    assert check.is_valid(older)


@pytest.mark.parametrize("rng", ["pcg64", "chacha20", "secure"])
@pytest.mark.parametrize("reproducible", [False, True])
def test_the_randomness_record_names_the_generator_and_its_entropy(tmp_path: Path, rng: str, reproducible: bool) -> None:
    """release.randomness (issue 29 item 3): which bit generator drew the noise, its package and version,
    whether it is cryptographic, and where its entropy came from; never the seed or a key."""
    import randomgen

    mech = EXAMPLES["privunit2-optimal"]
    content = build_sidecar(mech, n=3, layout=layout_for(mech), data_path=tmp_path / "r.parquet", sha256=SHA,
                            reproducible=reproducible, rng=rng)
    record = content["release"]["randomness"]
    entropy = "chosen by the user: not for release" if reproducible else "from the OS"
    expected = {
        "secure": {"bit_generator": "ChaCha", "package": "randomgen", "version": randomgen.__version__, "rounds": 20,
                   "cryptographic": True},
        "chacha20": {"bit_generator": "ChaCha20", "package": "ldp", "version": __version__, "rounds": 20,
                     "cryptographic": True},
        "pcg64": {"bit_generator": "PCG64", "package": "numpy", "version": np.__version__, "cryptographic": False},
    }[rng]
    assert record == {**expected, "entropy": entropy, "kernel": record["kernel"]}
    check = validator()
    assert check.is_valid(content)
    bad = [
        lambda r: r.update(bit_generator="MT19937"),
        lambda r: r.update(entropy="seed 5"),
        lambda r: r.update(key="00ff"),
        lambda r: r.update(rounds=8),
    ]
    if rng != "pcg64":
        bad += [lambda r: r.update(cryptographic=False), lambda r: r.pop("rounds"), lambda r: r.pop("entropy")]
    for i, edit in enumerate(bad):
        changed = copy.deepcopy(content)
        edit(changed["release"]["randomness"])
        assert not check.is_valid(changed), i
    older = copy.deepcopy(content)  # as written before rng "secure": the bit generator and the kernel only
    older["release"]["randomness"] = {"bit_generator": "PCG64", "kernel": record["kernel"]}
    assert check.is_valid(older)


@pytest.mark.parametrize("case", list(EXAMPLES))
def test_written_sidecars_record_the_dtype_the_kept_columns_and_the_baseline(tmp_path: Path, case: str) -> None:
    mech = EXAMPLES[case]
    _, content = written(tmp_path, mech)
    assert content["data"]["dtype"] == "float64"
    assert content["release"]["unprivatized_columns"] == list(layout_for(mech).keep)
    assert content["mechanism"]["baseline"] is type(mech).baseline
    assert content["release"]["warnings"] == ([baseline_warning(mech)] if type(mech).baseline else [])
    data = tmp_path / "f.parquet"
    f32 = build_sidecar(mech, n=3, layout=layout_for(mech), data_path=data, sha256=SHA, reproducible=False,
                        dtype="float32", warnings=["w"])
    assert f32["data"]["dtype"] == "float32" and f32["release"]["warnings"][-1] == "w"
    assert validator().is_valid(f32)


# --- what is written ----------------------------------------------------------------------------


def test_v2_layout_of_the_sections(tmp_path: Path) -> None:
    mech = EXAMPLES["gaussian-analytic"]
    side, content = written(tmp_path, mech, name="g.csv", n=40, reproducible=True)
    assert side.name == "g.csv.ldp.json"
    assert list(content) == ["format", "schema_version", "tool", "mechanism", "data", "release"]
    assert content["format"] == "ldp-sidecar" and content["schema_version"] == 2
    assert content["tool"] == {"name": "ldp", "version": __version__}
    section = content["mechanism"]
    assert section["spec"] == mech.spec.to_dict()
    assert section["d"] == mech.d and section["title"] == mech.title and section["domain"] == str(mech.domain)
    assert section["parameters"] == mech.parameters()
    assert section["epsilon_exact"] == mech.epsilon_exact and section["scale"] == mech.scale
    assert section["expected_error"] == mech.expected_error
    assert section["expected_error_max"] == mech.expected_error_max
    assert section["parameters"]["delta_exact"] > 0
    assert content["data"] == {"file": "g.csv", "sha256": SHA, "n": 40, "d": mech.d,
                               "layout": layout_for(mech).to_dict(), "format": "csv", "dtype": "float64"}
    assert section["baseline"] is True  # gaussian
    release = content["release"]
    assert release["unprivatized_columns"] == ["id"] and len(release["warnings"]) == 1
    assert release["reproducible"] is True and "not for release" in release["note"]
    assert release["expected_error_mean"] == pytest.approx(mech.expected_error_max / 40)
    assert release["created"].endswith("+00:00") and len(release["created"]) == len("2025-01-01T00:00:00+00:00")
    assert "note" not in written(tmp_path, mech, name="h.parquet")[1]["release"]
    assert written(tmp_path, mech, name="h.pq")[1]["data"]["format"] == "parquet"


@pytest.mark.parametrize("case", list(EXAMPLES))
def test_nothing_describe_reports_is_lost(tmp_path: Path, case: str) -> None:
    mech = EXAMPLES[case]
    section = written(tmp_path, mech)[1]["mechanism"]
    spec = section["spec"]
    found = {"mechanism": spec["name"], "calibration": spec["calibration"], "epsilon": spec["epsilon"],
             "norm_bound": spec["norm_bound"], **spec["options"], **section["parameters"],
             **{k: v for k, v in section.items() if k not in ("spec", "parameters", "title")}}
    for key, value in mech.describe().items():
        assert key in found, key
        assert found[key] == value, key


def test_a_seeded_sidecar_holds_no_seed(tmp_path: Path) -> None:
    for case, mech in EXAMPLES.items():
        side, content = written(tmp_path, mech, name=f"{case}.parquet", reproducible=True)
        assert not [key for key in keys_anywhere(content) if "seed" in key.lower()], case
        assert "seed" not in side.read_text(encoding="utf-8").replace(REPRODUCIBLE_NOTE, ""), case


def test_a_seeded_privatization_writes_neither_the_seed_nor_clipped_counts(tmp_path: Path) -> None:
    from ldpcli.release._file import write_file_release
    from ldpcli.release._options import ReleaseOptions

    src = tmp_path / "x.parquet"
    x = np.random.default_rng(0).standard_normal((50, 4))  # most rows outside the unit ball: clipped
    pq.write_table(pa.table({"vec": pa.array(list(x), pa.list_(pa.float64(), 4))}), src)
    result = write_file_release(src, epsilon=1.0, options=ReleaseOptions(seed=987654321, fail_on_clip=1.0))
    assert result.sidecar == sidecar_path(result.output) == tmp_path / "x.privatized.parquet.ldp.json"
    text = result.sidecar.read_text(encoding="utf-8")
    content = json.loads(text)
    assert "987654321" not in text
    assert not [key for key in keys_anywhere(content) if "seed" in key.lower() or "clip" in key.lower()]
    assert content["release"]["reproducible"] is True
    validator().validate(content)
    meta = load_sidecar(result.sidecar)
    assert meta.mechanism == result.mechanism and meta.n == 50 and meta.data_file == "x.privatized.parquet"


def test_csv_and_parquet_outputs_of_one_stem_have_their_own_sidecars(tmp_path: Path) -> None:
    from ldpcli.release._file import write_file_release

    src = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.2, -0.3], "b": [0.0, 0.5, 0.1]}), src)
    outs = [write_file_release(src, tmp_path / f"out{suffix}", epsilon=1.0) for suffix in (".csv", ".parquet")]
    assert [o.sidecar.name for o in outs] == ["out.csv.ldp.json", "out.parquet.ldp.json"]
    for out, fmt in zip(outs, ("csv", "parquet")):
        meta = load_sidecar(out.sidecar)
        assert meta.data_file == out.output.name and meta.content["data"]["format"] == fmt
        validator().validate(meta.content)


# --- reading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(EXAMPLES))
def test_v2_round_trip_for_every_mechanism(tmp_path: Path, case: str) -> None:
    mech = EXAMPLES[case]
    side, _ = written(tmp_path, mech, n=7)
    meta = load_sidecar(side)
    assert meta.version == 2 and meta.path == side
    assert meta.mechanism == mech and meta.mechanism.describe() == mech.describe()
    assert meta.spec == mech.spec and meta.spec.calibrate(mech.d) == mech
    assert meta.n == 7 and meta.d == mech.d and meta.sha256 == SHA and meta.data_file == "out.parquet"
    assert meta.layout == layout_for(mech)
    assert meta.dtype == "float64" and meta.dtype_recorded and meta.unprivatized_columns == meta.layout.keep
    assert meta.baseline is type(mech).baseline and len(meta.warnings) == int(type(mech).baseline)


@pytest.mark.parametrize("case", list(EXAMPLES))
def test_a_v1_sidecar_loads_to_an_equal_mechanism(tmp_path: Path, case: str) -> None:
    mech = EXAMPLES[case]
    side = tmp_path / "old.ldp.json"
    content = v1_content(mech, n=12, layout=layout_for(mech), data_file="old.parquet", sha256=SHA)
    side.write_text(json.dumps(content, indent=2, allow_nan=False))
    meta = load_sidecar(side)
    assert meta.version == 1
    assert meta.mechanism == mech and meta.spec == mech.spec
    assert meta.n == 12 and meta.d == mech.d and meta.sha256 == SHA and meta.data_file == "old.parquet"
    assert meta.layout == layout_for(mech) and meta.content == content
    assert meta.dtype == "float64" and not meta.dtype_recorded and meta.unprivatized_columns == ("id",)
    assert meta.warnings == () and meta.baseline is type(mech).baseline


def test_a_frozen_v1_sidecar_still_loads(tmp_path: Path) -> None:
    side = tmp_path / "emb.privatized.ldp.json"
    side.write_text(V1_FROZEN)
    meta = load_sidecar(side)
    assert meta.version == 1 and meta.mechanism == get_mechanism("privunit2").calibrate(8, 2.0)
    assert meta.n == 500 and meta.data_file == "emb.privatized.parquet" and meta.sha256 == "ab" * 32
    assert meta.layout == VectorLayout("list", ("vec",), 8, ("id",))


def test_the_one_adapter_reads_a_v1_sidecar_as_the_current_layout_and_names_its_flat_fields(tmp_path: Path) -> None:
    """Every older layout is read through ``upgrade``: a v1 document's view has its fields in the v2 sections
    (the content itself untouched), a v2 document is its own view."""
    content = json.loads(V1_FROZEN)
    view, named = upgrade(content, 1)
    assert view["data"]["n"] == 500 and view["data"]["d"] == view["mechanism"]["d"] == 8
    assert view["mechanism"]["spec"] == {"name": "privunit2", "epsilon": 2.0, "norm_bound": content["norm_bound"],
                                         "calibration": content["calibration"], "options": {}}
    assert view["mechanism"]["parameters"]["gamma"] == view["mechanism"]["gamma"] == content["gamma"]
    assert "release" not in view and content == json.loads(V1_FROZEN)
    assert named("data.n") == "n" and named("mechanism.parameters.gamma") == "gamma" and named("x.y") == "x.y"
    _, current = written(tmp_path, EXAMPLES[next(iter(EXAMPLES))])
    same, named = upgrade(current, 2)
    assert same is current and named("data.n") == "data.n"


@pytest.mark.parametrize(
    "field, fragment",
    [("gamma", "'gamma'"), ("epsilon_exact", "'epsilon_exact'"), ("epsilon", "'epsilon_exact'"),
     ("n", "'n'"), ("mechanism", "describes no valid mechanism")],
)
def test_a_tampered_v1_sidecar_is_refused_naming_the_flat_field(tmp_path: Path, field: str, fragment: str) -> None:
    side = tmp_path / "emb.privatized.ldp.json"
    content = json.loads(V1_FROZEN)
    content[field] = {"gamma": 0.5, "epsilon_exact": 1.5, "epsilon": 3.0, "n": 0, "mechanism": "privunit3"}[field]
    side.write_text(json.dumps(content))
    assert fragment in refused(side)


@pytest.mark.parametrize(
    "dotted, value",
    [("mechanism.epsilon_exact", 0.5), ("mechanism.parameters.gamma", 0.5), ("mechanism.parameters.p", 0.9),
     ("mechanism.scale", 1.0), ("mechanism.expected_error_max", 1.0)],
)
def test_a_tampered_v2_number_is_refused_naming_the_dotted_field(tmp_path: Path, dotted: str, value: float) -> None:
    side, content = written(tmp_path, EXAMPLES["privunit2-optimal"])
    node = content
    *parents, last = dotted.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    side.write_text(json.dumps(content))
    text = refused(side)
    assert f"field {dotted!r} is {value!r} but the recorded parameters give" in text


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda c: c["mechanism"]["parameters"].pop("gamma"), "'mechanism.parameters.gamma' is None"),
        (lambda c: c["mechanism"].pop("parameters"), "'mechanism.parameters' is missing or malformed"),
        (lambda c: c["mechanism"]["spec"].update(name=5), "'mechanism.spec.name' is missing or malformed"),
        (lambda c: c["mechanism"]["spec"].update(epsilon="2"), "'mechanism.spec.epsilon' is missing or malformed"),
        (lambda c: c["mechanism"]["spec"].update(norm_bound=None), "'mechanism.spec.norm_bound' is missing"),
        (lambda c: c["mechanism"]["spec"].update(calibration=["optimal"]), "'mechanism.spec.calibration' is missing"),
        (lambda c: c["mechanism"]["spec"].update(options=[]), "'mechanism.spec.options' is missing or malformed"),
        (lambda c: c["mechanism"]["spec"].update(options={"k": 3}), "describes no valid mechanism"),
        (lambda c: c["mechanism"]["spec"].update(name="privunit3"), "describes no valid mechanism"),
        (lambda c: c["mechanism"].update(d=True), "'mechanism.d' is missing or malformed"),
        (lambda c: c["mechanism"].update(d=10**30), "describes no valid mechanism"),
        (lambda c: c.update(mechanism="privunit2"), "'mechanism' is missing or malformed"),
        (lambda c: c.pop("data"), "'data' is missing or malformed"),
        (lambda c: c["data"].update(n=0), "field 'data.n' must be >= 1"),
        (lambda c: c["data"].update(n="100"), "'data.n' is missing or malformed"),
        (lambda c: c["data"].update(sha256="xyz"), "'data.sha256' is not a SHA-256 hex digest"),
        (lambda c: c["data"].pop("file"), "'data.file' is missing or malformed"),
        (lambda c: c["data"].update(d=5), "field 'data.d' is 5 but the mechanism has d = 8"),
        (lambda c: c["data"]["layout"].update(d=5, columns=["a", "b", "c", "d", "e"], kind="columns"),
         "the layout has d = 5"),
        (lambda c: c["data"].update(layout=[]), "'data.layout' is missing or malformed"),
        (lambda c: c.update(schema_version="2"), "'schema_version' is missing or malformed"),
        (lambda c: c.update(schema_version=0), "'schema_version' is missing or malformed"),
        (lambda c: c.pop("schema_version"), "'schema_version' is missing or malformed"),
    ],
)
def test_a_damaged_v2_sidecar_is_refused_in_one_line(tmp_path: Path, edit: Any, fragment: str) -> None:
    side, content = written(tmp_path, EXAMPLES["privunit2-optimal"])
    edit(content)
    side.write_text(json.dumps(content))
    text = refused(side)
    assert fragment in text, text


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    side, content = written(tmp_path, EXAMPLES["privunit2-optimal"])
    content["schema_version"] = 3
    side.write_text(json.dumps(content))
    text = refused(side)
    assert "schema_version 3" in text and "newer ldp" in text and "upgrade" in text


def test_unknown_extra_keys_are_ignored_when_reading(tmp_path: Path) -> None:
    mech = EXAMPLES["separated-optimal"]
    side, content = written(tmp_path, mech)
    content["zzz"] = {"nested": [1, None]}
    content["mechanism"]["comment"] = "by hand"
    content["tool"]["version"] = "99.0"
    content["release"]["extra"] = True
    side.write_text(json.dumps(content))
    assert load_sidecar(side).mechanism == mech


def test_no_such_sidecar(tmp_path: Path) -> None:
    side = tmp_path / "x.parquet.ldp.json"
    assert "no such sidecar" in refused(side)


def test_a_data_file_given_as_a_sidecar_is_named_with_its_sidecar(tmp_path: Path) -> None:
    side, _ = written(tmp_path, EXAMPLES["privunit2-optimal"], name="out.parquet")
    data = tmp_path / "out.parquet"
    pq.write_table(pa.table({"a": [0.5]}), data)
    text = refused(data)
    assert "is a Parquet file, not an ldp sidecar" in text and f"its sidecar is {side}: pass that as sidecar" in text
    assert "utf-8" not in text and "restore" not in text


@pytest.mark.parametrize("name, content, kind", [
    ("raw.parquet", None, "a Parquet file"),
    ("raw.csv", b"a,b\n0.1,0.2\n", "a .csv file"),
    ("raw.bin", bytes(range(256)), "a binary file"),
    ("raw.txt", b"a,b\n0.1,0.2\n", "text that is not JSON"),
])
def test_a_file_that_never_was_a_sidecar_is_not_to_be_restored(
    tmp_path: Path, name: str, content: bytes | None, kind: str
) -> None:
    data = tmp_path / name
    if content is None:
        pq.write_table(pa.table({"a": [0.5]}), data)
    else:
        data.write_bytes(content)
    text = refused(data)
    assert f"is {kind}, not an ldp sidecar" in text and f"it has no sidecar beside it ({name}.ldp.json)" in text
    assert "restore" not in text


@pytest.mark.parametrize("content", [b'{"format": "ldp-sidecar", "schema', b"", b"\xef\xbb\xbf {\xff"])
def test_a_damaged_sidecar_is_still_to_be_restored(tmp_path: Path, content: bytes) -> None:
    side = tmp_path / "out.parquet.ldp.json"
    side.write_bytes(content)
    text = refused(side)
    assert "not a readable ldp sidecar" in text and "restore it from the privatize run" in text


# --- names --------------------------------------------------------------------------------------


def test_sidecar_path_appends_to_the_whole_name(tmp_path: Path) -> None:
    assert sidecar_path(tmp_path / "out.parquet") == tmp_path / "out.parquet.ldp.json"
    assert sidecar_path("out.csv") == Path("out.csv.ldp.json")
    assert sidecar_path("a/b.privatized.pq") == Path("a/b.privatized.pq.ldp.json")
    assert sidecar_path("out.csv") != sidecar_path("out.parquet")
    assert legacy_sidecar_path("a/out.parquet") == Path("a/out.ldp.json")


def test_find_sidecar_prefers_the_new_name_and_falls_back_to_the_old(tmp_path: Path) -> None:
    data = tmp_path / "out.parquet"
    new, old = tmp_path / "out.parquet.ldp.json", tmp_path / "out.ldp.json"
    assert find_sidecar(data) == new  # neither exists: the new name, for the error message
    old.write_text("{}")
    assert find_sidecar(data) == old
    new.write_text("{}")
    assert find_sidecar(data) == new
    old.unlink()
    assert find_sidecar(data) == new
    assert find_sidecar(str(data)) == new


def test_a_v1_sidecar_under_the_old_name_is_found_and_read(tmp_path: Path) -> None:
    data = tmp_path / "emb.privatized.parquet"
    (tmp_path / "emb.privatized.ldp.json").write_text(V1_FROZEN)
    meta = load_sidecar(find_sidecar(data))
    assert meta.version == 1 and meta.data_file == data.name


def test_estimate_mean_reads_a_v1_sidecar_under_the_old_name(tmp_path: Path) -> None:
    """A file privatized before schema version 2: ``<stem>.ldp.json``, flat fields."""
    from ldpcli.analysis._estimate import estimate_file_mean
    from ldpcli.release._file import write_file_release

    src = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": [0.1, 0.2, -0.3, 0.4], "b": [0.0, 0.5, 0.1, -0.2]}), src)
    result = write_file_release(src, epsilon=1.0)
    fresh = estimate_file_mean(result.output)
    meta = load_sidecar(result.sidecar)
    old = legacy_sidecar_path(result.output)
    old.write_text(json.dumps(v1_content(meta.mechanism, n=meta.n, layout=meta.layout, data_file=meta.data_file,
                                         sha256=meta.sha256)))
    result.sidecar.unlink()
    assert find_sidecar(result.output) == old
    again = estimate_file_mean(result.output)
    assert again.n == fresh.n and np.array_equal(again.mean, fresh.mean)
    assert again.expected_error == fresh.expected_error
