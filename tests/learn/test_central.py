"""The central layer of ``ldp train`` (issue 28 item 1; Bhowmick et al. 2018, Sec. 3.1, eq. (13)).

- the accountant wrapper is dp-accounting called directly (PLD and RDP, the Poisson-subsampled
  Gaussian composed T times), and the z solver inverts it to its stated tolerance;
- the paper's three central ε's come out of the moments accountant under one reading of its σ
  (docs/errata.md §21), and the readings the paper's text suggests do not give them;
- the server step (13) is unbiased: over Z for the projected sum / qN, and over the Poisson sample and
  Z for the mean projected release of all N rows; the projection is the identity inside the ball;
- Poisson sampling includes each row with probability q (binomial tests, seeded);
- the sidecar's ``central`` section, the local ε over the most uses, the missing-extra error, the
  unchanged local path, and the command line end to end on the bundled digits.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import bonferroni_z, ldp, write_list

from ldpcli.errors import MissingDependency, UsageError
from ldpcli.learn._accounting import (
    central_epsilon,
    epsilon_pld,
    epsilon_rdp,
    moments_accountant_epsilon,
    solve_noise_multiplier,
)
from ldpcli.learn._central import (
    CentralOptions,
    central_options,
    noisy_mean,
    poisson_schedule,
    project_releases,
)
from ldpcli.learn._model import TrainResult
from ldpcli.learn._sgd import sgd_pass
from ldpcli.learn._train import TrainingOptions, train
from ldpcli.release._options import ReleaseOptions
from ldpcli.release._randomness import keyed_generator, root_seed

dp_accounting = pytest.importorskip("dp_accounting")
from ldpcli.release._accounting import PLD_DELTA_MARGIN  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "digits_unit.parquet"


def _direct(q: float, z: float, steps: int, delta: float) -> tuple[float, float]:
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), steps)
    pld = dp_accounting.pld.PLDAccountant()
    pld.compose(event)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(event)
    # the PLD's ε is read at (1 − PLD_DELTA_MARGIN)·δ, as ldp reads it (its δ is not exactly pessimistic)
    return pld.get_epsilon(delta * (1 - PLD_DELTA_MARGIN)), rdp.get_epsilon(delta)


@pytest.mark.parametrize(("q", "z", "steps", "delta"), [(0.01, 1.1, 300, 1e-6), (0.2, 2.0, 40, 1e-9), (1.0, 5.0, 10, 1e-5)])
def test_the_accountants_are_dp_accounting_called_directly(q: float, z: float, steps: int, delta: float) -> None:
    pld, rdp = _direct(q, z, steps, delta)
    account = central_epsilon(q, z, steps, delta)
    assert account.epsilon_pld == pld == epsilon_pld(q, z, steps, delta)
    assert account.epsilon_rdp == rdp == epsilon_rdp(q, z, steps, delta)[0]
    assert account.epsilon == account.epsilon_pld  # the claim is the PLD accountant's
    assert account.epsilon_pld <= account.epsilon_rdp  # both are upper bounds; PLD is the tighter
    assert account.accountant.startswith("dp-accounting ")


@pytest.mark.slow
@pytest.mark.parametrize(("target", "q", "steps", "delta"), [(2.0, 0.05, 100, 1e-6), (0.8, 0.01, 500, 1e-9)])
def test_the_noise_solver_inverts_the_pld_accountant(target: float, q: float, steps: int, delta: float) -> None:
    z = solve_noise_multiplier(target, q, steps, delta)
    assert epsilon_pld(q, z, steps, delta) <= target
    assert epsilon_pld(q, z * (1 - 1e-3), steps, delta) > target


def test_impossible_central_requests_are_refused() -> None:
    with pytest.raises(UsageError, match="noise_multiplier"):
        epsilon_pld(0.1, 0.01, 10, 1e-6)
    with pytest.raises(UsageError, match="sampling_rate"):
        CentralOptions(1.0, 1.5, noise_multiplier=1.0).validated()
    with pytest.raises(UsageError, match="exactly one of"):
        CentralOptions(1.0, 0.1, noise_multiplier=1.0, central_epsilon=1.0).validated()
    with pytest.raises(UsageError, match="central_radius"):
        central_options(None, 0.1, 1.0)
    assert central_options() is None


# --- the paper's settings (docs/errata.md §21) ------------------------------------------------------

N_PAPER = 10**7


@pytest.mark.parametrize(("rho", "sigma", "steps", "printed"), [(100, 0.005, 100, "1.9"), (30, 0.002, 200, "1.76"),
                                                                (100, 0.001, 200, "3")])
def test_the_papers_central_epsilons_come_from_the_moments_accountant_with_z_one(
        rho: float, sigma: float, steps: int, printed: str) -> None:
    """σ the noise's standard deviation on the mean update (13), z = 1, so qN = ρ/σ (the "inflated batch"
    of Sec. 5), δ = 1e-9, T rounds: MNIST 1.890, CIFAR-10 1.758, Reddit (σ not printed; .001, from the
    paper's tested set) 2.932, each equal to the printed ε at the printed precision."""
    q = rho / (sigma * N_PAPER)
    epsilon, _ = moments_accountant_epsilon(q, 1.0, steps, 1e-9)
    digits = len(printed.partition(".")[2])
    assert f"{epsilon:.{digits}f}" == printed, epsilon
    # dp-accounting's own conversions are tighter upper bounds for the same mechanism
    assert epsilon_pld(q, 1.0, steps, 1e-9) < epsilon_rdp(q, 1.0, steps, 1e-9)[0] < epsilon


def test_the_readings_of_the_papers_text_do_not_give_its_epsilons() -> None:
    """CIFAR-10 with its actual images per round (q = B·m/N = 3.75e-3, z = σ·B·m/ρ = 2.5) gives 0.35, not
    1.76; σ read as the noise multiplier (z = .005) gives ε in the millions."""
    assert moments_accountant_epsilon(75 * 500 / N_PAPER, 0.002 * 75 * 500 / 30, 200, 1e-9)[0] < 0.4
    assert moments_accountant_epsilon(100 * 200 / N_PAPER, 0.005, 100, 1e-9)[0] > 1e6
    # one batch of m images (q = m/N) or one user per batch (q = B/N), σ on the mean: z ≤ 0.034
    assert moments_accountant_epsilon(500 / N_PAPER, 0.002 * 500 / 30, 200, 1e-9)[0] > 7e4


# --- the server step ---------------------------------------------------------------------------------


def test_projection_is_the_identity_inside_the_ball_and_radial_outside() -> None:
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(50, 7))
    norms = np.linalg.norm(rows, axis=1)
    radius = float(np.median(norms))
    out = project_releases(rows, radius)
    inside = norms <= radius
    assert np.array_equal(out[inside], rows[inside])
    assert np.allclose(np.linalg.norm(out[~inside], axis=1), radius)
    assert np.allclose(out[~inside] * norms[~inside, None] / radius, rows[~inside])


def test_the_noisy_step_is_unbiased_over_the_noise() -> None:
    """E over Z of (13)/η is (1/(qN))Σ proj_ρ(Δ̂_i); each coordinate's mean over K draws within
    a Bonferroni z of its standard error zρ/(qN·√K)."""
    rng = np.random.default_rng(11)
    released = rng.normal(size=(30, 6)) * 2.0
    radius, z, expected, draws = 2.5, 1.3, 40.0, 4000
    target = project_releases(released, radius).sum(axis=0) / expected
    noise = np.random.default_rng(12)
    mean = np.mean([noisy_mean(released, radius, z, expected, noise) for _ in range(draws)], axis=0)
    error = z * radius / expected / np.sqrt(draws)
    assert np.all(np.abs(mean - target) <= bonferroni_z(1e-6, 6) * error)


def test_the_step_is_unbiased_over_the_poisson_sample_and_the_noise() -> None:
    """Dividing by qN (not by the sample's size) makes E ĝ = (1/N)Σ_i proj_ρ(Δ̂_i) over all N rows."""
    rng = np.random.default_rng(5)
    rows, q, radius, z, steps = 60, 0.2, 1.5, 1.0, 6000
    released = rng.normal(size=(rows, 4)) * 1.2
    target = project_releases(released, radius).mean(axis=0)
    noise = np.random.default_rng(6)
    steps_taken = [noisy_mean(released[batch], radius, z, q * rows, noise)
                   for batch in poisson_schedule(rows, q, steps, np.random.default_rng(7))]
    values = np.array(steps_taken)
    error = values.std(axis=0, ddof=1) / np.sqrt(steps)
    assert np.all(np.abs(values.mean(axis=0) - target) <= bonferroni_z(1e-6, 4) * error)


@pytest.mark.parametrize("stream", ["pcg64", "chacha20"])
def test_poisson_sampling_includes_each_row_with_probability_q(stream: str) -> None:
    """Every row's count over T steps is Binomial(T, q); the total is Binomial(N·T, q); batch sizes are
    Binomial(N, q) (mean and variance); no row twice in one step. From numpy's PCG64 and from ldp's ChaCha20
    stream (the central layer's default)."""
    rows, q, steps = 300, 0.07, 2000
    schedule = poisson_schedule(rows, q, steps, keyed_generator(root_seed(21), 0, rng=stream))
    assert all(len(np.unique(batch)) == len(batch) for batch in schedule)
    counts = np.bincount(np.concatenate(schedule), minlength=rows)
    limit = bonferroni_z(1e-6, rows + 2)
    assert np.all(np.abs(counts - steps * q) <= limit * np.sqrt(steps * q * (1 - q)))
    total, trials = counts.sum(), rows * steps
    assert abs(total - trials * q) <= limit * np.sqrt(trials * q * (1 - q))
    sizes = np.array([len(batch) for batch in schedule])
    # the variance of the sample variance of a binomial: ≈ 2σ⁴/(T − 1) for this near-normal law
    variance = rows * q * (1 - q)
    assert abs(sizes.var(ddof=1) - variance) <= limit * variance * np.sqrt(2 / (steps - 1)) * 1.1


def test_poisson_sampling_at_rate_one_and_past_its_first_chunk_of_gaps() -> None:
    """q = 1: every row at every step. Uniforms of 0 (1 − U = 1: every gap 0) include every row at any q, which takes
    the sampler past its first chunk of gaps (qN + 6√(qN) + 16 of them) to the end of the rows, and never beyond."""

    class Zeros:
        def random(self, size: int) -> np.ndarray:
            return np.zeros(size)

    rng = keyed_generator(root_seed(3), 0, rng="chacha20")
    assert all(np.array_equal(batch, np.arange(50)) for batch in poisson_schedule(50, 1.0, 3, rng))
    assert [batch.tolist() for batch in poisson_schedule(1000, 0.01, 2, Zeros())] == [list(range(1000))] * 2  # type: ignore[arg-type]


# --- train ------------------------------------------------------------------------------------------


def _small(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X @ np.array([2.0, -1.0, 0.5]) + 0.3 * rng.normal(size=400) > 0).astype(np.int64)
    return write_list(tmp_path / "small.parquet", X, column="x", label=pa.array(y))


@pytest.mark.slow
def test_sidecar_has_the_central_section_beside_the_local_one(tmp_path: Path) -> None:
    data = _small(tmp_path)
    central = CentralOptions(central_radius=1.5, sampling_rate=0.1, noise_multiplier=1.2, central_delta=1e-6)
    result = train(data, tmp_path / "model.json", label="label", mechanism="separated", epsilon=4.0,
                   training=TrainingOptions(central=central, epochs=2, classes=[0, 1]),
                   options=ReleaseOptions(seed=3))
    side = json.loads((tmp_path / "model.json.ldp.json").read_text())
    section = side["central"]
    steps = 20  # ⌈2/0.1⌉
    assert section["steps"] == steps == result.steps
    assert (section["radius"], section["noise_multiplier"], section["sampling_rate"], section["delta"]) == (1.5, 1.2, 0.1,
                                                                                                          1e-6)
    assert section["epsilon_pld"] == _direct(0.1, 1.2, steps, 1e-6)[0]
    assert section["epsilon_rdp"] == _direct(0.1, 1.2, steps, 1e-6)[1]
    assert section["accountant"].startswith("dp-accounting ")
    assert section["neighbouring"] == "add/remove one row"
    assert section["randomness"]["bit_generator"] == "ChaCha20" and section["randomness"]["cryptographic"] is True
    assert section["randomness"]["package"] == "ldp"  # ldp's own stream: no randomgen needed
    assert "users" in section["protects_against"] and "honestly" in section["protects_against"]
    assert section["noise_std"] == pytest.approx(1.2 * 1.5 / (0.1 * 400))
    # the local guarantee: ε per row over the most uses of any row (Poisson: random, at least one)
    privacy = side["privacy"]
    assert privacy["model"] == "local"
    assert privacy["uses_per_row"] == result.uses >= 1
    assert privacy["epsilon_per_row"] == pytest.approx(result.uses * result.mechanism.epsilon_exact)
    assert "order" in side["training"] and "Poisson" in side["training"]["order"]


@pytest.mark.slow
def test_central_epsilon_target_solves_z(tmp_path: Path) -> None:
    data = _small(tmp_path)
    central = CentralOptions(central_radius=1.0, sampling_rate=0.25, central_epsilon=3.0, central_delta=1e-6)
    result = train(data, label="label", epsilon=4.0, training=TrainingOptions(central=central),
                   options=ReleaseOptions(seed=1))
    assert result.central is not None
    section = result.central_section()
    assert section is not None and "class list was read from the data" in section.statement
    assert result.central.account.epsilon_pld <= 3.0
    assert epsilon_pld(0.25, result.central.noise_multiplier * (1 - 1e-3), 4, 1e-6) > 3.0


def test_central_refuses_a_batch(tmp_path: Path) -> None:
    central = CentralOptions(central_radius=1.0, sampling_rate=0.25, noise_multiplier=1.0)
    with pytest.raises(UsageError, match="batch"):
        train(_small(tmp_path), label="label", epsilon=4.0, training=TrainingOptions(central=central, batch=4))


def test_without_dp_accounting_the_error_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "dp_accounting" or m.startswith("dp_accounting.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(MissingDependency, match=r"pip install 'ldp\[central\]'"):
        train(_small(tmp_path), label="label", epsilon=4.0,
              training=TrainingOptions(central=CentralOptions(1.0, 0.1, noise_multiplier=1.0)))


def test_without_randomgen_the_central_layer_trains_on_ldps_stream(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples and the noise are ldp's own ChaCha20 stream: randomgen (the `secure` extra) is not needed."""
    monkeypatch.setitem(sys.modules, "randomgen", None)
    train(_small(tmp_path), tmp_path / "model.json", label="label", epsilon=4.0,
          training=TrainingOptions(central=CentralOptions(1.0, 0.1, noise_multiplier=1.0), classes=[0, 1]))
    randomness = json.loads((tmp_path / "model.json.ldp.json").read_text())["central"]["randomness"]
    assert (randomness["bit_generator"], randomness["package"], randomness["entropy"]) == ("ChaCha20", "ldp",
                                                                                         "from the OS")


@pytest.mark.slow
def test_without_the_central_layer_training_is_the_local_protocol_bit_for_bit() -> None:
    """No central options: the model is exactly the seeded local protocol (the training stream drives
    sgd_pass once per epoch, untouched by the layer's streams), and ``central=None`` is the default."""
    from ldpcli.learn._losses import make_loss
    from ldpcli.learn._sgd import ITERATES, default_step_rule
    from ldpcli.mechanisms import MechanismSpec

    training = TrainingOptions(loss="softmax", batch=4, epochs=2, classes=list(range(10)))
    assert training.central is None
    result = train(DIGITS, label="label", epsilon=50.0, norm_bound=2.0, training=training,
                   options=ReleaseOptions(seed=7))
    assert result.central is None and result.uses is None and result.uses_per_row == 2

    import pyarrow.parquet as pq

    table = pq.read_table(DIGITS)
    X = np.asarray(table.column("embedding").to_pylist(), dtype=np.float64)
    X = np.hstack([X, np.ones((len(X), 1))])
    loss = make_loss("softmax", X.shape[1], 10)
    t = loss.targets(np.asarray(table.column("label").to_pylist()))
    mech = MechanismSpec("separated", 50.0, None, 2.0, {}).calibrate(loss.n_params)
    rule = default_step_rule("l2", mech, 10.0, batch=4)
    private = ITERATES["l2"](loss.n_params, 10.0)
    rng = keyed_generator(root_seed(7), 0, rng="chacha20")  # the training stream: ldp's ChaCha20, the release default
    for _ in range(2):
        sgd_pass(loss, mech, private, None, X, t, 4, rule, rng)
    assert private.average.tobytes() == result.theta.tobytes()


@pytest.mark.slow
def test_cli_central_layer_end_to_end(tmp_path: Path) -> None:
    model = tmp_path / "digits_central.json"
    run = ldp("train", DIGITS, "--label", "label", "--loss", "softmax", "--eps", "1000", "-L", "2",
              "--classes", "0,1,2,3,4,5,6,7,8,9", "--central-radius", "5", "--noise-multiplier", "1.0",
              "--sampling-rate", "0.02", "--seed", "1", "-o", model, "--json")
    assert run.exit_code == 0, run.output
    report = json.loads(run.stdout)
    central = report["central"]
    assert central["steps"] == 50 and central["sampling_rate"] == 0.02 and central["radius"] == 5.0
    assert central["epsilon_pld"] == pytest.approx(epsilon_pld(0.02, 1.0, 50, 1e-9))
    assert json.loads(Path(f"{model}.ldp.json").read_text())["central"]["epsilon_pld"] == central["epsilon_pld"]
    missing = ldp("train", DIGITS, "--label", "label", "--eps", "10", "--classes", "0,1,2,3,4,5,6,7,8,9",
                  "--loss", "softmax", "--central-radius", "5", "--noise-multiplier", "1.0")
    assert missing.exit_code == 2
    assert "--sampling-rate" in missing.output and "`" not in missing.output


def test_the_default_step_counts_the_central_noise() -> None:
    """η₀ = 1/(G·√(M² + p·σ²)) with the central layer's noise (sgd.default_step_rule, l2), and M∞² + p·σ² for l1."""
    from ldpcli.learn._sgd import default_step_rule, gradient_bound, gradient_moment_bounds, step_second_moment
    from ldpcli.mechanisms import PrivUnit2

    mech, noise = PrivUnit2.calibrate(20, 4.0), 3.5
    rule = default_step_rule("l2", mech, 1.0, batch=1, noise_variance=noise)
    assert rule.eta0 == pytest.approx(1.0 / (gradient_bound(mech) * math.sqrt(step_second_moment(mech, 1) + noise)))
    assert rule.eta0 < default_step_rule("l2", mech, 1.0, batch=1).eta0 and "central noise" in rule.basis
    l1 = default_step_rule("l1", mech, 2.0, noise_variance=noise)
    assert l1.eta0 == pytest.approx(math.sqrt(2 * math.log(40)) / (2.0 * math.sqrt(gradient_moment_bounds(mech)[1] + noise)))


def test_the_most_uses_of_a_row_is_one_stored_fact(tmp_path: Path) -> None:
    """``uses_per_row`` is the stored count; ``uses`` (None without the central layer), the cost and the
    sidecar's ``uses_per_row`` follow it, so no two of them can disagree."""
    from dataclasses import fields, replace

    names = {item.name for item in fields(TrainResult)}
    assert "uses_per_row" in names and "uses" not in names
    central = CentralOptions(central_radius=1.5, sampling_rate=0.1, noise_multiplier=1.2, central_delta=1e-6)
    result = train(_small(tmp_path), label="label", epsilon=4.0, training=TrainingOptions(central=central, classes=[0, 1]),
                   options=ReleaseOptions(seed=3))
    more = replace(result, uses_per_row=result.uses_per_row + 2)
    assert more.uses == more.uses_per_row == result.uses + 2
    assert more.privacy()["uses_per_row"] == more.uses_per_row
    assert more.epsilon_per_row == pytest.approx(more.uses_per_row * result.mechanism.epsilon_exact)
    local = train(_small(tmp_path), label="label", epsilon=4.0, training=TrainingOptions(epochs=3, classes=[0, 1]),
                  options=ReleaseOptions(seed=3))
    assert local.uses is None and local.uses_per_row == 3
