"""Issue 39: the compiled fast path's types cannot be made from Python (before, pxvm._native.Call()
made an empty call whose run() dereferenced NULL: exit 139)."""
import pytest

import conftest  # noqa: F401 (pxvm from the checkout)
from pxvm import runner as runner_mod


def test_native_types_cannot_be_made_from_python():
    native = runner_mod._native
    if native is None:
        pytest.skip("the compiled fast path is not built here")
    with pytest.raises(TypeError, match="cannot create 'pxvm._native.Call' instances"):
        native.Call()
    with pytest.raises(TypeError):
        native.Call.__new__(native.Call)
