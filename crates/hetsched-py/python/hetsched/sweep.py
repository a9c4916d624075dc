"""``python -m hetsched.sweep FILE --out DIR [--scheduler tcp://HOST:8786]``: a sweep on Dask.

``hetsched.sweep`` is also the function (``hetsched.sweep(file, out, client=...)``): importing
this module makes the module itself callable as that function, so both spellings keep working
whichever Python bound to the name last.
"""

import sys
import types

from ._sweep import main, sweep


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
