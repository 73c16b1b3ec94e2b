"""Both tiers: the tests run where users run (tests/userenv.py).

Before any test module is imported, this process's environment is cut to
what a user's shell has, so nothing a test starts can inherit this machine's
``PYTHONUNBUFFERED``, ``PYTHONDONTWRITEBYTECODE`` or any other variable of its own.
"""

from __future__ import annotations

from tests import userenv

userenv.scrub()
