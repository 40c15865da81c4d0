"""Making a release: privatize a file (:mod:`~ldpcli.release.file`), a dataset directory
(:mod:`~ldpcli.release.dataset`) or arrays (:mod:`~ldpcli.release.arrays`); the engines that run the
parts; keyed randomness; the safety checks; the sidecar; the ledger and the one commit protocol
(:mod:`~ldpcli.release.commit`: reserve, publish, confirm); signatures and row hashes; which files
the inputs name."""
