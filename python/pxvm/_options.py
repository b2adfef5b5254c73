"""Options shared by Runner's calls: alpha= (RGBA or an RGB view) and exif_transpose= (files)."""
import functools

from .errors import UsageError
from .image import exif_transposed


def _rgb(result):
    """The uint8 RGBA patches of a result (an array, (patches, geometry), a Ragged) as RGB: views
    [..., :3] of the same memory (no copy; not contiguous: .copy() / .contiguous() makes one)."""
    if isinstance(result, tuple):
        return (_rgb(result[0]),) + result[1:]
    if hasattr(result, "position_ids") and hasattr(result, "offsets"):  # a Ragged
        result.tokens = result.tokens[..., :3]
        return result
    return result[..., :3]


def _with_alpha(method):
    """alpha= on patches and patches_batch: True (the default) the atlas's bytes as the library
    writes them, RGBA (pxrun's, pxbatch's shards', the goldens'); False RGB, a view of them."""
    @functools.wraps(method)
    def call(self, *args, alpha=True, **kwargs):
        if not isinstance(alpha, bool):
            raise UsageError("usage: alpha is True or False, not %r" % (alpha,))
        if not alpha and kwargs.get("out") is not None:
            raise UsageError("usage: alpha=False with out=: out holds the RGBA bytes (take out[..., :3])")
        result = method(self, *args, **kwargs)
        return result if alpha else _rgb(result)
    call.__doc__ = (method.__doc__ or "") + """

        alpha: True (the default) gives the atlas's RGBA bytes (..., 4) as the library writes
        them; False gives RGB (..., 3), a view of them (no copy, not contiguous)."""
    return call


def _with_exif(method):
    """exif_transpose= on the calls that take files: True decodes every file of the call (paths
    given as images) with its EXIF orientation applied, as pxvm.load_image(path,
    exif_transpose=True) (Pillow's ImageOps.exif_transpose); False (the default) as stored."""
    @functools.wraps(method)
    def call(self, *args, exif_transpose=False, **kwargs):
        if not exif_transpose and isinstance(exif_transpose, bool):
            return method(self, *args, **kwargs)
        with exif_transposed(exif_transpose):  # a UsageError for a value that is not a bool
            return method(self, *args, **kwargs)
    call.__doc__ = (method.__doc__ or "") + """

        exif_transpose: True applies each file's EXIF orientation (Pillow's exif_transpose)."""
    return call

