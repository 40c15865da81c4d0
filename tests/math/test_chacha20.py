"""The counter-based ChaCha20 stream (issue 39 item 1): RFC 8439's vectors, the numpy reference and the
numba kernel bit for bit, invariance to batching and threads, the law of its normals and uniforms, and the
software exp/log its ziggurat's rare branches use."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import bonferroni_z
from scipy import stats

from ldpcli.math import _chacha20 as ref
from ldpcli.math import _counter_rng as stream
from ldpcli.math import _kernels

numba_only = pytest.mark.skipif(not _kernels._numba_installed(), reason="numba is not installed (pip install 'ldp[fast]')")
ROOT = Path(__file__).resolve().parents[2]
RFC_KEY = bytes(range(32))


def _keystream(key: bytes, counter: int, nonce: bytes, blocks: int = 1) -> bytes:
    """RFC 8439's serialized keystream: consecutive blocks from ``counter`` with a 12-byte nonce."""
    words = np.frombuffer(nonce, dtype="<u4")
    out = ref.chacha20_blocks(key, np.arange(counter, counter + blocks), np.tile(words, (blocks, 1)))
    return out.astype("<u4").tobytes()


# --------------------------------------------------------------------------- RFC 8439


def test_rfc8439_block_function_2_3_2() -> None:
    nonce = bytes.fromhex("000000090000004a00000000")
    state = ref.chacha20_blocks(RFC_KEY, np.array([1]), np.frombuffer(nonce, dtype="<u4")[None, :])[0]
    expected = [0xE4E7F110, 0x15593BD1, 0x1FDD0F50, 0xC47120A3, 0xC7F4D1C7, 0x0368C033, 0x9AAA2204, 0x4E6CD4C3,
                0x466482D2, 0x09AA9F07, 0x05D7C214, 0xA2028BD9, 0xD19C12B5, 0xB94E16DE, 0xE883D0CB, 0x4E3C50A2]
    assert state.tolist() == expected
    assert _keystream(RFC_KEY, 1, nonce).hex() == (
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e")


def test_rfc8439_encryption_2_4_2() -> None:
    plaintext = (b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
                 b"sunscreen would be it.")
    stream = _keystream(RFC_KEY, 1, bytes.fromhex("000000000000004a00000000"), blocks=2)
    ciphertext = bytes(p ^ k for p, k in zip(plaintext, stream))
    assert ciphertext.hex() == (
        "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b"
        "f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8"
        "07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736"
        "5af90bbf74a35be6b40b8eedf2785e42874d")


@pytest.mark.parametrize(("key", "counter", "nonce", "expected"), [
    (bytes(32), 0, bytes(12), "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
                              "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"),
    (bytes(32), 1, bytes(12), "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
                              "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f"),
    (bytes(31) + b"\x01", 1, bytes(12), "3aeb5224ecf849929b9d828db1ced4dd832025e8018b8160b82284f3c949aa5a"
                                        "8eca00bbb4a73bdad192b5c42f73f2fd4e273644c8b36125a64addeb006c13a0"),
    (b"\x00\xff" + bytes(30), 2, bytes(12), "72d54dfbf12ec44b362692df94137f328fea8da73990265ec1bbbea1ae9af0ca"
                                            "13b25aa26cb4a648cb9b9d1be65b2c0924a66c54d545ec1b7374f4872e99f096"),
    (bytes(32), 0, bytes(11) + b"\x02", "c2c64d378cd536374ae204b9ef933fcd1a8b2288b3dfa49672ab765b54ee27c7"
                                        "8a970e0e955c14f3a88e741b97c286f75f8fc299e8148362fa198a39531bed6d"),
])
def test_rfc8439_appendix_a1(key: bytes, counter: int, nonce: bytes, expected: str) -> None:
    assert _keystream(key, counter, nonce).hex() == expected


def test_stream_words_are_the_documented_blocks() -> None:
    """Position p of (stream s, row r) is word p mod 8 of the block (counter p div 8, nonce (s·2¹⁶, r low, r high))."""
    key, row, stream = ref.release_key(5), 2**40 + 3, 7
    words = ref.stream_words(key, [row], 20, stream=stream)[0]
    block = _keystream(key, 2, (stream << 16).to_bytes(4, "little") + row.to_bytes(8, "little"))
    assert words[16:20].tolist() == [int.from_bytes(block[8 * t:8 * t + 8], "little") for t in range(4)]


def test_release_keys() -> None:
    assert ref.release_key() != ref.release_key() and len(ref.release_key()) == 32
    assert ref.release_key(7) == hashlib.sha256(b"ldp-seed-v1" + bytes([1, 7])).digest() == ref.release_key(7)
    assert ref.release_key(7) != ref.release_key(b"\x07")
    with pytest.raises(TypeError, match="seed"):
        ref.release_key(-1)
    with pytest.raises(ValueError, match="stream"):
        ref.stream_words(RFC_KEY, [0], 4, stream=1 << 16)


# --------------------------------------------------------------------------- numpy == numba, invariance


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint64)


@numba_only
@pytest.mark.slow
@pytest.mark.parametrize("d", [1, 7, 13, 129, 501])
def test_numba_gives_the_reference_bits(d: int) -> None:
    from ldpcli.math import _chacha20_numba as fast

    generator = np.random.default_rng(d)
    key = generator.bytes(32)
    rows = np.concatenate([generator.integers(0, 2**63, 200, dtype=np.uint64), np.array([0, 2**64 - 1], np.uint64)])
    rows = np.concatenate([rows, np.arange(200_000 // d + 1, dtype=np.uint64)])  # enough misses for the slow branches
    assert np.array_equal(fast.words(key, rows, d, stream=3), ref.stream_words(key, rows, d, stream=3))
    numpy_normals = ref.stream_normals(key, rows, d, stream=3)
    assert np.array_equal(_bits(fast.normals(key, rows, d, stream=3)), _bits(numpy_normals))
    if d == 501:  # the tail sampler and the wedges ran (|z| > r only from the tail)
        assert np.sum(np.abs(numpy_normals) > ref.ZIGGURAT.r) > 20


@numba_only
def test_the_rare_branches_give_the_reference_bits() -> None:
    """Tables with no core (K = 0) and wedges that accept only |x| < 0.14 (f = 0.99 above the base layer):
    every value takes the wedges and tails over a hundred or so attempts, so many attempt blocks (b ≥ 1)
    of each position, and the two paths must still agree bit for bit."""
    from ldpcli.math import _chacha20_numba as fast

    f = ref.ZIGGURAT.f.copy()
    f[1:] = 0.99
    tables = ref.ZIGGURAT._replace(k=np.zeros(256, dtype=np.uint64), f=f)
    key, rows = ref.release_key(13), np.array([3, 2**33 + 1], dtype=np.uint64)
    numpy_normals = ref.stream_normals(key, rows, 40, tables=tables)
    assert np.array_equal(_bits(fast.normals(key, rows, 40, tables=tables)), _bits(numpy_normals))
    assert np.sum(np.abs(numpy_normals) > ref.ZIGGURAT.r) > 0 and np.sum(np.abs(numpy_normals) < 0.15) > 40


@numba_only
def test_batches_threads_and_row_order_change_nothing() -> None:
    import numba

    from ldpcli.math import _chacha20_numba as fast

    key, d = ref.release_key(3), 37
    rows = np.arange(1500, dtype=np.uint64)
    whole = fast.normals(key, rows, d)
    assert np.array_equal(_bits(np.concatenate([fast.normals(key, rows[a:b], d) for a, b in
                                                ((0, 1), (1, 700), (700, 1500))])), _bits(whole))
    order = np.random.default_rng(0).permutation(rows.size)
    assert np.array_equal(_bits(fast.normals(key, rows[order], d)), _bits(whole[order]))
    assert np.array_equal(_bits(fast.normals(key, rows, 20)), _bits(whole[:, :20]))  # a shorter row is a prefix
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = fast.normals(key, rows, d, parallel=True)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = fast.normals(key, rows, d, parallel=True)
        words = fast.words(key, rows, d, parallel=True)
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(_bits(one), _bits(whole)) and np.array_equal(_bits(two), _bits(whole))
    assert np.array_equal(words, fast.words(key, rows, d))


def test_the_reference_is_invariant_to_batches() -> None:
    """Across its own chunks (2¹⁵ blocks) too: 1200 rows of 63 blocks span three."""
    key, d = ref.release_key(4), 501
    rows = np.arange(1200, dtype=np.uint64)
    whole = ref.stream_normals(key, rows, d)
    parts = np.concatenate([ref.stream_normals(key, rows[:333], d), ref.stream_normals(key, rows[333:], d)])
    assert np.array_equal(_bits(parts), _bits(whole))
    assert np.array_equal(_bits(ref.stream_normals(key, rows[[5, 1100]], d)), _bits(whole[[5, 1100]]))


def test_without_numba_the_reference_runs(tmp_path: Path) -> None:
    """A fresh interpreter where ``import numba`` fails: ``normals`` falls back to the reference, same bits."""
    key = ref.release_key(9)
    expected = ref.stream_normals(key, [0, 1, 2**50], 11)
    code = ("import sys; sys.modules['numba'] = None; import numpy as np; from ldpcli.math import _chacha20 as c, _counter_rng as s; "
            f"np.save({str(tmp_path / 'out.npy')!r}, s.normals(c.release_key(9), [0, 1, 2**50], 11)); "
            "print(sorted(m for m in sys.modules if m.startswith('ldpcli.math._chacha20')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['ldpcli.math._chacha20']"
    assert np.array_equal(_bits(np.load(tmp_path / "out.npy")), _bits(expected))


# --------------------------------------------------------------------------- the law


@pytest.mark.slow
def test_normals_have_the_normal_law() -> None:
    """4·10⁶ seeded normals: Kolmogorov–Smirnov, and the frequencies beyond 3σ, 4σ and the ziggurat's r
    (only the tail sampler reaches it) within Bonferroni binomial bounds (family α = 10⁻⁶)."""
    rows, d = 8000, 500
    z = stream.normals(ref.release_key(11), np.arange(rows), d).ravel()
    n = z.size
    assert stats.kstest(z, "norm").pvalue > 1e-6
    bound = bonferroni_z(1e-6, 7)
    for t in (3.0, 4.0, ref.ZIGGURAT.r):
        p = 2 * stats.norm.sf(t)
        assert abs(np.sum(np.abs(z) > t) - n * p) <= bound * math.sqrt(n * p * (1 - p)), t
    for moment, value in ((np.mean(z), 0.0), (np.mean(z * z), 1.0)):
        assert abs(moment - value) <= bound * math.sqrt((1.0 if value == 0.0 else 2.0) / n)
    positives = np.sum(z > 0)
    assert abs(positives - n / 2) <= bound * math.sqrt(n / 4)


def test_uniform_words_have_fair_bits() -> None:
    """Each of the 64 bits of 2·10⁵ words is a fair coin (Bonferroni over 64 bits, family α = 10⁻⁶);
    uniforms are k·2⁻⁵³ in [0, 1) from the top 53 bits."""
    words = ref.stream_words(ref.release_key(12), np.arange(400), 500).ravel()
    n = words.size
    ones = np.array([np.sum((words >> np.uint64(b)) & np.uint64(1)) for b in range(64)])
    assert np.all(np.abs(ones - n / 2) <= bonferroni_z(1e-6, 64) * math.sqrt(n / 4))
    u = ref.word_uniforms(words)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert np.array_equal(u * 2.0**53, (words >> np.uint64(11)).astype(np.float64))


# --------------------------------------------------------------------------- software exp and log


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    return np.abs(got - exact) / np.spacing(np.abs(exact))


def _grids() -> tuple[np.ndarray, np.ndarray]:
    exp_x = np.concatenate([np.linspace(-708.0, 709.0, 100_001), np.linspace(-8.0, 0.0, 100_001)])
    log_x = np.concatenate([np.logspace(-300, 300, 100_001), np.linspace(2.0**-53, 1.0, 100_001),
                            1.0 + np.linspace(-1e-6, 1e-6, 1001)])
    return exp_x, log_x


def test_soft_exp_and_log_are_within_an_ulp() -> None:
    exp_x, log_x = _grids()
    assert _ulps(ref.soft_exp(exp_x), np.array([math.exp(v) for v in exp_x])).max() <= 1.0
    exact_log = np.array([math.log(v) for v in log_x])
    nonzero = exact_log != 0.0
    assert _ulps(ref.soft_log(log_x)[nonzero], exact_log[nonzero]).max() <= 1.0
    assert ref.soft_log(np.array([1.0]))[0] == 0.0


@numba_only
def test_soft_exp_and_log_agree_with_the_compiled_ones_bit_for_bit() -> None:
    import numba

    from ldpcli.math import _chacha20_numba as fast

    @numba.njit
    def both(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e, g = np.empty_like(xs), np.empty_like(ys)
        for i in range(xs.size):
            e[i] = fast._soft_exp(xs[i])
        for i in range(ys.size):
            g[i] = fast._soft_log(ys[i])
        return e, g

    exp_x, log_x = _grids()
    compiled_exp, compiled_log = both(exp_x, log_x)
    assert np.array_equal(_bits(compiled_exp), _bits(ref.soft_exp(exp_x)))
    assert np.array_equal(_bits(compiled_log), _bits(ref.soft_log(log_x)))
