#include "analyze/frame_folding.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace gpumem::analyze {

namespace {
    // docs/stacks.md §Folding patterns lists these in this order; keep the two in step.
    constexpr std::array kRules = {
        // Recorded by PyTorch's unwinder for every block (torch/csrc/profiler/unwind, memory_snapshot.cpp).
        FoldRule { "torch::unwind::*", "", "unwinder" },
        FoldRule { "torch::CapturedTraceback::*", "", "unwinder" },
        FoldRule { "*gather_with_cpp*", "", "unwinder" },
        FoldRule { "torch::cuda::(anonymous namespace)::gather*", "", "unwinder" },
        // c10/cuda/CUDACachingAllocator.cpp and the rest of c10 (dispatcher, boxed kernels, allocator).
        FoldRule { "c10::cuda::CUDACachingAllocator::*", "", "caching allocator" },
        FoldRule { "*DeviceCachingAllocator::*", "", "caching allocator" },
        FoldRule { "*NativeCachingAllocator::*", "", "caching allocator" },
        FoldRule { "c10::*", "", "c10 runtime and dispatcher" },
        // ATen's dispatcher and the generated wrappers between an operator call and its kernel.
        FoldRule { "at::_ops::*::redispatch", "", "dispatcher" },
        FoldRule { "at::redispatch::*", "", "dispatcher" },
        FoldRule { "at::(anonymous namespace)::*wrapper_*", "", "dispatcher" },
        FoldRule { "at::Tensor::*", "", "dispatcher" },
        FoldRule { "torch::autograd::VariableType::*", "", "dispatcher" },
        FoldRule { "torch::ADInplaceOrView::*", "", "dispatcher" },
        FoldRule { "torch::TraceType::*", "", "dispatcher" },
        FoldRule { "torch::autograd::THPVariable_*", "", "Python binding" },
        FoldRule { "torch::autograd::TypeError_to_NotImplemented_*", "", "Python binding" },
        FoldRule { "torch::autograd::dispatch_*", "", "Python binding" },
        FoldRule { "*THPFunction_apply*", "", "Python binding" },
        FoldRule { "pybind11::*", "", "Python binding" },
        // Tensor creation and output allocation plumbing.
        FoldRule { "at::detail::*", "", "tensor creation" },
        FoldRule { "at::empty*", "", "tensor creation" },
        FoldRule { "at::_ops::empty*", "", "tensor creation" },
        FoldRule { "at::native::empty*", "", "tensor creation" },
        FoldRule { "at::native::resize_*", "", "tensor creation" },
        FoldRule { "at::meta::*", "", "tensor creation" },
        FoldRule { "at::TensorIteratorBase::*", "", "tensor creation" },
        FoldRule { "at::TensorIterator::*", "", "tensor creation" },
        FoldRule { "*set_output_raw_strided*", "", "tensor creation" },
        FoldRule { "at::(anonymous namespace)::create_out*", "", "tensor creation" },
        FoldRule { "torch::dynamo::*empty_strided*", "", "tensor creation" },
        // torch/csrc/autograd/engine.cpp: the same frames under every backward op.
        FoldRule { "torch::autograd::Engine::*", "", "autograd engine" },
        FoldRule { "torch::autograd::Node::*", "", "autograd engine" },
        FoldRule { "torch::autograd::call_function*", "", "autograd engine" },
        FoldRule { "torch::autograd::validate_outputs*", "", "autograd engine" },
        FoldRule { "torch::autograd::python::*", "", "autograd engine" },
        // CPython and torch.compile's frame evaluation hook.
        FoldRule { "_Py*", "", "interpreter" },
        FoldRule { "Py*", "", "interpreter" },
        FoldRule { "dynamo_*", "", "interpreter" },
        FoldRule { "method_vectorcall*", "", "interpreter" },
        FoldRule { "cfunction_*", "", "interpreter" },
        // The C++ runtime and thread start-up.
        FoldRule { "std::*", "", "C++ runtime" },
        FoldRule { "__gnu_cxx::*", "", "C++ runtime" },
        FoldRule { "execute_native_thread_routine", "", "thread start-up" },
        FoldRule { "start_thread", "", "thread start-up" },
        FoldRule { "pthread_*", "", "thread start-up" },
        FoldRule { "clone", "", "thread start-up" },
        FoldRule { "clone3", "", "thread start-up" },
        FoldRule { "__libc_start*", "", "thread start-up" },
        FoldRule { "_start", "", "thread start-up" },
        FoldRule { "??", "", "unnamed" },
        FoldRule { "", "", "unnamed" },
        // Python frames of torch's own call plumbing: nn.Module.__call__, torch.compile and AOT autograd
        // wrappers, autograd.Function.apply (the model's frames on either side stay).
        FoldRule { "_call_impl", "*torch/nn/modules/module.py", "nn.Module call" },
        FoldRule { "_wrapped_call_impl", "*torch/nn/modules/module.py", "nn.Module call" },
        FoldRule { "*", "*torch/_dynamo/eval_frame.py", "torch.compile wrapper" },
        FoldRule { "*", "*torch/_functorch/_aot_autograd/*", "torch.compile wrapper" },
        FoldRule { "*", "*torch/_functorch/aot_autograd.py", "torch.compile wrapper" },
        FoldRule { "*", "*torch/_inductor/output_code.py", "torch.compile wrapper" },
        FoldRule { "run", "*torch/_inductor/utils.py", "torch.compile wrapper" },
        FoldRule { "apply", "*torch/autograd/function.py", "autograd.Function call" },
    };

    std::string slashes(std::string_view file)
    {
        std::string f(file);
        std::replace(f.begin(), f.end(), '\\', '/');
        return f;
    }
} // namespace

std::span<const FoldRule> foldRules() { return kRules; }

bool globMatch(std::string_view pattern, std::string_view text)
{
    // Greedy match with one backtrack point (the last '*'): linear for '*'-only patterns.
    std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
    while (t < text.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = t;
        } else if (p < pattern.size() && pattern[p] == text[t]) {
            ++p;
            ++t;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            t = ++mark;
        } else
            return false;
    }
    while (p < pattern.size() && pattern[p] == '*')
        ++p;
    return p == pattern.size();
}

bool isPythonFrame(const Trace& trace, const Frame& frame) { return trace.str(frame.file).ends_with(".py"); }

const FoldRule* foldRuleFor(const Trace& trace, const Frame& frame)
{
    const std::string function = qualifiedFunction(cleanFrameName(trace.str(frame.name)));
    const bool python = isPythonFrame(trace, frame);
    std::string file;
    for (const auto& rule : kRules) {
        // C++ patterns (no file) never fold a Python frame: "Py*" is the interpreter, not a function "Py_init" in a .py file.
        if (rule.file.empty() == python)
            continue;
        if (!globMatch(rule.function, function))
            continue;
        if (!rule.file.empty()) {
            if (file.empty())
                file = slashes(trace.str(frame.file));
            if (!globMatch(rule.file, file))
                continue;
        }
        return &rule;
    }
    return nullptr;
}

std::vector<FrameId> foldStack(const Trace& trace, std::span<const FrameId> frames, const FoldOptions& options)
{
    std::vector<FrameId> out;
    if (frames.empty())
        return out;
    const auto all = trace.frames();
    auto frameAt = [&](std::size_t i) -> const Frame& { return all[frames[i]]; };
    if (options.allFrames) {
        out.assign(frames.rbegin(), frames.rend());
        return out;
    }
    std::size_t innermostPython = frames.size();
    for (std::size_t i = 0; i < frames.size() && innermostPython == frames.size(); ++i)
        if (isPythonFrame(trace, frameAt(i)))
            innermostPython = i;
    // Outermost first: walk the innermost-first list backwards. With Python frames, the C++ frames above
    // the innermost Python frame (interpreter, bindings, main) go; below it, those no pattern folds stay.
    for (std::size_t k = frames.size(); k-- > 0;) {
        const Frame& f = frameAt(k);
        const bool python = isPythonFrame(trace, f);
        if (!python && innermostPython < frames.size() && k > innermostPython)
            continue;
        if (!foldRuleFor(trace, f))
            out.push_back(frames[k]);
    }
    if (out.empty()) // everything folded: keep the frame that says most (the innermost Python one, else the innermost)
        out.push_back(frames[innermostPython < frames.size() ? innermostPython : 0]);
    return out;
}

StackFolder::StackFolder(const Trace& trace, FoldOptions options)
    : m_trace(trace)
    , m_options(options)
{
}

std::span<const FrameId> StackFolder::stack(SiteId site)
{
    if (site == 0 || site >= m_trace.siteCount())
        return {};
    auto it = m_cache.find(site);
    if (it == m_cache.end())
        it = m_cache.emplace(site, foldStack(m_trace, m_trace.siteFrames(site), m_options)).first;
    return it->second;
}

std::string foldedStackText(const Trace& trace, SiteId site, const FoldOptions& options)
{
    if (site == 0 || site >= trace.siteCount())
        return {};
    std::string s;
    for (FrameId f : foldStack(trace, trace.siteFrames(site), options))
        s += (s.empty() ? "" : " → ") + stackFrameLabel(trace, trace.frames()[f]);
    return s;
}

std::string cleanFrameName(std::string_view name)
{
    std::string s(name);
    for (auto at = s.find(" at 0x"); at != std::string::npos; at = s.find(" at 0x", at)) {
        auto end = at + 6;
        while (end < s.size() && std::isxdigit(static_cast<unsigned char>(s[end])))
            ++end;
        s.erase(at, end - at);
    }
    return s;
}

std::string qualifiedFunction(std::string_view name)
{
    constexpr std::string_view kAnon = "(anonymous namespace)";
    std::string out;
    int depth = 0; // template angle brackets
    for (std::size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        if (c == '(' && name.substr(i).starts_with(kAnon)) {
            out += kAnon;
            i += kAnon.size() - 1;
            continue;
        }
        if (c == '(' && depth == 0)
            break;
        if (c == '<')
            ++depth;
        else if (c == '>' && depth > 0)
            --depth;
        else if (c == ' ' && depth == 0) { // a return type before the name ("void ", "at::TensorBase ")
            out.clear();
            continue;
        }
        out += c;
    }
    return out;
}

namespace {
    // " (file:line)" with the file's base name (POSIX or Windows separators), "" without a file.
    std::string whereText(const Trace& trace, const Frame& f)
    {
        auto file = trace.str(f.file);
        if (file.empty() || file == "??")
            return {};
        if (auto slash = file.find_last_of("/\\"); slash != std::string_view::npos)
            file.remove_prefix(slash + 1);
        std::string s = " (" + std::string(file);
        if (f.line)
            s += ":" + std::to_string(f.line);
        return s + ")";
    }
} // namespace

std::string frameText(const Trace& trace, const Frame& f) { return cleanFrameName(trace.str(f.name)) + whereText(trace, f); }

std::string stackFrameLabel(const Trace& trace, const Frame& f)
{
    if (isPythonFrame(trace, f))
        return frameText(trace, f);
    const std::string clean = cleanFrameName(trace.str(f.name));
    std::string q = qualifiedFunction(clean);
    if (q.empty()) // "(anonymous namespace)::f" parses; a name that is all argument list does not
        q = clean;
    return q + whereText(trace, f);
}

} // namespace gpumem::analyze
