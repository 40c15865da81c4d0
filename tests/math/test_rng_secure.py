"""Cryptographically secure randomness (issue 29 item 3): ldpcli.math._bitgen's ChaCha20 generators, the key
blocks under `rng="secure"`, and `ldp privatize --rng secure` with its sidecar record."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from helpers import bonferroni_z, ldp, ldp_without, read_list, unit_rows, write_list
from scipy import stats

from ldpcli.errors import MissingDependency, UsageError
from ldpcli.learn._train import train
from ldpcli.math._bitgen import ENTROPY_FROM_OS, ENTROPY_FROM_USER, describe_generator, secure_generator
from ldpcli.math._chacha20 import KEY_TAG, secure_key
from ldpcli.math._counter_rng import CounterGenerator
from ldpcli.release._dataset import write_dataset_release
from ldpcli.release._file import write_file_release
from ldpcli.release._inputs import MANIFEST_NAME
from ldpcli.release._options import ReleaseOptions, Resources
from ldpcli.release._randomness import keyed_generator, root_seed
from ldpcli.release._sidecar import load_sidecar, sidecar_path

# --------------------------------------------------------------------------- the generator


def test_unseeded_generators_differ() -> None:
    """Each unseeded generator has its own 256-bit key from the OS: two draws of 4 words never agree."""
    first, second = secure_generator().integers(0, 2**32, 4), secure_generator().integers(0, 2**32, 4)
    assert not np.array_equal(first, second)
    assert secure_key() != secure_key() and len(secure_key()) == 32


def test_a_seed_reproduces_the_stream() -> None:
    assert np.array_equal(secure_generator(7).standard_normal(5), secure_generator(7).standard_normal(5))
    assert not np.array_equal(secure_generator(7).standard_normal(5), secure_generator(8).standard_normal(5))
    # an int seed is its SeedSequence
    assert secure_key(7) == secure_key(np.random.SeedSequence(7))


def test_the_generator_is_chacha20_keyed_by_the_hmac_of_the_spawn_key() -> None:
    """The key derivation the module documents: HMAC-SHA256(encode(entropy), tag ‖ encode(spawn key))."""
    seq = np.random.SeedSequence(5, spawn_key=(1, 300))
    expected = hmac.digest(bytes([1, 5]), KEY_TAG + bytes([1, 1, 2]) + (300).to_bytes(2, "little"), hashlib.sha256)
    assert secure_key(seq) == expected
    state = secure_generator(seq).bit_generator.state
    assert state["bit_generator"].endswith("ChaCha") and state["state"]["rounds"] == 20
    key_words = np.frombuffer(expected, dtype="<u4")
    assert np.array_equal(state["state"]["keysetup"], key_words)


def test_spawned_children_have_independent_keys() -> None:
    root = np.random.SeedSequence(11)
    keys = {secure_key(child) for child in root.spawn(4)} | {secure_key(root)}
    assert len(keys) == 5
    # the encoding is injective: spawn keys (1, 23) and (12, 3) must not collide
    assert secure_key(np.random.SeedSequence(1, spawn_key=(1, 23))) != secure_key(np.random.SeedSequence(1, spawn_key=(12, 3)))


def test_uniform_words_pass_a_chi_square_test() -> None:
    """Seeded: 2¹⁷ draws in 64 equal bins. Under uniformity the statistic is χ²(63); it passes at
    α = 10⁻³ (a fixed seed, so the test is deterministic; a biased generator fails it)."""
    counts = np.bincount(secure_generator(2029).integers(0, 64, 2**17), minlength=64)
    assert stats.chisquare(counts).pvalue > 1e-3
    normals = secure_generator(2030).standard_normal(20_000)
    assert stats.kstest(normals, "norm").pvalue > 1e-3


def test_rejects_bad_seeds() -> None:
    with pytest.raises(ValueError, match="`seed` must be a non-negative"):
        secure_generator(-1)
    with pytest.raises(TypeError, match="`seed` must be"):
        secure_generator(1.5)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- what a release records


def test_describe_names_the_generator_never_its_key() -> None:
    import randomgen

    generator = secure_generator(3)
    record = describe_generator(generator, seeded=True)
    assert record == {"bit_generator": "ChaCha", "package": "randomgen", "version": randomgen.__version__,
                      "rounds": 20, "cryptographic": True, "entropy": ENTROPY_FROM_USER}
    key = secure_key(3)
    assert str(int.from_bytes(key, "little")) not in str(record) and key.hex() not in str(record)
    pcg = describe_generator(np.random.default_rng(), seeded=False)
    assert pcg == {"bit_generator": "PCG64", "package": "numpy", "version": np.__version__,
                   "cryptographic": False, "entropy": ENTROPY_FROM_OS}


# --------------------------------------------------------------------------- without randomgen


def test_a_missing_randomgen_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "randomgen", None)  # `import randomgen` now raises ImportError
    with pytest.raises(MissingDependency, match=r"pip install 'ldp\[secure\]'") as caught:
        secure_generator()
    assert caught.value.exit_code == 1


def test_importing_the_module_does_not_load_randomgen() -> None:
    code = "import sys, ldpcli.math._bitgen; sys.exit('randomgen' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# --------------------------------------------------------------------------- keyed blocks under rng="secure"


def test_a_secure_keyed_stream_is_chacha20_of_the_blocks_seed_sequence() -> None:
    root = root_seed(7)
    ours = keyed_generator(root, 1, 2, rng="secure")
    child = np.random.SeedSequence(root.entropy, spawn_key=(1, 2))
    assert np.array_equal(ours.integers(0, 2**32, 4), secure_generator(child).integers(0, 2**32, 4))
    assert type(ours.bit_generator).__name__ == "ChaCha"
    with pytest.raises(UsageError, match="rng must be one of pcg64, chacha20, secure"):
        keyed_generator(root, rng="mt19937")


def test_an_unseeded_root_holds_256_bits_from_the_os() -> None:
    """The root keys every block's ChaCha20 (HMAC-SHA256 under it): 128 bits, numpy's default, would cap the key."""
    roots = [root_seed(None).entropy for _ in range(4)]
    assert len(set(roots)) == 4 and max(int(e).bit_length() for e in roots) > 240  # type: ignore[arg-type]


# --------------------------------------------------------------------------- privatize --rng secure


#: The two cryptographic generators: randomgen's ChaCha20 and ldp's own counter-based ChaCha20 stream.
CRYPTOGRAPHIC = ["secure", "chacha20"]


def secure_options(rng: str = "secure", **changes: Any) -> ReleaseOptions:
    return ReleaseOptions(seed=11, rng=rng, **changes)


@pytest.mark.parametrize("rng", CRYPTOGRAPHIC)
def test_a_seeded_secure_run_is_the_same_bits_whatever_the_threads_batches_and_layout(tmp_path: Path, rng: str) -> None:
    src = tmp_path / "in.parquet"
    write_list(src, unit_rows(3000, 64, seed=1), row_group_size=700)  # d = 64: key blocks of 16384 rows
    src_short = tmp_path / "short.parquet"
    write_list(src_short, unit_rows(3000, 8, seed=2), row_group_size=700)  # d = 8: key blocks of 512 rows
    for source in (src, src_short):
        outputs = []
        for threads, batch_rows in ((1, None), (2, None), (1, 512), (2, 1024)):
            out = tmp_path / f"{source.stem}-{threads}-{batch_rows}.parquet"
            write_file_release(source, out, epsilon=4.0,
                           options=secure_options(rng, resources=Resources(threads=threads, batch_rows=batch_rows)))
            outputs.append(read_list(out))
        for other in outputs[1:]:
            assert np.array_equal(outputs[0], other)
        dataset = tmp_path / f"{source.stem}-dataset"
        write_dataset_release([source], dataset, engine=None, epsilon=4.0,
                              options=secure_options(rng, resources=Resources(threads=2)))
        manifest = json.loads((dataset / MANIFEST_NAME).read_text())
        parts = np.concatenate([read_list(dataset / part["file"]) for part in manifest["parts"]])
        assert np.array_equal(parts, outputs[0])
        # the same seed under PCG64 gives other noise: the generator really changed
        pcg = write_file_release(source, tmp_path / f"{source.stem}-pcg.parquet", epsilon=4.0,
                                 options=ReleaseOptions(seed=11, rng="pcg64"))
        assert not np.array_equal(read_list(pcg.output), outputs[0])


@pytest.mark.parametrize("rng", CRYPTOGRAPHIC)
def test_unseeded_secure_runs_differ(tmp_path: Path, rng: str) -> None:
    src = tmp_path / "in.parquet"
    write_list(src, unit_rows(50, 4))
    first, second = (read_list(write_file_release(src, tmp_path / f"{i}.parquet", epsilon=2.0,
                                              options=ReleaseOptions(rng=rng)).output) for i in range(2))
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("rng", CRYPTOGRAPHIC)
def test_secure_noise_is_unbiased(tmp_path: Path, rng: str) -> None:
    """n = 20000 copies of one row x (d = 6, privunit2, ε = 4) under ChaCha20: each coordinate's mean must lie
    within z·σ̂_j/√n of x_j, z the Bonferroni threshold for 6 two-sided tests at family level 10⁻⁴ (σ̂_j the
    coordinate's sample deviation: the mean's sampling error; a fixed seed, so the test is deterministic)."""
    n, d = 20_000, 6
    x = unit_rows(1, d, seed=3)[0] * 0.9
    src = tmp_path / "in.parquet"
    write_list(src, np.tile(x, (n, 1)))
    z = read_list(write_file_release(src, epsilon=4.0, options=ReleaseOptions(seed=2029, rng=rng)).output)
    scores = (z.mean(axis=0) - x) / (z.std(axis=0, ddof=1) / np.sqrt(n))
    assert np.all(np.abs(scores) < bonferroni_z(1e-4, d)), scores


def test_the_cli_records_the_secure_generator_in_the_sidecar(tmp_path: Path) -> None:
    import randomgen

    src = tmp_path / "in.parquet"
    write_list(src, unit_rows(40, 5))
    for seed, entropy in ((None, ENTROPY_FROM_OS), (3, ENTROPY_FROM_USER)):
        out = tmp_path / f"out-{seed}.parquet"
        result = ldp("privatize", src, "-o", out, "--eps", 2, "--rng", "secure", *(("--seed", seed) if seed else ()),
                     "-q")
        assert result.exit_code == 0, result.output
        record = load_sidecar(sidecar_path(out)).content["release"]["randomness"]
        assert record["bit_generator"] == "ChaCha" and record["rounds"] == 20 and record["cryptographic"] is True
        assert record["version"] == randomgen.__version__ and record["entropy"] == entropy
    default, pcg = tmp_path / "default.parquet", tmp_path / "pcg.parquet"
    assert ldp("privatize", src, "-o", default, "--eps", 2, "-q").exit_code == 0
    assert load_sidecar(sidecar_path(default)).content["release"]["randomness"]["bit_generator"] == "ChaCha20"
    assert ldp("privatize", src, "-o", pcg, "--eps", 2, "--rng", "pcg64", "-q").exit_code == 0
    assert load_sidecar(sidecar_path(pcg)).content["release"]["randomness"]["bit_generator"] == "PCG64"
    bad = ldp("privatize", src, "-o", tmp_path / "bad.parquet", "--eps", 2, "--rng", "chacha")
    assert bad.exit_code == 2 and "--rng must be one of pcg64, chacha20, secure" in bad.stderr


@pytest.mark.slow
def test_without_randomgen_rng_secure_names_the_extra_and_pcg64_still_runs(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    write_list(src, unit_rows(20, 3))

    def without(*args: Any) -> subprocess.CompletedProcess[str]:
        return ldp_without("randomgen", *args, ledger=tmp_path / "l" / "ledger.json")

    refused = without("privatize", src, "-o", tmp_path / "s.parquet", "--eps", 2, "--rng", "secure")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        "ldp: error: cryptographically secure randomness (ChaCha20) needs the randomgen package, which is not "
        "installed: pip install 'ldp[secure]' (from a clone of ldp: pip install -e '.[secure]')"]
    assert not (tmp_path / "s.parquet").exists()
    assert without("privatize", src, "-o", tmp_path / "p.parquet", "--eps", 2, "-q").returncode == 0


def test_train_draws_from_the_rng_it_is_given_never_ignoring_it(tmp_path: Path) -> None:
    """ldp train's noise comes from ReleaseOptions.rng (ldp's ChaCha20 stream by default): "secure" is honoured and
    stated in the model's sidecar, never ignored; one seed under two generators gives two models."""
    rows = unit_rows(50, 4)
    src = write_list(tmp_path / "x.parquet", rows, label=pa.array(np.arange(50) % 2))
    models = {}
    for rng in ("secure", "chacha20"):
        result = train(src, tmp_path / f"{rng}.json", label="label", epsilon=1.0,
                       options=ReleaseOptions(rng=rng, seed=4))
        models[rng] = result.theta
        randomness = json.loads((tmp_path / f"{rng}.json.ldp.json").read_text())["release"]["randomness"]
        assert randomness["bit_generator"] == ("ChaCha" if rng == "secure" else "ChaCha20")
        assert randomness["cryptographic"] is True and randomness["entropy"] == ENTROPY_FROM_USER
    assert not np.array_equal(models["secure"], models["chacha20"])


# --------------------------------------------------------------------------- ldp's own stream: rng="chacha20"


def test_a_chacha20_keyed_stream_is_the_counter_stream_under_the_blocks_secure_key() -> None:
    root = root_seed(7)
    ours = keyed_generator(root, 1, 2, rng="chacha20")
    key = secure_key(np.random.SeedSequence(root.entropy, spawn_key=(1, 2)))
    assert np.array_equal(ours.random(50), CounterGenerator(key).random(50))
    assert not np.array_equal(keyed_generator(root, 1, 3, rng="chacha20").random(50), CounterGenerator(key).random(50))


@pytest.mark.slow
def test_the_cli_runs_chacha20_without_randomgen_and_records_it(tmp_path: Path) -> None:
    """A real process where randomgen cannot be imported: ``--rng chacha20`` needs no extra, reproduces its seeded
    output, and the sidecar names ldp's stream as cryptographic (validated against the schema by load_sidecar)."""
    src = tmp_path / "in.parquet"
    write_list(src, unit_rows(300, 5))
    outputs = []
    for name, seed, entropy in (("a", 3, ENTROPY_FROM_USER), ("b", 3, ENTROPY_FROM_USER), ("c", None, ENTROPY_FROM_OS)):
        out = tmp_path / f"{name}.parquet"
        run = ldp_without("randomgen", "privatize", src, "-o", out, "--eps", 2, "--rng", "chacha20", "-q",
                          *(("--seed", seed) if seed is not None else ()), ledger=tmp_path / "l" / "ledger.json")
        assert run.returncode == 0, run.stderr
        record = load_sidecar(sidecar_path(out)).content["release"]["randomness"]
        assert record["bit_generator"] == "ChaCha20" and record["package"] == "ldp" and record["rounds"] == 20
        assert record["cryptographic"] is True and record["entropy"] == entropy
        outputs.append(read_list(out))
    assert np.array_equal(outputs[0], outputs[1]) and not np.array_equal(outputs[0], outputs[2])
