"""Making a release: privatize a file (:mod:`~ldpcli.release._file`), a dataset directory
(:mod:`~ldpcli.release._dataset`) or arrays (:mod:`~ldpcli.release._arrays`); the engines that run the
parts; keyed randomness; the safety checks; the sidecar; the ledger and the one commit protocol
(:mod:`~ldpcli.release._commit`: reserve, publish, confirm); signatures and row hashes; which files
the inputs name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.release._dataset import DatasetResult as DatasetResult
    from ldpcli.release._dataset import write_dataset_release as write_dataset_release
    from ldpcli.release._engines import DaskEngine as DaskEngine
    from ldpcli.release._file import PrivatizeResult as PrivatizeResult
    from ldpcli.release._file import available_cores as available_cores
    from ldpcli.release._file import write_file_release as write_file_release
    from ldpcli.release._file import write_file_releases as write_file_releases
    from ldpcli.release._ledger import Ledger as Ledger
    from ldpcli.release._options import DEFAULT_MEMORY as DEFAULT_MEMORY
    from ldpcli.release._options import Budget as Budget
    from ldpcli.release._options import Columns as Columns
    from ldpcli.release._options import ReleaseOptions as ReleaseOptions
    from ldpcli.release._options import Resources as Resources
    from ldpcli.release._options import RiskSection as RiskSection
    from ldpcli.release._randomness import keyed_generator as keyed_generator
    from ldpcli.release._randomness import root_seed as root_seed
    from ldpcli.release._safety import check_epsilon as check_epsilon
    from ldpcli.release._shuffle_claim import ShuffleClaim as ShuffleClaim
    from ldpcli.release._sidecar import Sidecar as Sidecar
    from ldpcli.release._sidecar import load_sidecar as load_sidecar
    from ldpcli.release._sidecar import sidecar_path as sidecar_path
    from ldpcli.release._sidecar import sidecar_schema as sidecar_schema
    from ldpcli.release._signing import create_key as create_key
    from ldpcli.release._signing import load_signer as load_signer
    from ldpcli.release._signing import read_public_key as read_public_key
    from ldpcli.release._signing import verify_paths as verify_paths

__getattr__, __dir__, __all__ = attach(__name__, __file__)
