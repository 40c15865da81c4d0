"""``python -m ldpcli``: the same entry as the ``ldp`` console script (:func:`ldpcli.cli.entry.main`)."""

from ldpcli.cli.entry import main

if __name__ == "__main__":
    main()
