"""A pack that depends on a library that is not installed: loading it must warn, not crash."""

import p2o_library_that_does_not_exist  # noqa: F401
