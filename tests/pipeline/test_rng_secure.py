"""Cryptographically secure randomness (issue 29 item 3): ldpcli.math.bitgen's ChaCha20 generators."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from ldpcli.errors import MissingDependency
from ldpcli.math.bitgen import KEY_TAG, SEEDED_BY_OS, SEEDED_BY_USER, describe, secure_generator, secure_key

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
    record = describe(generator, seeded=True)
    assert record == {"bit_generator": "ChaCha", "package": "randomgen", "version": randomgen.__version__,
                      "rounds": 20, "cryptographic": True, "seeding": SEEDED_BY_USER}
    key = secure_key(3)
    assert str(int.from_bytes(key, "little")) not in str(record) and key.hex() not in str(record)
    pcg = describe(np.random.default_rng(), seeded=False)
    assert pcg == {"bit_generator": "PCG64", "package": "numpy", "version": np.__version__,
                   "cryptographic": False, "seeding": SEEDED_BY_OS}


# --------------------------------------------------------------------------- without randomgen


def test_a_missing_randomgen_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "randomgen", None)  # `import randomgen` now raises ImportError
    with pytest.raises(MissingDependency, match=r"pip install 'ldp\[secure\]'") as caught:
        secure_generator()
    assert caught.value.exit_code == 1


def test_importing_the_module_does_not_load_randomgen() -> None:
    code = "import sys, ldpcli.math.bitgen; sys.exit('randomgen' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
