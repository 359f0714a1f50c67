"""jitguard's torch integration, public names: ``compile`` (TorchDynamo's capture, jitguard's
guards), tensor guards, module guards and their sources.

Importing ``jitguard.torch`` imports torch and installs the integration (``import jitguard``
alone never imports torch; see [Note: Lazy integrations]). The code lives in
``jitguard._src.torch``.

    import jitguard.torch as jgt

    @jgt.compile
    def f(x):
        return x.sin() + 1
"""

from .._src.torch.aliasing import no_tensor_aliasing_guard as no_tensor_aliasing_guard
from .._src.torch.aliasing import overlapping_indices as overlapping_indices
from .._src.torch.api import NN_MODULE_GLOBAL_HOOKS as NN_MODULE_GLOBAL_HOOKS
from .._src.torch.api import NN_MODULE_STATE as NN_MODULE_STATE
from .._src.torch.api import NO_TENSOR_ALIASING as NO_TENSOR_ALIASING
from .._src.torch.api import TENSOR_MATCH as TENSOR_MATCH
from .._src.torch.api import TENSORS_MATCH as TENSORS_MATCH
from .._src.torch.api import TORCH_GLOBAL_STATE as TORCH_GLOBAL_STATE
from .._src.torch.api import TORCH_GUARD_TREE as TORCH_GUARD_TREE
from .._src.torch.api import capture_info as capture_info
from .._src.torch.api import tensor_match as tensor_match
from .._src.torch.compile import compile as compile
from .._src.torch.compiled import EntryInfo as EntryInfo
from .._src.torch.dynamo_cache import BackendCompilerFailed as BackendCompilerFailed
from .._src.torch.module import buffer_source as buffer_source
from .._src.torch.module import module_guards as module_guards
from .._src.torch.module import module_path_source as module_path_source
from .._src.torch.module import parameter_source as parameter_source
from .._src.torch.module import submodule_source as submodule_source
from .._src.torch.module import training_source as training_source
from .._src.torch.state import default_device as default_device
from .._src.torch.state import torch_function_mode_types as torch_function_mode_types
from .._src.torch.tensor_match import dtype_name as dtype_name

__all__ = [
    "BackendCompilerFailed",
    "EntryInfo",
    "NN_MODULE_GLOBAL_HOOKS",
    "NN_MODULE_STATE",
    "NO_TENSOR_ALIASING",
    "TENSORS_MATCH",
    "TENSOR_MATCH",
    "TORCH_GLOBAL_STATE",
    "TORCH_GUARD_TREE",
    "buffer_source",
    "capture_info",
    "compile",
    "default_device",
    "dtype_name",
    "module_guards",
    "module_path_source",
    "no_tensor_aliasing_guard",
    "overlapping_indices",
    "parameter_source",
    "submodule_source",
    "tensor_match",
    "torch_function_mode_types",
    "training_source",
]
