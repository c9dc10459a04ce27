"""Loaded by Python at start-up when `gpumem record --annotate-modules` put this folder first on
PYTHONPATH. Installs gpumem_annotate's module hooks once the program imports torch (importing
torch here would slow every Python process the job starts), then runs the sitecustomize this one
shadows, if any."""

import importlib
import importlib.abc
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Wraps torch's loader so gpumem_annotate.install() runs right after `import torch`."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec("torch")
        finally:
            pass
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_install(module):
            exec_module(module)
            try:
                import gpumem_annotate
                gpumem_annotate.install()
            except Exception as e:
                print("gpumem annotate: not installed: %r" % (e,), file=sys.stderr)

        loader.exec_module = exec_and_install
        return spec


if os.environ.get("GPUMEM_ANNOTATE_MODULES", "1") != "0":
    if "torch" in sys.modules:
        import gpumem_annotate
        gpumem_annotate.install()
    else:
        sys.meta_path.insert(0, _AfterTorchImport())


def _chain():
    """Runs the next sitecustomize on sys.path (the one this file shadows)."""
    saved = list(sys.path)
    me = sys.modules.get("sitecustomize")
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
        del sys.modules["sitecustomize"]
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        sys.modules["sitecustomize"] = me


_chain()
