"""``python -m cloudcoil_sync.testing serve``: see :mod:`cloudcoil_sync.testing._internal.serve`."""

from cloudcoil_sync.testing._internal.serve import main

main()
