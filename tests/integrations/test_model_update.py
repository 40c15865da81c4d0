"""Model updates as the frameworks hold them (issue 41 item 1): ``ldpcli.integrations.privatize_update`` keeps
the structure, shapes, dtypes and device, records the ℓ2 clip for the client only, refuses what is not a finite
floating-point update by naming the array; ``aggregate_updates`` is unbiased (seeded Monte Carlo, tolerances
from the sampling error) with the mechanism's guaranteed error."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest
from scipy import stats

from ldpcli.integrations import ClientLedger, aggregate_updates, privatize_update
from ldpcli.mechanisms import MechanismSpec


def _z(tests: int, alpha: float = 1e-6) -> float:
    """The per-coordinate |z| bound that all ``tests`` coordinates pass together with probability ≥ 1 − α."""
    return float(stats.norm.isf(alpha / (2 * tests)))


def test_a_list_of_numpy_arrays_keeps_its_structure_shapes_and_dtypes() -> None:
    update = [np.full((3, 4), 0.01, np.float32), np.full(5, -0.02), np.zeros((2, 0, 3), np.float32)]
    out, record = privatize_update(update, epsilon=4.0, norm_bound=1.0, rng=1)
    assert type(out) is list and [a.shape for a in out] == [(3, 4), (5,), (2, 0, 3)]
    assert [a.dtype for a in out] == [np.float32, np.float64, np.float32]
    assert record.d == 17 and not record.clipped and record.clip_factor == 1.0
    assert record.epsilon == MechanismSpec("privunit2", 4.0, None, 1.0).validated().calibrate(17).epsilon_exact
    scale = record.mechanism.scale
    assert scale is not None
    norm = math.sqrt(sum(float(np.sum(a.astype(np.float64) ** 2)) for a in out))
    assert norm == pytest.approx(scale, rel=1e-6)  # PrivUnit2's reports all have norm L·scale
    tupled, _ = privatize_update(tuple(update), epsilon=4.0, norm_bound=1.0, rng=1)
    assert type(tupled) is tuple


def test_the_clip_is_recorded_for_the_client_and_left_out_of_the_public_record() -> None:
    update = {"w": np.full(4, 1.5)}  # ‖u‖ = 3 > L = 2
    _, record = privatize_update(update, epsilon=2.0, norm_bound=2.0, rng=0)
    assert record.clipped and record.clip_factor == pytest.approx(2.0 / 3.0)
    public = record.to_dict()
    assert "clipped" not in str(public) and "clip" not in " ".join(public) and "clip" not in repr(record)
    _, inside = privatize_update({"w": np.full(4, 0.5)}, epsilon=2.0, norm_bound=2.0, rng=0)
    assert not inside.clipped and inside.clip_factor == 1.0


@pytest.mark.slow  # numba's first compile, torch's import or a Monte Carlo of 1500 releases
def test_any_vector_mechanism_of_the_registry() -> None:
    out, record = privatize_update([np.full(6, 0.1)], mechanism="duchi-linf", epsilon=1.0, norm_bound=1.0, rng=3)
    assert record.mechanism.name == "duchi-linf" and out[0].shape == (6,)


@pytest.mark.parametrize(("update", "words"), [
    ({"fc.weight": np.array([1.0, np.nan])}, r"update\['fc.weight'\] holds nan at flat index 1"),
    ([np.zeros(2), np.array([[0.0, np.inf]])], r"update\[1\] holds inf at flat index 1"),
    ([], "holds no arrays"),
    ([np.zeros((0, 3))], "has no values"),
])
def test_bad_values_are_refused_naming_the_array(update: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        privatize_update(update, epsilon=1.0, norm_bound=1.0, rng=0)


@pytest.mark.parametrize(("update", "words"), [
    ({"w": np.zeros(2), "bn.num_batches_tracked": np.array(3)}, r"update\['bn.num_batches_tracked'\] has dtype int64"),
    ([np.zeros(2, np.complex128)], r"update\[0\] is complex"),
    ("weights", "must be a list, tuple or dict of arrays"),
])
def test_wrong_types_are_refused_naming_the_array(update: object, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        privatize_update(update, epsilon=1.0, norm_bound=1.0, rng=0)


def test_a_bad_spec_is_a_value_error_in_python_words() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        privatize_update([np.zeros(3)], epsilon=-1.0, norm_bound=1.0)


@pytest.mark.slow  # numba's first compile, torch's import or a Monte Carlo of 1500 releases
def test_the_default_generator_is_ldps_chacha20_stream() -> None:
    _, record = privatize_update([np.full(3, 0.1)], epsilon=1.0, norm_bound=1.0)
    assert record.generator == "ldp ChaCha20" and record.reproducible is False


@pytest.mark.slow  # numba's first compile, torch's import or a Monte Carlo of 1500 releases
def test_torch_state_dict_round_trip_keeps_keys_dtypes_and_device() -> None:
    torch = pytest.importorskip("torch")
    state = OrderedDict([("conv.weight", torch.full((2, 3), 0.01, dtype=torch.float16)),
                         ("conv.bias", torch.full((3,), 0.02, dtype=torch.float32)),
                         ("fc.weight", torch.full((4,), -0.01, dtype=torch.float64, requires_grad=True))])
    out, record = privatize_update(state, epsilon=4.0, norm_bound=1.0, rng=5)
    assert type(out) is OrderedDict and list(out) == list(state)
    for key, tensor in state.items():
        assert out[key].dtype == tensor.dtype and out[key].shape == tensor.shape and out[key].device == tensor.device
        assert not out[key].requires_grad
    assert record.generator is not None and "torch" in record.generator  # sampled on the tensors' device
    mean = aggregate_updates([out, out], epsilon=4.0, norm_bound=1.0).mean  # back in the tensors' structure
    assert type(mean) is OrderedDict and all(mean[k].dtype == state[k].dtype for k in state)
    torch.testing.assert_close(mean["conv.bias"], out["conv.bias"])
    listed, _ = privatize_update([state["conv.bias"], state["fc.weight"]], epsilon=4.0, norm_bound=1.0, rng=5)
    assert type(listed) is list and [t.dtype for t in listed] == [torch.float32, torch.float64]
    with pytest.raises(TypeError, match=r"update\['steps'\] has dtype torch.int64"):
        privatize_update({"w": state["conv.bias"], "steps": torch.tensor([3])}, epsilon=1.0, norm_bound=1.0)
    with pytest.raises(ValueError, match=r"update\['w'\] holds nan at flat index 2"):
        privatize_update({"w": torch.tensor([0.0, 0.0, float("nan")])}, epsilon=1.0, norm_bound=1.0)


@pytest.mark.slow  # numba's first compile, torch's import or a Monte Carlo of 1500 releases
def test_a_jax_pytree_keeps_its_tree() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    params = {"dense": {"kernel": jnp.full((2, 3), 0.01, dtype=jnp.float32), "bias": jnp.zeros(3, dtype=jnp.float32)},
              "head": [jnp.full(2, 0.02, dtype=jnp.float32)]}
    out, record = privatize_update(params, epsilon=4.0, norm_bound=1.0, rng=2)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(params)
    for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(params), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype and isinstance(a, jax.Array)
    assert record.d == 11
    with pytest.raises(ValueError, match=r"update\['dense'\]\['bias'\] holds nan"):
        privatize_update({"dense": {"bias": jnp.array([jnp.nan]), "kernel": jnp.zeros(2)}}, epsilon=1.0, norm_bound=1.0)


@pytest.mark.slow  # numba's first compile, torch's import or a Monte Carlo of 1500 releases
def test_the_mean_of_privatized_updates_is_unbiased_with_its_guaranteed_error() -> None:
    """n clients, each with its own update (some beyond L, clipped), public weights: the weighted mean of
    their reports against Σ wᵢ clip(uᵢ) / Σ wᵢ, coordinate by coordinate within the sampling error (seeded)."""
    rng = np.random.default_rng(41)
    n, d, bound = 1500, 12, 1.0
    raw = rng.normal(0.0, 0.45, (n, d))
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    clipped = raw * np.minimum(1.0, bound / norms)
    weights = rng.integers(1, 50, n).astype(float)
    updates = [{"a": row[:4].reshape(2, 2), "b": row[4:]} for row in raw]
    private = [privatize_update(u, epsilon=2.0, norm_bound=bound, rng=i)[0] for i, u in enumerate(updates)]
    result = aggregate_updates(private, weights, epsilon=2.0, norm_bound=bound)
    truth = weights @ clipped / weights.sum()
    flat = np.concatenate([result.mean["a"].reshape(-1), result.mean["b"]])
    se = np.concatenate([result.std_error["a"].reshape(-1), result.std_error["b"]])
    assert np.all(np.abs(flat - truth) <= _z(d) * se), (flat - truth) / se
    share = weights / weights.sum()
    mech = MechanismSpec("privunit2", 2.0, None, bound).validated().calibrate(d)
    assert result.expected_error == pytest.approx(mech.expected_error_max * float(np.sum(share**2)))
    assert result.effective_n == pytest.approx(1.0 / float(np.sum(share**2)))
    # the per-coordinate errors add up to the ℓ2 error the mechanism guarantees (a sup: at most it, same order)
    assert 0.3 * result.expected_error <= float(np.sum(se**2)) <= 1.2 * result.expected_error
    assert result.mean["a"].shape == (2, 2) and result.lower["b"].shape == (d - 4,)


def test_aggregate_refuses_bad_weights_and_mixed_models() -> None:
    a = [np.zeros(3)]
    with pytest.raises(ValueError, match="weights must be 2 finite non-negative numbers"):
        aggregate_updates([a, a], [1.0, -1.0], epsilon=1.0, norm_bound=1.0)
    with pytest.raises(ValueError, match=r"updates\[1\] has other arrays than updates\[0\]"):
        aggregate_updates([a, [np.zeros(4)]], epsilon=1.0, norm_bound=1.0)
    with pytest.raises(ValueError, match="updates is empty"):
        aggregate_updates([], epsilon=1.0, norm_bound=1.0)
    one = aggregate_updates([a], epsilon=1.0, norm_bound=1.0)
    assert one.std_error is None and one.effective_n == 1.0


def test_client_ledger_composes_per_client_and_persists(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "clients.json"
    ledger = ClientLedger(max_budget=2.0, path=path)
    for server_round, client, epsilon in [(1, 7, 0.5), (1, 8, 1.0), (2, 7, 0.5), (3, 7, 0.75)]:
        ledger.record(client, server_round, "privunit2", epsilon)
    assert ledger.totals() == {"7": 1.75, "8": 1.0}
    assert ledger.allows(7, 0.25) and not ledger.allows(7, 0.5) and ledger.allows(9, 2.0)
    ledger.refuse(7, 4, "past the budget")
    again = ClientLedger(max_budget=2.0, path=path)
    assert again.totals() == ledger.totals() and again.refusals == [{"client": "7", "round": 4,
                                                                     "reason": "past the budget"}]
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="not a client ledger"):
        ClientLedger(path=path)


@pytest.mark.parametrize(("package", "extra", "name"), [("flower", "flwr", "LdpMod"), ("pfl", "pfl", "LdpMechanism")])
def test_a_framework_name_without_its_framework_raises_one_line_naming_the_extra(package: str, extra: str,
                                                                                  name: str) -> None:
    code = (f"import sys; sys.modules[{extra!r}] = None\nimport ldpcli.integrations.{package} as p\n"
            f"try:\n    p.{name}\nexcept ImportError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and f"ldp[{extra}]" in result.stdout
