"""An image's failure: which errors are about one image, and the same error naming it (.index,
.file): the one failure type of batches (ragged, on_error="skip", pxvm.data's datasets)."""
import os

from .errors import InvalidProgram, Malformed, PxIOError, Trap, Unlinkable


def _is_path(x):
    return isinstance(x, (str, os.PathLike))


def _image_error(e):
    """Whether pxvm error e can be about one image given (its file: unreadable, not decodable,
    outside the limits or the slot's size or bounds), not about the program or an option."""
    return isinstance(e, (Malformed, InvalidProgram, Unlinkable, PxIOError))


def _named(e, i, name):
    """The same class of error, naming the image (its index, and its file when it has one)."""
    what = "image %d%s" % (i, " ('%s')" % name if name else "")
    reason = getattr(e, "reason", str(e))
    err = type(e)("%s: %s" % (what, reason))
    err.index, err.file, err.reason = i, name, reason
    return err


# The classes of an error of one image (its file, its decoding, its size, its run), as pxbatch
# lists per file; others (unavailable executor, usage) are about the whole job.
_PER_IMAGE = (Malformed, InvalidProgram, Unlinkable, PxIOError, Trap)


def _per_image(e):
    """Whether pxvm error e is one image's: its class, or an image index (a ragged batch's
    errors name the image: a dynamic size the rule refuses, a grid that does not compile)."""
    return isinstance(e, _PER_IMAGE) or getattr(e, "index", None) is not None
