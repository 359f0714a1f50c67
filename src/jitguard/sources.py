"""Sources: where a guarded value comes from (``L['x']``, ``G['cfg']``, chains of
attributes and items below them), each a small frozen value object (docs: API, Sources).

Re-exports only; the code lives in ``jitguard._src``. Every name here is also importable
from ``jitguard`` itself, the same object ([Note: Public submodules] in ``jitguard``).

May import: jitguard._src.
"""

from ._src.guards import ChainedSource as ChainedSource
from ._src.guards import Source as Source
from ._src.sources import AttrSource as AttrSource
from ._src.sources import BackwardStateSource as BackwardStateSource
from ._src.sources import CellContentsSource as CellContentsSource
from ._src.sources import ClosureSource as ClosureSource
from ._src.sources import CodeSource as CodeSource
from ._src.sources import ConstantSource as ConstantSource
from ._src.sources import ConstDictKeySource as ConstDictKeySource
from ._src.sources import DefaultsSource as DefaultsSource
from ._src.sources import EphemeralSource as EphemeralSource
from ._src.sources import FSDPNNModuleSource as FSDPNNModuleSource
from ._src.sources import GetItemSource as GetItemSource
from ._src.sources import GlobalSource as GlobalSource
from ._src.sources import GlobalStateSource as GlobalStateSource
from ._src.sources import LocalSource as LocalSource
from ._src.sources import NNModuleSource as NNModuleSource
from ._src.sources import RandomValueSource as RandomValueSource
from ._src.sources import ShapeEnvSource as ShapeEnvSource
from ._src.sources import SyntheticLocalSource as SyntheticLocalSource
from ._src.sources import TensorProperty as TensorProperty
from ._src.sources import TensorPropertySource as TensorPropertySource
from ._src.sources import TypeSource as TypeSource
from ._src.sources import UnspecializedBuiltinNNModuleSource as UnspecializedBuiltinNNModuleSource
from ._src.sources import UnspecializedNNModuleSource as UnspecializedNNModuleSource
from ._src.sources import WeakRefCallSource as WeakRefCallSource

__all__ = [
    "AttrSource",
    "BackwardStateSource",
    "CellContentsSource",
    "ChainedSource",
    "ClosureSource",
    "CodeSource",
    "ConstDictKeySource",
    "ConstantSource",
    "DefaultsSource",
    "EphemeralSource",
    "FSDPNNModuleSource",
    "GetItemSource",
    "GlobalSource",
    "GlobalStateSource",
    "LocalSource",
    "NNModuleSource",
    "RandomValueSource",
    "ShapeEnvSource",
    "Source",
    "SyntheticLocalSource",
    "TensorProperty",
    "TensorPropertySource",
    "TypeSource",
    "UnspecializedBuiltinNNModuleSource",
    "UnspecializedNNModuleSource",
    "WeakRefCallSource",
]
