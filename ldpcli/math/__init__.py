"""The math layer: log-space special functions and sphere geometry, exact samplers, domains,
compiled kernels and the goodness-of-fit tests of a mechanism's exact law. numpy and scipy only:
nothing here reads a file or knows a mechanism."""
