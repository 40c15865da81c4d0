"""The central ε of Bhowmick et al. (2018, Sec. 5) for their three settings, under each reading of σ.

The paper states (ε_cent, δ = 1e-9) after T rounds "via the moments accountant" for MNIST
(ρ = 100, σ = .005, N = 10⁷, 100 rounds of B = 200 batches of m = 100 images): 1.9; CIFAR-10
(ρ = 30, σ = .002, T = 200, B = 75 batches of m = 500): 1.76; Reddit (ρ = 100, T = 200, B = 200
collections of m = 1000; σ not stated): 3. It does not say how σ maps to the noise multiplier z
and the sampling rate q of the Poisson-subsampled Gaussian. This prints, for each reading, the ε of
the moments accountant's conversion (Abadi et al. 2016, Thm. 2; Mironov 2017, Prop. 3) and of
dp-accounting's RDP and PLD accountants (``ldpcli.learn._accounting``; PLD only for z ≥ 0.3, where
its grid of losses stays small); docs/errata.md §21 explains them. No timing: every number is a function of its arguments.

    python benchmarks/central_accounting.py            # about 10 s
"""

from __future__ import annotations

import math

from ldpcli.learn._accounting import (
    MIN_NOISE_MULTIPLIER,
    epsilon_pld,
    epsilon_rdp,
    moments_accountant_epsilon,
)

N = 10**7
DELTA = 1e-9
#: name → (ρ, σ, T, B, m, the printed ε); Reddit's σ is the paper's tested value that reproduces 3.
SETTINGS = {
    "MNIST": (100.0, 0.005, 100, 200, 100, "1.9"),
    "CIFAR-10": (30.0, 0.002, 200, 75, 500, "1.76"),
    "Reddit": (100.0, 0.001, 200, 200, 1000, "3"),
}
#: reading → (q, z) from (ρ, σ, B, m).
READINGS = {
    "z = 1, qN = ρ/σ (σ on the mean, the inflated batch)": lambda rho, sigma, B, m: (rho / (sigma * N), 1.0),
    "q = B·m/N, z = σ·B·m/ρ (σ on the mean, the round's items)": lambda rho, sigma, B, m: (B * m / N, sigma * B * m / rho),
    "q = m/N, z = σ·m/ρ (σ on the mean, one batch)": lambda rho, sigma, B, m: (m / N, sigma * m / rho),
    "q = B/N, z = σ·B/ρ (σ on the mean, a batch per user)": lambda rho, sigma, B, m: (B / N, sigma * B / rho),
    "z = σ/ρ (σ on the sum)": lambda rho, sigma, B, m: (B * m / N, sigma / rho),
}


def _cell(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "∞"


def main() -> None:
    print(f"N = {N:.0e}, δ = {DELTA:g}, T = the rounds; ε by the moments accountant's conversion | dp-accounting RDP | "
          "dp-accounting PLD")
    print()
    print("| setting | printed ε | reading | q | z | moments ε | RDP ε | PLD ε |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (rho, sigma, steps, batches, items, printed) in SETTINGS.items():
        for reading, rule in READINGS.items():
            q, z = rule(rho, sigma, batches, items)
            cells = [_cell(moments_accountant_epsilon(q, z, steps, DELTA)[0]), _cell(epsilon_rdp(q, z, steps, DELTA)[0]),
                     _cell(epsilon_pld(q, z, steps, DELTA)) if z >= MIN_NOISE_MULTIPLIER else "not run (z < 0.3)"]
            print(f"| {name} (ρ = {rho:g}, σ = {sigma:g}, T = {steps}) | {printed} | {reading} | {q:.3g} | {z:.3g} | "
                  + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
