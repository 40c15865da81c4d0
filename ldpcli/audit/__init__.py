"""Checking a mechanism's claims by independent routes: ``ldp audit``'s checks
(:mod:`~ldpcli.audit.claims`) and empirical privacy lower bounds (:mod:`~ldpcli.audit.lower_bound`)."""
