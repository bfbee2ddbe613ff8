"""``python -m cloudcoil_sync.testing serve``: see :mod:`cloudcoil_sync.testing.serve`."""

from .serve import main

main()
