#pragma once
// The launcher behind `gpumem record [-o DIR] [--annotate-modules] -- CMD ARGS…`: runs a command
// with the tracer attached and reports the trace files it wrote. It sets CUDA_INJECTION64_PATH
// and NVTX_INJECTION64_PATH to libgpumem_tracer.so and GPUMEM_TRACE_DIR to the output folder;
// with annotateModules it also puts tracer/python first on PYTHONPATH (its sitecustomize adds NVTX
// ranges per nn.Module, docs/tracer.md). The child runs in the same process group; SIGINT,
// SIGTERM, SIGHUP and SIGQUIT sent to gpumem by another process are forwarded to it (a terminal's
// Ctrl-C already reaches both). Not thread-safe (installs signal handlers while it runs).
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace gpumem::tracer {

struct RecordOptions {
    std::vector<std::string> command; // argv; command[0] is looked up in PATH
    std::string outputDir;            // where the trace files go; "" = the current directory (created if missing)
    bool annotateModules = false;
    std::string tracerLibrary;        // "" = locateTracerLibrary()
    std::string pythonHelperDir;      // "" = locatePythonHelperDir()
    std::ostream* listing = nullptr;  // where the list of files written goes (the verb passes std::cout); nullptr = nowhere
    std::ostream* diagnostics = nullptr; // warnings ("no trace file was written"); nullptr = std::cerr
};

// Runs options.command traced and waits for it. Returns its exit status, or 128 + the signal
// number when a signal ended it (the shell's convention), or 127 when it could not be started.
// Throws UsageError for an empty command and Error when the tracer library cannot be found or
// the output folder cannot be created.
int runRecorded(const RecordOptions& options);

// The tracer library, first found of: $GPUMEM_TRACER_LIBRARY; libgpumem_tracer.so next to the
// running executable; the install's library folder relative to it (GPUMEM_LIBDIR_FROM_BINDIR, the
// path from CMAKE_INSTALL_BINDIR to CMAKE_INSTALL_LIBDIR, "../lib" by default), so an installed
// tree works wherever it is unpacked (DESTDIR, dpkg -x); the build tree's library (path baked in at
// build time); the install prefix's lib directory. Returns "" if none exists.
std::string locateTracerLibrary();
// The folder holding sitecustomize.py for --annotate-modules: $GPUMEM_PYTHON_HELPER_DIR; the
// install's share/gpumem/python relative to the executable (GPUMEM_PYTHON_HELPER_FROM_BINDIR); the
// source tree's tracer/python (baked in at build time). Returns "" if none exists.
std::string locatePythonHelperDir();

// A listing of the .gmt files in `dir` (path → modification time and size), to tell afterwards
// which files a run created or changed (file times are too coarse to compare with a clock).
using TraceFileState = std::map<std::string, std::pair<long long, long long>>;
TraceFileState traceFiles(const std::string& dir);
// The files of `after` that are not in `before` or differ from it, sorted.
std::vector<std::string> changedTraceFiles(const TraceFileState& before, const TraceFileState& after);

} // namespace gpumem::tracer
