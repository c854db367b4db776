"""Import-only ``sgl_kernel`` stand-in for qla-serve's SGLang adapter test on the H200.

SGLang 0.5.23's CUDA kernels (sgl_kernel) are built for torch 2.14; the H200 image has torch 2.11.
The adapter test calls only qla-serve's op and SGLang's pure-torch reference, but importing SGLang
on CUDA touches sgl_kernel names at import time. Every name (and submodule) exists here; nothing
computes. Never install this next to a real SGLang server.
"""
import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+qla-stub"


class _AnyMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any


class _Any(metaclass=_AnyMeta):
    """Stands for any sgl_kernel object: attributes, calls and subclassing all give stubs."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Any()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Any
