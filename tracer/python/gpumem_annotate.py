"""NVTX ranges named by nn.Module path, for gpumem's tracer (docs/tracer.md, "Module ranges").

`gpumem record --annotate-modules` puts this folder first on PYTHONPATH; its sitecustomize.py
calls install() as soon as the program imports torch, so unmodified training scripts get:

  * forward:  a range "fwd:mod:<path>" around every module call, pushed by a global forward
    pre-hook and popped by a global forward hook on the calling thread;
  * backward: a range "bwd:mod:<path>" per module call, pushed when the first gradient of the
    module's outputs arrives and popped once the gradients of all its inputs and parameters that
    require grad were computed — i.e. around the module's backward, on the autograd thread.

<path> is the root module's class name followed by the attribute path that named_modules() gives
("Net", "Net.encoder.0"). The backward side uses tensor gradient hooks only (no module backward
hooks), so it works on torch 1.13 and 2.x and does not break in-place modules such as
nn.ReLU(inplace=True); modules whose output is one of their inputs (identity, in-place) get no
backward range. The tracer attaches every CUDA allocation to the innermost open range of the
thread that made it.

The NVTX calls go through torch.cuda.nvtx by default; set_backend(push, pop) replaces them (tests
record the calls with a stand-in on CPU-only torch). Nothing here raises into the program: a
failure in a hook is reported once on stderr and the hooks are removed.
"""

import sys
import threading
import weakref

__all__ = ["install", "uninstall", "set_backend", "installed"]

_push = None
_pop = None
_handles = []
_paths = weakref.WeakKeyDictionary()  # module -> path
_local = threading.local()             # .stack: modules whose forward is running on this thread
_MAX_PENDING = 10000                   # pending backward ends kept per tensor


def set_backend(push, pop):
    """Use push(name) / pop() instead of torch.cuda.nvtx.range_push / range_pop."""
    global _push, _pop
    _push, _pop = push, pop


def installed():
    return bool(_handles)


def _nvtx_push(name):
    if _push is None:
        import torch.cuda.nvtx as nvtx
        set_backend(nvtx.range_push, nvtx.range_pop)
    _push(name)


def _nvtx_pop():
    if _pop is None:
        import torch.cuda.nvtx as nvtx
        set_backend(nvtx.range_push, nvtx.range_pop)
    _pop()


def _stack():
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def _path(module, parent):
    p = _paths.get(module)
    if p is not None:
        return p
    if parent is None:
        root = type(module).__name__
        for name, m in module.named_modules():
            _paths.setdefault(m, root + "." + name if name else root)
        return _paths[module]
    # A module called inside another one without being its registered child.
    p = _paths.get(parent, type(parent).__name__) + "." + type(module).__name__
    _paths[module] = p
    return p


def _tensors(value, out):
    import torch
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, out)
    return out


class _Dispatch:
    """One gradient hook per tensor: first the ends of modules that consumed the tensor (their
    backward is over once this gradient exists), then the starts of the module that produced it."""

    __slots__ = ("ends", "starts")

    def __init__(self):
        self.ends = []
        self.starts = []

    def __call__(self, grad):
        ends, starts = self.ends, self.starts
        self.ends, self.starts = [], []
        for f in ends:
            f()
        for f in starts:
            f()
        return None  # never replace the gradient


def _dispatch(tensor):
    d = getattr(tensor, "_gpumem_dispatch", None)
    if d is None:
        d = _Dispatch()
        tensor.register_hook(d)
        tensor._gpumem_dispatch = d
    return d


class _BackwardRange:
    __slots__ = ("name", "waiting", "open")

    def __init__(self, name, waiting):
        self.name = name
        self.waiting = waiting
        self.open = False

    def start(self):
        if not self.open and self.waiting > 0:
            self.open = True
            _nvtx_push(self.name)

    def one_done(self):
        self.waiting -= 1
        if self.waiting == 0 and self.open:
            self.open = False
            _nvtx_pop()


def _guard(fn):
    def hook(*args):
        try:
            fn(*args)
        except Exception as e:  # never break the program
            print("gpumem annotate: module hooks removed after an error: %r" % (e,), file=sys.stderr)
            uninstall()
        return None  # hooks must return None, or torch replaces inputs/outputs
    return hook


def _forward_pre(module, inputs):
    stack = _stack()
    path = _path(module, stack[-1] if stack else None)
    stack.append(module)
    _nvtx_push("fwd:mod:" + path)


def _forward_post(module, inputs, output):
    import torch
    stack = _stack()
    if module not in stack:
        return
    while stack:  # unwinds ranges of children whose forward raised
        top = stack.pop()
        _nvtx_pop()
        if top is module:
            break
    if not torch.is_grad_enabled():
        return
    outs = [t for t in _tensors(output, []) if t.requires_grad]
    if not outs:
        return
    ins = [t for t in _tensors(inputs, []) if t.requires_grad]
    if any(o is i for o in outs for i in ins):
        return  # identity or in-place module: no backward of its own
    ends = ins + [p for p in module.parameters() if p.requires_grad]
    if not ends:
        return
    r = _BackwardRange("bwd:mod:" + _paths.get(module, type(module).__name__), len(ends))
    for t in outs:
        _dispatch(t).starts.insert(0, r.start)  # enclosing modules register later but start first
    for t in ends:
        d = _dispatch(t)
        if len(d.ends) >= _MAX_PENDING:
            # Forwards with grad enabled but no backward (evaluation without no_grad) would
            # otherwise grow a parameter's list forever; those ranges never started anyway.
            d.ends = [f for f in d.ends if f.__self__.open]
        d.ends.append(r.one_done)


def install():
    """Registers the global module hooks (idempotent). Returns True if they are installed."""
    if _handles:
        return True
    import torch.nn.modules.module as m
    _handles.append(m.register_module_forward_pre_hook(_guard(_forward_pre)))
    _handles.append(m.register_module_forward_hook(_guard(_forward_post)))
    return True


def uninstall():
    while _handles:
        _handles.pop().remove()
