"""A seeded ``privatize --shuffle`` writes the same bytes whatever its memory budget, threads and batches
(issue 28: the order is the sort order of keys drawn by row position, :mod:`ldpcli.release._shuffle`).

One input of 20000 rows of d = 256 is released with one seed in memory (the default budget), through one
level of bucket files (4 MB: 1016 rows a bucket, about 312 in each of 64) and through two (1 MB: 254 rows a
bucket, so most buckets are split again), with 1, 2 and 8 threads and two batch sizes; every output must be
the same file, and a permutation of the unshuffled seeded output. Before the order was keyed by position,
the bucket labels were drawn batch by batch from one stream, so the memory budget changed the order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import read_list, unit_rows, write_list

from ldpcli.release._file import write_file_release
from ldpcli.release._options import Columns, ReleaseOptions, Resources
from ldpcli.release._shuffle import ExternalShuffle

pytestmark = pytest.mark.slow

ROWS, D = 20_000, 256
MB = 2**20


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_list(tmp_path_factory.mktemp("order") / "in.parquet", unit_rows(ROWS, D, seed=3))


def release(source: Path, out: Path, *, shuffle: bool = True, **resources: int) -> np.ndarray:
    write_file_release(source, out, mechanism="privunit2", epsilon=4.0, options=ReleaseOptions(
        seed=5, shuffle=shuffle, columns=Columns(column="vec"), resources=Resources(**resources)))
    return read_list(out)


def by_rows(values: np.ndarray) -> np.ndarray:
    return values[np.lexsort(values.T[::-1])]


def test_a_seeded_shuffle_is_the_same_file_whatever_the_memory_threads_and_batches(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    levels: list[int] = []  # the level of every bucket file made
    made = ExternalShuffle._bucket_file

    def counted(self: ExternalShuffle) -> object:
        levels.append(self.level)
        return made(self)

    monkeypatch.setattr(ExternalShuffle, "_bucket_file", counted)
    runs = {  # name: (resources, levels of bucket files)
        "in memory, 1 thread": ({"threads": 1}, 0),
        "one level, 2 threads": ({"memory": 4 * MB, "threads": 2}, 1),
        "two levels, 1 thread": ({"memory": MB, "threads": 1}, 2),
        "two levels, 8 threads": ({"memory": MB, "threads": 8}, 2),
        "in memory, 8 threads, batches of 4096 rows": ({"threads": 8, "batch_rows": 4096}, 0),
    }
    values = {}
    for name, (resources, depth) in runs.items():
        levels.clear()
        values[name] = release(source, tmp_path / f"{len(values)}.parquet", **resources)
        assert len(set(levels)) == depth, (name, sorted(set(levels)))  # each run went through the levels named
    first = next(iter(values.values()))
    for name, out in values.items():
        assert np.array_equal(out.view(np.uint64), first.view(np.uint64)), name  # bit for bit
    plain = release(source, tmp_path / "plain.parquet", shuffle=False)
    assert np.array_equal(by_rows(first), by_rows(plain))  # the unshuffled seeded output, permuted
    assert np.mean(np.any(first != plain, axis=1)) > 0.99
