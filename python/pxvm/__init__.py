"""pxvm: foveated image pyramids as pixel programs, from Python.

    import pxvm
    prog = pxvm.Program.load(pxvm.programs.path("foveate273"))   # programs/foveate273.pxi
    runner = pxvm.Runner(prog, executor="auto")
    patches = runner.patches(pxvm.load_image("programs/data/chelsea.png"))   # (273, 16, 16, 4) uint8

Images are NumPy uint8 arrays or PyTorch uint8 tensors (CPU or CUDA), (H, W), (H, W, C) or
(C, H, W) with C in 1 (grey), 3 (RGB) or 4 (RGBA), any strides; batches add a leading B axis
or are lists. What is copied, and when:
- inputs are read once, by the library, straight from your memory into the VM's storage (converted
  to RGBA8 on the way: grey v -> (v, v, v, 255), RGB -> (r, g, b, 255)); no Python-side copy, and
  CUDA inputs never pass through the host; CUDA inputs are read when the run executes on
  torch.cuda.current_stream(), so write them on that stream or before, as for any torch
  operation; packed RGBA inputs are even read in place (pxvm_runner_borrow: no copy at all) on the
  CPU executor, and on the CUDA one for a video frame in GPU memory: the runner then keeps a
  reference to the array until the slot is given another one, and reading the slot reads it;
- outputs are new arrays of the inputs' kind, for every call that takes images (one rule:
  _arrays.like_images): NumPy arrays (or files) in, NumPy out; torch tensors in, torch tensors out
  on their device (host results as torch.from_numpy: the same memory, no copy; a Ragged's offsets,
  grid, sizes, position_ids and index as int64 tensors beside its tokens); for CUDA inputs, torch
  CUDA tensors written on the device (device-to-device), ordered on torch.cuda.current_stream(),
  so they may be used at once without a synchronisation. The one exception: bfloat16 tokens from
  NumPy input are a torch CPU tensor (NumPy has no bfloat16; uint16 bits only when asked with out=).
  dtype= is a name ("bfloat16"), a NumPy dtype (np.float16) or a torch dtype (torch.bfloat16);
  executor= "cpu", "cuda", "cuda:N" or a torch.device.
Errors are pxvm.Error subclasses named after the library's classes, with pxrun's words; a wrong
dtype is a TypeError, a wrong shape, layout or device a ValueError (UsageError).

Modules (every public name is importable from pxvm itself): errors (Error and one subclass per
class of the library's errors), image (load_image), program (Program, Slot, assemble), runner
(Runner, pyramid), ragged (Ragged, dynamic_size, canonical_policy: policy "dynamic"), data
(load_shard, iter_shards, ShardDataset, ImageFolderDataset: pxbatch shards and folders), stream
(Stream), programs (path, names: the shipped programs), tokens (Runner.tokens and Runner.positions:
tensors for models), seeds (generate_mipmaps,
TexturePyramid, PersistentTexture, create_persistent, update_partial, update_mipmaps_incremental:
the seeds' API over programs); _capi (the ctypes binding) and _arrays (arrays and tensors as the
library's views) are internal.
"""
from . import _capi
from .errors import (Error, Malformed, InvalidProgram, Unlinkable, Trap, PxIOError, UsageError, Unavailable,
                     AssemblyError, PlanError)
from .image import load_image
from .program import Slot, Program, assemble
from .stream import Stream
from .ragged import Ragged, dynamic_size, canonical_policy
from . import programs  # noqa: F401 (pxvm.programs.path("foveate273"): the shipped programs)
from . import data  # noqa: F401 (pxvm.data.ShardDataset, ImageFolderDataset: where torch imports)
from .data import load_shard, iter_shards
from .runner import Runner, pyramid, PXVM_FIX_REGS, PXVM_GEOM_INTS  # noqa: F401 (the constants: importable, as before)
from .tokens import Positions, token_format
from . import seeds
from . import video  # noqa: F401 (pxvm.video.frames, info: video files)
from . import processors  # noqa: F401 (pxvm.processors.Qwen2VLImageProcessor, CLIP..., Siglip...)
from . import autograd  # noqa: F401 (pxvm.autograd.tokens: tokens with a deterministic backward)
from .seeds import (generate_mipmaps, TexturePyramid, PersistentTexture, create_persistent, update_partial,
                    update_mipmaps_incremental)

#: the loaded library's version, e.g. "1.0.0"
library_version: str = _capi.lib.pxvm_version().decode()
#: where the library was loaded from: PXVM_LIB, the copy inside the package, a source checkout's build/, or
#: "libpxvm.so.1" on the loader's path (in that order: _capi.py)
library_path: str = _capi.library_path
__version__ = library_version

__all__ = ["Program", "Slot", "Runner", "Stream", "assemble", "load_image", "pyramid", "Error", "Malformed",
           "InvalidProgram", "Unlinkable", "Trap", "PxIOError", "UsageError", "Unavailable", "AssemblyError",
           "PlanError", "Ragged", "dynamic_size", "canonical_policy", "load_shard",
           "iter_shards", "library_version", "library_path", "Positions", "token_format", "generate_mipmaps",
           "TexturePyramid", "PersistentTexture", "create_persistent", "update_partial", "update_mipmaps_incremental"]


def __getattr__(name):
    """pxvm.ShardDataset and pxvm.ImageFolderDataset, pxvm.data's (made on first use, torch imported
    then: an ImportError where it is not installed), as the data module's example writes them."""
    if name in ("ShardDataset", "ImageFolderDataset"):
        return getattr(data, name)
    raise AttributeError("module 'pxvm' has no attribute %r" % name)
